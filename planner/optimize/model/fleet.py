"""The fleet: purchases (``buy``, ``cards``, ``own``), the GPUs owned before the plan and their
sales (``sell``, ``sell_at_most``), the servers partial-fill cards sit in (``server_slots``,
``server_used``) and the owned capacity every replica and training hour draws on
(``capacity``, which also builds the busy GPU-hours the power cost is charged on).
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from planner.optimize.model.core import (
    EQ,
    LE,
    PlannerModel,
    existing_in_service,
    existing_start,
    lead_months,
    minus_own,
    nid,
)
from planner.optimize.model.families import row_name
from planner.optimize.model.ownable import ownable_nodes, worth_owning


def add_purchase_variables(m: PlannerModel) -> None:
    """buy (servers) and, for partial-fill servers, cards; own[g,t] = cards bought so far.

    ``buy[g,t]`` counts servers **in service** from month t; they were ordered ``lead_g``
    months before (:func:`~planner.optimize.model.core.capex_month`), so none is in service
    before month ``lead_g`` (their bound is 0 there)."""
    T = len(m.cands.months)
    bounds = ownable_nodes(m)
    worth = worth_owning(m)
    for g, gpu in m.inputs.gpus.items():
        up = bounds[g] if worth[g] or g in m.force_ownable else 0
        m.ownable[g] = up is None or up > 0
        lead = lead_months(m, g)
        owned: dict[pulp.LpVariable, float] = {}
        for t in range(T):
            up_t = 0 if t < lead else up
            v = m.var(nid("buy", g, m.cands.months[t]), 0, up_t, pulp.LpInteger)
            m.buy[(g, t)] = v
            if gpu.partial_fill:  # cards come in whole nodes of the card (usually 1)
                node = gpu.node_gpus
                card_up = None if up_t is None else up_t * (gpu.slots // node)
                c = m.var(nid("cards", g, m.cands.months[t]), 0, card_up, pulp.LpInteger)
                m.cards[(g, t)] = pulp.LpAffineExpression([(c, node)])
            else:
                m.cards[(g, t)] = pulp.LpAffineExpression([(v, gpu.node_gpus)])
            for x, coef in m.cards[(g, t)].items():
                owned[x] = owned.get(x, 0) + coef
            m.own[(g, t)] = pulp.LpAffineExpression(owned)
        if m.ownable[g]:
            add_owned_nodes(m, g, up)


def add_owned_nodes(m: PlannerModel, g: str, up: float | None) -> None:
    """``owned[g,t]``: nodes of cards of type g owned in month t, an integer variable, with
    ``fleet_owned``: owned[g,t] = owned[g,t-1] + the nodes bought in month t.

    The same fleet as the sum of purchases (``own``), which stays the expression the objective,
    the servers and the power cap read; the rows that draw on the fleet (``capacity``,
    ``train_gpus``) read this integer instead. Measured on lab_2026 (benchmarks/README.md): HiGHS
    branches on the fleet of a month as one integer, where it branched on the purchase of each
    month before, and its bound at 60 s rose by about 0.8 % of the plan."""
    gpu = m.inputs.gpus[g]
    node = float(gpu.node_gpus)
    per_month = None if up is None else up * gpu.slots / gpu.node_gpus
    prev: pulp.LpVariable | None = None
    for t, month in enumerate(m.cands.months):
        up_t = None if per_month is None else per_month * (t + 1)
        v = m.var(nid("owned", g, month), 0, up_t, pulp.LpInteger)
        m.owned[(g, t)] = v
        terms = [(v, 1.0), *((x, -c / node) for x, c in m.cards[(g, t)].items())]
        if prev is not None:
            terms.append((prev, -1.0))
        m.add(terms, EQ, 0, row_name("fleet_owned", g, month))
        prev = v


def add_existing_fleet_constraints(m: PlannerModel) -> None:
    """GPUs owned before the plan (``fleet.owned``): cards in service from their month, no
    capex; where ``sell: allowed``, integer ``sell[i,t]`` nodes sold at the start of month t.

    The fleet of type g in month t is ``own[g,t] + E[g,t] - sum_i sum_{tau<=t} n_g sell[i,tau]``
    with ``E`` the existing cards in service (a constant on the right-hand side of capacity
    and train_gpus).
    """
    T = len(m.cands.months)
    for i, o in enumerate(m.inputs.problem.fleet.owned):
        if o.gpu not in m.inputs.gpus:
            continue
        gpu, t0 = m.inputs.gpus[o.gpu], existing_start(m, i)
        m.ownable[o.gpu] = True  # existing cards can serve and train
        for t in range(t0, T):
            m.existing[(o.gpu, t)] = m.existing.get((o.gpu, t), 0) + o.count
        if o.sell != "allowed":
            continue
        unit = gpu.node_gpus
        sold: dict[pulp.LpVariable, float] = {}
        sells = []
        for t in range(t0, T):
            v = m.var(
                nid("sell", o.gpu, i + 1, m.cands.months[t]), 0, o.count // unit, pulp.LpInteger
            )
            m.sell[(i, t)] = v
            sells.append((v, 1.0))
            sold[v] = float(unit)
            acc = m.sold.setdefault((o.gpu, t), {})
            for x, c in sold.items():
                acc[x] = acc.get(x, 0.0) + c
        m.add(sells, LE, o.count // unit, row_name("sell_at_most", o.gpu, i + 1))


def add_server_constraints(m: PlannerModel) -> None:
    """server_slots: cards owned <= slots x servers owned; server_used: servers bought in a
    month <= card nodes bought in it (partial-fill servers only). A server is bought with its
    first card: buying it empty in an earlier month costs no less (later cash is discounted,
    a younger chassis resells higher, its host draws power from its purchase), and a plan
    never lists an empty server where a chassis is free (a tie the solver could pick)."""
    T = len(m.cands.months)
    for g, gpu in m.inputs.gpus.items():
        if not gpu.partial_fill or not m.ownable[g]:
            continue
        node = float(gpu.node_gpus)
        servers: list[tuple[pulp.LpVariable, float]] = []
        for t in range(T):
            servers.append((m.buy[(g, t)], -float(gpu.slots)))
            m.add(
                [*m.own[(g, t)].items(), *servers],
                LE,
                0,
                row_name("server_slots", g, m.cands.months[t]),
            )
            m.add(
                [(m.buy[(g, t)], 1.0), *((v, -c / node) for v, c in m.cards[(g, t)].items())],
                LE,
                0,
                row_name("server_used", g, m.cands.months[t]),
            )


def add_capacity_constraints(m: PlannerModel) -> None:
    """capacity per GPU type, month and slice; also builds busy GPU-hours per (g, t)."""
    T = len(m.cands.months)
    slices = m.cands.slices
    use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    for (w, key, t, s), n in m.n.items():
        c = index[(w, key)]
        use[(c.gpu, t, s)].append((n, float(c.tp)))
    for (job, key, t, s), z in m.z.items():
        c = m.train_cand(job, key)
        use[(c.gpu, t, s)].append((z, c.gpus / slices[s].hours_per_month))
    for g in m.inputs.gpus:
        for t in range(T):
            busy = []
            for s, sl in enumerate(slices):
                terms = use.get((g, t, s))
                if terms:
                    m.add(
                        [*terms, *minus_own(m, g, t)],
                        LE,
                        existing_in_service(m, g, t),
                        row_name("capacity", g, m.cands.months[t], sl.name),
                    )
                    busy.extend((v, coef * sl.hours_per_month) for v, coef in terms)
            m.busy[(g, t)] = pulp.LpAffineExpression(busy)
