"""Candidate configurations: which (GPU, count, layout) can run each workload at all.

Stage 2 of the flow (inputs -> **physics/candidates** -> model -> solve -> plan). For every
workload and every allowed GPU type the physics gives the configurations that fit in memory
and meet the deadline or SLO, with their coefficients; the rest are dropped here with the
reason kept (``Dropped``), so an infeasible problem can say why. Offers are pruned to the
ones that can matter: for each GPU and kind, the cheapest offer without an availability cap
plus capped offers cheaper than it (a dearer offer never needs a variable).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from planner.base.errors import InfeasibleError
from planner.inputs.catalog import GpuSpec, Offer
from planner.inputs.problem import Inputs, ServeWorkload, TrainJob, month_index
from planner.inputs.profiles import Measured
from planner.optimize.fleet_size import check_fleet_size
from planner.optimize.train_scale import idle_replicas
from planner.physics.calibration_values import Calibration, default_calibration
from planner.physics.capacity import (
    BucketCapacity,
    bucket_capacity,
    measured_factor,
    replica_of_mix,
    scale_train,
    train_measurement,
)
from planner.physics.demand import (
    FLAT,
    HOURS_PER_MONTH,
    LoadSlice,
    mean_request_rate,
    peak_request_rate,
    problem_slices,
    workload_slices,
)
from planner.physics.realized import spot_overhead
from planner.physics.serve import ReplicaCapacity
from planner.physics.train import TrainEstimate, estimate_train, with_inter_node_gbs

# GPU counts tried for a training job (whole nodes of 8 beyond 8).
TRAIN_COUNTS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096)
# Larger configurations kept beside the smallest that meets the deadline: more GPUs finish
# sooner (useful when owned GPUs are free only part of the window) at a higher GPU-hour cost.
TRAIN_EXTRA_SIZES = 2
TP_SIZES = (1, 2, 4, 8)
SERVE_KEEP_PER_GPU = 2


@dataclass(frozen=True)
class Dropped:
    """A (workload, GPU) option the physics rules out, and why (the plan lists them)."""

    workload: str
    gpu: str
    config: str
    reason: str


@dataclass(frozen=True)
class TrainCandidate:
    job: str
    gpu: str
    gpus: int
    wall_hours: float  # planned, on the catalog's fabric for the GPU class (an owned cluster)
    estimate: TrainEstimate
    # planned wall hours across rented instances, per fabric speed (GB/s per GPU) on offer
    fabric_hours: tuple[tuple[float, float], ...] = ()
    measured: Measured | None = None  # a profile's tokens/s per GPU replaced the physics'

    @property
    def key(self) -> str:
        return f"{self.gpu}_x{self.gpus}"

    def hours_on(self, gbs: float | None) -> float | None:
        """Planned wall hours over a fabric of ``gbs`` GB/s per GPU; None: not computed
        (``None`` fabric: the job cannot span instances of that offer)."""
        if gbs is None:
            return None
        return next((h for g, h in self.fabric_hours if g == gbs), None)


@dataclass(frozen=True)
class ServeCandidate:
    workload: str
    gpu: str
    tp: int
    rate_rps: float  # one request shape: its rate; a mix: the mix rate (capacity.mix_rate)
    capacity: ReplicaCapacity
    # a request mix (workload.requests): the capacity per bucket, in the workload's order
    buckets: tuple[BucketCapacity, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.gpu}_tp{self.tp}"

    @property
    def mixed(self) -> bool:
        return len(self.buckets) > 1

    @property
    def bucket_rates(self) -> tuple[float, ...]:
        """Req/s per replica for each bucket (0: cannot serve it); one shape: ``(rate_rps,)``."""
        return tuple(b.rate for b in self.buckets) if self.buckets else (self.rate_rps,)

    @property
    def measured(self) -> bool:
        return any(b.measured is not None for b in self.buckets)


@dataclass
class Candidates:
    months: list[str]
    slices: list[LoadSlice]  # hours per slice (loads here are of utilization 1: use serve_loads)
    train: dict[str, list[TrainCandidate]] = field(default_factory=dict)
    serve: dict[str, list[ServeCandidate]] = field(default_factory=dict)
    window: dict[str, list[int]] = field(default_factory=dict)  # training job -> month indexes
    window_hours: dict[str, float] = field(default_factory=dict)
    active: dict[str, list[int]] = field(default_factory=dict)  # serving workload -> months
    demand: dict[tuple[str, int, int], float] = field(default_factory=dict)  # (w, t, s) -> req/s
    serve_loads: dict[str, list[float]] = field(default_factory=dict)
    offers: dict[str, Offer] = field(default_factory=dict)
    dropped: list[Dropped] = field(default_factory=list)


def fabric_gbs(offer: Offer, ethernet_ok: bool, calib: Calibration) -> float | None:
    """GB/s per GPU between the offer's instances for a training job spanning several of
    them; None when it may not span them: no fabric made for training, unless the job opts
    into Ethernet (``ethernet: true``), which also covers offers whose fabric is not stated,
    at the offer's Ethernet figure or the calibrated default (never guessed silently).

    >>> from types import SimpleNamespace as NS
    >>> from planner.inputs.catalog import MULTI_NODE_FABRICS
    >>> ib = NS(fabric="infiniband", fabric_gbps_per_gpu=400.0, multi_node=True)
    >>> unknown = NS(fabric=None, fabric_gbps_per_gpu=None, multi_node=False)
    >>> cal = default_calibration()
    >>> fabric_gbs(ib, False, cal), fabric_gbs(unknown, False, cal), fabric_gbs(unknown, True, cal)
    (50.0, None, 1.5625)
    """
    if offer.multi_node:
        return offer.fabric_gbps_per_gpu / 8
    if ethernet_ok and offer.fabric in ("ethernet", None):
        return (offer.fabric_gbps_per_gpu or calib.links.ethernet_gbps_per_gpu.value) / 8
    return None


def spans_instances(gpus: int, offer: Offer) -> bool:
    """A job of ``gpus`` GPUs needs more than one of the offer's instances."""
    return gpus > offer.gpus_per_instance


