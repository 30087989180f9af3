"""Stage 5: read a solved model into a :class:`~planner.plan.data.Plan` (pure data).

Everything monetary is recomputed here from variable values and catalog coefficients with
the same formulas as the objective, so the Plan's totals can be checked against the
solver's objective (they must agree to rounding).

The Plan is read one section at a time, each by its own reader: purchases; serving and
training allocations; rentals and reservations; fleet and power; cash flow; per-workload
results; assumptions. :func:`extract_plan` composes them. Values several readers need (month
labels, slices) are derived once in a :class:`_Context`; GPU-hours the allocation readers
accumulate go into one :class:`_Usage`, so each sum is added up in the same order as before
and the Plan is reproducible to the bit.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pulp

from planner import __version__
from planner.base import tolerances as tol
from planner.base.tolerances import RPS, at_least, at_most
from planner.inputs.catalog import GpuSpec, Sourced, SourcedRange
from planner.inputs.problem import Inputs, Problem, ServeWorkload, TrainJob, contract_offer_id
from planner.optimize.candidates import (
    Candidates,
    ServeCandidate,
    offer_months,
    progress_per_wall_hour,
    rental_gpus,
)
from planner.optimize.model import PlannerModel, existing_age, existing_start, power_coefficients
from planner.optimize.solve import SolveResult
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH, LoadSlice
from planner.plan.data import (
    Assumption,
    Commitment,
    Depreciation,
    Dropped,
    ExistingGpus,
    FleetMonth,
    MonthCost,
    Plan,
    Purchase,
    Rental,
    Reservation,
    Sale,
    ServeAllocation,
    Slice,
    Totals,
    TrainAllocation,
    WorkloadResult,
    YearCost,
)

EPS = tol.INTEGRALITY


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
    """Assumptions section for one GPU type: every catalog figure used, with unit and source."""
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
    return out + _server_assumptions(gpu)


def _server_assumptions(gpu: GpuSpec) -> list[Assumption]:
    """The server the card is bought in (slots, fill, chassis price, host watts) and its
    resale curve (share of the card's price by age)."""
    group, spec = f"gpu:{gpu.id}", gpu.server_spec
    out = [
        Assumption(
            group=group,
            key="server_slots",
            value=gpu.slots,
            unit="GPUs",
            source=spec.name if spec else "no server type: one node per purchase",
        ),
        Assumption(
            group=group,
            key="server_fill",
            value=spec.fill if spec else "full",
            source="full: sold with every slot filled; partial: cards added one by one",
        ),
        Assumption(
            group=group,
            key="chassis_usd",
            value=gpu.chassis_usd,
            unit="USD/server",
            source=f"server_overhead_usd_per_gpu x {gpu.slots} slots",
        ),
        Assumption(
            group=group,
            key="host_w",
            value=gpu.host_w,
            unit="W/server",
            source=f"host_w_per_gpu x {gpu.slots} slots",
        ),
    ]
    if gpu.residual is not None:
        for p in gpu.residual.points:
            out.append(
                Assumption(
                    group=group,
                    key=f"residual_share_{p.age_months}m",
                    value=p.share,
                    unit="share of card price",
                    source=f"{p.source or gpu.residual.source} (range {p.low:g}-{p.high:g})",
                    as_of=gpu.residual.as_of,
                )
            )
    return out


def _finance_assumptions(ctx: _Context) -> list[Assumption]:
    """Discount rate, resale mode, depreciation life and colocation price, each with where
    it came from (the problem file or catalogs/finance.yaml)."""
    f = ctx.inputs.finance
    why = dict(f.sources)

    def src(key: str) -> str:
        return why.get(key, "problem file")

    return [
        Assumption(
            group="finance",
            key="discount_rate",
            value=f.discount_rate,
            unit="per year",
            source=src("finance.discount_rate"),
        ),
        Assumption(
            group="finance",
            key="residual",
            value=f.residual,
            source="curve: catalog resale curve of the cards; straight_line: book value; none",
        ),
        Assumption(
            group="finance",
            key="depreciation_years",
            value=f.depreciation_years,
            unit="years",
            source=src("finance.depreciation_years"),
        ),
        Assumption(
            group="site",
            key="colo_usd_per_kw_month",
            value=f.colo_usd_per_kw_month,
            unit="USD/kW-month",
            source=src("site.colo_usd_per_kw_month"),
        ),
    ]


# ------------------------------------------------------------------ shared state of the readers


@dataclass(frozen=True)
class _Context:
    """What every reader needs, derived once from the solved model."""

    m: PlannerModel
    months: list[str]  # month labels (YYYY-MM); a month's index t is its position
    month_idx: dict[str, int]  # month label -> t
    slices: list[LoadSlice]  # the day's load slices, hours per month each

    @property
    def inputs(self) -> Inputs:
        return self.m.inputs

    @property
    def cands(self) -> Candidates:
        return self.m.cands

    @property
    def problem(self) -> Problem:
        return self.m.inputs.problem


def _context(m: PlannerModel) -> _Context:
    months = m.cands.months
    return _Context(
        m=m,
        months=months,
        month_idx={label: t for t, label in enumerate(months)},
        slices=m.cands.slices,
    )


def _hours() -> defaultdict[Any, float]:
    return defaultdict(float)


@dataclass
class _Usage:
    """GPU-hours added up by the allocation readers, serving first, then training.

    Shared (not summed per reader and merged) because float addition is not associative: the
    Plan's figures depend on the order of the additions, which is kept.
    """

    # (gpu, t) -> owned GPU-hours in use
    busy: defaultdict[tuple[str, int], float] = field(default_factory=_hours)
    # (workload, gpu) -> owned GPU-hours the workload used
    owned_hours: defaultdict[tuple[str, str], float] = field(default_factory=_hours)
    # (offer, workload, t) -> rented GPU-hours, on-demand and spot only
    rent_hours: defaultdict[tuple[str, str, int], float] = field(default_factory=_hours)


# ------------------------------------------------------------------ purchases


@dataclass
class _Purchases:
    purchases: list[Purchase]
    owned: dict[tuple[str, int], int]  # (gpu, t) -> GPUs owned in month t (bought up to t)
    bought: dict[tuple[str, int], int]  # (gpu, t) -> GPUs bought in month t
    servers: dict[tuple[str, int], int]  # (gpu, t) -> servers owned in month t


def _read_purchases(ctx: _Context) -> _Purchases:
    """Purchases section: whole servers and the cards in them per GPU type and month (a full
    server comes with its cards; a partial one is filled card by card)."""
    out = _Purchases([], {}, {}, {})
    for g, gpu in ctx.inputs.gpus.items():
        total = servers_total = 0
        for t in range(len(ctx.months)):
            servers = _int(ctx.m.buy[(g, t)])
            count = _int(ctx.m.cards[(g, t)])
            total += count
            servers_total += servers
            out.owned[(g, t)] = total
            out.bought[(g, t)] = count
            out.servers[(g, t)] = servers_total
            if servers or count:
                out.purchases.append(_purchase(ctx.months[t], gpu, servers, count))
    return out


def _purchase(month: str, gpu: GpuSpec, servers: int, count: int) -> Purchase:
    chassis = servers * gpu.chassis_usd
    total = chassis + count * gpu.purchase_usd.value
    return Purchase(
        gpu=gpu.id,
        month=month,
        count=count,
        nodes=servers,
        server=gpu.server or f"{gpu.id} node",
        slots=gpu.slots,
        chassis_usd=gpu.chassis_usd,
        unit_usd=total / count if count else total,
        gpu_usd=gpu.purchase_usd.value,
        overhead_usd=chassis / count if count else chassis,
        total_usd=total,
    )


# ------------------------------------------------------------------ serving allocations


@dataclass
class _Serving:
    allocations: list[ServeAllocation]
    used: defaultdict[str, set[str]]  # workload -> keys of the candidates with any replica
    peak_gpus: defaultdict[str, float]  # workload -> most GPUs in use in one (month, slice)


def _bucket_fields(
    ctx: _Context, w: str, c: ServeCandidate, t: int, s: int, replicas: float, of_type: float
) -> dict:
    """A mix's per-bucket rates and the capacity these replicas give each bucket: the type's
    pooled capacity (owned and rented replicas of one type share it; ``of_type`` replicas of
    it in the cell) split in proportion to replicas."""
    if not c.mixed:
        return {}
    rates = {b.bucket: b.rate for b in c.buckets}
    part = replicas / of_type if of_type else 0.0
    given = {}
    for b in rates:
        v = ctx.m.alloc.get((w, b, c.key, t, s))
        given[b] = max(_v(v), 0.0) * part if v is not None else 0.0
    return {"bucket_rates_rps": rates, "bucket_capacity_rps": given}


def _replicas_per_type(ctx: _Context) -> defaultdict[tuple[str, str, int, int], int]:
    """Whole replicas per (workload, replica type, month, slice), owned and rented."""
    out: defaultdict[tuple[str, str, int, int], int] = defaultdict(int)
    for (w, key, t, s), x in ctx.m.n.items():
        out[(w, key, t, s)] += _int(x)
    for (w, key, _oid, t, s), x in ctx.m.q.items():
        out[(w, key, t, s)] += _int(x)
    return out


def _serve_allocation(
    ctx: _Context,
    w: str,
    c: ServeCandidate,
    t: int,
    s: int,
    source: str,
    replicas: float,
    of_type: float = 0.0,
) -> ServeAllocation:
    return ServeAllocation(
        **_bucket_fields(ctx, w, c, t, s, replicas, of_type),
        workload=w,
        month=ctx.months[t],
        slice=ctx.slices[s].name,
        gpu=c.gpu,
        gpus_per_replica=c.tp,
        rate_rps_per_replica=c.rate_rps,
        source=source,
        replicas=replicas,
        demand_rps=ctx.cands.demand[(w, t, s)],
    )


def _read_serving(ctx: _Context, usage: _Usage) -> _Serving:
    """Serving allocations: whole replicas per (workload, month, slice) on owned GPUs (``n``)
    and offers (``q``, made whole by the solve's repair step). Adds owned busy GPU-hours and rented (not reserved) GPU-hours
    to ``usage``."""
    out = _Serving([], defaultdict(set), defaultdict(float))
    gpus_in_use: defaultdict[tuple[str, int, int], float] = defaultdict(float)
    per_type = _replicas_per_type(ctx) if ctx.m.alloc else defaultdict(int)
    for (w, key, t, s), n in ctx.m.n.items():
        c = ctx.m.serve_cand(w, key)
        val = _int(n)
        if val:
            out.allocations.append(
                _serve_allocation(ctx, w, c, t, s, "owned", val, per_type[(w, key, t, s)])
            )
            gh = val * c.tp * ctx.slices[s].hours_per_month
            usage.busy[(c.gpu, t)] += gh
            usage.owned_hours[(w, c.gpu)] += gh
            out.used[w].add(key)
            gpus_in_use[(w, t, s)] += val * c.tp
    for (w, key, oid, t, s), q in ctx.m.q.items():
        c = ctx.m.serve_cand(w, key)
        val = _int(q)
        if val:
            out.allocations.append(
                _serve_allocation(ctx, w, c, t, s, oid, val, per_type[(w, key, t, s)])
            )
            # Reserved capacity is paid per reservation, whatever runs on it.
            if ctx.cands.offers[oid].kind != "reserved":
                usage.rent_hours[(oid, w, t)] += val * c.tp * ctx.slices[s].hours_per_month
            out.used[w].add(key)
            gpus_in_use[(w, t, s)] += val * c.tp
    for (w, _t, _s), g in gpus_in_use.items():
        out.peak_gpus[w] = max(out.peak_gpus[w], g)
    return out


# ------------------------------------------------------------------ training allocations


@dataclass
class _Training:
    allocations: list[TrainAllocation]
    choice: dict[str, str]  # job -> key of the chosen candidate (GPU type and count)
    wall: defaultdict[str, float]  # job -> wall hours run, owned and rented


def _read_training(ctx: _Context, usage: _Usage) -> _Training:
    """Training allocations: each job's chosen candidate, its owned wall hours per (month,
    slice) (``z``), then its rented wall hours per month. Adds owned busy GPU-hours and rented
    GPU-hours to ``usage``."""
    m = ctx.m
    out = _Training([], {}, defaultdict(float))
    for job, clist in ctx.cands.train.items():
        for c in clist:
            if _v(m.y.get((job, c.key), 0)) > 0.5:
                out.choice[job] = c.key
    for (job, key, t, s), z in m.z.items():
        val = _v(z)
        if val > EPS:
            c = m.train_cand(job, key)
            out.allocations.append(
                TrainAllocation(
                    workload=job,
                    month=ctx.months[t],
                    slice=ctx.slices[s].name,
                    gpu=c.gpu,
                    gpus=c.gpus,
                    source="owned",
                    wall_hours=val,
                    progress_hours=val,
                )
            )
            usage.busy[(c.gpu, t)] += val * c.gpus
            usage.owned_hours[(job, c.gpu)] += val * c.gpus
            out.wall[job] += val
    for job, key in out.choice.items():
        _place_rented_training(ctx, usage, out, job, key)
    return out


def _place_rented_training(
    ctx: _Context, usage: _Usage, out: _Training, job: str, key: str
) -> None:
    """Rented wall hours (``r``) of one job, per offer and month as the model placed them.
    Spot hours make less progress (restart overhead)."""
    m, cands, months = ctx.m, ctx.cands, ctx.months
    c = m.train_cand(job, key)
    job_spec = next(j for j in ctx.problem.workloads.train if j.name == job)
    for (jj, kk, oid, t), r in sorted(
        m.r.items(), key=lambda kv: (kv[0][3], cands.offers[kv[0][2]].kind, kv[0][2])
    ):
        take = _v(r)
        if jj != job or kk != key or take <= EPS:
            continue
        o = cands.offers[oid]
        rate = progress_per_wall_hour(c, job_spec, o) or 0.0
        out.wall[job] += take
        out.allocations.append(
            TrainAllocation(
                workload=job,
                month=months[t],
                slice=None,
                gpu=c.gpu,
                gpus=c.gpus,
                source=oid,
                wall_hours=take,
                progress_hours=take * rate,
            )
        )
        usage.rent_hours[(oid, job, t)] += take * rental_gpus(c.gpus, o)


# ------------------------------------------------------------------ rentals and reservations


def _read_rentals(ctx: _Context, rent_hours: dict[tuple[str, str, int], float]) -> list[Rental]:
    """Rentals section, on-demand and spot: GPU-hours and USD per (offer, workload, month),
    sorted by month, offer, workload."""
    out = []
    for (oid, w, t), gh in sorted(
        rent_hours.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])
    ):
        o = ctx.cands.offers[oid]
        # a contract's hours are paid in committed_usd, whatever is used: $0 at the margin
        out.append(
            Rental(
                provider=o.provider,
                offer=oid,
                gpu=o.gpu,
                kind="committed" if o.committed else o.kind,
                month=ctx.months[t],
                workload=w,
                gpu_hours=gh,
                usd_per_gpu_hour=o.marginal_usd_per_gpu_hour,
                usd=gh * o.marginal_usd_per_gpu_hour,
            )
        )
    return out


