"""Infeasible problems are explained; ``planner explain`` says what binds in a feasible plan.

Each fixture in tests/fixtures/infeasible is one cause. The smallest budget / power cap the
diagnosis reports is checked by re-solving at that value (feasible) and just below it
(infeasible), so the number is right, not just present.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.analysis.explain import explain_plan
from planner.base.errors import InfeasibleError
from planner.cli import cli
from planner.inputs.problem import load_problem, load_problem_text
from planner.optimize.infeasible import diagnose_infeasible, minimize, relaxed
from planner.plan.make import plan_problem
from tests.factories import candidates, gpu, offer, problem, serve_workload

INF = Path(__file__).resolve().parent / "fixtures" / "infeasible"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _diagnosis(path: Path) -> list[str]:
    with pytest.raises(InfeasibleError) as exc:
        plan_problem(load_problem(path))
    return exc.value.diagnosis


def _number(text: str, after: str) -> float:
    m = re.search(re.escape(after) + r"\s*\$?([0-9,]+(?:\.[0-9]+)?)", text)
    assert m, (after, text)
    return float(m.group(1).replace(",", ""))


def _feasible(inputs) -> bool:
    try:
        plan_problem(inputs, diagnose=False)
        return True
    except InfeasibleError:
        return False


def _with(inputs, capex=None, total=None, power=None):
    p = inputs.problem
    b = p.budget.model_copy(
        update={k: v for k, v in (("capex_usd", capex), ("total_usd", total)) if v is not None}
    )
    s = p.site.model_copy(update={"power_cap_kw": power} if power is not None else {})
    return dataclasses.replace(inputs, problem=p.model_copy(update={"budget": b, "site": s}))


# ---------------------------------------------------------------- the fixtures, through the CLI


CLI_CASES = {
    "licence.yaml": [
        "serving workload 'chat' cannot be placed",
        "rtx-4090",
        "GeForce",
        "site.consumer_gpus_allowed: false",
        "no trusted rental offer rents rtx-4090",
        "offers.providers",
        "offers.marketplaces: false",
    ],
    "budget.yaml": [
        "capex budget too small: budget.capex_usd = $12,000",
        "the smallest that admits a plan",
    ],
    "power_cap.yaml": [
        "power cap too low: site.power_cap_kw = 0.5 kW",
        "the smallest that admits a plan",
    ],
    "total_budget.yaml": [
        "total budget too small: budget.total_usd = $1,000",
        "the smallest that admits a plan",
    ],
    "budget_and_power.yaml": [
        "capex budget too small",
        "even with no other limit",
        "power cap too low",
    ],
    "memory.yaml": ["serving workload 'big'", "no allowed GPU can run it", "l4", "weights"],
    "slo.yaml": ["serving workload 'chat'", "no allowed GPU can run it", "SLO"],
    "deadline.yaml": ["training job 'pretrain-70b'", "no allowed GPU can run it", "in the window"],
}


def test_every_infeasible_fixture_is_covered():
    assert {p.name for p in INF.glob("*.yaml")} == set(CLI_CASES)


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_infeasible_exit_3_with_diagnosis(name, tmp_path):
    js = tmp_path / "plan.json"
    js.write_text("previous")
    r = CliRunner().invoke(cli, ["solve", str(INF / name), "--no-excel", "--json", str(js)])
    assert r.exit_code == 3, r.output
    out = _flat(r.output)
    assert "infeasible" in out and "Traceback" not in out
    for part in CLI_CASES[name]:
        assert part in out, (part, out)
    assert js.read_text() == "previous"


def test_explain_infeasible_exit_3():
    r = CliRunner().invoke(cli, ["explain", str(INF / "power_cap.yaml")])
    assert r.exit_code == 3
    assert "power cap too low" in _flat(r.output)


# ---------------------------------------------------------------- the numbers are right


def test_smallest_capex_budget_is_exact():
    inputs = load_problem(INF / "budget.yaml")
    need = _number(" ".join(_diagnosis(INF / "budget.yaml")), "the smallest that admits a plan is")
    assert _feasible(_with(inputs, capex=need))
    assert not _feasible(_with(inputs, capex=need - 1))


def test_smallest_power_cap_is_right():
    inputs = load_problem(INF / "power_cap.yaml")
    text = " ".join(_diagnosis(INF / "power_cap.yaml"))
    need = _number(text, "is")  # "... (with ... as set) is 2.7 kW"
    assert _feasible(_with(inputs, power=need + 0.06))  # the message rounds to 0.1 kW
    assert not _feasible(_with(inputs, power=need - 0.06))


def test_smallest_total_budget_is_right():
    inputs = load_problem(INF / "total_budget.yaml")
    need = _number(" ".join(_diagnosis(INF / "total_budget.yaml")), "is")
    assert _feasible(_with(inputs, total=need * 1.001 + 1))
    assert not _feasible(_with(inputs, total=need * 0.99))


def test_budget_probe_on_tiny_problem():
    # 3 req/s, 1 req/s per GPU at $1,000, nothing to rent: the smallest capex budget is $3,000.
    inputs = problem(
        months=2, capex=2_000, gpus=[gpu(price=1_000)], serve=[serve_workload(rps=3.0)]
    )
    c = candidates(inputs, serve={"chat": [("g1", 1, 1.0)]})
    lines = diagnose_infeasible(inputs, cands=c)
    assert lines == [
        "capex budget too small: budget.capex_usd = $2,000; the smallest that admits a plan is "
        "$3,000 (short by $1,000)"
    ]


def test_two_limits_each_fixable_given_the_other():
    # A is cheap but draws 1 kW, B is frugal but dear; 4 GPUs needed. Under the power cap the
    # budget must reach 4 B = $12,000; under the budget (2 A + 2 B) the cap must reach 2.2 kW.
    a = gpu("ga", price=1_000, tdp=1_000)
    b = gpu("gb", price=3_000, tdp=100)
    inputs = problem(
        months=1, capex=8_000, power_cap=1.0, gpus=[a, b], serve=[serve_workload(rps=4.0)]
    )
    c = candidates(inputs, serve={"chat": [("ga", 1, 1.0), ("gb", 1, 1.0)]})
    lines = diagnose_infeasible(inputs, cands=c)
    assert lines == [
        "capex budget too small: budget.capex_usd = $8,000; the smallest that admits a plan (with "
        "site.power_cap_kw as set) is $12,000 (short by $4,000)",
        "power cap too low: site.power_cap_kw = 1.0 kW; the smallest that admits a plan (with "
        "budget.capex_usd as set) is 2.2 kW (short by 1.2 kW)",
    ]


def test_limits_acting_together():
    # Three limits, any two of which leave no plan: capex (buy A or B), total budget (rules out
    # renting) and the power cap. Only A (1 kW) fits the budget; only B fits the cap.
    a = gpu("ga", price=1_000, tdp=1_000)
    b = gpu("gb", price=3_000, tdp=100)
    inputs = problem(
        months=1,
        capex=3_500,
        total=3_500,
        power_cap=2.5,
        gpus=[a, b],
        offers=[offer("cloud-ga", "ga", 10.0)],
        serve=[serve_workload(rps=3.0)],
    )
    c = candidates(inputs, serve={"chat": [("ga", 1, 1.0), ("gb", 1, 1.0)]})
    lines = diagnose_infeasible(inputs, cands=c)
    assert len(lines) >= 1
    assert all("too small" in x or "too low" in x or "act together" in x for x in lines)


def test_licence_with_rental_is_feasible_and_probe_relaxes_inputs():
    # Renting a GeForce card from a provider is allowed: the licence case needs "no offers".
    cheap = gpu("geforce", price=100, consumer=True)
    inputs = problem(
        months=1,
        gpus=[cheap],
        offers=[offer("cloud-geforce", "geforce", 0.5)],
        serve=[serve_workload(rps=2.0)],
    )
    c = candidates(inputs, serve={"chat": [("geforce", 1, 1.0)]})
    assert minimize(relaxed(inputs, True, True, True), c, "total").value == pytest.approx(
        2 * 0.5 * 730
    )
    no_offer = problem(months=1, gpus=[cheap], serve=[serve_workload(rps=2.0)])
    c2 = candidates(no_offer, serve={"chat": [("geforce", 1, 1.0)]})
    lines = diagnose_infeasible(no_offer, cands=c2)
    assert (
        len(lines) == 1
        and "GeForce" in lines[0]
        and "no trusted rental offer rents geforce" in lines[0]
    )


# ---------------------------------------------------------------- explain on a feasible problem

SMALL = """
name: small feasible
horizon: {start: 2027-01, months: 3}
budget: {capex_usd: 30000}
site: {power_usd_per_kwh: 0.12, power_cap_kw: 1.0}
gpus: [l4, a100-pcie-80gb]
offers:
  files: []
  extra:
    - {id: cloud-l4, provider: cloud, gpu: l4, kind: on_demand, usd_per_gpu_hour: 0.9,
       gpus_per_instance: 8, source: test, as_of: 2026-11}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 20000, requests_per_user_per_day: 20, utilization: 0.5}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
