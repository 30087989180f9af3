"""The problem's limits on the whole plan: the capex and total budgets (``budget_capex``,
``budget_total``), the site's power cap (``power_cap``, existing cards included until sold) and
the GeForce licence (``licence``).
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from planner.inputs.catalog import purchase_barrier
from planner.optimize.model.core import EQ, LE, PlannerModel, existing_in_service
from planner.optimize.model.families import row_name
from planner.optimize.model.objective import nominal_total


def add_budget_constraints(m: PlannerModel) -> None:
    """budget_capex and (optional) budget_total."""
    b = m.inputs.problem.budget
    m.add(m.cost_terms["capex"], LE, b.capex_usd, row_name("budget_capex"))
    if b.total_usd is not None:
        m.add(nominal_total(m), LE, b.total_usd, row_name("budget_total"))


def add_site_constraints(m: PlannerModel) -> None:
    """power_cap per month and licence per consumer GPU type."""
    site = m.inputs.problem.site
    T = len(m.cands.months)
    if site.power_cap_kw is not None:
        kw: dict[pulp.LpVariable, float] = defaultdict(float)
        for t in range(T):
            # servers and cards bought up to month t: host watts per server, TDP per card
            for g, gpu in m.inputs.gpus.items():
                kw[m.buy[(g, t)]] += gpu.host_w * site.pue / 1000
                for x, n in m.cards[(g, t)].items():
                    kw[x] += n * gpu.tdp_w.value * site.pue / 1000
            terms, existing_kw = dict(kw), 0.0
            for g, gpu in m.inputs.gpus.items():  # existing cards draw too, until sold
                per_card = (gpu.tdp_w.value + gpu.host_w / max(gpu.slots, 1)) * site.pue / 1000
                existing_kw += existing_in_service(m, g, t) * per_card
                for x, n in m.sold.get((g, t), {}).items():
                    terms[x] = terms.get(x, 0.0) - n * per_card
            m.add(
                terms, LE, site.power_cap_kw - existing_kw, row_name("power_cap", m.cands.months[t])
            )
    for g, gpu in m.inputs.gpus.items():  # GeForce licence, liquid cooling
        if purchase_barrier(gpu, site.consumer_gpus_allowed, site.liquid_cooling):
            m.add([(m.buy[(g, t)], 1) for t in range(T)], EQ, 0, row_name("licence", g))