# ------------------------------------------------------------------ the existing fleet


@dataclass
class _Existing:
    in_service: defaultdict[tuple[str, int], int]  # (gpu, t) -> existing cards still owned
    sold: defaultdict[tuple[str, int], int]  # (gpu, t) -> existing cards sold by month t
    sales: list[Sale]
    sales_usd: list[float]  # per month, cash in
    committed_usd: list[float]  # per month, contracts
    residual_usd: float  # existing cards' value at the horizon end
    entries: list[ExistingGpus] = field(default_factory=list)
    commitments: list[Commitment] = field(default_factory=list)


def _read_existing(ctx: _Context) -> _Existing:
    """Existing GPUs in service and sold per month, each sale at the card's resale share at
    its age x its catalog price, their value at the horizon end (by ``finance.residual``, as
    for purchases), and contracts' cost per month."""
    T, fin, m = len(ctx.months), ctx.inputs.finance, ctx.m
    out = _Existing(defaultdict(int), defaultdict(int), [], [0.0] * T, [0.0] * T, 0.0)
    for i, o in enumerate(ctx.problem.fleet.owned):
        if o.gpu not in ctx.inputs.gpus:
            continue
        gpu, t0 = ctx.inputs.gpus[o.gpu], existing_start(m, i)
        gone = 0
        for t in range(t0, T):
            v = m.sell.get((i, t))
            n = _int(v) * gpu.node_gpus if v is not None else 0
            if n:
                age = existing_age(m, i, t)
                unit = gpu.purchase_usd.value * economics.sale_share(gpu, age)
                out.sales.append(
                    Sale(
                        gpu=o.gpu,
                        month=ctx.months[t],
                        count=n,
                        age_months=age,
                        unit_usd=unit,
                        usd=n * unit,
                    )
                )
                out.sales_usd[t] += n * unit
            gone += n
            out.sold[(o.gpu, t)] += gone
            out.in_service[(o.gpu, t)] += o.count - gone
        age = existing_age(m, i, T)
        share = economics.residual_share(gpu, age, fin.residual, fin.depreciation_years)
        kept = o.count - gone
        out.residual_usd += kept * gpu.purchase_usd.value * share
        out.entries.append(
            ExistingGpus(
                gpu=o.gpu,
                count=o.count,
                bought=o.bought,
                arrives=o.arrives,
                sell=o.sell,
                sold=gone,
                kept=kept,
                age_end_months=age,
                residual_share=share,
                residual_usd=kept * gpu.purchase_usd.value * share,
            )
        )
    _read_commitments(ctx, out)
    return out


