"""Scenario solves that keep what they learn: each what-if scenario's own solve with its
purchases (the first stage) and its lower bound, and the purchases of other plans (the base
problem's, the best neighbouring scenario's) re-planned under a scenario's inputs.

A scenario's row keeps the cheapest of these plans, and its gap is measured against its own
solve's lower bound (every plan of the scenario's inputs is above it, whichever purchases it
starts from), so a short time limit on a loaded machine shows as a gap, never as a plan
dearer than one already known.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import pulp

from planner.base.errors import InfeasibleError, SolverError
from planner.inputs.problem import Inputs
from planner.optimize.backends import bound_from_gap
from planner.optimize.candidates import build_candidates, check_candidates
from planner.optimize.idle import drop_idle
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.optimize.stochastic import first_stage_bounds, first_stage_values, fix_first_stage
from planner.plan.data import Plan
from planner.plan.extract import extract_plan
from planner.plan.make import plan_problem, solve_inputs, solver_failure

# Share of a scenario's time limit each re-plan of given purchases gets (the purchases are
# fixed, so only rentals and the use of the fleet are solved), and its floor in seconds.
REPLAN_SHARE = 0.25
MIN_REPLAN_S = 2.0
# The plan's message names its bound after this phrase (planner.optimize.solve._message).
_BOUND_PHRASE = "; the gap is measured against "

Fleet = dict[tuple, float]


@dataclass
class Solved:
    """A scenario's own solve: its plan, the plan's purchases by first-stage key (None for a
    two-stage problem, whose purchases are shared across its demand scenarios) and its lower
    bound with what the bound is (None when the solve proved none)."""

    plan: Plan
    fleet: Fleet | None
    bound_usd: float | None
    bound: str | None


def bound_of(plan: Plan) -> tuple[float | None, str | None]:
    """The lower bound a plan's own gap proves, and its kind as the plan's message words it
    (None, None without a gap).

    >>> from types import SimpleNamespace as P
    >>> bound_of(P(objective_usd=100.0, gap=0.1, message="x; the gap is measured against y; z"))
    (90.0, 'y')
    >>> bound_of(P(objective_usd=100.0, gap=None, message="x"))
    (None, None)
    """
    if plan.gap is None or plan.objective_usd is None:
        return None, None
    _, _, kind = plan.message.partition(_BOUND_PHRASE)
    kind = kind.split("; ")[0].strip()
    return bound_from_gap(plan.objective_usd, plan.gap), kind or "the solver's bound"


def solve_own(
    inputs: Inputs, solver: str, limit: float, gap: float | None, deadline: float
) -> Solved:
    """The scenario solved as written (as :func:`planner.plan.make.plan_problem` does), with
    its purchases read from the model; raises the planner's errors as that does."""
    if inputs.scenarios:
        plan = plan_problem(
            inputs, solver, limit, gap, diagnose=False, deadline=deadline
        )  # fmt: skip
        return Solved(plan, None, *bound_of(plan))
    m, result = solve_inputs(inputs, solver, limit, gap, deadline=deadline)
    if result.status == "infeasible":
        raise InfeasibleError("infeasible: no plan meets every constraint")
    if not result.has_solution:
        raise SolverError(solver_failure(result))
    plan = extract_plan(m, result)
    return Solved(plan, first_stage_values(m), *bound_of(plan))


def _key(fleet: Fleet) -> frozenset:
    return frozenset((k, v) for k, v in fleet.items() if v)


def same_fleet(a: Fleet | None, b: Fleet | None) -> bool:
    """Whether two first stages buy, reserve and sell the same (zeros ignored).

    >>> same_fleet({("buy", "h100", 0): 1.0, ("res", "x", 0): 0.0}, {("buy", "h100", 0): 1.0})
    True
    """
    return a is not None and b is not None and _key(a) == _key(b)


def replan_seconds(limit: float) -> float:
    """The seconds one re-plan of given purchases gets within a scenario's ``limit``.

    >>> replan_seconds(20.0), replan_seconds(4.0)
    (5.0, 2.0)
    """
    return max(MIN_REPLAN_S, REPLAN_SHARE * limit)


def replan_fleet(
    inputs: Inputs, fleet: Fleet, solver: str, seconds: float, gap: float | None
) -> Plan | None:
    """``fleet`` (purchases, reservations and sales by first-stage key) held under
    ``inputs`` and the rest solved in ``seconds``; None where those purchases cannot be held
    here (a lead time, a GPU type this scenario cannot buy) or no plan was found."""
    t0 = time.perf_counter()
    cands = build_candidates(inputs)
    check_candidates(inputs, cands)
    m = build_model(inputs, cands)
    if fix_first_stage(m, fleet, first_stage_bounds(m)):
        return None
    left = max(1.0, seconds - (time.perf_counter() - t0))
    tol = gap if gap is not None else inputs.problem.solver.gap
    result = solve_model(m, solver=solver, time_limit=left, gap=tol)
    # a large model's start search tests rows, not bounds: a plan that left the fleet it was
    # given is no plan of that fleet
    if not result.has_solution or not same_fleet(first_stage_values(m), fleet):
        return None
    dropped = drop_idle(m, held_too=True)  # given purchases idle here: not bought here
    if dropped:
        note = f"; purchases of {', '.join(dropped)}, idle for the whole horizon, dropped"
        result = dataclasses.replace(
            result,
            objective=pulp.value(m.prob.objective),
            gap=None,  # of the purchases given, which this plan no longer has
            message=result.message + note,
        )
    return extract_plan(m, result)
