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
from planner.physics.serving.worker import WorkerPhysics, scaleup_domain

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
    has_mtp = model.num_nextn_predict_layers > 0
    if mtp and not has_mtp:
        return []
    mtp_opts = [False] if not has_mtp or mtp is False else ([True] if mtp else [False, True])
    dom = scaleup_domain(gpu, calib)
    node = min(dom, 8)
    sizes = [g for g in (1, 2, 4, 8) if g <= node]
    fit_tp = [
        g for g in sizes if _fits(model, gpu, Worker(g, "tp"), precision, prompt, output, calib)
    ]
    moe = model.moe is not None
    agg: list[Worker] = []
    wide: list[Worker] = []
    if fit_tp:
        g0 = fit_tp[0]
        agg.append(Worker(g0, "tp"))
        if len(fit_tp) > 1:
            agg.append(Worker(fit_tp[1], "tp"))
    if moe:
        for mode in ("ep", "dep"):
            for g in sizes:
                w = Worker(g, mode)
                if g >= 4 and _fits(model, gpu, w, precision, prompt, output, calib):
                    agg.append(w)
                    break
        for g in (16, 32):
            if (g <= dom or (g % dom == 0 and not gpu.consumer)) and _fits(
                model, gpu, Worker(g, "dep"), precision, prompt, output, calib
            ):
                wide.append(Worker(g, "dep"))
    out: list[Deployment] = []
    if disaggregated is not True:
        out += [Deployment(w) for w in agg + wide]
    dis: list[Deployment] = []
    if disaggregated is not False:
        pre_mode = "dep" if moe else "tp"
        pre_sizes = sizes + [g for g in (16, 32) if g > node and (g <= dom or (
            g % node == 0 and not gpu.consumer))]  # fmt: skip
        pre = next(
            (
                Worker(g, pre_mode)
                for g in pre_sizes
                if (g >= 4 or not moe) and _fits(model, gpu, Worker(g, pre_mode), precision,
                                                  prompt, output, calib)
            ),
            None,
        )  # fmt: skip
        decs: list[Worker] = []
        if moe:
            for g in sorted({8, 16, 32, dom} if dom > 8 else {8, 16, 32}):
                if g > dom and (g % dom or gpu.consumer):
                    continue
                if _fits(model, gpu, Worker(g, "dep"), precision, prompt, output, calib):
                    decs.append(Worker(g, "dep"))
        elif fit_tp:
            decs.append(Worker(fit_tp[0], "tp"))
        if pre is not None:
            for dec in decs:
                for m in [False] if mtp is True else [False]:
                    p = _prefill_count(model, gpu, pre, dec, precision, prompt, output, calib, m)
                    dis.append(Deployment(dec, Worker(pre.gpus, pre.mode, p), m))
    out += dis
    if True in mtp_opts:  # MTP where it is served: the wide and disaggregated decoders, TP
        extra = [
            Deployment(
                x.decode, _with_mtp_prefill(model, gpu, x, precision, prompt, output, calib), True
            )  # fmt: skip
            for x in out
            if (x.decode.mode == "dep" or x.decode.gpus >= 8 or x == out[0])
            and _fits(model, gpu, x.decode, precision, prompt, output, calib, True)
        ]
        out = extra if mtp_opts == [True] else out + extra
    seen: list[Deployment] = []
    for x in out:
        if x not in seen:
            seen.append(x)
    if len(seen) > MAX_CANDIDATES:  # keep the most distinct: today's smallest, wide, disaggregated

        def rank(i_x: tuple[int, Deployment]) -> tuple[int, int]:
            i, x = i_x
            wide_ = x.decode.gpus > 8 or x.disaggregated
            tier = 0 if i == 0 else (1 if wide_ and not x.mtp else 2 if wide_ else 3)
            return tier, i

        keep = {i for i, _ in sorted(enumerate(seen), key=rank)[:MAX_CANDIDATES]}
        seen = [x for i, x in enumerate(seen) if i in keep]
    return seen
