"""Stage 5, second step: what the team holds month by month, read from the solved model.

The existing GPUs (in service, sold, their value at the horizon end) and the contracts signed
before the plan; reservations and their rental rows; and the fleet per GPU type and month
with the owned fleet's power and hosting cost. Each reader takes the
:class:`~planner.plan.readout.ReadContext` and what earlier readers found.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from planner.inputs.problem import contract_offer_id
from planner.optimize.candidates import offer_months
from planner.optimize.model import existing_age, existing_start, power_coefficients
from planner.optimize.model.core import rent_factor
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH
from planner.plan.data import (
    Commitment,
    ExistingGpus,
    FleetMonth,
    Rental,
    Reservation,
    Sale,
)
from planner.plan.readout import Purchases, ReadContext, var_int

# ------------------------------------------------------------------ the existing fleet


@dataclass
class Existing:
    in_service: defaultdict[tuple[str, int], int]  # (gpu, t) -> existing cards still owned
    sold: defaultdict[tuple[str, int], int]  # (gpu, t) -> existing cards sold by month t
    sales: list[Sale]
    sales_usd: list[float]  # per month, cash in
    committed_usd: list[float]  # per month, contracts
    residual_usd: float  # existing cards' value at the horizon end
    entries: list[ExistingGpus] = field(default_factory=list)
    commitments: list[Commitment] = field(default_factory=list)


def read_existing(ctx: ReadContext) -> Existing:
    """Existing GPUs in service and sold per month, each sale at the card's resale share at
    its age x its catalog price, their value at the horizon end (by ``finance.residual``, as
    for purchases), and contracts' cost per month."""
    T, fin, m = len(ctx.months), ctx.inputs.finance, ctx.m
    out = Existing(defaultdict(int), defaultdict(int), [], [0.0] * T, [0.0] * T, 0.0)
    for i, o in enumerate(ctx.problem.fleet.owned):
        if o.gpu not in ctx.inputs.gpus:
            continue
        gpu, t0 = ctx.inputs.gpus[o.gpu], existing_start(m, i)
        gone = 0
        for t in range(t0, T):
            v = m.sell.get((i, t))
            n = var_int(v) * gpu.node_gpus if v is not None else 0
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


def _read_commitments(ctx: ReadContext, out: Existing) -> None:
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
class Reservations:
    reservations: list[Reservation]
    rentals: list[Rental]  # one "(reserved)" row per reservation and month of its term
    active: defaultdict[tuple[str, int], int]  # (gpu, t) -> reserved GPUs


def read_reservations(ctx: ReadContext) -> Reservations:
    """Reservations section: GPUs committed per offer and start month and the term's cost
    (USD, every hour paid, used or not); and one rental row per month of the term."""
    H = HOURS_PER_MONTH
    T = len(ctx.months)
    out = Reservations([], [], defaultdict(int))
    for (oid, t0), v in ctx.m.res.items():
        count = var_int(v)
        if not count:
            continue
        o = ctx.cands.offers[oid]
        L = o.term_months or 1
        gpus = count * o.gpus_per_instance
        # signed at its start month's price on the GPU's path, fixed for the term
        price = o.price_in(ctx.months[t0]) * rent_factor(ctx.m, o.gpu, t0)
        out.reservations.append(
            Reservation(
                offer=oid,
                provider=o.provider,
                gpu=o.gpu,
                start_month=ctx.months[t0],
                term_months=L,
                gpus=gpus,
                usd_per_gpu_hour=price,
                hours=L * H,
                usd=gpus * L * H * price,
            )
        )
        # billed monthly, or part of the term up front in its first month (upfront_share)
        bills = economics.term_bills(L, o.upfront_share)
        for t in range(t0, min(T, t0 + L)):
            out.active[(o.gpu, t)] += gpus
            hours = gpus * H * bills[t - t0]
            out.rentals.append(
                Rental(
                    provider=o.provider,
                    offer=oid,
                    gpu=o.gpu,
                    kind="reserved",
                    month=ctx.months[t],
                    workload="(reserved)",
                    gpu_hours=hours,
                    usd_per_gpu_hour=price,
                    usd=hours * price,
                )
            )
    return out


# ------------------------------------------------------------------ fleet and power


@dataclass
class Fleet:
    fleet: list[FleetMonth]
    power_usd: list[float]  # month t -> owned fleet's power (idle + host + busy), USD
    hosting_usd: list[float]  # month t -> hosting of the owned fleet, USD
    power_by_gpu: defaultdict[str, float]  # GPU type -> busy power over the horizon, USD
    fixed_by_gpu: defaultdict[str, float]  # GPU type -> capex + idle power + hosting, USD


def read_fleet(
    ctx: ReadContext,
    buys: Purchases,
    busy: defaultdict[tuple[str, int], float],
    rentals: list[Rental],
    reserved_active: defaultdict[tuple[str, int], int],
    existing: Existing,
) -> Fleet:
    """Fleet section: per GPU type and month, GPUs bought / owned / reserved, owned busy and
    rented GPU-hours, utilization and full-load kW at the meter; and the owned fleet's power
    and hosting USD per month and per GPU type."""
    site = ctx.problem.site
    H = HOURS_PER_MONTH
    T = len(ctx.months)
    e = economics.meter_usd_per_wh(site.power_usd_per_kwh, site.pue)
    rented_by_gpu: defaultdict[tuple[str, int], float] = defaultdict(float)
    for r in rentals:
        rented_by_gpu[(r.gpu, ctx.month_idx[r.month])] += r.gpu_hours
    out = Fleet([], [0.0] * T, [0.0] * T, defaultdict(float), defaultdict(float))
    colo = ctx.inputs.finance.colo_usd_per_kw_month
    for g, gpu in ctx.inputs.gpus.items():
        _, per_busy = power_coefficients(gpu, e)
        for t in range(T):
            ex = existing.in_service[(g, t)]
            own, servers = buys.owned[(g, t)] + ex, buys.servers[(g, t)]
            b = busy[(g, t)]
            # existing cards bring their share of their servers' host watts (host_w / slots)
            idle, hs, kw = economics.fleet_month_opex(
                gpu, e, site.hosting_usd_per_gpu_month, colo, own, servers, ex, b
            )
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
