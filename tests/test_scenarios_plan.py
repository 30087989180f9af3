"""Two-stage plans (issue 28): one purchase decision across demand scenarios.

Every property is checked on the small fixture (tests/fixtures/scenarios/small.yaml: a chat
service, 18 months, two GPU types; each scenario solves in well under a second), varied in
its text: the same problem without scenarios, with one, with more demand or probability.
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.base.errors import InfeasibleError
from planner.inputs.problem import load_problem_text
from planner.optimize.stochastic import Risk, risk_value
from planner.plan.data import Plan
from planner.plan.make import plan_problem

FIXTURE = Path(__file__).parent / "fixtures" / "scenarios" / "small.yaml"
TEXT = FIXTURE.read_text()
BODY = TEXT[: TEXT.index("scenarios:")]  # the problem without its scenarios
GAP = 0.001  # the fixture's solver gap (the default)


def scenarios_text(*rows: str, risk: str = "") -> str:
    body = BODY + "scenarios:\n" + "".join(f"  - {r}\n" for r in rows)
    return body + (f"risk: {risk}\n" if risk else "")


@functools.cache
def solve_text(text: str) -> Plan:
    inputs = load_problem_text(text, "small.yaml", FIXTURE.parent)
    return plan_problem(inputs, time_limit=60)


def three(viral: float = 3.0, p: tuple[float, float, float] = (0.5, 0.3, 0.2), risk: str = ""):
    return scenarios_text(
        f"{{name: base, probability: {p[0]}}}",
        f"{{name: slow, probability: {p[1]}, "
        "set: {workloads.serve.chat.traffic.growth_per_month: 0.0}}",
        f"{{name: viral, probability: {p[2]}, scale: {{serving_demand: {viral}}}}}",
        risk=risk,
    )


def purchases(plan: Plan) -> list[tuple]:
    return [(p.gpu, p.month, p.count, p.nodes) for p in plan.purchases]


def tol(value: float) -> float:
    """What two plans each optimal within the gap may differ by."""
    return 2 * GAP * abs(value) + 1.0


def test_one_scenario_of_probability_one_is_todays_plan():
    today = solve_text(BODY)
    one = solve_text(scenarios_text("{name: only, probability: 1.0}"))
    assert one.objective_usd == pytest.approx(today.objective_usd, abs=tol(today.objective_usd))
    assert purchases(one) == purchases(today)
    assert one.totals.expected_usd == pytest.approx(one.objective_usd)
    assert one.totals.vss_usd == 0 and one.totals.evpi_usd == 0
    assert [s.name for s in one.scenarios] == ["only"]


def test_purchases_are_shared_and_rentals_adapt():
    plan = solve_text(three())
    bought = [purchases(s.plan) for s in plan.scenarios]
    assert all(b == bought[0] for b in bought)
    assert purchases(plan) == bought[0]
    rentals = {s.name: s.plan.totals.rental_usd for s in plan.scenarios}
    assert rentals["viral"] > rentals["base"] > rentals["slow"]  # demand differs, so do rentals


def test_value_of_the_stochastic_solution_and_of_perfect_information():
    plan = solve_text(three())
    t = plan.totals
    probs = [s.probability for s in plan.scenarios]
    costs = [s.cost_usd for s in plan.scenarios]
    assert t.expected_usd == pytest.approx(sum(p * c for p, c in zip(probs, costs, strict=True)))
    assert t.worst_usd == pytest.approx(max(costs))
    assert t.vss_usd is not None and t.vss_usd >= -1e-6
    assert t.evpi_usd >= -1e-6
    for s in plan.scenarios:
        assert s.own_usd <= s.cost_usd + 1e-6
        assert s.regret_usd == pytest.approx(s.cost_usd - s.own_usd)
    # every forecast's own purchases, re-planned in every scenario (a small problem has the
    # time for all of them), cost at least as much
    for s in plan.scenarios:
        assert s.fleet_costs_usd is not None and None not in s.fleet_costs_usd, s.name
        alt = risk_value(s.fleet_costs_usd, probs, Risk())
        assert t.expected_usd <= alt + tol(alt)


def test_more_demand_never_lowers_the_expected_optimum():
    # the fixture's viral (x3, solved once for the tests above) against a viraler one
    low, high = solve_text(three(viral=3.0)), solve_text(three(viral=4.0))
    assert high.totals.expected_usd >= low.totals.expected_usd - tol(low.totals.expected_usd)


def test_probability_moved_to_a_scenario_with_more_demand_never_lowers_it():
    # viral has more demand than slow in every month: moving 0.2 from slow to viral
    before = solve_text(three(p=(0.5, 0.3, 0.2)))
    after = solve_text(three(p=(0.5, 0.1, 0.4)))
    assert after.totals.expected_usd >= before.totals.expected_usd - tol(before.totals.expected_usd)


# Raising a likely (0.8) one of two scenarios' demand, in a chain of solves shared by
# consecutive checks: below and across the other scenario's (1.0), steps of 0.25 and 1.0. (Was
# a seeded search of 4 pairs, 8 solves; its unlikely scenario raised by 1.0 above the others
# is test_more_demand_never_lowers_the_expected_optimum's viral, 0.2, from x3 to x4.)
LIKELY, RAISES = 0.8, (0.5, 0.75, 1.75)


def _two(p: float, s2: float) -> str:
    return scenarios_text(
        f"{{name: a, probability: {round(1 - p, 6)}}}",
        f"{{name: b, probability: {p}, scale: {{serving_demand: {s2}}}}}",
    )


def test_raising_a_likely_scenarios_demand_never_lowers_the_optimum():
    plans = [solve_text(_two(LIKELY, s)) for s in RAISES]
    for lo, hi in itertools.pairwise(plans):
        assert hi.totals.expected_usd >= lo.totals.expected_usd - tol(lo.totals.expected_usd)


@pytest.mark.parametrize("measure", ["{measure: worst_case}", "{measure: cvar, alpha: 0.8}"])
def test_risk_measures_are_the_objective(measure):
    plan = solve_text(three(risk=measure))
    probs = [s.probability for s in plan.scenarios]
    costs = [s.cost_usd for s in plan.scenarios]
    r = plan.risk
    assert plan.totals.risk_usd == pytest.approx(
        risk_value(costs, probs, Risk(r.measure, r.alpha, r.weight))
    )
    expected = solve_text(three())
    if r.measure == "worst_case":  # no plan for the expectation has a better worst case
        assert plan.totals.worst_usd <= expected.totals.worst_usd + tol(plan.totals.worst_usd)
    else:
        assert plan.totals.cvar_usd is not None


def test_a_scenario_that_cannot_be_met_is_exit_3_naming_it():
    text = scenarios_text(
        "{name: base, probability: 0.5}",
        "{name: broke, probability: 0.5, set: {budget.total_usd: 1000}}",
    )
    inputs = load_problem_text(text, "small.yaml", FIXTURE.parent)
    with pytest.raises(InfeasibleError, match="scenario 'broke'"):
        plan_problem(inputs, time_limit=30, diagnose=False)


def test_the_command_line_says_which_scenario_is_infeasible(tmp_path):
    from planner.cli import cli

    problem = tmp_path / "p.yaml"
    problem.write_text(
        scenarios_text(
            "{name: base, probability: 0.5}",
            "{name: broke, probability: 0.5, set: {budget.total_usd: 1000}}",
        )
    )
    res = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel"])
    assert res.exit_code == 3, res.output
    assert "scenario 'broke'" in res.output


def test_whatif_varies_a_scenarios_probability():
    """``--vary scenarios.viral.probability``: the others are rescaled to sum to 1, and more
    weight on the scenario with the most demand never lowers the expected optimum. (The sweep
    the command line runs, without its extra solve of the problem as written.)"""
    from planner.analysis.whatif import run_whatif

    wi = run_whatif(FIXTURE, ["scenarios.viral.probability=0.1,0.9"], workers=1, with_base=False)
    rows = [r.totals for r in wi.results]
    assert [r.params for r in wi.results] == [
        {"scenarios.viral.probability": 0.1},
        {"scenarios.viral.probability": 0.9},
    ]
    low, high = (r["expected_usd"] for r in rows)
    assert high >= low - tol(low)
    assert all(r["worst_usd"] >= r["expected_usd"] for r in rows)


def test_explain_says_it_explains_the_first_forecast():
    from planner.cli import cli

    res = CliRunner().invoke(cli, ["explain", str(FIXTURE), "--no-resolve", "--top", "1"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("explains scenario 'base' (the first forecast) alone")


def test_a_plan_handed_back_with_a_broken_scenario_plan_is_refused(tmp_path):
    """``report`` and ``verify`` read every scenario's plans with the checks of a plan."""
    import json

    from planner.base.errors import InputError
    from planner.plan.data import load_plan

    data = json.loads(solve_text(three()).to_json())
    data["scenarios"][1]["plan"]["months"] = data["scenarios"][1]["plan"]["months"][:3]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"scenarios\[1\]\.plan\.months"):
        load_plan(path)


