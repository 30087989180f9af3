"""The problem file's JSON Schema (`planner schema`): it accepts every problem file the planner
accepts (problems/ and tests/fixtures/), refuses what the planner refuses for a type, a range,
a choice or an unknown key, reads the strings the planner reads as numbers (quoted numbers,
`2T`, `$3M`) and choices in any case, and the committed copy (docs/problem.schema.json) is
what the command prints."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.base.units import count_value, money_value
from planner.base.yamlio import load_yaml, validate
from planner.cli import cli
from planner.cli.schema import (
    COUNT_TEXT,
    FLOAT_TEXT,
    INT_TEXT,
    MONEY_TEXT,
    MONTH_TEXT,
    problem_schema,
    schema_text,
)
from planner.inputs.months import parse_month
from planner.inputs.schema import Problem
from planner.inputs.strict import Strict

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "docs" / "problem.schema.json"
SCHEMA = problem_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

# Files the planner refuses for a reason a JSON Schema cannot state, each with that reason.
SCHEMA_CANNOT_SAY = {
    "deadline_after_horizon.yaml": "a date compared with the horizon (another field)",
    "deadline_before_start.yaml": "two dates compared",
    "serve_outside_horizon.yaml": "a date compared with the horizon (another field)",
    "nan_price.yaml": "YAML's .nan: JSON has no NaN, and NaN compares false with any bound",
}


def _problem_files() -> list[Path]:
    files = sorted((ROOT / "problems").glob("*.yaml"))
    return files + sorted((ROOT / "tests" / "fixtures").rglob("*.yaml"))


def _yaml_files() -> list[Path]:
    """The problem files the planner can read as YAML (the fixtures of YAML errors are not
    problems a schema could judge: they are checked by tests/test_errors.py)."""
    out = []
    for path in _problem_files():
        try:
            load_yaml(path)
        except InputError:
            continue
        out.append(path)
    return out


def test_only_fixtures_of_yaml_errors_are_left_out():
    left = {p.name for p in set(_problem_files()) - set(_yaml_files())}
    assert left == {"bad_indent.yaml", "duplicate_key.yaml", "python_tag.yaml", "syntax_error.yaml"}


def _planner_accepts(data: object) -> bool:
    try:
        Problem.model_validate(data)
    except (ValidationError, ValueError):
        return False
    return True


def _schema_accepts(data: object) -> bool:
    return VALIDATOR.is_valid(data)


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_problem_file_the_planner_accepts_the_schema_accepts(path):
    doc = load_yaml(path)  # as the planner reads it (YAML 1.1: `2e12` is text)
    try:
        validate(Problem, doc, "problem file")
        accepted = True
    except InputError:
        accepted = False
    errors = [
        f"{list(e.absolute_path)}: {e.message[:200]}" for e in VALIDATOR.iter_errors(doc.data)
    ]
    if accepted:
        assert not errors, errors
    elif path.name in SCHEMA_CANNOT_SAY:
        assert not errors  # if the schema learns to say it, drop the entry
    else:
        assert errors, f"{path.name}: the planner refuses it and the schema accepts it"


def test_problem_files_carry_the_schema_comment():
    for path in sorted((ROOT / "problems").glob("*.yaml")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first == "# yaml-language-server: $schema=../docs/problem.schema.json", path.name


def test_the_committed_schema_is_what_planner_schema_prints():
    r = CliRunner().invoke(cli, ["schema"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == SCHEMA
    assert COMMITTED.read_text(encoding="utf-8") == schema_text(), (
        "docs/problem.schema.json is stale: run `planner schema -o docs/problem.schema.json`"
    )


def test_planner_schema_writes_a_file(tmp_path):
    out = tmp_path / "s.json"
    r = CliRunner().invoke(cli, ["schema", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text()) == SCHEMA
    r = CliRunner().invoke(cli, ["schema", "-o", str(tmp_path)])
    assert r.exit_code == 2  # a directory is not a file


REFERENCE = yaml.safe_load((ROOT / "problems" / "2m_budget.yaml").read_text())


def _with(path: str, value: object, data: dict | None = None) -> dict:
    """A copy of the reference problem with ``value`` at the dotted ``path`` (``.0`` indexes)."""
    out = copy.deepcopy(data or REFERENCE)
    *head, last = path.split(".")
    node = out
    for k in head:
        node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def _without(path: str, data: dict | None = None) -> dict:
    out = copy.deepcopy(data or REFERENCE)
    *head, last = path.split(".")
    node = out
    for k in head:
        node = node[int(k)] if k.isdigit() else node[k]
    del node[last]
    return out


CHAT = "workloads.serve.0"
TRAIN = "workloads.train.0"

# (change, what it is): each is refused by the planner and by the schema.
REFUSED = [
    (_with("budgte", {"capex_usd": 1}), "a typo'd top-level key"),
    (_with(f"{CHAT}.trafic", {}), "a typo'd nested key"),
    (_with("site.pue", 0.5), "below a minimum"),
    (_with("site.pue", 4), "above a maximum"),
    (_with("budget.capex_usd", -1), "a negative amount"),
    (_with("budget.capex_usd", True), "a boolean for a number"),
    (_with("site.consumer_gpus_allowed", 1), "a number for a flag"),
    (_with(f"{TRAIN}.method", "dpo"), "an unknown choice"),
    (_with(f"{TRAIN}.tokens", "lots"), "a count that is not a count"),
    (_with(f"{TRAIN}.tokens", 2e16), "a count above its range"),
    (_with("budget.capex_usd", "a lot"), "an amount that is not an amount"),
    (_with("horizon.start", "2027-13"), "a month that is not a month"),
    (_with("horizon.start", "1899-12"), "a year out of range"),
    (_with("horizon.months", 12.5), "a fraction for a whole number"),
    (_with("horizon.months", 121), "too many months"),
    (_with(f"{CHAT}.name", ""), "an empty name"),
    (_with(f"{CHAT}.name", "x" * 101), "a name too long"),
    (_with(f"{CHAT}.requests", [{"name": "a", "prompt": 1, "output": 1, "share": 1}]), "tokens and requests"),
    (_without(f"{CHAT}.tokens"), "neither tokens nor requests"),
    (_with("risk", {"measure": "expected", "alpha": 0.5}), "alpha without cvar"),
    (_with("risk", {"measure": "cvar"}), "risk without scenarios"),
    (_with("workloads", {"train": [], "serve": []}), "no workloads"),
    (_with("overrides", {"gpus": {"h100-sxm": {"tdp_w": 50_000}}}), "a GPU figure out of range"),
    (_with("offers.extra", [{"committed": True}]), "a field only the planner writes"),
    (_with("market", {"lead_months": "2"}), "a quoted number where only a number is read"),
    (_with("scenarios", [{"name": "a", "probability": 1, "set": {"power_price": "0.2"}}]), "text in a scenario's set"),
    (_with("fleet", {"owned": [{"gpu": "h100-sxm", "count": 8}]}), "neither bought nor arrives"),
    (_without("site"), "a required section missing"),
    (_with("offers.discounts", {"aws": 1.0}), "a discount of 100 %"),
    (_with("offers.discounts", {"aws": True}), "a boolean discount"),
]  # fmt: skip


@pytest.mark.parametrize("data, what", REFUSED, ids=[w for _, w in REFUSED])
def test_what_the_planner_refuses_the_schema_refuses(data, what):
    assert not _planner_accepts(data), f"the planner accepts {what}: fix the case"
    assert not _schema_accepts(data), f"the schema accepts {what}"


ACCEPTED = [
    (_with(f"{TRAIN}.tokens", "2T"), "a count with a suffix"),
    (_with(f"{TRAIN}.tokens", "300B"), "another suffix"),
    (_with(f"{TRAIN}.tokens", "2e12"), "YAML 1.1's text exponent"),
    (_with("budget.capex_usd", "$2M"), "money with a dollar and a suffix"),
    (_with("budget.capex_usd", "2,000,000"), "money with commas"),
    (_with("site.power_usd_per_kwh", "$0.12"), "a money field that is a rate"),
    (_with("site.pue", "1.3"), "a quoted number"),
    (_with("horizon.months", "36"), "a quoted whole number"),
    (_with("horizon.months", 36.0), "a whole number written 36.0"),
    (_with(f"{TRAIN}.method", "LoRA"), "a choice in another case"),
    (_with(f"{CHAT}.precision", "FP8"), "another choice in another case"),
    (_without("site.pue"), "a default left out"),
    (_with("risk", {"measure": "CVaR", "alpha": 0.95}, _with("scenarios", [{"name": "a", "probability": 1}])), "cvar in any case with alpha"),
    (_with(f"{CHAT}.requests", [{"name": "s", "prompt": [1, 256], "output": 100, "share": 1}], _without(f"{CHAT}.tokens")), "a request mix"),
    (_with("fleet", {"owned": [{"gpu": "h100-sxm", "count": 8, "arrives": "2027-03"}]}), "GPUs on order"),
]  # fmt: skip


@pytest.mark.parametrize("data, what", ACCEPTED, ids=[w for _, w in ACCEPTED])
def test_what_the_planner_accepts_the_schema_accepts(data, what):
    assert _planner_accepts(data), f"the planner refuses {what}: fix the case"
    assert _schema_accepts(data), [e.message for e in VALIDATOR.iter_errors(data)]


def _matches(pattern: str, text: str) -> bool:
    # JSON Schema patterns are ECMA-262; these use only what Python's re reads the same way
    return re.search(pattern, text) is not None


TEXTS = [
    "1", "12", " 12 ", "+12", "-3", "1.5", "1.", ".5", "1e5", "1E-3", "2e12", "1_000", "1,000",
    "12.0", "12.5", "2T", "300b", "1.5 M", "7G", "$3M", "$ 250k", "3 $", "0x10", "inf", "nan",
    "1e", "e5", "T", "", " ", "1__0", "1,,0", "2TB", "--1", "1e1.5", "1_000.5", "_1", "1_",
    "1e1_0", "+.5", "-.5e3", "1.e5", "\t7\t", "1.0_0", ".", "+", "1E+05", "0_1", "1.5_",
    "Infinity", "-inf", "1.0e", "00012", "1.00", "12_3.0", "+0", "1\u00a0",
]  # fmt: skip


def _reads(fn, text: str) -> bool:
    try:
        fn(text)
    except (ValueError, ValidationError):
        return False
    return True


class _F(Strict):  # the base of every input model
    x: float


class _I(Strict):
    x: int


@pytest.mark.parametrize("text", TEXTS)
def test_the_number_patterns_read_what_the_code_reads(text):
    assert _matches(COUNT_TEXT, text) == _reads(count_value, text)
    assert _matches(MONEY_TEXT, text) == _reads(money_value, text)
    assert _matches(FLOAT_TEXT, text) == _reads(lambda t: _F(x=t), text)
    assert _matches(INT_TEXT, text) == _reads(lambda t: _I(x=t), text)


@pytest.mark.parametrize("text", ["2027-01", "1900-12", "2200-01", "2201-01", "2027-1", "27-01", "2027-00", "2027-01-01"])  # fmt: skip
def test_the_month_pattern_reads_what_the_code_reads(text):
    assert _matches(MONTH_TEXT, text) == _reads(parse_month, text)


def _property_paths(schema: dict, node: dict, prefix: str, out: set[str]) -> None:
    """Every property path of the schema (``site.pue``, ``workloads.train[].tokens``, ...)."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].split("/")[-1]]
    for alt in node.get("anyOf", []):
        _property_paths(schema, alt, prefix, out)
    for key, sub in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        _property_paths(schema, sub, path, out)
    if isinstance(node.get("items"), dict):
        _property_paths(schema, node["items"], prefix + "[]", out)
    if isinstance(node.get("additionalProperties"), dict):
        _property_paths(schema, node["additionalProperties"], prefix + ".<id>", out)


def _keywords(node: object, out: set[str]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            out.add(k)
            if k not in ("properties", "$defs", "default"):
                _keywords(v, out)
            elif k != "default":
                for sub in v.values():
                    _keywords(sub, out)
    elif isinstance(node, list):
        for v in node:
            _keywords(v, out)


def test_the_schema_uses_only_json_schema_keywords():
    """A keyword a validator does not know is silently ignored (pydantic once wrote ``ge``)."""
    used: set[str] = set()
    _keywords(SCHEMA, used)
    known = set(jsonschema.Draft202012Validator.VALIDATORS) | {
        "$schema", "$defs", "$comment", "title", "description", "default", "then", "else",
    }  # fmt: skip
    assert used - known == set()


def test_every_field_of_the_models_is_in_the_schema():
    paths: set[str] = set()
    _property_paths(SCHEMA, SCHEMA, "", paths)
    assert {"site.pue", "workloads.train[].tokens", "overrides.gpus.<id>.tdp_w"} <= paths
    assert "offers.extra[].committed" not in paths  # the planner writes it, refused in a file
    for name in Problem.model_fields:
        assert name in paths
