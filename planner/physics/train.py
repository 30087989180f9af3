"""Training physics: memory per GPU, FLOPs, multi-GPU efficiency and the fastest layout.

Conventions
-----------
* Model FLOPs per trained token (full training) = ``6 N + 12 L h s`` (PaLM appendix B and
  llm-foundry's MFU: matmuls with weights forward+backward, plus attention scores/values without
  the causal halving). LoRA/QLoRA: ``4 N + 12 L h s`` (no weight gradients of the frozen base;
  NeMo counts 4N for LoRA).
* MFU = model FLOPs per second / BF16 dense peak. Full activation recomputation does extra
  (hardware) FLOPs, so it *lowers* MFU by ``recompute_factor``; it never changes the FLOP count.
  FP8 training reports MFU against the BF16 peak too (so it can exceed the BF16 figures).
* Memory in GB (1e9 bytes) per GPU; bandwidths in GB/s; times in seconds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration_values import Calibration, default_calibration, gpu_family
from planner.physics.moe import compute_params, expert_params, train_attn_flops_per_token
from planner.physics.realized import DEFAULT_STACK, STACKS, hours_band, quantile_factor
from planner.physics.vendor import train_efficiency

GB = 1e9
METHODS = ("full", "lora", "qlora")


@dataclass(frozen=True)
class TrainLayout:
    tp: int
    pp: int
    dp: int
    zero_stage: int
    recompute: bool
    micro_batch: int
    ep: int = 1  # expert parallelism inside the data-parallel group (MoE only)


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


# ----------------------------------------------------------------------------- FLOPs


def flops_per_token(model: ModelArch, seq_len: int, method: str = "full") -> float:
    """Model FLOPs per trained token: ``k N + 12 L h s`` with k = 6 (full) or 4 (LoRA/QLoRA).

    Units: FLOP/token. 6N = 2N forward + 4N backward (activation and weight gradients); LoRA skips
    the weight gradients of the frozen base (2N). 12 L h s = attention scores and weighted sum,
    forward + backward.

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
    k = 6.0 if method == "full" else 4.0
    if model.moe is None and model.mla is None and model.sliding_window is None:
        return k * model.params + 12.0 * model.layers * model.hidden * seq_len
    return k * compute_params(model) + train_attn_flops_per_token(model, seq_len)


# ----------------------------------------------------------------------------- efficiencies


def size_factor(hidden: int, calib: Calibration) -> float:
    """Model-size MFU factor ``hidden / (hidden + h_half)`` (dimensionless).

    >>> 0.8 < size_factor(4096, default_calibration()) < 0.95
    True
    """
    h_half = calib.train.mfu_size_half_hidden.value
    return hidden / (hidden + h_half)


def gemm_factor(tokens_per_micro_batch: float, calib: Calibration) -> float:
    """Micro-batch GEMM factor ``t / (t + t_half)``, t = micro_batch * seq_len (dimensionless).

    >>> gemm_factor(8192, default_calibration()) > gemm_factor(2048, default_calibration())
    True
    """
    t_half = calib.train.gemm_half_tokens.value
    return tokens_per_micro_batch / (tokens_per_micro_batch + t_half)


def base_mfu(gpu: GpuSpec, calib: Calibration) -> float:
    """Asymptotic single-GPU BF16 MFU of the GPU's family (calibrated; dimensionless).

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
    """MFU of one GPU before communication: base x size x GEMM x recompute x QLoRA x MoE x the
    vendor's software efficiency (:func:`planner.physics.vendor.train_efficiency`; NVIDIA 1).

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
        mfu *= t.moe_mfu_factor.value  # all-to-all, expert imbalance, token permutation
    return mfu * train_efficiency(gpu)


# ----------------------------------------------------------------------------- links


def node_gpus(gpu: GpuSpec, calib: Calibration) -> int:
    """GPUs that share one server's fast links: the SXM board size, else ``pcie_node_gpus``.

    >>> from planner.physics.train import _toy_gpu
    >>> node_gpus(_toy_gpu(), default_calibration())
    8
    """
    if gpu.form_factor == "sxm":
        return max(1, gpu.node_gpus)
    return int(calib.links.pcie_node_gpus.value)


