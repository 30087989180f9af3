"""``planner schema [-o FILE]``: the problem file's JSON Schema, for editors and other tools.

The schema is generated from the pydantic models of :mod:`planner.inputs.schema`
(:class:`~planner.inputs.schema.Problem` and every section under it), then amended where the
models accept more, or less, than pydantic's own JSON Schema says:

- numbers may be quoted (pydantic reads ``"1.3"`` as 1.3; PyYAML, as YAML 1.1, reads ``1e5``
  as text), token counts take suffixes (``2T``, ``300B``) and amounts of money ``$250k`` or
  ``3M``, so those fields also accept the strings the planner reads (and only those);
- choices are case-insensitive (``method: LoRA``), months are ``YYYY-MM`` (years 1900-2200),
  GPU figures have the catalog's ranges, token ranges lie within 1..1,000,000;
- rules across fields that a schema can state: one of ``tokens`` or ``requests``, one of
  ``bought`` or ``arrives``, ``alpha``/``weight`` with ``measure: cvar`` only, ``risk`` needs
  ``scenarios``, an inline offer sets none of the planner's own fields.

Rules a schema cannot state (ids known to the catalogs, dates inside the horizon, shares and
probabilities summing to 1, buckets that do not overlap) stay with ``planner solve``, which
names the file, line and field.

>>> s = problem_schema()
>>> s["additionalProperties"], sorted(s["required"])
(False, ['budget', 'horizon', 'name', 'site', 'workloads'])
"""

from __future__ import annotations

import copy
import json
import re
import typing
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from planner.base.units import _count_before, _lower
from planner.inputs.catalog import GPU_RANGES, PLANNER_ONLY_OFFER_FIELDS
from planner.inputs.schema import Problem, _scenario_number
from planner.inputs.strict import Strict

DIALECT = "https://json-schema.org/draft/2020-12/schema"
TEXT_MAX = 10_000  # Strict's str_max_length: every text field

# The strings the planner reads as numbers (each checked against the code in tests/test_schema.py).
_D = r"[0-9]+(_[0-9]+)*"  # digits, single underscores between them
FLOAT_TEXT = rf"^\s*[+-]?({_D}(\.({_D})?)?|\.{_D})([eE][+-]?{_D})?\s*$"  # pydantic's lax float
INT_TEXT = rf"^\s*[+-]?{_D}(\.0+)?\s*$"  # pydantic's lax int
_PLAIN = r"[0-9_]*\.?[0-9_]*[0-9][0-9_]*([eE][+-]?[0-9_]*[0-9][0-9_]*)?"
# commas only between groups of three digits (planner.base.units._GROUPED)
_GROUPED = r"[1-9][0-9]{0,2}(,[0-9]{3})+(\.[0-9]+)?([eE][+-]?[0-9]+)?"
_DIGITS = rf"({_PLAIN}|{_GROUPED})"
COUNT_TEXT = rf"^\s*{_DIGITS}\s*[kKmMbBgGtT]?\s*$"  # planner.base.units.count_value
MONEY_TEXT = rf"^\s*\$?\s*{_DIGITS}\s*[kKmMbBgGtT]?\s*$"  # planner.base.units.money_value
MONTH_TEXT = r"^(19[0-9]{2}|2[01][0-9]{2}|2200)-(0[1-9]|1[0-2])$"  # planner.inputs.months

# What each kind of quoted number is called in the schema (and in the docs' reference).
TEXT_KINDS = {
    FLOAT_TEXT: "number-text",
    INT_TEXT: "integer-text",
    COUNT_TEXT: "count",
    MONEY_TEXT: "money",
}


def case_insensitive(words: list[str]) -> str:
    """A pattern matching any of ``words`` in any case (JSON Schema patterns have no flags).

    >>> case_insensitive(["fp8", "int4"])
    '^([Ff][Pp]8|[Ii][Nn][Tt]4)$'
    """

    def one(w: str) -> str:
        return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in w)

    return "^(" + "|".join(one(w) for w in words) + ")$"