def _read_commitments(ctx: _Context, out: _Existing) -> None:
    """Each contract's months inside the horizon and its cost there: count x hours x price
    per month, paid used or not."""
    T = len(ctx.months)
    for i, c in enumerate(ctx.problem.fleet.contracts):
        oid = contract_offer_id(i, c)
        o = ctx.cands.offers.get(oid)
        term = offer_months(o, ctx.problem.horizon.start, T) if o is not None else range(0)
        month_usd = c.count * HOURS_PER_MONTH * c.usd_per_gpu_hour
        for t in term:
            out.committed_usd[t] += month_usd
        out.commitments.append(
            Commitment(
                provider=c.provider,
                gpu=c.gpu,
                offer=oid,
                count=c.count,
                start=c.start,
                end=c.end,
                usd_per_gpu_hour=c.usd_per_gpu_hour,
                months=[ctx.months[t] for t in term],
                usd=month_usd * len(term),
            )
        )


@dataclass
class _Reservations:
    reservations: list[Reservation]
    rentals: list[Rental]  # one "(reserved)" row per reservation and month of its term
    active: defaultdict[tuple[str, int], int]  # (gpu, t) -> reserved GPUs


def _read_reservations(ctx: _Context) -> _Reservations:
    """Reservations section: GPUs committed per offer and start month and the term's cost
    (USD, every hour paid, used or not); and one rental row per month of the term."""
    H = HOURS_PER_MONTH
    T = len(ctx.months)
    out = _Reservations([], [], defaultdict(int))
    for (oid, t0), v in ctx.m.res.items():
        count = _int(v)
        if not count:
            continue
        o = ctx.cands.offers[oid]
        L = o.term_months or 1
        gpus = count * o.gpus_per_instance
        out.reservations.append(
            Reservation(
                offer=oid,
                provider=o.provider,
                gpu=o.gpu,
                start_month=ctx.months[t0],
                term_months=L,
                gpus=gpus,
                usd_per_gpu_hour=o.usd_per_gpu_hour,
                hours=L * H,
                usd=gpus * L * H * o.usd_per_gpu_hour,
            )
        )
        for t in range(t0, min(T, t0 + L)):
            out.active[(o.gpu, t)] += gpus
            out.rentals.append(
                Rental(
                    provider=o.provider,
                    offer=oid,
                    gpu=o.gpu,
                    kind="reserved",
                    month=ctx.months[t],
                    workload="(reserved)",
                    gpu_hours=gpus * H,
                    usd_per_gpu_hour=o.usd_per_gpu_hour,
                    usd=gpus * H * o.usd_per_gpu_hour,
                )
            )
    return out


