"""Today's serving replica (split from :mod:`planner.physics.serve`, which re-exports every
name): memory, prefill and decode step times, feasibility and the steady-state estimate of one
replica of 1-8 GPUs of one server in tp or ep.

Units: bytes and GB (1e9 B) per GPU, seconds inside, milliseconds in the results. ``gpus`` is the
tensor-parallel size of one replica. Model of the engine (vLLM-style continuous batching): at every
iteration boundary, if requests are waiting and batch slots are free, the engine runs one *prefill
iteration* for all of them (their first tokens); otherwise a *decode step* for every running
request. A prefill iteration therefore stalls the running decodes: that is how arrivals inflate TPOT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.moe import (
    attn_flops_per_token,
    compute_params,
    kv_read_bytes_per_token,
    kv_share_per_gpu,
    prefill_attn_flops,
)
from planner.physics.moe import kv_bytes_per_token as _kv_bytes

# re-exported: the queueing tails were public names of this module before the split
from planner.physics.serve_queueing import erlang_c as erlang_c
from planner.physics.serve_queueing import poisson_quantile as poisson_quantile
from planner.physics.serve_weights import (
    FP4_BYTES_PER_PARAM as FP4_BYTES_PER_PARAM,
)
from planner.physics.serve_weights import PRECISIONS as PRECISIONS
from planner.physics.serve_weights import moe_factors as moe_factors
from planner.physics.serve_weights import weight_bw as weight_bw
from planner.physics.serve_weights import weight_bytes_per_param as weight_bytes_per_param
from planner.physics.serve_weights import weight_read_s as weight_read_s
from planner.physics.serve_weights import with_layout as with_layout
from planner.physics.serving.prefix import (
    idle_kv_share,
    new_tokens,
    offload_batch_cap,
    prefill_flops,
    reload_s,
)
from planner.physics.train import GB, allreduce_s, intra_node_link, node_gpus
from planner.physics.vendor import serve_step_s

TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class ServeEstimate:
    fits: bool
    reason: str | None
    gpus: int
    precision: str
    batch: int
    tokens_per_s: float
    ttft_ms: float
    tpot_ms: float
    memory_per_gpu_gb: float
    memory: dict[str, float]
    layout: str = "tp"  # a MoE's experts sliced across the GPUs (tp) or whole per GPU (ep)


@dataclass(frozen=True)
class ReplicaCapacity:
    feasible: bool
    reason: str | None
    gpus: int
    precision: str
    batch: int
    rate_rps: float
    p95_ttft_ms: float
    p95_tpot_ms: float
    tokens_per_s: float
    layout: str = "tp"  # a MoE's experts sliced across the GPUs (tp) or whole per GPU (ep)


# ----------------------------------------------------------------------------- bytes


def kv_bytes_per_token(model: ModelArch, precision: str, context: float | None = None) -> float:
    """KV-cache bytes per token, whole model (:func:`planner.physics.moe.kv_bytes_per_token`):
    ``2 (K,V) x layers x kv_heads x head_dim x bytes`` for GQA/MHA, one latent for MLA, a
    sliding-window layer capped at its window for a ``context``-token sequence.

    The cache is FP16 (2 B) except with fp8/fp4, where it is FP8 (1 B); int8/int4 are
    weight-only quantisations and keep an FP16 cache.

    >>> from planner.physics.train import _toy_model
    >>> kv_bytes_per_token(_toy_model(), "fp16")  # Llama-2-7B: 0.5 MiB per token
    524288.0
    """
    return _kv_bytes(model, precision, context)


def serve_memory_gb(
    model: ModelArch,
    tp: int,
    precision: str,
    batch: int,
    context: int,
    prompt: int,
    calib: Calibration,
) -> dict[str, float]:
    """Memory per GPU (GB): weights/tp, KV cache for ``batch`` full contexts, engine overhead.

    ``overhead`` = fixed engine GB + prefill activation workspace (``activation_gb_per_1k_tokens``
    per 1,000 prompt tokens per GPU).

    >>> from planner.physics.train import _toy_model
    >>> m = serve_memory_gb(_toy_model(), 1, "fp16", 8, 4096, 2048, default_calibration())
    >>> round(m["weights"], 2), round(m["kv_cache"], 2)
    (13.48, 17.18)
    """
    s = calib.serve
    weights = model.params * weight_bytes_per_param(precision, calib) / tp
    kv = batch * context * kv_bytes_per_token(model, precision, context)
    kv *= kv_share_per_gpu(model, tp) * (1.0 + idle_kv_share(calib))  # idle sessions' KV
    overhead = s.overhead_gb.value + s.activation_gb_per_1k_tokens.value * prompt / 1000 / tp
    return {"weights": weights / GB, "kv_cache": kv / GB, "overhead": overhead}


GIB = 2**30


def memory_cap_gb(gpu: GpuSpec, calib: Calibration) -> float:
    """GB (1e9 B) a serving engine may fill on ``gpu``: its memory x ``usable_memory_fraction``.

    Vendors state HBM/GDDR capacities in binary gigabytes (B200 "180 GB" = 180 GiB: nvidia-smi
    183,359 MiB = 192.3e9 B; H100 "80 GB": 81,559 MiB; MI300X "192 GB": 196,592 MiB), while
    the physics counts bytes / 1e9: the catalog figure is x 2^30 / 1e9 here. (Before, DeepSeek-R1
    FP8, 671 GB of weights, did not fit 4 x B200 as SGLang serves it.)

    >>> from planner.physics.train import _toy_gpu
    >>> round(memory_cap_gb(_toy_gpu(), default_calibration()), 1)  # 80 GiB x 0.9
    77.3
    """
    return gpu.memory_gb.value * GIB / GB * calib.serve.usable_memory_fraction.value


def max_batch(
    model: ModelArch,
    gpu: GpuSpec,
    tp: int,
    precision: str,
    prompt: int,
    output: int,
    calib: Calibration,
) -> int:
    """Largest batch whose weights + KV (every request at its full prompt+output context) fit.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> max_batch(_toy_model(), _toy_gpu(), 1, "fp16", 1024, 1024, default_calibration())
    57
    """
    cap = memory_cap_gb(gpu, calib)
    base = serve_memory_gb(model, tp, precision, 0, prompt + output, prompt, calib)
    free = cap - base["weights"] - base["overhead"]
    ctx = prompt + output
    per = ctx * kv_bytes_per_token(model, precision, ctx) * kv_share_per_gpu(model, tp)
    per *= 1.0 + idle_kv_share(calib)  # idle sessions' KV held beside each active one
    if free <= 0:
        return 0
    return int(min(free * GB // per, offload_batch_cap(per / GB, calib)))


# ----------------------------------------------------------------------------- rates


def peak_flops(gpu: GpuSpec, precision: str, calib: Calibration) -> float:
    """Dense tensor FLOP/s used for this precision (per GPU).

    fp8 runs at the FP8 peak x ``fp8_compute_factor`` (attention and norms stay 16-bit), fp4 at
    the FP4 peak x the same factor; int8 and int4 are weight-only (W8A16/W4A16) and compute at
    the BF16 peak.

    >>> from planner.physics.train import _toy_gpu
    >>> peak_flops(_toy_gpu(), "bf16", default_calibration()) / 1e12
    989.4
    """
    if precision == "fp8":
        if gpu.fp8_dense_tflops is None:
            raise ValueError(f"{gpu.id} has no FP8 tensor cores")
        return gpu.fp8_dense_tflops.value * 1e12 * calib.serve.fp8_compute_factor.value
    if precision == "fp4":
        if gpu.fp4_dense_tflops is None:
            raise ValueError(f"{gpu.id} has no FP4 tensor cores")
        return gpu.fp4_dense_tflops.value * 1e12 * calib.serve.fp8_compute_factor.value
    return gpu.bf16_dense_tflops.value * 1e12


def tp_comm_s(model: ModelArch, gpu: GpuSpec, tp: int, tokens: float, calib: Calibration) -> float:
    """Tensor-parallel time of one forward: 2 all-reduces per layer of ``tokens x hidden x 2`` bytes.

    Over the real link: NVLink, PCIe, or PCIe without peer-to-peer (host-staged, RTX 4090).

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> tp_comm_s(_toy_model(), _toy_gpu(), 1, 64, default_calibration())
    0.0
    """
    if tp <= 1:
        return 0.0
    bw, lat = intra_node_link(gpu, tp, calib)
    return 2 * model.layers * allreduce_s(tokens * model.hidden * 2.0, tp, bw, lat)


def layer_overhead_s(model: ModelArch, calib: Calibration) -> float:
    """Fixed time per forward pass: ``layers x layer_overhead_us`` (launches, sync, sampling).

    >>> from planner.physics.train import _toy_model
    >>> c = default_calibration()
    >>> layer_overhead_s(_toy_model(), c) == 32 * c.serve.layer_overhead_us.value * 1e-6
    True
    """
    fixed = model.layers * calib.serve.layer_overhead_us.value * 1e-6
    if model.moe is None:
        return fixed
    return fixed + model.moe_layers * moe_factors(calib)[1]


def decode_step_s(
    model: ModelArch,
    gpu: GpuSpec,
    tp: int,
    precision: str,
    batch: float,
    context: float,
    calib: Calibration,
) -> float:
    """One decode step for ``batch`` sequences of mean ``context`` tokens (s).

    ``max(weights/tp / weight_bw + batch x context x kv/tp / (bw x kv_bw_eff),
    batch (2N + 4 L h ctx) / tp / (peak x decode_compute_eff)) + TP all-reduces + layer overhead``,
    all / the vendor's ``serve_efficiency`` (:mod:`planner.physics.vendor`; NVIDIA 1).
    For a MoE, ``weights`` are those the batch reads (attention, dense, shared and the experts
    its tokens touch, :func:`planner.physics.moe.weight_params_read`) and N the active count.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> c = default_calibration()
    >>> tok_s = 1 / decode_step_s(_toy_model(), _toy_gpu(), 1, "fp16", 1, 512, c)
    >>> 100 < tok_s < 200  # batch-1 Llama-2-7B FP16 on H100: bandwidth-bound
    True
    """
    s = calib.serve
    kv = batch * context * kv_read_bytes_per_token(model, precision, context)
    kv *= kv_share_per_gpu(model, tp)
    bw = gpu.memory_bandwidth_gbs.value * GB
    t_mem = weight_read_s(model, gpu, tp, precision, batch, calib) + kv / (bw * s.kv_bw_eff.value)
    flops = batch * (2.0 * compute_params(model) + attn_flops_per_token(model, context)) / tp
    t_compute = flops / (peak_flops(gpu, precision, calib) * s.decode_compute_eff.value)
    t = max(t_mem, t_compute) + tp_comm_s(model, gpu, tp, batch, calib)
    return serve_step_s(t + layer_overhead_s(model, calib), gpu)  # / vendor serve_efficiency


def _decode_coeffs(
    model: ModelArch, gpu: GpuSpec, tp: int, precision: str, context: float, calib: Calibration
) -> tuple[float, float, float, float, float]:
    """Coefficients of ``decode_step_s`` as a function of batch n (same formula, precomputed):
    ``max(w + kv n, fl n) + comm_lat + comm_n n + over`` -> (w, kv, fl, comm_n, comm_lat + over)."""
    s = calib.serve
    w = (
        model.params
        * weight_bytes_per_param(precision, calib)
        / tp
        / weight_bw(gpu, precision, calib)
    )
    kv = (
        context
        * kv_read_bytes_per_token(model, precision, context)
        * kv_share_per_gpu(model, tp)
        / (gpu.memory_bandwidth_gbs.value * GB * s.kv_bw_eff.value)
    )
    fl = (
        (2.0 * compute_params(model) + attn_flops_per_token(model, context))
        / tp
        / (peak_flops(gpu, precision, calib) * s.decode_compute_eff.value)
    )
    lat = tp_comm_s(model, gpu, tp, 0, calib)
    comm_n = tp_comm_s(model, gpu, tp, 1, calib) - lat
    return w, kv, fl, comm_n, lat + layer_overhead_s(model, calib)


def prefill_compute_s(
    model: ModelArch, gpu: GpuSpec, tp: int, precision: str, prompt: int, calib: Calibration
) -> float:
    """GEMM + attention time of one prompt: ``(2 N p + 2 L h p^2) / tp / (peak x prefill_eff)`` (s).

    2 L h p^2 = causal attention scores and values (half of the full 4 L h p^2).

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> t = prefill_compute_s(_toy_model(), _toy_gpu(), 1, "fp16", 2048, default_calibration())
    >>> 0.02 < t < 0.06
    True
    """
    if calib.prefix is None:
        flops = 2.0 * compute_params(model) * prompt + prefill_attn_flops(model, prompt)
    else:  # the new tokens only, attending over the cached prefix, after its reload
        flops = prefill_flops(model, prompt, calib)
    eff = calib.serve.prefill_compute_eff.value
    if model.moe is not None and calib.serve.moe_prefill_eff is not None:
        eff *= calib.serve.moe_prefill_eff.value  # grouped expert GEMMs, routing, permutation
    t = flops / tp / (peak_flops(gpu, precision, calib) * eff)
    if calib.prefix is not None:
        t += reload_s(model, precision, prompt, kv_share_per_gpu(model, tp), calib)
    return t


def prefill_iter_s(
    model: ModelArch,
    gpu: GpuSpec,
    tp: int,
    precision: str,
    prompts: int,
    prompt: int,
    calib: Calibration,
) -> float:
    """One prefill iteration for ``prompts`` prompts of ``prompt`` tokens (s).

    ``(prompts x compute + one weight read + TP all-reduces + layer overhead) / serve_efficiency``
    (the vendor's, :mod:`planner.physics.vendor`; NVIDIA 1) (weight streaming and
    GEMMs are not assumed to overlap: this is what makes short prompts cost a decode step).

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> t = prefill_iter_s(_toy_model(), _toy_gpu(), 1, "fp16", 1, 128, default_calibration())
    >>> 0.005 < t < 0.015  # a short prompt costs about one weight read
    True
    """
    # a prompt routes enough tokens to touch (nearly) every expert: one full weight read
    new = new_tokens(prompt, calib)  # prompt, less a cached prefix
    t = (
        prompts * prefill_compute_s(model, gpu, tp, precision, prompt, calib)
        + weight_read_s(model, gpu, tp, precision, max(prompts, 1) * new, calib)
        + tp_comm_s(model, gpu, tp, prompts * new, calib)
        + layer_overhead_s(model, calib)
    )
    return serve_step_s(t, gpu)  # / the vendor's serve_efficiency (NVIDIA 1)


# ----------------------------------------------------------------------------- feasibility


def _check(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    calib: Calibration,
) -> str | None:
    """Why this replica cannot serve at all (None: it can, memory permitting)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if prompt < 1 or output < 1:
        raise ValueError("prompt and output must be at least 1 token")
    if precision == "fp8" and gpu.fp8_dense_tflops is None:
        return f"{gpu.id} has no FP8 tensor cores (use bf16, int8 or int4)"
    if precision == "fp4" and gpu.fp4_dense_tflops is None:
        return (
            f"{gpu.id} has no FP4 tensor cores (NVFP4/MXFP4 need Blackwell or MI355X; "
            "use fp8, int4 or bf16)"
        )
    if gpus not in TP_SIZES:
        return f"tensor-parallel size must be 1, 2, 4 or 8, got {gpus}"
    node = node_gpus(gpu, calib)
    if gpus > node:
        return f"{gpus} GPUs exceed one {gpu.id} server ({node} GPUs)"
    if model.heads % gpus:
        return f"{model.heads} attention heads are not divisible by tensor-parallel size {gpus}"
    if calib.moe_layout == "ep" and model.moe is not None and model.moe.experts % gpus:
        return f"{model.moe.experts} experts do not split evenly over {gpus} GPUs (use tp)"
    if prompt + output > model.max_context:
        return f"prompt+output {prompt + output} tokens > {model.id} context {model.max_context}"
    mem = serve_memory_gb(model, gpus, precision, 0, prompt + output, prompt, calib)
    cap = memory_cap_gb(gpu, calib)
    if mem["weights"] + mem["overhead"] > cap:
        total = mem["weights"] * gpus
        return (
            f"{precision} weights {total:.1f} GB + overhead > {gpus}x{gpu.memory_gb.value:g} GB "
            f"({calib.serve.usable_memory_fraction.value:.0%} usable)"
        )
    if max_batch(model, gpu, gpus, precision, prompt, output, calib) < 1:
        return (
            f"no room for the KV cache of one {prompt + output}-token context after "
            f"{mem['weights']:.1f} GB of weights per GPU"
        )
    return None


