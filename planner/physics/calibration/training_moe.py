"""Mixture-of-experts training calibration: published MoE runs, the fit, leave-one-out.

A MoE run's GPU-hours are predicted as for a dense run (:mod:`planner.physics.calibration.training`:
steady state from the physics, then the stack's production factor and goodput), with FLOPs from
the active parameters and one more factor, ``moe_mfu_factor``: a run's factor is
``steady hours (factor 1) / (published hours x production x goodput)``; the fit is their
geometric mean, ``moe_log_sd`` the standard deviation of the leave-one-out log errors.
``python -m planner.physics.calibration.training_moe`` prints the table NOTES.md quotes.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from planner.inputs.catalog import load_models
from planner.physics.calibration.training import run_gpu, throughput_factor
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.realized import goodput
from planner.physics.train import estimate_train


@dataclass(frozen=True)
class MoeRun:
    """A published MoE pre-training run. ``basis`` as in training-runs.yaml: T = hours derived
    from throughput (no failure losses inside), M = model-card totals (losses inside)."""

    id: str
    model: str
    gpu: str
    gpus: int
    tokens: float
    precision: str
    seq_len: int
    gpu_hours: float
    basis: str
    stack: str
    source: str
    lab: str = ""  # who published it: leave-one-source-out drops a lab's runs together


RUNS: tuple[MoeRun, ...] = (
    MoeRun("deepseek-v3", "deepseek-v3", "h800", 2048, 14.8e12, "fp8", 4096, 2.664e6, "T",
           "mature",
           "DeepSeek-V3 Technical Report (arXiv:2412.19437) Table 1: pre-training 2,664K H800 "
           "GPU-hours for 14.8T tokens on 2,048 H800 (180K per trillion tokens), FP8 mixed "
           "precision (s3.3), DualPipe with EP64 across 8 nodes, PP16, ZeRO-1, no TP (s3.2)",
           "deepseek"),
    MoeRun("deepseek-v2", "deepseek-v2", "h800", 1024, 8.1e12, "bf16", 4096, 1.39968e6, "T",
           "mature",
           "DeepSeek-V2 (arXiv:2405.04434) s3.2.3: 172.8K H800 GPU-hours per trillion tokens, "
           "8.1T tokens, BF16; GPU count not stated (1,024 assumed)", "deepseek"),
    MoeRun("dots-llm1", "dots-llm1", "h800", 1024, 11.2e12, "bf16", 8192, 1.456e6, "M",
           "mature",
           "dots.llm1 Technical Report (arXiv:2506.05767): 11.2T pre-training tokens; 1.456M "
           "GPU-hours as transcribed by Epoch AI (H800 assumed there) [secondary]; GPU count "
           "not stated (1,024 assumed), BF16 assumed", "rednote"),
    MoeRun("llama-4-scout", "llama-4-scout", "h100-sxm", 16384, 40e12, "fp8", 8192, 5.0e6,
           "M", "mature",
           "Meta Llama 4 model card (github.com/meta-llama/llama-models models/llama4/"
           "MODEL_CARD.md): Scout 5.0M H100 GPU-hours, ~40T tokens; FP8 training per Meta's "
           "Llama 4 blog (ai.meta.com/blog/llama-4-multimodal-intelligence: 'efficient model "
           "training by using FP8 precision'); GPU count not stated (16,384 assumed as for "
           "Llama 3)", "meta"),
    MoeRun("llama-4-maverick", "llama-4-maverick", "h100-sxm", 16384, 22e12, "fp8", 8192,
           2.38e6, "M", "mature",
           "Meta Llama 4 model card: Maverick 2.38M H100 GPU-hours, ~22T tokens (same "
           "assumptions as Scout)", "meta"),
)  # fmt: skip


def run_factor(r: MoeRun, calib: Calibration) -> float:
    """The ``moe_mfu_factor`` this run implies (with the factor itself at 1)."""
    models = load_models()
    base = _without_moe_factor(calib)
    est = estimate_train(
        models[r.model], run_gpu(r.gpu), r.gpus, r.tokens, "full", base, r.seq_len,
        precision=r.precision, stack=r.stack,
    )  # fmt: skip
    if not est.fits:
        raise ValueError(f"{r.id}: {est.reason}")
    profile = base.realized.stacks.profile(r.stack)
    if r.basis == "T":  # throughput-derived hours: the dense T runs' steady-state factor
        production, good = throughput_factor(), 1.0
    else:
        production, good = profile.production, goodput(r.gpus, profile)
    steady = est.steady_wall_hours * r.gpus
    return steady / (r.gpu_hours * production * good)


def _without_moe_factor(calib: Calibration) -> Calibration:
    train = calib.train.model_copy(update={"moe_mfu_factor": None, "moe_log_sd": None})
    return calib.model_copy(update={"train": train})


@dataclass(frozen=True)
class LooRow:
    id: str
    implied: float  # the factor this run implies
    fitted_others: float  # the factor fitted on the other runs
    log_error: float  # log(predicted hours / published hours) with the others' factor


def leave_one_out(calib: Calibration | None = None) -> tuple[float, float, list[LooRow]]:
    """(factor on all runs, log-sd of the leave-one-out errors, rows)."""
    calib = calib or default_calibration()
    implied = {r.id: run_factor(r, calib) for r in RUNS}
    rows = []
    for r in RUNS:
        others = [math.log(v) for k, v in implied.items() if k != r.id]
        f = math.exp(statistics.fmean(others))
        # predicted hours scale as 1 / factor: error = implied / fitted
        rows.append(LooRow(r.id, implied[r.id], f, math.log(implied[r.id] / f)))
    full = math.exp(statistics.fmean(math.log(v) for v in implied.values()))
    sd = statistics.pstdev([row.log_error for row in rows]) if len(rows) > 1 else 0.0
    return full, sd, rows


def leave_one_source_out(calib: Calibration | None = None) -> list[LooRow]:
    """Each run predicted with the factor fitted on the other labs' runs only."""
    calib = calib or default_calibration()
    implied = {r.id: run_factor(r, calib) for r in RUNS}
    lab = {r.id: r.lab for r in RUNS}
    rows = []
    for r in RUNS:
        others = [math.log(v) for k, v in implied.items() if lab[k] != r.lab]
        f = math.exp(statistics.fmean(others))
        rows.append(LooRow(r.id, implied[r.id], f, math.log(implied[r.id] / f)))
    return rows


