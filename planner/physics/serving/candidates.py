"""The bounded set of deployments worth trying for a plan (at most :data:`MAX_CANDIDATES`).

* aggregated, today's replicas: the smallest tensor-parallel size of one server that fits
  (1, 2, 4, 8) and the next one up, in tp; for a mixture of experts also ep and dep at the
  smallest size of at least 4 GPUs that fits;
* aggregated rack-wide / multi-node: for a mixture of experts, a dep worker of 16 GPUs (two HGX
  servers over the fabric; inside the domain on an NVL72 rack) and 32 GPUs where the scale-up
  domain holds them;
* disaggregated: decode dep workers of 8, 16, 32 and the whole domain (NVL72: 72) GPUs for a
  MoE (tp of the smallest fitting size for a dense model), each with the prefill pool sized for
  it: P prefill workers (the smallest fitting size of at least 4 GPUs, dep for a MoE) whose
  prompt throughput matches the decode worker's at its reference batch;
* MTP variants (DeepSeek-V3/R1) of the disaggregated and the largest aggregated candidates.
"""

from __future__ import annotations

import math

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.serving.deployment import Deployment, Worker
from planner.physics.serving.worker import WorkerPhysics, draft_acceptance, scaleup_domain

MAX_CANDIDATES = 16


def _fits(model, gpu, w: Worker, precision, prompt, output, calib, mtp=False) -> bool:
    return WorkerPhysics(model, gpu, w, precision, calib, mtp).check(prompt, output) is None