def test_frames_have_one_row_of_figures_per_scenario():
    frames = solve_text(three()).frames()
    df = frames["scenarios"]
    assert list(df["name"]) == ["base", "slow", "viral"]
    assert "plan" not in df.columns and "regret_usd" in df.columns
    assert (df["cost_usd"] - df["own_usd"] - df["regret_usd"]).abs().max() < 1e-6
    assert solve_text(BODY).frames()["scenarios"].empty  # an ordinary plan has none


OWNED = "fleet:\n  owned:\n    - {gpu: a100-pcie-80gb, count: 64, bought: 2024-06, sell: allowed}\n"


def test_the_gap_is_never_below_the_truth_with_a_negative_constant():
    """Existing GPUs put a constant (running costs less resale) in the objective, and a
    fleet sold can make the cost negative: a plan stopped at a loose gap must still state a
    bound below the best plan known (the default, tighter solve's)."""
    rows = [
        "{name: base, probability: 0.5}",
        "{name: viral, probability: 0.5, scale: {serving_demand: 3.0}}",
    ]
    text = BODY + OWNED + "scenarios:\n" + "".join(f"  - {r}\n" for r in rows)
    inputs = load_problem_text(text, "small.yaml", FIXTURE.parent)
    loose = plan_problem(inputs, time_limit=60, gap=0.2)
    tight = plan_problem(inputs, time_limit=60)
    for plan in (loose, tight):
        value = plan.totals.risk_usd
        bound = value - abs(value) * plan.gap
        assert bound <= min(loose.totals.risk_usd, tight.totals.risk_usd) + 1e-6


def test_the_command_line_writes_every_scenario_and_names_its_problem_file(tmp_path):
    """One command-line solve of the fixture: every scenario in the JSON and the output, the
    plan (and each scenario's) names the problem file, and ``verify`` takes it as it is."""
    from planner.cli import cli

    problem, out = tmp_path / "p.yaml", tmp_path / "p.json"
    problem.write_text(TEXT)
    res = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel", "--json", str(out)])
    assert res.exit_code == 0, res.output
    plan = Plan.model_validate_json(out.read_text())
    assert [s.name for s in plan.scenarios] == ["base", "slow", "viral"]
    assert re.search(r"viral", res.output)
    assert plan.problem_file == str(problem)
    assert plan.scenarios[1].plan.problem_file == f"{problem} [scenario slow]"
    res = CliRunner().invoke(cli, ["verify", str(problem), str(out)])
    assert res.exit_code == 0 and "different version" not in res.output, res.output
