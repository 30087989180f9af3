"""Every command's exit codes, as in the table (planner.base.errors.ExitCode and the README):
0 success, 1 unexpected failure, 2 bad input, 3 infeasible / does not fit, 4 a plan that fails
verification, 5 a sweep with failed scenarios (all results still written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.base.errors import ExitCode
from planner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
INFEASIBLE = FIX / "infeasible" / "budget.yaml"
BAD = FIX / "bad" / "unknown_key.yaml"

# A few rented A100s serve this: solves in well under a second.
TINY = """
name: tiny
horizon: {start: 2027-01, months: 3}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.12}
gpus: [a100-pcie-80gb]
offers:
  files: []
  extra:
    - {id: cloud-a100-od, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 2.5, source: test, as_of: "2026-11"}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 500, requests_per_user_per_day: 10, utilization: 0.5}
      tokens: {prompt: 200, output: 100}
      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 100}
"""


def test_the_table():
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 130, 143]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("tiny") / "tiny.yaml"
    p.write_text(TINY)
    return p


@pytest.fixture(scope="module")
def tiny_plan(tiny: Path) -> Path:
    out = tiny.with_suffix(".json")
    r = CliRunner().invoke(cli, ["solve", str(tiny), "--no-excel", "--json", str(out)])
    assert r.exit_code == 0, r.output
    return out


def run(*args: str) -> int:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output
    return r.exit_code


def test_solve(tiny: Path, tmp_path: Path, monkeypatch):
    assert run("solve", tiny, "--no-excel") == ExitCode.OK
    assert run("solve", BAD, "--no-excel") == ExitCode.BAD_INPUT
    assert run("solve", tiny, "--no-excel", "--gap", "2") == ExitCode.BAD_INPUT
    assert run("solve", tiny, "--no-excel", "--time-limit", "0") == ExitCode.BAD_INPUT
    assert run("solve", tiny, "--no-excel", "--time-limit", "nan") == ExitCode.BAD_INPUT
    assert run("solve", INFEASIBLE, "--no-excel") == ExitCode.INFEASIBLE
    # A plan the independent check rejects is never written, and exits 4.
    import planner.verify

    def rejecting(inputs, plan):
        return planner.verify.VerifyReport(
            findings=[planner.verify.Finding("money", "tampered")], errors=["tampered"]
        )

    monkeypatch.setattr(planner.verify, "verify_report", rejecting)
    out = tmp_path / "never.json"
    r = CliRunner().invoke(cli, ["solve", str(tiny), "--no-excel", "--json", str(out)])
    assert r.exit_code == ExitCode.VERIFY_FAILED
    assert not out.exists()
    # ... but kept beside it for inspection, and the message calls it a bug and names the check
    kept = tmp_path / "never.rejected.json"
    assert json.loads(kept.read_text())["problem_name"]
    assert "a bug" in r.output and "money check: tampered" in r.output and str(kept) in r.output


def test_unexpected_failure_is_1_without_traceback(tiny: Path, monkeypatch):
    import planner.plan.make

    def boom(*a, **k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(planner.plan.make, "plan_problem", boom)
    r = CliRunner().invoke(cli, ["solve", str(tiny), "--no-excel"])
    assert r.exit_code == ExitCode.UNEXPECTED
    assert "internal error" in r.output and "Traceback" not in r.output


def test_verify(tiny: Path, tiny_plan: Path, tmp_path: Path):
    assert run("verify", tiny, tiny_plan) == ExitCode.OK
    data = json.loads(tiny_plan.read_text())
    data["totals"]["total_usd"] += 1000.0
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(data))
    assert run("verify", tiny, bad) == ExitCode.VERIFY_FAILED
    (tmp_path / "junk.json").write_text("{not json")
    assert run("verify", tiny, tmp_path / "junk.json") == ExitCode.BAD_INPUT


def test_explain(tiny: Path):
    assert run("explain", tiny, "--no-resolve") == ExitCode.OK
    assert run("explain", INFEASIBLE, "--no-resolve") == ExitCode.INFEASIBLE
    assert run("explain", BAD) == ExitCode.BAD_INPUT


def test_estimate():
    fits = ("estimate", "serve", "--model", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "1")
    assert run(*fits, "--prompt", "500", "--output", "200") == ExitCode.OK
    too_big = ("estimate", "train", "--model", "llama-2-70b", "--gpu", "rtx-4090", "--gpus", "2")
    assert run(*too_big, "--tokens", "2T") == ExitCode.INFEASIBLE
    assert run(*too_big, "--tokens", "lots") == ExitCode.BAD_INPUT


def test_whatif(tiny: Path, tmp_path: Path):
    common = ("--no-excel", "--workers", "1")
    assert run("whatif", tiny, "--vary", "utilization=0.4,0.6", *common) == ExitCode.OK
    assert run("whatif", tiny, "--vary", "no.such.key=1", *common) == ExitCode.BAD_INPUT
    out = tmp_path / "sweep.json"
    code = run("whatif", INFEASIBLE, "--vary", "utilization=0.5", *common, "--json", out)
    assert code == ExitCode.SWEEP_INCOMPLETE
    assert json.loads(out.read_text())  # the results are written all the same


def test_breakeven(tiny: Path):
    args = ("--vary", "utilization=0.3:0.6", "--scan", "2", "--workers", "1")
    assert run("breakeven", tiny, *args) == ExitCode.OK
    assert run("breakeven", tiny, "--vary", "utilization=x:y") == ExitCode.BAD_INPUT
    assert run("breakeven", INFEASIBLE, *args) == ExitCode.SWEEP_INCOMPLETE


def test_report(tiny_plan: Path, tmp_path: Path):
    assert run("report", tiny_plan, "-o", tmp_path / "r.xlsx") == ExitCode.OK
    assert run("report", tmp_path / "missing.json") == ExitCode.BAD_INPUT


def test_catalog_and_offers(tmp_path: Path):
    assert run("catalog") == ExitCode.OK
    assert run("catalog", "--gpus-file", FIX / "bad" / "gpu_catalog_bad.yaml") == ExitCode.BAD_INPUT
    missing = tmp_path / "nothing-here"
    assert (
        run("offers", "import-skypilot", missing, "-o", tmp_path / "o.yaml") == ExitCode.BAD_INPUT
    )
