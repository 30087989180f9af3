"""Small promises of issue 39: the errors importable from ``planner``, money written with
suffixes, one row per GPU type in the terminal's Workloads table, help text without
printf escapes, break-even values without float noise. No solve."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import planner
from planner.analysis.breakeven import _scan_values, _tidy
from planner.base import errors
from planner.base.units import money_value
from planner.cli import cli
from planner.inputs.problem import load_problem_text
from planner.reports.terminal import workload_rows, workload_table

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "problems" / "inference_startup.yaml"
NOMINAL = ROOT / "tests" / "fixtures" / "nominal"


@pytest.mark.parametrize(
    "name", ["InputError", "InfeasibleError", "SolverError", "VerificationError", "OutputError"]
)
def test_the_errors_the_commands_exit_with_are_importable_from_planner(name):
    cls = getattr(planner, name)
    assert cls is getattr(errors, name) and issubclass(cls, planner.PlannerError)
    assert name in planner.__all__


def test_the_docstrings_name_the_real_attributes():
    assert "diagnosis" in planner.solve.__doc__
    assert hasattr(planner.InfeasibleError("x", ["why"]), "diagnosis")
    assert hasattr(planner.VerificationError("x", ["why"]), "violations")


@pytest.mark.parametrize(
    "text, usd",
    [("3M", 3e6), ("$250k", 250e3), ("1.5B", 1.5e9), ("2,000,000", 2e6), ("$ 60k", 60e3)],
)
def test_a_budget_takes_money_suffixes(text, usd):
    src = PROBLEM.read_text().replace("capex_usd: 60000", f"capex_usd: {text!r}")
    assert src != PROBLEM.read_text()
    inputs = load_problem_text(src, "p.yaml", PROBLEM.parent)
    assert inputs.problem.budget.capex_usd == usd
    assert money_value(text) == usd


@pytest.mark.parametrize("text", ["3Q", "M3", "$", "three million", "3MM"])
def test_a_bad_amount_is_an_input_error_naming_the_field(text):
    src = PROBLEM.read_text().replace("capex_usd: 60000", f"capex_usd: {text!r}")
    with pytest.raises(planner.InputError, match=r"capex_usd.*expected an amount like"):
        load_problem_text(src, "p.yaml", PROBLEM.parent)


def test_the_workloads_table_has_one_row_per_gpu_type():
    plans = [planner.read_plan(p) for p in sorted(NOMINAL.glob("*.json"))
             if '"planner_version"' in p.read_text()]  # fmt: skip
    multi = [(p, w) for p in plans for w in p.workloads if len(w.gpu) > 1]
    assert multi, "no nominal plan serves a workload on two GPU types"
    plan, w = multi[0]
    rows = workload_rows(w)
    assert [r[2] for r in rows] == w.gpu
    assert all(r[4] == "" and r[0] == "" for r in rows[1:])  # figures on the first row only
    console = Console(width=160, record=True)
    console.print(workload_table(plan, console, True))
    lines = console.export_text().splitlines()
    for g in w.gpu[1:]:
        (line,) = [ln for ln in lines if f" {g} " in ln and w.name not in ln]
        assert "TPOT" not in line and "TTFT" not in line, line


def test_the_margins_help_says_percent_once():
    out = CliRunner().invoke(cli, ["solve", "--help"], env={"COLUMNS": "200"}).output
    assert "10 %" in out and "%%" not in out


def test_breakeven_values_carry_no_float_noise():
    assert _scan_values(-0.15, 0.05, 5) == [-0.15, -0.1, -0.05, 0.0, 0.05]
    assert _tidy(6.938893903907228e-18, 0.05) == 0.0
    assert _tidy(0.1 + 0.2, 1.0) == 0.3
    assert _tidy(1e-9, 1e-6) == 1e-9  # a small interval keeps its own digits


def test_a_file_beside_the_problem_wins_over_the_shipped_catalog(tmp_path):
    from planner.inputs.catalog_dir import CATALOG_DIR

    problem = tmp_path / "p.yaml"
    problem.write_text(PROBLEM.read_text())
    shipped = load_problem_text(problem.read_text(), str(problem), tmp_path)
    assert any(Path(f).parent == CATALOG_DIR for f in shipped.offer_files)
    (tmp_path / "offers-manual.yaml").write_text(
        "offers:\n  - {id: mine-4090, provider: mine, gpu: rtx-4090, kind: on_demand,\n"
        "     usd_per_gpu_hour: 0.2, gpus_per_instance: 1, source: a quote, as_of: 2026-11}\n"
    )
    local = load_problem_text(problem.read_text(), str(problem), tmp_path)
    assert str(tmp_path / "offers-manual.yaml") in local.offer_files
    assert "mine-4090" in local.offers
    assert "runpod-rtx-4090-od" not in local.offers  # the shipped offers-manual.yaml: not read
