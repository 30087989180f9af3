"""Training compute: FLOPs per token, the single-GPU MFU and the FP8 step.

* Model FLOPs per trained token (full training) = ``6 N + 12 L h s`` (PaLM appendix B and
  llm-foundry's MFU: matmuls with weights forward+backward, plus attention scores/values without
  the causal halving). LoRA/QLoRA: ``4 N + 12 L h s``. A MoE counts its active parameters.
* MFU = model FLOPs per second / BF16 dense peak, also for FP8 runs (so it can exceed BF16's).
* FP8 (:func:`fp8_time_factor`): only the linear layers' GEMMs run in FP8, at a calibrated
  fraction of the FP8 peak, plus the casts and scales they need; attention, norms, activations,
  the router, embeddings and the optimizer stay in BF16/FP32 at the BF16 speed.
"""

from __future__ import annotations

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration, gpu_family
from planner.physics.moe import compute_params, train_attn_flops_per_token
from planner.physics.vendor import train_efficiency

# FP8 physics defaults where a calibration file predates them (catalogs/calibration.yaml has the
# sourced values): share of a BF16 step's compute time in linear GEMMs, the asymptotic fraction
# of the FP8 peak FP8 GEMMs reach (before the size and micro-batch factors), cast/scale overhead.
FP8_DEFAULTS = {"fp8_gemm_time_share": 0.85, "fp8_gemm_eff": 0.73, "fp8_scaling_overhead": 0.10}


def flops_per_token(model: ModelArch, seq_len: int, method: str = "full") -> float:
    """Model FLOPs per trained token: ``k N + 12 L h s`` with k = 6 (full) or 4 (LoRA/QLoRA).

    >>> from planner.physics.train import _toy_model
    >>> m = _toy_model()
    >>> flops_per_token(m, 2048) == 6 * m.params + 12 * 32 * 4096 * 2048
    True
    >>> flops_per_token(m, 2048, "lora") == 4 * m.params + 12 * 32 * 4096 * 2048
    True

    A mixture-of-experts model computes on its active parameters
    (:func:`planner.physics.moe.compute_params`); MLA and sliding-window attention count their
    own widths (:func:`planner.physics.moe.train_attn_flops_per_token`).
    """
    return linear_flops_per_token(model, method) + attention_flops_per_token(model, seq_len)


def linear_flops_per_token(model: ModelArch, method: str = "full") -> float:
    """The weight GEMMs' FLOPs per token, ``k N`` (N active for a MoE): what FP8 accelerates."""
    k = 6.0 if method == "full" else 4.0
    return k * (model.params if model.moe is None else compute_params(model))


def attention_flops_per_token(model: ModelArch, seq_len: int) -> float:
    """Attention score and value FLOPs per trained token (forward + backward): BF16 in FP8 runs."""
    if model.attention_kind == "full" and model.moe is None and model.mla is None:
        return 12.0 * model.layers * model.hidden * seq_len
    return train_attn_flops_per_token(model, seq_len)


def size_factor(hidden: int, calib: Calibration) -> float:
    """Model-size MFU factor ``hidden / (hidden + h_half)`` (dimensionless).

    >>> from planner.physics.calibration.values import default_calibration
    >>> 0.8 < size_factor(4096, default_calibration()) < 0.95
    True
    """
    h_half = calib.train.mfu_size_half_hidden.value
    return hidden / (hidden + h_half)


def gemm_factor(tokens_per_micro_batch: float, calib: Calibration) -> float:
    """Micro-batch GEMM factor ``t / (t + t_half)``, t = micro_batch * seq_len (dimensionless).

    >>> from planner.physics.calibration.values import default_calibration
    >>> gemm_factor(8192, default_calibration()) > gemm_factor(2048, default_calibration())
    True
    """
    t_half = calib.train.gemm_half_tokens.value
    return tokens_per_micro_batch / (tokens_per_micro_batch + t_half)


