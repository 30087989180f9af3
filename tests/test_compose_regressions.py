"""Features composed: each bug found by composing features is a tiny problem here that ended
in exit 1 or 4 before its fix (issue 35), solved by the command and verified independently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.cli import cli

ONE_OFFER = """
name: {name}
horizon: {{start: 2027-01, months: 4}}
budget: {{capex_usd: {capex}}}
site: {{power_usd_per_kwh: 0.12}}
gpus: [a100-pcie-80gb]
offers:
  files: []
  {offers}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-02
      traffic: {{daily_active_users: 500, requests_per_user_per_day: 10, utilization: 0.5}}
      tokens: {{prompt: 200, output: 100}}
      slo: {{p95_ttft_ms: 2000, p95_tpot_ms: 100}}
"""
RENTAL = """discounts: {cloud: 0.3}
  extra:
    - {id: cloud-a100-od, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 2.5, source: test, as_of: "2026-11"}"""


def _solve_and_verify(tmp_path: Path, text: str, *excel: str) -> dict:
    problem = tmp_path / "p.yaml"
    problem.write_text(text)
    out = tmp_path / "p.json"
    args = ["solve", str(problem), "--json", str(out), *(excel or ["--no-excel"])]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    v = CliRunner().invoke(cli, ["verify", str(problem), str(out)])
    assert v.exit_code == 0, v.output
    return json.loads(out.read_text())


def test_a_discount_with_the_default_price_paths_verifies(tmp_path: Path) -> None:
    """The model applies the rent path to the discounted price; the discount check did not
    (exit 4: 'rate 1.72646 is not the listed $2.5 less the cloud discount 30% applied once')."""
    plan = _solve_and_verify(tmp_path, ONE_OFFER.format(name="d", capex=0, offers=RENTAL))
    rates = {r["usd_per_gpu_hour"] for r in plan["rentals"]}
    assert rates and all(rate < 2.5 * 0.7 for rate in rates)  # discounted, then down the path


@pytest.mark.parametrize("market", ["", "market: {lead_months: 6}\n"])
def test_a_plan_that_rents_nothing_has_a_workbook(tmp_path: Path, market: str) -> None:
    """No offers, buy or nothing: the Rentals sheet's placeholder row was one column short of
    its header with price paths on (exit 1: zip() argument 2 is shorter than argument 1)."""
    text = market + ONE_OFFER.format(name="buy only", capex=200_000, offers="")
    # the service starts after the (default or given) lead time, so buying alone can serve it
    start = "2027-08" if market else "2027-04"
    text = text.replace("start: 2027-02", f"start: {start}").replace("months: 4", "months: 9")
    xlsx = tmp_path / "p.xlsx"
    plan = _solve_and_verify(tmp_path, text, "-o", str(xlsx))
    assert plan["rentals"] == [] and plan["purchases"]
    assert xlsx.stat().st_size > 0


def test_exit_1_into_a_closed_pipe_is_141_whatever_the_path(monkeypatch) -> None:
    """click ends some closed-pipe paths (``--help``) in a bare exit 1; where that happened
    depended on timing (issue 35). Whatever path gives 1, a reader that left makes it 141."""
    import os
    import sys

    import planner.__main__ as entry
    import planner.cli

    r, w = os.pipe()
    os.close(r)
    stream = os.fdopen(w, "w")
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(planner.cli, "run", lambda: 1)
    try:
        with pytest.raises(SystemExit) as ended:
            entry.main(exit_now=False)
    finally:
        monkeypatch.undo()
        stream.close()
    assert ended.value.code == 141
    assert entry._reader_left(sys.stdout) is False  # an ordinary stream is no closed pipe


def test_no_first_stage_for_every_scenario_names_them_and_claims_no_proof() -> None:
    """benchmarks/compose.py problem 783 (seed 0: owned GPUs, a contract, lead times, per-GPU
    paths, a request mix, profiles and three scenarios at 10 s) ended in exit 1, 'internal
    error: AttributeError' (the scenarios' names were read from (name, why) pairs), and the
    message it meant to print called a time-out infeasible. Now: infeasible only where HiGHS
    proved it on the two-stage model, else a time limit with its hint."""
    from types import SimpleNamespace

    from planner.base.errors import InfeasibleError, SolverError
    from planner.plan.scenarios import _Joint, _no_first_stage, _Replan

    scen = [SimpleNamespace(name="base"), SimpleNamespace(name="busy")]
    timed_out = SimpleNamespace(has_solution=False, message="no feasible plan found within 0.5 s")
    base = _Replan([object(), None], [None, timed_out], {})  # type: ignore[list-item]
    with pytest.raises(SolverError, match="raise --time-limit") as slow:
        _no_first_stage(_Joint(None, None, "HiGHS: no plan"), base, scen, 7.0)  # type: ignore[arg-type]
    assert "scenario 'busy'" in str(slow.value) and "scenario 'base': a purchase" in str(slow.value)
    with pytest.raises(InfeasibleError) as proven:
        _no_first_stage(_Joint(None, None, "HiGHS: no plan", True), base, scen, 7.0)  # type: ignore[arg-type]
    assert any("scenario 'busy'" in line for line in proven.value.diagnosis)


def test_a_rounded_lp_point_never_buys_before_a_lead_time_allows(tmp_path: Path) -> None:
    """An LP stopped at its time limit can own GPUs in a month no order could reach; its
    rounding bought them and the verifier refused the plan (exit 4 on a 20-workload problem
    at --time-limit 0.5 under load). Bounds are no rows in PuLP: they are checked too."""
    from planner.inputs.problem import load_problem
    from planner.optimize.candidates import build_candidates
    from planner.optimize.model import build_model
    from planner.optimize.start import lp_rounded_start

    text = "market: {lead_months: 2, rent_change_per_year: 0, buy_change_per_year: 0}\n"
    text += ONE_OFFER.format(name="lead", capex=200_000, offers=RENTAL)
    problem = tmp_path / "p.yaml"
    problem.write_text(text)
    inputs = load_problem(problem)
    m = build_model(inputs, build_candidates(inputs))
    gpu = inputs.gpus["a100-pcie-80gb"]
    early = {v.name: 2.0 * gpu.node_gpus for t in range(4) for v in m.own[("a100-pcie-80gb", t)]}
    assert m.buy[("a100-pcie-80gb", 0)].upBound == 0  # no order reaches the first month
    assert lp_rounded_start(m, early) is False


FP4 = """
name: fp4
horizon: {start: 2027-01, months: 3}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.12}
gpus: [h100-sxm]
offers:
  files: []
  extra:
    - {id: cloud-h100-od, provider: cloud, gpu: h100-sxm, kind: on_demand,
       usd_per_gpu_hour: 2.5, source: test, as_of: "2026-11"}