def offer_wall_hours(c: TrainCandidate, job: TrainJob, offer: Offer) -> float | None:
    """Planned wall hours of candidate ``c`` on ``offer`` (before any spot overhead): its own
    hours inside one instance, else over the offer's fabric; None if it cannot run there."""
    if not spans_instances(c.gpus, offer):
        return c.wall_hours
    return c.hours_on(fabric_gbs(offer, job.ethernet, default_calibration()))


def progress_per_wall_hour(c: TrainCandidate, job: TrainJob, offer: Offer) -> float | None:
    """Hours of planned progress per rented wall hour of candidate ``c`` on ``offer``: below
    1 on a slower fabric than an owned cluster's, and on spot by its restart overhead;
    None if the job cannot run on the offer's fabric.

    ``f = h_c / h_{c,o} / (1 + overhead_o)``.
    """
    hours = offer_wall_hours(c, job, offer)
    if hours is None or hours <= 0:
        return None
    ovh = spot_overhead_for(job, offer, c.gpus) if offer.kind == "spot" else 0.0
    return c.wall_hours / hours / (1.0 + ovh)


@functools.lru_cache(maxsize=256)
def _fabric_calibration(calib: Calibration, gbs: float) -> Calibration:
    return with_inter_node_gbs(calib, gbs)


def _train_counts(job: TrainJob, inputs: Inputs, gid: str) -> list[int]:
    """GPU counts tried: the usual ladder plus any count a profile measured."""
    return sorted(set(TRAIN_COUNTS) | inputs.profiles.train_counts(job.model, gid))


def _fabric_hours(
    job: TrainJob, inputs: Inputs, calib: Calibration, gid: str, k: int, factor: float = 1.0
) -> tuple[tuple[float, float], ...]:
    """Planned wall hours of ``k`` x ``gid`` on each fabric speed its offers have (``factor``:
    a measured throughput's correction, :func:`planner.physics.capacity.measured_factor`)."""
    speeds = sorted(
        {
            gbs
            for o in inputs.offers.values()
            if o.gpu == gid and spans_instances(k, o)
            for gbs in [fabric_gbs(o, job.ethernet, calib)]
            if gbs is not None
        }
    )
    model, gpu = inputs.models[job.model], inputs.gpus[gid]
    out = []
    for gbs in speeds:
        est = estimate_train(
            model,
            gpu,
            k,
            job.tokens,
            job.method,
            _fabric_calibration(calib, gbs),
            seq_len=job.seq_len,
            stack=job.stack,
        )
        if est.fits:
            out.append((gbs, planned_wall_hours(scale_train(est, factor), job)))
    return tuple(out)