def intra_node_link(gpu: GpuSpec, group: int, calib: Calibration) -> tuple[float, float]:
    """(bandwidth GB/s per direction achieved, latency s) of a collective over ``group`` GPUs in a node.

    NVLink: catalog bidirectional GB/s / 2 x nvlink_eff (PCIe cards with NVLink bridges pair only
    two GPUs, so groups > 2 fall back to PCIe). PCIe: 15.75 GB/s x 2^(gen-3) x pcie_eff, halved
    without peer-to-peer (host bounce buffers).

    >>> from planner.physics.train import _toy_gpu
    >>> bw, lat = intra_node_link(_toy_gpu(), 8, default_calibration())
    >>> round(bw), lat
    (360, 8e-06)
    """
    lk = calib.links
    ic = gpu.interconnect
    if ic.nvlink_gbs > 0 and (gpu.form_factor == "sxm" or group <= 2):
        return ic.nvlink_gbs / 2 * lk.nvlink_eff.value, lk.nvlink_latency_us.value * 1e-6
    bw = lk.pcie_x16_gbs_gen3.value * 2 ** (ic.pcie_gen - 3) * lk.pcie_eff.value
    if not ic.p2p:
        return bw * lk.no_p2p_factor.value, lk.no_p2p_latency_us.value * 1e-6
    return bw, lk.pcie_latency_us.value * 1e-6


def inter_node_link(gpu: GpuSpec, calib: Calibration) -> tuple[float, float]:
    """(per-GPU network GB/s, latency s) between servers, by GPU class.

    >>> from planner.physics.train import _toy_gpu
    >>> bw, lat = inter_node_link(_toy_gpu(), default_calibration())
    >>> bw, round(lat * 1e6)
    (50.0, 30)
    """
    lk = calib.links
    if gpu.form_factor == "sxm":
        bw = lk.inter_node_gbs_sxm.value
    elif gpu.consumer:
        bw = lk.inter_node_gbs_consumer.value
    else:
        bw = lk.inter_node_gbs_pcie.value
    return bw, lk.inter_node_latency_us.value * 1e-6


def with_inter_node_gbs(calib: Calibration, gbs_per_gpu: float) -> Calibration:
    """``calib`` with every inter-node link at ``gbs_per_gpu`` GB/s per GPU: a rented
    cluster's fabric replaces the catalog's assumption for the GPU's class (an owned cluster).
    Gb/s as offers publish them / 8 = GB/s.

    >>> from planner.physics.train import _toy_gpu
    >>> c = with_inter_node_gbs(default_calibration(), 400 / 8)
    >>> inter_node_link(_toy_gpu(), c)[0]
    50.0
    """
    lk = calib.links
    upd = {
        name: getattr(lk, name).model_copy(update={"value": gbs_per_gpu})
        for name in ("inter_node_gbs_sxm", "inter_node_gbs_pcie", "inter_node_gbs_consumer")
    }
    return calib.model_copy(update={"links": lk.model_copy(update=upd)})


def allreduce_s(nbytes: float, group: int, bw_gbs: float, latency_s: float) -> float:
    """Ring all-reduce time: ``latency + 2 (g-1)/g x bytes / bandwidth`` (s).

    >>> allreduce_s(1e9, 2, 100.0, 0.0)
    0.01
    >>> allreduce_s(1e9, 1, 100.0, 1e-5)
    0.0
    """
    if group <= 1:
        return 0.0
    return latency_s + 2 * (group - 1) / group * nbytes / (bw_gbs * GB)


def pipeline_efficiency(micro_batches: int, pp: int) -> float:
    """1F1B pipeline efficiency ``m / (m + p - 1)``; the bubble is ``(p-1)/(m+p-1)``.

    >>> pipeline_efficiency(8, 4)
    0.7272727272727273
    >>> pipeline_efficiency(5, 1)
    1.0
    """
    return micro_batches / (micro_batches + pp - 1)


# ----------------------------------------------------------------------------- memory


def activation_bytes_per_layer(
    seq_len: int, micro_batch: int, hidden: int, tp: int, recompute: bool
) -> float:
    """Activation bytes kept per layer per micro-batch on one GPU (Korthikanti et al. 2022).

    Without recomputation ``s b h (34 + 5 a s / h) / t`` with tensor + sequence parallelism; with
    flash-attention (assumed: standard since 2023) the ``5 a s / h`` score term is not stored, leaving
    ``34 s b h / t``. Full recomputation keeps only the layer input, ``2 s b h / t``.

    >>> activation_bytes_per_layer(4096, 1, 4096, 1, False) / 1e9
    0.570425344
    >>> activation_bytes_per_layer(4096, 1, 4096, 1, True) / 1e9
    0.033554432
    """
    per = 2.0 if recompute else 34.0
    return per * seq_len * micro_batch * hidden / tp


