"""Fit and check the realized-throughput layer on published full training runs.

``python -m planner.physics.calibration.training`` prints, for every usable run of
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

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.base.yamlio import load_yaml
from planner.inputs.catalog import CATALOG_DIR, GpuSpec, ModelArch, load_gpus, load_models
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.realized import STACKS, goodput, quantile_factor
from planner.physics.train import derive_model, estimate_train, h800_from, llama_like

RUNS_PATH = CATALOG_DIR / "sources" / "training-runs.yaml"
MODEL_IDS = {
    "llama3-8b": "llama-3-8b",
    "llama3-70b": "llama-3-70b",
    "llama31-8b": "llama-3-8b",
    "llama31-70b": "llama-3-70b",
}
# The publisher of each run of training-runs.yaml (leave-one-source-out); held-out files
# carry ``lab`` in their labels.
LABS = {
    "llama3-8b": "meta", "llama3-70b": "meta", "llama31-8b": "meta", "llama31-70b": "meta",
    "opt-175b": "meta", "falcon-7b": "tii", "falcon-40b": "tii", "falcon-180b": "tii",
    "glm-130b": "tsinghua", "bloomberggpt-50b": "bloomberg", "gpt-neox-20b": "eleutherai",
    "tinyllama-1.1b": "tinyllama", "stablelm-3b-4e1t": "stability", "phi-1.5": "microsoft",
    "smollm3-3b": "huggingface", "olmo3-7b": "ai2", "olmo3-32b": "ai2",
    "deepseek-llm-67b": "deepseek",
}  # fmt: skip
THROUGHPUT = "throughput"  # the fit group of basis-T runs (steady state of a production run)
HELDOUT_PATH = CATALOG_DIR / "sources" / "training-runs-heldout.yaml"
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
    lab: str = ""  # the publisher (leave-one-source-out drops a lab's runs together)

    @property
    def group(self) -> str:
        """What the run's hours are fitted with: its stack's production factor, or for hours
        derived from throughput (basis T: no failures, evaluations or stalls inside) the
        steady-state factor of every such run, :data:`THROUGHPUT`."""
        return THROUGHPUT if self.basis == "T" else self.stack

    @property
    def production(self) -> float:
        """The production factor this run implies: steady / (consumed x goodput)."""
        return self.steady_gpu_hours / (self.gpu_hours * self.goodput)


@functools.cache
def _catalog_gpus() -> dict[str, GpuSpec]:
    """The shipped GPU catalog, read once per process (its specs are frozen): every run asked
    for its GPU, and reading the catalog per run cost ~3 s of each test process's collection."""
    return load_gpus()


def run_gpu(gpu_id: str) -> GpuSpec:
    """The catalog GPU, or the H800 (absent from the purchase catalog) derived from the H100
    SXM with its 400 GB/s NVLink (:func:`planner.physics.train.h800_from`)."""
    gpus = _catalog_gpus()
    if gpu_id == "h800" and "h800" not in gpus:
        return h800_from(gpus["h100-sxm"])
    return gpus[gpu_id]


def load_all_runs(calib: Calibration | None = None) -> list[Run]:
    """Every usable published dense run: training-runs.yaml and the held-out file (the shipped
    factors are fitted on all of them; :mod:`benchmarks.training_calibration` also reports the
    held-out file predicted from a fit on the first alone)."""
    return load_runs(RUNS_PATH, calib) + load_runs(HELDOUT_PATH, calib)


@functools.lru_cache(maxsize=4)
def throughput_factor(calib: Calibration | None = None) -> float:
    """The steady-state factor of throughput-derived (T) dense runs, fitted on all of them:
    what MoE runs whose hours are T (DeepSeek's) are predicted with."""
    return fit_production(load_all_runs(calib), THROUGHPUT)


def _run_model(row: dict, label: dict, models: dict) -> ModelArch:
    """The run's architecture: a catalog id (``label.model`` or :data:`MODEL_IDS`), the shape
    in ``label.arch`` (layers, hidden, heads, kv_heads, intermediate, vocab), or a Llama-like
    model of the published size."""
    params = float(row["params_b"]) * 1e9
    mid = label.get("model") or MODEL_IDS.get(row["id"], "")
    if mid in models:
        return models[mid]
    if arch := label.get("arch"):
        return llama_like(row["id"], params, *(int(x) for x in arch))
    return derive_model(params)


def load_runs(path: Path = RUNS_PATH, calib: Calibration | None = None) -> list[Run]:
    """The usable runs (not ``exclude``) with their steady-state predictions."""
    calib = calib or default_calibration()
    data = load_yaml(path).data
    labels: dict[str, Any] = data.get("labels", {})
    models = load_models()
    out = []
    for row in data["runs"]:
        if row.get("exclude"):
            continue
        label = labels[row["id"]]
        n = int(row.get("gpus") or label["gpus_assumed"])
        model = _run_model(row, label, models)
        gpu = run_gpu(row["gpu"])
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
                est.steady_wall_hours * n, good, label.get("lab") or LABS.get(row["id"], row["id"]))
        )  # fmt: skip
    return out


def fit_production(runs: Sequence[Run], stack: str) -> float:
    """Median (geometric) production factor of the runs of ``stack`` (a fit group: a stack's
    W and M runs, or :data:`THROUGHPUT` for every T run)."""
    logs = [math.log(r.production) for r in runs if r.group == stack]
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
        production = fit_production(others, run.group)
        rows.append(LooRow(run, run.steady_gpu_hours / (production * run.goodput)))
    return rows


def leave_one_source_out(runs: Sequence[Run]) -> list[LooRow]:
    """Predict each run from a fit on the other publishers' runs (same stack; a stack with no
    run left falls back to every other publisher's runs)."""
    rows = []
    for run in runs:
        others = [r for r in runs if r.lab != run.lab]
        try:
            production = fit_production(others, run.group)
        except ValueError:
            production = math.exp(statistics.median(math.log(r.production) for r in others))
        rows.append(LooRow(run, run.steady_gpu_hours / (production * run.goodput)))
    return rows


def predict_heldout(fit: Sequence[Run], heldout: Sequence[Run]) -> list[LooRow]:
    """Each held-out run predicted with the production factors fitted on ``fit`` only."""
    return [
        LooRow(r, r.steady_gpu_hours / (fit_production(fit, r.group) * r.goodput)) for r in heldout
    ]


@dataclass(frozen=True)
class Summary:
    median_abs_error: float
    max_abs_error: float
    log_sd: float
    coverage: float  # share of left-out runs inside their P10-P90 band
    band_ratio: float  # p90 / p10
    production: dict[str, float]
    throughput: float = math.nan  # the steady-state factor of basis-T runs


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
        throughput=fit_production(runs, THROUGHPUT),
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
        "fitted production factors: "
        + ", ".join(f"{k} {v:.3f}" for k, v in s.production.items())
        + f"; throughput-derived (T) runs {s.throughput:.3f}"
    )
    return "\n".join(out)


def main() -> None:
    rows, summary = summarize(load_all_runs())
    print(format_report(rows, summary))


if __name__ == "__main__":
    main()
