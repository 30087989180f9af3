"""Fit and check the realized-throughput layer on published full training runs.

``python -m planner.physics.calibrate_training`` prints, for every usable run of
``catalogs/sources/training-runs.yaml``, the GPU-hours the run consumed, the planner's prediction
with that run left out of the fit (leave-one-out), the error and whether the P10-P90 band
covered it, then the fitted factors. ``tests/test_training_calibration.py`` holds the targets.

The fit, per stack profile (:mod:`planner.physics.realized`): a run's *production factor* is
``steady-state hours / (consumed hours x goodput(GPUs))`` (goodput 1 for rows whose hours were
derived from throughput, basis T: their failures are not in the hours); the stack's factor is
the median (in log) over its runs. The band's ``log_sd`` is the standard deviation of the leave-one-out log
errors. Rows marked ``exclude`` stay out (the file says why).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.base.yamlio import load_yaml
from planner.inputs.catalog import CATALOG_DIR, load_gpus, load_models
from planner.physics.calibration_values import Calibration, default_calibration
from planner.physics.realized import STACKS, goodput, quantile_factor
from planner.physics.train import derive_model, estimate_train

RUNS_PATH = CATALOG_DIR / "sources" / "training-runs.yaml"
GPU_IDS = {"h800": "h100-sxm"}  # H800 = H100 compute with reduced NVLink
MODEL_IDS = {
    "llama3-8b": "llama-3-8b",
    "llama3-70b": "llama-3-70b",
    "llama31-8b": "llama-3-8b",
    "llama31-70b": "llama-3-70b",
}
Z90 = quantile_factor(0.9, 1.0)  # exp(1.2816): the P90 factor per unit of log_sd


@dataclass(frozen=True)
class Run:
    """One published run with what the physics predicts for its steady state."""

    id: str
    stack: str
    basis: str
    gpus: int
    gpu_hours: float  # as consumed (published)
    steady_gpu_hours: float  # the planner's benchmark steady state for the same job
    goodput: float  # the stack's failure model at this GPU count

    @property
    def production(self) -> float:
        """The production factor this run implies: steady / (consumed x goodput)."""
        return self.steady_gpu_hours / (self.gpu_hours * self.goodput)


def load_runs(path: Path = RUNS_PATH, calib: Calibration | None = None) -> list[Run]:
    """The usable runs (not ``exclude``) with their steady-state predictions."""
    calib = calib or default_calibration()
    data = load_yaml(path).data
    labels: dict[str, Any] = data.get("labels", {})
    gpus, models = load_gpus(), load_models()
    out = []
    for row in data["runs"]:
        if row.get("exclude"):
            continue
        label = labels[row["id"]]
        n = int(row.get("gpus") or label["gpus_assumed"])
        model = models.get(MODEL_IDS.get(row["id"], "")) or derive_model(
            float(row["params_b"]) * 1e9
        )
        gpu = gpus[GPU_IDS.get(row["gpu"], row["gpu"])]
        est = estimate_train(
            model, gpu, n, float(row["tokens"]), "full", calib, int(row["seq_len"])
        )
        # T rows count hours from throughput or step time: failures and restarts are not in
        # them, so they inform the steady-state (production) factor only; W and M rows carry
        # the failure losses, which the stack's goodput model removes before fitting.
        good = (
            1.0
            if row["basis"] == "T"
            else goodput(n, calib.realized.stacks.profile(label["stack"]))
        )
        out.append(
            Run(row["id"], label["stack"], row["basis"], n, float(row["gpu_hours"]),
                est.steady_wall_hours * n, good)
        )  # fmt: skip
    return out


def fit_production(runs: Sequence[Run], stack: str) -> float:
    """Median (geometric) production factor of the runs of ``stack``."""
    logs = [math.log(r.production) for r in runs if r.stack == stack]
    if not logs:
        raise ValueError(f"no run to fit stack {stack!r}")
    return math.exp(statistics.median(logs))


@dataclass(frozen=True)
class LooRow:
    run: Run
    predicted_gpu_hours: float

    @property
    def log_error(self) -> float:
        return math.log(self.predicted_gpu_hours / self.run.gpu_hours)

    @property
    def error(self) -> float:
        return self.predicted_gpu_hours / self.run.gpu_hours - 1.0


def leave_one_out(runs: Sequence[Run]) -> list[LooRow]:
    """Predict each run from a fit on the others (same stack)."""
    rows = []
    for i, run in enumerate(runs):
        others = [r for j, r in enumerate(runs) if j != i]
        production = fit_production(others, run.stack)
        rows.append(LooRow(run, run.steady_gpu_hours / (production * run.goodput)))
    return rows


@dataclass(frozen=True)
class Summary:
    median_abs_error: float
    max_abs_error: float
    log_sd: float
    coverage: float  # share of left-out runs inside their P10-P90 band
    band_ratio: float  # p90 / p10
    production: dict[str, float]


def summarize(runs: Sequence[Run]) -> tuple[list[LooRow], Summary]:
    """Leave-one-out rows and the figures the README and the test report."""
    rows = leave_one_out(runs)
    logs = [r.log_error for r in rows]
    sd = statistics.pstdev(logs)
    inside = [abs(x) <= math.log(Z90) * sd for x in logs]
    return rows, Summary(
        median_abs_error=statistics.median(abs(r.error) for r in rows),
        max_abs_error=max(abs(r.error) for r in rows),
        log_sd=sd,
        coverage=sum(inside) / len(inside),
        band_ratio=quantile_factor(0.9, sd) / quantile_factor(0.1, sd),
        production={s: fit_production(runs, s) for s in STACKS},
    )


def format_report(rows: Sequence[LooRow], summary: Summary) -> str:
    """The leave-one-out table and the fitted factors, as text."""
    out = [f"{'run':18} {'stack':9} {'basis':5} {'GPUs':>6} {'published GPU-h':>16} "
           f"{'predicted (LOO)':>16} {'error':>7}"]  # fmt: skip
    for r in rows:
        out.append(
            f"{r.run.id:18} {r.run.stack:9} {r.run.basis:5} {r.run.gpus:>6} "
            f"{r.run.gpu_hours:>16,.0f} {r.predicted_gpu_hours:>16,.0f} {r.error:>+7.1%}"
        )
    s = summary
    out.append(
        f"median |error| {s.median_abs_error:.1%}, max {s.max_abs_error:.1%}; P10-P90 band covers "
        f"{s.coverage:.0%} of left-out runs; band width p90/p10 {s.band_ratio:.2f} "
        f"(log_sd {s.log_sd:.3f})"
    )
    out.append(
        "fitted production factors: " + ", ".join(f"{k} {v:.3f}" for k, v in s.production.items())
    )
    return "\n".join(out)


def main() -> None:
    rows, summary = summarize(load_runs())
    print(format_report(rows, summary))


if __name__ == "__main__":
    main()
