"""Independent verification of a Plan against its problem.

Recomputes, from the problem (and the catalogs and physics) and the Plan alone, every
constraint and every total, without the model builder or the solver. ``planner solve`` runs
it before writing anything; ``planner verify PROBLEM PLAN.json`` runs it on a saved plan.

What is checked (each failure is one line of the returned list):

* shape: status is optimal/feasible; months, hours per month and load slices are the
  problem's; every month named anywhere is a month of the horizon;
* purchases: allowed GPU, whole nodes (count = nodes x node size), licence (GeForce cards
  only where ``site.consumer_gpus_allowed``), unit price = catalog/override card + server
  share, totals; the ``fleet`` table agrees (bought, owned, reserved, busy and rented
  GPU-hours, power) with what the purchases, allocations and rentals imply;
* limits: capex budget, total budget, power cap in every month;
* serving: every allocation belongs to a workload of the problem, in its active months and a
  real slice; replica rate and demand recomputed by the physics and the demand model; owned
  replicas are whole and fit the owned fleet (with training) per month and slice; rented
  replicas use a trusted offer for that GPU whose instances hold the replica's tensor-parallel
  group, spot only if ``offers.spot_for_serving``, within the offer's availability cap and,
  for reserved offers, within the committed reservations; demand covered and at least one
  whole replica up (owned + rented, ``serve_floor``) in every (month, slice);
* training: one configuration, which fits in memory (physics); progress >= the hours the
  physics needs; wall hours inside the window (in total, per month and per slice); owned runs
  need ``k`` owned GPUs; rentals obey the instance-size rule (instances of >= min(k, 8)
  GPUs), the availability cap, spot rules (allowed, max share, restart overhead) and are not
  reserved offers;
* rentals: offer trusted, kind/GPU/provider/price are the offer's, ``usd = hours x price``,
  hours billed = hours the allocations use (whole instances for training); reservations:
  term, price, whole instances, inside the horizon, billed in full every month of the term;
* money: capex, power (idle + host all month, busy extra per busy GPU-hour, PUE, price),
  hosting, rental and total recomputed; ``totals``, every ``cash_flow`` month (and the
  cumulative column), the budgets echoed in totals, and the solver objective must agree;
* workloads: one result per workload; predicted vs target recomputed (training wall hours
  vs window hours, serving p95 TTFT/TPOT of the configurations used vs the SLO);
  ``meets_target`` must be true and match the recomputation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from planner.demand import HOURS_PER_MONTH, load_slices, mean_request_rate, peak_request_rate
from planner.physics.serve import replica_capacity
from planner.physics.train import estimate_train
from planner.plan import Plan
from planner.problem import Inputs, month_index

REL = 1e-6  # relative tolerance on money and demand
ABS = 1e-3


def _close(a: float, b: float, rel: float = 1e-6, abs_: float = 0.01) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def _bad_number(x: float) -> bool:
    return not isinstance(x, int | float) or not math.isfinite(x) or x < 0


@dataclass
class VerifyReport:
    """The violations found and the totals recomputed from the problem and the plan."""

    errors: list[str] = field(default_factory=list)
    capex_usd: float = 0.0
    power_usd: float = 0.0
    hosting_usd: float = 0.0
    rental_usd: float = 0.0
    total_usd: float = 0.0
    checks: int = 0  # number of individual checks made

    @property
    def ok(self) -> bool:
        return not self.errors


class _Errs(list):
    """A list of violations that also counts the checks made.

    Checks given a ``group`` report the first failure of the group once, with a count of
    the others (a stale rate repeats in every month and slice).
    """

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0
        self.groups: dict[object, list[int]] = {}  # group -> [index in self, repeats]

    def check(self, ok: bool, msg: str, group: object = None) -> bool:
        self.checks += 1
        if not ok:
            if group is None:
                self.append(msg)
            elif group in self.groups:
                self.groups[group][1] += 1
            else:
                self.groups[group] = [len(self), 0]
                self.append(msg)
        return ok

    def final(self) -> list[str]:
        out = list(self)
        for i, more in self.groups.values():
            if more:
                out[i] += f" (and {more} more like it)"
        return out


def verify_plan(inputs: Inputs, plan: Plan) -> list[str]:
    """Every violation of the problem's constraints by ``plan`` (empty list = valid)."""
    return verify_report(inputs, plan).errors


