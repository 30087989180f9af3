"""Parallel layouts of a training job: one layout's memory and step time, and the search for
the fastest one (TP x PP x DP, ZeRO stage, expert parallelism, pipeline schedule, micro-batch,
recomputation).

Step time = (m + bubble) micro-batch slots x (micro-batch compute on a stage + TP all-reduces +
the expert all-to-alls the schedule does not hide) + the data-parallel communication not hidden
under ``dp_overlap`` of the compute.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration
from planner.physics.moe import expert_params
from planner.physics.training.compute import flops_per_token, fp8_time_factor, single_gpu_mfu
from planner.physics.training.links import (
    all_to_all_s,
    allreduce_s,
    bubble_slots,
    ep_dp_comm_s,
    inter_node_link,
    intra_node_link,
    node_gpus,
    schedules_for,
)
from planner.physics.training.memory import train_memory_gb

# DualPipe pairs a forward and a backward chunk and runs one's all-to-alls under the other's
# compute; what exceeds the compute stays exposed (DeepSeek-V3 s3.2.1: "both all-to-all and PP
# communication can be fully hidden", with a computation-to-communication ratio of about 1:1).
DUALPIPE_A2A_OVERLAP = 1.0


@dataclass(frozen=True)
class TrainLayout:
    tp: int
    pp: int
    dp: int
    zero_stage: int
    recompute: bool
    micro_batch: int
    ep: int = 1  # expert parallelism inside the data-parallel group (MoE only)
    schedule: str = "1f1b"  # pipeline schedule (links.SCHEDULES); 1f1b without a pipeline


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


@dataclass(frozen=True)
class _JobConstants:
    """What every layout of one search shares: usable memory per GPU (GB), the BF16 peak
    (FLOP/s), model FLOPs per token, the FP8 step-time factor (1 in BF16), GPUs per server, and
    the single-GPU MFU per (micro-batch, recomputation) (:func:`single_gpu_mfu`)."""

    cap_gb: float
    peak: float
    flops_per_token: float
    fp8_factor: float
    node: int
    mfu1: dict[tuple[int, bool], float]


def _job_constants(
    model: ModelArch, gpu: GpuSpec, method: str, seq_len: int, precision: str, calib: Calibration
) -> _JobConstants:
    """The figures of :class:`_JobConstants`, computed once per search rather than per layout
    (they were ~30 % of a search's time, mostly hashing the calibration for its caches)."""
    mfu1 = {
        (mbs, rc): single_gpu_mfu(model, gpu, seq_len, mbs, rc, method, calib)
        for mbs in (1, 2, 4, 8)
        for rc in (False, True)
    }
    fp8 = fp8_time_factor(model, gpu, seq_len, method, calib) if precision == "fp8" else 1.0
    return _JobConstants(
        cap_gb=gpu.memory_gb.value * calib.train.usable_memory_fraction.value,
        peak=gpu.bf16_dense_tflops.value * 1e12,
        flops_per_token=flops_per_token(model, seq_len, method),
        fp8_factor=fp8,
        node=node_gpus(gpu, calib),
        mfu1=mfu1,
    )


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
    job: _JobConstants | None = None,
) -> LayoutEval:
    """Memory and throughput of one layout (see the module docstring); ``job``: the search's
    shared figures (:func:`_job_constants`), computed here when not given."""
    job = job or _job_constants(model, gpu, method, seq_len, precision, calib)
    m = _micro_batches(gbs_tokens, lay.dp, lay.micro_batch, seq_len)
    mem = train_memory_gb(model, lay, method, seq_len, m, calib)
    total = sum(mem.values())
    cap = job.cap_gb
    key = (lay.micro_batch, lay.recompute)
    mfu1 = (
        job.mfu1[key]
        if key in job.mfu1
        else single_gpu_mfu(model, gpu, seq_len, lay.micro_batch, lay.recompute, method, calib)
    )
    peak = job.peak
    fpt = job.flops_per_token
    mb_tokens = lay.micro_batch * seq_len
    stage_layers = math.ceil(model.layers / lay.pp)
    # compute time of one micro-batch on one stage (s)
    t_mb = mb_tokens * fpt / (lay.tp * lay.pp) / (peak * mfu1) * job.fp8_factor
    t_compute = t_mb
    node = job.node
    # tensor parallel: 4 all-reduces per layer (2 fwd, 2 bwd), 6 with recompute, of s*b*h*2 bytes
    if lay.tp > 1:
        bw, lat = intra_node_link(gpu, lay.tp, calib)
        n_ar = 6 if lay.recompute else 4
        t_mb += stage_layers * n_ar * allreduce_s(mb_tokens * model.hidden * 2, lay.tp, bw, lat)
    if lay.ep > 1:
        moe_layers = math.ceil(model.moe_layers / lay.pp)
        a2a = all_to_all_s(model, gpu, lay.tp, lay.ep, moe_layers, mb_tokens, calib, precision)
        if lay.schedule == "dualpipe" and lay.pp > 1:
            a2a = max(0.0, a2a - DUALPIPE_A2A_OVERLAP * t_compute)
        t_mb += a2a
    step = t_mb * (m + bubble_slots(lay.schedule, lay.pp, stage_layers))
    compute_step = t_mb * m
    # data parallel: gradient all-reduce (ZeRO<=2) or reduce-scatter + 2 all-gathers (ZeRO-3)
    if lay.dp > 1:
        params_shard = model.params / (lay.tp * lay.pp)
        grad_shard = params_shard
        if method != "full":
            grad_shard = params_shard * calib.train.lora_param_fraction.value
        if lay.tp * lay.pp * lay.dp > node:
            bw, lat = inter_node_link(gpu, calib)
        else:
            bw, lat = intra_node_link(gpu, lay.dp, calib)
        comm = allreduce_s(grad_shard * 2, lay.dp, bw, lat)
        if lay.zero_stage >= 3:
            # ZeRO-3/FSDP gathers the weights again for every micro-batch's forward and
            # backward (one all-reduce's bytes = 2 all-gathers), not once per step
            base_b = 2.0 if method != "qlora" else calib.train.qlora_bytes_per_param.value
            comm += m * allreduce_s(params_shard * base_b, lay.dp, bw, lat)
        if lay.ep > 1 and method == "full":
            comm = ep_dp_comm_s(
                model, lay.tp, lay.pp, lay.dp, lay.ep, lay.zero_stage, bw, lat,
                expert_params(model), m,
            )  # fmt: skip
        step += max(0.0, comm - calib.train.dp_overlap.value * compute_step)
    tokens_step = m * lay.micro_batch * seq_len * lay.dp
    tps_gpu = tokens_step / step / gpus
    mfu = tps_gpu * fpt / peak
    return LayoutEval(total <= cap, total, mem, tps_gpu, mfu)


