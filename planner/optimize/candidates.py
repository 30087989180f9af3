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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.base.errors import InfeasibleError
from planner.inputs.catalog import GpuSpec, Offer
from planner.inputs.problem import Inputs, ServeWorkload, TrainJob, month_index
from planner.inputs.profiles import Measured
from planner.optimize.fleet_size import check_fleet_size
from planner.optimize.train_scale import replica_cap, short_run_batch
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.capacity import (
    bucket_capacity,
    measured_factor,
    replica_of_mix,
    scale_train,
    serve_precision,
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
from planner.physics.train import TrainEstimate, estimate_train, has_layout, with_inter_node_gbs

if TYPE_CHECKING:
    pass

from planner.optimize.deployments import deployment_candidates, deployment_gpu_cap
from planner.optimize.serve_options import ServeCandidate as ServeCandidate
from planner.optimize.serve_options import capped as capped
from planner.optimize.serve_options import layout_slug as layout_slug
from planner.optimize.serve_options import mix_beats as mix_beats
from planner.optimize.serve_options import owned_serve_options as owned_serve_options
from planner.optimize.serve_options import rentable_on as rentable_on
from planner.optimize.serve_options import serve_rental_pairs as serve_rental_pairs
from planner.optimize.serve_options import worker_gpus as worker_gpus

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
    out = []
    for gbs in speeds:
        est = _job_estimate(job, inputs, gid, k, _fabric_calibration(calib, gbs))
        if est.fits:
            out.append((gbs, planned_wall_hours(scale_train(est, factor), job)))
    return tuple(out)


def _job_estimate(
    job: TrainJob, inputs: Inputs, gid: str, k: int, calib: Calibration
) -> TrainEstimate:
    """The physics' estimate of ``job`` on ``k`` x ``gid``, fed only what the run has: at most
    one data-parallel replica per sequence, and a run shorter than one batch steps on itself
    (:mod:`planner.optimize.train_scale`). Every size of a tiny job was refused before: its
    fastest layout left replicas without a token, where TP x PP could use the GPUs."""
    return estimate_train(
        inputs.models[job.model],
        inputs.gpus[gid],
        k,
        job.tokens,
        job.method,
        calib,
        seq_len=job.seq_len,
        stack=job.stack,
        global_batch_tokens=short_run_batch(job.tokens, job.seq_len, job.method, calib),
        max_dp=replica_cap(job.tokens, job.seq_len, k),
    )


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
            # a run of fewer sequences than GPUs feeds only that many replicas: lay the size
            # out with no more (TP x PP takes the rest), or skip it when none splits that way
            cap = replica_cap(job.tokens, job.seq_len, k)
            if cap is not None and not has_layout(model, gpu, k, calib, cap):
                continue
            m = train_measurement(inputs, job, gid, k)
            est = _job_estimate(job, inputs, gid, k, calib)
            factor = measured_factor(est, m)
            est = scale_train(est, factor)
            if not est.fits:
                last_reason = est.reason or "does not fit"
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
    prec = serve_precision(w, gpu)
    return sorted(sizes | inputs.profiles.serve_tps(w.model, gid, prec))


def serve_gpus(w: ServeWorkload, inputs: Inputs) -> list[str]:
    """The GPU types ``w`` may run on: the problem's, restricted to the workload's ``gpus``."""
    return [g for g in inputs.gpus if w.gpus is None or g in w.gpus]


def serve_candidates(
    w: ServeWorkload, inputs: Inputs, calib: Calibration
) -> tuple[list[ServeCandidate], list[Dropped]]:
    out: list[ServeCandidate] = []
    dropped: list[Dropped] = []
    # a mix keeps every size: which is best differs per bucket
    keep = SERVE_KEEP_PER_GPU if len(w.buckets()) == 1 else len(TP_SIZES) + 8
    plain_ok = w.disaggregated is not True and w.mtp is not True
    plain: dict[str, tuple[list[ServeCandidate], list[tuple[int | str, str]]]] = {}
    for gid in serve_gpus(w, inputs):
        found: list[ServeCandidate] = []
        reasons: list[tuple[int | str, str]] = []
        for tp in serve_tp_sizes(w, inputs, gid):
            c = serve_candidate(w, inputs, gid, tp, calib)
            if isinstance(c, str):
                reasons.append((tp, c))
            else:
                found.append(c)
        found.sort(key=lambda c: -c.rate_rps / c.tp)
        plain[gid] = (found, reasons)
    # the plain replicas bound the deployments tried, offered or not (disaggregated: true)
    cap = deployment_gpu_cap(w, inputs, [c for f, _ in plain.values() for c in f])
    for gid, (found, reasons) in plain.items():
        if not plain_ok:
            found, reasons = [], []
        # a measured configuration is always offered: the team runs it and trusts it
        out.extend(c for i, c in enumerate(found) if i < keep or c.measured)
        deployed = deployment_candidates(w, inputs, gid, calib, reasons, found, cap)
        out.extend(deployed)
        if not found and not deployed:
            dropped.append(
                Dropped(
                    workload=w.name,
                    gpu=gid,
                    config="tp 1-8" if plain_ok and not deployed else "any deployment",
                    reason=grouped_reasons(reasons) or "no deployment of this GPU to try",
                )
            )
    return out, dropped


def grouped_reasons(reasons: list[tuple[int | str, str]]) -> str:
    """Why no replica size of a GPU serves a workload: each reason once, after the sizes it
    stops (an FP4 model on a card without FP4 said it four times, once per size); a
    deployment is named by its label.

    >>> grouped_reasons([(1, "too big"), (2, "too big"), (4, "too slow"), ("1x72:dep", "too slow")])
    'tp1/tp2: too big; tp4/1x72:dep: too slow'
    """
    sizes: dict[str, list[str]] = {}
    for tp, why in reasons:
        sizes.setdefault(why, []).append(f"tp{tp}" if isinstance(tp, int) else tp)
    return "; ".join(f"{'/'.join(tps)}: {why}" for why, tps in sizes.items())


def prune_offers(
    offers: dict[str, Offer], rents_fall: bool = False, spot_ok: bool = True
) -> dict[str, Offer]:
    """Keep, per (gpu, kind, GPUs per instance, provider, fabric), the cheapest unrestricted
    offer and restricted ones (a cap, a minimum term or block) cheaper than it; the rest can
    never be chosen by a cost-minimizing plan.

    Instance size is part of the key because it decides eligibility (a 4-GPU tensor-parallel
    replica needs a 4+-GPU instance), the provider because a training run stays with one, the
    fabric because it decides how fast a multi-node run goes. Reserved offers are kept (their
    terms differ) unless :func:`_reserved_beaten` says on-demand beats every one of a provider's
    offers of that GPU (only where ``rents_fall``: no rental price rises over the horizon;
    ``spot_ok``: the problem may use spot offers).
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
        # by the least a GPU-hour costs in any month: a price step down can make a dearer
        # offer the cheapest later (it is restricted, so kept up to the first flat one)
        group.sort(key=lambda o: (o.lowest_marginal_usd_per_gpu_hour, o.id))
        for o in group:
            keep[o.id] = o
            if not offer_restricted(o):
                break
    if rents_fall:
        for oid in _reserved_beaten(offers, spot_ok):
            keep.pop(oid, None)
    return dict(sorted(keep.items()))


def _reserved_beaten(offers: dict[str, Offer], spot_ok: bool = True) -> set[str]:
    """Ids of reserved offers no cost-minimizing plan needs: a provider's reservations of a GPU
    type when one uncapped, unrestricted on-demand offer ``O`` of that type (any provider)
    beats every offer the provider has of it (:func:`_beats`): ``O`` costs no more per
    GPU-hour in any month, its instances are the same size (a replica or run inside one of
    theirs fits one of ``O``'s, over the same links, and pays for as many GPUs), and its fabric
    carries any run across instances theirs carry, at least as fast.

    A reservation is paid for every hour of its term, so each hour a plan uses costs at least
    its price; the same hours on ``O`` cost no more, need no term, and fit every replica and
    run that fits the reservation. A training run stays with one provider: as ``O`` beats all
    of the provider's offers, the whole run moves to ``O`` at no higher cost. (Rental prices
    must not rise over the horizon, which the caller checks.) Spot offers count only where the
    problem may use spot (``spot_ok``).

    >>> from planner.inputs.catalog import Offer
    >>> mk = lambda i, p, kind="reserved", prov="a", u=8: Offer(id=i, provider=prov, gpu="b200",
    ...     kind=kind, usd_per_gpu_hour=p, gpus_per_instance=u, source="s", as_of="2026",
    ...     term_months=12 if kind == "reserved" else None)
    >>> od = mk("od", 3.0, "on_demand", "c")
    >>> sorted(_reserved_beaten({o.id: o for o in (od, mk("r1", 4.0), mk("r2", 2.0, prov="b"))}))
    ['r1']
    >>> sorted(_reserved_beaten({o.id: o for o in (mk("od1", 3.0, "on_demand", "c", 1), mk("r1", 4.0))}))
    []
    >>> sorted(_reserved_beaten({o.id: o for o in (od, mk("r1", 4.0), mk("r3", 2.5))}))
    []
    >>> sorted(_reserved_beaten({o.id: o for o in (od, mk("r1", 4.0), mk("a-od", 2.9, "on_demand"))}))
    ['r1']
    >>> with_spot = {o.id: o for o in (od, mk("r1", 4.0), mk("a-spot", 1.0, "spot"))}
    >>> sorted(_reserved_beaten(with_spot)), sorted(_reserved_beaten(with_spot, spot_ok=False))
    ([], ['r1'])
    """
    plain = [
        o
        for o in offers.values()
        if o.kind == "on_demand" and not o.committed and not offer_restricted(o)
    ]
    by_provider: dict[tuple[str, str], list[Offer]] = {}
    for o in offers.values():
        if spot_ok or o.kind != "spot":
            by_provider.setdefault((o.provider, o.gpu), []).append(o)
    out: set[str] = set()
    for group in by_provider.values():
        mine = [o for o in group if o.kind == "reserved"]
        if mine and any(all(_beats(b, o) for o in group) for b in plain):
            out.update(o.id for o in mine)
    return out


def _beats(b: Offer, o: Offer) -> bool:
    """Whether the uncapped, unrestricted on-demand offer ``b`` does all ``o`` does for no more
    (see :func:`_reserved_beaten`); an offer with limits of its own is left to the solver."""
    if b is o:
        return True
    if o.committed or o.kind == "spot" or offer_restricted(o):
        return False
    return (
        b.gpu == o.gpu
        and b.usd_per_gpu_hour <= o.lowest_marginal_usd_per_gpu_hour
        and o.gpus_per_instance == b.gpus_per_instance
        and _fabric_at_least(b, o)
    )


def _fabric_at_least(b: Offer, o: Offer) -> bool:
    """``b``'s fabric carries every multi-instance run ``o``'s carries, at least as fast
    (:func:`fabric_gbs`: a training fabric by its Gb/s; Ethernet or an unstated fabric only
    for jobs that opt into Ethernet)."""
    if o.multi_node:
        return b.multi_node and (b.fabric_gbps_per_gpu or 0) >= (o.fabric_gbps_per_gpu or 0)
    if o.fabric in ("ethernet", None):
        return b.multi_node or (
            b.fabric == o.fabric and (b.fabric_gbps_per_gpu or 0) >= (o.fabric_gbps_per_gpu or 0)
        )
    return True  # fabric "none": its instances are never joined


def offer_restricted(o: Offer) -> bool:
    """An offer whose use is limited beyond its price, or whose price changes on a date: a
    cap, a minimum term or block, a contract's term, price steps."""
    return (
        o.max_gpus is not None
        or bool(o.price_steps)
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
    rents_fall = all(inputs.market.rent(g) <= 0 for g in inputs.gpus)
    problem = inputs.problem
    spot_ok = problem.offers.spot_for_serving or any(
        j.spot.allowed for j in problem.workloads.train
    )
    cands.offers = prune_offers(inputs.offers, rents_fall, spot_ok)
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
