"""The check families: each judges one part of the plan against the recomputed figures.

Every family is a function ``(VerifyContext) -> Findings``; it reads the context and never
calls another family. Messages are what users see (and what tests match on): keep them stable.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

from planner.base import tolerances as tol
from planner.base.tolerances import RPS, at_least, at_most, whole
from planner.inputs.catalog import GpuSpec
from planner.inputs.problem import ServeWorkload, TrainJob, month_index
from planner.optimize.candidates import planned_wall_hours
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH
from planner.plan.data import FleetMonth, Purchase, WorkloadResult

from .context import (
    ConfigKey,
    ReservationRow,
    ServeRow,
    ServeState,
    TrainRow,
    TrainState,
    VerifyContext,
)
from .existing import check_existing
from .findings import ABS, REL, Checker, Findings, bad_number, close

H = HOURS_PER_MONTH

# ---------------------------------------------------------------- shape


def check_shape(ctx: VerifyContext) -> Findings:
    """Shape: the plan is a solution (status optimal or feasible) for the problem's horizon,
    with the planner's hours per month and load slices.

    On another horizon nothing else is checked, here or by :func:`planner.verify.verify_report`.
    """
    chk = Checker("shape", ctx.months)
    plan, months = ctx.plan, ctx.months
    chk.check(
        plan.status in ("optimal", "feasible"),
        f"plan status is {plan.status!r}, not optimal or feasible",
    )
    if not chk.check(
        ctx.horizon_matches,
        f"plan months {plan.months[:1]}..{plan.months[-1:]} differ from the problem's horizon "
        f"{months[0]}..{months[-1]}",
    ):
        return chk.findings()
    chk.check(
        close(plan.hours_per_month, H, abs_=1e-9),
        f"plan hours_per_month {plan.hours_per_month} != {H}",
    )
    chk.check(
        [(s.name, round(s.hours_per_month, 6)) for s in plan.slices]
        == [(s.name, round(s.hours_per_month, 6)) for s in ctx.slices],
        "plan slices differ from the planner's load slices",
    )
    return chk.findings()


# ---------------------------------------------------------------- purchases and the fleet table


def check_purchases(ctx: VerifyContext) -> Findings:
    """Purchases: each names an allowed GPU and a month of the horizon, buys whole nodes
    (count = nodes x node size), respects the licence (GeForce cards only where
    ``site.consumer_gpus_allowed``), at the problem's unit price (card + server share) and total.

    The ``fleet`` table: one row per (GPU, month) with activity, and its bought, owned,
    reserved, busy and rented GPU-hours and power agree with the purchases, allocations,
    reservations and rentals.
    """
    chk = Checker("purchases", ctx.months)
    for pu in ctx.plan.purchases:
        _check_purchase(chk, ctx, pu)
    fleet = _fleet_rows(chk, ctx)
    for g, gpu in ctx.inputs.gpus.items():
        for t in range(ctx.T):
            _check_fleet_month(chk, ctx, g, gpu, t, fleet.get((g, t)))
    return chk.findings()


def _check_purchase(chk: Checker, ctx: VerifyContext, pu: Purchase) -> None:
    what = f"purchase {pu.gpu} {pu.month}"
    t0 = chk.month(pu.month, what)
    gpu = ctx.inputs.gpus.get(pu.gpu)
    if not chk.check(
        gpu is not None, f"{what}: {pu.gpu!r} is not among the problem's allowed GPUs"
    ):
        return
    assert gpu is not None  # for the type checker: just checked
    if t0 is None:
        return
    chk.check(
        pu.count >= 0 and pu.nodes >= 0 and pu.count + pu.nodes > 0,
        f"{what}: buys {pu.count} cards in {pu.nodes} servers",
    )
    chk.check(
        pu.count % gpu.node_gpus == 0,
        f"{what}: {pu.count} GPUs is not a whole number of {gpu.node_gpus}-GPU nodes",
    )
    chk.check(
        gpu.partial_fill or pu.nodes * gpu.slots == pu.count,
        f"{what}: {pu.nodes} full servers x {gpu.slots} slots != {pu.count} GPUs",
    )
    chk.check(
        not gpu.consumer or ctx.problem.site.consumer_gpus_allowed,
        f"{what}: GeForce cards may not be deployed in a datacenter (site.consumer_gpus_allowed is false)",
    )
    chk.check(
        close(pu.gpu_usd, gpu.purchase_usd.value) and close(pu.chassis_usd, gpu.chassis_usd),
        f"{what}: card {pu.gpu_usd:,.2f}, server {pu.chassis_usd:,.2f} != problem's "
        f"{gpu.purchase_usd.value:,.2f}, {gpu.chassis_usd:,.2f}",
    )
    chk.check(
        pu.slots == gpu.slots,
        f"{what}: servers of {pu.slots} slots != the catalog's {gpu.slots}",
    )
    # a server bought ahead of its cards (legal, never cheaper) has no card to divide by:
    # its unit is the server's total
    unit = pu.total_usd / pu.count if pu.count > 0 else pu.total_usd
    chk.check(
        close(pu.unit_usd, unit),
        f"{what}: unit {pu.unit_usd:,.2f} per GPU != total / count",
    )
    cost = max(pu.nodes, 0) * gpu.chassis_usd + max(pu.count, 0) * gpu.purchase_usd.value
    chk.check(
        close(cost, pu.total_usd),
        f"{what}: total {pu.total_usd:,.2f} != {pu.nodes} servers x {gpu.chassis_usd:,.2f} "
        f"+ {pu.count} cards x {gpu.purchase_usd.value:,.2f}",
    )


def _fleet_rows(chk: Checker, ctx: VerifyContext) -> dict[tuple[str, int], FleetMonth]:
    """The fleet table by (GPU, month index), after checking its keys."""
    fleet: dict[tuple[str, int], FleetMonth] = {}
    for fm in ctx.plan.fleet:
        t = chk.month(fm.month, f"fleet {fm.gpu}")
        chk.check(
            fm.gpu in ctx.inputs.gpus, f"fleet row for {fm.gpu!r}, which the problem does not allow"
        )
        if t is not None:
            chk.check((fm.gpu, t) not in fleet, f"fleet {fm.gpu} {fm.month}: listed twice")
            fleet[(fm.gpu, t)] = fm
    return fleet


def _check_fleet_month(
    chk: Checker, ctx: VerifyContext, g: str, gpu: GpuSpec, t: int, fm: FleetMonth | None
) -> None:
    own = ctx.owned.get((g, t), 0)
    rented = ctx.rented_by_gpu.get((g, t), 0.0)
    reserved = ctx.reserved_gpus.get((g, t), 0.0)
    busy = ctx.busy.get((g, t), 0.0)
    what = f"fleet {g} {ctx.months[t]}"
    if fm is None:
        chk.check(
            not (own or rented > ABS or reserved),
            f"{what}: missing, but the plan owns {own}, rents {rented:,.0f} GPU-h",
        )
        return
    bought, existing = ctx.bought.get((g, t), 0), ctx.existing.get((g, t), 0)
    chk.check(
        fm.owned == own and fm.bought == bought,
        f"{what}: says bought {fm.bought}, owned {fm.owned}; the purchases give {bought}, "
        f"{own} (with {existing} existing GPUs of fleet.owned)",
        group=("fleet_owned", g),
    )
    chk.check(
        fm.existing == existing and fm.sold == ctx.sold.get((g, t), 0),
        f"{what}: says {fm.existing} existing in service, {fm.sold} sold; fleet.owned and the "
        f"sales give {existing}, {ctx.sold.get((g, t), 0)}",
        group=("fleet_existing", g),
    )
    chk.check(
        fm.reserved == reserved,
        f"{what}: says {fm.reserved} reserved GPUs; the reservations give {reserved:.0f}",
    )
    chk.check(
        close(fm.owned_busy_gpu_hours, busy, abs_=0.01),
        f"{what}: says {fm.owned_busy_gpu_hours:,.1f} busy GPU-h; the allocations give {busy:,.1f}",
        group=("fleet_busy", g),
    )
    util = busy / (own * H) if own else 0.0
    chk.check(
        close(fm.owned_utilization, util, abs_=1e-6)
        and 0.0 <= fm.owned_utilization <= 1.0 + tol.REL,
        f"{what}: says utilization {fm.owned_utilization:.4f}; busy / (owned x hours) gives {util:.4f}",
        group=("fleet_util", g),
    )
    chk.check(
        close(fm.rented_gpu_hours, rented, abs_=0.01),
        f"{what}: says {fm.rented_gpu_hours:,.1f} rented GPU-h; the rentals give {rented:,.1f}",
    )
    site = ctx.problem.site
    servers = ctx.servers.get((g, t), 0)
    chk.check(
        fm.servers == servers, f"{what}: says {fm.servers} servers; the purchases give {servers}"
    )
    chk.check(
        own - existing <= servers * gpu.slots,
        f"{what}: {own - existing} cards bought do not fit in {servers} servers of {gpu.slots} slots",
    )
    host = servers * gpu.host_w + existing * gpu.host_w / max(gpu.slots, 1)
    kw = (own * gpu.tdp_w.value + host) * site.pue / 1000
    chk.check(
        close(fm.power_kw, kw, abs_=1e-3),
        f"{what}: says {fm.power_kw:,.2f} kW; recomputed {kw:,.2f}",
        group=("fleet_kw", g),
    )


# ---------------------------------------------------------------- serving


def check_serving(ctx: VerifyContext) -> Findings:
    """Serving: every allocation belongs to a serving workload of the problem, in its active
    months and a real slice, with a finite number of replicas; its demand and its replica rate
    are the ones the demand model and the physics give (the configuration meets the SLO); owned
    replicas are whole; rented ones use a trusted offer for that GPU whose instances hold the
    replica's tensor-parallel group, spot only if ``offers.spot_for_serving``. Demand is
    covered and at least one whole replica is up (``serve_floor``) in every (month, slice).

    Whether the replicas fit the owned fleet, the reservations and the offers' availability is
    :func:`check_caps`'s.
    """
    chk = Checker("serving", ctx.months)
    for al in ctx.plan.serve_allocations:
        chk.check(
            al.workload in ctx.serve_names,
            f"serving allocation for {al.workload!r}, which is not a serving workload of the problem",
        )
    judged: set[ConfigKey] = set()  # the physics' verdict on a configuration is reported once
    for state in ctx.serve:
        for row in state.rows:
            _check_serve_row(chk, ctx, state, row, judged)
        _check_serve_cover(chk, ctx, state)
    return chk.findings()


def _check_serve_row(
    chk: Checker, ctx: VerifyContext, state: ServeState, row: ServeRow, judged: set[ConfigKey]
) -> None:
    w, al = state.w, row.al
    what = f"serving {w.name} {al.month} {al.slice} on {al.source}"
    t = chk.month(al.month, what)
    if t is None:
        return
    if not chk.check(
        row.active,
        f"{what}: outside the workload's active months {ctx.months[state.a]}..{ctx.months[state.b]}",
    ):
        return
    if not chk.check(row.slice_ok, f"{what}: unknown load slice {al.slice!r}"):
        return
    if not chk.check(
        row.replicas_ok, f"{what}: replicas {al.replicas} is not a finite number >= 0"
    ):
        return
    demand = state.demand[(t, al.slice)]
    chk.check(
        close(al.demand_rps, demand, abs_=1e-6),
        f"{what}: demand_rps {al.demand_rps:.4f} != recomputed {demand:.4f}",
        group=("demand_rps", w.name),
    )
    if row.key not in judged:
        judged.add(row.key)
        _check_serve_config(chk, ctx, w, row.key)
    chk.check(
        close(row.rate, al.rate_rps_per_replica, rel=1e-6, abs_=1e-9),
        f"{what}: plan says {al.rate_rps_per_replica:.4f} req/s per {al.gpu} x{al.gpus_per_replica} "
        f"replica, physics says {row.rate:.4f}",
        group=("rate", row.key, al.rate_rps_per_replica),
    )
    chk.check(
        whole(al.replicas),
        f"{what}: {al.replicas} replicas is not a whole number (owned and rented replicas are "
        "whole in every load slice)",
        group=("whole", w.name),
    )
    if w.requests is not None:
        _check_mix_row(chk, ctx, row, what)
    if al.source != "owned":
        _check_serve_offer(chk, ctx, row, what)


def _check_mix_row(chk: Checker, ctx: VerifyContext, row: ServeRow, what: str) -> None:
    """A mix's row: per-bucket rates are the measured or modeled ones; capacity only to
    buckets of the workload the replica can serve."""
    al = row.al
    caps = ctx.bucket_caps.get(row.key, {})
    for b, rate in al.bucket_rates_rps.items():
        cap = caps.get(b)
        if not chk.check(cap is not None, f"{what}: unknown request bucket {b!r}"):
            continue
        assert cap is not None
        origin = "measured" if cap.measured is not None else "modeled"
        chk.check(
            close(cap.rate, rate, rel=1e-6, abs_=1e-9),
            f"{what}: plan says {rate:.4f} req/s per replica for bucket {b}; {origin}: "
            f"{cap.rate:.4f}",
            group=("bucket_rate", row.key, b),
        )
    for b, v in al.bucket_capacity_rps.items():
        ok = b in caps and (caps[b].rate > 0 or v <= RPS)
        chk.check(
            ok and not bad_number(v) and v >= -RPS,
            f"{what}: gives bucket {b!r} {v:.4f} req/s of capacity, which this replica "
            "cannot serve within the SLO (or not a number >= 0)",
            group=("bucket_given", row.key, b),
        )


def _check_serve_config(chk: Checker, ctx: VerifyContext, w: ServeWorkload, key: ConfigKey) -> None:
    _, gpu, tp = key
    cap = ctx.capacity[key]
    if cap is None:
        chk.check(False, f"serving {w.name}: GPU {gpu!r} x{tp} is not allowed")
    else:
        chk.check(
            bool(cap.feasible),
            f"serving {w.name}: {gpu} x{tp} cannot meet the SLO: {cap.reason}",
        )


def _check_serve_offer(chk: Checker, ctx: VerifyContext, row: ServeRow, what: str) -> None:
    al, o = row.al, row.offer
    if not chk.check(
        o is not None,
        f"{what}: offer {al.source!r} is not among the problem's trusted offers",
    ):
        return
    assert o is not None  # for the type checker: just checked
    chk.check(o.gpu == al.gpu, f"{what}: offer {o.id} rents {o.gpu}, not {al.gpu}")
    chk.check(
        o.gpus_per_instance >= al.gpus_per_replica,
        f"{what}: a {al.gpus_per_replica}-GPU replica on {o.id}, whose instances hold "
        f"{o.gpus_per_instance} GPUs (a tensor-parallel group must share one instance)",
    )
    chk.check(
        o.kind != "spot" or ctx.problem.offers.spot_for_serving,
        f"{what}: spot offer {o.id} used but offers.spot_for_serving is false",
    )
    chk.check(not o.cluster, f"{what}: {o.id} is a cluster product, rented for training only")


def _check_mix_cover(chk: Checker, ctx: VerifyContext, state: ServeState) -> None:
    """A mix: shares sum to 1; every bucket gets its share of the demand over max_load in
    capacity; each replica type's buckets take at most its replicas less R spares."""
    w, R = state.w, state.w.redundancy
    buckets = w.buckets()
    total = sum(b.share for b in buckets)
    chk.check(abs(total - 1) <= 1e-6, f"serving {w.name}: request shares sum to {total:.6g}, not 1")
    for (t, s), need in state.demand.items():
        for b in buckets:
            want = b.share * need / w.slo.max_load
            got = state.given.get((t, s, b.name), 0.0)
            chk.check(
                at_least(got, want, RPS),
                f"serving {w.name} {ctx.months[t]} {s} bucket {b.name}: capacity {got:.3f} "
                f"req/s < its share {b.share:g} of the demand over max_load ({want:.3f})",
                group=("bucket_demand", w.name),
            )
        chk.check(
            state.replicas_up.get((t, s), 0.0) >= 1 + R - 1e-6,
            f"serving {w.name} {ctx.months[t]} {s}: fewer than 1 + {R} replicas up (serve_floor)",
            group=("floor", w.name),
        )
    for (t, s, gpu, tp), busy in state.type_busy.items():
        have = state.type_replicas.get((t, s, gpu, tp), 0.0)
        spare = R if have > 0 else 0
        chk.check(
            at_most(busy, have - spare, RPS),
            f"serving {w.name} {ctx.months[t]} {s}: the buckets on {gpu} x{tp} need "
            f"{busy:.3f} replicas, {have:.0f} are up with {spare} spare",
            group=("mix_share", w.name),
        )


