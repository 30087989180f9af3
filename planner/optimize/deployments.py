"""Serving deployments as candidates: rack-wide and multi-node workers, disaggregated
prefill and decode pools, multi-token prediction (issue 44), beside the plain replicas of 1-8
GPUs that :func:`planner.optimize.candidates.serve_candidates` makes as always.

Which deployments are tried comes from :func:`planner.physics.serving.candidate_deployments`
under the workload's ``disaggregated`` and ``mtp``; the prefill pool of a disaggregated one is
sized here (the P of P:D); each capacity is
:func:`planner.physics.capacity.deployment_bucket_capacity`. Bounded: per GPU type at most
:data:`DEPLOY_KEEP_PER_GPU` (+1) per class are kept, and MTP variants are computed for the
:data:`MTP_TWINS` best twins only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from planner.inputs.problem import Inputs, ServeWorkload, month_index
from planner.optimize.serve_options import ServeCandidate, rentable_on
from planner.physics.calibration.values import Calibration
from planner.physics.capacity import (
    deployment_bucket_capacity,
    plain_replica,
    replica_of_mix,
    serve_precision,
    workload_calibration,
)
from planner.physics.demand import mean_request_rate, peak_request_rate

if TYPE_CHECKING:
    from planner.physics.serving import Deployment


# Deployments kept per GPU type and class (aggregated without MTP; disaggregated or with
# MTP), best req/s per GPU first, besides the smallest of each class that serves (the one-
# replica floor makes a small replica worth having where demand is low).
DEPLOY_KEEP_PER_GPU = 2


def _toggle(v: object) -> bool | None:
    return None if v == "auto" else bool(v)


def deployments_tried(
    w: ServeWorkload, inputs: Inputs, gid: str, calib: Calibration | None = None
) -> list[Deployment]:
    """The deployments of ``gid`` tried for ``w`` beyond the plain replicas of 1-8 GPUs:
    :func:`planner.physics.serving.candidate_deployments` under the workload's
    ``disaggregated`` and ``mtp``; on ``auto`` also every deployment tried with both off, so
    that auto's plan is never dearer than off's. ``disaggregated: auto`` on a dense model
    tries no disaggregated deployment."""
    from planner.physics.serving import candidate_deployments

    if w.measured_only:
        return []
    model, gpu = inputs.models[w.model], inputs.gpus[gid]
    prec = serve_precision(w, gpu)
    prompt, output = max(w.buckets(), key=lambda b: b.share).shape()
    dis, mtp = _toggle(w.disaggregated), _toggle(w.mtp)
    if dis is None and model.moe is None:
        # auto on a dense model: its plain replicas (a dense model gains from splitting its
        # phases only at sizes the plain replicas already cover; disaggregated: true asks)
        dis = False
    deps = list(
        candidate_deployments(
            model, gpu, prec, prompt, output, disaggregated=dis, mtp=mtp, calib=calib
        )
    )
    if dis is None or mtp is None:
        off = candidate_deployments(
            model,
            gpu,
            prec,
            prompt,
            output,
            disaggregated=False if dis is None else dis,
            mtp=False if mtp is None else mtp,
            calib=calib,
        )
        deps += [d for d in off if d not in deps]
    if dis is not None:
        deps = [d for d in deps if d.disaggregated == dis]
    if mtp is not None:
        deps = [d for d in deps if bool(d.mtp) == mtp]
    # the plain replicas are planned as always (profiles, tp or ep, the faster)
    plain_ok = dis is not True and mtp is not True
    return [d for d in dict.fromkeys(deps) if not (plain_ok and plain_replica(d))]


# A deployment is kept only with more req/s per GPU than this times the best plain replica
# of its GPU type (a request mix: any)
EFFICIENCY_GATE = 1.0

# A deployment may have at most this many times the GPUs the workload's best plain replica
# type needs at its peak (spares included), and at least DEPLOY_GPU_FLOOR.
DEPLOY_GPU_FACTOR = 1
DEPLOY_GPU_FLOOR = 16


def deployment_gpu_cap(w: ServeWorkload, inputs: Inputs, plain: list[ServeCandidate]) -> int | None:
    """The most GPUs one deployment of ``w`` may have: :data:`DEPLOY_GPU_FACTOR` x the GPUs
    of the plain replica type (any GPU) that needs the fewest at the workload's peak demand
    over max_load with its ``redundancy`` spares (at least :data:`DEPLOY_GPU_FLOOR`); None
    (no cap) where no plain replica serves. A deployment several times larger than a whole
    plain fleet cannot be the cheaper plan unless its GPUs cost a fraction as much; leaving
    it out spares its physics (a 72-GPU rack for a service that needs 8 GPUs). 0 (no
    deployment) for a workload not at scale (fewer than :data:`AT_SCALE_GPUS`) unless its
    ``disaggregated`` or ``mtp`` is true: a service a few servers carry is planned on plain
    replicas (deployments of 16-48 GPUs made moe_all_gpus's MILP miss its 60 s limit and
    none entered its plan)."""
    live = [c for c in plain if c.rate_rps > 0]
    if not live:
        return None
    p = inputs.problem
    first = month_index(p.horizon.start, w.start)
    last = p.horizon.months - 1
    if w.end is not None:
        last = min(last, month_index(p.horizon.start, w.end))
    mean = mean_request_rate(w.traffic.daily_active_users, w.traffic.requests_per_user_per_day)
    peak = peak_request_rate(
        mean, w.traffic.utilization, w.traffic.growth_per_month, max(0, last - first)
    )
    need = peak / w.slo.max_load
    fleet = min((math.ceil(need / c.rate_rps) + w.redundancy) * c.tp for c in live)
    if fleet < AT_SCALE_GPUS and w.disaggregated is not True and w.mtp is not True:
        return 0  # not at scale: its plain replicas (disaggregated or mtp true asks)
    return max(DEPLOY_GPU_FLOOR, DEPLOY_GPU_FACTOR * fleet)


# A workload is served at scale where its plain replicas need at least this many GPUs at its
# peak: there auto (and false) also try deployments; below it, only true asks for them.
AT_SCALE_GPUS = 64


def deployment_candidates(
    w: ServeWorkload,
    inputs: Inputs,
    gid: str,
    calib: Calibration,
    reasons: list[tuple[int | str, str]],
    plain: list[ServeCandidate] | None = None,
    cap: int | None = None,
) -> list[ServeCandidate]:
    """The deployments of ``gid`` kept for ``w`` (:data:`DEPLOY_KEEP_PER_GPU` per class, and
    the smallest of each class); why the others cannot serve goes to ``reasons``.

    An MTP variant costs the physics several times its twin without MTP (the draft length is
    searched), so under ``mtp: auto`` only the variants of the :data:`MTP_TWINS` twins of
    each kind (aggregated, disaggregated) with the most req/s per GPU (deployments or the
    ``plain`` replicas) are computed, a disaggregated one with its twin's prefill pool and
    only where the twin's decode pool limits it. Deployments of more than ``cap`` GPUs
    (:func:`deployment_gpu_cap`) are not tried."""
    if cap == 0:
        return []
    calib = workload_calibration(w, calib) or calib
    tried = [
        d for d in deployments_tried(w, inputs, gid, calib) if cap is None or d.total_gpus <= cap
    ]
    base = [d for d in tried if not d.mtp]
    found = [c for d in base if (c := _sized_candidate(w, inputs, gid, d, calib, reasons, cap))]
    mtp = [d for d in tried if d.mtp]
    sized = {_twin(c.deployment): c for c in found}
    if mtp and base and w.mtp == "auto":
        twins = [(c.rate_rps / c.tp, _twin(c.deployment, c)) for c in [*found, *(plain or [])]]
        twins.sort(key=lambda x: -x[0])
        best = {
            key
            for agg in (True, False)
            for _, key in [x for x in twins if (x[1][0] is None) == agg][:MTP_TWINS]
        }
        mtp = [d for d in mtp if _twin(d) in best]
    for d in mtp:
        twin = sized.get(_twin(d))
        if twin is not None and twin.deployment.prefill is not None:
            if twin.capacity.p95_tpot_ms < DECODE_BOUND * w.slo.p95_tpot_ms:
                continue  # its prefill pool limits it: MTP, which speeds decode, cannot help
            d = replace(d, prefill=twin.deployment.prefill)  # the twin's P: one computation
            c = _deployment_candidate(w, inputs, gid, d, calib, reasons)
        else:
            c = _sized_candidate(w, inputs, gid, d, calib, reasons, cap)
        if c is not None:
            found.append(c)
    offers = [o for o in inputs.offers.values() if o.gpu == gid]
    if w.requests is None:
        found = _undominated(found, plain or [], offers, w.redundancy)
        # larger than a plain replica and no more efficient: a coarser way to buy the same
        best = max((c.rate_rps / c.tp for c in plain or []), default=0.0)
        found = [c for c in found if c.rate_rps / c.tp > best * EFFICIENCY_GATE]
    kept: list[ServeCandidate] = []
    for extra in (False, True):
        group = [c for c in found if _extra(c) == extra]
        group.sort(key=lambda c: (-c.rate_rps / c.tp, c.tp, c.key))
        chosen = group[:DEPLOY_KEEP_PER_GPU]
        small = min(group, key=lambda c: (c.tp, -c.rate_rps, c.key), default=None)
        if small is not None and small not in chosen:
            chosen.append(small)
        kept.extend(chosen)
    return kept


def _extra(c: ServeCandidate) -> bool:
    """Of the class only ``auto`` has: disaggregated or with MTP."""
    return c.deployment is not None and (c.deployment.disaggregated or c.deployment.mtp)


def _undominated(found: list, plain: list, offers: list, redundancy: int) -> list:
    """The deployments no other candidate of the GPU type beats: ``a`` beats ``b`` with at
    most ``b``'s GPUs, rentable on every offer ``b`` is, and either ``floor(tp_b / tp_a)``
    replicas of it give at least ``b``'s req/s at no more per replica (on ``b``'s GPUs they
    serve as much, count as at least as many replicas and need no larger spare), or one of
    it gives at least ``b``'s req/s (one ``a`` for each ``b`` costs no more and adds at least
    the spare capacity a larger ``L`` takes, where ``redundancy`` <= 1). Ties: a plain
    replica, then the class without MTP or pools, then the smaller, earlier key. A
    deployment of the class ``auto`` alone has is beaten by anything;
    one of the other class only by its class or a plain replica, so that every candidate of
    ``disaggregated: false, mtp: false`` is one of ``auto``'s."""

    def rank(c: ServeCandidate) -> tuple:
        return (c.deployment is not None, _extra(c), c.tp, c.key)

    def beats(a: ServeCandidate, b: ServeCandidate) -> bool:
        if a is b or a.tp > b.tp or (_extra(a) and not _extra(b)):
            return False
        if not all(rentable_on(a.workers, o) for o in offers if rentable_on(b.workers, o)):
            return False
        if a.rate_rps <= b.rate_rps:  # floor(tp_b / tp_a) of a on b's GPUs, no larger spare
            given = (b.tp // a.tp) * a.rate_rps
            if given > b.rate_rps * (1 + 1e-12):
                return True
            return given >= b.rate_rps and rank(a) < rank(b)
        return redundancy <= 1  # one a for each b: the larger spare is covered

    pool = [*plain, *found]
    return [b for b in found if not any(beats(a, b) for a in pool)]


# A disaggregated deployment whose p95 TPOT at its capacity is below this share of the SLO
# is held back by its prefill pool, not its decode pool (its MTP variant is not computed)
DECODE_BOUND = 0.95

# MTP variants computed under mtp: auto, per GPU type: those of the best twin without MTP
# of each kind (aggregated, disaggregated)
MTP_TWINS = 1


def _twin(dep: Deployment | None, c: ServeCandidate | None = None) -> tuple:
    """What a deployment is without MTP and its prefill count (a plain replica ``c``: its
    one worker), to match an MTP variant with the twin it was made from."""
    if dep is None:
        assert c is not None
        return (None, (1, c.tp, c.capacity.layout or "tp"))
    pre = None if dep.prefill is None else (dep.prefill.gpus, dep.prefill.mode)
    return (pre, (dep.decode.count, dep.decode.gpus, dep.decode.mode))


# The most prefill workers a disaggregated deployment is given
MAX_PREFILL_WORKERS = 64


def _sized_candidate(
    w: ServeWorkload,
    inputs: Inputs,
    gid: str,
    dep: Deployment,
    calib: Calibration,
    reasons: list[tuple[int | str, str]],
    cap: int | None = None,
) -> ServeCandidate | None:
    """``dep`` as a candidate; a disaggregated one with its prefill pool sized to its decode
    pool (the P of P:D): the physics' P gives req/s per prefill worker, the most prefill
    workers the decode pool's req/s, and of the two whole P around their ratio the one with
    the most req/s per GPU is kept (three or four capacity computations)."""
    first = _deployment_candidate(w, inputs, gid, dep, calib, reasons)
    if first is None or dep.prefill is None:
        return first
    p0 = dep.prefill.count
    most = MAX_PREFILL_WORKERS
    if cap is not None:
        most = min(most, (cap - dep.decode.total_gpus) // dep.prefill.gpus)

    def with_p(p: int) -> ServeCandidate | None:
        d = replace(dep, prefill=replace(dep.prefill, count=p))
        return _deployment_candidate(w, inputs, gid, d, calib, [])

    top = with_p(most) if p0 < most else None
    if top is None or top.rate_rps <= first.rate_rps * (1 + 1e-9):
        return first
    ratio = top.rate_rps / (first.rate_rps / p0)
    best = first
    for p in sorted({math.floor(ratio), math.ceil(ratio)}):
        if 1 <= p <= most and p != p0:
            c = with_p(p)
            if c is not None and c.rate_rps / c.tp > best.rate_rps / best.tp:
                best = c
    return best


def _deployment_candidate(
    w: ServeWorkload,
    inputs: Inputs,
    gid: str,
    dep: Deployment,
    calib: Calibration,
    reasons: list[tuple[int | str, str]],
) -> ServeCandidate | None:
    """One deployment as a candidate (None, with the reason in ``reasons``, if it serves no
    bucket of ``w``)."""
    buckets = w.buckets()
    caps = tuple(deployment_bucket_capacity(inputs, w, b, gid, dep, calib) for b in buckets)
    if not any(c.rate > 0 for c in caps):
        why = "; ".join(dict.fromkeys(c.capacity.reason or "no capacity" for c in caps))
        reasons.append((dep.label(), why))
        return None
    if len(buckets) == 1:
        return ServeCandidate(w.name, gid, dep.total_gpus, caps[0].rate, caps[0].capacity, (), dep)
    rep = replica_of_mix(list(caps), [b.share for b in buckets])
    return ServeCandidate(w.name, gid, dep.total_gpus, rep.rate_rps, rep, caps, dep)
