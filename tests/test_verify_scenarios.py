"""``planner verify`` checks two-stage plans (issue 28).

The three-forecast fixture (tests/fixtures/scenarios/small.yaml) is solved once; each test
tampers with an independent copy (a JSON round trip: in the solver's plan the top level and the
scenarios' plans share rows) and checks that the verifier names the scenario at fault.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.base.errors import ExitCode
from planner.cli import cli
from planner.optimize.stochastic import Risk, cvar, risk_value
from planner.plan.data import Plan, write_json
from planner.verify import scenarios as vs
from planner.verify import verify_plan, verify_report

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "fixtures" / "scenarios" / "small.yaml"


@pytest.fixture(scope="module")
def solved():
    from tests.solved import solved as shared

    inputs, plan = shared(SMALL)  # solved once per test process
    assert [s.name for s in plan.scenarios] == ["base", "slow", "viral"]
    return inputs, plan


def _copy(plan: Plan) -> Plan:
    """A copy sharing no rows with ``plan`` (nor between its own sub-plans)."""
    return Plan.model_validate_json(plan.to_json())


def _has(errs: list[str], *parts: str) -> bool:
    return any(all(p in e for p in parts) for e in errs)


def _scenario(plan: Plan, name: str):
    return next(s for s in plan.scenarios if s.name == name)


# ---------------------------------------------------------------- intact


def test_the_solvers_plan_verifies(solved):
    inputs, plan = solved
    rep = verify_report(inputs, plan)
    assert rep.errors == []
    single = verify_report(inputs.scenarios[0].inputs, plan.scenarios[0].plan)
    assert rep.checks > 3 * single.checks  # every scenario's plans were checked too
    assert verify_plan(inputs, _copy(plan)) == []


def test_the_measure_is_the_solvers():
    """The verifier's own risk measure agrees with the solver's on a few distributions."""
    cases = [
        ([100.0, 200.0, 50.0], [0.5, 0.3, 0.2]),
        ([7.0], [1.0]),
        ([300.0, 300.0, 10.0, 900.0], [0.1, 0.2, 0.3, 0.4]),
    ]
    for costs, probs in cases:
        for alpha in (0.1, 0.5, 0.9, 0.99):
            assert vs.cvar(costs, probs, alpha) == pytest.approx(cvar(costs, probs, alpha))
            for how in ("expected", "cvar", "worst_case"):
                want = risk_value(costs, probs, Risk(how, alpha, 0.7))
                assert vs.measure(costs, probs, how, alpha, 0.7) == pytest.approx(want)


# ---------------------------------------------------------------- one scenario's plans


def test_changed_purchase_in_a_scenarios_plan(solved):
    inputs, plan = solved
    bad = _copy(plan)
    p = _scenario(bad, "slow").plan.purchases[0]
    p.count += p.count // max(p.nodes, 1)  # one more server's worth: still whole nodes
    p.nodes += 1
    errs = verify_plan(inputs, bad)
    assert _has(errs, "scenario 'slow' plan: its purchases differ", "first stage")
    assert _has(errs, "scenario 'slow' plan: ")  # and its own checks (capex, fleet) fail


def test_changed_rental_cost_in_a_scenarios_plan(solved):
    inputs, plan = solved
    bad = _copy(plan)
    _scenario(bad, "viral").plan.rentals[0].usd += 1000.0
    errs = verify_plan(inputs, bad)
    assert _has(errs, "scenario 'viral' plan: rental ", "!=")


def test_a_base_plan_with_other_purchases(solved):
    inputs, plan = solved
    bad = _copy(plan)
    base = _scenario(bad, "viral").base_plan
    assert base is not None
    base.purchases[0].month = bad.months[-1]
    errs = verify_plan(inputs, bad)
    assert _has(errs, "scenario 'viral' base plan: its purchases differ", "own plan's")


def test_nested_scenarios_are_refused(solved):
    inputs, plan = solved
    bad = _copy(plan)
    slow = _scenario(bad, "slow")
    slow.plan.scenarios = [_copy(plan).scenarios[1]]
    errs = verify_plan(inputs, bad)
    assert _has(errs, "scenario 'slow' plan: holds 1 scenarios of its own")


# ---------------------------------------------------------------- figures and totals


def test_regret_off_by_100(solved):
    inputs, plan = solved
    bad = _copy(plan)
    _scenario(bad, "slow").regret_usd += 100.0
    assert _has(verify_plan(inputs, bad), "scenario 'slow': regret_usd")


def test_own_dearer_than_cost(solved):
    inputs, plan = solved
    bad = _copy(plan)
    s = _scenario(bad, "viral")
    s.own_usd = s.cost_usd + 5000.0
    errs = verify_plan(inputs, bad)
    assert _has(errs, "scenario 'viral': own_usd", "exceeds cost_usd")
    assert _has(errs, "scenario 'viral': own_usd", "own plan's objective")


@pytest.mark.parametrize("key", ["expected_usd", "vss_usd", "evpi_usd", "worst_usd", "risk_usd"])
def test_two_stage_total_off(solved, key):
    inputs, plan = solved
    bad = _copy(plan)
    setattr(bad.totals, key, getattr(bad.totals, key) + 250.0)
    errs = verify_plan(inputs, bad)
    assert _has(errs, f"totals.{key}", "recomputed from the scenarios", "'viral'")


def test_a_cheaper_alternative_is_caught(solved):
    inputs, plan = solved
    bad = _copy(plan)
    s = _scenario(bad, "viral")
    s.fleet_costs_usd = [x.cost_usd - 10_000.0 for x in bad.scenarios]
    assert _has(verify_plan(inputs, bad), "scenario 'viral': its own purchases cost")


def test_risk_terms_are_the_problems(solved):
    inputs, plan = solved
    bad = _copy(plan)
    assert bad.risk is not None and bad.risk.measure == "expected"
    bad.risk.measure = "worst_case"
    assert _has(verify_plan(inputs, bad), "plan risk terms", "'expected', 0.9, 1.0")


# ---------------------------------------------------------------- the scenarios themselves


def test_changed_probability(solved):
    inputs, plan = solved
    bad = _copy(plan)
    _scenario(bad, "slow").probability = 0.35
    assert _has(verify_plan(inputs, bad), "scenario 'slow': probability 0.35", "0.3 in the problem")


def test_dropped_scenario(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.scenarios.pop()
    assert _has(verify_plan(inputs, bad), "missing: 'viral'")


def test_plan_and_problem_must_both_have_scenarios(solved):
    inputs, plan = solved
    plain = dataclasses.replace(inputs, scenarios=())
    assert _has(verify_plan(plain, plan), "the plan's scenarios ('base'", "problem's (none)")
    bad = _copy(plan)
    bad.scenarios = []
    assert _has(verify_plan(inputs, bad), "the plan's scenarios (none)", "'viral'")


def test_top_level_is_the_first_scenarios_plan(solved):
    inputs, plan = solved
    bad = _copy(plan)
    p = bad.purchases[0]
    p.count += p.count // max(p.nodes, 1)
    p.nodes += 1
    errs = verify_plan(inputs, bad)
    assert _has(errs, "differs from scenario 'base' plan", "purchases")


# ---------------------------------------------------------------- the CLI


def test_cli_verify_a_tampered_two_stage_plan(solved, tmp_path):
    """(The command line passing the solver's plan of this problem: test_scenarios_plan's
    test_the_command_line_writes_every_scenario_and_names_its_problem_file.)"""
    _, plan = solved
    bad = _copy(plan)
    _scenario(bad, "slow").regret_usd += 100.0
    badp = tmp_path / "bad.json"
    write_json(bad, badp)
    r = CliRunner().invoke(cli, ["verify", str(SMALL), str(badp)])
    assert r.exit_code == ExitCode.VERIFY_FAILED == 4
    assert "FAILED" in r.output and "scenario 'slow': regret_usd" in r.output
    assert "Traceback" not in r.output
