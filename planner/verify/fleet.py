"""Check families of what the plan owns and holds: purchases, the fleet table and the caps.

:func:`check_purchases` judges each purchase (allowed GPU, whole nodes, licence, price) and the
``fleet`` table against the recomputed owned, busy and rented figures; :func:`check_caps` the
limits (budgets, power cap), owned GPUs in use against the owned fleet, reserved and capped
offers against what is committed or available, and the reservations themselves. Each reads the
:class:`~planner.verify.context.VerifyContext` only and never calls another family.
"""

from __future__ import annotations

from collections import defaultdict

from planner.base import tolerances as tol
from planner.inputs.catalog import GpuSpec
from planner.physics.demand import HOURS_PER_MONTH
from planner.plan.data import FleetMonth, Purchase

from .context import ReservationRow, VerifyContext
from .findings import ABS, REL, Checker, Findings, close
from .recompute import purchase_terms

H = HOURS_PER_MONTH

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
        not gpu.liquid_cooled or ctx.problem.site.liquid_cooling,
        f"{what}: {gpu.server} needs liquid cooling (site.liquid_cooling is false)",
    )
    order, paid, price = purchase_terms(ctx.inputs, pu.gpu, t0)
    card, chassis = gpu.purchase_usd.value * price, gpu.chassis_usd * price
    chk.check(
        close(pu.gpu_usd, card) and close(pu.chassis_usd, chassis),
        f"{what}: card {pu.gpu_usd:,.2f}, server {pu.chassis_usd:,.2f} != problem's "
        f"{card:,.2f}, {chassis:,.2f} (ordered month {order}, on the GPU's price path)",
    )
    months = ctx.months
    chk.check(
        order >= 0
        and pu.in_service in ("", pu.month)
        and pu.order_month == months[order]
        and pu.paid_month == months[max(paid, 0)],
        f"{what}: ordered {pu.order_month}, paid {pu.paid_month}; in service from {pu.month} "
        f"needs the order {t0 - order} month(s) before"
        + (f" ({months[order]})" if order >= 0 else ", before the horizon starts"),
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
    cost = max(pu.nodes, 0) * chassis + max(pu.count, 0) * card
    chk.check(
        close(cost, pu.total_usd),
        f"{what}: total {pu.total_usd:,.2f} != {pu.nodes} servers x {chassis:,.2f} "
        f"+ {pu.count} cards x {card:,.2f}",
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
    for (oid, _, t), gpus in ctx.train_held.items():
        if ctx.inputs.offers[oid].max_gpus is None:
            continue
        for s in ctx.sl_hours:  # a training block holds its GPUs the whole month
            capped[(oid, t, s)] += gpus
    for (oid, t, s), gpus in sorted(capped.items()):
        cap = ctx.inputs.offers[oid].max_gpus
        chk.check(
            cap is None or gpus <= cap * (1 + REL) + ABS,
            f"{ctx.months[t]} {s}: {gpus:.1f} GPUs rented from {oid} > {cap} available",
        )
    _check_provider_caps(chk, ctx)
    return chk.findings()


def provider_use(ctx: VerifyContext) -> dict[tuple[str, str, int, str], float]:
    """GPUs each (provider, GPU type) delivers per month and slice: serving replicas on its
    offers, training blocks in the months they run, reserved instances active."""
    out: defaultdict[tuple[str, str, int, str], float] = defaultdict(float)
    offers = ctx.inputs.offers
    for (oid, t, s), gpus in ctx.rented_use.items():
        out[(offers[oid].provider, offers[oid].gpu, t, s)] += gpus
    for (oid, _, t), gpus in ctx.train_held.items():
        o = offers[oid]
        if o.kind != "reserved":
            for s in ctx.sl_hours:
                out[(o.provider, o.gpu, t, s)] += gpus
    for (oid, t), gpus in ctx.res_active.items():
        for s in ctx.sl_hours:
            out[(offers[oid].provider, offers[oid].gpu, t, s)] += gpus
    return out


def _check_provider_caps(chk: Checker, ctx: VerifyContext) -> None:
    """offers.provider_caps: what one provider delivers of one GPU type, all offers together."""
    caps = {(c.provider, c.gpu): c.max_gpus for c in ctx.problem.offers.provider_caps}
    if not caps:
        return
    for (p, g, t, s), gpus in sorted(provider_use(ctx).items()):
        cap = caps.get((p, g))
        chk.check(
            cap is None or gpus <= cap * (1 + REL) + ABS,
            f"{ctx.months[t]} {s}: {gpus:.1f} {g} from {p} > its provider cap {cap}",
        )


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
        close(rv.usd_per_gpu_hour, row.price, abs_=1e-9),
        f"{what}: rate {rv.usd_per_gpu_hour} != offer price {row.price} (its start month's)",
    )
    chk.check(
        close(rv.hours, L * H) and close(rv.usd, row.usd),
        f"{what}: {rv.usd:,.2f} for {rv.hours:,.0f} h != {rv.gpus} GPUs x {L * H:,.0f} h x {row.price}",
    )