def _check_serve_cover(chk: Checker, ctx: VerifyContext, state: ServeState) -> None:
    if state.w.requests is not None:
        _check_mix_cover(chk, ctx, state)
        return
    name = state.w.name
    R, load = state.w.redundancy, state.w.slo.max_load
    for (t, s), need in state.demand.items():
        have = state.offered.get((t, s), 0.0)
        spare = state.spare_rps((t, s))
        up = state.replicas_up.get((t, s), 0.0)
        chk.check(
            (have - spare) * load >= need * (1 - REL) - 1e-9,
            f"serving {name} {ctx.months[t]} {s}: capacity {have:.3f} req/s"
            + (f", {have - spare:.3f} with the {R} fastest replica(s) down," if R else "")
            + f" at max_load {load:.0%} serves {(have - spare) * load:.3f} req/s < demand "
            f"{need:.3f} req/s",
            group=("demand", name),
        )
        chk.check(
            up >= 1 + R - 1e-6,
            f"serving {name} {ctx.months[t]} {s}: {up:.3f} replicas up; a live "
            f"service keeps one whole replica up plus redundancy {R} (serve_floor)",
            group=("floor", name),
        )


# ---------------------------------------------------------------- training


def check_training(ctx: VerifyContext) -> Findings:
    """Training: every allocation belongs to a training job of the problem; each job runs one
    allowed configuration, which fits in memory (physics), inside its window (in total, per
    month and, for owned runs, per slice), with progress >= the hours the physics needs. Owned
    runs need ``k`` owned GPUs; rentals use a trusted, non-reserved offer for that GPU with
    instances of >= min(k, 8) GPUs, within its availability cap, and spot only as the job's
    spot rules allow (allowed, max share, restart overhead).
    """
    chk = Checker("training", ctx.months)
    for al in ctx.plan.train_allocations:
        chk.check(
            al.workload in ctx.train_names,
            f"training allocation for {al.workload!r}, which is not a training job of the problem",
        )
    for state in ctx.train:
        _check_train_job(chk, ctx, state)
    return chk.findings()