# ------------------------------------------------------------------ fleet and power


@dataclass
class _Fleet:
    fleet: list[FleetMonth]
    power_usd: list[float]  # month t -> owned fleet's power (idle + host + busy), USD
    hosting_usd: list[float]  # month t -> hosting of the owned fleet, USD
    power_by_gpu: defaultdict[str, float]  # GPU type -> busy power over the horizon, USD
    fixed_by_gpu: defaultdict[str, float]  # GPU type -> capex + idle power + hosting, USD


def _read_fleet(
    ctx: _Context,
    buys: _Purchases,
    busy: defaultdict[tuple[str, int], float],
    rentals: list[Rental],
    reserved_active: defaultdict[tuple[str, int], int],
    existing: _Existing,
) -> _Fleet:
    """Fleet section: per GPU type and month, GPUs bought / owned / reserved, owned busy and
    rented GPU-hours, utilization and full-load kW at the meter; and the owned fleet's power
    and hosting USD per month and per GPU type."""
    site = ctx.problem.site
    H = HOURS_PER_MONTH
    T = len(ctx.months)
    e = site.power_usd_per_kwh * site.pue / 1000.0  # $/Wh at the meter
    rented_by_gpu: defaultdict[tuple[str, int], float] = defaultdict(float)
    for r in rentals:
        rented_by_gpu[(r.gpu, ctx.month_idx[r.month])] += r.gpu_hours
    out = _Fleet([], [0.0] * T, [0.0] * T, defaultdict(float), defaultdict(float))
    colo = ctx.inputs.finance.colo_usd_per_kw_month
    for g, gpu in ctx.inputs.gpus.items():
        _, per_busy = power_coefficients(gpu, e)
        for t in range(T):
            ex = existing.in_service[(g, t)]
            own, servers = buys.owned[(g, t)] + ex, buys.servers[(g, t)]
            b = busy[(g, t)]
            # existing cards bring their share of their servers' host watts (host_w / slots)
            host = servers * gpu.host_w + ex * gpu.host_w / max(gpu.slots, 1)
            kw = (own * gpu.tdp_w.value + host) / 1000.0
            idle = (host + own * gpu.idle_w.value) * H * e
            hs = own * site.hosting_usd_per_gpu_month + kw * colo
            out.power_usd[t] += idle + b * per_busy
            out.hosting_usd[t] += hs
            out.power_by_gpu[g] += b * per_busy
            bought_usd = sum(
                p.total_usd for p in buys.purchases if p.gpu == g and p.month == ctx.months[t]
            )
            out.fixed_by_gpu[g] += idle + hs + bought_usd
            if own or rented_by_gpu[(g, t)] or reserved_active[(g, t)] or existing.sold[(g, t)]:
                out.fleet.append(
                    FleetMonth(
                        gpu=g,
                        month=ctx.months[t],
                        bought=buys.bought[(g, t)],
                        owned=own,
                        existing=ex,
                        sold=existing.sold[(g, t)],
                        servers=servers,
                        reserved=reserved_active[(g, t)],
                        owned_busy_gpu_hours=b,
                        rented_gpu_hours=rented_by_gpu[(g, t)],
                        owned_utilization=b / (own * H) if own else 0.0,
                        it_kw=kw,
                        power_kw=kw * site.pue,
                    )
                )
    return out


# ------------------------------------------------------------------ cash flow


def _read_cash_flow(
    ctx: _Context,
    purchases: list[Purchase],
    rentals: list[Rental],
    reservations: list[Reservation],
    fleet: _Fleet,
    existing: _Existing,
) -> tuple[list[MonthCost], Totals]:
    """Cash flow section: USD per month by kind (capex when bought, power, hosting, rentals
    including reserved commitments) with the running total; and the horizon's totals."""
    p = ctx.problem
    T = len(ctx.months)
    capex, rental = [0.0] * T, [0.0] * T
    for r in rentals:
        rental[ctx.month_idx[r.month]] += r.usd
    for pch in purchases:
        capex[ctx.month_idx[pch.month]] += pch.total_usd
    cash: list[MonthCost] = []
    running = 0.0
    for t in range(T):
        committed, sales = existing.committed_usd[t], existing.sales_usd[t]
        tot = capex[t] + fleet.power_usd[t] + fleet.hosting_usd[t] + rental[t] + committed - sales
        running += tot
        cash.append(
            MonthCost(
                month=ctx.months[t],
                capex_usd=capex[t],
                power_usd=fleet.power_usd[t],
                hosting_usd=fleet.hosting_usd[t],
                rental_usd=rental[t],
                total_usd=tot,
                cumulative_usd=running,
                committed_usd=committed,
                sales_usd=sales,
            )
        )
    totals = Totals(
        capex_usd=sum(c.capex_usd for c in cash),
        power_usd=sum(c.power_usd for c in cash),
        hosting_usd=sum(c.hosting_usd for c in cash),
        rental_usd=sum(c.rental_usd for c in cash),
        committed_usd=sum(existing.committed_usd),
        sale_proceeds_usd=sum(existing.sales_usd),
        total_usd=running,
        reserved_usd=sum(r.usd for r in reservations),
        capex_budget_usd=p.budget.capex_usd,
        total_budget_usd=p.budget.total_usd,
    )
    return cash, totals