def throughput_ceiling(job: _JobConstants, micro_batch: int, recompute: bool) -> float:
    """Tokens/s per GPU that no layout of ``job``'s search with this micro-batch and
    recomputation can exceed: its compute alone, ``peak x MFU1 / (FLOPs per token x FP8
    factor)`` (tokens/s/GPU).

    :func:`evaluate_layout`'s step is ``t_mb (m + bubble) + exposed DP communication`` with
    ``t_mb >= mb_tokens FLOPs/token FP8 / (tp pp peak MFU1)`` and every added term >= 0, and a
    searched layout has ``tp pp dp`` = its GPUs, so ``tokens per step / step / GPUs`` is at
    most this figure.

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> cal = default_calibration()
    >>> job = _job_constants(_toy_model(), _toy_gpu(), "full", 2048, "bf16", cal)
    >>> lay = TrainLayout(tp=1, pp=1, dp=8, zero_stage=2, recompute=False, micro_batch=2)
    >>> ev = evaluate_layout(_toy_model(), _toy_gpu(), 8, lay, "full", 2048, 2**21, "bf16", cal)
    >>> 0 < ev.tokens_per_s_per_gpu <= throughput_ceiling(job, 2, False)
    True
    """
    return job.peak * job.mfu1[(micro_batch, recompute)] / (job.flops_per_token * job.fp8_factor)


def _memory_total(
    model: ModelArch,
    lay: TrainLayout,
    method: str,
    seq_len: int,
    gbs_tokens: float,
    calib: Calibration,
) -> float:
    """GB per GPU of one layout (the sum :func:`evaluate_layout` compares with the card)."""
    m = _micro_batches(gbs_tokens, lay.dp, lay.micro_batch, seq_len)
    return sum(train_memory_gb(model, lay, method, seq_len, m, calib).values())


def _cannot_beat(
    job: _JobConstants, lay: TrainLayout, m: int, stage_layers: int, best: LayoutEval
) -> bool:
    """Whether ``lay`` (``m`` micro-batches of ``stage_layers`` layers a stage) is certainly no
    faster than ``best``: its ceiling, scaled by the pipeline's idle share ``m / (m + bubble)``
    (the step is at least ``t_mb (m + bubble)``), with a margin for rounding, is at most best's
    tokens/s per GPU."""
    busy = m / (m + bubble_slots(lay.schedule, lay.pp, stage_layers))
    ceiling = throughput_ceiling(job, lay.micro_batch, lay.recompute) * busy
    return ceiling * (1 + 1e-9) <= best.tokens_per_s_per_gpu


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


