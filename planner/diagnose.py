"""Why is a problem infeasible? Re-solve with one limit relaxed at a time.

Each probe removes one family of limits (capex budget, total budget, power cap) and asks
for the smallest value of that limit that would admit a plan.
"""

from __future__ import annotations

import pulp

from planner.candidates import build_candidates
from planner.model import build_model
from planner.problem import Inputs
from planner.solve import solve_model


def _min_of(inputs: Inputs, objective: str, drop: set[str], solver: str) -> float | None:
    """Minimize one quantity with the constraints named in ``drop`` removed."""
    cands = build_candidates(inputs)
    m = build_model(inputs, cands)
    for name in list(m.prob.constraints):
        if name in drop or any(name.startswith(d + "_") for d in drop):
            del m.prob.constraints[name]
    if objective == "capex":
        m.prob.setObjective(m.cost_terms["capex"])
    elif objective == "total":
        m.prob.setObjective(pulp.lpSum(m.cost_terms.values()))
    elif objective == "power_kw":
        peak = pulp.LpVariable("peak_kw", lowBound=0)
        site = inputs.problem.site
        for t in range(len(cands.months)):
            m.prob += peak >= pulp.lpSum(
                m.own[(g, t)] * (gpu.tdp_w.value + gpu.host_w_per_gpu.value) * site.pue / 1000
                for g, gpu in inputs.gpus.items()
            ), f"peak_kw_{t}"
        m.prob.setObjective(pulp.LpAffineExpression([(peak, 1.0)]))
    res = solve_model(m, solver=solver, time_limit=inputs.problem.solver.time_limit_s, gap=1e-6)
    if not res.has_solution:
        return None
    return float(res.objective or 0.0)


def diagnose_infeasible(inputs: Inputs, solver: str = "cbc") -> list[str]:
    p = inputs.problem
    lines: list[str] = []
    limits = {"budget_capex", "budget_total", "power_cap"}
    probe = _min_of(inputs, "capex", limits, solver)
    if probe is None:
        lines.append(
            "infeasible even with no capex budget, total budget or power cap: check the "
            "licence rule (consumer_gpus_allowed), the allowed GPUs and rental offers"
        )
        return lines
    min_capex = _min_of(inputs, "capex", {"budget_capex"}, solver)
    if min_capex is None:
        pass
    elif min_capex > p.budget.capex_usd + 1e-6:
        lines.append(
            f"capex budget too small: budget.capex_usd = {p.budget.capex_usd:,.0f}; the smallest "
            f"budget that admits a plan is {min_capex:,.0f} (short by {min_capex - p.budget.capex_usd:,.0f})"
        )
    if p.budget.total_usd is not None:
        min_total = _min_of(inputs, "total", {"budget_total"}, solver)
        if min_total is not None and min_total > p.budget.total_usd + 1e-6:
            lines.append(
                f"total budget too small: budget.total_usd = {p.budget.total_usd:,.0f}; the cheapest "
                f"plan under the other limits costs {min_total:,.0f} (short by {min_total - p.budget.total_usd:,.0f})"
            )
    if p.site.power_cap_kw is not None:
        min_kw = _min_of(inputs, "power_kw", {"power_cap"}, solver)
        if min_kw is not None and min_kw > p.site.power_cap_kw + 1e-6:
            lines.append(
                f"power cap too low: site.power_cap_kw = {p.site.power_cap_kw:,.1f}; the smallest cap "
                f"that admits a plan is {min_kw:,.1f} kW"
            )
    if not lines:
        lines.append("infeasible only when the limits act together (budget and power cap)")
    return lines
