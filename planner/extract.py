"""Stage 5: read a solved model into a :class:`~planner.plan.Plan` (pure data).

Everything monetary is recomputed here from variable values and catalog coefficients with
the same formulas as the objective, so the Plan's totals can be checked against the
solver's objective (they must agree to rounding).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pulp

from planner import __version__
from planner.candidates import rental_gpus
from planner.catalog import GpuSpec, Sourced, SourcedRange
from planner.demand import HOURS_PER_MONTH
from planner.model import PlannerModel, power_coefficients
from planner.plan import (
    Assumption,
    FleetMonth,
    MonthCost,
    Plan,
    Purchase,
    Rental,
    Reservation,
    ServeAllocation,
    Slice,
    Totals,
    TrainAllocation,
    WorkloadResult,
)
from planner.solve import SolveResult

EPS = 1e-6


def _v(x: Any) -> float:
    val = pulp.value(x)
    return float(val) if val is not None else 0.0


def _int(x: Any) -> int:
    return int(round(_v(x)))


GPU_FIELDS = (
    ("purchase_usd", "USD"),
    ("server_overhead_usd_per_gpu", "USD/GPU"),
    ("memory_gb", "GB"),
    ("memory_bandwidth_gbs", "GB/s"),
    ("bf16_dense_tflops", "TFLOPS"),
    ("fp8_dense_tflops", "TFLOPS"),
    ("tdp_w", "W"),
    ("idle_w", "W"),
    ("host_w_per_gpu", "W"),
    ("node_size", "GPUs"),
)


def gpu_assumptions(gpu: GpuSpec) -> list[Assumption]:
    out = []
    for key, unit in GPU_FIELDS:
        f = getattr(gpu, key)
        if f is None:
            continue
        src = f.source
        if isinstance(f, SourcedRange):
            src = f"{f.source} (range {f.low:,.0f}-{f.high:,.0f})"
        if isinstance(f, Sourced) and f.note:
            src += f"; {f.note}"
        out.append(
            Assumption(
                group=f"gpu:{gpu.id}", key=key, value=f.value, unit=unit, source=src, as_of=f.as_of
            )
        )
    out.append(Assumption(group=f"gpu:{gpu.id}", key="class", value=gpu.klass, source=gpu.name))
    return out


def extract_plan(m: PlannerModel, result: SolveResult) -> Plan:
    inputs, cands = m.inputs, m.cands
    p = inputs.problem
    site = p.site
    months = cands.months
    month_idx = {label: t for t, label in enumerate(months)}
    T = len(months)
    H = HOURS_PER_MONTH
    slices = cands.slices
    e = site.power_usd_per_kwh * site.pue / 1000.0

    # Purchases and fleet
    purchases: list[Purchase] = []
    owned: dict[tuple[str, int], int] = {}
    bought: dict[tuple[str, int], int] = {}
    for g, gpu in inputs.gpus.items():
        total = 0
        for t in range(T):
            nodes = _int(m.buy[(g, t)])
            count = nodes * gpu.node_gpus
            total += count
            owned[(g, t)] = total
            bought[(g, t)] = count
            if nodes:
                unit = gpu.unit_capex_usd
                purchases.append(
                    Purchase(
                        gpu=g,
                        month=months[t],
                        count=count,
                        nodes=nodes,
                        unit_usd=unit,
                        gpu_usd=gpu.purchase_usd.value,
                        overhead_usd=gpu.server_overhead_usd_per_gpu.value,
                        total_usd=count * unit,
                    )
                )

    # Serving allocations and rentals
    serve_alloc: list[ServeAllocation] = []
    rent_hours: dict[tuple[str, str, int], float] = defaultdict(float)  # (offer, workload, t)
    busy: dict[tuple[str, int], float] = defaultdict(float)
    workload_owned_hours: dict[tuple[str, str], float] = defaultdict(float)  # (workload, gpu)
    serve_used: dict[str, set[str]] = defaultdict(set)
    serve_peak_gpus: dict[str, float] = defaultdict(float)
    gpus_in_use: dict[tuple[str, int, int], float] = defaultdict(float)
    for (w, key, t, s), n in m.n.items():
        c = m.serve_cand(w, key)
        val = _int(n)
        if val:
            serve_alloc.append(
                ServeAllocation(
                    workload=w,
                    month=months[t],
                    slice=slices[s].name,
                    gpu=c.gpu,
                    gpus_per_replica=c.tp,
                    rate_rps_per_replica=c.rate_rps,
                    source="owned",
                    replicas=val,
                    demand_rps=cands.demand[(w, t, s)],
                )
            )
            gh = val * c.tp * slices[s].hours_per_month
            busy[(c.gpu, t)] += gh
            workload_owned_hours[(w, c.gpu)] += gh
            serve_used[w].add(key)
            gpus_in_use[(w, t, s)] += val * c.tp
    for (w, key, oid, t, s), q in m.q.items():
        c = m.serve_cand(w, key)
        val = _v(q)
        if val > EPS:
            serve_alloc.append(
                ServeAllocation(
                    workload=w,
                    month=months[t],
                    slice=slices[s].name,
                    gpu=c.gpu,
                    gpus_per_replica=c.tp,
                    rate_rps_per_replica=c.rate_rps,
                    source=oid,
                    replicas=val,
                    demand_rps=cands.demand[(w, t, s)],
                )
            )
            if cands.offers[oid].kind != "reserved":
                rent_hours[(oid, w, t)] += val * c.tp * slices[s].hours_per_month
            serve_used[w].add(key)
            gpus_in_use[(w, t, s)] += val * c.tp
    for (w, _t, _s), g in gpus_in_use.items():
        serve_peak_gpus[w] = max(serve_peak_gpus[w], g)

    # Training allocations: owned hours in slices; rented wall hours placed in the window's
    # months in order, after the job's owned hours in that month (the job runs one way at a time).
    train_alloc: list[TrainAllocation] = []
    train_choice: dict[str, str] = {}
    train_wall: dict[str, float] = defaultdict(float)
    for job, clist in cands.train.items():
        for c in clist:
            if _v(m.y.get((job, c.key), 0)) > 0.5:
                train_choice[job] = c.key
    for (job, key, t, s), z in m.z.items():
        val = _v(z)
        if val > EPS:
            c = m.train_cand(job, key)
            train_alloc.append(
                TrainAllocation(
                    workload=job,
                    month=months[t],
                    slice=slices[s].name,
                    gpu=c.gpu,
                    gpus=c.gpus,
                    source="owned",
                    wall_hours=val,
                    progress_hours=val,
                )
            )
            busy[(c.gpu, t)] += val * c.gpus
            workload_owned_hours[(job, c.gpu)] += val * c.gpus
            train_wall[job] += val
    for job, key in train_choice.items():
        c = m.train_cand(job, key)
        used = defaultdict(float)
        for a in train_alloc:
            if a.workload == job:
                used[a.month] += a.wall_hours
        window = list(cands.window[job])
        job_spec = next(j for j in p.workloads.train if j.name == job)
        for (jj, kk, oid), r in sorted(
            m.r.items(), key=lambda kv: (cands.offers[kv[0][2]].kind, kv[0][2])
        ):
            if jj != job or kk != key:
                continue
            left = _v(r)
            if left <= EPS:
                continue
            o = cands.offers[oid]
            factor = 1.0 / (1.0 + job_spec.spot.overhead) if o.kind == "spot" else 1.0
            train_wall[job] += left
            for t in window:
                if left <= EPS:
                    break
                room = max(0.0, H - used[months[t]])
                take = min(room, left) if t != window[-1] else left
                if take <= EPS:
                    continue
                used[months[t]] += take
                left -= take
                train_alloc.append(
                    TrainAllocation(
                        workload=job,
                        month=months[t],
                        slice=None,
                        gpu=c.gpu,
                        gpus=c.gpus,
                        source=oid,
                        wall_hours=take,
                        progress_hours=take * factor,
                    )
                )
                rent_hours[(oid, job, t)] += take * rental_gpus(c.gpus, o)

    rentals: list[Rental] = []
    for (oid, w, t), gh in sorted(
        rent_hours.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])
    ):
        o = cands.offers[oid]
        rentals.append(
            Rental(
                provider=o.provider,
                offer=oid,
                gpu=o.gpu,
                kind=o.kind,
                month=months[t],
                workload=w,
                gpu_hours=gh,
                usd_per_gpu_hour=o.usd_per_gpu_hour,
                usd=gh * o.usd_per_gpu_hour,
            )
        )
    reservations: list[Reservation] = []
    reserved_active: dict[tuple[str, int], int] = defaultdict(int)
    for (oid, t0), v in m.res.items():
        count = _int(v)
        if not count:
            continue
        o = cands.offers[oid]
        L = o.term_months or 1
        gpus = count * o.gpus_per_instance
        reservations.append(
            Reservation(
                offer=oid,
                provider=o.provider,
                gpu=o.gpu,
                start_month=months[t0],
                term_months=L,
                gpus=gpus,
                usd_per_gpu_hour=o.usd_per_gpu_hour,
                hours=L * H,
                usd=gpus * L * H * o.usd_per_gpu_hour,
            )
        )
        for t in range(t0, min(T, t0 + L)):
            reserved_active[(o.gpu, t)] += gpus
            rentals.append(
                Rental(
                    provider=o.provider,
                    offer=oid,
                    gpu=o.gpu,
                    kind="reserved",
                    month=months[t],
                    workload="(reserved)",
                    gpu_hours=gpus * H,
                    usd_per_gpu_hour=o.usd_per_gpu_hour,
                    usd=gpus * H * o.usd_per_gpu_hour,
                )
            )

    # Fleet and cash flow
    fleet: list[FleetMonth] = []
    month_cost = {t: defaultdict(float) for t in range(T)}
    rented_by_gpu: dict[tuple[str, int], float] = defaultdict(float)
    for r in rentals:
        rented_by_gpu[(r.gpu, month_idx[r.month])] += r.gpu_hours
        month_cost[month_idx[r.month]]["rental"] += r.usd
    for pch in purchases:
        month_cost[month_idx[pch.month]]["capex"] += pch.total_usd
    power_by_gpu: dict[str, float] = defaultdict(float)
    fixed_by_gpu: dict[str, float] = defaultdict(float)
    for g, gpu in inputs.gpus.items():
        per_month, per_busy = power_coefficients(gpu, e)
        for t in range(T):
            own = owned[(g, t)]
            b = busy[(g, t)]
            pw = own * per_month + b * per_busy
            hs = own * site.hosting_usd_per_gpu_month
            month_cost[t]["power"] += pw
            month_cost[t]["hosting"] += hs
            power_by_gpu[g] += b * per_busy
            fixed_by_gpu[g] += own * per_month + hs + bought[(g, t)] * gpu.unit_capex_usd
            if own or rented_by_gpu[(g, t)] or reserved_active[(g, t)]:
                fleet.append(
                    FleetMonth(
                        gpu=g,
                        month=months[t],
                        bought=bought[(g, t)],
                        owned=own,
                        reserved=reserved_active[(g, t)],
                        owned_busy_gpu_hours=b,
                        rented_gpu_hours=rented_by_gpu[(g, t)],
                        owned_utilization=b / (own * H) if own else 0.0,
                        power_kw=own
                        * (gpu.tdp_w.value + gpu.host_w_per_gpu.value)
                        * site.pue
                        / 1000,
                    )
                )
    cash: list[MonthCost] = []
    running = 0.0
    for t in range(T):
        c = month_cost[t]
        tot = c["capex"] + c["power"] + c["hosting"] + c["rental"]
        running += tot
        cash.append(
            MonthCost(
                month=months[t],
                capex_usd=c["capex"],
                power_usd=c["power"],
                hosting_usd=c["hosting"],
                rental_usd=c["rental"],
                total_usd=tot,
                cumulative_usd=running,
            )
        )
    totals = Totals(
        capex_usd=sum(c.capex_usd for c in cash),
        power_usd=sum(c.power_usd for c in cash),
        hosting_usd=sum(c.hosting_usd for c in cash),
        rental_usd=sum(c.rental_usd for c in cash),
        total_usd=running,
        reserved_usd=sum(r.usd for r in reservations),
        capex_budget_usd=p.budget.capex_usd,
        total_budget_usd=p.budget.total_usd,
    )

    # Per-workload results. Owned costs (capex, idle power, hosting) are shared among the
    # workloads in proportion to the owned GPU-hours each used on that GPU type.
    busy_total = defaultdict(float)
    for (_w, g), h in workload_owned_hours.items():
        busy_total[g] += h
    reserved_cost_by_gpu = defaultdict(float)
    for r in reservations:
        reserved_cost_by_gpu[r.gpu] += r.usd
    reserved_use = defaultdict(float)  # (workload, gpu) -> GPU-hours on reserved capacity
    for a in serve_alloc:
        if a.source != "owned" and cands.offers[a.source].kind == "reserved":
            sl = next(x for x in slices if x.name == a.slice)
            reserved_use[(a.workload, a.gpu)] += (
                a.replicas * a.gpus_per_replica * sl.hours_per_month
            )
    reserved_use_total = defaultdict(float)
    for (_w, g), h in reserved_use.items():
        reserved_use_total[g] += h
    rent_by_workload = defaultdict(float)
    for r in rentals:
        rent_by_workload[r.workload] += r.usd

    def workload_cost(w: str) -> float:
        cost = rent_by_workload[w]
        for g in inputs.gpus:
            h = workload_owned_hours.get((w, g), 0.0)
            if h and busy_total[g]:
                cost += fixed_by_gpu[g] * h / busy_total[g] + power_by_gpu[g] * h / busy_total[g]
            rh = reserved_use.get((w, g), 0.0)
            if rh and reserved_use_total[g]:
                cost += reserved_cost_by_gpu[g] * rh / reserved_use_total[g]
        return cost

    results: list[WorkloadResult] = []
    for job in p.workloads.train:
        key = train_choice.get(job.name)
        if key is None:
            continue
        c = m.train_cand(job.name, key)
        est = c.estimate
        predicted = {"wall_hours": round(train_wall[job.name], 6)}
        target = {"wall_hours": cands.window_hours[job.name]}
        cost = workload_cost(job.name)
        owned_h = sum(
            a.wall_hours for a in train_alloc if a.workload == job.name and a.source == "owned"
        )
        results.append(
            WorkloadResult(
                name=job.name,
                kind="train",
                model=job.model,
                gpu=[c.gpu],
                gpus=c.gpus,
                config={
                    "method": job.method,
                    "layout": est.layout.__dict__ if est.layout else None,
                    "mfu": est.mfu,
                    "memory_per_gpu_gb": est.memory_per_gpu_gb,
                    "hours_to_finish": c.wall_hours,
                    "gpu_hours": est.gpu_hours,
                    "owned_wall_hours": owned_h,
                    "rented_wall_hours": train_wall[job.name] - owned_h,
                },
                cost_usd=cost,
                cost_share=0.0,
                meets_target=predicted["wall_hours"] <= target["wall_hours"] + 1e-6,
                predicted=predicted,
                target=target,
                slack={"wall_hours": target["wall_hours"] - predicted["wall_hours"]},
                tokens=job.tokens,
                usd_per_1m_tokens=cost / job.tokens * 1e6,
            )
        )
    served: dict[tuple[str, str, str], float] = {}  # (workload, month, slice) -> req/s
    for a in serve_alloc:
        k = (a.workload, a.month, a.slice)
        served[k] = served.get(k, 0) + a.replicas * a.rate_rps_per_replica
    for w in p.workloads.serve:
        used = sorted(serve_used.get(w.name, set()))
        cl = [m.serve_cand(w.name, k) for k in used]
        ttft = max((c.capacity.p95_ttft_ms for c in cl), default=float("inf"))
        tpot = max((c.capacity.p95_tpot_ms for c in cl), default=float("inf"))
        covered = True
        for t in cands.active[w.name]:
            for s in range(len(slices)):
                have = served.get((w.name, months[t], slices[s].name), 0.0)
                if have + 1e-6 < cands.demand[(w.name, t, s)] * (1 - 1e-7):
                    covered = False
        tokens = sum(
            cands.demand[(w.name, t, s)] * slices[s].hours_per_month * 3600.0
            for t in cands.active[w.name]
            for s in range(len(slices))
        ) * (w.tokens.prompt + w.tokens.output)
        cost = workload_cost(w.name)
        predicted = {"p95_ttft_ms": ttft, "p95_tpot_ms": tpot}
        target = {"p95_ttft_ms": w.slo.p95_ttft_ms, "p95_tpot_ms": w.slo.p95_tpot_ms}
        results.append(
            WorkloadResult(
                name=w.name,
                kind="serve",
                model=w.model,
                gpu=sorted({c.gpu for c in cl}),
                gpus=int(round(serve_peak_gpus[w.name] + 0.4999)),
                config={
                    "precision": w.precision,
                    "replicas": [
                        {
                            "gpu": c.gpu,
                            "gpus_per_replica": c.tp,
                            "batch": c.capacity.batch,
                            "rate_rps_per_replica": c.rate_rps,
                            "tokens_per_s": c.capacity.tokens_per_s,
                        }
                        for c in cl
                    ],
                    "demand_covered": covered,
                },
                cost_usd=cost,
                cost_share=0.0,
                meets_target=covered and ttft <= w.slo.p95_ttft_ms and tpot <= w.slo.p95_tpot_ms,
                predicted=predicted,
                target=target,
                slack={k: target[k] - predicted[k] for k in target},
                tokens=tokens,
                usd_per_1m_tokens=cost / tokens * 1e6 if tokens else None,
            )
        )
    for r in results:
        r.cost_share = r.cost_usd / totals.total_usd if totals.total_usd else 0.0

    assumptions = [
        Assumption(group="problem", key="name", value=p.name),
        Assumption(group="problem", key="file", value=inputs.source_path),
        Assumption(group="problem", key="sha256", value=inputs.source_sha256),
        Assumption(
            group="problem", key="horizon", value=f"{p.horizon.start} + {p.horizon.months} months"
        ),
        *(
            Assumption(
                group=group, key=key, value=getattr(obj, key), unit=unit, source="problem file"
            )
            for group, obj, key, unit in (
                ("budget", p.budget, "capex_usd", "USD"),
                ("budget", p.budget, "total_usd", "USD"),
                ("site", site, "power_usd_per_kwh", "USD/kWh"),
                ("site", site, "pue", ""),
                ("site", site, "hosting_usd_per_gpu_month", "USD/GPU-month"),
                ("site", site, "power_cap_kw", "kW"),
                ("site", site, "consumer_gpus_allowed", ""),
            )
        ),
        Assumption(group="site", key="hours_per_month", value=H, unit="h", source="8760 h / 12"),
        Assumption(group="solver", key="status", value=result.status),
        Assumption(group="solver", key="solver", value=result.solver),
        Assumption(group="solver", key="gap", value=result.gap),
        Assumption(group="solver", key="solve_seconds", value=round(result.seconds, 3), unit="s"),
        Assumption(group="solver", key="planner_version", value=__version__),
    ]
    for gpu in inputs.gpus.values():
        assumptions.extend(gpu_assumptions(gpu))
    used_offers = {r.offer for r in rentals}
    for oid, o in cands.offers.items():
        if oid in used_offers:
            assumptions.append(
                Assumption(
                    group=f"offer:{oid}",
                    key="usd_per_gpu_hour",
                    value=o.usd_per_gpu_hour,
                    unit="USD/GPU-h",
                    source=f"{o.provider} {o.kind} {o.instance_type or ''}: {o.source}",
                    as_of=o.as_of,
                )
            )
    for sl in slices:
        assumptions.append(
            Assumption(
                group="slices",
                key=sl.name,
                value=sl.hours_per_month,
                unit="h/month",
                source="daily load curve: 2 h peak, 6 h, 8 h, 8 h (planner.demand)",
            )
        )
    for w in p.workloads.serve:
        for sl, load in zip(slices, cands.serve_loads[w.name], strict=True):
            assumptions.append(
                Assumption(
                    group=f"load:{w.name}",
                    key=sl.name,
                    value=round(load, 6),
                    unit="x peak",
                    source=f"utilization {w.traffic.utilization} (mean/peak)",
                )
            )

    return Plan(
        planner_version=__version__,
        problem_name=p.name,
        problem_file=inputs.source_path,
        problem_sha256=inputs.source_sha256,
        status=result.status,  # type: ignore[arg-type]
        objective_usd=result.objective,
        gap=result.gap,
        solve_seconds=result.seconds,
        solver=result.solver,
        message=result.message,
        horizon_start=p.horizon.start,
        months=months,
        hours_per_month=H,
        slices=[Slice(name=s.name, hours_per_month=s.hours_per_month, load=s.load) for s in slices],
        totals=totals,
        purchases=purchases,
        rentals=rentals,
        reservations=reservations,
        fleet=fleet,
        cash_flow=cash,
        workloads=results,
        serve_allocations=serve_alloc,
        train_allocations=train_alloc,
        dropped=cands.dropped,
        assumptions=assumptions,
    )