def train_window(job: TrainJob, horizon_start: str) -> list[int]:
    a = month_index(horizon_start, job.window.start)
    b = month_index(horizon_start, job.window.deadline)
    return list(range(a, b + 1))


def train_candidates(
    job: TrainJob, inputs: Inputs, calib: Calibration, window_hours: float
) -> tuple[list[TrainCandidate], list[Dropped]]:
    model = inputs.models[job.model]
    out: list[TrainCandidate] = []
    dropped: list[Dropped] = []
    for gid, gpu in inputs.gpus.items():
        first: TrainCandidate | None = None
        last_reason = "no configuration tried"
        for k in _train_counts(job, inputs, gid):
            if gpu.node_gpus > 1 and k > gpu.node_gpus and k % gpu.node_gpus:
                continue
            m = train_measurement(inputs, job, gid, k)
            est = estimate_train(
                model, gpu, k, job.tokens, job.method, calib, seq_len=job.seq_len, stack=job.stack
            )
            factor = measured_factor(est, m)
            est = scale_train(est, factor)
            if not est.fits:
                last_reason = est.reason or "does not fit"
                continue
            if (idle := idle_replicas(est, job.tokens, job.seq_len)) is not None:
                last_reason = idle  # GPUs that never see a token are no size to offer
                continue
            hours = planned_wall_hours(est, job)
            if hours > window_hours:
                last_reason = (
                    f"{hours:,.0f} h on {k} GPUs (P{job.confidence:.0%} of real runs) > "
                    f"{window_hours:,.0f} h in the window"
                )
                continue
            cand = TrainCandidate(
                job.name, gid, k, hours, est, _fabric_hours(job, inputs, calib, gid, k, factor), m
            )
            if first is None:
                first = cand
                out.append(cand)
                extra = 0
            else:
                extra += 1
                out.append(cand)
            if extra >= TRAIN_EXTRA_SIZES:
                break
        if first is None:
            dropped.append(
                Dropped(workload=job.name, gpu=gid, config="any size", reason=last_reason)
            )
    return out, dropped


def serve_candidate(
    w: ServeWorkload, inputs: Inputs, gid: str, tp: int, calib: Calibration
) -> ServeCandidate | str:
    """Replicas of ``tp`` x ``gid`` for ``w`` (every bucket of a mix), or why none can serve.

    One request shape: its capacity. A mix: the capacity per bucket (measured profiles win
    over the physics, :func:`planner.physics.capacity.bucket_capacity`); the candidate is kept when
    it serves at least one bucket within the SLO.
    """
    buckets = w.buckets()
    caps = tuple(bucket_capacity(inputs, w, b, gid, tp, calib) for b in buckets)
    served = [c for c in caps if c.rate > 0]
    if not served:
        return "; ".join(dict.fromkeys(c.capacity.reason or "no capacity" for c in caps))
    if len(buckets) == 1 and caps[0].measured is None:
        return ServeCandidate(w.name, gid, tp, caps[0].rate, caps[0].capacity)
    rep = replica_of_mix(list(caps), [b.share for b in buckets])
    return ServeCandidate(w.name, gid, tp, rep.rate_rps, rep, caps)


def serve_tp_sizes(w: ServeWorkload, inputs: Inputs, gid: str) -> list[int]:
    """Replica sizes tried: 1-8 GPUs within a node, plus any size a profile measured."""
    gpu = inputs.gpus[gid]
    sizes = set() if w.measured_only else {tp for tp in TP_SIZES if tp <= max(gpu.node_gpus, 8)}
    return sorted(sizes | inputs.profiles.serve_tps(w.model, gid, w.precision))