def _check_train_job(chk: Checker, ctx: VerifyContext, state: TrainState) -> None:
    j, gpu, k = state.job, state.gpu, state.k
    if not chk.check(bool(state.allocs), f"training {j.name}: no GPU time allocated"):
        return
    chk.check(
        len(state.configs) == 1,
        f"training {j.name}: runs on several configurations {sorted(state.configs)}",
    )
    if not chk.check(state.allowed, f"training {j.name}: GPU {gpu!r} x{k} not allowed"):
        return
    est = state.est
    if not chk.check(est is not None, f"training {j.name}: no estimate for {gpu} x{k}"):
        return
    chk.check(bool(est.fits), f"training {j.name}: {gpu} x{k} does not fit: {est.reason}")
    for row in state.rows:
        _check_train_row(chk, ctx, state, row)
    needed = planned_wall_hours(est, j)
    chk.check(
        at_least(state.progress, needed, tol.HOURS),
        f"training {j.name}: {state.progress:,.1f} h of progress < {needed:,.1f} h needed on {gpu} x{k}",
    )
    chk.check(
        at_most(state.spot, j.spot.max_share * needed, tol.HOURS),
        f"training {j.name}: {state.spot:,.1f} h of progress on spot > spot.max_share {j.spot.max_share:.0%} "
        f"of {needed:,.1f} h",
    )
    window_h = (state.b - state.a + 1) * H
    chk.check(
        at_most(state.wall, window_h, tol.HOURS),
        f"training {j.name}: {state.wall:,.1f} wall hours > {window_h:,.0f} h in the window",
    )
    for t, h in sorted(state.per_month.items()):
        chk.check(
            at_most(h, H, tol.HOURS),
            f"training {j.name} {ctx.months[t]}: {h:,.1f} wall hours in a {H:.0f}-hour month",
        )
    _check_train_terms(chk, ctx, state)


