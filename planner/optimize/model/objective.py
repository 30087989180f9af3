"""The objective's pieces: per-unit cost coefficients of owning (a card's power, a purchase's
capex, power, hosting and residual value, an existing card's running cost) and the cost terms
the builder sums from them: owned, rented and existing-fleet costs, nominal and in present
value, the objective (``npv_cost``) and the nominal total the budgets cap.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pulp

from planner.inputs.catalog import GpuSpec
from planner.optimize.candidates import rental_gpus
from planner.optimize.model.core import (
    PlannerModel,
    buy_factor,
    capex_month,
    existing_age,
    existing_start,
    offer_term_months,
    rent_factor,
)
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH


def power_coefficients(gpu: GpuSpec, e: float) -> tuple[float, float]:
    """Dollars per owned GPU-month (idle + host) and per busy GPU-hour (extra over idle).

    ``e`` is $/Wh at the meter (price x PUE / 1000).

    >>> from types import SimpleNamespace as NS
    >>> g = NS(tdp_w=NS(value=700), idle_w=NS(value=100), host_w_per_gpu=NS(value=500))
    >>> power_coefficients(g, 0.12 * 1.3 / 1000)
    (68.328, 0.0936)
    """
    idle = gpu.idle_w.value + gpu.host_w_per_gpu.value
    per_month = round(economics.power_usd(e, idle), 9)
    per_busy_hour = round(economics.power_usd(e, 0.0, 1.0, gpu.tdp_w.value - gpu.idle_w.value), 9)
    return per_month, per_busy_hour


@dataclass(frozen=True)
class OwnedCoefficients:
    """Cost of one server and of one card bought at the start of month ``t``, per kind.

    Nominal dollars over the rest of the horizon (``rem = T - t`` months):
    capex ``K^srv`` / ``K^card``; idle power ``H e rem`` x (host watts / card idle watts);
    hosting ``rem`` x (per-GPU fee for a card; colocation $/kW-month x kW of host / card TDP);
    residual value at the horizon end (resale share of the card, chassis share of the chassis).
    ``pv_*`` are the same cash discounted monthly (:mod:`planner.physics.economics`).
    """

    capex: tuple[float, float]
    power: tuple[float, float]
    hosting: tuple[float, float]
    residual: tuple[float, float]
    pv_capex: tuple[float, float]
    pv_power: tuple[float, float]
    pv_hosting: tuple[float, float]
    pv_residual: tuple[float, float]


def owned_coefficients(m: PlannerModel, gpu: GpuSpec, t: int) -> OwnedCoefficients:
    """(per server, per card) costs of owning from month ``t`` (in service); see
    :class:`OwnedCoefficients`. The purchase was ordered ``lead`` months before, at the price
    of its order month on the GPU's price path, and paid then (or on delivery,
    ``finance.capex_at``); the residual is a share of the price paid."""
    site, fin = m.inputs.problem.site, m.inputs.finance
    T, r = len(m.cands.months), fin.discount_rate
    rem = T - t
    e = economics.meter_usd_per_wh(site.power_usd_per_kwh, site.pue)
    order, paid = capex_month(m, gpu.id, t)
    price = buy_factor(m, gpu.id, order)
    host_w, chassis = gpu.host_w, gpu.chassis_usd * price
    card_usd = gpu.purchase_usd.value * price
    pv_now = economics.discount_factor(r, paid)
    months_pv = economics.annuity_factor(r, t, rem)
    month_power = (economics.power_usd(e, host_w), economics.power_usd(e, gpu.idle_w.value))
    colo, fee = fin.colo_usd_per_kw_month, site.hosting_usd_per_gpu_month
    month_host = (
        economics.hosting_usd(0, fee, economics.it_kw(0, 0.0, 1, host_w), colo),
        economics.hosting_usd(1, fee, economics.it_kw(1, gpu.tdp_w.value, 0, 0.0), colo),
    )
    age, years, mode = rem, fin.depreciation_years, fin.residual
    resid = (
        chassis * economics.chassis_residual_share(age, mode, years),
        card_usd * economics.residual_share(gpu, age, mode, years),
    )
    pv_end = economics.discount_factor(r, T)
    return OwnedCoefficients(
        capex=(chassis, card_usd),
        power=(month_power[0] * rem, month_power[1] * rem),
        hosting=(month_host[0] * rem, month_host[1] * rem),
        residual=resid,
        pv_capex=(chassis * pv_now, card_usd * pv_now),
        pv_power=(month_power[0] * months_pv, month_power[1] * months_pv),
        pv_hosting=(month_host[0] * months_pv, month_host[1] * months_pv),
        pv_residual=(resid[0] * pv_end, resid[1] * pv_end),
    )


def _owned_cost_terms(m: PlannerModel) -> dict[str, dict[pulp.LpVariable, float]]:
    """Nominal and present-value owned costs by kind, on buy (servers) and card variables."""
    site = m.inputs.problem.site
    e = economics.meter_usd_per_wh(site.power_usd_per_kwh, site.pue)
    r = m.inputs.finance.discount_rate
    kinds = ("capex", "power", "hosting", "residual")
    out: dict[str, dict[pulp.LpVariable, float]] = {
        k: defaultdict(float) for k in (*kinds, *(f"pv_{k}" for k in kinds))
    }
    for g, gpu in m.inputs.gpus.items():
        _, per_busy = power_coefficients(gpu, e)
        for t in range(len(m.cands.months)):
            k = owned_coefficients(m, gpu, t)
            for kind in (*kinds, *(f"pv_{k}" for k in kinds)):
                per_server, per_card = getattr(k, kind)
                out[kind][m.buy[(g, t)]] += per_server
                for x, n in m.cards[(g, t)].items():
                    out[kind][x] += per_card * n
            pv_t = economics.discount_factor(r, t)
            for x, coef in m.busy[(g, t)].items():
                out["power"][x] += per_busy * coef
                out["pv_power"][x] += per_busy * coef * pv_t
    return out


def _rental_cost_terms(m: PlannerModel) -> tuple[list, list]:
    """(nominal, present value) rental terms: hours paid in their month, a reservation
    monthly over its term."""
    r = m.inputs.finance.discount_rate
    slices = m.cands.slices
    nominal: list[tuple[pulp.LpVariable, float]] = []
    pv: list[tuple[pulp.LpVariable, float]] = []
    for (job, key, oid, t), v in m.r.items():
        c = m.train_cand(job, key)
        o = m.cands.offers[oid]
        usd = o.marginal_in(m.cands.months[t]) * rental_gpus(c.gpus, o) * rent_factor(m, o.gpu, t)
        nominal.append((v, usd))
        pv.append((v, usd * economics.discount_factor(r, t)))
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    for (w, key, oid, t, s), q in m.q.items():
        o = m.cands.offers[oid]
        if o.kind != "reserved":
            hours = index[(w, key)].tp * slices[s].hours_per_month
            usd = o.marginal_in(m.cands.months[t]) * hours * rent_factor(m, o.gpu, t)
            nominal.append((q, usd))
            pv.append((q, usd * economics.discount_factor(r, t)))
    for (oid, t0), v in m.res.items():
        o = m.cands.offers[oid]
        L = o.term_months or 1
        # a reservation is priced at its start month and stays as signed for its term
        month = o.price_in(m.cands.months[t0]) * o.gpus_per_instance * HOURS_PER_MONTH
        month *= rent_factor(m, o.gpu, t0)
        nominal.append((v, month * L))
        pv.append((v, month * economics.term_pv_factor(r, t0, L, o.upfront_share)))
    return nominal, pv


def existing_month_costs(m: PlannerModel, gpu: GpuSpec) -> tuple[float, float]:
    """(power, hosting) USD per existing card per month in service: idle watts of the card
    and its share of the host (``host_w / slots``) at the site's power price and PUE; the
    per-GPU fee plus colocation on its TDP and host share (busy power is in ``busy``)."""
    site, fin = m.inputs.problem.site, m.inputs.finance
    e = economics.meter_usd_per_wh(site.power_usd_per_kwh, site.pue)
    power, hosting, _ = economics.fleet_month_opex(
        gpu, e, site.hosting_usd_per_gpu_month, fin.colo_usd_per_kw_month, 1, 0, 1, 0.0
    )
    return power, hosting


def _existing_cost_terms(m: PlannerModel) -> dict[str, pulp.LpAffineExpression]:
    """Nominal and present-value terms of ``fleet``: power and hosting of existing cards in
    service (a constant, less what each sale saves), sale proceeds (negative: the card's
    resale share at its age x its catalog price), their residual value at the horizon end,
    and contracts' committed cost (a constant)."""
    T, fin = len(m.cands.months), m.inputs.finance
    r = fin.discount_rate
    d = [economics.discount_factor(r, t) for t in range(T + 1)]
    out = {
        k: pulp.LpAffineExpression()
        for k in (
            "power",
            "hosting",
            "sales",
            "residual",
            "committed",
            "pv_power",
            "pv_hosting",
            "pv_sales",
            "pv_residual",
            "pv_committed",
        )
    }
    for i, o in enumerate(m.inputs.problem.fleet.owned):
        if o.gpu not in m.inputs.gpus:
            continue
        gpu, t0 = m.inputs.gpus[o.gpu], existing_start(m, i)
        power, hosting = existing_month_costs(m, gpu)
        price = gpu.purchase_usd.value
        end_value = price * economics.residual_share(
            gpu, existing_age(m, i, T), fin.residual, fin.depreciation_years
        )
        for kind, per in (("power", power), ("hosting", hosting)):
            out[kind] += o.count * per * (T - t0)
            out[f"pv_{kind}"] += o.count * per * sum(d[t0:T])
        out["residual"] += o.count * end_value
        out["pv_residual"] += o.count * end_value * d[T]
        unit = gpu.node_gpus
        for t in range(t0, T):
            v = m.sell.get((i, t))
            if v is None:
                continue
            share = economics.sale_share(gpu, existing_age(m, i, t))
            for kind, per in (("power", power), ("hosting", hosting)):
                out[kind] += -unit * per * (T - t) * v
                out[f"pv_{kind}"] += -unit * per * sum(d[t:T]) * v
            out["sales"] += -unit * price * share * v
            out["pv_sales"] += -unit * price * share * d[t] * v
            out["residual"] += -unit * end_value * v
            out["pv_residual"] += -unit * end_value * d[T] * v
    for o in m.cands.offers.values():
        if not o.committed:
            continue
        month = o.usd_per_gpu_hour * (o.max_gpus or 0) * HOURS_PER_MONTH
        for t in offer_term_months(m, o):
            out["committed"] += month
            out["pv_committed"] += month * d[t]
    return out