# ------------------------------------------------------------------ finance views


def _depreciation(ctx: _Context, p: Purchase) -> Depreciation:
    """One purchase's straight-line depreciation per plan year, its book value and its
    residual (resale) value at the horizon end."""
    fin, T = ctx.inputs.finance, len(ctx.months)
    t = ctx.month_idx[p.month]
    gpu = ctx.inputs.gpus[p.gpu]
    age = T - t
    card = economics.residual_share(gpu, age, fin.residual, fin.depreciation_years)
    chassis = economics.chassis_residual_share(age, fin.residual, fin.depreciation_years)
    return Depreciation(
        gpu=p.gpu,
        month=p.month,
        capex_usd=p.total_usd,
        years=fin.depreciation_years,
        by_year_usd=economics.depreciation_by_year(p.total_usd, t, fin.depreciation_years, T),
        book_value_end_usd=economics.book_value(p.total_usd, age, fin.depreciation_years),
        residual_value_usd=p.count * p.gpu_usd * card + p.nodes * p.chassis_usd * chassis,
    )


def _year_cost(
    ctx: _Context, y: int, cash: list[MonthCost], deps: list[Depreciation], existing: float
) -> YearCost:
    """One plan year; ``existing`` is the existing GPUs' value at the horizon end (in the
    cash view's residual; their depreciation and gains stay outside the plan's P&L)."""
    fin, T = ctx.inputs.finance, len(ctx.months)
    months = range(12 * y, min(T, 12 * y + 12))
    last = months[-1] == T - 1
    bought = sum(d.residual_value_usd for d in deps) if last else 0.0
    residual = bought + (existing if last else 0.0)
    book = sum(d.book_value_end_usd for d in deps) if last else 0.0
    gain = bought - book if last and fin.residual != "none" else 0.0
    dep = sum(d.by_year_usd[y] for d in deps)
    part = {k: sum(getattr(cash[t], k) for t in months) for k in _CASH_KINDS}
    committed = sum(cash[t].committed_usd for t in months)
    sales = sum(cash[t].sales_usd for t in months)
    pv = sum(cash[t].total_usd * economics.discount_factor(fin.discount_rate, t) for t in months)
    if last:
        pv -= residual * economics.discount_factor(fin.discount_rate, T)
    opex = part["power_usd"] + part["hosting_usd"] + part["rental_usd"] + committed
    return YearCost(
        year=y + 1,
        first_month=ctx.months[months[0]],
        last_month=ctx.months[months[-1]],
        **part,
        committed_usd=committed,
        sales_usd=sales,
        residual_usd=residual,
        cash_usd=sum(part.values()) + committed - sales - residual,
        pv_usd=pv,
        depreciation_usd=dep,
        gain_on_sale_usd=gain,
        pnl_cost_usd=dep + opex - gain,
    )


_CASH_KINDS = ("capex_usd", "power_usd", "hosting_usd", "rental_usd")


def _read_finance(
    ctx: _Context,
    purchases: list[Purchase],
    cash: list[MonthCost],
    totals: Totals,
    existing_residual: float = 0.0,
) -> tuple[list[YearCost], list[Depreciation], Totals]:
    """Per-year cash and P&L views, each purchase's depreciation, and the totals' present
    value, residual value and book value (:mod:`planner.physics.economics` conventions)."""
    deps = [_depreciation(ctx, p) for p in purchases]
    n_years = (len(ctx.months) + 11) // 12
    years = [_year_cost(ctx, y, cash, deps, existing_residual) for y in range(n_years)]
    totals = totals.model_copy(
        update={
            "npv_usd": sum(y.pv_usd for y in years),
            "residual_value_usd": sum(d.residual_value_usd for d in deps) + existing_residual,
            "book_value_usd": sum(d.book_value_end_usd for d in deps),
        }
    )
    return years, deps, totals


# ------------------------------------------------------------------ workloads


@dataclass
class _CostShares:
    """Each workload's cost (USD): its own rentals; owned costs (capex, idle power, hosting,
    busy power) shared among the workloads in proportion to the owned GPU-hours each used on
    that GPU type; reserved commitments shared in proportion to reserved GPU-hours used."""

    gpus: list[str]
    owned_hours: dict[tuple[str, str], float]  # (workload, gpu) -> owned GPU-hours
    busy_total: defaultdict[str, float]  # gpu -> owned GPU-hours of all workloads
    fixed_by_gpu: dict[str, float]
    power_by_gpu: dict[str, float]
    reserved_use: defaultdict[tuple[str, str], float]  # (workload, gpu) -> reserved GPU-hours
    reserved_use_total: defaultdict[str, float]  # gpu -> reserved GPU-hours of all workloads
    reserved_cost_by_gpu: defaultdict[str, float]  # gpu -> reserved commitments, USD
    rent_by_workload: defaultdict[str, float]  # workload -> rentals charged to it, USD

    def cost(self, w: str) -> float:
        cost = self.rent_by_workload[w]
        for g in self.gpus:
            h = self.owned_hours.get((w, g), 0.0)
            if h and self.busy_total[g]:
                cost += (
                    self.fixed_by_gpu[g] * h / self.busy_total[g]
                    + self.power_by_gpu[g] * h / self.busy_total[g]
                )
            rh = self.reserved_use.get((w, g), 0.0)
            if rh and self.reserved_use_total[g]:
                cost += self.reserved_cost_by_gpu[g] * rh / self.reserved_use_total[g]
        return cost


