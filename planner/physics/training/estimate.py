"""A training job's estimate: the fastest layout, its steady state and the realized hours.

``steady_wall_hours`` is the benchmark steady state of the fastest layout
(:mod:`planner.physics.training.layout`); ``wall_hours`` the median a real run consumes
(:mod:`planner.physics.realized`), with the P10-P90 band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.realized import DEFAULT_STACK, STACKS, hours_band, quantile_factor
from planner.physics.training.layout import LayoutEval, TrainLayout, _best_layout

METHODS = ("full", "lora", "qlora")


@dataclass(frozen=True)
class TrainEstimate:
    """A training job on ``gpus`` GPUs. ``wall_hours`` / ``gpu_hours`` are the *median* hours a
    real run consumes (:mod:`planner.physics.realized`); ``steady_wall_hours`` is the benchmark
    steady state; the ``_p10`` / ``_p90`` fields bound the run-to-run scatter."""

    fits: bool
    reason: str | None
    gpus: int
    wall_hours: float
    gpu_hours: float
    memory_per_gpu_gb: float
    memory: dict[str, float]
    mfu: float
    layout: TrainLayout | None
    tokens_per_s_per_gpu: float
    steady_wall_hours: float = math.nan
    stack: str = "typical"
    realized_factor: float = math.nan  # production x goodput: realized / steady throughput
    log_sd: float = 0.0
    wall_hours_p10: float = math.nan
    wall_hours_p90: float = math.nan
    gpu_hours_p10: float = math.nan
    gpu_hours_p90: float = math.nan

    def wall_hours_at(self, q: float) -> float:
        """Wall hours at quantile ``q`` of the realized-hours distribution (0.5 = the median)."""
        return self.wall_hours * quantile_factor(q, self.log_sd)


# Optimizer steps of a pre-training run: published recipes take 0.1-1.5M steps (Llama 2 4M-token
# batches over 2T tokens = 500k, arXiv:2307.09288 Table 1; DeepSeek-V3 up to 15,360 x 4,096
# tokens over 14.8T = ~240k, arXiv:2412.19437 s4.2; OPT-175B 2M over 300B = 150k; Llama 3 405B
# 4M -> 16M over 15.6T, ~1.2M, arXiv:2407.21783 s3.4.1). Longer runs use larger batches.
PRETRAIN_STEPS = 500_000


def pretrain_batch_tokens(tokens: float, calib: Calibration) -> float:
    """Global batch (tokens per optimizer step) of a full run of ``tokens`` tokens:
    ``global_batch_tokens`` (2M), or ``tokens / 500k steps`` for runs longer than 1T tokens.

    >>> from planner.physics.calibration.values import default_calibration
    >>> pretrain_batch_tokens(1e11, default_calibration()) == 2097152
    True
    >>> pretrain_batch_tokens(14.8e12, default_calibration()) / 1e6
    29.6
    """
    return max(calib.train.global_batch_tokens.value, tokens / PRETRAIN_STEPS)


def estimate_train(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    tokens: float,
    method: str = "full",
    calib: Calibration | None = None,
    seq_len: int = 4096,
    *,
    precision: str = "bf16",
    global_batch_tokens: float | None = None,
    stack: str = DEFAULT_STACK,
    max_dp: int | None = None,
) -> TrainEstimate:
    """Fastest layout of a training job on ``gpus`` x ``gpu`` and its time, memory and MFU.

    ``max_dp`` bounds the data-parallel replicas (None: any): a run of fewer sequences than
    replicas leaves the rest without a token, so the planner's candidates pass the run's
    sequences (:mod:`planner.optimize.train_scale`) and get the fastest layout that feeds them.

    ``steady_wall_hours = tokens / (tokens_per_s_per_gpu x gpus) / 3600`` (the benchmark steady
    state); ``wall_hours = steady_wall_hours / (production x goodput)`` for the ``stack`` profile
    (the median of real runs), with the P10-P90 band from the calibrated scatter. Infeasible jobs
    (nothing fits in memory) return ``fits=False`` with the reason; only programming errors
    (non-positive counts, unknown method) raise ``ValueError``.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> est = estimate_train(_toy_model(), _toy_gpu(), 8, 1e9, seq_len=2048)
    >>> est.fits, est.layout.tp, 0.3 < est.mfu < 0.6
    (True, 1, True)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if stack not in STACKS:
        raise ValueError(f"stack must be one of {STACKS}, got {stack!r}")
    if precision not in ("bf16", "fp16", "fp8"):
        raise ValueError(f"training precision must be bf16, fp16 or fp8, got {precision!r}")
    if gpus < 1 or tokens <= 0 or seq_len < 1:
        raise ValueError("gpus, tokens and seq_len must be positive")
    if max_dp is not None and max_dp < 1:
        raise ValueError(f"max_dp must be at least 1, got {max_dp}")
    calib = calib or default_calibration()
    if precision == "fp8" and gpu.fp8_dense_tflops is None:
        return _infeasible(gpus, f"{gpu.id} has no FP8 tensor cores")
    if gbs_tokens_given := global_batch_tokens:
        gbs = float(gbs_tokens_given)
    elif method == "full":
        gbs = pretrain_batch_tokens(tokens, calib)
    else:
        gbs = calib.train.finetune_global_batch_tokens.value
    lay, ev, small_lay, small_ev = _best_layout(
        model, gpu, gpus, method, seq_len, gbs, precision, calib, max_dp
    )
    if small_lay is None and max_dp is not None:  # no layout at all, before memory
        replicas = f"{max_dp:,} data-parallel replica{'s' if max_dp > 1 else ''}"
        return _infeasible(
            gpus, f"{gpus:,} GPUs have no layout of at most {replicas} (TP and PP: powers of two)"
        )
    if lay is None or ev is None:
        return _out_of_memory(model, gpu, gpus, method, calib, small_lay, small_ev)
    steady = tokens / (ev.tokens_per_s_per_gpu * gpus) / 3600.0
    real = calib.realized
    log_sd = real.log_sd.value
    if model.moe is not None and calib.train.moe_log_sd is not None:
        log_sd = math.hypot(log_sd, calib.train.moe_log_sd.value)  # the MoE factor's scatter
    band = hours_band(steady, gpus, real.stacks.profile(stack), log_sd)
    return TrainEstimate(
        fits=True,
        reason=None,
        gpus=gpus,
        wall_hours=band.median,
        gpu_hours=band.median * gpus,
        memory_per_gpu_gb=ev.mem_total,
        memory=dict(ev.memory),
        mfu=ev.mfu,
        layout=lay,
        tokens_per_s_per_gpu=ev.tokens_per_s_per_gpu,
        steady_wall_hours=steady,
        stack=stack,
        realized_factor=steady / band.median,
        log_sd=band.log_sd,
        wall_hours_p10=band.p10,
        wall_hours_p90=band.p90,
        gpu_hours_p10=band.p10 * gpus,
        gpu_hours_p90=band.p90 * gpus,
    )


