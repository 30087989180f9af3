"""Links and schedules: collectives over NVLink/PCIe/network, expert all-to-alls over the
scale-up and scale-out links, and the pipeline bubble of each schedule.

Bandwidths in GB/s per direction achieved, latencies in s, times in s.
"""

from __future__ import annotations

import math

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration

GB = 1e9


def node_gpus(gpu: GpuSpec, calib: Calibration) -> int:
    """GPUs that share one server's fast links: the SXM board size, else ``pcie_node_gpus``.

    >>> from planner.physics.calibration.values import default_calibration
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

    >>> from planner.physics.calibration.values import default_calibration
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

    >>> from planner.physics.calibration.values import default_calibration
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

    >>> from planner.physics.calibration.values import default_calibration
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


# ----------------------------------------------------------------------------- pipeline schedules

# 1f1b: PipeDream-Flush / Megatron 1F1B, bubble (p-1) micro-batch slots (Narayanan et al. 2021).
# interleaved: Megatron's interleaved 1F1B with v model chunks per GPU, bubble (p-1)/v slots,
#   activations x (1 + (p-1)/(p v)) (Narayanan et al. 2021, SC21; Korthikanti et al. 2022).
# zero-bubble: ZB-H1 (Qi et al. 2023, arXiv:2401.10241): the backward split into input- and
#   weight-gradient passes, bubble (p-1)(F + B - 2W) = (p-1)/3 slots with F = B = W, 1F1B memory.
# dualpipe: DeepSeek-V3's bidirectional schedule (arXiv:2412.19437 s3.2.1, Table 2): bubble
#   (p/2 - 1)(F&B + B - 3W) = (p/2 - 1)/3 slots, two copies of the stage's parameters, p + 1
#   micro-batches of activations, and the expert all-to-alls hidden under the paired chunk's
#   compute ("both all-to-all and PP communication can be fully hidden during execution").
SCHEDULES = ("1f1b", "interleaved", "zero-bubble", "dualpipe")
INTERLEAVE_CHUNKS = 4  # model chunks per GPU (Megatron virtual pipeline stages), at most this


def interleave_chunks(stage_layers: int) -> int:
    """Model chunks per GPU of the interleaved schedule: ``min(4, layers per stage)``."""
    return max(1, min(INTERLEAVE_CHUNKS, stage_layers))


def schedules_for(pp: int, stage_layers: int, micro_batches: int = 1 << 30) -> tuple[str, ...]:
    """The schedules a layout with ``pp`` stages and ``micro_batches`` per step can run: 1F1B
    always; interleaving needs 2+ layers per stage and ``m`` a multiple of ``pp`` (Megatron);
    zero-bubble at least ``pp`` micro-batches and DualPipe ``2 pp`` (its two directions), an
    even ``pp``. Without a pipeline there is no schedule to choose (1f1b).

    >>> schedules_for(1, 32)
    ('1f1b',)
    >>> schedules_for(16, 4)
    ('1f1b', 'interleaved', 'zero-bubble', 'dualpipe')
    >>> schedules_for(4, 8, 6)
    ('1f1b', 'zero-bubble')
    """
    if pp <= 1:
        return ("1f1b",)
    out = ["1f1b"]
    if stage_layers >= 2 and micro_batches % pp == 0:
        out.append("interleaved")
    if micro_batches >= pp:
        out.append("zero-bubble")
    if pp % 2 == 0 and micro_batches >= 2 * pp:
        out.append("dualpipe")
    return tuple(out)


def bubble_slots(schedule: str, pp: int, stage_layers: int) -> float:
    """Idle micro-batch slots per optimizer step (each slot = one micro-batch's F + B + W).

    >>> bubble_slots("1f1b", 8, 4), bubble_slots("interleaved", 8, 4)
    (7.0, 1.75)
    >>> round(bubble_slots("zero-bubble", 8, 4), 3), round(bubble_slots("dualpipe", 8, 4), 3)
    (2.333, 1.0)
    """
    if pp <= 1:
        return 0.0
    if schedule == "1f1b":
        return float(pp - 1)
    if schedule == "interleaved":
        return (pp - 1) / interleave_chunks(stage_layers)
    if schedule == "zero-bubble":
        return (pp - 1) / 3.0
    if schedule == "dualpipe":
        return max(0.0, pp / 2 - 1) / 3.0
    raise ValueError(f"unknown pipeline schedule {schedule!r}; one of {SCHEDULES}")


def pipeline_efficiency(micro_batches: int, pp: int, schedule: str = "1f1b",
                        stage_layers: int = 1) -> float:  # fmt: skip
    """Share of the step the pipeline computes: ``m / (m + bubble slots)``.

    >>> pipeline_efficiency(8, 4)
    0.7272727272727273
    >>> pipeline_efficiency(5, 1)
    1.0
    """
    return micro_batches / (micro_batches + bubble_slots(schedule, pp, stage_layers))


def in_flight_micro_batches(schedule: str, pp: int, micro_batches: int, stage_layers: int) -> float:
    """Micro-batches of activations the first stage holds at once (1F1B: ``pp``).

    >>> in_flight_micro_batches("1f1b", 4, 16, 8), in_flight_micro_batches("dualpipe", 4, 16, 8)
    (4, 5)
    """
    if pp <= 1:
        return 1
    m = min(pp, micro_batches)
    if schedule == "interleaved":
        v = interleave_chunks(stage_layers)
        return m * (1 + (pp - 1) / (pp * v))
    if schedule == "dualpipe":
        return min(pp + 1, micro_batches)
    return m


# ----------------------------------------------------------------------------- expert all-to-all


def all_to_all_s(
    model: ModelArch,
    gpu: GpuSpec,
    tp: int,
    ep: int,
    stage_moe_layers: int,
    mb_tokens: float,
    calib: Calibration,
    precision: str = "bf16",
) -> float:
    """Expert-parallel all-to-alls of one micro-batch on one stage (s): dispatch and combine,
    forward and backward (4 per MoE layer), per tensor-parallel rank, over both links at once.

    The ``ep`` ranks fill ``min(ep, node / tp)`` GPUs of a node, then more nodes. A token's ``k``
    experts are uniform over the ranks. **Scale-up** (NVLink) carries the copies for the node's
    other GPUs and forwards those that arrive over the network; **scale-out** (InfiniBand)
    carries one copy per distinct remote node the token reaches, ``(n-1)(1-(1-1/n)^k)`` of the
    ``n`` nodes (the copy is forwarded inside the node, as DeepSeek's dispatch kernels and DeepEP
    do). Each all-to-all takes the slower of the two links. FP8 runs dispatch in FP8 (1 B per
    element), everything else moves BF16 (DeepSeek-V3 s3.3.2).

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_gpu
    >>> from planner.inputs.catalog import load_models
    >>> m = load_models()["mixtral-8x7b"]
    >>> c = default_calibration()
    >>> one = all_to_all_s(m, _toy_gpu(), 1, 8, 32, 4096, c)
    >>> 0 < one < all_to_all_s(m, _toy_gpu(), 1, 16, 32, 4096, c)  # the second node's IB is slower
    True
    """
    assert model.moe is not None
    if ep <= 1 or stage_moe_layers <= 0:
        return 0.0
    k = model.moe.experts_per_token
    ranks_node = max(1, min(ep, node_gpus(gpu, calib) // tp))
    nodes = math.ceil(ep / ranks_node)
    remote_ranks = ep - ranks_node
    nv_copies = k * (ranks_node - 1) / ep + k * remote_ranks / ep  # local + forwarded
    ib_copies = (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** k) if nodes > 1 else 0.0
    elem = (1.0 if precision == "fp8" else 2.0) + 2.0 + 2.0 + 2.0  # bytes over the 4 passes
    row = mb_tokens * model.hidden / tp  # elements of one copy of the micro-batch
    bw_nv, lat_nv = intra_node_link(gpu, ranks_node, calib)
    t_nv = nv_copies * row * elem / (bw_nv * GB)
    t_ib = 0.0
    lat = lat_nv
    if ib_copies:
        bw_ib, lat_ib = inter_node_link(gpu, calib)
        t_ib = ib_copies * row * elem / (bw_ib * GB)
        lat = max(lat, lat_ib)
    return stage_moe_layers * (4 * lat + max(t_nv, t_ib))


def ep_dp_comm_s(model: ModelArch, tp: int, pp: int, dp: int, ep: int, zero_stage: int,
                 bw: float, lat: float, expert_params: float, micro_batches: int = 1) -> float:  # fmt: skip
    """Gradient reduction with expert parallelism (s): the non-expert gradients over the
    data-parallel group, each GPU's experts (1/ep of them) over the dp/ep replicas holding
    the same experts (ZeRO-3 adds the matching weight all-gathers, every micro-batch)."""
    shard = tp * pp
    experts = expert_params / shard / ep
    rest = (model.params - expert_params) / shard
    times = 1 + micro_batches if zero_stage >= 3 else 1
    return times * (
        allreduce_s(rest * 2, dp, bw, lat) + allreduce_s(experts * 2, dp // ep, bw, lat)
    )