"""


def test_explain_feasible_plan():
    inputs = load_problem_text(SMALL, "small.yaml")
    ex = explain_plan(inputs)
    plan = plan_problem(inputs)
    assert ex.total_usd == pytest.approx(plan.totals.total_usd, rel=1e-3)
    text = "\n".join(ex.limits + ex.whatif + ex.duals)
    assert "budget_capex:" in text and "power_cap:" in text
    assert any(x.startswith("budget_capex +10%") for x in ex.whatif)
    assert any(x.startswith("power_cap +10%") for x in ex.whatif)
    assert any(x.startswith("without l4") for x in ex.whatif)
    assert any(x.startswith("without a100-pcie-80gb") for x in ex.whatif)
    assert any(d.startswith("serve_demand_chat_2027_") for d in ex.duals)
    # relaxing a limit never makes the plan dearer; removing a used GPU type never cheaper
    for line in ex.whatif:
        if "+10%" in line and "PV $" in line:
            assert "(+$" not in line or "(+$0," in line or "within the solver gap" in line


def test_cli_explain_feasible(tmp_path):
    # the small feasible problem above (proven optimal in ~0.1 s; problems/finetune_lab.yaml
    # took ~1.5 s): the command's path, whatever the problem
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    r = CliRunner().invoke(cli, ["explain", str(path), "--no-resolve"])
    assert r.exit_code == 0, r.output
    assert "limits at the optimum:" in r.output and "budget_capex:" in r.output


def test_relaxing_re_solves_start_from_the_plan(monkeypatch):
    """A variant that only relaxes a limit keeps the plan feasible: its re-solve starts from
    the plan's values (so HiGHS holds it from the first node and never returns a dearer plan);
    a variant that removes a GPU type does not (the plan may break it)."""
    import planner.analysis.explain as explain

    seen: list[tuple[bool, int]] = []  # (a start was given, variables it names)
    real = explain.solve_model

    def spy(m, *args, start=None, **kwargs):
        seen.append((start is not None, len(start or {})))
        return real(m, *args, start=start, **kwargs)

    monkeypatch.setattr(explain, "solve_model", spy)
    inputs = load_problem_text(SMALL, "small.yaml")
    ex = explain_plan(inputs)
    plus = [x for x in ex.whatif if "+10%" in x]
    without = [x for x in ex.whatif if x.startswith("without") and "->" in x]
    assert plus and without
    assert sum(given for given, _ in seen) >= len(plus)
    assert any(not given for given, _ in seen)  # the GPU types' re-solves
    assert all(n > 0 for given, n in seen if given)