def _out_of_memory(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    method: str,
    calib: Calibration,
    small_lay: TrainLayout | None,
    small_ev: LayoutEval | None,
) -> TrainEstimate:
    """No layout fits: report the least-memory layout, so the user sees how far off it is."""
    cap = gpu.memory_gb.value
    need = small_ev.mem_total if small_ev else float("nan")
    how = ""
    if small_lay is not None:
        how = (
            f" (best layout tp={small_lay.tp} pp={small_lay.pp} dp={small_lay.dp} "
            f"ZeRO-{small_lay.zero_stage}{' recompute' if small_lay.recompute else ''})"
        )
    frac = calib.train.usable_memory_fraction.value
    reason = (
        f"{method} training of {model.id} needs {need:.1f} GB per GPU{how} > "
        f"{frac:.0%} of {cap:g} GB on {gpus}x {gpu.id}"
    )
    mem = small_ev.memory if small_ev else {}
    return _infeasible(gpus, reason, need, mem)


def _infeasible(
    gpus: int, reason: str, mem_total: float = float("nan"), memory: dict | None = None
) -> TrainEstimate:
    return TrainEstimate(
        fits=False,
        reason=reason,
        gpus=gpus,
        wall_hours=math.inf,
        gpu_hours=math.inf,
        memory_per_gpu_gb=mem_total,
        memory=dict(memory or {}),
        mfu=0.0,
        layout=None,
        tokens_per_s_per_gpu=0.0,
    )
