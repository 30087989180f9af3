"""Recomputations the verifier makes from the problem, the catalogs and the physics alone.

Pure functions, no plan state: the ages and in-service months of the existing fleet, which
``fleet.owned`` entries a sale may come from, the contracts' cost per month, a purchase's value
at the horizon end, a serving workload's active months and demand, the progress per wall hour
of a training run spanning rented instances, and one GPU-month's power and hosting.
:class:`~planner.verify.context.VerifyContext` calls them row by row and adds up the results;
like the rest of the verifier they never touch the model builder or the solver.
"""

from __future__ import annotations

from planner.inputs.catalog import MULTI_NODE_FABRICS, GpuSpec, Offer
from planner.inputs.finance import FinanceTerms
from planner.inputs.months import month_label
from planner.inputs.problem import Inputs, Problem, ServeWorkload, TrainJob, month_index
from planner.inputs.schema import Site
from planner.optimize.candidates import planned_wall_hours
from planner.physics.calibration.values import default_calibration
from planner.physics.capacity import scale_train
from planner.physics.demand import (
    FLAT,
    HOURS_PER_MONTH,
    LoadSlice,
    mean_request_rate,
    peak_request_rate,
    workload_slices,
)
from planner.physics.economics import chassis_residual_share, it_kw, residual_share
from planner.physics.train import TrainEstimate, estimate_train, with_inter_node_gbs
from planner.plan.data import Rental, Sale

Cell = tuple[int, str]  # (month index, load slice)


def existing_age(problem: Problem, i: int, t: int) -> int:
    """Age in months, in month ``t`` of the horizon, of the GPUs of ``fleet.owned`` entry i."""
    o, start = problem.fleet.owned[i], problem.horizon.start
    if o.bought is not None:
        return month_index(o.bought, start) + t
    return t - month_index(start, o.arrives or start)


def existing_start(problem: Problem, i: int) -> int:
    """The first month of the horizon ``fleet.owned`` entry i is in service."""
    o = problem.fleet.owned[i]
    return 0 if o.arrives is None else month_index(problem.horizon.start, o.arrives)


def sale_entries(problem: Problem, left: dict[int, int], sale: Sale, t: int | None) -> list[int]:
    """The ``fleet.owned`` entries ``sale`` may come from: that GPU, ``sell: allowed``, in
    service in month ``t`` at the sale's age, with ``left[i]`` GPUs enough still unsold."""
    return [
        i
        for i, o in enumerate(problem.fleet.owned)
        if o.gpu == sale.gpu
        and o.sell == "allowed"
        and t is not None
        and t >= existing_start(problem, i)
        and existing_age(problem, i, t) == sale.age_months
        and left[i] >= sale.count
    ]


def contract_costs(problem: Problem, months: list[str]) -> list[tuple[int, float]]:
    """(month index, cost) of every contract in every month of its term inside the horizon,
    contract by contract and month by month."""
    out = []
    for c in problem.fleet.contracts:
        for t in range(len(months)):
            inside = month_index(c.start, months[t]) >= 0 >= month_index(c.end, months[t])
            if inside:
                out.append((t, c.count * HOURS_PER_MONTH * c.usd_per_gpu_hour))
    return out


def purchase_residual(
    gpu: GpuSpec, count: int, nodes: int, age: int, fin: FinanceTerms, price: float = 1.0
) -> float:
    """Resale value, at ``age`` months (the horizon end), of ``count`` cards in ``nodes``
    servers bought at ``price`` x the catalog's prices: the cards at the GPU's resale curve,
    the servers at the chassis'."""
    return max(count, 0) * gpu.purchase_usd.value * price * residual_share(
        gpu, age, fin.residual, fin.depreciation_years
    ) + max(nodes, 0) * gpu.chassis_usd * price * chassis_residual_share(
        age, fin.residual, fin.depreciation_years
    )


def serve_demand(
    problem: Problem, slices: list[LoadSlice], T: int, w: ServeWorkload
) -> tuple[int, int, dict[Cell, float]]:
    """A serving workload's first and last active month and the req/s the planner must cover
    in each of its (month, load slice) cells, by the demand model."""
    a = month_index(problem.horizon.start, w.start)
    b = T - 1 if w.end is None else min(T - 1, month_index(problem.horizon.start, w.end))
    mean = mean_request_rate(w.traffic.daily_active_users, w.traffic.requests_per_user_per_day)
    flat = slices == [FLAT]
    loads = {s.name: s.load for s in workload_slices(w.traffic.utilization, flat)}
    demand = {
        (t, s): peak_request_rate(mean, w.traffic.utilization, w.traffic.growth_per_month, t - a)
        * load
        for t in range(a, b + 1)
        for s, load in loads.items()
    }
    return a, b, demand