def serve_candidates(
    w: ServeWorkload, inputs: Inputs, calib: Calibration
) -> tuple[list[ServeCandidate], list[Dropped]]:
    out: list[ServeCandidate] = []
    dropped: list[Dropped] = []
    # a mix keeps every size: which is best differs per bucket
    keep = SERVE_KEEP_PER_GPU if len(w.buckets()) == 1 else len(TP_SIZES) + 8
    for gid in inputs.gpus:
        found: list[ServeCandidate] = []
        reasons: list[tuple[int, str]] = []
        for tp in serve_tp_sizes(w, inputs, gid):
            c = serve_candidate(w, inputs, gid, tp, calib)
            if isinstance(c, str):
                reasons.append((tp, c))
            else:
                found.append(c)
        found.sort(key=lambda c: -c.rate_rps / c.tp)
        # a measured configuration is always offered: the team runs it and trusts it
        out.extend(c for i, c in enumerate(found) if i < keep or c.measured)
        if not found:
            dropped.append(
                Dropped(workload=w.name, gpu=gid, config="tp 1-8", reason=grouped_reasons(reasons))
            )
    return out, dropped


def grouped_reasons(reasons: list[tuple[int, str]]) -> str:
    """Why no replica size of a GPU serves a workload: each reason once, after the sizes it
    stops (an FP4 model on a card without FP4 said it four times, once per size).

    >>> grouped_reasons([(1, "too big"), (2, "too big"), (4, "too slow")])
    'tp1/tp2: too big; tp4: too slow'
    """
    sizes: dict[str, list[int]] = {}
    for tp, why in reasons:
        sizes.setdefault(why, []).append(tp)
    return "; ".join(f"{'/'.join(f'tp{t}' for t in tps)}: {why}" for why, tps in sizes.items())


def prune_offers(offers: dict[str, Offer]) -> dict[str, Offer]:
    """Keep, per (gpu, kind, GPUs per instance, provider, fabric), the cheapest unrestricted
    offer and restricted ones (a cap, a minimum term or block) cheaper than it; the rest can
    never be chosen by a cost-minimizing plan.

    Instance size is part of the key because it decides eligibility (a 4-GPU tensor-parallel
    replica needs a 4+-GPU instance), the provider because a training run stays with one, the
    fabric because it decides how fast a multi-node run goes. Reserved offers are all kept
    (their terms differ).
    """
    keep: dict[str, Offer] = {}
    groups: dict[tuple, list[Offer]] = {}
    for o in offers.values():
        if o.kind == "reserved" or o.committed:
            keep[o.id] = o
        else:
            key = (o.gpu, o.kind, o.gpus_per_instance, o.provider, o.fabric, o.fabric_gbps_per_gpu)
            groups.setdefault(key, []).append(o)
    for group in groups.values():
        group.sort(key=lambda o: (o.usd_per_gpu_hour, o.id))
        for o in group:
            keep[o.id] = o
            if not offer_restricted(o):
                break
    return dict(sorted(keep.items()))


def offer_restricted(o: Offer) -> bool:
    """An offer whose use is limited beyond its price: a cap, a minimum term or block, a
    contract's term."""
    return (
        o.max_gpus is not None
        or bool(o.min_term_days)
        or bool(o.min_gpus)
        or o.available_from is not None
        or o.available_until is not None
    )


def offer_months(o: Offer, horizon_start: str, months: int) -> range:
    """Month indexes of the horizon in which the offer can be rented (a contract's term).

    >>> from types import SimpleNamespace as NS
    >>> offer_months(NS(available_from="2026-11", available_until="2027-02"), "2027-01", 12)
    range(0, 2)
    """
    a = 0 if o.available_from is None else max(0, month_index(horizon_start, o.available_from))
    b = (
        months - 1
        if o.available_until is None
        else min(months - 1, month_index(horizon_start, o.available_until))
    )
    return range(a, b + 1)