def _check_train_terms(chk: Checker, ctx: VerifyContext, state: TrainState) -> None:
    """One place per run (unless ``providers: split``) and every minimum term paid."""
    j = state.job
    if j.providers == "single":
        chk.check(
            len(state.places) <= 1,
            f"training {j.name}: runs in {len(state.places)} places {sorted(state.places)}; "
            "providers: single keeps a run with one provider (or on owned GPUs)",
        )
    for oid, hours in sorted(state.per_offer.items()):
        o = ctx.inputs.offers.get(oid)
        if o is None or not o.min_term_days or hours <= ABS:
            continue
        chk.check(
            hours >= o.min_term_hours * (1 - REL) - ABS,
            f"training {j.name}: {hours:,.1f} h on {oid}, below its minimum term of "
            f"{o.min_term_days:g} days ({o.min_term_hours:,.0f} h), which is paid in full",
        )


def _check_train_row(chk: Checker, ctx: VerifyContext, state: TrainState, row: TrainRow) -> None:
    j, al = state.job, row.al
    what = f"training {j.name} {al.month} on {al.source}"
    t = chk.month(al.month, what)
    if t is None:
        return
    if not chk.check(
        row.in_window, f"{what}: runs outside its window {j.window.start}..{j.window.deadline}"
    ):
        return
    if not chk.check(
        row.hours_ok, f"{what}: wall_hours {al.wall_hours} is not a finite number >= 0"
    ):
        return
    if al.source != "owned":
        _check_train_offer(chk, state, row, what)
        return
    chk.check(
        close(al.progress_hours, al.wall_hours, abs_=1e-6),
        f"{what}: progress_hours != wall_hours on owned GPUs",
    )
    if not chk.check(
        row.slice_ok, f"{what}: {al.wall_hours:.1f} h in slice {al.slice} exceeds its hours"
    ):
        return
    owned = ctx.owned.get((state.gpu, t), 0)
    chk.check(
        owned >= state.k,
        f"{what}: needs {state.k} owned {state.gpu}, owns {owned}",
        group=("train_owned", j.name),
    )