def build_cost_terms(m: PlannerModel) -> None:
    """Nominal cost terms (capex, power, hosting, rental), their present values and the
    residual value of owned hardware at the horizon end."""
    owned = _owned_cost_terms(m)
    rental, pv_rental = _rental_cost_terms(m)
    fleet = _existing_cost_terms(m)
    m.cost_terms = {
        k: pulp.LpAffineExpression(owned[k]) + fleet.get(k, 0)
        for k in ("capex", "power", "hosting")
    } | {
        "rental": pulp.LpAffineExpression(rental),
        "committed": fleet["committed"],
        "sales": fleet["sales"],
    }
    m.pv_terms = {
        k: pulp.LpAffineExpression(owned[f"pv_{k}"]) + fleet.get(f"pv_{k}", 0)
        for k in ("capex", "power", "hosting")
    } | {
        "rental": pulp.LpAffineExpression(pv_rental),
        "committed": fleet["pv_committed"],
        "sales": fleet["pv_sales"],
        "residual": -(pulp.LpAffineExpression(owned["pv_residual"]) + fleet["pv_residual"]),
    }
    m.residual = pulp.LpAffineExpression(owned["residual"]) + fleet["residual"]


def present_value(m: PlannerModel) -> pulp.LpAffineExpression:
    """The objective: every term's present value (constants of ``fleet`` included)."""
    return pulp.lpSum(m.pv_terms.values())


def nominal_total(m: PlannerModel) -> pulp.LpAffineExpression:
    """Undiscounted spend over the horizon (capex + power + hosting + rental + committed
    contracts - sale proceeds), what ``budget.total_usd`` caps; the objective is its present
    value less the residual."""
    return pulp.lpSum(m.cost_terms.values())