def owned_serve_options(cands: list[ServeCandidate]) -> list[ServeCandidate]:
    """The serving candidates of one workload worth an owned-replica variable.

    Candidate ``b`` is left out when another ``a`` on the same GPU type has a ``tp`` that
    divides ``b``'s, ``mu_a <= mu_b`` and ``tp_b / tp_a`` replicas of ``a`` give at least
    ``mu_b``: on the same owned GPUs they serve as much, count as at least as many replicas
    (``serve_floor``) and none is larger (the spare ``R L``), so any plan with ``b`` is matched
    at no higher cost (ties: the earlier key stays).

    >>> from types import SimpleNamespace as NS
    >>> c = lambda k, tp, mu: NS(gpu="g", tp=tp, rate_rps=mu, key=k)
    >>> [x.key for x in owned_serve_options([c("tp1", 1, 3.0), c("tp2", 2, 5.0), c("tp4", 4, 13.0)])]
    ['tp1', 'tp4']
    >>> [x.key for x in owned_serve_options([c("a", 1, 2.0), c("b", 1, 2.0)])]
    ['a']
    >>> [x.key for x in owned_serve_options([c("fast", 1, 4.0), c("tp2", 2, 3.0)])]
    ['fast', 'tp2']
    """

    def beats(a: ServeCandidate, b: ServeCandidate) -> bool:
        if a is b or a.gpu != b.gpu or b.tp % a.tp:
            return False
        if a.rate_rps > b.rate_rps:  # a larger replica: more spare capacity to hold
            return False
        given, wanted = (b.tp // a.tp) * a.rate_rps, b.rate_rps
        return given > wanted * (1 + 1e-12) or (given >= wanted and (a.tp, a.key) < (b.tp, b.key))

    live = [c for c in cands if c.rate_rps > 0]
    test = mix_beats if any(getattr(c, "mixed", False) for c in live) else beats
    return [b for b in live if not any(test(a, b) for a in live)]


def mix_beats(a: ServeCandidate, b: ServeCandidate) -> bool:
    """For a request mix: ``tp_b / tp_a`` replicas of ``a`` on the same GPUs serve at least
    what one of ``b`` does in every bucket (each type keeps its own spares, so a smaller
    replica never needs more of them). Ties: the smaller, then earlier key stays.

    >>> from types import SimpleNamespace as NS
    >>> c = lambda k, tp, r: NS(gpu="g", tp=tp, key=k, bucket_rates=r)
    >>> mix_beats(c("a", 1, (3.0, 1.0)), c("b", 2, (5.0, 2.0))), mix_beats(c("a", 1, (3.0, 0.9)), c("b", 2, (5.0, 2.0)))
    (True, False)
    """
    if a is b or a.gpu != b.gpu or b.tp % a.tp:
        return False
    k = b.tp // a.tp
    pairs = list(zip(a.bucket_rates, b.bucket_rates, strict=True))
    if any(k * ra < rb for ra, rb in pairs):
        return False
    return any(k * ra > rb * (1 + 1e-12) for ra, rb in pairs) or (a.tp, a.key) < (b.tp, b.key)


def capped(o: Offer) -> bool:
    """An offer whose capacity is limited: a cap on its GPUs, or an availability window (a
    contract's term). Such an offer never stands in for an unlimited one when pairs are pruned.

    >>> from types import SimpleNamespace as NS
    >>> capped(NS(max_gpus=None)), capped(NS(max_gpus=None, available_until="2027-03"))
    (False, True)
    """
    return (
        o.max_gpus is not None
        or getattr(o, "available_from", None) is not None
        or getattr(o, "available_until", None) is not None
    )


def serve_rental_pairs(
    cands: list[ServeCandidate], offers: Iterable[Offer], spot_ok: bool
) -> list[tuple[ServeCandidate, Offer]]:
    """The (candidate, offer) pairs of one serving workload that can matter when renting.

    A rented replica of candidate ``r`` on offer ``o`` gives ``mu_r`` req/s, counts as one
    replica (``serve_floor``), costs ``p_o m_r`` per hour and uses ``m_r`` of a cap. A pair is
    left out when another pair does at least as well replica for replica, so any plan using it
    can use the other instead at no higher cost:

    * per candidate: offers are the same replica at different prices, so only the cheapest
      uncapped non-reserved offer, capped offers cheaper than it and every reserved offer;
    * across candidates: a non-reserved pair is dropped when an uncapped pair gives at least
      the req/s for at most the price per replica-hour (ties: uncapped, then earlier, wins).

    (Not by $ per req/s alone: the one-replica floor makes small replicas worth keeping.)

    >>> from types import SimpleNamespace as NS
    >>> c1, c2 = NS(gpu="g", tp=1, rate_rps=1.0, key="g_tp1"), NS(gpu="g", tp=2, rate_rps=3.0, key="g_tp2")
    >>> o = lambda i, p, u=1, cap=None: NS(id=i, gpu="g", kind="on_demand", usd_per_gpu_hour=p,
    ...     marginal_usd_per_gpu_hour=p, gpus_per_instance=u, max_gpus=cap, cluster=False)
    >>> pairs = lambda cs, os: [(c.key, o.id) for c, o in serve_rental_pairs(cs, os, False)]
    >>> pairs([c1, c2], [o("a", 1.0), o("b", 1.2, 8), o("c", 0.5, 1, 4), o("d", 0.9, 8, 4)])
    [('g_tp1', 'c'), ('g_tp1', 'd'), ('g_tp1', 'a'), ('g_tp2', 'd'), ('g_tp2', 'b')]
    >>> pairs([c1, NS(gpu="g", tp=1, rate_rps=0.5, key="slow")], [o("a", 1.0)])
    [('g_tp1', 'a')]
    """
    # cluster products are multi-node training blocks, not serving capacity
    offers = [o for o in offers if (o.kind != "spot" or spot_ok) and not o.cluster]
    kept: list[tuple[ServeCandidate, Offer]] = []
    for c in cands:
        if c.rate_rps <= 0:
            continue
        eligible = [o for o in offers if o.gpu == c.gpu and o.gpus_per_instance >= c.tp]
        plain = sorted(
            (o for o in eligible if o.kind != "reserved"),
            key=lambda o: (o.marginal_usd_per_gpu_hour, o.id),
        )
        uncapped = next((o for o in plain if not capped(o)), None)
        for o in plain:
            if o is uncapped or (
                capped(o)
                and (
                    uncapped is None
                    or o.marginal_usd_per_gpu_hour < uncapped.marginal_usd_per_gpu_hour
                )
            ):
                kept.append((c, o))
        kept.extend((c, o) for o in sorted(eligible, key=lambda o: o.id) if o.kind == "reserved")

    def rank(i: int) -> tuple[float, float, bool, int]:
        c, o = kept[i]
        return (c.rate_rps, o.marginal_usd_per_gpu_hour * c.tp, capped(o), i)

    if any(getattr(c, "mixed", False) for c, _ in kept):
        return _mix_pairs(kept)
    leaders = [rank(i) for i, (_, o) in enumerate(kept) if o.kind != "reserved" and not capped(o)]
    out = []
    for i, (c, o) in enumerate(kept):
        if o.kind != "reserved":
            me = rank(i)
            mu, cost = me[0], me[1]
            if any(
                r[0] >= mu and r[1] <= cost and (r[0] > mu or r[1] < cost or r[2:] < me[2:])
                for r in leaders
                if r[3] != i
            ):
                continue
        out.append((c, o))
    return out


def _mix_pairs(kept: list[tuple[ServeCandidate, Offer]]) -> list[tuple[ServeCandidate, Offer]]:
    """A request mix: a non-reserved pair is dropped when an uncapped non-reserved pair gives
    at least its req/s in every bucket for at most its price per replica-hour (ties: earlier
    wins). Swapping each of its replicas for one of the other keeps every bucket served and
    needs no more spares (each type keeps its own)."""

    def cost(c: ServeCandidate, o: Offer) -> float:
        return o.marginal_usd_per_gpu_hour * c.tp

    def dominated(i: int) -> bool:
        c, o = kept[i]
        for j, (d, p) in enumerate(kept):
            if j == i or p.kind == "reserved" or capped(p):
                continue
            pairs = list(zip(d.bucket_rates, c.bucket_rates, strict=True))
            if cost(d, p) > cost(c, o) or any(x < y for x, y in pairs):
                continue
            better = cost(d, p) < cost(c, o) or any(x > y for x, y in pairs)
            if better or j < i:
                return True
        return False

    return [kc for i, kc in enumerate(kept) if kc[1].kind == "reserved" or not dominated(i)]


def rental_gpus(k: int, offer: Offer) -> int:
    """GPUs paid for when a job needs ``k`` GPUs and the offer rents whole instances.

    >>> from types import SimpleNamespace as NS
    >>> rental_gpus(12, NS(gpus_per_instance=8))
    16
    """
    unit = offer.gpus_per_instance
    least = getattr(offer, "min_gpus", None) or 0  # a cluster product's smallest block
    return max(math.ceil(k / unit), math.ceil(least / unit)) * unit


# Physics for many workloads runs in worker processes (each workload's candidates are
# independent). Below this many (workload x GPU type) pairs, or with PLANNER_WORKERS=1, it
# runs in-process.
PARALLEL_MIN_PAIRS = 240
_WORKER: dict = {}


def _worker_init(inputs: Inputs, calib: Calibration) -> None:
    _WORKER["inputs"], _WORKER["calib"] = inputs, calib


def _worker_task(kind: str, index: int, window_hours: float):
    inputs, calib = _WORKER["inputs"], _WORKER["calib"]
    if kind == "train":
        return train_candidates(inputs.problem.workloads.train[index], inputs, calib, window_hours)
    return serve_candidates(inputs.problem.workloads.serve[index], inputs, calib)


def _workers(inputs: Inputs) -> int:
    import os

    env = os.environ.get("PLANNER_WORKERS")
    if env is not None:
        return max(1, int(env))
    p = inputs.problem
    pairs = (len(p.workloads.train) + len(p.workloads.serve)) * len(inputs.gpus)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, 4) if pairs >= PARALLEL_MIN_PAIRS else 1