def _check_train_offer(chk: Checker, state: TrainState, row: TrainRow, what: str) -> None:
    j, al, o, k = state.job, row.al, row.offer, state.k
    if not chk.check(o is not None, f"{what}: offer {al.source!r} is not trusted by the problem"):
        return
    assert o is not None  # for the type checker: just checked
    chk.check(o.gpu == state.gpu, f"{what}: offer {o.id} rents {o.gpu}, not {state.gpu}")
    chk.check(o.kind != "reserved", f"{what}: reserved offers are not used for training")
    chk.check(
        o.gpus_per_instance >= min(k, 8),
        f"{what}: {k} GPUs on {o.id}, whose instances hold {o.gpus_per_instance} GPUs "
        f"(a training job needs instances of at least min(k, 8) GPUs)",
    )
    chk.check(
        o.max_gpus is None or row.paid <= o.max_gpus,
        f"{what}: needs {row.paid} GPUs from {o.id}, which offers at most {o.max_gpus}",
    )
    chk.check(
        row.fabric_ok,
        f"{what}: {k} GPUs span {o.id}'s {o.gpus_per_instance}-GPU instances, whose fabric "
        f"({o.fabric or 'not stated'}) is not made for multi-node training"
        + ("" if j.ethernet else " (a job may opt into Ethernet with ethernet: true)"),
    )
    if o.kind == "spot":
        chk.check(
            j.spot.allowed and j.spot.max_share > 0,
            f"{what}: spot offer used but the job's spot.allowed is false or max_share is 0",
        )
    chk.check(
        close(al.progress_hours, row.progress, abs_=1e-6),
        f"{what}: progress_hours {al.progress_hours:,.2f} != {row.progress:,.2f} recomputed",
    )


# ---------------------------------------------------------------- reservations and caps


def check_caps(ctx: VerifyContext) -> Findings:
    """Reservations and caps. Limits: capex within ``budget.capex_usd``, the recomputed total
    within ``budget.total_usd``, the owned fleet's draw within ``site.power_cap_kw`` in every
    month. Capacity: owned GPUs in use (serving and training) <= owned, per month and slice;
    GPUs used on a reserved offer <= the GPUs committed; GPUs rented from an offer <= its
    availability cap. Reservations: a reserved offer of the problem, its term, GPU, provider
    and price, whole instances, a term inside the horizon, billed in full.
    """
    chk = Checker("caps", ctx.months)
    _check_limits(chk, ctx)
    for (g, t, s), gpus in sorted(ctx.use.items()):
        owned = ctx.owned.get((g, t), 0)
        chk.check(
            gpus <= owned * (1 + REL) + ABS,
            f"{ctx.months[t]} {s}: {gpus:.2f} owned {g} in use > {owned} owned",
            group=("use", g),
        )
    for row in ctx.reservations:
        _check_reservation(chk, ctx, row)
    for (oid, t, s), gpus in sorted(ctx.reserved_use.items()):
        committed = ctx.res_active.get((oid, t), 0.0)
        chk.check(
            gpus <= committed * (1 + REL) + ABS,
            f"{ctx.months[t]} {s}: {gpus:.1f} GPUs used on reserved {oid} > {committed:.0f} committed",
        )
    capped = defaultdict(float, ctx.capped_use)
    for (oid, _, t), gpus in ctx.train_capped.items():
        for s in ctx.sl_hours:  # a training block holds its GPUs the whole month
            capped[(oid, t, s)] += gpus
    for (oid, t, s), gpus in sorted(capped.items()):
        cap = ctx.inputs.offers[oid].max_gpus
        chk.check(
            cap is None or gpus <= cap * (1 + REL) + ABS,
            f"{ctx.months[t]} {s}: {gpus:.1f} GPUs rented from {oid} > {cap} available",
        )
    return chk.findings()


def _check_limits(chk: Checker, ctx: VerifyContext) -> None:
    budget, site = ctx.problem.budget, ctx.problem.site
    chk.check(
        ctx.capex <= budget.capex_usd * (1 + REL) + ABS,
        f"capex {ctx.capex:,.0f} exceeds budget.capex_usd {budget.capex_usd:,.0f}",
    )
    if budget.total_usd is not None:
        chk.check(
            ctx.total <= budget.total_usd * (1 + REL) + ABS,
            f"total cost {ctx.total:,.0f} exceeds budget.total_usd {budget.total_usd:,.0f}",
        )
    if site.power_cap_kw is None:
        return
    for t in range(ctx.T):
        kw = sum(
            (ctx.owned.get((g, t), 0) * gpu.tdp_w.value + ctx.servers.get((g, t), 0) * gpu.host_w)
            * site.pue
            / 1000
            for g, gpu in ctx.inputs.gpus.items()
        )
        chk.check(
            kw <= site.power_cap_kw * (1 + REL) + ABS,
            f"{ctx.months[t]}: owned fleet draws {kw:,.1f} kW > site.power_cap_kw {site.power_cap_kw:,.1f} kW",
        )


