"""Calibration honesty for training hours: leave-one-out over the published full runs, and the
shipped factors are the fit (not tuned by hand)."""

from __future__ import annotations

import pytest

from planner.physics.calibrate_training import format_report, load_runs, summarize
from planner.physics.calibration_values import default_calibration

RUNS = load_runs()
ROWS, SUMMARY = summarize(RUNS)


def test_leave_one_out_meets_the_targets():
    print("\n" + format_report(ROWS, SUMMARY))  # the table, in the test log (pytest -s)
    assert len(RUNS) >= 15
    assert SUMMARY.median_abs_error <= 0.15
    assert SUMMARY.coverage >= 0.70
    assert SUMMARY.band_ratio <= 2.5


def test_shipped_factors_are_the_fit():
    real = default_calibration().realized
    for stack, fitted in SUMMARY.production.items():
        assert real.stacks.profile(stack).production == pytest.approx(fitted, abs=1e-3), stack
    assert real.log_sd.value == pytest.approx(SUMMARY.log_sd, abs=1e-3)


def test_stacks_are_ordered_as_their_regimes():
    """A mature stack loses less than a typical one, a first run most (per GPU-hour)."""
    cal = default_calibration().realized.stacks
    mature, typical, first = (cal.profile(s) for s in ("mature", "typical", "first-run"))
    assert mature.failure_rate_per_gpu_hour < typical.failure_rate_per_gpu_hour
    assert typical.failure_rate_per_gpu_hour < first.failure_rate_per_gpu_hour
    assert first.production < typical.production


def test_realized_hours_exceed_the_benchmark_steady_state():
    """The sign of the old error: real runs consume more than the benchmark steady state."""
    assert all(r.gpu_hours > 0 and r.steady_gpu_hours > 0 for r in RUNS)
    assert sum(r.gpu_hours > r.steady_gpu_hours for r in RUNS) >= 0.8 * len(RUNS)