PROFILES
workloads:
  serve:
    - name: chat
      model: qwen3-30b-a3b
      precision: fp4
      start: 2027-01
      traffic: {daily_active_users: 20000, requests_per_user_per_day: 20, utilization: 0.5}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
"""


def test_fp4_serving_on_a_card_without_fp4_is_a_diagnosis_unless_measured(tmp_path: Path) -> None:
    """FP4 (a precision of today) with measured profiles: the profiles file refused fp4
    (exit 2) while the problem accepted it. Unmeasured, H100 has no FP4 tensor cores: exit 3,
    the reason said once per card; measured (vLLM serves MXFP4 weights on H100), the run
    is trusted and plans."""
    problem = tmp_path / "p.yaml"
    problem.write_text(FP4.replace("PROFILES\n", ""))
    r = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel"])
    assert r.exit_code == 3, r.output
    assert r.output.count("no FP4 tensor cores") == 1 and "tp1/tp2/tp4/tp8" in r.output
    (tmp_path / "prof.yaml").write_text(
        "serve:\n  - {model: qwen3-30b-a3b, gpu: h100-sxm, tp: 1, precision: fp4, prompt: 500,"
        " output: 250, max_rps: 2.0, source: test, as_of: 2026-11}\n"
    )
    problem.write_text(FP4.replace("PROFILES", "profiles: [prof.yaml]"))
    plan = _solve_and_verify(tmp_path, problem.read_text())
    chat = next(w for w in plan["workloads"] if w["name"] == "chat")
    assert chat["gpu"] == ["h100-sxm"] and chat["meets_target"]


def test_owned_liquid_cooled_racks_on_an_air_cooled_site_plan_with_a_warning(tmp_path: Path):
    """Owned fleets with today's racks: GB200s the team has run (they are planned, and the
    plan verifies), but the site says it has no liquid cooling, so the loader says so."""
    text = FP4.replace("PROFILES\n", "").replace("[h100-sxm]", "[gb200]")
    text = text.replace("site: {power_usd_per_kwh: 0.12}", "site: {power_usd_per_kwh: 0.12}\n"
                        "fleet: {owned: [{gpu: gb200, count: 8, bought: 2026-01}]}")  # fmt: skip
    problem = tmp_path / "p.yaml"
    problem.write_text(text)
    r = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "fleet.owned[0]: gb200 runs in nvl72-gb200, which needs liquid cooling" in r.output
    plan = _solve_and_verify(tmp_path, text)
    assert not plan["purchases"] and any(f["owned"] for f in plan["fleet"])


ROUNDED_OVER_BUDGET = """
name: rentals rounded up past the total budget
horizon: {start: 2027-01, months: 9}
budget: {capex_usd: 40000, total_usd: 20000}
site: {power_usd_per_kwh: 0.12}
gpus: [a100-pcie-80gb, h100-sxm, rtx-4090]
market: {rent_change_per_year: 0, buy_change_per_year: 0, lead_months: 0}
offers:
  files: []
  extra:
    - {id: alpha-h100-od, provider: alpha, gpu: h100-sxm, kind: on_demand, usd_per_gpu_hour: 3.38,
       gpus_per_instance: 8, fabric: infiniband, fabric_gbps_per_gpu: 400, source: t, as_of: 2026-11}
    - {id: beta-a100-od, provider: beta, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 2.08, source: t, as_of: 2026-11}
    - {id: beta-4090-od, provider: beta, gpu: rtx-4090, kind: on_demand, usd_per_gpu_hour: 0.5,
       source: t, as_of: 2026-11}
    - {id: alpha-a100-3m, provider: alpha, gpu: a100-pcie-80gb, kind: reserved, term_months: 3,
       usd_per_gpu_hour: 0.96, source: t, as_of: 2026-11}