def _prefill_count(model, gpu, pre: Worker, dec: Worker, precision, prompt, output, calib, mtp):
    """Prefill workers whose prompt capacity matches what the decode worker finishes at its
    reference batch: the largest whose step is at most 1.5x the batch-1 step (high throughput
    at a still interactive TPOT), prompts/s = n x tokens per step / step / output; one prefill
    worker sustains 0.9 / s1 prompts/s (s1 = one prompt's marginal prefill time)."""
    dw = WorkerPhysics(model, gpu, dec, precision, calib, mtp)
    pw = WorkerPhysics(model, gpu, pre, precision, calib, mtp)
    top = max(1, dw.max_batch(prompt, output))
    ctx = prompt + (output - 1) / 2
    limit = 1.5 * dw.best_draft(1, ctx)[2]
    lo, hi = 1, top
    if dw.best_draft(hi, ctx)[2] <= limit:
        lo = hi
    while hi - lo > max(1, lo // 32):
        mid = (lo + hi) // 2
        if dw.best_draft(mid, ctx)[2] <= limit:
            lo = mid
        else:
            hi = mid
    _, acc, step = dw.best_draft(lo, ctx)
    need = lo * acc / step / output  # prompts/s the decode worker finishes
    s1 = pw.prefill_iter_s(1, prompt) - pw.prefill_iter_s(0, prompt)
    have = 0.9 / s1 if s1 > 0 else math.inf
    return max(1, min(64, math.ceil(need / have)))


def _with_mtp_prefill(model, gpu, x: Deployment, precision, prompt, output, calib):
    """The prefill pool of ``x`` resized for its decode worker with MTP (it finishes more)."""
    if x.prefill is None:
        return None
    p = _prefill_count(model, gpu, x.prefill, x.decode, precision, prompt, output, calib, True)
    return Worker(x.prefill.gpus, x.prefill.mode, p)


def candidate_deployments(
    model: ModelArch,
    gpu: GpuSpec,
    precision: str,
    prompt: int,
    output: int,
    *,
    disaggregated: bool | None = None,
    mtp: bool | None = None,
    calib: Calibration | None = None,
) -> list[Deployment]:
    """Deployments of ``model`` on ``gpu`` worth trying (each fits in memory), most today-like
    first. ``disaggregated``/``mtp``: None = both kinds (auto), True = only with, False = only
    without. ``mtp=True`` on a model without MTP layers gives no candidates.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> [d.label() for d in candidate_deployments(_toy_model(), _toy_gpu(), "fp16", 512, 256)]
    ['1x1:tp', '1x2:tp', '1x1:tp+1x1:tp']
    """
    calib = calib or default_calibration()
    # MTP layers, or a draft (EAGLE) whose measured acceptance the catalog or workload gives
    has_mtp = model.num_nextn_predict_layers > 0 or draft_acceptance(model, calib) is not None
    if mtp and not has_mtp:
        return []
    mtp_opts = [False] if not has_mtp or mtp is False else ([True] if mtp else [False, True])
    shape = (model, gpu, precision, prompt, output, calib)
    out: list[Deployment] = []
    if disaggregated is not True:
        out += [Deployment(w) for w in _aggregated_workers(*shape)]
    if disaggregated is not False:
        out += _disaggregated(*shape)
    if True in mtp_opts:
        extra = _mtp_variants(out, *shape)
        out = extra if mtp_opts == [True] else out + extra
    return _bounded(list(dict.fromkeys(out)))


def _sizes(gpu: GpuSpec, calib: Calibration) -> tuple[int, int, list[int]]:
    """The scale-up domain, the server (at most 8 GPUs) and the one-server worker sizes."""
    dom = scaleup_domain(gpu, calib)
    node = min(dom, 8)
    return dom, node, [g for g in (1, 2, 4, 8) if g <= node]


def _fitting_tp(model, gpu, precision, prompt, output, calib) -> list[int]:
    """One-server tp worker sizes whose weights and KV cache fit."""
    _, _, sizes = _sizes(gpu, calib)
    return [
        g for g in sizes if _fits(model, gpu, Worker(g, "tp"), precision, prompt, output, calib)
    ]


def _aggregated_workers(model, gpu, precision, prompt, output, calib) -> list[Worker]:
    """Today's replicas (the two smallest tp that fit), a MoE's smallest ep and dep of 4+ GPUs
    in one server, then its 16- and 32-GPU dep workers where the domain or fabric allows."""
    dom, _, sizes = _sizes(gpu, calib)
    fit_tp = _fitting_tp(model, gpu, precision, prompt, output, calib)
    agg = [Worker(g, "tp") for g in fit_tp[:2]]
    if model.moe is None:
        return agg
    for mode in ("ep", "dep"):
        for g in sizes:
            w = Worker(g, mode)
            if g >= 4 and _fits(model, gpu, w, precision, prompt, output, calib):
                agg.append(w)
                break
    wide = [
        Worker(g, "dep")
        for g in (16, 32)
        if (g <= dom or (g % dom == 0 and not gpu.consumer))
        and _fits(model, gpu, Worker(g, "dep"), precision, prompt, output, calib)
    ]
    return agg + wide


def _disaggregated(model, gpu, precision, prompt, output, calib) -> list[Deployment]:
    """The smallest prefill worker that fits, paired with each decode worker (a MoE's dep of
    8, 16, 32 and the whole domain; a dense model's smallest tp), prefill workers counted to
    keep the decode pool busy."""
    dom, node, sizes = _sizes(gpu, calib)
    moe = model.moe is not None
    pre_mode = "dep" if moe else "tp"
    pre_sizes = sizes + [
        g for g in (16, 32) if g > node and (g <= dom or (g % node == 0 and not gpu.consumer))
    ]
    pre = next(
        (
            Worker(g, pre_mode)
            for g in pre_sizes
            if (g >= 4 or not moe)
            and _fits(model, gpu, Worker(g, pre_mode), precision, prompt, output, calib)
        ),
        None,
    )
    if pre is None:
        return []
    decs: list[Worker] = []
    if moe:
        for g in sorted({8, 16, 32, dom} if dom > 8 else {8, 16, 32}):
            if g > dom and (g % dom or gpu.consumer):
                continue
            if _fits(model, gpu, Worker(g, "dep"), precision, prompt, output, calib):
                decs.append(Worker(g, "dep"))
    else:
        decs = [
            Worker(g, "tp") for g in _fitting_tp(model, gpu, precision, prompt, output, calib)[:1]
        ]
    out = []
    for dec in decs:
        p = _prefill_count(model, gpu, pre, dec, precision, prompt, output, calib, False)
        out.append(Deployment(dec, Worker(pre.gpus, pre.mode, p), False))
    return out


def _mtp_variants(
    out: list[Deployment], model, gpu, precision, prompt, output, calib
) -> list[Deployment]:
    """MTP where it is served: the wide and disaggregated decoders, and today's first replica."""
    return [
        Deployment(
            x.decode, _with_mtp_prefill(model, gpu, x, precision, prompt, output, calib), True
        )
        for x in out
        if (x.decode.mode == "dep" or x.decode.gpus >= 8 or x == out[0])
        and _fits(model, gpu, x.decode, precision, prompt, output, calib, True)
    ]


def _bounded(seen: list[Deployment]) -> list[Deployment]:
    """At most MAX_CANDIDATES, keeping the most distinct: today's smallest, wide, disaggregated."""
    if len(seen) <= MAX_CANDIDATES:
        return seen

    def rank(i_x: tuple[int, Deployment]) -> tuple[int, int]:
        i, x = i_x
        wide_ = x.decode.gpus > 8 or x.disaggregated
        tier = 0 if i == 0 else (1 if wide_ and not x.mtp else 2 if wide_ else 3)
        return tier, i

    keep = {i for i, _ in sorted(enumerate(seen), key=rank)[:MAX_CANDIDATES]}
    return [x for i, x in enumerate(seen) if i in keep]