def verify_report(inputs: Inputs, plan: Plan) -> VerifyReport:  # noqa: C901 - one pass, many checks
    p = inputs.problem
    site = p.site
    errs = _Errs()
    rep = VerifyReport()
    months = p.month_labels()
    T = len(months)
    H = HOURS_PER_MONTH
    idx = {m: i for i, m in enumerate(months)}
    slices = load_slices(1.0)
    sl_hours = {s.name: s.hours_per_month for s in slices}

    def month_ok(label: str, what: str) -> int | None:
        t = idx.get(label)
        errs.check(
            t is not None,
            f"{what}: month {label!r} is not in the horizon {months[0]}..{months[-1]}",
        )
        return t

    errs.check(
        plan.status in ("optimal", "feasible"),
        f"plan status is {plan.status!r}, not optimal or feasible",
    )
    if not errs.check(
        plan.months == months,
        f"plan months {plan.months[:1]}..{plan.months[-1:]} differ from the problem's horizon "
        f"{months[0]}..{months[-1]}",
    ):
        rep.errors = errs.final()
        return rep
    errs.check(
        _close(plan.hours_per_month, H, abs_=1e-9),
        f"plan hours_per_month {plan.hours_per_month} != {H}",
    )
    errs.check(
        [(s.name, round(s.hours_per_month, 6)) for s in plan.slices]
        == [(s.name, round(s.hours_per_month, 6)) for s in slices],
        "plan slices differ from the planner's load slices",
    )

    # ---------------------------------------------------------------- purchases
    owned: dict[tuple[str, int], int] = defaultdict(int)
    bought: dict[tuple[str, int], int] = defaultdict(int)
    capex = 0.0
    capex_by_month: dict[int, float] = defaultdict(float)
    for pu in plan.purchases:
        what = f"purchase {pu.gpu} {pu.month}"
        t0 = month_ok(pu.month, what)
        gpu = inputs.gpus.get(pu.gpu)
        if not errs.check(
            gpu is not None, f"{what}: {pu.gpu!r} is not among the problem's allowed GPUs"
        ):
            continue
        if t0 is None:
            continue
        errs.check(
            pu.count > 0 and pu.count % gpu.node_gpus == 0,
            f"{what}: {pu.count} GPUs is not a whole number of {gpu.node_gpus}-GPU nodes",
        )
        errs.check(
            pu.nodes * gpu.node_gpus == pu.count,
            f"{what}: {pu.nodes} nodes x {gpu.node_gpus} != {pu.count} GPUs",
        )
        errs.check(
            not gpu.consumer or site.consumer_gpus_allowed,
            f"{what}: GeForce cards may not be deployed in a datacenter (site.consumer_gpus_allowed is false)",
        )
        errs.check(
            _close(pu.unit_usd, gpu.unit_capex_usd)
            and _close(pu.gpu_usd, gpu.purchase_usd.value)
            and _close(pu.overhead_usd, gpu.server_overhead_usd_per_gpu.value),
            f"{what}: unit price {pu.unit_usd:,.2f} (card {pu.gpu_usd:,.2f} + server {pu.overhead_usd:,.2f}) "
            f"!= problem's {gpu.unit_capex_usd:,.2f}",
        )
        cost = max(pu.count, 0) * gpu.unit_capex_usd
        errs.check(
            _close(cost, pu.total_usd),
            f"{what}: total {pu.total_usd:,.2f} != {pu.count} x {gpu.unit_capex_usd:,.2f}",
        )
        capex += cost
        capex_by_month[t0] += cost
        bought[(pu.gpu, t0)] += max(pu.count, 0)
        for t in range(t0, T):
            owned[(pu.gpu, t)] += max(pu.count, 0)
    errs.check(
        capex <= p.budget.capex_usd * (1 + REL) + ABS,
        f"capex {capex:,.0f} exceeds budget.capex_usd {p.budget.capex_usd:,.0f}",
    )
    if site.power_cap_kw is not None:
        for t in range(T):
            kw = sum(
                owned[(g, t)] * (gpu.tdp_w.value + gpu.host_w_per_gpu.value) * site.pue / 1000
                for g, gpu in inputs.gpus.items()
            )
            errs.check(
                kw <= site.power_cap_kw * (1 + REL) + ABS,
                f"{months[t]}: owned fleet draws {kw:,.1f} kW > site.power_cap_kw {site.power_cap_kw:,.1f} kW",
            )

    # ---------------------------------------------------------------- serving
    use: dict[tuple[str, int, str], float] = defaultdict(
        float
    )  # (gpu, t, slice) -> owned GPUs busy
    busy: dict[tuple[str, int], float] = defaultdict(float)  # (gpu, t) -> owned busy GPU-hours
    rent_expect: dict[tuple[str, str, int], float] = defaultdict(
        float
    )  # (offer, workload, t) -> GPU-h
    reserved_use: dict[tuple[str, int, str], float] = defaultdict(
        float
    )  # (offer, t, slice) -> GPUs
    capped_use: dict[tuple[str, int, str], float] = defaultdict(float)  # (offer, t, slice) -> GPUs
    serve_names = {w.name for w in p.workloads.serve}
    train_names = {j.name for j in p.workloads.train}
    for al in plan.serve_allocations:
        errs.check(
            al.workload in serve_names,
            f"serving allocation for {al.workload!r}, which is not a serving workload of the problem",
        )
    serve_used_caps: dict[str, set[tuple[str, int]]] = defaultdict(set)
    cap_cache: dict[tuple[str, str, int], object] = {}
    for w in p.workloads.serve:
        model = inputs.models[w.model]
        mean = mean_request_rate(w.traffic.daily_active_users, w.traffic.requests_per_user_per_day)
        a = month_index(p.horizon.start, w.start)
        b = T - 1 if w.end is None else min(T - 1, month_index(p.horizon.start, w.end))
        loads = {s.name: s.load for s in load_slices(w.traffic.utilization)}
        demand = {
            (t, s): peak_request_rate(
                mean, w.traffic.utilization, w.traffic.growth_per_month, t - a
            )
            * load
            for t in range(a, b + 1)
            for s, load in loads.items()
        }
        offered: dict[tuple[int, str], float] = defaultdict(float)
        replicas_up: dict[tuple[int, str], float] = defaultdict(float)
        for al in plan.serve_allocations:
            if al.workload != w.name:
                continue
            what = f"serving {w.name} {al.month} {al.slice} on {al.source}"
            t = month_ok(al.month, what)
            if t is None:
                continue
            if not errs.check(
                a <= t <= b,
                f"{what}: outside the workload's active months {months[a]}..{months[b]}",
            ):
                continue
            if not errs.check(al.slice in sl_hours, f"{what}: unknown load slice {al.slice!r}"):
                continue
            if not errs.check(
                not _bad_number(al.replicas),
                f"{what}: replicas {al.replicas} is not a finite number >= 0",
            ):
                continue
            errs.check(
                _close(al.demand_rps, demand[(t, al.slice)], abs_=1e-6),
                f"{what}: demand_rps {al.demand_rps:.4f} != recomputed {demand[(t, al.slice)]:.4f}",
                group=("demand_rps", w.name),
            )
            key = (w.name, al.gpu, al.gpus_per_replica)
            if key not in cap_cache:
                if al.gpu not in inputs.gpus or al.gpus_per_replica < 1:
                    errs.check(
                        False,
                        f"serving {w.name}: GPU {al.gpu!r} x{al.gpus_per_replica} is not allowed",
                    )
                    cap_cache[key] = None
                else:
                    cap = replica_capacity(
                        model,
                        inputs.gpus[al.gpu],
                        al.gpus_per_replica,
                        w.precision,
                        w.tokens.prompt,
                        w.tokens.output,
                        w.slo.p95_ttft_ms,
                        w.slo.p95_tpot_ms,
                    )
                    cap_cache[key] = cap
                    errs.check(
                        bool(cap.feasible),
                        f"serving {w.name}: {al.gpu} x{al.gpus_per_replica} cannot meet the SLO: {cap.reason}",
                    )
            cap = cap_cache[key]
            rate = cap.rate_rps if cap is not None and cap.feasible else 0.0  # type: ignore[attr-defined]
            errs.check(
                _close(rate, al.rate_rps_per_replica, rel=1e-6, abs_=1e-9),
                f"{what}: plan says {al.rate_rps_per_replica:.4f} req/s per {al.gpu} x{al.gpus_per_replica} "
                f"replica, physics says {rate:.4f}",
                group=("rate", key, al.rate_rps_per_replica),
            )
            if al.replicas > 0:
                serve_used_caps[w.name].add((al.gpu, al.gpus_per_replica))
            offered[(t, al.slice)] += al.replicas * min(rate, al.rate_rps_per_replica)
            replicas_up[(t, al.slice)] += al.replicas
            gpus = al.replicas * al.gpus_per_replica
            if al.source == "owned":
                errs.check(
                    abs(al.replicas - round(al.replicas)) <= 1e-6,
                    f"{what}: {al.replicas} owned replicas is not a whole number",
                )
                use[(al.gpu, t, al.slice)] += gpus
                busy[(al.gpu, t)] += gpus * sl_hours[al.slice]
                continue
            o = inputs.offers.get(al.source)
            if not errs.check(
                o is not None,
                f"{what}: offer {al.source!r} is not among the problem's trusted offers",
            ):
                continue
            errs.check(o.gpu == al.gpu, f"{what}: offer {o.id} rents {o.gpu}, not {al.gpu}")
            errs.check(
                o.gpus_per_instance >= al.gpus_per_replica,
                f"{what}: a {al.gpus_per_replica}-GPU replica on {o.id}, whose instances hold "
                f"{o.gpus_per_instance} GPUs (a tensor-parallel group must share one instance)",
            )
            errs.check(
                o.kind != "spot" or p.offers.spot_for_serving,
                f"{what}: spot offer {o.id} used but offers.spot_for_serving is false",
            )
            if o.kind == "reserved":
                reserved_use[(o.id, t, al.slice)] += gpus
            else:
                rent_expect[(o.id, w.name, t)] += gpus * sl_hours[al.slice]
            if o.max_gpus is not None:
                capped_use[(o.id, t, al.slice)] += gpus
        for (t, s), need in demand.items():
            have = offered[(t, s)]
            errs.check(
                have >= need * (1 - REL) - 1e-9,
                f"serving {w.name} {months[t]} {s}: capacity {have:.3f} req/s < demand {need:.3f} req/s",
                group=("demand", w.name),
            )
            errs.check(
                replicas_up[(t, s)] >= 1 - 1e-6,
                f"serving {w.name} {months[t]} {s}: {replicas_up[(t, s)]:.3f} replicas up; a live "
                "service keeps at least one whole replica up (serve_floor)",
                group=("floor", w.name),
            )

    # ---------------------------------------------------------------- training
    for al in plan.train_allocations:
        errs.check(
            al.workload in train_names,
            f"training allocation for {al.workload!r}, which is not a training job of the problem",
        )
    train_rent: dict[tuple[str, str, int], float] = defaultdict(float)
    train_wall: dict[str, float] = {}
    for j in p.workloads.train:
        allocs = [al for al in plan.train_allocations if al.workload == j.name]
        if not errs.check(bool(allocs), f"training {j.name}: no GPU time allocated"):
            continue
        configs = {(al.gpu, al.gpus) for al in allocs}
        errs.check(
            len(configs) == 1,
            f"training {j.name}: runs on several configurations {sorted(configs)}",
        )
        gpu_id, k = sorted(configs)[0]
        if not errs.check(
            gpu_id in inputs.gpus and k >= 1, f"training {j.name}: GPU {gpu_id!r} x{k} not allowed"
        ):
            continue
        est = estimate_train(
            inputs.models[j.model], inputs.gpus[gpu_id], k, j.tokens, j.method, seq_len=j.seq_len
        )
        errs.check(bool(est.fits), f"training {j.name}: {gpu_id} x{k} does not fit: {est.reason}")
        a = month_index(p.horizon.start, j.window.start)
        b = month_index(p.horizon.start, j.window.deadline)
        progress = wall = spot = 0.0
        per_month: dict[int, float] = defaultdict(float)
        for al in allocs:
            what = f"training {j.name} {al.month} on {al.source}"
            t = month_ok(al.month, what)
            if t is None:
                continue
            if not errs.check(
                a <= t <= b,
                f"{what}: runs outside its window {j.window.start}..{j.window.deadline}",
            ):
                continue
            if not errs.check(
                not _bad_number(al.wall_hours),
                f"{what}: wall_hours {al.wall_hours} is not a finite number >= 0",
            ):
                continue
            wall += al.wall_hours
            per_month[t] += al.wall_hours
            if al.source == "owned":
                progress += al.wall_hours
                errs.check(
                    _close(al.progress_hours, al.wall_hours, abs_=1e-6),
                    f"{what}: progress_hours != wall_hours on owned GPUs",
                )
                if not errs.check(
                    al.slice in sl_hours and al.wall_hours <= sl_hours[al.slice] * (1 + REL) + ABS,
                    f"{what}: {al.wall_hours:.1f} h in slice {al.slice} exceeds its hours",
                ):
                    continue
                errs.check(
                    owned[(gpu_id, t)] >= k,
                    f"{what}: needs {k} owned {gpu_id}, owns {owned[(gpu_id, t)]}",
                    group=("train_owned", j.name),
                )
                use[(gpu_id, t, al.slice)] += k * al.wall_hours / sl_hours[al.slice]
                busy[(gpu_id, t)] += k * al.wall_hours
                continue
            o = inputs.offers.get(al.source)
            if not errs.check(
                o is not None, f"{what}: offer {al.source!r} is not trusted by the problem"
            ):
                continue
            errs.check(o.gpu == gpu_id, f"{what}: offer {o.id} rents {o.gpu}, not {gpu_id}")
            errs.check(o.kind != "reserved", f"{what}: reserved offers are not used for training")
            paid = -(-k // o.gpus_per_instance) * o.gpus_per_instance
            errs.check(
                o.gpus_per_instance >= min(k, 8),
                f"{what}: {k} GPUs on {o.id}, whose instances hold {o.gpus_per_instance} GPUs "
                f"(a training job needs instances of at least min(k, 8) GPUs)",
            )
            errs.check(
                o.max_gpus is None or paid <= o.max_gpus,
                f"{what}: needs {paid} GPUs from {o.id}, which offers at most {o.max_gpus}",
            )
            if o.kind == "spot":
                errs.check(
                    j.spot.allowed and j.spot.max_share > 0,
                    f"{what}: spot offer used but the job's spot.allowed is false or max_share is 0",
                )
                prog = al.wall_hours / (1 + j.spot.overhead)
                spot += prog
            else:
                prog = al.wall_hours
            errs.check(
                _close(al.progress_hours, prog, abs_=1e-6),
                f"{what}: progress_hours {al.progress_hours:,.2f} != {prog:,.2f} recomputed",
            )
            progress += prog
            train_rent[(o.id, j.name, t)] += al.wall_hours * paid
        train_wall[j.name] = wall
        errs.check(
            progress >= est.wall_hours * (1 - REL) - ABS,
            f"training {j.name}: {progress:,.1f} h of progress < {est.wall_hours:,.1f} h needed on {gpu_id} x{k}",
        )
        errs.check(
            spot <= j.spot.max_share * est.wall_hours * (1 + REL) + ABS,
            f"training {j.name}: {spot:,.1f} h of progress on spot > spot.max_share {j.spot.max_share:.0%} "
            f"of {est.wall_hours:,.1f} h",
        )
        window_h = (b - a + 1) * H
        errs.check(
            wall <= window_h * (1 + REL) + ABS,
            f"training {j.name}: {wall:,.1f} wall hours > {window_h:,.0f} h in the window",
        )
        for t, h in sorted(per_month.items()):
            errs.check(
                h <= H * (1 + REL) + ABS,
                f"training {j.name} {months[t]}: {h:,.1f} wall hours in a {H:.0f}-hour month",
            )

    for (g, t, s), gpus in sorted(use.items()):
        errs.check(
            gpus <= owned[(g, t)] * (1 + REL) + ABS,
            f"{months[t]} {s}: {gpus:.2f} owned {g} in use > {owned[(g, t)]} owned",
            group=("use", g),
        )

    # ---------------------------------------------------------------- reservations and caps
    res_active: dict[tuple[str, int], float] = defaultdict(float)
    reserved_expect: dict[tuple[str, int], float] = defaultdict(float)  # (offer, t) -> GPU-hours
    reserved_usd = 0.0
    for rv in plan.reservations:
        what = f"reservation {rv.offer} from {rv.start_month}"
        o = inputs.offers.get(rv.offer)
        if not errs.check(
            o is not None and o.kind == "reserved", f"{what}: not a reserved offer of the problem"
        ):
            continue
        t0 = month_ok(rv.start_month, what)
        if t0 is None:
            continue
        L = o.term_months or 1
        errs.check(rv.term_months == L, f"{what}: term {rv.term_months} months != the offer's {L}")
        errs.check(
            rv.gpu == o.gpu and rv.provider == o.provider,
            f"{what}: GPU/provider differ from the offer's",
        )
        errs.check(
            rv.gpus > 0 and rv.gpus % o.gpus_per_instance == 0,
            f"{what}: {rv.gpus} GPUs is not a whole number of {o.gpus_per_instance}-GPU instances",
        )
        errs.check(t0 + L <= T, f"{what}: the {L}-month term runs past the horizon")
        errs.check(
            _close(rv.usd_per_gpu_hour, o.usd_per_gpu_hour, abs_=1e-9),
            f"{what}: rate {rv.usd_per_gpu_hour} != offer price {o.usd_per_gpu_hour}",
        )
        usd = max(rv.gpus, 0) * L * H * o.usd_per_gpu_hour
        errs.check(
            _close(rv.hours, L * H) and _close(rv.usd, usd),
            f"{what}: {rv.usd:,.2f} for {rv.hours:,.0f} h != {rv.gpus} GPUs x {L * H:,.0f} h x {o.usd_per_gpu_hour}",
        )
        reserved_usd += usd
        for t in range(t0, min(T, t0 + L)):
            res_active[(o.id, t)] += max(rv.gpus, 0)
            reserved_expect[(o.id, t)] += max(rv.gpus, 0) * H
    for (oid, t, s), gpus in sorted(reserved_use.items()):
        errs.check(
            gpus <= res_active[(oid, t)] * (1 + REL) + ABS,
            f"{months[t]} {s}: {gpus:.1f} GPUs used on reserved {oid} > {res_active[(oid, t)]:.0f} committed",
        )
    for (oid, t, s), gpus in sorted(capped_use.items()):
        cap = inputs.offers[oid].max_gpus
        errs.check(
            cap is None or gpus <= cap * (1 + REL) + ABS,
            f"{months[t]} {s}: {gpus:.1f} GPUs rented from {oid} > {cap} available",
        )

    # ---------------------------------------------------------------- rentals
    rental = 0.0
    rental_by_month: dict[int, float] = defaultdict(float)
    rented_by_gpu: dict[tuple[str, int], float] = defaultdict(float)
    seen: dict[tuple[str, str, int], float] = defaultdict(float)
    reserved_seen: dict[tuple[str, int], float] = defaultdict(float)
    for r in plan.rentals:
        what = f"rental {r.offer} {r.month} for {r.workload}"
        o = inputs.offers.get(r.offer)
        if not errs.check(o is not None, f"{what}: unknown or untrusted offer {r.offer!r}"):
            continue
        t = month_ok(r.month, what)
        if t is None:
            continue
        if not errs.check(
            not _bad_number(r.gpu_hours),
            f"{what}: gpu_hours {r.gpu_hours} is not a finite number >= 0",
        ):
            continue
        errs.check(
            r.kind == o.kind and r.gpu == o.gpu and r.provider == o.provider,
            f"{what}: kind/GPU/provider ({r.kind}, {r.gpu}, {r.provider}) differ from the offer's "
            f"({o.kind}, {o.gpu}, {o.provider})",
        )
        errs.check(
            _close(r.usd_per_gpu_hour, o.usd_per_gpu_hour, abs_=1e-9),
            f"{what}: rate {r.usd_per_gpu_hour} != offer price {o.usd_per_gpu_hour}",
        )
        usd = r.gpu_hours * o.usd_per_gpu_hour
        errs.check(
            _close(usd, r.usd),
            f"{what}: {r.usd:,.2f} != {r.gpu_hours:,.2f} h x {o.usd_per_gpu_hour}",
        )
        rental += usd
        rental_by_month[t] += usd
        rented_by_gpu[(o.gpu, t)] += r.gpu_hours
        if o.kind == "reserved":
            reserved_seen[(o.id, t)] += r.gpu_hours
        else:
            seen[(r.offer, r.workload, t)] += r.gpu_hours
    expect = defaultdict(float, rent_expect)
    for k2, v in train_rent.items():
        expect[k2] += v
    for key in sorted(set(expect) | set(seen)):
        oid, w, t = key
        errs.check(
            _close(expect[key], seen[key], rel=1e-6, abs_=1e-3),
            f"rental {oid} for {w} in {months[t]}: {seen[key]:,.2f} GPU-h billed, allocations use {expect[key]:,.2f}",
        )
    for key in sorted(set(reserved_expect) | set(reserved_seen)):
        oid, t = key
        errs.check(
            _close(reserved_expect[key], reserved_seen[key], rel=1e-6, abs_=1e-3),
            f"reserved {oid} in {months[t]}: {reserved_seen[key]:,.2f} GPU-h billed, "
            f"the reservations commit {reserved_expect[key]:,.2f}",
        )

    # ---------------------------------------------------------------- power, hosting, totals
    e = site.power_usd_per_kwh * site.pue / 1000
    power = hosting = 0.0
    opex_by_month: dict[int, float] = defaultdict(float)
    reserved_gpus: dict[tuple[str, int], float] = defaultdict(float)
    for (oid, t), gpus in res_active.items():
        reserved_gpus[(inputs.offers[oid].gpu, t)] += gpus
    fleet = {}
    for fm in plan.fleet:
        t = month_ok(fm.month, f"fleet {fm.gpu}")
        errs.check(
            fm.gpu in inputs.gpus, f"fleet row for {fm.gpu!r}, which the problem does not allow"
        )
        if t is not None:
            errs.check((fm.gpu, t) not in fleet, f"fleet {fm.gpu} {fm.month}: listed twice")
            fleet[(fm.gpu, t)] = fm
    for g, gpu in inputs.gpus.items():
        for t in range(T):
            own = owned[(g, t)]
            pw = e * (
                own * H * (gpu.idle_w.value + gpu.host_w_per_gpu.value)
                + busy[(g, t)] * (gpu.tdp_w.value - gpu.idle_w.value)
            )
            hs = own * site.hosting_usd_per_gpu_month
            power += pw
            hosting += hs
            opex_by_month[t] += pw + hs
            fm = fleet.get((g, t))
            active = own or rented_by_gpu[(g, t)] > ABS or reserved_gpus[(g, t)]
            what = f"fleet {g} {months[t]}"
            if fm is None:
                errs.check(
                    not active,
                    f"{what}: missing, but the plan owns {own}, rents {rented_by_gpu[(g, t)]:,.0f} GPU-h",
                )
                continue
            errs.check(
                fm.owned == own and fm.bought == bought[(g, t)],
                f"{what}: says bought {fm.bought}, owned {fm.owned}; the purchases give {bought[(g, t)]}, {own}",
                group=("fleet_owned", g),
            )
            errs.check(
                fm.reserved == reserved_gpus[(g, t)],
                f"{what}: says {fm.reserved} reserved GPUs; the reservations give {reserved_gpus[(g, t)]:.0f}",
            )
            errs.check(
                _close(fm.owned_busy_gpu_hours, busy[(g, t)], abs_=0.01),
                f"{what}: says {fm.owned_busy_gpu_hours:,.1f} busy GPU-h; the allocations give {busy[(g, t)]:,.1f}",
                group=("fleet_busy", g),
            )
            errs.check(
                _close(fm.rented_gpu_hours, rented_by_gpu[(g, t)], abs_=0.01),
                f"{what}: says {fm.rented_gpu_hours:,.1f} rented GPU-h; the rentals give {rented_by_gpu[(g, t)]:,.1f}",
            )
            kw = own * (gpu.tdp_w.value + gpu.host_w_per_gpu.value) * site.pue / 1000
            errs.check(
                _close(fm.power_kw, kw, abs_=1e-3),
                f"{what}: says {fm.power_kw:,.2f} kW; recomputed {kw:,.2f}",
                group=("fleet_kw", g),
            )
    total = capex + power + hosting + rental
    tt = plan.totals
    for name, mine, theirs in (
        ("capex", capex, tt.capex_usd),
        ("power", power, tt.power_usd),
        ("hosting", hosting, tt.hosting_usd),
        ("rental", rental, tt.rental_usd),
        ("total", total, tt.total_usd),
        ("reserved", reserved_usd, tt.reserved_usd),
    ):
        errs.check(
            _close(mine, theirs, rel=1e-6, abs_=0.5),
            f"totals.{name}_usd = {theirs:,.2f} but recomputed {mine:,.2f}",
        )
    errs.check(
        tt.capex_budget_usd is None or _close(tt.capex_budget_usd, p.budget.capex_usd),
        f"totals.capex_budget_usd {tt.capex_budget_usd} != the problem's budget.capex_usd {p.budget.capex_usd}",
    )
    errs.check(
        tt.total_budget_usd == p.budget.total_usd
        or (
            tt.total_budget_usd is not None
            and p.budget.total_usd is not None
            and _close(tt.total_budget_usd, p.budget.total_usd)
        ),
        f"totals.total_budget_usd {tt.total_budget_usd} != the problem's budget.total_usd {p.budget.total_usd}",
    )
    if plan.objective_usd is not None:
        errs.check(
            _close(total, plan.objective_usd, rel=1e-5, abs_=1.0),
            f"solver objective {plan.objective_usd:,.2f} != recomputed total {total:,.2f}",
        )
    if p.budget.total_usd is not None:
        errs.check(
            total <= p.budget.total_usd * (1 + REL) + ABS,
            f"total cost {total:,.0f} exceeds budget.total_usd {p.budget.total_usd:,.0f}",
        )
    if errs.check(
        [mc.month for mc in plan.cash_flow] == months,
        "cash_flow does not list every month of the horizon once, in order",
    ):
        running = 0.0
        for t, mc in enumerate(plan.cash_flow):
            parts = (
                ("capex", capex_by_month[t], mc.capex_usd),
                ("rental", rental_by_month[t], mc.rental_usd),
                ("power+hosting", opex_by_month[t], mc.power_usd + mc.hosting_usd),
            )
            for name, mine, theirs in parts:
                errs.check(
                    _close(mine, theirs, rel=1e-6, abs_=0.5),
                    f"cash flow {mc.month}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                    group=("cash", name),
                )
            mine = capex_by_month[t] + opex_by_month[t] + rental_by_month[t]
            running += mine
            errs.check(
                _close(mine, mc.total_usd, rel=1e-6, abs_=0.5),
                f"cash flow {mc.month}: total {mc.total_usd:,.2f} but recomputed {mine:,.2f}",
                group=("cash", "total"),
            )
            errs.check(
                _close(running, mc.cumulative_usd, rel=1e-6, abs_=0.5),
                f"cash flow {mc.month}: cumulative {mc.cumulative_usd:,.2f} but recomputed {running:,.2f}",
                group=("cash", "cumulative"),
            )

    # ---------------------------------------------------------------- workloads: predicted vs target
    results: dict[str, list] = defaultdict(list)
    for wr in plan.workloads:
        results[wr.name].append(wr)
    for name in results:
        errs.check(
            name in serve_names | train_names,
            f"workload result {name!r} is not a workload of the problem",
        )
    for j in p.workloads.train:
        rs = results.get(j.name, [])
        if not errs.check(
            len(rs) == 1 and rs[0].kind == "train",
            f"training {j.name}: expected one training result, found {len(rs)}",
        ):
            continue
        wr = rs[0]
        a = month_index(p.horizon.start, j.window.start)
        b = month_index(p.horizon.start, j.window.deadline)
        target = (b - a + 1) * H
        predicted = train_wall.get(j.name, 0.0)
        errs.check(
            _close(wr.target.get("wall_hours", -1.0), target, abs_=1e-6),
            f"training {j.name}: target {wr.target} != {target:,.0f} wall hours in the window",
        )
        errs.check(
            _close(wr.predicted.get("wall_hours", -1.0), predicted, abs_=1e-3),
            f"training {j.name}: predicted {wr.predicted} != {predicted:,.2f} wall hours in the allocations",
        )
        meets = predicted <= target + 1e-6
        errs.check(
            meets and wr.meets_target,
            f"training {j.name}: does not meet its target (predicted {predicted:,.1f} h, window {target:,.0f} h)",
        )
    for w in p.workloads.serve:
        rs = results.get(w.name, [])
        if not errs.check(
            len(rs) == 1 and rs[0].kind == "serve",
            f"serving {w.name}: expected one serving result, found {len(rs)}",
        ):
            continue
        wr = rs[0]
        caps = [cap_cache.get((w.name, g, tp)) for g, tp in sorted(serve_used_caps[w.name])]
        caps = [c for c in caps if c is not None]
        ttft = max((c.p95_ttft_ms for c in caps), default=math.inf)  # type: ignore[attr-defined]
        tpot = max((c.p95_tpot_ms for c in caps), default=math.inf)  # type: ignore[attr-defined]
        target = {"p95_ttft_ms": w.slo.p95_ttft_ms, "p95_tpot_ms": w.slo.p95_tpot_ms}
        errs.check(
            all(_close(wr.target.get(k, -1.0), v, abs_=1e-9) for k, v in target.items()),
            f"serving {w.name}: target {wr.target} != the SLO {target}",
        )
        if caps:
            errs.check(
                _close(wr.predicted.get("p95_ttft_ms", -1.0), ttft, abs_=1e-6)
                and _close(wr.predicted.get("p95_tpot_ms", -1.0), tpot, abs_=1e-6),
                f"serving {w.name}: predicted {wr.predicted} != physics p95 TTFT {ttft:.2f} ms, TPOT {tpot:.2f} ms",
            )
        meets = ttft <= w.slo.p95_ttft_ms * (1 + 1e-9) and tpot <= w.slo.p95_tpot_ms * (1 + 1e-9)
        errs.check(
            meets and wr.meets_target,
            f"serving {w.name}: does not meet its SLO (p95 TTFT {ttft:.1f}/{w.slo.p95_ttft_ms:g} ms, "
            f"TPOT {tpot:.1f}/{w.slo.p95_tpot_ms:g} ms, meets_target={wr.meets_target})",
        )

    rep.errors = errs.final()
    rep.checks = errs.checks
    rep.capex_usd, rep.power_usd, rep.hosting_usd, rep.rental_usd, rep.total_usd = (
        capex,
        power,
        hosting,
        rental,
        total,
    )
    return rep
