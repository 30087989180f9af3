"""A plan never buys what it never uses: before a solve returns, the purchases of a GPU type
whose GPUs are busy for no hour of the horizon are dropped (an improving move the search can
miss when its time runs out, e.g. under a short limit on a loaded machine).

Owned GPUs that nothing runs on add capex, idle power and hosting and serve nothing, so
setting their purchase variables to 0 keeps every other value (the rentals, the use of the
rest of the fleet) and lowers the cost. The move is kept only where every constraint that
holds those variables still holds (:func:`drop_idle`); a purchase held fixed (a re-plan of
given purchases) is never dropped.
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from planner.optimize.model import PlannerModel

# Busy GPU-hours of a type over the whole horizon at or below which its GPUs are idle, and
# the feasibility tolerance of a row once idle purchases are set to 0 (HiGHS's own is 1e-7
# relative; the rows touched are slot, budget and power rows in GPUs, dollars and kW).
IDLE_HOURS, ROW_EPS = 1e-6, 1e-6


def idle_types(m: PlannerModel, held_too: bool = False) -> list[str]:
    """GPU types the plan in ``m`` buys (by purchase variables not held fixed, or any with
    ``held_too``) whose owned GPUs are busy for no hour of the horizon, sorted."""
    bought: dict[str, float] = defaultdict(float)
    for (g, _t), cards in m.cards.items():
        for v, n in cards.items():
            if held_too or v.lowBound != v.upBound:
                bought[g] += n * (v.varValue or 0.0)
    busy: dict[str, float] = defaultdict(float)
    for (g, _t), expr in m.busy.items():
        busy[g] += abs(expr.value() or 0.0)
    return sorted(g for g, n in bought.items() if n > 0.5 and busy[g] <= IDLE_HOURS)


def _purchase_vars(m: PlannerModel, types: list[str]) -> list[pulp.LpVariable]:
    """The purchase variables (servers and card nodes) of ``types``, and the nodes owned
    (``owned``, which follow the purchases)."""
    out: dict[str, pulp.LpVariable] = {}
    for (g, t), v in m.buy.items():
        if g in types:
            out[v.name] = v
            for x in m.cards[(g, t)]:
                out[x.name] = x
            if (g, t) in m.owned:
                out[m.owned[(g, t)].name] = m.owned[(g, t)]
    return list(out.values())


def drop_idle(m: PlannerModel, held_too: bool = False) -> list[str]:
    """Set the purchases of :func:`idle_types` to 0 in ``m``'s values where every row that
    holds them still holds (within :data:`ROW_EPS` of the row's scale); returns the types
    dropped ([] when none, or when a row would break: the values are then as they were).
    ``held_too``: purchases held fixed too (a re-plan of given purchases drops their idle
    ones; their variables' bounds are left as they are)."""
    types = idle_types(m, held_too)
    if not types:
        return []
    zeroed = _purchase_vars(m, types)
    before = {v.name: v.varValue for v in zeroed}
    for v in zeroed:
        v.varValue = 0.0
    touched = {v.name for v in zeroed}
    for c in m.prob.constraints.values():
        if any(v.name in touched for v in c) and not c.valid(ROW_EPS * max(1.0, abs(c.constant))):
            for v in zeroed:
                v.varValue = before[v.name]
            return []
    return types