def _check_reservation(chk: Checker, ctx: VerifyContext, row: ReservationRow) -> None:
    rv, o = row.rv, row.offer
    what = f"reservation {rv.offer} from {rv.start_month}"
    if not chk.check(o is not None, f"{what}: not a reserved offer of the problem"):
        return
    assert o is not None  # for the type checker: just checked
    t0 = chk.month(rv.start_month, what)
    if t0 is None:
        return
    L = row.term
    chk.check(rv.term_months == L, f"{what}: term {rv.term_months} months != the offer's {L}")
    chk.check(
        rv.gpu == o.gpu and rv.provider == o.provider,
        f"{what}: GPU/provider differ from the offer's",
    )
    chk.check(
        rv.gpus > 0 and rv.gpus % o.gpus_per_instance == 0,
        f"{what}: {rv.gpus} GPUs is not a whole number of {o.gpus_per_instance}-GPU instances",
    )
    chk.check(t0 + L <= ctx.T, f"{what}: the {L}-month term runs past the horizon")
    chk.check(
        close(rv.usd_per_gpu_hour, o.usd_per_gpu_hour, abs_=1e-9),
        f"{what}: rate {rv.usd_per_gpu_hour} != offer price {o.usd_per_gpu_hour}",
    )
    chk.check(
        close(rv.hours, L * H) and close(rv.usd, row.usd),
        f"{what}: {rv.usd:,.2f} for {rv.hours:,.0f} h != {rv.gpus} GPUs x {L * H:,.0f} h x {o.usd_per_gpu_hour}",
    )


# ---------------------------------------------------------------- rentals


def check_rentals(ctx: VerifyContext) -> Findings:
    """Rentals: each names a trusted offer and a month of the horizon; kind, GPU, provider and
    price are the offer's and ``usd = gpu_hours x price``. GPU-hours billed per (offer,
    workload, month) = the hours the allocations use (whole instances for training); reserved
    offers are billed every month of a reservation's term, in full.
    """
    chk = Checker("rentals", ctx.months)
    for row in ctx.rentals:
        r, o = row.r, row.offer
        what = f"rental {r.offer} {r.month} for {r.workload}"
        if not chk.check(o is not None, f"{what}: unknown or untrusted offer {r.offer!r}"):
            continue
        assert o is not None  # for the type checker: just checked
        if chk.month(r.month, what) is None:
            continue
        if not chk.check(
            row.hours_ok, f"{what}: gpu_hours {r.gpu_hours} is not a finite number >= 0"
        ):
            continue
        kind = "committed" if o.committed else o.kind
        chk.check(
            r.kind == kind and r.gpu == o.gpu and r.provider == o.provider,
            f"{what}: kind/GPU/provider ({r.kind}, {r.gpu}, {r.provider}) differ from the offer's "
            f"({kind}, {o.gpu}, {o.provider})",
        )
        # the offer's price is the problem's (a negotiated discount applied once, on loading);
        # a contract's hours cost nothing at the margin: it is paid in committed_usd
        price = o.marginal_usd_per_gpu_hour
        chk.check(
            close(r.usd_per_gpu_hour, price, abs_=1e-9),
            f"{what}: rate {r.usd_per_gpu_hour} != offer price {price}",
        )
        chk.check(
            close(row.usd, r.usd),
            f"{what}: {r.usd:,.2f} != {r.gpu_hours:,.2f} h x {price}",
        )
        if o.committed:
            term = (o.available_from or "", o.available_until or "")
            chk.check(
                month_index(term[0], r.month) >= 0 >= month_index(term[1], r.month),
                f"{what}: contract capacity used outside its term {term[0]}..{term[1]}",
            )
    _check_billing(chk, ctx)
    return chk.findings()


def _check_billing(chk: Checker, ctx: VerifyContext) -> None:
    for key in sorted(set(ctx.expect) | set(ctx.seen)):
        oid, w, t = key
        want, billed = ctx.expect.get(key, 0.0), ctx.seen.get(key, 0.0)
        chk.check(
            close(want, billed, rel=1e-6, abs_=1e-3),
            f"rental {oid} for {w} in {ctx.months[t]}: {billed:,.2f} GPU-h billed, allocations use {want:,.2f}",
        )
    for key2 in sorted(set(ctx.reserved_expect) | set(ctx.reserved_seen)):
        oid, t = key2
        want, billed = ctx.reserved_expect.get(key2, 0.0), ctx.reserved_seen.get(key2, 0.0)
        chk.check(
            close(want, billed, rel=1e-6, abs_=1e-3),
            f"reserved {oid} in {ctx.months[t]}: {billed:,.2f} GPU-h billed, "
            f"the reservations commit {want:,.2f}",
        )


# ---------------------------------------------------------------- money


def check_money(ctx: VerifyContext) -> Findings:
    """Money: ``totals`` (capex, power, hosting, rental, reserved, total) equal the recomputed
    ones (power: idle + host all month, busy extra per busy GPU-hour, PUE, price); the budgets
    echoed in totals are the problem's; the solver objective is the recomputed total; every
    ``cash_flow`` month, and the cumulative column, agree.
    """
    chk = Checker("money", ctx.months)
    tt, budget = ctx.plan.totals, ctx.problem.budget
    for name, mine, theirs in (
        ("capex", ctx.capex, tt.capex_usd),
        ("power", ctx.power, tt.power_usd),
        ("hosting", ctx.hosting, tt.hosting_usd),
        ("rental", ctx.rental, tt.rental_usd),
        ("total", ctx.total, tt.total_usd),
        ("reserved", ctx.reserved_usd, tt.reserved_usd),
        ("committed", sum(ctx.committed_by_month.values()), tt.committed_usd),
        ("sale_proceeds", sum(ctx.sales_by_month.values()), tt.sale_proceeds_usd),
    ):
        chk.check(
            close(mine, theirs, rel=1e-6, abs_=0.5),
            f"totals.{name}_usd = {theirs:,.2f} but recomputed {mine:,.2f}",
        )
    for text in ctx.sale_errors:
        chk.check(False, text)
    chk.check(
        tt.capex_budget_usd is None or close(tt.capex_budget_usd, budget.capex_usd),
        f"totals.capex_budget_usd {tt.capex_budget_usd} != the problem's budget.capex_usd {budget.capex_usd}",
    )
    chk.check(
        tt.total_budget_usd == budget.total_usd
        or (
            tt.total_budget_usd is not None
            and budget.total_usd is not None
            and close(tt.total_budget_usd, budget.total_usd)
        ),
        f"totals.total_budget_usd {tt.total_budget_usd} != the problem's budget.total_usd {budget.total_usd}",
    )
    if ctx.plan.objective_usd is not None:
        chk.check(
            close(ctx.npv, ctx.plan.objective_usd, rel=1e-5, abs_=1.0),
            f"solver objective {ctx.plan.objective_usd:,.2f} != recomputed present value "
            f"{ctx.npv:,.2f}",
        )
    _check_finance(chk, ctx)
    _check_cash_flow(chk, ctx)
    return chk.findings()


