"""``--solver scip``: the exact model (every rented replica integer) solved by SCIP agrees with
brute force and with HiGHS, gives whole replicas, and its plans pass the verifier; the buy
margins of ``planner solve`` stay inside the time limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from planner.analysis.explain import buy_margins
from planner.base.tolerances import whole
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.plan.extract import extract_plan
from planner.plan.make import plan_problem
from planner.verify import verify_plan
from tests.factories import candidates, gpu, offer, problem, serve_workload
from tests.test_properties import SETTINGS, _brute_serving, _build_serving, serving_case

pytest.importorskip("pyscipopt")
ROOT = Path(__file__).resolve().parent.parent


@settings(max_examples=15, **SETTINGS)
@given(serving_case())
def test_scip_optimum_matches_brute_force(case):
    inputs, cands = _build_serving(case)
    expected = _brute_serving(case)
    res = solve_model(build_model(inputs, cands), solver="scip", time_limit=30, gap=1e-9)
    if expected is None:
        assert res.status == "infeasible", (res, case)
    else:
        assert res.status == "optimal", (res, case)
        assert res.objective == pytest.approx(expected, rel=1e-6, abs=1e-4), case


def test_scip_plan_is_whole_verified_and_as_cheap_as_highs():
    """problems/finetune_lab.yaml: SCIP proves its optimum; the plan passes the verifier and
    costs what HiGHS's does within both gaps."""
    from tests.solved import solved

    # HiGHS's plan at the file's own options (60 s): the shared solve test_problems reads too
    inputs, highs = solved(ROOT / "problems" / "finetune_lab.yaml")
    assert highs.solver == "highs"
    scip = plan_problem(inputs, solver="scip", time_limit=60)
    assert scip.status == "optimal" and scip.solver == "scip"
    assert verify_plan(inputs, scip) == []
    tol = inputs.problem.solver.gap * 2 + 1e-9
    assert scip.objective_usd == pytest.approx(highs.objective_usd, rel=tol)
    assert all(whole(a.replicas) for a in scip.serve_allocations)


def test_scip_result_leaves_the_rentals_continuous_in_the_model():
    """The exact model is SCIP's alone: the model's relaxed rentals are restored after it."""
    inputs = problem(
        months=3,
        gpus=[gpu(price=10_000.0)],
        offers=[offer("cloud-g1", "g1", 2.0)],
        serve=[serve_workload(rps=2.5, util=1.0)],
    )
    m = build_model(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    before = {v.name: v.cat for v in m.prob.variables()}
    res = solve_model(m, solver="scip", time_limit=30, gap=1e-9)
    assert res.status == "optimal"
    assert {v.name: v.cat for v in m.prob.variables()} == before
    assert all(whole(v.varValue) for v in m.q.values())


def _one_gpu_bought():
    """The capex-limited case of tests/test_model_tiny.py: one GPU bought, two rented."""
    inputs = problem(
        months=12,
        capex=15_000,
        gpus=[gpu(price=10_000)],
        offers=[offer("cloud-g1", "g1", 2.0)],
        serve=[serve_workload(rps=3.0)],
    )
    m = build_model(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    return inputs, extract_plan(m, solve_model(m, solver="highs", time_limit=30))


def test_buy_margins_left_no_time_say_so_without_solving():
    """``planner solve`` gives the margins what its time limit leaves; with too little, the
    Risks line says they were not computed and where to get them (no re-solve is started)."""
    inputs, plan = _one_gpu_bought()
    assert plan.purchases
    (line,) = buy_margins(inputs, plan, time_limit=0.3)
    assert line.startswith("not computed") and "planner explain" in line


def test_margins_of_an_unproven_plan_are_not_computed():
    """A plan far from proven (gap above the limit) gets no margins: comparing two unproven
    plans is noise; a proven one in the same time gets them as `planner explain` words them."""
    from planner.analysis.explain import margins_for

    inputs, plan = _one_gpu_bought()
    loose = plan.model_copy(update={"gap": 0.05})
    (line,) = margins_for(inputs, loose, "auto", 60.0, 0.01)
    assert line.startswith("not computed") and "5.0%" in line