def predictions(calib: Calibration | None = None) -> list[tuple[MoeRun, Any]]:
    """Each run as ``planner estimate train`` predicts it with the shipped calibration."""
    calib = calib or default_calibration()
    models = load_models()
    return [
        (r, estimate_train(models[r.model], run_gpu(r.gpu), r.gpus, r.tokens, "full", calib,
                           r.seq_len, precision=r.precision, stack=r.stack))
        for r in RUNS
    ]  # fmt: skip


def main() -> None:
    full, sd, rows = leave_one_out()
    print(f"moe_mfu_factor (all runs) {full:.3f}, leave-one-out log-sd {sd:.3f}")
    print(f"{'run':18} {'implied':>8} {'others':>8} {'LOO err':>8}")
    for r in rows:
        print(f"{r.id:18} {r.implied:8.3f} {r.fitted_others:8.3f} {math.expm1(r.log_error):+8.1%}")
    med = statistics.median(abs(math.expm1(r.log_error)) for r in rows)
    print(f"median |LOO error| {med:.1%}")
    loso = leave_one_source_out()
    print(
        "leave-one-source-out (factor from the other labs' runs): "
        + ", ".join(f"{r.id} {math.expm1(r.log_error):+.1%}" for r in loso)
    )
    med = statistics.median(abs(math.expm1(r.log_error)) for r in loso)
    print(f"median |LOSO error| {med:.1%}")
    print(f"{'run':18} {'published':>10} {'median':>10} {'P10':>10} {'P90':>10} {'error':>7} band")
    for r, e in predictions():
        inside = e.gpu_hours_p10 <= r.gpu_hours <= e.gpu_hours_p90
        print(
            f"{r.id:18} {r.gpu_hours:>10,.0f} {e.gpu_hours:>10,.0f} {e.gpu_hours_p10:>10,.0f} "
            f"{e.gpu_hours_p90:>10,.0f} {e.gpu_hours / r.gpu_hours - 1:>+7.1%} "
            f"{'inside' if inside else 'OUTSIDE'}"
        )


if __name__ == "__main__":
    main()