def _models(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model under ``root`` by class name (the names of the schema's ``$defs``)."""
    found: dict[str, type[BaseModel]] = {}

    def walk(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ in found:
                return
            found[tp.__name__] = tp
            for f in tp.model_fields.values():
                walk(f.annotation)
            return
        for arg in typing.get_args(tp):
            walk(arg)

    walk(root)
    return found


def _in_annotation(field: Any, func: Any) -> bool:
    """Whether a pydantic validator ``func`` applies to the field or anything inside it."""

    def has(obj: Any) -> bool:
        if getattr(obj, "func", None) is func:
            return True
        return any(has(m) for m in getattr(obj, "__metadata__", ())) or any(
            has(a) for a in typing.get_args(obj)
        )

    return any(has(m) for m in field.metadata) or has(field.annotation)


def _validated_by(model: type[BaseModel], name: str) -> set[str]:
    """The fields of ``model`` whose field validators call ``name`` (e.g. ``_month``)."""
    out: set[str] = set()
    for dec in model.__pydantic_decorators__.field_validators.values():
        func = getattr(dec.func, "__func__", dec.func)
        if name in getattr(getattr(func, "__code__", None), "co_names", ()):
            out |= set(dec.info.fields) if "*" not in dec.info.fields else set(model.model_fields)
    return out


def _text_kind(model: type[BaseModel], name: str, field: Any) -> str | None:
    """Which strings a number field also reads: None (numbers only) or a pattern above."""
    strict = any(getattr(m, "strict", False) for m in field.metadata)
    if strict or _in_annotation(field, _scenario_number):
        return None
    if _in_annotation(field, _count_before):
        return COUNT_TEXT
    if "usd" in name:  # planner.base.units.no_bool_for_number reads money in *usd* fields
        return MONEY_TEXT
    return ""  # pydantic's lax reading: FLOAT_TEXT or INT_TEXT by the node's type


def _amend(node: Any, fn: Any) -> Any:
    """Apply ``fn`` to every schema node under ``node`` (not into ``$ref``); ``fn`` returns a
    node, or a list of nodes to put in the place of one alternative of an ``anyOf``."""
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in node.items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            node[key] = _amend(node[key], fn)
    if "prefixItems" in node:
        node["prefixItems"] = [_amend(n, fn) for n in node["prefixItems"]]
    if "anyOf" in node:
        alts: list[Any] = []
        for alt in node["anyOf"]:
            new = _amend(alt, fn)
            alts.extend(new["anyOf"] if set(new) == {"anyOf"} else [new])
        node["anyOf"] = alts
        return node
    return fn(node)


_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def _annotations(node: dict) -> dict:
    """Take a node's default and description out of it, for the ``anyOf`` that wraps it."""
    return {k: node.pop(k) for k in ("default", "description") if k in node}


def _field_amender(model: type[BaseModel], name: str, field: Any) -> Any:
    kind = _text_kind(model, name, field)
    lowered = _in_annotation(field, _lower)
    months = name in _validated_by(model, "_month")
    ranged = name in _validated_by(model, "check_range")

    def fn(node: dict) -> dict:
        for short, key in _BOUNDS.items():  # pydantic leaves Field() inside Annotated as ge/lt
            if short in node:
                node[key] = node.pop(short)
        t = node.get("type")
        if t in ("number", "integer"):
            if ranged:
                lo, hi, _unit = GPU_RANGES[name]
                node.setdefault("minimum", lo)
                node.setdefault("maximum", hi)
            if kind is not None:
                pattern = kind or (INT_TEXT if t == "integer" else FLOAT_TEXT)
                text = {"type": "string", "pattern": pattern, "$comment": TEXT_KINDS[pattern]}
                return {"anyOf": [node, text], **_annotations(node)}
        if t == "string" and "enum" in node and lowered:
            ci = {"type": "string", "pattern": case_insensitive(node["enum"])}
            return {"anyOf": [node, {**ci, "$comment": "case-insensitive"}], **_annotations(node)}
        if t == "string" and months:
            node["pattern"] = MONTH_TEXT
        if t == "string" and "enum" not in node:
            node.setdefault("maxLength", TEXT_MAX)
        return node

    return fn


def _one_of_given(a: str, b: str) -> dict:
    """Exactly one of fields ``a`` and ``b`` is given (and not null)."""

    def given(k: str) -> dict:
        return {"required": [k], "properties": {k: {"not": {"type": "null"}}}}

    return {"oneOf": [given(a), given(b)], "$comment": f"give `{a}` or `{b}`, one of them"}


# Rules across fields, by model: what the models' validators check that a schema can state.
RULES: dict[str, dict] = {
    "ServeWorkload": _one_of_given("tokens", "requests"),
    "OwnedGpus": _one_of_given("bought", "arrives"),
    "Risk": {
        "if": {
            "required": ["measure"],
            "properties": {"measure": {"pattern": case_insensitive(["cvar"])}},
        },
        "else": {"properties": {"alpha": False, "weight": False}},
        "$comment": "`alpha` and `weight` apply to `measure: cvar` only",
    },
    "Problem": {
        "if": {"required": ["risk"], "properties": {"risk": {"type": "object"}}},
        "then": {"required": ["scenarios"], "properties": {"scenarios": {"type": "array"}}},
        "$comment": "`risk` weighs the costs of `scenarios`, so it needs them",
    },
    "Workloads": {
        "anyOf": [
            {"required": [k], "properties": {k: {"minItems": 1}}} for k in ("train", "serve")
        ],
        "$comment": "at least one workload, under `train` or `serve`",
    },
}
# Token sizes of a request bucket: planner.inputs.schema.RequestBucket._range.
BUCKET_TOKENS = {"minimum": 1, "maximum": 1_000_000}


def _amend_model(name: str, model: type[BaseModel], schema: dict) -> None:
    props = schema.get("properties", {})
    for fname, field in model.model_fields.items():
        key = field.alias or fname
        if key not in props:
            continue
        prop = props[key]
        prop.pop("title", None)
        amended = _amend(prop, _field_amender(model, fname, field))
        if name == "RequestBucket" and fname in ("prompt", "output"):
            amended = _amend(
                amended, lambda n: {**n, **BUCKET_TOKENS} if n.get("type") == "integer" else n
            )
        props[key] = amended
    schema.update(copy.deepcopy(RULES.get(name, {})))


# What the fields of an inline offer (planner.inputs.catalog.Offer, the offers files' schema)
# mean, where the model gives no description of its own.
OFFER_DESCRIPTIONS = {
    "id": "the offer's id, unique among all offers",
    "provider": "provider id (aws, lambda, ...)",
    "gpu": "GPU id",
    "kind": "on-demand and spot are paid per GPU-hour used; reserved for every hour of its term",
    "usd_per_gpu_hour": "price per GPU-hour, $",
    "marketplace": "a marketplace or reseller offer (used only with offers.marketplaces)",
    "region": "the provider's region",
    "instance_type": "the provider's instance type",
    "fabric": "the network between instances (none: single instances only)",
    "source": "where the price comes from (shown on the Assumptions sheet)",
    "as_of": "when the price was read",
}


def _state_key_limits(node: object) -> None:
    """Give every mapping's keys the text limit the planner applies to them
    (:class:`planner.inputs.strict.Strict`'s ``str_max_length``).

    pydantic 2.14 writes ``propertyNames`` for a mapping's keys and earlier releases do not;
    stating the limit here makes the schema the same whichever release built it (issue 43),
    and it is what the planner enforces either way.
    """
    if isinstance(node, list):
        for item in node:
            _state_key_limits(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "object" and "additionalProperties" in node and "properties" not in node:
        node.setdefault("propertyNames", {"maxLength": Strict.model_config["str_max_length"]})
    for value in node.values():
        _state_key_limits(value)


def problem_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a problem file."""
    raw = Problem.model_json_schema(mode="validation")
    _state_key_limits(raw)
    defs = raw.pop("$defs", {})
    models = _models(Problem)
    for name, sub in defs.items():
        _amend_model(name, models[name], sub)
    _amend_model("Problem", Problem, raw)
    for key in PLANNER_ONLY_OFFER_FIELDS:  # refused in offers.extra (written by the planner)
        defs["Offer"]["properties"].pop(key, None)
    for key, text in OFFER_DESCRIPTIONS.items():
        defs["Offer"]["properties"][key].setdefault("description", text)
    raw.pop("title", None)
    return {
        "$schema": DIALECT,
        "title": "GPU planner problem file",
        "description": (
            "A problem for `planner solve`: horizon, budget, site, workloads and optional "
            "sections. Generated by `planner schema` from planner/inputs/schema.py."
        ),
        **raw,
        "$defs": defs,
    }


def schema_text() -> str:
    """The schema as the committed file holds it: sorted keys, two-space indents, newline."""
    return json.dumps(problem_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@click.command("schema")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the schema to this file (default: print it).",
)
def schema(output: Path | None) -> None:
    """Print the problem file's JSON Schema (for editors: `# yaml-language-server: $schema=...`)."""
    text = schema_text()
    if output is None:
        click.echo(text, nl=False)
        return
    from planner.base.files import atomic_write_bytes

    _refuse_overwriting_other_files(output)
    atomic_write_bytes(output, text.encode("utf-8"))
    click.echo(f"wrote {output}")


def _refuse_overwriting_other_files(output: Path) -> None:
    """An existing ``output`` is replaced only when it is a JSON Schema (refreshing one):
    ``-o problem.yaml`` would put the schema in place of the user's problem file."""
    from planner.base.errors import InputError

    if not output.is_file():
        return  # a new file, or what atomic_write_bytes refuses with its own message
    try:
        with output.open("rb") as f:
            head = f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return  # atomic_write_bytes says what is wrong with the path
    if head.lstrip().startswith("{") and ('"$defs"' in head or '"$schema"' in head):
        return  # a JSON Schema (this command's sorts "$defs" near the top)
    raise InputError(
        f"-o {output}: the file exists and is not a JSON Schema (a problem file?); not "
        "overwritten: write the schema to a new file, or remove this one first"
    )