def _physics(inputs: Inputs, calib: Calibration, window_hours: dict[str, float]):
    """(train results, serve results) in workload order, each (candidates, dropped)."""
    p = inputs.problem
    tasks = [("train", i, window_hours[j.name]) for i, j in enumerate(p.workloads.train)]
    tasks += [("serve", i, 0.0) for i in range(len(p.workloads.serve))]
    workers = _workers(inputs)
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        results = None
        # fork: workers start in milliseconds and never re-run the caller's __main__ (spawn
        # would); the planner runs solvers with one thread, so there are no native threads
        # to trip over. Where fork is missing, or anything goes wrong, run in-process.
        if "fork" in multiprocessing.get_all_start_methods():
            try:
                with ProcessPoolExecutor(
                    workers,
                    mp_context=multiprocessing.get_context("fork"),
                    initializer=_worker_init,
                    initargs=(inputs, calib),
                ) as pool:
                    results = list(pool.map(_worker_task, *zip(*tasks, strict=True), chunksize=4))
            except Exception:  # noqa: BLE001 (BrokenProcessPool, OSError, pickling, ...)
                results = None
        if results is not None:
            n = len(p.workloads.train)
            return results[:n], results[n:]
    _worker_init(inputs, calib)
    results = [_worker_task(*t) for t in tasks]
    _WORKER.clear()
    n = len(p.workloads.train)
    return results[:n], results[n:]