def _check_finance(chk: Checker, ctx: VerifyContext) -> None:
    """Present value, residual value, each purchase's depreciation and the per-year cash
    and P&L views, recomputed from the purchases and the recomputed monthly cash."""
    fin, tt = ctx.inputs.finance, ctx.plan.totals
    chk.check(
        close(ctx.plan.discount_rate, fin.discount_rate, abs_=1e-12)
        and ctx.plan.residual_mode == fin.residual,
        f"plan uses discount rate {ctx.plan.discount_rate} / residual {ctx.plan.residual_mode}; "
        f"the problem's are {fin.discount_rate} / {fin.residual}",
    )
    for name, mine, theirs in (
        ("npv", ctx.npv, tt.npv_usd),
        ("residual_value", ctx.residual + ctx.existing_residual, tt.residual_value_usd),
    ):
        chk.check(
            theirs is not None and close(mine, theirs, rel=1e-6, abs_=0.5),
            f"totals.{name}_usd = {theirs} but recomputed {mine:,.2f}",
        )
    book = 0.0
    deps: dict[int, float] = defaultdict(float)
    for i, pu in enumerate(ctx.plan.purchases):
        t0 = ctx.idx.get(pu.month)
        d = ctx.plan.depreciation[i] if i < len(ctx.plan.depreciation) else None
        if t0 is None or not chk.check(
            d is not None and d.gpu == pu.gpu and d.month == pu.month,
            f"depreciation: no schedule for purchase {pu.gpu} {pu.month}",
        ):
            continue
        assert d is not None  # for the type checker: just checked
        years = economics.depreciation_by_year(pu.total_usd, t0, fin.depreciation_years, ctx.T)
        end = economics.book_value(pu.total_usd, ctx.T - t0, fin.depreciation_years)
        chk.check(
            len(d.by_year_usd) == len(years)
            and all(close(a, b, abs_=0.01) for a, b in zip(d.by_year_usd, years, strict=True))
            and close(d.book_value_end_usd, end, abs_=0.01),
            f"depreciation {pu.gpu} {pu.month}: {d.by_year_usd} (book {d.book_value_end_usd:,.2f})"
            f" != straight line over {fin.depreciation_years:g} years {years} (book {end:,.2f})",
        )
        book += end
        for y, v in enumerate(years):
            deps[y] += v
    _check_years(chk, ctx, deps, book)


def _check_years(chk: Checker, ctx: VerifyContext, deps: dict[int, float], book: float) -> None:
    fin, T = ctx.inputs.finance, ctx.T
    n = (T + 11) // 12
    if not chk.check(
        [y.year for y in ctx.plan.years] == list(range(1, n + 1)),
        f"years: need plan years 1..{n}, got {[y.year for y in ctx.plan.years]}",
    ):
        return
    for y, row in enumerate(ctx.plan.years):
        months = range(12 * y, min(T, 12 * y + 12))
        last = months[-1] == T - 1
        cash = {
            "capex": sum(ctx.capex_by_month.get(t, 0.0) for t in months),
            "rental": sum(ctx.rental_by_month.get(t, 0.0) for t in months),
            "power+hosting": sum(ctx.opex_by_month.get(t, 0.0) for t in months),
            "committed": sum(ctx.committed_by_month.get(t, 0.0) for t in months),
            "sales": -sum(ctx.sales_by_month.get(t, 0.0) for t in months),
        }
        residual = ctx.residual + ctx.existing_residual if last else 0.0
        # the plan's P&L: purchases' gains; existing assets' disposals stay outside it
        gain = ctx.residual - book if last and fin.residual != "none" else 0.0
        opex = row.power_usd + row.hosting_usd + row.committed_usd
        for name, mine, theirs in (
            ("capex", cash["capex"], row.capex_usd),
            ("rental", cash["rental"], row.rental_usd),
            ("power+hosting", cash["power+hosting"], row.power_usd + row.hosting_usd),
            ("committed", cash["committed"], row.committed_usd),
            ("sales", -cash["sales"], row.sales_usd),
            ("residual", residual, row.residual_usd),
            ("cash", sum(cash.values()) - residual, row.cash_usd),
            ("depreciation", deps.get(y, 0.0), row.depreciation_usd),
            ("gain on sale", gain, row.gain_on_sale_usd),
            ("P&L cost", deps.get(y, 0.0) + opex + row.rental_usd - gain, row.pnl_cost_usd),
        ):
            chk.check(
                close(mine, theirs, rel=1e-6, abs_=0.5),
                f"year {row.year}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                group=("years", name),
            )


