"""One set of tolerances (planner.base.tolerances) for the solver's plan, the plan's own flags and
the verifier: a plan driven to a boundary is judged the same way by every stage."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.base import tolerances as tol
from planner.inputs.problem import month_index
from planner.physics.demand import HOURS_PER_MONTH as H
from planner.verify import VerifyContext, check_training

LAB = Path(__file__).resolve().parent.parent / "problems" / "finetune_lab.yaml"


@pytest.fixture(scope="module")
def lab():
    """finetune_lab at its own options: the shared solve (tests/solved.py) test_problems and
    test_scip read too, not a solve of its own."""
    from tests.solved import solved

    return solved(LAB)


def _target(inputs, job) -> float:
    start = inputs.problem.horizon.start
    a, b = month_index(start, job.window.start), month_index(start, job.window.deadline)
    return (b - a + 1) * H


def _stretched(plan, job: str, wall: float):
    """The plan with ``job``'s allocations scaled so its wall hours sum to ``wall``."""
    rows = [al for al in plan.train_allocations if al.workload == job]
    now = sum(al.wall_hours for al in rows)
    f = wall / now
    allocs = [
        al.model_copy(
            update={"wall_hours": al.wall_hours * f, "progress_hours": al.progress_hours * f}
        )
        if al.workload == job
        else al
        for al in plan.train_allocations
    ]
    return plan.model_copy(update={"train_allocations": allocs})


def _misses_target(inputs, plan, job: str) -> bool:
    """Whether any training check says the job overruns its window (or a month of it)."""
    found = check_training(VerifyContext.from_inputs(inputs, plan))
    return any(f.message.startswith(f"training {job}") and "wall hours" in f.message for f in found)


@settings(max_examples=25, deadline=None)
@given(over=st.floats(min_value=-0.9, max_value=3.0))
def test_a_plan_at_its_window_is_judged_by_the_shared_tolerance(lab, over):
    """Wall hours of ``target + over x slack``: accepted up to the slack, rejected past it,
    and the plan's own ``meets_target`` flag uses the same rule."""
    inputs, plan = lab
    job = next(
        j
        for j in inputs.problem.workloads.train
        if any(al.workload == j.name for al in plan.train_allocations)
    )
    target = _target(inputs, job)
    wall = target + over * tol.slack(target, tol.HOURS)
    bad = _stretched(plan, job.name, wall)
    assert _misses_target(inputs, bad, job.name) == (over > 1.0 + 1e-9)
    assert tol.at_most(wall, target, tol.HOURS) == (over <= 1.0 + 1e-9)


def test_the_intact_plan_meets_every_target(lab):
    inputs, plan = lab
    for j in inputs.problem.workloads.train:
        assert not _misses_target(inputs, plan, j.name)
        wr = next(w for w in plan.workloads if w.name == j.name)
        assert wr.meets_target == tol.at_most(
            wr.predicted["wall_hours"], wr.target["wall_hours"], tol.HOURS
        )
