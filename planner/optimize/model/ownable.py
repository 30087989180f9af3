"""Which GPU types the model may buy, and how many: a size reduction that leaves the optimum
unchanged. A type can be owned at all unless its licence forbids it or one node is over the
capex budget or the power cap (:func:`ownable_nodes`), and owning it must be able to beat
renting its work (:func:`worth_owning`); otherwise ``buy`` is 0 and the type gets no owned
replica or training variables.
"""

from __future__ import annotations

import math

from planner.inputs.catalog import GpuSpec, purchase_barrier
from planner.optimize.candidates import offer_restricted as restricted
from planner.optimize.candidates import rental_gpus
from planner.optimize.model.core import PlannerModel, buy_factor, rent_factor
from planner.optimize.model.objective import owned_coefficients, power_coefficients
from planner.optimize.model.training import train_offers
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH


def node_kw(gpu: GpuSpec, pue: float) -> float:
    """kW the smallest purchase draws at the meter: one server with one node of cards
    (``(host_w + n_g tdp) PUE / 1000``)."""
    return (gpu.host_w + gpu.node_gpus * gpu.tdp_w.value) * pue / 1000


def ownable_nodes(m: PlannerModel) -> dict[str, int | None]:
    """Most nodes of each GPU type any feasible plan can buy (None = no bound); 0 means the
    type can never be owned (licence, one node over the capex budget or the power cap)."""
    p = m.inputs.problem
    site, b = p.site, p.budget
    money = b.capex_usd if b.total_usd is None else min(b.capex_usd, b.total_usd)
    out: dict[str, int | None] = {}
    for g, gpu in m.inputs.gpus.items():
        bound: float = math.inf
        if purchase_barrier(gpu, site.consumer_gpus_allowed, site.liquid_cooling):
            bound = 0
        # the cheapest purchase: one server holding one node of cards, at the lowest price
        # of its path over the horizon (a path is monotone: its low is at one end)
        cheapest = min(1.0, buy_factor(m, g, len(m.cands.months) - 1))
        node_cost = (gpu.chassis_usd + gpu.node_gpus * gpu.purchase_usd.value) * cheapest
        if node_cost > 0:
            bound = min(bound, math.floor(money / node_cost * (1 + 1e-9)))
        kw = node_kw(gpu, site.pue)
        if site.power_cap_kw is not None and kw > 0:
            bound = min(bound, math.floor(site.power_cap_kw / kw * (1 + 1e-9)))
        out[g] = None if math.isinf(bound) else int(bound)
    return out


def rent_value_per_gpu_hour(m: PlannerModel) -> dict[str, float]:
    """Per GPU type, the most an hour of one owned GPU can save in rentals (inf if some use
    of it has no uncapped rental to fall back on).

    An owned replica of serving candidate ``r`` can always be replaced, replica for replica,
    by ``max(1, mu_r / mu_r')`` rented replicas of a candidate ``r'`` of the same workload on
    an uncapped non-reserved offer ``o'`` (as many req/s, at least as many replicas for the
    floor), at ``p_o' m_r' max(1, mu_r / mu_r')`` per hour, i.e. per GPU-hour of ``r``
    divided by ``m_r``; an owned wall hour of training candidate ``c`` by one rented on-demand
    wall hour of the same candidate at ``p_o ceil(k/u_o) u_o``, per GPU-hour divided by ``k``.
    Prices on a rising path are taken at their highest (the horizon's last month), so the
    value stays an upper bound in every month.
    """
    spot_ok = m.inputs.problem.offers.spot_for_serving
    plain = [
        o
        for o in m.cands.offers.values()
        if o.kind != "reserved"
        and o.max_gpus is None
        and not o.price_steps  # a dated price: left out, the bound stays an upper one
        and (o.kind != "spot" or spot_ok)
    ]
    value: dict[str, float] = {g: 0.0 for g in m.inputs.gpus}
    for cands in m.cands.serve.values():
        options = []  # (price per replica-hour, req/s) of the workload's uncapped rentals
        for c in cands:
            prices = [
                o.usd_per_gpu_hour for o in plain if o.gpu == c.gpu and o.gpus_per_instance >= c.tp
            ]
            if prices and c.rate_rps > 0:
                options.append((min(prices) * c.tp, c.rate_rps))
        for c in cands:
            if c.gpu not in value or c.rate_rps <= 0:
                continue
            best = min((p * max(1.0, c.rate_rps / mu) for p, mu in options), default=math.inf)
            value[c.gpu] = max(value[c.gpu], best / c.tp)
    for cands in m.cands.train.values():
        for c in cands:
            if c.gpu not in value:
                continue
            # an owned wall hour is replaced by 1/f rented ones (a slower fabric), uncapped
            prices = [
                o.usd_per_gpu_hour * rental_gpus(c.gpus, o) / c.gpus / f
                for o, f in train_offers(m, c)
                if o.kind != "spot" and not restricted(o)
            ]
            value[c.gpu] = max(value[c.gpu], min(prices, default=math.inf))
    last = len(m.cands.months) - 1
    rising = max((max(1.0, rent_factor(m, g, last)) for g in m.inputs.gpus), default=1.0)
    return {g: v * rising for g, v in value.items()}


