"""Check families of what the workloads get: serving, training and the per-workload results.

:func:`check_serving` judges every serving allocation (workload, months, slice, replica rate by
the physics, offer) and the demand cover; :func:`check_training` each job's one configuration,
its progress, window and rentals; :func:`check_workloads` the ``workloads`` results (predicted
vs target). Each reads the :class:`~planner.verify.context.VerifyContext` only and never calls
another family.
"""

from __future__ import annotations

import math
from collections import defaultdict

from planner.base import tolerances as tol
from planner.base.tolerances import RPS, at_least, at_most, whole
from planner.inputs.problem import ServeWorkload, TrainJob, month_index
from planner.optimize.candidates import planned_wall_hours, rentable_on
from planner.physics.demand import HOURS_PER_MONTH
from planner.plan.data import WorkloadResult

from .context import (
    ConfigKey,
    ServeRow,
    ServeState,
    TrainRow,
    TrainState,
    VerifyContext,
)
from .findings import ABS, REL, Checker, Findings, bad_number, close
from .layouts import layout_workers

H = HOURS_PER_MONTH

# ---------------------------------------------------------------- serving


def check_serving(ctx: VerifyContext) -> Findings:
    """Serving: every allocation belongs to a serving workload of the problem, in its active
    months and a real slice, with a finite number of replicas; its demand and its replica rate
    are the ones the demand model and the physics give (the configuration meets the SLO); owned
    replicas are whole; rented ones use a trusted offer for that GPU whose instances hold the
    replica's tensor-parallel group, spot only if ``offers.spot_for_serving``. Demand is
    covered and at least one whole replica is up (``serve_floor``) in every (month, slice).

    Whether the replicas fit the owned fleet, the reservations and the offers' availability is
    :func:`~planner.verify.fleet.check_caps`'s.
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
    _, gpu, tp, lay = key
    cap = ctx.capacity[key]
    what = f"{gpu} x{tp}" + (f" ({lay})" if lay else "")
    if cap is None:
        chk.check(False, f"serving {w.name}: GPU {gpu!r} x{tp} is not allowed")
    else:
        chk.check(
            bool(cap.feasible),
            f"serving {w.name}: {what} cannot meet the SLO: {cap.reason}",
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
        rentable_on(layout_workers(al), o),
        f"{what}: a {al.gpus_per_replica}-GPU replica (workers of "
        f"{'/'.join(str(g) for g in layout_workers(al))} GPUs) on {o.id}, whose instances hold "
        f"{o.gpus_per_instance} GPUs (a tensor-parallel or expert group shares one instance, "
        "or whole instances of a multi-node fabric)",
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
    for (t, s, gpu, tp, lay), busy in state.type_busy.items():
        have = state.type_replicas.get((t, s, gpu, tp, lay), 0.0)
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
    _check_identity(chk, ctx, results)
    return chk.findings()


def _check_identity(
    chk: Checker, ctx: VerifyContext, results: dict[str, list[WorkloadResult]]
) -> None:
    """Each result names its workload's model and exactly the GPU types its allocations use
    (the workbook and page 1 read both)."""
    used: dict[str, set[str]] = defaultdict(set)
    for a in [*ctx.plan.serve_allocations, *ctx.plan.train_allocations]:
        used[a.workload].add(a.gpu)
    spec = {w.name: w.model for w in [*ctx.problem.workloads.train, *ctx.problem.workloads.serve]}
    for name, rs in results.items():
        if name not in spec or len(rs) != 1:
            continue  # reported above
        wr = rs[0]
        chk.check(
            wr.model == spec[name],
            f"workload {name}: model {wr.model!r} is not the problem's {spec[name]!r}",
        )
        chk.check(
            set(wr.gpu) == used[name],
            f"workload {name}: GPU types {sorted(wr.gpu)} are not those its allocations use "
            f"{sorted(used[name])}",
        )


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
    replicas = [c for k in used if (c := ctx.capacity.get((w.name, *k))) is not None]
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
