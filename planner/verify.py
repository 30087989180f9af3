"""Independent verification of a Plan against its problem.

Recomputes, from the problem (and the catalogs and physics) and the Plan alone, every
constraint and the total cost, without the model builder or the solver: demand covered per
workload, month and slice; owned capacity; training progress within the window; licence;
node units; budgets; power cap; rental prices and amounts; and every total. Returns a list
of violations (empty = the plan is valid). ``planner solve`` runs it before writing anything.
"""

from __future__ import annotations

from collections import defaultdict

from planner.demand import HOURS_PER_MONTH, load_slices, mean_request_rate, peak_request_rate
from planner.physics.serve import replica_capacity
from planner.physics.train import estimate_train
from planner.plan import Plan
from planner.problem import Inputs, month_index

REL = 1e-6  # relative tolerance on money and demand
ABS = 1e-3


def _close(a: float, b: float, rel: float = 1e-6, abs_: float = 0.01) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def verify_plan(inputs: Inputs, plan: Plan) -> list[str]:
    p = inputs.problem
    site = p.site
    errs: list[str] = []
    months = p.month_labels()
    if plan.months != months:
        return [f"plan months {plan.months[:1]}..{plan.months[-1:]} differ from the problem's horizon"]
    T = len(months)
    H = HOURS_PER_MONTH
    idx = {m: i for i, m in enumerate(months)}
    slices = load_slices(1.0)
    sl_hours = {s.name: s.hours_per_month for s in slices}
    if [s.name for s in plan.slices] != [s.name for s in slices]:
        errs.append("plan slices differ from the planner's load slices")

    # Purchases: allowed GPUs, node units, licence, capex.
    owned = defaultdict(int)
    capex = 0.0
    capex_by_month = defaultdict(float)
    for pu in plan.purchases:
        gpu = inputs.gpus.get(pu.gpu)
        if gpu is None:
            errs.append(f"purchase of {pu.gpu!r}, which the problem does not allow")
            continue
        if pu.count <= 0 or pu.count % gpu.node_gpus:
            errs.append(f"purchase {pu.gpu} {pu.month}: {pu.count} GPUs is not a whole number of {gpu.node_gpus}-GPU nodes")
        if gpu.consumer and not site.consumer_gpus_allowed:
            errs.append(f"purchase {pu.gpu} {pu.month}: GeForce cards may not be deployed in a datacenter (site.consumer_gpus_allowed is false)")
        cost = pu.count * gpu.unit_capex_usd
        if not _close(cost, pu.total_usd):
            errs.append(f"purchase {pu.gpu} {pu.month}: total {pu.total_usd:,.2f} != {pu.count} x {gpu.unit_capex_usd:,.2f}")
        capex += cost
        capex_by_month[idx[pu.month]] += cost
        for t in range(idx[pu.month], T):
            owned[(pu.gpu, t)] += pu.count
    if capex > p.budget.capex_usd * (1 + REL) + ABS:
        errs.append(f"capex {capex:,.0f} exceeds budget.capex_usd {p.budget.capex_usd:,.0f}")
    if site.power_cap_kw is not None:
        for t in range(T):
            kw = sum(
                owned[(g, t)] * (gpu.tdp_w.value + gpu.host_w_per_gpu.value) * site.pue / 1000
                for g, gpu in inputs.gpus.items()
            )
            if kw > site.power_cap_kw * (1 + REL) + ABS:
                errs.append(f"{months[t]}: owned fleet draws {kw:,.1f} kW > power cap {site.power_cap_kw:,.1f} kW")

    # Serving: demand per (workload, month, slice), owned capacity per (gpu, month, slice).
    use = defaultdict(float)  # (gpu, t, slice) -> owned GPUs busy
    busy = defaultdict(float)  # (gpu, t) -> owned busy GPU-hours
    rent_expect = defaultdict(float)  # (offer, workload, t) -> GPU-hours
    reserved_use = defaultdict(float)  # (offer, t, slice) -> GPUs
    offered = defaultdict(float)
    cap_cache: dict[tuple[str, str, int], float] = {}
    for w in p.workloads.serve:
        model = inputs.models[w.model]
        mean = mean_request_rate(w.traffic.daily_active_users, w.traffic.requests_per_user_per_day)
        a = month_index(p.horizon.start, w.start)
        b = T - 1 if w.end is None else min(T - 1, month_index(p.horizon.start, w.end))
        loads = load_slices(w.traffic.utilization)
        for al in plan.serve_allocations:
            if al.workload != w.name:
                continue
            t = idx.get(al.month)
            if t is None or not a <= t <= b:
                errs.append(f"serving {w.name}: allocation in {al.month}, outside its active months")
                continue
            key = (w.name, al.gpu, al.gpus_per_replica)
            if key not in cap_cache:
                if al.gpu not in inputs.gpus:
                    errs.append(f"serving {w.name}: GPU {al.gpu!r} not allowed")
                    cap_cache[key] = 0.0
                else:
                    cap = replica_capacity(
                        model, inputs.gpus[al.gpu], al.gpus_per_replica, w.precision,
                        w.tokens.prompt, w.tokens.output, w.slo.p95_ttft_ms, w.slo.p95_tpot_ms,
                    )
                    cap_cache[key] = cap.rate_rps if cap.feasible else 0.0
                    if not cap.feasible:
                        errs.append(f"serving {w.name}: {al.gpu} x{al.gpus_per_replica} cannot meet the SLO: {cap.reason}")
            rate = cap_cache[key]
            if not _close(rate, al.rate_rps_per_replica, rel=1e-6, abs_=1e-9):
                errs.append(f"serving {w.name}: plan says {al.rate_rps_per_replica:.4f} req/s per {al.gpu} replica, physics says {rate:.4f}")
            offered[(w.name, t, al.slice)] += al.replicas * min(rate, al.rate_rps_per_replica)
            gpus = al.replicas * al.gpus_per_replica
            if al.source == "owned":
                if abs(al.replicas - round(al.replicas)) > 1e-6:
                    errs.append(f"serving {w.name} {al.month}: {al.replicas} owned replicas is not a whole number")
                use[(al.gpu, t, al.slice)] += gpus
                busy[(al.gpu, t)] += gpus * sl_hours[al.slice]
            else:
                o = inputs.offers.get(al.source)
                if o is None:
                    errs.append(f"serving {w.name}: offer {al.source!r} is not among the problem's trusted offers")
                    continue
                if o.gpu != al.gpu:
                    errs.append(f"serving {w.name}: offer {o.id} rents {o.gpu}, not {al.gpu}")
                if o.gpus_per_instance < al.gpus_per_replica:
                    errs.append(f"serving {w.name}: a {al.gpus_per_replica}-GPU replica on {o.id}, whose instances hold {o.gpus_per_instance} GPUs")
                if o.kind == "spot" and not p.offers.spot_for_serving:
                    errs.append(f"serving {w.name}: spot offer {o.id} used but offers.spot_for_serving is false")
                if o.kind == "reserved":
                    reserved_use[(o.id, t, al.slice)] += gpus
                else:
                    rent_expect[(o.id, w.name, t)] += gpus * sl_hours[al.slice]
                if o.max_gpus is not None:
                    reserved_use[("cap", o.id, t, al.slice)] += gpus  # type: ignore[index]
        for t in range(a, b + 1):
            peak = peak_request_rate(mean, w.traffic.utilization, w.traffic.growth_per_month, t - a)
            for s in loads:
                need = peak * s.load
                have = offered[(w.name, t, s.name)]
                if have < need * (1 - REL) - 1e-9:
                    errs.append(f"serving {w.name} {months[t]} {s.name}: capacity {have:.3f} req/s < demand {need:.3f} req/s")

    # Training: the chosen configuration finishes inside its window.
    train_rent = defaultdict(float)
    for j in p.workloads.train:
        allocs = [al for al in plan.train_allocations if al.workload == j.name]
        if not allocs:
            errs.append(f"training {j.name}: no GPU time allocated")
            continue
        configs = {(al.gpu, al.gpus) for al in allocs}
        if len(configs) > 1:
            errs.append(f"training {j.name}: runs on several configurations {sorted(configs)}")
        gpu_id, k = next(iter(configs))
        if gpu_id not in inputs.gpus:
            errs.append(f"training {j.name}: GPU {gpu_id!r} not allowed")
            continue
        est = estimate_train(inputs.models[j.model], inputs.gpus[gpu_id], k, j.tokens, j.method, seq_len=j.seq_len)
        if not est.fits:
            errs.append(f"training {j.name}: {gpu_id} x{k} does not fit: {est.reason}")
        a = month_index(p.horizon.start, j.window.start)
        b = month_index(p.horizon.start, j.window.deadline)
        progress = wall = spot = 0.0
        per_month = defaultdict(float)
        for al in allocs:
            t = idx.get(al.month)
            if t is None or not a <= t <= b:
                errs.append(f"training {j.name}: runs in {al.month}, outside its window {j.window.start}..{j.window.deadline}")
                continue
            wall += al.wall_hours
            per_month[t] += al.wall_hours
            if al.source == "owned":
                progress += al.wall_hours
                if al.slice is None or al.wall_hours > sl_hours.get(al.slice, 0) * (1 + REL) + ABS:
                    errs.append(f"training {j.name} {al.month}: {al.wall_hours:.1f} h in slice {al.slice} exceeds its hours")
                    continue
                if owned[(gpu_id, t)] < k:
                    errs.append(f"training {j.name} {al.month}: needs {k} owned {gpu_id}, owns {owned[(gpu_id, t)]}")
                use[(gpu_id, t, al.slice)] += k * al.wall_hours / sl_hours[al.slice]
                busy[(gpu_id, t)] += k * al.wall_hours
            else:
                o = inputs.offers.get(al.source)
                if o is None:
                    errs.append(f"training {j.name}: offer {al.source!r} is not trusted by the problem")
                    continue
                if o.gpu != gpu_id:
                    errs.append(f"training {j.name}: offer {o.id} rents {o.gpu}, not {gpu_id}")
                paid = -(-k // o.gpus_per_instance) * o.gpus_per_instance
                if o.gpus_per_instance < min(k, 8):
                    errs.append(f"training {j.name}: {k} GPUs on {o.id}, whose instances hold {o.gpus_per_instance} GPUs (no fast link between them)")
                if o.max_gpus is not None and paid > o.max_gpus:
                    errs.append(f"training {j.name}: needs {paid} GPUs from {o.id}, which offers {o.max_gpus}")
                if o.kind == "spot":
                    if not j.spot.allowed:
                        errs.append(f"training {j.name}: spot offer used but spot.allowed is false")
                    prog = al.wall_hours / (1 + j.spot.overhead)
                    spot += prog
                else:
                    prog = al.wall_hours
                progress += prog
                train_rent[(o.id, j.name, t)] += al.wall_hours * paid
        if progress < est.wall_hours * (1 - REL) - ABS:
            errs.append(f"training {j.name}: {progress:,.1f} h of progress < {est.wall_hours:,.1f} h needed on {gpu_id} x{k}")
        if spot > j.spot.max_share * est.wall_hours * (1 + REL) + ABS:
            errs.append(f"training {j.name}: {spot:,.1f} h on spot > share {j.spot.max_share:.0%}")
        window_h = (b - a + 1) * H
        if wall > window_h * (1 + REL) + ABS:
            errs.append(f"training {j.name}: {wall:,.1f} wall hours > {window_h:,.0f} h in the window")
        for t, h in per_month.items():
            if h > H * (1 + REL) + ABS:
                errs.append(f"training {j.name} {months[t]}: {h:,.1f} wall hours in a {H:.0f}-hour month")

    for (g, t, s), gpus in use.items():
        if gpus > owned[(g, t)] * (1 + REL) + ABS:
            errs.append(f"{months[t]} {s}: {gpus:.2f} owned {g} in use > {owned[(g, t)]} owned")

    # Reservations and availability caps.
    res_active = defaultdict(float)
    for rv in plan.reservations:
        o = inputs.offers.get(rv.offer)
        if o is None or o.kind != "reserved":
            errs.append(f"reservation {rv.offer!r} is not a reserved offer of the problem")
            continue
        t0 = idx[rv.start_month]
        if t0 + rv.term_months > T:
            errs.append(f"reservation {rv.offer} from {rv.start_month} runs past the horizon")
        for t in range(t0, min(T, t0 + rv.term_months)):
            res_active[(o.id, t)] += rv.gpus
    for key, gpus in reserved_use.items():
        if key[0] == "cap":
            _, oid, t, s = key  # type: ignore[misc]
            cap = inputs.offers[oid].max_gpus
            if cap is not None and gpus > cap * (1 + REL) + ABS:
                errs.append(f"{months[t]} {s}: {gpus:.1f} GPUs rented from {oid} > {cap} available")
        else:
            oid, t, s = key
            if gpus > res_active[(oid, t)] * (1 + REL) + ABS:
                errs.append(f"{months[t]} {s}: {gpus:.1f} GPUs used on reserved {oid} > {res_active[(oid, t)]} committed")

    # Rentals: prices from the problem's offers; amounts match the allocations.
    rental = 0.0
    rental_by_month = defaultdict(float)
    seen = defaultdict(float)
    for r in plan.rentals:
        o = inputs.offers.get(r.offer)
        if o is None:
            errs.append(f"rental from unknown offer {r.offer!r}")
            continue
        if not _close(r.usd_per_gpu_hour, o.usd_per_gpu_hour, abs_=1e-9):
            errs.append(f"rental {r.offer}: rate {r.usd_per_gpu_hour} != offer price {o.usd_per_gpu_hour}")
        usd = r.gpu_hours * o.usd_per_gpu_hour
        if not _close(usd, r.usd):
            errs.append(f"rental {r.offer} {r.month}: {r.usd:,.2f} != {r.gpu_hours:,.2f} h x {o.usd_per_gpu_hour}")
        rental += usd
        rental_by_month[idx[r.month]] += usd
        if r.kind != "reserved":
            seen[(r.offer, r.workload, idx[r.month])] += r.gpu_hours
    expect = defaultdict(float, rent_expect)
    for k2, v in train_rent.items():
        expect[k2] += v
    for key in set(expect) | set(seen):
        if not _close(expect[key], seen[key], rel=1e-6, abs_=1e-3):
            oid, w, t = key
            errs.append(f"rental {oid} for {w} in {months[t]}: {seen[key]:,.2f} GPU-h billed, allocations use {expect[key]:,.2f}")
    for rv in plan.reservations:
        billed = sum(r.gpu_hours for r in plan.rentals if r.offer == rv.offer and r.kind == "reserved")
        if billed < rv.gpus * H * min(rv.term_months, T - idx[rv.start_month]) * (1 - REL) - ABS:
            errs.append(f"reservation {rv.offer}: the term is not billed in full")

    # Power and hosting, recomputed from owned GPUs and busy hours.
    e = site.power_usd_per_kwh * site.pue / 1000
    power = hosting = 0.0
    opex_by_month = defaultdict(float)
    for g, gpu in inputs.gpus.items():
        for t in range(T):
            own = owned[(g, t)]
            pw = e * (own * H * (gpu.idle_w.value + gpu.host_w_per_gpu.value) + busy[(g, t)] * (gpu.tdp_w.value - gpu.idle_w.value))
            hs = own * site.hosting_usd_per_gpu_month
            power += pw
            hosting += hs
            opex_by_month[t] += pw + hs
    total = capex + power + hosting + rental
    tt = plan.totals
    for name, mine, theirs in (
        ("capex", capex, tt.capex_usd), ("power", power, tt.power_usd),
        ("hosting", hosting, tt.hosting_usd), ("rental", rental, tt.rental_usd),
        ("total", total, tt.total_usd),
    ):
        if not _close(mine, theirs, rel=1e-6, abs_=0.5):
            errs.append(f"totals.{name}_usd = {theirs:,.2f} but recomputed {mine:,.2f}")
    if plan.objective_usd is not None and not _close(total, plan.objective_usd, rel=1e-5, abs_=1.0):
        errs.append(f"solver objective {plan.objective_usd:,.2f} != recomputed total {total:,.2f}")
    if p.budget.total_usd is not None and total > p.budget.total_usd * (1 + REL) + ABS:
        errs.append(f"total cost {total:,.0f} exceeds budget.total_usd {p.budget.total_usd:,.0f}")
    for t, mc in enumerate(plan.cash_flow):
        mine = capex_by_month[t] + opex_by_month[t] + rental_by_month[t]
        if not _close(mine, mc.total_usd, rel=1e-6, abs_=0.5):
            errs.append(f"cash flow {mc.month}: {mc.total_usd:,.2f} but recomputed {mine:,.2f}")
    for wr in plan.workloads:
        if not wr.meets_target:
            errs.append(f"workload {wr.name}: does not meet its target {wr.target} (predicted {wr.predicted})")
    return errs
