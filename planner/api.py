"""The library entry point: problem -> candidates -> model -> solve -> Plan."""

from __future__ import annotations

from planner.candidates import Candidates, build_candidates, check_candidates
from planner.errors import InfeasibleError, SolverError
from planner.extract import extract_plan
from planner.model import PlannerModel, build_model
from planner.plan import Plan
from planner.problem import Inputs
from planner.solve import SolveResult, solve_model


def solve_inputs(
    inputs: Inputs,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    cands: Candidates | None = None,
) -> tuple[PlannerModel, SolveResult]:
    cands = cands or build_candidates(inputs)
    check_candidates(inputs, cands)
    m = build_model(inputs, cands)
    opts = inputs.problem.solver
    result = solve_model(
        m,
        solver=solver,
        time_limit=time_limit if time_limit is not None else opts.time_limit_s,
        gap=gap if gap is not None else opts.gap,
    )
    return m, result


def plan_problem(
    inputs: Inputs,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    diagnose: bool = True,
) -> Plan:
    """Solve a problem and return its Plan; an infeasible problem raises InfeasibleError."""
    m, result = solve_inputs(inputs, solver, time_limit, gap)
    if result.status == "infeasible":
        diagnosis: list[str] = []
        if diagnose:
            from planner.diagnose import diagnose_infeasible

            diagnosis = diagnose_infeasible(inputs, solver=solver)
        raise InfeasibleError("infeasible: no plan meets every constraint", diagnosis)
    if not result.has_solution:
        raise SolverError(solver_failure(result))
    return extract_plan(m, result)


def solver_failure(result: SolveResult) -> str:
    """What a solver failure is, and what to try: a time limit is not a bug.

    >>> solver_failure(SolveResult("time_limit", None, None, 60.0, "cbc", "no plan in 60 s"))
    'cbc: no plan in 60 s: raise --time-limit (or solver.time_limit_s), or try --solver highs'
    """
    hint = {
        "time_limit": "raise --time-limit (or solver.time_limit_s), or try --solver highs",
        "unbounded": "please report it with the problem file",
        "error": "try the other solver (--solver cbc|highs); if both fail, report it",
    }.get(result.status, "please report it with the problem file")
    return f"{result.solver}: {result.message}: {hint}"