def train_memory_gb(
    model: ModelArch,
    layout: TrainLayout,
    method: str,
    seq_len: int,
    micro_batches: int,
    calib: Calibration,
) -> dict[str, float]:
    """Memory per GPU by kind (GB): weights, gradients, optimizer, activations, overhead.

    Full mixed-precision AdamW = 16 B/param: BF16 weights 2 + BF16 grads 2 + FP32 master 4 + Adam
    m, v 8. Model states are split by tp*pp; ZeRO-1 shards the optimizer (12 B), ZeRO-2 also the
    gradients, ZeRO-3/FSDP also the weights across dp. LoRA: frozen BF16 base (2 B/param) plus
    adapters (``lora_param_fraction`` of params) with full 16 B/param states; QLoRA base at
    ``qlora_bytes_per_param``. Activations: stage layers x micro-batches in flight (1F1B keeps up
    to ``pp`` on the first stage), plus one layer's full working set when recomputing, plus the
    FP32 logits and their gradient (``8 s b V / t``).

    >>> from planner.physics.train import _toy_model
    >>> lay = TrainLayout(tp=1, pp=1, dp=8, zero_stage=3, recompute=False, micro_batch=1)
    >>> mem = train_memory_gb(_toy_model(), lay, "full", 2048, 4, default_calibration())
    >>> round(mem["optimizer"], 2), round(mem["weights"], 2)  # 12 B and 2 B per param / 8
    (10.11, 1.69)
    """
    t = calib.train
    n = model.params
    shard = layout.tp * layout.pp
    dp = layout.dp
    z = layout.zero_stage
    if method == "full":
        base_b, train_n = 2.0, n
    else:
        base_b = 2.0 if method == "lora" else t.qlora_bytes_per_param.value
        train_n = n * t.lora_param_fraction.value
    weights = n * base_b / shard / (dp if z >= 3 else 1)
    if method != "full":
        weights += train_n * 2.0 / shard
    grads = train_n * 2.0 / shard / (dp if z >= 2 else 1)
    optim = train_n * 12.0 / shard / (dp if z >= 1 else 1)
    if layout.ep > 1 and method == "full":
        # expert parallelism keeps 1/ep of the experts per GPU; ZeRO over the whole
        # data-parallel group already shards them dp ways (dp/ep replicas x ep), so it
        # changes only what ZeRO leaves unsharded
        local = n - expert_params(model) * (1 - 1 / layout.ep)
        weights = (n / dp if z >= 3 else local) * base_b / shard
        grads = (n / dp if z >= 2 else local) * 2.0 / shard
        optim = (n / dp if z >= 1 else local) * 12.0 / shard
    stage_layers = math.ceil(model.layers / layout.pp)
    in_flight = min(layout.pp, micro_batches)
    per_layer = activation_bytes_per_layer(
        seq_len, layout.micro_batch, model.hidden, layout.tp, layout.recompute
    )
    act = stage_layers * in_flight * per_layer
    if layout.recompute:
        act += activation_bytes_per_layer(
            seq_len, layout.micro_batch, model.hidden, layout.tp, False
        )
    act += 8.0 * seq_len * layout.micro_batch * model.vocab / layout.tp
    return {
        "weights": weights / GB,
        "gradients": grads / GB,
        "optimizer": optim / GB,
        "activations": act / GB,
        "overhead": t.framework_overhead_gb.value,
    }


# ----------------------------------------------------------------------------- step time


@dataclass(frozen=True)
class LayoutEval:
    fits: bool
    mem_total: float
    memory: dict[str, float]
    tokens_per_s_per_gpu: float
    mfu: float


def _micro_batches(gbs_tokens: float, dp: int, micro_batch: int, seq_len: int) -> int:
    """Micro-batches per pipeline per optimizer step (at least 1).

    >>> _micro_batches(2**21, 8, 1, 4096)
    64
    """
    return max(1, round(gbs_tokens / (dp * micro_batch * seq_len)))


