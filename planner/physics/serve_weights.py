"""Weights a serving replica streams: bytes per parameter by precision, the achieved
bandwidth, and the time one GPU reads the weights a forward touches (dense, mixture of experts
sliced across the GPUs, or whole experts per GPU: expert parallelism).

Split from :mod:`planner.physics.serve` (which re-exports every name).
"""

from __future__ import annotations

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import (
    Calibration,
    default_calibration,  # noqa: F401 (doctests)
)
from planner.physics.moe import ep_routed_params_read, routed_params_read, weight_params_read
from planner.physics.train import GB

PRECISIONS = ("fp16", "bf16", "fp8", "int8", "int4", "fp4")
# NVFP4: 4-bit E2M1 values + one FP8 scale per 16 = 4.5 bits (MXFP4: 4.25); used when the
# calibration file states no figure of its own.
FP4_BYTES_PER_PARAM = 0.5625
LAYOUTS = ("tp", "ep")


def weight_bytes_per_param(precision: str, calib: Calibration) -> float:
    """Bytes per weight: fp16/bf16 2, fp8/int8 1, int4 ~0.56 (4 bits + group scales + fp16 embeddings).

    >>> c = default_calibration()
    >>> [weight_bytes_per_param(p, c) for p in ("bf16", "fp8", "int8", "int4")]
    [2.0, 1.0, 1.0, 0.56]
    """
    if precision in ("fp16", "bf16"):
        return 2.0
    if precision in ("fp8", "int8"):
        return 1.0
    if precision == "int4":
        return calib.serve.int4_bytes_per_param.value
    if precision == "fp4":
        f = calib.serve.fp4_bytes_per_param
        return FP4_BYTES_PER_PARAM if f is None else f.value
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def weight_bw(gpu: GpuSpec, precision: str, calib: Calibration) -> float:
    """Achieved bytes/s streaming weights: bandwidth x ``weight_bw_eff`` (x ``int4_bw_factor``).

    >>> from planner.physics.train import _toy_gpu
    >>> c = default_calibration()
    >>> weight_bw(_toy_gpu(), "bf16", c) / 1e9 == 3350 * c.serve.weight_bw_eff.value
    True
    """
    eff = calib.serve.weight_bw_eff.value
    if precision == "int4":
        eff *= calib.serve.int4_bw_factor.value
    return gpu.memory_bandwidth_gbs.value * GB * eff


def moe_factors(calib: Calibration) -> tuple[float, float]:
    """(expert streaming efficiency, seconds per MoE layer per forward); (1, 0) if uncalibrated.

    >>> e, o = moe_factors(default_calibration())
    >>> 0 < e <= 1 and o >= 0
    True
    """
    s = calib.serve
    eff = 1.0 if s.moe_expert_bw_eff is None else s.moe_expert_bw_eff.value
    over = 0.0 if s.moe_layer_overhead_us is None else s.moe_layer_overhead_us.value * 1e-6
    return eff, over


def weight_read_s(
    model: ModelArch, gpu: GpuSpec, tp: int, precision: str, tokens: float, calib: Calibration
) -> float:
    """Time one GPU streams the weights a forward over ``tokens`` tokens reads (s).

    Dense: ``params x bytes / tp / weight_bw``. MoE sliced across the GPUs (``tp`` layout): the
    non-expert weights at ``weight_bw`` and the experts the tokens touch at ``weight_bw x
    moe_expert_bw_eff``, 1/tp of each. Expert parallelism (``ep`` layout, ``tp`` GPUs): 1/tp of
    the non-expert weights plus the whole experts of the busiest GPU
    (:func:`planner.physics.moe.ep_max_local_experts`) at ``weight_bw x moe_ep_bw_eff``.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> c = default_calibration()
    >>> weight_read_s(_toy_model(), _toy_gpu(), 1, "fp16", 1, c) == weight_read_s(
    ...     _toy_model(), _toy_gpu(), 1, "fp16", 64, c)  # dense: independent of the batch
    True
    """
    if model.moe is None:
        return (model.params * weight_bytes_per_param(precision, calib) / tp) / weight_bw(
            gpu, precision, calib
        )
    eff, _ = moe_factors(calib)
    routed = routed_params_read(model, tokens)
    if calib.moe_layout == "ep" and tp > 1:
        # whole experts per GPU: the step waits for the GPU holding the most touched experts
        ep_eff = calib.serve.moe_ep_bw_eff.value if calib.serve.moe_ep_bw_eff else eff
        per_gpu = (weight_params_read(model, tokens) - routed) / tp
        per_gpu += ep_routed_params_read(model, tokens, tp) / ep_eff
        return per_gpu * weight_bytes_per_param(precision, calib) / weight_bw(gpu, precision, calib)
    params = weight_params_read(model, tokens) - routed + routed / eff
    return params * weight_bytes_per_param(precision, calib) / tp / weight_bw(gpu, precision, calib)


def with_layout(calib: Calibration, layout: str) -> Calibration:
    """``calib`` with the MoE replica layout set: ``tp`` (experts sliced across the GPUs) or
    ``ep`` (whole experts per GPU, attention tensor-parallel).

    >>> with_layout(default_calibration(), "ep").moe_layout
    'ep'
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return calib.model_copy(update={"moe_layout": layout})