def base_mfu(gpu: GpuSpec, calib: Calibration) -> float:
    """Asymptotic single-GPU BF16 MFU of the GPU's family (calibrated; dimensionless).

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_gpu
    >>> base_mfu(_toy_gpu(), default_calibration()) == gpu_family(_toy_gpu(), default_calibration()).value
    True
    """
    fam = gpu_family(gpu, calib)
    return fam.value if fam is not None else calib.train.mfu_default.value


def single_gpu_mfu(
    model: ModelArch,
    gpu: GpuSpec,
    seq_len: int,
    micro_batch: int,
    recompute: bool,
    method: str,
    calib: Calibration,
) -> float:
    """BF16 MFU of one GPU before communication: base x size x GEMM x recompute x QLoRA x MoE x
    the vendor's software efficiency (:func:`planner.physics.vendor.train_efficiency`; NVIDIA 1).

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> c = default_calibration()
    >>> a = single_gpu_mfu(_toy_model(), _toy_gpu(), 2048, 4, False, "full", c)
    >>> b = single_gpu_mfu(_toy_model(), _toy_gpu(), 2048, 4, True, "full", c)
    >>> round(b / a, 2) == c.train.recompute_factor.value
    True
    """
    t = calib.train
    mfu = base_mfu(gpu, calib) * size_factor(model.hidden, calib)
    mfu *= gemm_factor(micro_batch * seq_len, calib)
    if recompute:
        mfu *= t.recompute_factor.value
    if method == "qlora":
        mfu *= t.qlora_speed_factor.value
    if model.moe is not None and t.moe_mfu_factor is not None:
        mfu *= t.moe_mfu_factor.value  # expert imbalance, token permutation, grouped GEMMs
    return mfu * train_efficiency(gpu)


def fp8_value(calib: Calibration, name: str) -> float:
    """An FP8 training figure from the calibration (or its default, :data:`FP8_DEFAULTS`)."""
    v = getattr(calib.train, name, None)
    return FP8_DEFAULTS[name] if v is None else v.value


def fp8_time_factor(
    model: ModelArch, gpu: GpuSpec, seq_len: int, method: str, calib: Calibration
) -> float:
    """Compute time of an FP8 step / the same step in BF16 (dimensionless, < 1 on Hopper).

    With ``f`` the linear GEMMs' share of the FLOPs and ``a`` the share of a BF16 step's time a
    GEMM-only model spends in GEMMs, the BF16 step is ``a f`` GEMMs and ``1 - a f`` everything
    else (attention, norms, activations, router, permutation; BF16 in FP8 runs too). FP8 runs the
    GEMMs at ``fp8_gemm_eff`` of the FP8 peak where BF16 GEMMs reach the family's ``base_mfu`` of
    the BF16 peak (both before the size and micro-batch factors), i.e.
    ``S = fp8_peak / bf16_peak x fp8_gemm_eff / base_mfu`` times faster, and adds the casts and scales
    (``fp8_scaling_overhead`` of the FP8 GEMM time: amax, quantize and transpose per tensor or
    per tile)::

        t_fp8 / t_bf16 = (1 - a f) + a f (1 + o) / S

    The formula says why FP8 gives ~1.3-1.6x, not 2x, and more on wide models (f -> 1) than on
    long-context small ones (attention's share grows with s / h).

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> 0.5 < fp8_time_factor(_toy_model(), _toy_gpu(), 4096, "full", default_calibration()) < 0.8
    True
    """
    assert gpu.fp8_dense_tflops is not None
    lin = linear_flops_per_token(model, method)
    f = lin / (lin + attention_flops_per_token(model, seq_len))
    a = fp8_value(calib, "fp8_gemm_time_share") * f
    s = gpu.fp8_dense_tflops.value / gpu.bf16_dense_tflops.value
    s *= fp8_value(calib, "fp8_gemm_eff") / base_mfu(gpu, calib)
    return (1.0 - a) + a * (1.0 + fp8_value(calib, "fp8_scaling_overhead")) / s