def evaluate_layout(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    lay: TrainLayout,
    method: str,
    seq_len: int,
    gbs_tokens: float,
    precision: str,
    calib: Calibration,
) -> LayoutEval:
    """Memory and throughput of one layout (see module conventions).

    Step time = (m + pp - 1) micro-batch slots (1F1B bubble) x (micro-batch compute on a stage +
    TP all-reduces) + the data-parallel communication not hidden under ``dp_overlap`` of compute.
    """
    m = _micro_batches(gbs_tokens, lay.dp, lay.micro_batch, seq_len)
    mem = train_memory_gb(model, lay, method, seq_len, m, calib)
    total = sum(mem.values())
    cap = gpu.memory_gb.value * calib.train.usable_memory_fraction.value
    mfu1 = single_gpu_mfu(model, gpu, seq_len, lay.micro_batch, lay.recompute, method, calib)
    peak = gpu.bf16_dense_tflops.value * 1e12
    if precision == "fp8":
        peak *= calib.train.fp8_speedup.value
    fpt = flops_per_token(model, seq_len, method)
    mb_tokens = lay.micro_batch * seq_len
    # compute time of one micro-batch on one stage (s)
    t_mb = mb_tokens * fpt / (lay.tp * lay.pp) / (peak * mfu1)
    # tensor parallel: 4 all-reduces per layer (2 fwd, 2 bwd), 6 with recompute, of s*b*h*2 bytes
    node = node_gpus(gpu, calib)
    if lay.tp > 1:
        bw, lat = intra_node_link(gpu, lay.tp, calib)
        n_ar = 6 if lay.recompute else 4
        stage_layers = math.ceil(model.layers / lay.pp)
        t_mb += stage_layers * n_ar * allreduce_s(mb_tokens * model.hidden * 2, lay.tp, bw, lat)
    if lay.ep > 1:
        t_mb += _all_to_all_s(model, gpu, lay, mb_tokens, calib)
    step = t_mb * (m + lay.pp - 1)
    compute_step = t_mb * m
    # data parallel: gradient all-reduce (ZeRO<=2) or reduce-scatter + 2 all-gathers (ZeRO-3)
    if lay.dp > 1:
        if method == "full":
            params_shard = model.params / (lay.tp * lay.pp)
            grad_shard = params_shard
        else:
            params_shard = model.params / (lay.tp * lay.pp)
            grad_shard = params_shard * calib.train.lora_param_fraction.value
        if lay.tp * lay.pp * lay.dp > node:
            bw, lat = inter_node_link(gpu, calib)
        else:
            bw, lat = intra_node_link(gpu, lay.dp, calib)
        comm = allreduce_s(grad_shard * 2, lay.dp, bw, lat)
        if lay.zero_stage >= 3:
            base_b = 2.0 if method != "qlora" else calib.train.qlora_bytes_per_param.value
            comm += allreduce_s(params_shard * base_b, lay.dp, bw, lat)  # = 2 all-gathers
        if lay.ep > 1 and method == "full":
            comm = _ep_dp_comm_s(model, lay, bw, lat)
        step += max(0.0, comm - calib.train.dp_overlap.value * compute_step)
    tokens_step = m * lay.micro_batch * seq_len * lay.dp
    tps_gpu = tokens_step / step / gpus
    mfu = tps_gpu * fpt / (gpu.bf16_dense_tflops.value * 1e12)
    return LayoutEval(total <= cap, total, mem, tps_gpu, mfu)


def _all_to_all_s(
    model: ModelArch, gpu: GpuSpec, lay: TrainLayout, mb_tokens: float, calib: Calibration
) -> float:
    """Expert-parallel all-to-alls of one micro-batch on one stage (s): dispatch and combine,
    forward and backward (4 per MoE layer), each moving ``tokens x k x hidden x 2`` bytes per
    tensor-parallel rank, ``(ep-1)/ep`` of it off the GPU; over NVLink while ``tp x ep`` fits
    a node, else over the network.

    >>> from planner.physics.train import _toy_gpu
    >>> from planner.inputs.catalog import load_models
    >>> m = load_models()["mixtral-8x7b"]
    >>> lay = TrainLayout(1, 1, 8, 2, False, 1, ep=8)
    >>> 0 < _all_to_all_s(m, _toy_gpu(), lay, 4096, default_calibration()) < 0.1
    True
    """
    assert model.moe is not None
    if lay.tp * lay.ep <= node_gpus(gpu, calib):
        bw, lat = intra_node_link(gpu, lay.ep, calib)
    else:
        bw, lat = inter_node_link(gpu, calib)
    nbytes = mb_tokens * model.moe.experts_per_token * model.hidden * 2.0 / lay.tp
    one = lat + nbytes * (lay.ep - 1) / lay.ep / (bw * GB)
    stage_moe_layers = math.ceil(model.moe_layers / lay.pp)
    return stage_moe_layers * 4 * one