def _utilizations(inputs: Inputs) -> list[float]:
    return [w.traffic.utilization for w in inputs.problem.workloads.serve]


def build_candidates(inputs: Inputs, calib: Calibration | None = None) -> Candidates:
    calib = calib or default_calibration()
    p = inputs.problem
    months = p.month_labels()
    cands = Candidates(months=months, slices=problem_slices(_utilizations(inputs)))
    flat = cands.slices == [FLAT]
    cands.offers = prune_offers(inputs.offers)
    for job in p.workloads.train:
        window = train_window(job, p.horizon.start)
        cands.window[job.name] = window
        cands.window_hours[job.name] = len(window) * HOURS_PER_MONTH
    train_res, serve_res = _physics(inputs, calib, cands.window_hours)
    for job, (tc, dropped) in zip(p.workloads.train, train_res, strict=True):
        cands.train[job.name] = tc
        cands.dropped.extend(dropped)
    for i, (w, (sc, dropped)) in enumerate(zip(p.workloads.serve, serve_res, strict=True)):
        a = month_index(p.horizon.start, w.start)
        b = (
            p.horizon.months - 1
            if w.end is None
            else min(p.horizon.months - 1, month_index(p.horizon.start, w.end))
        )
        cands.active[w.name] = list(range(a, b + 1))
        slices = workload_slices(w.traffic.utilization, flat)
        cands.serve_loads[w.name] = [s.load for s in slices]
        mean = mean_request_rate(w.traffic.daily_active_users, w.traffic.requests_per_user_per_day)
        for t in cands.active[w.name]:
            peak = peak_request_rate(mean, w.traffic.utilization, w.traffic.growth_per_month, t - a)
            for s, sl in enumerate(slices):
                cands.demand[(w.name, t, s)] = peak * sl.load
        cands.serve[w.name] = sc
        cands.dropped.extend(dropped)
        peak = max((cands.demand[(w.name, t, 0)] for t in cands.active[w.name]), default=0.0)
        check_fleet_size(w, sc, peak, f"{inputs.source_path}: workloads.serve[{i}]")
    return cands


