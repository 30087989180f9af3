"""Bad input: every message names file:line, the field path, the bad value and what is allowed.

Each fixture in tests/fixtures/bad is one class of mistake. The CLI must exit 2 with that
message, print no traceback and write (or overwrite) no output file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.base.yamlio import did_you_mean
from planner.cli import cli
from planner.inputs.catalog import load_gpus
from planner.inputs.problem import load_problem, load_problem_text

BAD = Path(__file__).resolve().parent / "fixtures" / "bad"


def _flat(text: str) -> str:
    """Rich wraps long lines at the terminal width; compare with whitespace collapsed."""
    return " ".join(text.split())


# fixture -> substrings the message must contain (file:line, field path, value, allowed)
CASES: dict[str, list[str]] = {
    "syntax_error.yaml": ["syntax_error.yaml:5:5", "YAML syntax error", "expected ',' or ']'"],
    "bad_indent.yaml": [
        "bad_indent.yaml:4:",
        "YAML syntax error",
        "mapping values are not allowed",
    ],
    "wrong_type.yaml": ["wrong_type.yaml:2:", "horizon.months", "valid integer", "(got 'six')"],
    "negative_budget.yaml": [
        "negative_budget.yaml:3:",
        "budget.capex_usd",
        "greater than or equal to 0",
        "(got -5000)",
    ],
    "zero_users.yaml": [
        "zero_users.yaml:12:",
        "workloads.serve[0].traffic.daily_active_users",
        "greater than 0",
        "(got 0)",
    ],
    "nan_price.yaml": [
        "nan_price.yaml:4:",
        "site.power_usd_per_kwh",
        "finite number",
        "(got .nan)",
    ],
    "inf_budget.yaml": ["inf_budget.yaml:3:", "budget.capex_usd", "finite number", "(got .inf)"],
    "unknown_gpu.yaml": [
        "unknown_gpu.yaml:5:",
        "gpus[0]",
        "unknown gpu 'h100-sxn'",
        "did you mean 'h100-sxm'",
    ],
    "unknown_model.yaml": [
        "unknown_model.yaml:10:",
        "workloads.serve[0].model",
        "unknown model 'llama-2-7'",
        "'llama-2-7b'",
    ],
    "unknown_offer.yaml": [
        "unknown_offer.yaml:12:",
        "overrides.offers.lambda-h10",
        "unknown offer 'lambda-h10'",
        "did you mean 'lambda-h100'",
    ],
    "unknown_offer_gpu.yaml": [
        "unknown_offer_gpu.yaml:9:",
        "offers.extra[0].gpu",
        "unknown gpu 'h100-sxn'",
        "'h100-sxm'",
    ],
    "unknown_key.yaml": [
        "unknown_key.yaml:4:",
        "site.power_usd_per_kwhr",
        "unknown key 'power_usd_per_kwhr'",
        "did you mean 'power_usd_per_kwh'",
        "allowed keys: power_usd_per_kwh, pue, hosting_usd_per_gpu_month, colo_usd_per_kw_month, power_cap_kw, consumer_gpus_allowed",
    ],
    "unknown_top_key.yaml": [
        "unknown_top_key.yaml:3:",
        "unknown key 'budjet'",
        "did you mean 'budget'",
        "allowed keys: name, horizon, budget, site",
    ],
    "missing_key.yaml": ["missing_key.yaml:1:", "budget", "missing required key 'budget'"],
    "bad_literal.yaml": [
        "bad_literal.yaml:12:",
        "workloads.train[0].method",
        "'full', 'lora' or 'qlora'",
        "(got 'fulll')",
    ],
    "bad_month.yaml": ["bad_month.yaml:2:", "horizon.start", "YYYY-MM", "'2027-13'"],
    "deadline_before_start.yaml": [
        "deadline_before_start.yaml:13:",
        "workloads.train[0].window.deadline",
        "deadline 2027-02 is before start 2027-04",
    ],
    "deadline_after_horizon.yaml": [
        "deadline_after_horizon.yaml:13:",
        "workloads.train[0].window.deadline",
        "2027-09",
        "horizon",
        "2027-01..2027-06",
    ],
    "serve_outside_horizon.yaml": [
        "serve_outside_horizon.yaml:11:",
        "workloads.serve[0].start",
        "2028-03",
        "outside the horizon 2027-01..2027-06",
    ],
    "list.yaml": [
        "list.yaml:1:",
        "must be a mapping of keys (name, horizon, budget, site, workloads",
        "top level is a list",
    ],
    "empty.yaml": ["empty.yaml:", "is empty", "name, horizon, budget, site, workloads"],
    "python_tag.yaml": [
        "python_tag.yaml:1:",
        "python/object/apply:os.system",
        "only plain YAML data",
    ],
    "missing_offers_file.yaml": [
        "missing_offers_file.yaml:6:",
        "offers.files[0]",
        "'no-such-offers.yaml' not found",
    ],
    "duplicate_key.yaml": ["duplicate_key.yaml:6:", "key 'gpus' appears twice", "first at line 5"],
    "uses_bad_offers_file.yaml": [
        "offers_negative_price.yaml:7:",
        "offers[0].usd_per_gpu_hour",
        "greater than 0",
        "(got -2.49)",
    ],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_problem_message(name):
    with pytest.raises(InputError) as exc:
        load_problem(BAD / name)
    msg = str(exc.value)
    for part in CASES[name]:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert "Traceback" not in msg


def test_every_bad_fixture_is_covered():
    helpers = {"offers_negative_price.yaml", "gpu_catalog_bad.yaml"}  # loaded through others
    assert {p.name for p in BAD.glob("*.yaml")} - helpers == set(CASES)


def test_missing_file():
    with pytest.raises(InputError, match=r"no-such-problem\.yaml: file not found"):
        load_problem(BAD / "no-such-problem.yaml")


def test_directory_instead_of_file():
    with pytest.raises(InputError, match="is a directory"):
        load_problem(BAD)


def test_not_utf8(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match="not a UTF-8 text file"):
        load_problem(p)


def test_bad_catalog_names_file_line_and_allowed_keys():
    with pytest.raises(InputError) as exc:
        load_gpus(BAD / "gpu_catalog_bad.yaml")
    msg = str(exc.value)
    assert "gpu_catalog_bad.yaml:7: gpus[0].memory_gb.value" in msg and "(got 'eighty')" in msg
    assert "gpu_catalog_bad.yaml:8: gpus[0].memmory_bandwidth_gbs: unknown key" in msg
    assert "did you mean 'memory_bandwidth_gbs'" in msg
    assert "class" in msg.split("allowed keys:")[1]  # aliases, not python field names (klass)


def test_several_errors_reported_together():
    text = (BAD / "unknown_gpu.yaml").read_text().replace("model: llama-2-7b", "model: llama-2-7")
    with pytest.raises(InputError) as exc:
        load_problem_text(text, name="two.yaml")
    msg = str(exc.value)
    assert "two.yaml:5: gpus[0]: unknown gpu 'h100-sxn'" in msg
    assert "two.yaml:10: workloads.serve[0].model: unknown model 'llama-2-7'" in msg


def test_union_errors_merged_into_one_line():
    text = (BAD / "unknown_gpu.yaml").read_text().replace("h100-sxn", "h100-sxm")
    text = text.replace("offers: {files: []}", "offers: {files: [], providers: 5}")
    with pytest.raises(InputError) as exc:
        load_problem_text(text, name="u.yaml")
    msg = str(exc.value)
    assert "u.yaml:6: offers.providers:" in msg and "(got 5)" in msg
    assert msg.count("offers.providers") == 1


def test_alias_bomb_is_rejected_quickly():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(InputError, match="expands to more than"):
        load_problem_text("\n".join(lines) + "\n", name="bomb.yaml")


def test_did_you_mean():
    assert did_you_mean("h100-sxn", ["h100-sxm", "a100-sxm-80gb"]) == "did you mean 'h100-sxm'?"
    assert did_you_mean("zzz", ["a", "b"]) == "known: a, b"
    assert did_you_mean("zzz", []) == "none are defined"


# ---------------------------------------------------------------- the CLI: exit 2, no traceback, no output


@pytest.mark.parametrize(
    "name",
    [
        "syntax_error.yaml",
        "nan_price.yaml",
        "unknown_gpu.yaml",
        "unknown_key.yaml",
        "list.yaml",
        "empty.yaml",
        "python_tag.yaml",
        "deadline_before_start.yaml",
    ],
)
def test_cli_bad_input_exit_2_and_outputs_untouched(name, tmp_path):
    js = tmp_path / "plan.json"
    xlsx = tmp_path / "plan.xlsx"
    js.write_text("previous plan")
    xlsx.write_bytes(b"previous workbook")
    r = CliRunner().invoke(cli, ["solve", str(BAD / name), "--json", str(js), "-o", str(xlsx)])
    assert r.exit_code == 2, r.output
    out = _flat(r.output)
    assert "Traceback" not in out and r.exception is None or isinstance(r.exception, SystemExit)
    assert "error:" in out
    assert CASES[name][1].split(":")[0].strip() in out
    assert js.read_text() == "previous plan"
    assert xlsx.read_bytes() == b"previous workbook"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "plan.xlsx"]  # no temp files


def test_cli_missing_file_exit_2(tmp_path):
    r = CliRunner().invoke(cli, ["solve", str(tmp_path / "nope.yaml"), "--no-excel"])
    assert r.exit_code == 2
    assert "file not found" in _flat(r.output)


def test_cli_verify_bad_plan_json_exit_2(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    r = CliRunner().invoke(
        cli, ["verify", str(BAD.parent.parent.parent / "problems/2m_budget.yaml"), str(bad)]
    )
    assert r.exit_code == 2, r.output
    assert "not JSON" in _flat(r.output) and "planner solve --json" in _flat(r.output)


def test_python_tag_never_executes(tmp_path):
    marker = tmp_path / "pwned"
    text = f'name: !!python/object/apply:os.system ["touch {marker}"]\n'
    with pytest.raises(InputError, match="only plain YAML data"):
        load_problem_text(text, name="evil.yaml")
    assert not marker.exists()


def test_messages_have_file_line_prefix():
    """Every line of every message starts with file:line (or file for whole-file problems)."""
    for name in CASES:
        try:
            load_problem(BAD / name)
        except InputError as exc:
            for line in str(exc).splitlines():
                line = (
                    line.strip()
                    .removeprefix("invalid problem file: ")
                    .removeprefix("invalid offers file: ")
                )
                if line and line not in ("invalid problem file:", "invalid offers file:"):
                    assert re.match(r"^\S+\.yaml(:\d+)?(:\d+)?: ", line), (name, line)