def _ep_dp_comm_s(model: ModelArch, lay: TrainLayout, bw: float, lat: float) -> float:
    """Gradient reduction with expert parallelism (s): the non-expert gradients over the
    data-parallel group, each GPU's experts (1/ep of them) over the dp/ep replicas holding
    the same experts (ZeRO-3 adds the matching weight all-gathers).

    >>> from planner.inputs.catalog import load_models
    >>> m = load_models()["mixtral-8x7b"]
    >>> a = _ep_dp_comm_s(m, TrainLayout(1, 1, 64, 2, False, 1, ep=8), 50.0, 3e-5)
    >>> b = _ep_dp_comm_s(m, TrainLayout(1, 1, 64, 2, False, 1, ep=1), 50.0, 3e-5)
    >>> a < b / 4  # experts are most of Mixtral; reduced 8x fewer bytes
    True
    """
    shard = lay.tp * lay.pp
    experts = expert_params(model) / shard / lay.ep
    rest = (model.params - expert_params(model)) / shard
    times = 2 if lay.zero_stage >= 3 else 1
    return times * (
        allreduce_s(rest * 2, lay.dp, bw, lat) + allreduce_s(experts * 2, lay.dp // lay.ep, bw, lat)
    )


def _ep_sizes(model: ModelArch, dp: int) -> tuple[int, ...]:
    """Expert-parallel sizes to try: 1, and powers of two dividing dp up to the expert count
    (and 64, the widest EP published runs use: DeepSeek-V3 EP64)."""
    if model.moe is None:
        return (1,)
    out, ep = [1], 2
    while ep <= min(dp, model.moe.experts, 64) and dp % ep == 0:
        out.append(ep)
        ep *= 2
    return tuple(out)


def _layouts(model: ModelArch, gpu: GpuSpec, gpus: int, calib: Calibration):
    """Candidate (tp, pp, dp): tp a power of two <= 8 within a node, pp a power of two <= layers."""
    node = node_gpus(gpu, calib)
    for tp in (1, 2, 4, 8):
        if tp > node or gpus % tp:
            continue
        pp = 1
        while pp <= min(model.layers, 64) and tp * pp <= gpus:
            if gpus % (tp * pp) == 0:
                yield tp, pp, gpus // (tp * pp)
            pp *= 2


@functools.lru_cache(maxsize=8192)
def _best_layout(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    method: str,
    seq_len: int,
    gbs_tokens: float,
    precision: str,
    calib: Calibration,
) -> tuple[TrainLayout | None, LayoutEval | None, TrainLayout | None, LayoutEval | None]:
    """(fastest fitting layout, its eval, least-memory layout, its eval)."""
    best: tuple[TrainLayout, LayoutEval] | None = None
    smallest: tuple[TrainLayout, LayoutEval] | None = None
    for tp, pp, dp in _layouts(model, gpu, gpus, calib):
        for zero, ep in (
            ((z, e) for z in (2, 3) for e in _ep_sizes(model, dp)) if dp > 1 else ((0, 1),)
        ):
            leanest = TrainLayout(tp, pp, dp, zero, True, 1, ep)
            ev = evaluate_layout(
                model, gpu, gpus, leanest, method, seq_len, gbs_tokens, precision, calib
            )
            if not ev.fits:  # not even the leanest variant fits: skip the others
                if smallest is None or ev.mem_total < smallest[1].mem_total:
                    smallest = (leanest, ev)
                continue
            for recompute in (False, True):
                for mbs in (1, 2, 4, 8):
                    lay = TrainLayout(tp, pp, dp, zero, recompute, mbs, ep)
                    ev = evaluate_layout(
                        model, gpu, gpus, lay, method, seq_len, gbs_tokens, precision, calib
                    )
                    if smallest is None or ev.mem_total < smallest[1].mem_total:
                        smallest = (lay, ev)
                    if not ev.fits:
                        break  # larger micro-batches need more memory
                    if best is None or ev.tokens_per_s_per_gpu > best[1].tokens_per_s_per_gpu:
                        best = (lay, ev)
    if best is None:
        return None, None, *(smallest or (None, None))
    return best[0], best[1], *(smallest or (None, None))


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
) -> TrainEstimate:
    """Fastest layout of a training job on ``gpus`` x ``gpu`` and its time, memory and MFU.

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
    calib = calib or default_calibration()
    if precision == "fp8" and gpu.fp8_dense_tflops is None:
        return _infeasible(gpus, f"{gpu.id} has no FP8 tensor cores")
    if gbs_tokens_given := global_batch_tokens:
        gbs = float(gbs_tokens_given)
    elif method == "full":
        gbs = calib.train.global_batch_tokens.value
    else:
        gbs = calib.train.finetune_global_batch_tokens.value
    lay, ev, small_lay, small_ev = _best_layout(
        model, gpu, gpus, method, seq_len, gbs, precision, calib
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


# ----------------------------------------------------------------------------- doctest helpers


def _toy_gpu() -> GpuSpec:
    """An H100 SXM spec for doctests (the catalog is the real source)."""
    return make_gpu("h100-sxm", "H100 SXM", 80, 3350, 989.4, 1978.9, 900, 5, True, "sxm")


def _toy_model() -> ModelArch:
    """Llama-2-7B for doctests."""
    return llama_like("llama-2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 32000)


def make_gpu(
    gid: str,
    name: str,
    mem_gb: float,
    bw_gbs: float,
    bf16: float,
    fp8: float | None,
    nvlink: float,
    pcie_gen: int,
    p2p: bool,
    form: str,
    consumer: bool = False,
) -> GpuSpec:
    """Build a GpuSpec from bare numbers (tests, doctests, what-ifs); prices are placeholders."""

    def s(v: float) -> dict:
        return {"value": v, "source": "test", "as_of": "2025-01"}

    return GpuSpec.model_validate(
        {
            "id": gid,
            "name": name,
            "class": "consumer" if consumer else "datacenter",
            "form_factor": form,
            "memory_gb": s(mem_gb),
            "memory_bandwidth_gbs": s(bw_gbs),
            "bf16_dense_tflops": s(bf16),
            "fp8_dense_tflops": s(fp8) if fp8 else None,
            "interconnect": {
                "nvlink_gbs": nvlink,
                "pcie_gen": pcie_gen,
                "p2p": p2p,
                "source": "test",
                "as_of": "2025-01",
            },
            "tdp_w": s(700),
            "idle_w": s(100),
            "host_w_per_gpu": s(200),
            "node_size": s(8 if form == "sxm" else 1),
            "purchase_usd": {**s(1.0), "low": 1.0, "high": 1.0},
            "server_overhead_usd_per_gpu": {**s(1.0), "low": 1.0, "high": 1.0},
        }
    )


def llama_like(
    mid: str,
    params: float,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    vocab: int,
    max_context: int = 4096,
) -> ModelArch:
    """Build a ModelArch from bare numbers."""
    return ModelArch(
        id=mid,
        name=mid,
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=intermediate,
        vocab=vocab,
        max_context=max_context,
        source="test",
        as_of="2025-01",
    )


def derive_model(params: float) -> ModelArch:
    """A plausible Llama-like architecture with ``params`` parameters.

    Llama proportions: hidden ~ 128 x layers (Llama-2-7B 4096/32, 13B 5120/40) rounded to a
    multiple of 1024 (so the head count divides by 8), head_dim 128,
    SwiGLU inner size ~ 8/3 hidden (rounded to 256), 32k vocabulary, grouped-query attention with
    8 KV heads from 30B up; layers from ``params ~ 12 L h^2 + 2 V h``.

    >>> m = derive_model(7e9)
    >>> m.layers, m.hidden, m.heads, m.kv_heads
    (33, 4096, 32, 32)
    >>> derive_model(70e9).kv_heads
    8
    """
    vocab = 32000
    hidden_guess = 128 * max(2.0, (params / (12 * 128**2)) ** (1 / 3))
    step = 1024 if hidden_guess >= 2048 else 256  # heads a multiple of 8 for tensor parallelism
    hidden = max(256, int(round(hidden_guess / step)) * step)
    body = max(params - 2 * vocab * hidden, params * 0.5)
    layers = max(2, round(body / (12 * hidden**2)))
    heads = hidden // 128
    kv_heads = 8 if params >= 30e9 and heads % 8 == 0 else heads
    inter = int(round(8 / 3 * hidden / 256)) * 256
    return llama_like(
        f"custom-{params / 1e9:g}b",
        params,
        layers,
        hidden,
        heads,
        kv_heads,
        inter,
        vocab,
        max_context=131072,
    )