def _layouts(
    model: ModelArch, gpu: GpuSpec, gpus: int, calib: Calibration, max_dp: int | None = None
):
    """Candidate (tp, pp, dp): tp a power of two <= 8 within a node, pp a power of two <= layers,
    dp at most ``max_dp`` (None: any)."""
    node = node_gpus(gpu, calib)
    for tp in (1, 2, 4, 8):
        if tp > node or gpus % tp:
            continue
        pp = 1
        while pp <= min(model.layers, 64) and tp * pp <= gpus:
            dp = gpus // (tp * pp)
            if gpus % (tp * pp) == 0 and (max_dp is None or dp <= max_dp):
                yield tp, pp, dp
            pp *= 2


def has_layout(
    model: ModelArch, gpu: GpuSpec, gpus: int, calib: Calibration, max_dp: int | None = None
) -> bool:
    """Whether ``gpus`` GPUs split into at most ``max_dp`` data-parallel replicas at all (a run
    of one sequence cannot use 24 GPUs: no power-of-two TP x PP makes 24), before memory.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> from planner.physics.calibration.values import default_calibration
    >>> cal = default_calibration()
    >>> has_layout(_toy_model(), _toy_gpu(), 24, cal, 1), has_layout(_toy_model(), _toy_gpu(), 16, cal, 1)
    (False, True)
    """
    return next(_layouts(model, gpu, gpus, calib, max_dp), None) is not None


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
    max_dp: int | None = None,
    prune: bool = True,
) -> tuple[TrainLayout | None, LayoutEval | None, TrainLayout | None, LayoutEval | None]:
    """(fastest fitting layout, its eval, least-memory layout, its eval), with at most
    ``max_dp`` data-parallel replicas (None: any). ``prune``: a layout whose
    :func:`throughput_ceiling` is no faster than the best found is not timed, only its memory
    weighed (the same answer as the exhaustive search, ``prune=False``; 900 seeded searches
    took 7.56 s against 9.41 s, benchmarks/README.md)."""
    best: tuple[TrainLayout, LayoutEval] | None = None
    smallest: tuple[TrainLayout, LayoutEval] | None = None

    job = _job_constants(model, gpu, method, seq_len, precision, calib)

    def run(lay: TrainLayout) -> LayoutEval:
        return evaluate_layout(
            model, gpu, gpus, lay, method, seq_len, gbs_tokens, precision, calib, job
        )

    for tp, pp, dp in _layouts(model, gpu, gpus, calib, max_dp):
        stage_layers = math.ceil(model.layers / pp)
        for zero, ep in (
            ((z, e) for z in (2, 3) for e in _ep_sizes(model, dp)) if dp > 1 else ((0, 1),)
        ):
            m1 = _micro_batches(gbs_tokens, dp, 1, seq_len)
            for sched in schedules_for(pp, stage_layers, m1):
                leanest = TrainLayout(tp, pp, dp, zero, True, 1, ep, sched)
                leanest_ev = ev = run(leanest)
                if not ev.fits:  # not even the leanest variant fits: skip the others
                    if smallest is None or ev.mem_total < smallest[1].mem_total:
                        smallest = (leanest, ev)
                    continue
                for recompute in (False, True):
                    for mbs in (1, 2, 4, 8):
                        m = _micro_batches(gbs_tokens, dp, mbs, seq_len)
                        if mbs > 1 and (
                            dp * mbs * seq_len > gbs_tokens * 1.5
                            or sched not in schedules_for(pp, stage_layers, m)
                        ):
                            break  # the global batch holds no larger micro-batch
                        lay = TrainLayout(tp, pp, dp, zero, recompute, mbs, ep, sched)
                        if lay == leanest:
                            ev = leanest_ev
                        elif (
                            prune
                            and best is not None
                            and _cannot_beat(job, lay, m, stage_layers, best[1])
                        ):
                            # its memory still counts: the least-memory layout and the break
                            total = _memory_total(model, lay, method, seq_len, gbs_tokens, calib)
                            if smallest is not None and total >= smallest[1].mem_total:
                                if total > job.cap_gb:
                                    break
                                continue
                            ev = run(lay)
                        else:
                            ev = run(lay)
                        if smallest is None or ev.mem_total < smallest[1].mem_total:
                            smallest = (lay, ev)
                        if not ev.fits:
                            break  # larger micro-batches need more memory
                        if best is None or ev.tokens_per_s_per_gpu > best[1].tokens_per_s_per_gpu:
                            best = (lay, ev)
    if best is None:
        return None, None, *(smallest or (None, None))
    return best[0], best[1], *(smallest or (None, None))