MIN_JOB_WALL_HOURS = 0.25


def job_wall_hours(compute_hours: float) -> float:
    """Wall hours a training job holds its GPUs: its compute time, but at least
    ``MIN_JOB_WALL_HOURS`` (15 min: launch, loading weights and data, a first checkpoint;
    a rental is billed at least that long). Without the floor a job of a few tokens needs
    ~1e-9 h, below the solver's tolerance, and would be planned on no GPU at all.

    >>> job_wall_hours(120.0), job_wall_hours(1e-9)
    (120.0, 0.25)
    """
    return max(compute_hours, MIN_JOB_WALL_HOURS)


def planned_wall_hours(est: TrainEstimate, job: TrainJob) -> float:
    """Wall hours the plan provisions for a job: the ``job.confidence`` quantile of the hours
    real runs consume (:mod:`planner.physics.realized`), at least ``MIN_JOB_WALL_HOURS``."""
    return job_wall_hours(est.wall_hours_at(job.confidence))


def spot_overhead_for(
    job: TrainJob, offer: Offer, gpus: int, calib: Calibration | None = None
) -> float:
    """Extra wall hours per hour of progress when ``job`` runs ``gpus`` GPUs on spot ``offer``:
    the job's own ``spot.overhead`` if set, else the restart model
    (:func:`planner.physics.realized.spot_overhead`) with the provider's preemption rate, the
    number of instances the job holds and the job's stack profile."""
    if job.spot.overhead is not None:
        return job.spot.overhead
    real = (calib or default_calibration()).realized
    instances = -(-gpus // offer.gpus_per_instance)
    return spot_overhead(
        instances,
        real.spot.rate(offer.provider),
        real.stacks.profile(job.stack),
        real.spot.reacquire_h.value,
    )


def gpu_of(inputs: Inputs, gid: str) -> GpuSpec:
    return inputs.gpus[gid]


def check_candidates(inputs: Inputs, cands: Candidates) -> None:
    """A workload no allowed GPU can run makes the problem infeasible before any solve."""
    lines = []
    for kind, table in (("training job", cands.train), ("serving workload", cands.serve)):
        for name, clist in table.items():
            if clist:
                continue
            reasons = [f"{d.gpu}: {d.reason}" for d in cands.dropped if d.workload == name]
            lines.append(
                f"{kind} {name!r}: no allowed GPU can run it:\n      " + "\n      ".join(reasons)
            )
    lines += _unserved_buckets(inputs, cands)
    if lines:
        notes = [f"note: {w}" for w in inputs.warnings]  # said, not refused, on loading
        head = "infeasible: " + "; ".join(ln.split(":")[0] for ln in lines)
        raise InfeasibleError(head, lines + notes)


def _unserved_buckets(inputs: Inputs, cands: Candidates) -> list[str]:
    """Request buckets of a mix that no kept replica configuration serves within the SLO."""
    lines = []
    for w in inputs.problem.workloads.serve:
        clist = cands.serve.get(w.name, [])
        if not clist or w.requests is None:
            continue
        for i, b in enumerate(w.requests):
            if any(c.bucket_rates[i] > 0 for c in clist):
                continue
            why = sorted({f"{c.key}: {c.buckets[i].capacity.reason}" for c in clist if c.buckets})
            lines.append(
                f"serving workload {w.name!r} bucket {b.name!r} (prompt {b.shape()[0]}, output "
                f"{b.shape()[1]} tokens): no allowed GPU serves it within the SLO:\n      "
                + "\n      ".join(why[:8])
            )
    return lines