workloads:
  serve:
    - {name: svc0, model: llama-3-8b, start: 2027-01, redundancy: 0,
       traffic: {daily_active_users: 6000, requests_per_user_per_day: 20, utilization: 0.3,
                 growth_per_month: 0.1},
       slo: {p95_ttft_ms: 1000, p95_tpot_ms: 100}, tokens: {prompt: 200, output: 100}}
    - {name: svc1, model: llama-2-13b, precision: bf16, start: 2027-05, end: 2027-08,
       redundancy: 0,
       traffic: {daily_active_users: 600, requests_per_user_per_day: 5, utilization: 0.5,
                 growth_per_month: 0.1},
       slo: {p95_ttft_ms: 1000, p95_tpot_ms: 100}, tokens: {prompt: 500, output: 100}}
    - {name: svc2, model: llama-2-13b, precision: bf16, start: 2027-04, redundancy: 0,
       traffic: {daily_active_users: 40000, requests_per_user_per_day: 20, utilization: 0.3},
       slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}, tokens: {prompt: 200, output: 250}}
"""


def test_rentals_made_whole_never_break_the_total_budget(tmp_path: Path) -> None:
    """benchmarks/compose.py seed 0 problem 1749 (shrunk): the relaxed plan fit the $20,000
    total budget, its rentals rounded up to whole replicas cost $42,794 and the verifier
    refused the plan (exit 4). The exact model (whole replicas) has no plan within the
    budget, so it is a diagnosis: exit 3, naming the budget and what would do."""
    problem = tmp_path / "p.yaml"
    problem.write_text(ROUNDED_OVER_BUDGET)
    r = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel"], env={"COLUMNS": "200"})
    assert r.exit_code == 3, r.output
    assert "total budget too small: budget.total_usd = $20,000" in r.output
    # with room for whole replicas, the plan keeps its budget and verifies
    roomy = ROUNDED_OVER_BUDGET.replace("total_usd: 20000", "total_usd: 30000")
    plan = _solve_and_verify(tmp_path, roomy)
    assert plan["totals"]["total_usd"] <= 30000 + 1e-6
