"""The library entry point: problem -> candidates -> model -> solve -> Plan."""

from __future__ import annotations

import time

from planner.base.errors import InfeasibleError, SolverError
from planner.base.phases import phase
from planner.inputs.problem import Inputs
from planner.optimize.candidates import Candidates, build_candidates, check_candidates
from planner.optimize.model import PlannerModel, build_model
from planner.optimize.solve import SolveResult, solve_model
from planner.plan.data import Plan
from planner.plan.extract import extract_plan

# Share of a command's time limit kept at most for what follows the solve (extracting,
# verifying and writing the plan, the buy margins) when the limit bounds the whole command.
AFTER_SOLVE_SHARE = 0.2
# ... and what those steps take, by the model's size: a fixed part (the workbook's ~1.3 s)
# and a part per model column (their plan's rows), measured with benchmarks/phases.py
# (issue 51): problems/lab_2026.yaml (7,289 columns) 1.4-2.0 s after the solve, 60 workloads
# x all GPUs x 36 months (176,549 columns) 4.1 s; kept twice over for a busier machine.
AFTER_SOLVE_FIXED_S, AFTER_SOLVE_PER_COLUMN_S, AFTER_SOLVE_SAFETY = 1.5, 1.5e-5, 2.0
# ... and never less than this many seconds of it for the solver itself.
MIN_SOLVE_S = 1.0


def after_solve_reserve(limit: float, columns: int | None) -> float:
    """Seconds of a command's time ``limit`` kept for the steps after the solve: twice what
    they take for a model of ``columns`` columns (:data:`AFTER_SOLVE_FIXED_S` +
    :data:`AFTER_SOLVE_PER_COLUMN_S` per column), at most :data:`AFTER_SOLVE_SHARE` of the
    limit (all of that share when the size is not known).

    >>> after_solve_reserve(60.0, None), after_solve_reserve(60.0, 7_289)
    (12.0, 3.218...)
    >>> after_solve_reserve(10.0, 176_549)   # the share caps it
    2.0
    """
    share = AFTER_SOLVE_SHARE * limit
    if columns is None:
        return share
    return min(
        share, AFTER_SOLVE_SAFETY * (AFTER_SOLVE_FIXED_S + AFTER_SOLVE_PER_COLUMN_S * columns)
    )


def solver_seconds(
    limit: float, deadline: float | None, now: float, columns: int | None = None
) -> float:
    """The solver's time limit: ``limit``, or with a command ``deadline`` (a
    ``time.perf_counter()`` instant) what is left of it less :func:`after_solve_reserve` for
    the steps after the solve, at least :data:`MIN_SOLVE_S`.

    >>> solver_seconds(60.0, None, 0.0)
    60.0
    >>> solver_seconds(60.0, 60.0, 5.0)   # 55 s left, 12 s of them kept for after the solve
    43.0
    >>> round(solver_seconds(60.0, 60.0, 5.0, columns=7_289), 2)   # a model of lab_2026's size
    51.78
    >>> solver_seconds(10.0, 10.0, 9.5)
    1.0
    """
    if deadline is None:
        return limit
    return max(MIN_SOLVE_S, deadline - now - after_solve_reserve(limit, columns))


def solve_inputs(
    inputs: Inputs,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    cands: Candidates | None = None,
    deadline: float | None = None,
) -> tuple[PlannerModel, SolveResult]:
    """Build and solve; with ``deadline`` (``time.perf_counter()`` instant by which the whole
    command must end) the solver gets what building left (:func:`solver_seconds`)."""
    with phase("candidates"):
        cands = cands or build_candidates(inputs)
        check_candidates(inputs, cands)
    with phase("model build"):
        m = build_model(inputs, cands)
    opts = inputs.problem.solver
    limit = time_limit if time_limit is not None else opts.time_limit_s
    result = solve_model(
        m,
        solver=solver,
        time_limit=solver_seconds(
            limit, deadline, time.perf_counter(), columns=len(m.prob.variables())
        ),
        gap=gap if gap is not None else opts.gap,
    )
    return m, result


def plan_problem(
    inputs: Inputs,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    diagnose: bool = True,
    deadline: float | None = None,
) -> Plan:
    """Solve a problem and return its Plan; an infeasible problem raises InfeasibleError.
    ``deadline``: see :func:`solve_inputs`. A problem with ``scenarios`` gets the two-stage
    plan of :mod:`planner.plan.scenarios`."""
    if inputs.scenarios:
        from planner.plan.scenarios import plan_scenarios

        opts = inputs.problem.solver
        limit = time_limit if time_limit is not None else opts.time_limit_s
        seconds = solver_seconds(limit, deadline, time.perf_counter())
        return plan_scenarios(
            inputs, solver, seconds, gap if gap is not None else opts.gap, diagnose=diagnose
        )
    m, result = solve_inputs(inputs, solver, time_limit, gap, deadline=deadline)
    if result.status == "infeasible":
        diagnosis: list[str] = []
        if diagnose:
            from planner.optimize.infeasible import diagnose_infeasible

            diagnosis = diagnose_infeasible(inputs, solver=solver)
        raise InfeasibleError("infeasible: no plan meets every constraint", diagnosis)
    if not result.has_solution:
        raise SolverError(solver_failure(result))
    with phase("extract plan"):
        return extract_plan(m, result)


def solver_failure(result: SolveResult) -> str:
    """What a solver failure is, and what to try: a time limit is not a bug.

    >>> solver_failure(SolveResult("time_limit", None, None, 60.0, "cbc", "no plan in 60 s"))
    'cbc: no plan in 60 s: raise --time-limit (or solver.time_limit_s), or try --solver highs'
    >>> solver_failure(SolveResult("time_limit", None, None, 1.0, "highs", "no plan in 1 s"))
    'highs: no plan in 1 s: raise --time-limit (or solver.time_limit_s)'
    """
    other = "" if result.solver == "highs" else ", or try --solver highs"
    hint = {
        "time_limit": f"raise --time-limit (or solver.time_limit_s){other}",
        "unbounded": "please report it with the problem file",
        "error": "try the other solver (--solver cbc|highs); if both fail, report it",
    }.get(result.status, "please report it with the problem file")
    return f"{result.solver}: {result.message}: {hint}"
