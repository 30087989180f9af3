r"""Two stages, one model: the purchases every demand scenario shares, the rentals each adapts.

Stage 4 for a problem with ``scenarios:`` (issue 28). Each scenario ``s`` (probability
``p_s``) has its own copy of the deterministic model of :mod:`planner.optimize.model`, built
from its own inputs (its forecast, prices, ...): variables ``x^s`` and cost ``c_s(x^s)``, its
present value. The first stage, what is decided before the future is known, is the fleet of
:func:`planner.optimize.whole.fleet_variables`: servers and card nodes bought (with their
months), reservations signed and existing nodes sold. Every copy keeps its own first-stage
variables, tied to the first scenario's by non-anticipativity rows

.. math::
   f^s_k - f^1_k = 0 \quad \text{for every first-stage key } k \text{ and scenario } s \ge 2

(``scenario_link_<s>_<k>``; a key one copy lacks is held at 0 in the others). Every other
variable (rentals, owned replicas, allocations, training placement) adapts per scenario, and
each copy keeps all its rows, the budgets included: the budget holds in every scenario.

Objective (``risk.measure``):

.. math::
   expected:\ \sum_s p_s c_s \qquad
   cvar:\ \sum_s p_s c_s + w \big(\eta + \tfrac{1}{1-\alpha} \sum_s p_s u_s\big),
   \ u_s \ge c_s - \eta,\ u_s \ge 0 \qquad
   worst\_case:\ W,\ W \ge c_s

(Rockafellar and Uryasev's linear form of CVaR, as PyPSA's stochastic optimisation states it.)
:func:`risk_value` evaluates the same measure on given scenario costs; it is monotone in every
cost, so the measure of the scenarios' own optima is a valid lower bound (the wait-and-see
bound) for every first-stage decision.

This module builds and solves; it never extracts plans (:mod:`planner.plan.scenarios` does).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pulp

from planner.base.errors import SolverError
from planner.optimize.backends import _BulkHiGHS
from planner.optimize.model import PlannerModel
from planner.optimize.model.core import nid

MEASURES = ("expected", "cvar", "worst_case")


@dataclass(frozen=True)
class Risk:
    """The objective over scenario costs: ``measure`` and, for cvar, ``alpha`` and ``weight``."""

    measure: str = "expected"
    alpha: float = 0.9
    weight: float = 1.0


def cvar(costs: Sequence[float], probs: Sequence[float], alpha: float) -> float:
    r"""CVaR_alpha of a discrete cost distribution: the mean of its worst ``1 - alpha`` tail,
    :math:`\min_\eta \eta + \frac{1}{1-\alpha} \sum_s p_s (c_s - \eta)^+` (the minimum is at a
    cost: the alpha-quantile).

    >>> cvar([100.0, 200.0], [0.5, 0.5], 0.9)   # the worst 10 % is all in the dear scenario
    200.0
    >>> cvar([100.0, 200.0], [0.5, 0.5], 0.4)   # 60 %: half of it at 200, a sixth at 100
    183.33333333333334
    """
    eta = cvar_eta(costs, probs, alpha)
    return eta + sum(p * max(0.0, c - eta) for c, p in zip(costs, probs, strict=True)) / (1 - alpha)


def cvar_eta(costs: Sequence[float], probs: Sequence[float], alpha: float) -> float:
    """The cost at which :func:`cvar`'s minimum is reached (its value at risk).

    >>> cvar_eta([100.0, 200.0], [0.5, 0.5], 0.9)
    200.0
    """
    tail = 1.0 - alpha

    def value(eta: float) -> float:
        return eta + sum(p * max(0.0, c - eta) for c, p in zip(costs, probs, strict=True)) / tail

    return min(costs, key=value)


def risk_value(costs: Sequence[float], probs: Sequence[float], risk: Risk) -> float:
    """The two-stage objective of scenario costs (present value, $) under ``risk``.

    >>> risk_value([100.0, 200.0], [0.5, 0.5], Risk())
    150.0
    >>> risk_value([100.0, 200.0], [0.5, 0.5], Risk("worst_case"))
    200.0
    >>> risk_value([100.0, 200.0], [0.5, 0.5], Risk("cvar", 0.9, 0.5))   # 150 + 0.5 x 200
    250.0
    """
    expected = sum(c * p for c, p in zip(costs, probs, strict=True))
    if risk.measure == "worst_case":
        return max(costs)
    if risk.measure == "cvar":
        return expected + risk.weight * cvar(costs, probs, risk.alpha)
    return expected


def first_stage(m: PlannerModel) -> dict[tuple, pulp.LpVariable]:
    """The first-stage variables of one scenario's model by domain key: servers bought
    (``("buy", g, t)``), card nodes of partial servers (``("cards", g, t)``), reservations
    (``("res", offer, t)``) and existing nodes sold (``("sell", entry, t)``); the same keys in
    every scenario built from the same GPUs, offers and fleet."""
    out: dict[tuple, pulp.LpVariable] = {("buy", *k): v for k, v in m.buy.items()}
    for k, e in m.cards.items():
        for v in e:
            if v.cat == pulp.LpInteger and v is not m.buy[k]:
                out[("cards", *k)] = v
    out.update({("res", *k): v for k, v in m.res.items()})
    out.update({("sell", *k): v for k, v in m.sell.items()})
    return out


def first_stage_values(m: PlannerModel) -> dict[tuple, float]:
    """The first stage of the plan held in ``m``, whole numbers, by key."""
    return {k: float(round(v.varValue or 0.0)) for k, v in first_stage(m).items()}


def fix_first_stage(
    m: PlannerModel, values: dict[tuple, float], bounds: dict[tuple, tuple] | None = None
) -> list[str]:
    """Hold ``m``'s first stage at ``values`` (a key ``values`` lacks at 0) by its bounds, for
    a re-plan of the rest. Returns the keys that cannot be held so in this scenario: a
    nonzero amount ``m`` has no variable for, or one outside the variable's bounds as built
    (``bounds``, from :func:`first_stage_bounds`: e.g. a purchase in service before this
    scenario's lead time); then nothing is fixed."""
    own = first_stage(m)
    bad = [str(k) for k, x in values.items() if x and k not in own]
    for k, v in own.items():
        lo, up = (bounds or {}).get(k, (v.lowBound, v.upBound))
        x = values.get(k, 0.0)
        if (lo is not None and x < lo) or (up is not None and x > up):
            bad.append(str(k))
    if bad:
        return bad
    for k, v in own.items():
        v.lowBound = v.upBound = values.get(k, 0.0)
    return []


def first_stage_bounds(m: PlannerModel) -> dict[tuple, tuple]:
    """The first-stage variables' bounds as built, by key (to undo :func:`fix_first_stage`;
    by key, not name: the two-stage model renames the copies' variables)."""
    return {k: (v.lowBound, v.upBound) for k, v in first_stage(m).items()}


def release_first_stage(m: PlannerModel, bounds: dict[tuple, tuple]) -> None:
    """Put back the first-stage bounds saved by :func:`first_stage_bounds`."""
    for k, v in first_stage(m).items():
        v.lowBound, v.upBound = bounds[k]


@dataclass
class TwoStage:
    """The combined problem over scenario copies and the handles to read it back."""

    prob: pulp.LpProblem
    models: list[PlannerModel]
    probs: list[float]
    risk: Risk
    extra: list[pulp.LpVariable]  # the risk measure's own variables (eta, u, W)
    # some first-stage key exists in one copy only (held at 0): the model is a restriction,
    # and its bound is not a bound of the two-stage problem
    restricted: bool = False


def build_two_stage(
    models: Sequence[PlannerModel], probs: Sequence[float], risk: Risk, name: str = "two_stage"
) -> TwoStage:
    """The combined MILP of this module's docstring over scenario copies already built (each
    with its own problem, rows and objective). The copies' variables of scenario 2 on are
    renamed ``sc<s>_<name>`` (names must be unique in one problem); their rows are copied in."""
    if risk.measure not in MEASURES:
        raise SolverError(f"unknown risk measure {risk.measure!r}")
    prob = pulp.LpProblem(nid(name)[:60] or "two_stage", pulp.LpMinimize)
    for s, m in enumerate(models):
        if s:
            for v in m.prob.variables():
                if not v.name.startswith(f"sc{s + 1}_"):
                    v.name = f"sc{s + 1}_{v.name}"
        for cname, c in m.prob.constraints.items():
            prefix = f"sc{s + 1}_" if s else ""
            prob.addConstraint(c.copy(), f"{prefix}{cname}")
    restricted = _link(prob, models)
    extra = _objective(prob, models, probs, risk)
    return TwoStage(prob, list(models), list(probs), risk, extra, restricted)


def _link(prob: pulp.LpProblem, models: Sequence[PlannerModel]) -> bool:
    """The non-anticipativity rows: every copy's first stage equals the first copy's.
    Returns whether some key was missing from a copy (and so held at 0)."""
    restricted = False
    base = first_stage(models[0])
    for s, m in enumerate(models[1:], start=2):
        mine = first_stage(m)
        for k in base.keys() | mine.keys():
            a, b = base.get(k), mine.get(k)
            row = nid("scenario_link", s, *k)
            if a is not None and b is not None:
                prob.addConstraint(pulp.LpConstraint(b - a, pulp.LpConstraintEQ, row, 0), row)
            else:
                restricted = True
                v = a if a is not None else b
                prob.addConstraint(pulp.LpConstraint(v + 0, pulp.LpConstraintEQ, row, 0), row)
    return restricted


def _objective(
    prob: pulp.LpProblem, models: Sequence[PlannerModel], probs: Sequence[float], risk: Risk
) -> list[pulp.LpVariable]:
    """Set the risk measure's objective on ``prob``; returns the variables it added."""
    costs = [m.prob.objective for m in models]
    expected = pulp.lpSum(p * c for p, c in zip(probs, costs, strict=True))
    if risk.measure == "worst_case":
        worst = pulp.LpVariable("risk_worst_usd")
        for s, c in enumerate(costs, start=1):
            prob.addConstraint(
                pulp.LpConstraint(worst - c, pulp.LpConstraintGE, f"risk_worst_{s}", 0)
            )
        prob.setObjective(worst)
        return [worst]
    if risk.measure == "cvar":
        eta = pulp.LpVariable("risk_var_usd")
        tail = [pulp.LpVariable(f"risk_tail_{s}", 0) for s in range(1, len(costs) + 1)]
        for s, (u, c) in enumerate(zip(tail, costs, strict=True), start=1):
            prob.addConstraint(
                pulp.LpConstraint(u - c + eta, pulp.LpConstraintGE, f"risk_tail_row_{s}", 0)
            )
        excess = pulp.lpSum(p * u for p, u in zip(probs, tail, strict=True))
        prob.setObjective(expected + risk.weight * (eta + excess / (1 - risk.alpha)))
        return [eta, *tail]
    prob.setObjective(expected)
    return []


def set_risk_start(ts: TwoStage) -> None:
    """Values for the risk measure's own variables that make the copies' current plans a
    feasible start (eta the alpha-quantile, each u its excess, W the largest cost)."""
    costs = [pulp.value(m.prob.objective) or 0.0 for m in ts.models]
    if ts.risk.measure == "worst_case":
        ts.extra[0].varValue = max(costs)
    elif ts.risk.measure == "cvar":
        eta = cvar_eta(costs, ts.probs, ts.risk.alpha)
        ts.extra[0].varValue = eta
        for u, c in zip(ts.extra[1:], costs, strict=True):
            u.varValue = max(0.0, c - eta)


@dataclass(frozen=True)
class TwoStageRun:
    """What the combined solve gave: a plan (its first stage now in every copy) or not, and
    HiGHS's lower bound on the measure (None without one; on the relaxed model where rented
    replicas are fractional, so below every plan with whole replicas)."""

    has_plan: bool
    bound: float | None
    seconds: float
    message: str
    infeasible: bool = False  # proven: no first stage serves every scenario


def solve_two_stage(ts: TwoStage, time_limit: float, gap: float, threads: int = 1) -> TwoStageRun:
    """Solve the combined problem with HiGHS from the copies' current values as a start."""
    t0 = time.perf_counter()
    set_risk_start(ts)
    limit = max(0.5, time_limit)
    cmd = _BulkHiGHS(
        msg=False,
        timeLimit=limit,
        gapRel=gap,
        threads=threads,
        start=True,
        abandon_s=max(2.0, 0.1 * limit),  # a presolve deaf to its cancel (HiGHS issue 2226)
    )
    try:
        ts.prob.solve(cmd)
    except pulp.PulpSolverError as exc:
        return TwoStageRun(False, None, time.perf_counter() - t0, f"HiGHS failed: {exc}")
    has = ts.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    bound = None
    model = getattr(ts.prob, "solverModel", None)
    if model is not None and not ts.restricted:
        b = float(model.getInfo().mip_dual_bound)
        bound = b if math.isfinite(b) and abs(b) < 1e30 else None
    status = {True: "a plan", False: "no plan"}[has]
    proven = ts.prob.status == pulp.LpStatusInfeasible and not ts.restricted
    return TwoStageRun(has, bound, time.perf_counter() - t0, f"HiGHS: {status}", proven)