def _cost_shares(
    ctx: _Context,
    usage: _Usage,
    fleet: _Fleet,
    serving: _Serving,
    reservations: list[Reservation],
    rentals: list[Rental],
) -> _CostShares:
    """The shares of :class:`_CostShares`, from owned and reserved GPU-hours per workload."""
    out = _CostShares(
        gpus=list(ctx.inputs.gpus),
        owned_hours=usage.owned_hours,
        busy_total=defaultdict(float),
        fixed_by_gpu=fleet.fixed_by_gpu,
        power_by_gpu=fleet.power_by_gpu,
        reserved_use=defaultdict(float),
        reserved_use_total=defaultdict(float),
        reserved_cost_by_gpu=defaultdict(float),
        rent_by_workload=defaultdict(float),
    )
    for (_w, g), h in usage.owned_hours.items():
        out.busy_total[g] += h
    for r in reservations:
        out.reserved_cost_by_gpu[r.gpu] += r.usd
    for a in serving.allocations:
        if a.source != "owned" and ctx.cands.offers[a.source].kind == "reserved":
            sl = next(x for x in ctx.slices if x.name == a.slice)
            out.reserved_use[(a.workload, a.gpu)] += (
                a.replicas * a.gpus_per_replica * sl.hours_per_month
            )
    for (_w, g), h in out.reserved_use.items():
        out.reserved_use_total[g] += h
    for r in rentals:
        out.rent_by_workload[r.workload] += r.usd
    return out


def _train_result(
    ctx: _Context, job: TrainJob, key: str, training: _Training, costs: _CostShares
) -> WorkloadResult:
    """One training job's result: GPUs, layout, wall hours (owned and rented) against the
    window's hours, cost (USD) and USD per 1M trained tokens."""
    c = ctx.m.train_cand(job.name, key)
    est = c.estimate
    predicted = {"wall_hours": round(training.wall[job.name], 6)}
    target = {"wall_hours": ctx.cands.window_hours[job.name]}
    cost = costs.cost(job.name)
    owned_h = sum(
        a.wall_hours for a in training.allocations if a.workload == job.name and a.source == "owned"
    )
    return WorkloadResult(
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
            # Realized hours (planner/physics/realized.py): the plan provisions the quantile.
            "stack": job.stack,
            "confidence": job.confidence,
            "steady_wall_hours": est.steady_wall_hours,
            "wall_hours_median": est.wall_hours,
            "wall_hours_p10": est.wall_hours_p10,
            "wall_hours_p90": est.wall_hours_p90,
            "wall_hours_planned": c.wall_hours,
            "gpu_hours_median": est.gpu_hours,
            "gpu_hours_p10": est.gpu_hours_p10,
            "gpu_hours_p90": est.gpu_hours_p90,
            "gpu_hours_planned": c.wall_hours * c.gpus,
            "owned_wall_hours": owned_h,
            "rented_wall_hours": training.wall[job.name] - owned_h,
            **_train_place(ctx, training, job),
        },
        cost_usd=cost,
        cost_share=0.0,
        meets_target=at_most(predicted["wall_hours"], target["wall_hours"], tol.HOURS),
        predicted=predicted,
        target=target,
        slack={"wall_hours": target["wall_hours"] - predicted["wall_hours"]},
        tokens=job.tokens,
        usd_per_1m_tokens=cost / job.tokens * 1e6,
    )


def _train_place(ctx: _Context, training: _Training, job: TrainJob) -> dict[str, Any]:
    """Where the run lives: providers (``owned`` for the team's GPUs) and offers with their
    fabric, as the plan uses them, and the job's rules for both."""
    places, offers = set(), {}
    for a in training.allocations:
        if a.workload != job.name or a.wall_hours <= EPS:
            continue
        if a.source == "owned":
            places.add("owned")
            continue
        o = ctx.cands.offers[a.source]
        places.add(o.provider)
        offers[o.id] = {
            "provider": o.provider,
            "fabric": o.fabric,
            "gbps_per_gpu": o.fabric_gbps_per_gpu,
        }
    return {
        "providers": sorted(places),
        "offers": offers,
        "providers_rule": job.providers,
        "ethernet_allowed": job.ethernet,
    }


def _served_rps(serving: _Serving) -> dict[tuple[str, str, str], float]:
    """Requests/s served per (workload, month label, slice name), owned and rented."""
    served: dict[tuple[str, str, str], float] = {}
    for a in serving.allocations:
        k = (a.workload, a.month, a.slice)
        served[k] = served.get(k, 0) + a.replicas * a.rate_rps_per_replica
    return served


def _mix_covered(ctx: _Context, w: ServeWorkload, serving: _Serving) -> bool:
    """A mix: every bucket of every active (month, slice) gets its share of the demand over
    ``max_load`` in capacity."""
    given: defaultdict[tuple[str, str, str], float] = defaultdict(float)
    for a in serving.allocations:
        if a.workload == w.name:
            for b, v in a.bucket_capacity_rps.items():
                given[(a.month, a.slice, b)] += v
    for t in ctx.cands.active[w.name]:
        for s, sl in enumerate(ctx.slices):
            for b in w.buckets():
                need = b.share * ctx.cands.demand[(w.name, t, s)] / w.slo.max_load
                if not at_least(given[(ctx.months[t], sl.name, b.name)], need, RPS):
                    return False
    return True


def _demand_covered(
    ctx: _Context, w: ServeWorkload, served: dict[tuple[str, str, str], float]
) -> bool:
    """Whether every active (month, slice) of ``w`` is served at its demand (req/s)."""
    covered = True
    for t in ctx.cands.active[w.name]:
        for s in range(len(ctx.slices)):
            have = served.get((w.name, ctx.months[t], ctx.slices[s].name), 0.0)
            if have + 1e-6 < ctx.cands.demand[(w.name, t, s)] * (1 - 1e-7):
                covered = False
    return covered


def _serve_tokens(ctx: _Context, w: ServeWorkload) -> float:
    """Tokens (prompt + output) ``w`` serves over the horizon at its demand."""
    return sum(
        ctx.cands.demand[(w.name, t, s)] * ctx.slices[s].hours_per_month * 3600.0
        for t in ctx.cands.active[w.name]
        for s in range(len(ctx.slices))
    ) * sum(b.share * sum(b.shape()) for b in w.buckets())


def _replica_buckets(c: ServeCandidate) -> dict:
    """Per-bucket rates of a replica type, and which were measured (with their source)."""
    if not c.buckets:
        return {}
    return {
        "bucket_rates_rps": {b.bucket: b.rate for b in c.buckets},
        "measured": {
            b.bucket: f"{b.measured.note}: {b.measured.source} ({b.measured.as_of})"
            for b in c.buckets
            if b.measured is not None
        },
    }


def _request_mix(w: ServeWorkload) -> dict:
    """The mix as planned: each bucket's share and the shape its capacity is planned at."""
    if w.requests is None:
        return {}
    return {
        "requests": [
            {"name": b.name, "share": b.share, "prompt": b.shape()[0], "output": b.shape()[1]}
            for b in w.requests
        ]
    }