def _check_cash_flow(chk: Checker, ctx: VerifyContext) -> None:
    if not chk.check(
        [mc.month for mc in ctx.plan.cash_flow] == ctx.months,
        "cash_flow does not list every month of the horizon once, in order",
    ):
        return
    running = 0.0
    for t, mc in enumerate(ctx.plan.cash_flow):
        capex = ctx.capex_by_month.get(t, 0.0)
        rental = ctx.rental_by_month.get(t, 0.0)
        opex = ctx.opex_by_month.get(t, 0.0)
        for name, mine, theirs in (
            ("capex", capex, mc.capex_usd),
            ("rental", rental, mc.rental_usd),
            ("power+hosting", opex, mc.power_usd + mc.hosting_usd),
        ):
            chk.check(
                close(mine, theirs, rel=1e-6, abs_=0.5),
                f"cash flow {mc.month}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                group=("cash", name),
            )
        for name, mine, theirs in (
            ("committed", ctx.committed_by_month.get(t, 0.0), mc.committed_usd),
            ("sales", ctx.sales_by_month.get(t, 0.0), mc.sales_usd),
        ):
            chk.check(
                close(mine, theirs, rel=1e-6, abs_=0.5),
                f"cash flow {mc.month}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                group=("cash", name),
            )
        mine = ctx.month_total(t)
        running += mine
        chk.check(
            close(mine, mc.total_usd, rel=1e-6, abs_=0.5),
            f"cash flow {mc.month}: total {mc.total_usd:,.2f} but recomputed {mine:,.2f}",
            group=("cash", "total"),
        )
        chk.check(
            close(running, mc.cumulative_usd, rel=1e-6, abs_=0.5),
            f"cash flow {mc.month}: cumulative {mc.cumulative_usd:,.2f} but recomputed {running:,.2f}",
            group=("cash", "cumulative"),
        )


# ---------------------------------------------------------------- workloads


def check_workloads(ctx: VerifyContext) -> Findings:
    """Workloads: one result per workload of the problem, and no other; its target is the
    problem's and its prediction the recomputed one (training: wall hours in the allocations
    vs hours in the window; serving: p95 TTFT and TPOT of the configurations used vs the SLO);
    ``meets_target`` is true and the recomputation agrees.
    """
    chk = Checker("workloads", ctx.months)
    results: dict[str, list[WorkloadResult]] = defaultdict(list)
    for wr in ctx.plan.workloads:
        results[wr.name].append(wr)
    names = ctx.serve_names | ctx.train_names
    for name in results:
        chk.check(name in names, f"workload result {name!r} is not a workload of the problem")
    for j in ctx.problem.workloads.train:
        _check_train_result(chk, ctx, j, results.get(j.name, []))
    for w in ctx.problem.workloads.serve:
        _check_serve_result(chk, ctx, w, results.get(w.name, []))
    return chk.findings()


def _check_train_result(
    chk: Checker, ctx: VerifyContext, j: TrainJob, rs: list[WorkloadResult]
) -> None:
    if not chk.check(
        len(rs) == 1 and rs[0].kind == "train",
        f"training {j.name}: expected one training result, found {len(rs)}",
    ):
        return
    wr = rs[0]
    start = ctx.problem.horizon.start
    a, b = month_index(start, j.window.start), month_index(start, j.window.deadline)
    target = (b - a + 1) * H
    predicted = ctx.train_wall.get(j.name, 0.0)
    chk.check(
        close(wr.target.get("wall_hours", -1.0), target, abs_=1e-6),
        f"training {j.name}: target {wr.target} != {target:,.0f} wall hours in the window",
    )
    chk.check(
        close(wr.predicted.get("wall_hours", -1.0), predicted, abs_=1e-3),
        f"training {j.name}: predicted {wr.predicted} != {predicted:,.2f} wall hours in the allocations",
    )
    meets = at_most(predicted, target, tol.HOURS)
    chk.check(
        meets and wr.meets_target,
        f"training {j.name}: does not meet its target (predicted {predicted:,.1f} h, window {target:,.0f} h)",
    )


def _check_serve_result(
    chk: Checker, ctx: VerifyContext, w: ServeWorkload, rs: list[WorkloadResult]
) -> None:
    if not chk.check(
        len(rs) == 1 and rs[0].kind == "serve",
        f"serving {w.name}: expected one serving result, found {len(rs)}",
    ):
        return
    wr = rs[0]
    used = sorted(ctx.serve_configs_used.get(w.name, set()))
    replicas = [c for g, tp in used if (c := ctx.capacity.get((w.name, g, tp))) is not None]
    # the slowest configuration in use is the service's p95
    ttft = max((c.p95_ttft_ms for c in replicas), default=math.inf)
    tpot = max((c.p95_tpot_ms for c in replicas), default=math.inf)
    target = {"p95_ttft_ms": w.slo.p95_ttft_ms, "p95_tpot_ms": w.slo.p95_tpot_ms}
    chk.check(
        all(close(wr.target.get(k, -1.0), v, abs_=1e-9) for k, v in target.items()),
        f"serving {w.name}: target {wr.target} != the SLO {target}",
    )
    if replicas:
        chk.check(
            close(wr.predicted.get("p95_ttft_ms", -1.0), ttft, abs_=1e-6)
            and close(wr.predicted.get("p95_tpot_ms", -1.0), tpot, abs_=1e-6),
            f"serving {w.name}: predicted {wr.predicted} != physics p95 TTFT {ttft:.2f} ms, TPOT {tpot:.2f} ms",
        )
    meets = ttft <= w.slo.p95_ttft_ms * (1 + 1e-9) and tpot <= w.slo.p95_tpot_ms * (1 + 1e-9)
    chk.check(
        meets and wr.meets_target,
        f"serving {w.name}: does not meet its SLO (p95 TTFT {ttft:.1f}/{w.slo.p95_ttft_ms:g} ms, "
        f"TPOT {tpot:.1f}/{w.slo.p95_tpot_ms:g} ms, meets_target={wr.meets_target})",
    )


Family = Callable[[VerifyContext], Findings]

# the order of the report: the plan's shape first, then what it buys and runs, then money
FAMILIES: tuple[Family, ...] = (
    check_shape,
    check_purchases,
    check_serving,
    check_training,
    check_caps,
    check_rentals,
    check_money,
    check_existing,
    check_workloads,
)