def worth_owning(m: PlannerModel) -> dict[str, bool]:
    """Per GPU type, whether owning any of it can ever beat renting.

    A card bought in month t0 costs, in present value, at least its share of a server plus its
    own capex, idle power and hosting less its residual value (per server figures / slots:
    a server holds at most ``slots`` cards, and a server's net cost is not negative), and can
    save at most ``sum_{t >= t0} d_t H (V_g - busy power)`` in rentals (``V_g`` from
    :func:`rent_value_per_gpu_hour`, ``d_t`` the discount factor). When for every t0 the cost
    is at least the saving, a plan that owns the type is matched by the same plan with every
    one of those GPUs removed and all their work rented instead (busy GPU-hours never exceed
    owned GPU-hours), so the type never needs ``n``, ``a`` or ``z`` and ``buy`` is 0.
    (Only the whole type: removing some nodes can force whole replicas or a whole training
    month onto rentals, which the per-GPU saving does not cover.)
    """
    site = m.inputs.problem.site
    e = economics.meter_usd_per_wh(site.power_usd_per_kwh, site.pue)
    T = len(m.cands.months)
    value = rent_value_per_gpu_hour(m)
    out: dict[str, bool] = {}
    for g, gpu in m.inputs.gpus.items():
        if math.isinf(value[g]):
            out[g] = True
            continue
        _, per_busy = power_coefficients(gpu, e)
        hourly = HOURS_PER_MONTH * max(0.0, value[g] - per_busy)
        out[g] = any(_owning_may_pay(m, gpu, t0, hourly) for t0 in range(T))
    return out


def _owning_may_pay(m: PlannerModel, gpu: GpuSpec, t0: int, hourly: float) -> bool:
    """Whether one card bought in month ``t0`` may save more than it costs (see
    :func:`worth_owning`): in present value, or, when ``budget.total_usd`` caps undiscounted
    spend, in cash (renting instead must not break that budget)."""
    k = owned_coefficients(m, gpu, t0)
    T, r = len(m.cands.months), m.inputs.finance.discount_rate

    def per_card(parts: tuple[tuple[float, float], ...]) -> float:
        return sum(p[0] for p in parts) / gpu.slots + sum(p[1] for p in parts)

    pv_cost = per_card((k.pv_capex, k.pv_power, k.pv_hosting)) - per_card((k.pv_residual,))
    if hourly * economics.annuity_factor(r, t0, T - t0) > pv_cost * (1 - 1e-9):
        return True
    if m.inputs.problem.budget.total_usd is None:
        return False
    cash_cost = per_card((k.capex, k.power, k.hosting))
    return hourly * (T - t0) > cash_cost * (1 - 1e-9)