def estimate_serve(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int | None = None,
    calib: Calibration | None = None,
) -> ServeEstimate:
    """Steady-state throughput and latency of one replica holding ``batch`` requests.

    ``batch=None`` takes the largest that fits. A request spends one prefill (its share of a
    prefill iteration of ``batch`` prompts) and ``output-1`` decode steps, so
    ``tokens_per_s = batch x output / (prefill_iter(batch) + (output-1) x decode_step(batch))`` and
    ``tpot = (prefill_iter + (output-1) x decode_step) / (output-1)`` (interleaved prefills inflate
    TPOT). ``ttft`` is an unloaded single-prompt prefill (queueing is in :func:`replica_capacity`).
    Decode steps use the mean context ``prompt + (output-1)/2``.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> e = estimate_serve(_toy_model(), _toy_gpu(), 1, "fp16", 512, 256, batch=32)
    >>> e.fits, 1000 < e.tokens_per_s < 5000, 10 < e.ttft_ms < 30
    (True, True, True)
    """
    calib = calib or default_calibration()
    reason = _check(model, gpu, gpus, precision, prompt, output, calib)
    if reason is None:
        top = max_batch(model, gpu, gpus, precision, prompt, output, calib)
        if batch is None:
            batch = top
        elif batch < 1:
            raise ValueError("batch must be at least 1")
        elif batch > top:
            mem = serve_memory_gb(model, gpus, precision, batch, prompt + output, prompt, calib)
            reason = (
                f"batch {batch} needs {sum(mem.values()):.1f} GB per GPU > "
                f"{memory_cap_gb(gpu, calib):.1f} GB usable of {gpu.memory_gb.value:g} GB; "
                f"at most batch {top} fits"
            )
    if reason is not None:
        return _cannot_serve(model, gpus, precision, prompt, output, batch or 0, calib, reason)
    assert batch is not None
    d = output - 1
    ctx = prompt + d / 2
    t_dec = decode_step_s(model, gpu, gpus, precision, batch, ctx, calib)
    t_pre = prefill_iter_s(model, gpu, gpus, precision, batch, prompt, calib)
    total = t_pre + d * t_dec
    mem = serve_memory_gb(model, gpus, precision, batch, prompt + output, prompt, calib)
    ttft = prefill_iter_s(model, gpu, gpus, precision, 1, prompt, calib)
    return ServeEstimate(
        fits=True,
        reason=None,
        gpus=gpus,
        precision=precision,
        batch=batch,
        tokens_per_s=batch * output / total,
        ttft_ms=ttft * 1e3,
        tpot_ms=(total / d if d > 0 else 0.0) * 1e3,
        memory_per_gpu_gb=sum(mem.values()),
        memory=mem,
        layout=_layout(model, gpus, calib),
    )


def _cannot_serve(
    model: ModelArch,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int,
    calib: Calibration,
    reason: str,
) -> ServeEstimate:
    """An infeasible estimate that still reports the memory it would need (when computable)."""
    mem = (
        serve_memory_gb(model, gpus, precision, batch, prompt + output, prompt, calib)
        if precision in PRECISIONS
        else {}
    )
    return ServeEstimate(
        False, reason, gpus, precision, batch, 0.0, math.inf, math.inf, sum(mem.values()), mem
    )


def ep_possible(model: ModelArch, gpus: int) -> bool:
    """Expert parallelism is a distinct layout: a MoE on several GPUs that share its experts
    evenly.

    >>> from planner.physics.train import _toy_model
    >>> ep_possible(_toy_model(), 8)
    False
    """
    return model.moe is not None and gpus > 1 and model.moe.experts % gpus == 0


def _layout(model: ModelArch, gpus: int, calib: Calibration) -> str:
    """The layout an estimate was made in (``tp`` unless expert parallelism applies)."""
    return calib.moe_layout if ep_possible(model, gpus) else "tp"
