"""Spot is opt-in, and its overhead comes from the restart model (a preemption is a failure
with a known rate), not a flat percentage."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.inputs.problem import load_problem
from planner.optimize.candidates import spot_overhead_for
from planner.physics.calibration.values import default_calibration
from planner.physics.realized import spot_overhead
from planner.plan.make import plan_problem
from planner.verify import verify_plan

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "problems" / "2m_budget.yaml"


def _with_spot(tmp_path: Path, spot: dict, serve: bool = True) -> Path:
    data = yaml.safe_load(REFERENCE.read_text())
    data["workloads"]["train"][0]["spot"] = spot
    if not serve:
        del data["workloads"]["serve"]
    p = tmp_path / "spot.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_spot_is_off_unless_asked_for():
    from tests.solved import solved

    inputs, plan = solved(REFERENCE)
    assert all(not j.spot.allowed for j in inputs.problem.workloads.train)
    assert not [r for r in plan.rentals if r.kind == "spot"]


def test_spot_when_allowed_pays_the_restart_model_overhead(tmp_path):
    # the reference's training job alone (with its chat service the solve took ~19 s; spot
    # concerns the training job only)
    inputs = load_problem(_with_spot(tmp_path, {"allowed": True, "max_share": 0.5}, serve=False))
    plan = plan_problem(inputs, gap=0.03)  # any good plan trains on spot; the proof is not needed
    assert verify_plan(inputs, plan) == []
    job = inputs.problem.workloads.train[0]
    spot_rows = [a for a in plan.train_allocations if inputs.offers[a.source].kind == "spot"]
    assert spot_rows, "the cheaper spot capacity is used when allowed"
    for a in spot_rows:
        ovh = spot_overhead_for(job, inputs.offers[a.source], a.gpus)
        assert 0 < ovh < 0.5
        assert a.progress_hours == pytest.approx(a.wall_hours / (1 + ovh), rel=1e-6)


def test_explicit_overhead_overrides_the_model(tmp_path):
    inputs = load_problem(_with_spot(tmp_path, {"allowed": True, "overhead": 0.3}))
    job = inputs.problem.workloads.train[0]
    offer = next(o for o in inputs.offers.values() if o.kind == "spot")
    assert spot_overhead_for(job, offer, 96) == 0.3


def test_more_instances_more_preemptions():
    prof = default_calibration().realized.stacks.profile("typical")
    small, large = (spot_overhead(n, 2.7e-4, prof, 1.0) for n in (1, 64))
    assert 0 < small < large