def fabric_speed(
    inputs: Inputs,
    j: TrainJob,
    gpu: str,
    k: int,
    est: TrainEstimate | None,
    factor: float,
    o: Offer,
) -> float | None:
    """Hours of the physics' progress per wall hour on ``o``: 1 inside one instance, else
    the ratio of planned hours on the owned cluster's network and on the offer's fabric
    (recomputed from the physics); None when the job may not span its instances.

    ``est`` is the job's estimate on ``k`` ``gpu`` (scaled by the measured ``factor``)."""
    if k <= o.gpus_per_instance:
        return 1.0
    calib = default_calibration()
    if o.fabric in MULTI_NODE_FABRICS and o.fabric_gbps_per_gpu:
        gbs = o.fabric_gbps_per_gpu / 8
    elif j.ethernet and o.fabric in ("ethernet", None):
        gbs = (o.fabric_gbps_per_gpu or calib.links.ethernet_gbps_per_gpu.value) / 8
    else:
        return None
    spanned = estimate_train(
        inputs.models[j.model],
        inputs.gpus[gpu],
        k,
        j.tokens,
        j.method,
        with_inter_node_gbs(calib, gbs),
        seq_len=j.seq_len,
        stack=j.stack,
    )
    if not spanned.fits or est is None:
        return None
    return planned_wall_hours(est, j) / planned_wall_hours(scale_train(spanned, factor), j)


def gpu_month_opex(
    site: Site,
    colo: float,
    gpu: GpuSpec,
    own: int,
    servers: int,
    existing: int,
    busy: float,
) -> tuple[float, float]:
    """(power, hosting) of one GPU type in one month: ``own`` cards (``existing`` of them
    from fleet.owned) in ``servers`` servers, busy ``busy`` GPU-hours; ``colo`` per kW-month."""
    e = site.power_usd_per_kwh * site.pue / 1000
    # host draw per server (existing cards: their share, host_w / slots) and card
    # idle all month; busy hours add up to TDP
    host = servers * gpu.host_w + existing * gpu.host_w / max(gpu.slots, 1)
    pw = e * (
        HOURS_PER_MONTH * (host + own * gpu.idle_w.value)
        + busy * (gpu.tdp_w.value - gpu.idle_w.value)
    )
    kw = it_kw(own, gpu.tdp_w.value, servers, gpu.host_w) + (
        existing * gpu.host_w / max(gpu.slots, 1) / 1000.0
    )
    hs = own * site.hosting_usd_per_gpu_month + kw * colo
    return pw, hs


def path_factor(change_per_year: float, month: int) -> float:
    """The verifier's own copy of a price path (independent of the model's): a price in month
    ``month`` relative to month 0, ``(1 + change)^(month / 12)``.

    >>> round(path_factor(-0.2, 12), 12), path_factor(0.0, 5)
    (0.8, 1.0)
    """
    return 1.0 if change_per_year == 0 else (1.0 + change_per_year) ** (month / 12.0)


def rent_change(inputs: Inputs, gpu: str) -> float:
    """The GPU's resolved rental path (per year)."""
    return inputs.market.rent(gpu)


def rent_price(inputs: Inputs, offer: Offer, month: int) -> float:
    """What one GPU-hour of ``offer`` costs in ``month`` at the margin: its price on its GPU's
    path, after its price steps (a contract's hours cost nothing: it is paid apart)."""
    label = month_label(inputs.problem.horizon.start, month)
    return offer.marginal_in(label) * path_factor(rent_change(inputs, offer.gpu), month)


def purchase_terms(inputs: Inputs, gpu: str, in_service: int) -> tuple[int, int, float]:
    """(order month, capex month, price factor) of a purchase in service from month
    ``in_service``, recomputed from the problem: ordered the GPU's lead time before, paid at
    the order (or on delivery, ``finance.capex_at``), at the order month's price on its path."""
    order = in_service - inputs.market.lead_months(gpu)
    paid = order if inputs.finance.capex_at == "order" else in_service
    return order, paid, path_factor(inputs.market.buy(gpu), max(order, 0))


def rental_row_price(inputs: Inputs, reservations: list, r: Rental, o: Offer, t: int) -> float:
    """The recomputed price of a rental row: its month's on the GPU's path; a reserved row,
    the start-month price of a reservation of its offer active in month ``t`` (the one the row
    claims, when several are; ``reservations`` are the verifier's rows, each with its
    recomputed ``price``)."""
    if o.kind != "reserved":
        return rent_price(inputs, o, t)
    prices = [
        row.price
        for row in reservations
        if row.offer is o and row.t0 is not None and row.t0 <= t < row.t0 + row.term
    ]
    if not prices:
        return rent_price(inputs, o, t)
    return min(prices, key=lambda p: abs(p - r.usd_per_gpu_hour))