def _serve_result(
    ctx: _Context,
    w: ServeWorkload,
    serving: _Serving,
    served: dict[tuple[str, str, str], float],
    costs: _CostShares,
) -> WorkloadResult:
    """One serving workload's result: replica configurations used, peak GPUs, p95 latencies
    (ms) of the slowest configuration against the SLO, demand coverage, cost (USD) and USD per
    1M tokens served."""
    cl = [ctx.m.serve_cand(w.name, k) for k in sorted(serving.used.get(w.name, set()))]
    ttft = max((c.capacity.p95_ttft_ms for c in cl), default=float("inf"))
    tpot = max((c.capacity.p95_tpot_ms for c in cl), default=float("inf"))
    mixed = any(c.mixed for c in cl)
    covered = _mix_covered(ctx, w, serving) if mixed else _demand_covered(ctx, w, served)
    tokens = _serve_tokens(ctx, w)
    cost = costs.cost(w.name)
    predicted = {"p95_ttft_ms": ttft, "p95_tpot_ms": tpot}
    target = {"p95_ttft_ms": w.slo.p95_ttft_ms, "p95_tpot_ms": w.slo.p95_tpot_ms}
    replicas = [
        {
            "gpu": c.gpu,
            "gpus_per_replica": c.tp,
            "batch": c.capacity.batch,
            "rate_rps_per_replica": c.rate_rps,
            "tokens_per_s": c.capacity.tokens_per_s,
            **_replica_buckets(c),
        }
        for c in cl
    ]
    return WorkloadResult(
        name=w.name,
        kind="serve",
        model=w.model,
        gpu=sorted({c.gpu for c in cl}),
        gpus=int(round(serving.peak_gpus[w.name] + 0.4999)),
        config={
            "precision": w.precision,
            "replicas": replicas,
            "demand_covered": covered,
            "max_load": w.slo.max_load,
            "redundancy": w.redundancy,
            **_request_mix(w),
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


def _read_workloads(
    ctx: _Context,
    training: _Training,
    serving: _Serving,
    costs: _CostShares,
    total_usd: float,
) -> list[WorkloadResult]:
    """Workloads section: training jobs (those with a chosen candidate), then serving
    workloads, each with its share of the plan's total cost."""
    results = [
        _train_result(ctx, job, training.choice[job.name], training, costs)
        for job in ctx.problem.workloads.train
        if job.name in training.choice
    ]
    served = _served_rps(serving)
    results += [_serve_result(ctx, w, serving, served, costs) for w in ctx.problem.workloads.serve]
    for r in results:
        r.cost_share = r.cost_usd / total_usd if total_usd else 0.0
    return results


# ------------------------------------------------------------------ assumptions


def _problem_assumptions(ctx: _Context, result: SolveResult) -> list[Assumption]:
    """The problem file's identity, horizon, budget and site figures, and the solve."""
    inputs, p, site = ctx.inputs, ctx.problem, ctx.problem.site
    return [
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
        Assumption(
            group="site",
            key="hours_per_month",
            value=HOURS_PER_MONTH,
            unit="h",
            source="8760 h / 12",
        ),
        Assumption(group="solver", key="status", value=result.status),
        Assumption(group="solver", key="solver", value=result.solver),
        Assumption(group="solver", key="gap", value=result.gap),
        Assumption(group="solver", key="solve_seconds", value=round(result.seconds, 3), unit="s"),
        Assumption(group="solver", key="planner_version", value=__version__),
    ]


HEADROOM_SOURCE = (
    "capacity planned at this share of the SLO rate at peak (default 0.8: "
    "catalogs/NOTES.md, 'Serving headroom')"
)


def _demand_assumptions(ctx: _Context) -> list[Assumption]:
    """Hours per month of each load slice, and each serving workload's load per slice."""
    out = [
        Assumption(
            group="slices",
            key=sl.name,
            value=sl.hours_per_month,
            unit="h/month",
            source="daily load curve: 2 h peak, 6 h, 8 h, 8 h (planner.physics.demand)",
        )
        for sl in ctx.slices
    ]
    for w in ctx.problem.workloads.serve:
        out.append(
            Assumption(
                group=f"serve:{w.name}",
                key="max_load",
                value=w.slo.max_load,
                unit="of SLO capacity at peak",
                source=HEADROOM_SOURCE,
            )
        )
        out.append(
            Assumption(
                group=f"serve:{w.name}",
                key="redundancy",
                value=w.redundancy,
                unit="spare replicas",
                source=(
                    "the SLO holds at peak with this many replicas of each GPU type in use down "
                    "(a request mix routes buckets by type)"
                    if w.requests is not None
                    else "the SLO holds at peak with this many of the fastest replicas down"
                )
                + " (N+1 practice; catalogs/NOTES.md, 'Serving headroom')",
            )
        )
        for sl, load in zip(ctx.slices, ctx.cands.serve_loads[w.name], strict=True):
            out.append(
                Assumption(
                    group=f"load:{w.name}",
                    key=sl.name,
                    value=round(load, 6),
                    unit="x peak",
                    source=f"utilization {w.traffic.utilization} (mean/peak)",
                )
            )
    return out


def _train_measured(ctx: _Context) -> list[Assumption]:
    """Training configurations chosen whose throughput a profile measured."""
    out = []
    for (job, key), y in ctx.m.y.items():
        c = ctx.m.train_cand(job, key)
        if _v(y) > 0.5 and c.measured is not None:
            m = c.measured
            out.append(
                Assumption(
                    group=f"train:{job}",
                    key=f"{key}/tokens_per_s_per_gpu",
                    value=m.rate,
                    unit="tokens/s per GPU",
                    source=f"measured ({m.note}): {m.source} [{m.file}]",
                    as_of=m.as_of,
                )
            )
    return out


def _capacity_assumptions(ctx: _Context) -> list[Assumption]:
    """Req/s per replica of each replica type the plan uses for a request mix or from a
    measured profile, per bucket: measured (the profile's source) or modeled (the physics)."""
    used = {
        (w, key) for cells in (ctx.m.n, ctx.m.q) for (w, key, *_), x in cells.items() if _v(x) > 0.5
    }
    out = _train_measured(ctx)
    for w, key in sorted(used):
        c = ctx.m.serve_cand(w, key)
        for b in c.buckets:
            m = b.measured
            source = (
                f"measured ({m.note}): {m.source} [{m.file}]"
                if m
                else f"modeled: planner physics at the bucket's planned shape "
                f"(batch {b.capacity.batch}, p95 TTFT {b.capacity.p95_ttft_ms:.0f} ms, "
                f"TPOT {b.capacity.p95_tpot_ms:.1f} ms)"
            )
            out.append(
                Assumption(
                    group=f"serve:{w}",
                    key=f"{key}/{b.bucket}" if c.mixed else key,
                    value=b.rate,
                    unit="req/s per replica",
                    source=source if b.rate > 0 else f"cannot serve: {b.capacity.reason}",
                    as_of=m.as_of if m else "",
                )
            )
    return out


def _read_assumptions(
    ctx: _Context, result: SolveResult, rentals: list[Rental]
) -> list[Assumption]:
    """Assumptions section: problem and solver, every GPU figure, the price of each offer the
    plan rents (USD/GPU-h), the load slices and serving loads."""
    out = _problem_assumptions(ctx, result) + _finance_assumptions(ctx)
    out += _capacity_assumptions(ctx)
    for gpu in ctx.inputs.gpus.values():
        out.extend(gpu_assumptions(gpu))
    used_offers = {r.offer for r in rentals}
    for oid, o in ctx.cands.offers.items():
        if oid in used_offers or o.committed:
            out.append(
                Assumption(
                    group=f"offer:{oid}",
                    # a contract's price is paid in committed_usd, not per GPU-hour used
                    key="committed_usd_per_gpu_hour" if o.committed else "usd_per_gpu_hour",
                    value=o.usd_per_gpu_hour,
                    unit="USD/GPU-h",
                    source=f"{o.provider} {o.kind} {o.instance_type or ''}: {o.source}",
                    as_of=o.as_of,
                )
            )
            out.append(
                Assumption(
                    group=f"offer:{oid}",
                    key="fabric",
                    value=f"{o.fabric} {o.fabric_gbps_per_gpu:g} Gb/s per GPU"
                    if o.fabric and o.fabric_gbps_per_gpu
                    else (o.fabric or "not stated"),
                    source="the offer, else catalogs/fabrics.yaml by instance type",
                )
            )
    out.extend(_demand_assumptions(ctx))
    out.extend(_fleet_assumptions(ctx))
    return out


def _fleet_assumptions(ctx: _Context) -> list[Assumption]:
    """How the plan treats what the team already has (only when it has something):
    existing GPUs, their sale price and end value, contracts and discounts."""
    p = ctx.problem
    out = [
        Assumption(
            group=f"discount:{provider}",
            key="share_off_list_price",
            value=share,
            unit="of every listed price",
            source="offers.discounts (problem file): applied once, when offers are loaded",
        )
        for provider, share in sorted(p.offers.discounts.items())
    ]
    if p.fleet.owned:
        out += [
            Assumption(
                group="fleet",
                key="existing_gpus",
                value="no capex; power, hosting and colocation as bought cards",
                source="fleet.owned: in service before the horizon (bought) or from arrives; they "
                "came in their catalog server type (no chassis capex), each card drawing "
                "host_w / slots of its server's host watts",
            ),
            Assumption(
                group="fleet",
                key="sale_price",
                value="catalog purchase_usd x resale share at the card's age",
                source="fleet.owned with sell: allowed: sold in whole nodes at the start of a "
                "month; age from bought (or arrival) to the sale month; the catalog's used-market "
                "curve (catalogs/gpus.yaml residual), whatever finance.residual says",
            ),
            Assumption(
                group="fleet",
                key="end_value",
                value=f"finance.residual = {ctx.inputs.finance.residual}",
                source="existing GPUs still owned at the horizon end are valued like purchases: "
                "curve (used-market share at their age x catalog price), straight_line (book "
                "value from the catalog price) or none; present value only, not cash",
            ),
        ]
    if p.fleet.contracts:
        out.append(
            Assumption(
                group="fleet",
                key="contracts",
                value="count x 730 h x price for each month of the term inside the horizon",
                source="fleet.contracts: signed before the plan, paid used or not "
                "(totals.committed_usd); their capacity costs nothing at the margin",
            )
        )
    return out


# ------------------------------------------------------------------ the plan


def extract_plan(m: PlannerModel, result: SolveResult) -> Plan:
    """Read the solved model ``m`` into a Plan, section by section."""
    ctx = _context(m)
    usage = _Usage()
    buys = _read_purchases(ctx)
    serving = _read_serving(ctx, usage)
    training = _read_training(ctx, usage)
    reserved = _read_reservations(ctx)
    # Reserved rows after the others: the commitment is paid whether used or not.
    rentals = _read_rentals(ctx, usage.rent_hours) + reserved.rentals
    existing = _read_existing(ctx)
    fleet = _read_fleet(ctx, buys, usage.busy, rentals, reserved.active, existing)
    cash, totals = _read_cash_flow(
        ctx, buys.purchases, rentals, reserved.reservations, fleet, existing
    )
    years, deps, totals = _read_finance(ctx, buys.purchases, cash, totals, existing.residual_usd)
    costs = _cost_shares(ctx, usage, fleet, serving, reserved.reservations, rentals)
    p, inputs = ctx.problem, ctx.inputs
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
        repair_usd=result.repair_usd,
        repair_bound_usd=result.repair_bound_usd,
        horizon_start=p.horizon.start,
        months=ctx.months,
        hours_per_month=HOURS_PER_MONTH,
        slices=[
            Slice(name=s.name, hours_per_month=s.hours_per_month, load=s.load) for s in ctx.slices
        ],
        totals=totals,
        purchases=buys.purchases,
        sales=existing.sales,
        existing=existing.entries,
        commitments=existing.commitments,
        rentals=rentals,
        reservations=reserved.reservations,
        fleet=fleet.fleet,
        cash_flow=cash,
        years=years,
        depreciation=deps,
        discount_rate=ctx.inputs.finance.discount_rate,
        residual_mode=ctx.inputs.finance.residual,
        workloads=_read_workloads(ctx, training, serving, costs, totals.total_usd),
        serve_allocations=serving.allocations,
        train_allocations=training.allocations,
        dropped=[Dropped(**dataclasses.asdict(d)) for d in ctx.cands.dropped],
        assumptions=_read_assumptions(ctx, result, rentals),
    )
