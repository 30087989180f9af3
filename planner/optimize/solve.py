"""Stage 4: run a MILP solver (CBC bundled with PuLP, or HiGHS) and map its outcome to a typed status.

This module is the orchestration: :func:`solve_model` picks the solver, hands a large model a
MIP start (:mod:`planner.optimize.warm`), runs the back end (:mod:`planner.optimize.backends`),
makes rented replicas whole (:mod:`planner.optimize.whole`) and words the outcome
(:class:`SolveResult`). The names those modules hold are re-exported here, where callers have
always imported them from."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import pulp

from planner.base.errors import InputError, SolverError
from planner.base.phases import phase
from planner.optimize.backends import (
    _SCIP,
    HIGHS_GRACE_S,
    INTERRUPT_WAIT_S,
    RunOutcome,
    SolverRun,
    _BulkHiGHS,
    _cbc_gap,
    bound_from_gap,
    gap_to_bound,
    run_cbc,
)
from planner.optimize.idle import drop_idle
from planner.optimize.model import PlannerModel
from planner.optimize.warm import _Relaxation, mip_start, rental_start
from planner.optimize.whole import (
    EXACT_POLISH_INTEGERS,
    FLEET_GAP,
    MIN_REPAIR_S,
    POLISH_NODES,
    POLISH_S,
    REPAIR_S,
    _make_whole,
    _two_stage,
    _Whole,
    exact_integers,
    exact_model,
    fleet_variables,
    polish,
    proof_threads,
    prove_from_spare_start,
    repair_bound,
    round_up_replicas,
    whole_replicas,
)

# What callers import from here: this module's own names, and those that moved to the back
# ends, the starts and the repair, which callers have always imported from here.
__all__ = [
    "EXACT_POLISH_INTEGERS",
    "FLEET_GAP",
    "HIGHS_GRACE_S",
    "INTERRUPT_WAIT_S",
    "LP_SHARE",
    "MIN_REPAIR_S",
    "POLISH_NODES",
    "POLISH_S",
    "REPAIR_S",
    "ROOT_FACTOR",
    "SEARCH_SHARE",
    "SOLVERS",
    "START_FROM_INTEGERS",
    "RunOutcome",
    "SolveResult",
    "SolverRun",
    "_BulkHiGHS",
    "_Relaxation",
    "bound_kind",
    "exact_integers",
    "exact_model",
    "fleet_variables",
    "highs_gap",
    "mip_start",
    "pick_solver",
    "polish",
    "proof_threads",
    "rental_start",
    "repair_bound",
    "round_up_replicas",
    "scip_available",
    "solve_model",
    "whole_replicas",
]

SOLVERS = ("auto", "cbc", "highs", "scip")


def scip_available() -> bool:
    try:
        import pyscipopt  # noqa: F401
    except ImportError:
        return False
    return True


def pick_solver(m: PlannerModel) -> str:
    """``--solver auto``: HiGHS, which closed every benchmark size CBC closed and more
    (benchmarks/README.md). SCIP (``--solver scip``) solves the exact model (every rented
    replica integer) and can prove the reference optimal ($749,673), but its time varies
    with its random seed from 23 s to over 120 s on that model (measured on 2 cores), so it
    is not the default; CBC (PuLP's bundled default) stays selectable with ``--solver cbc``."""
    return "highs"


@dataclass(frozen=True)
class SolveResult:
    status: str  # optimal | feasible | infeasible | unbounded | time_limit | error
    objective: float | None
    gap: float | None  # relative gap between the plan and the best bound
    seconds: float
    solver: str
    message: str = ""
    repair_usd: float = 0.0  # present value added by rounding rented replicas up to whole ones
    repair_bound_usd: float = 0.0  # what the repair may add at most (repair_bound)

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "feasible")


# From this many integer variables HiGHS is handed a MIP start (:func:`mip_start`): on the
# 50-workload, 36-month benchmark the root relaxation alone takes ~15 s and HiGHS's own first
# plan cost $20.8M after 30 s. Smaller models (every file in problems/) solve as before, so
# their plans and golden fingerprints do not move.
START_FROM_INTEGERS = 10_000
# Share of the time limit by which the start's search (:func:`planner.optimize.start.best_rounded_start`)
# ends on a large model; HiGHS gets the rest. Within a 30 s limit on the 36-month benchmarks
# HiGHS never improved the start; the search did (measured in benchmarks/README.md).
SEARCH_SHARE = 0.85
# Share of the time limit the LP relaxation of a large model may take: an LP stopped early
# leaves a poor point to round and no bound (50 x all x 36: LP 13-15 s; stopped at 15 s under
# load, the plan cost $5.13M against $3.88M).
LP_SHARE = 0.6
# HiGHS's MIP runs after a start only with at least this many times the LP's seconds left:
# its root separates cuts for ~10 LP solves without looking at its clock (on the 10-workload,
# 36-month benchmark a 15 s limit ran 22 s), and in less time it never bettered the start.
ROOT_FACTOR = 12.0


def _fleet_held(m: PlannerModel) -> bool:
    """Every purchase of ``m`` held at one value (a scenario re-planned on a given fleet): the
    relaxed MILP then only routes rentals, in a fraction of a second, and the restricted spare
    start would not pay for its LPs (+0.3-0.4 s per re-plan of problems/uncertain_demand.yaml)."""
    fleet = fleet_variables(m)
    return bool(fleet) and all(v.lowBound == v.upBound for v in fleet)


def _large(m: PlannerModel) -> bool:
    return sum(1 for v in m.prob.variables() if v.cat == pulp.LpInteger) >= START_FROM_INTEGERS


def _solve_scip(m: PlannerModel, time_limit: float, gap: float) -> float | None:
    """Solve the exact model (every rented replica integer) with SCIP; returns SCIP's
    relative gap (None without a plan). The replicas' categories are restored afterwards."""
    try:
        with exact_model(m):
            m.prob.solve(_SCIP(msg=False, timeLimit=max(0.1, time_limit), gapRel=gap))
    except pulp.PulpSolverError as exc:
        raise SolverError(f"SCIP failed: {exc}") from None
    if m.prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return None
    round_up_replicas(m)  # snap SCIP's integers (within its feasibility tolerance) to whole
    return max(0.0, float(m.prob.solverModel.getGap()))


def _cbc_start(m: PlannerModel, time_limit: float, threads: int) -> tuple[bool, float | None]:
    """CBC's MIP start: on a large model the LP-rounded plan (:func:`mip_start`, the LP solved
    by HiGHS in at most a third of the time limit), else the all-rental plan. Returns (a
    start is set, the LP optimum as a bound or None)."""
    if _large(m):
        started, bound, _, _ = mip_start(
            m, threads, lp_seconds=time_limit / 3, deadline=time.perf_counter() + time_limit / 2
        )
        if started:
            return True, bound
        return rental_start(m), bound
    return rental_start(m), None


def _solve_cbc(
    m: PlannerModel, time_limit: float, gap: float, threads: int
) -> tuple[SolverRun, float | None]:
    """Set CBC's MIP start (:func:`_cbc_start`) and run CBC from it in the time left
    (:func:`planner.optimize.backends.run_cbc`); returns (CBC's run, the LP bound of its start
    or None)."""
    t0 = time.perf_counter()
    warm, lp_bound = _cbc_start(m, time_limit, threads)
    start_values = {v.name: v.varValue for v in m.prob.variables()} if warm else None
    left = max(1.0, time_limit - (time.perf_counter() - t0))
    return run_cbc(m, left, gap, threads, start_values), lp_bound


# The statuses of the ends a solver run has that PuLP's status on the model cannot express.
_OUTCOME_STATUS = {
    RunOutcome.TIME_LIMIT_NO_PLAN: "time_limit",
    RunOutcome.START_KEPT: "feasible",
    RunOutcome.SEARCHED: "feasible",
}


def _status(prob: pulp.LpProblem, elapsed: float, limit: float) -> str:
    sol = prob.sol_status
    if sol == pulp.LpSolutionOptimal:
        return "optimal"
    if sol == pulp.LpSolutionIntegerFeasible:
        return "feasible"
    if sol == pulp.LpSolutionInfeasible or prob.status == pulp.LpStatusInfeasible:
        # A proof of infeasibility comes fast; one reported at the clock's end is CBC giving up
        # without a plan, which is a time limit, not a diagnosis.
        return "time_limit" if elapsed >= 0.9 * limit else "infeasible"
    if sol == pulp.LpSolutionUnbounded or prob.status == pulp.LpStatusUnbounded:
        return "unbounded"
    if elapsed >= 0.95 * limit:
        return "time_limit"
    return "error"


def solve_model(
    m: PlannerModel,
    solver: str = "auto",
    time_limit: float = 60.0,
    gap: float = 0.001,
    threads: int | None = None,
    start: Mapping[str, float | None] | None = None,
) -> SolveResult:
    """Solve in place (variable values are set on ``m``) and return the typed outcome.

    ``start``: a plan's variable values by name, handed to HiGHS as its MIP start on a model
    that gets none of its own (a variable it does not name starts at 0). A re-solve of a
    variant that only relaxes a limit starts from the plan it relaxes (``planner explain``):
    HiGHS then holds a plan at least that good from its first node. HiGHS checks the start
    and ignores it if it breaks a row; other solvers ignore it."""
    solver = solver.lower()
    if solver not in SOLVERS:
        raise InputError(f"--solver: unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}")
    if solver == "auto":
        solver = pick_solver(m)
    proof = proof_threads(threads)
    threads = threads or 1
    begun = time.perf_counter()
    run = SolverRun()
    lp_bound: float | None = None
    lp_kind = "the LP relaxation"  # CBC's start (on a large model) and mip_start say which
    scip_gap: float | None = None
    proven: _Whole | None = None  # the exact model proven from the restricted spare start
    if solver == "cbc":
        with phase("solve: MILP (cbc)"):
            run, lp_bound = _solve_cbc(m, time_limit, gap, threads)
    elif solver == "scip":
        if not scip_available():
            raise InputError("--solver scip: pyscipopt is not installed (pip install pyscipopt)")
        with phase("solve: MILP (scip)"):
            scip_gap = _solve_scip(m, time_limit, gap)
    else:
        given = _set_start(m, start) if start is not None else False
        if not given and _two_stage(m) and not _fleet_held(m):
            proven = prove_from_spare_start(m, begun + time_limit, gap, proof)
        # HiGHS on the proof's threads (two workers: a better bound by the limit); CBC on one
        if proven is None:
            run, lp_bound, lp_kind = _solve_highs(m, time_limit, gap, proof, begun, lp_kind, given)
    elapsed = time.perf_counter() - begun
    if proven is not None:
        status, objective, rel_gap, whole = "feasible", proven.objective, proven.gap, proven
    else:
        status = _OUTCOME_STATUS.get(run.outcome) or _status(m.prob, elapsed, time_limit)
        objective = pulp.value(m.prob.objective) if status in ("optimal", "feasible") else None
        rel_gap = _solver_gap(m, solver, run, objective, lp_bound, scip_gap)
        whole = _Whole()
        if objective is not None:
            deadline = begun + time_limit
            whole = _make_whole(m, solver, objective, rel_gap, gap, deadline, threads, proof)
            objective, rel_gap = whole.objective, whole.gap
            if objective is None:  # no whole-replica plan keeps every row (a total budget)
                status = "infeasible" if whole.proven else "time_limit"
    repair, bound_usd = whole.repair, whole.bound_usd
    with phase("solve: idle purchases"):
        dropped = drop_idle(m) if objective is not None else []
    if dropped:  # the bound stands: the plan only got cheaper
        bound = None if rel_gap is None else bound_from_gap(objective, rel_gap)
        objective = pulp.value(m.prob.objective)
        rel_gap = None if bound is None else gap_to_bound(objective, bound)
    kind = bound_kind(m, solver, lp_bound is not None, lp_kind, whole.polished, whole.spare_start)
    if status in ("optimal", "feasible") and rel_gap is not None:
        status = "optimal" if rel_gap <= gap + 1e-9 else "feasible"
    elapsed = time.perf_counter() - begun  # the repair and polish included
    searched = run.outcome is RunOutcome.SEARCHED
    gap_of = kind if rel_gap is not None else None
    message = _message(status, gap, time_limit, searched, whole, gap_of)
    if dropped:
        message += f"; purchases of {', '.join(dropped)}, idle for the whole horizon, dropped"
    return SolveResult(status, objective, rel_gap, elapsed, solver, message, repair, bound_usd)


def _solve_highs(
    m: PlannerModel,
    time_limit: float,
    gap: float,
    threads: int,
    start: float,
    lp_kind: str,
    given: bool = False,
) -> tuple[SolverRun, float | None, str]:
    """HiGHS on ``m``, from a MIP start (:func:`mip_start`) on a large model, or from the
    values already in ``m`` where ``given`` (:func:`_set_start`); ``start`` is the solve's
    ``perf_counter`` start. Returns (the run, the start's lower bound or None, that bound's
    kind: ``lp_kind`` on a model too small for a start)."""
    run = SolverRun()
    lp_bound: float | None = None
    start_plan, lp_s = False, 0.0
    if _large(m):
        with phase("solve: start (LP + rounded-fleet search)"):
            start_plan, lp_bound, lp_s, lp_kind = mip_start(
                m,
                threads,
                lp_seconds=LP_SHARE * time_limit,
                deadline=start + SEARCH_SHARE * time_limit,
            )
    left = max(1.0, time_limit - (time.perf_counter() - start))
    if start_plan and left < ROOT_FACTOR * lp_s:
        # HiGHS's root would overrun the limit and not better the start
        run = SolverRun(RunOutcome.SEARCHED)
    else:
        # two stages on a small model with relaxed rentals: the relaxed MILP only picks the
        # fleet (its gap need not be tight: the exact polish proves the plan)
        first_gap = max(gap, FLEET_GAP) if _two_stage(m) else gap
        cmd = _BulkHiGHS(
            msg=False,
            timeLimit=left,
            gapRel=first_gap,
            threads=threads,
            start=start_plan or given,
        )
        try:
            with phase("solve: MILP (highs)"):
                m.prob.solve(cmd)
        except pulp.PulpSolverError as exc:
            raise SolverError(f"HiGHS failed: {exc}") from None
    return run, lp_bound, lp_kind


def _set_start(m: PlannerModel, values: Mapping[str, float | None]) -> bool:
    """Put a plan's ``values`` (by variable name; 0 for a name it lacks) into ``m`` as the MIP
    start; False (nothing set) on a large model, which makes its own (:func:`mip_start`), or
    when ``values`` names none of ``m``'s variables.

    >>> from types import SimpleNamespace as NS
    >>> import pulp
    >>> prob = pulp.LpProblem("t", pulp.LpMinimize)
    >>> x, y = pulp.LpVariable("x", cat="Integer"), pulp.LpVariable("y")
    >>> prob += x + y
    >>> _set_start(NS(prob=prob), {"x": 2.0, "z": 1.0}), x.varValue, y.varValue
    (True, 2.0, 0.0)
    """
    if _large(m):
        return False
    variables = m.prob.variables()
    if not any(v.name in values for v in variables):
        return False
    for v in variables:
        value = values.get(v.name)
        v.varValue = 0.0 if value is None else float(value)
    return True


def _solver_gap(
    m: PlannerModel,
    solver: str,
    run: SolverRun,
    objective: float | None,
    lp_bound: float | None,
    scip_gap: float | None,
) -> float | None:
    """The plan's relative gap as the solver left it (None without a plan): SCIP's own, CBC's
    from its log, HiGHS's from its info; CBC's and HiGHS's against ``lp_bound`` too, where a
    start gave one (:func:`_with_bound`)."""
    if solver == "scip":
        rel_gap = scip_gap if objective is not None else None
    elif solver == "cbc":
        rel_gap = _cbc_gap(run.log, objective) if objective is not None else None
        if objective is not None and lp_bound is not None:
            rel_gap = _with_bound(objective, 1.0 if rel_gap is None else rel_gap, lp_bound)
    else:
        rel_gap = None
        model = getattr(m.prob, "solverModel", None)
        if model is not None and objective is not None:
            integer = any(v.cat == pulp.LpInteger for v in m.prob.variables())
            rel_gap = highs_gap(model.getInfo().mip_gap, integer)
            rel_gap = _with_bound(objective, rel_gap, lp_bound)
    return rel_gap


def _message(
    status: str, gap: float, time_limit: float, searched: bool, whole: _Whole, kind: str | None
) -> str:
    """The plan's one-line account of its solve: the status, how the plan was made whole or
    proven, and the bound its gap is measured against (``kind``, None without a gap)."""
    repair, bound_usd = whole.repair, whole.bound_usd
    message = {
        "optimal": f"optimal within the {gap:.2%} gap tolerance",
        "feasible": "stopped at the time limit with a feasible plan",
        "infeasible": "no plan meets every constraint",
        "unbounded": "the model is unbounded (a bug: costs are non-negative)",
        "time_limit": f"no feasible plan found within {time_limit:g} s",
        "error": "the solver ended without a usable answer",
    }[status]
    if searched and status == "feasible":
        message = (
            "the best plan of a search over rounded fleets of the LP relaxation (too little "
            "time left for HiGHS's MIP to better it), not proven optimal"
        )
    if whole.broken:
        message += (
            f"; rented replicas made whole break {', '.join(whole.broken)}, and the exact "
            "model (every rented replica whole) "
            + ("has no plan" if whole.proven else "found no plan within it in the time left")
        )
    if whole.exact_proof:
        start = (
            "a plan with each service's spare limited to its slowest replica types"
            if whole.spare_start
            else "the relaxed model's plan made whole"
        )
        message += f"; proven on the exact model (every rented replica whole), from {start}"
    elif repair > 0:
        if status == "feasible":
            message = "a plan with whole replicas, not proven optimal"
        message += (
            f"; rented replicas were solved as fractional and made whole per load slice "
            f"(+${repair:,.0f} present value over the fractional plan, at most "
            f"${bound_usd:,.0f} by construction)"
        )
    if kind is not None and status in ("optimal", "feasible"):
        message += f"; the gap is measured against {kind}"
    return message


def bound_kind(
    m: PlannerModel,
    solver: str,
    other: bool,
    other_kind: str,
    polished: bool,
    exact_only: bool = False,
) -> str:
    """What the reported gap is measured against: the solver's bound on the exact model
    (every rented replica whole) or on the relaxed one (rentals fractional: below every plan
    with whole replicas, so the gap overstates the truth), the better of it and ``other_kind``
    (the LP relaxation or the separable bound) where ``other``, and the exact model's bound
    where the polish ran. Every one of these is a valid lower bound for the exact model, so
    the gap is never below the true one. ``exact_only``: no relaxed model was solved (the
    proof from the restricted spare start, :func:`planner.optimize.whole.spare_start`)."""
    name = {"scip": "SCIP's", "cbc": "CBC's"}.get(solver, "HiGHS's")
    if exact_only:
        return "HiGHS's bound on the exact model (every rented replica whole)"
    if solver == "scip":
        return "SCIP's bound on the exact model (every rented replica whole)"
    relaxed = any(v.cat == pulp.LpContinuous for v in m.q.values())
    if polished:
        return (
            "the better of HiGHS's bounds on the exact model (every rented replica whole) "
            "and on the relaxed one (rentals fractional)"
        )
    model = "the relaxed model (rentals fractional)" if relaxed else "the exact model"
    text = f"{name} bound on {model}"
    return f"the better of {text} and {other_kind}" if other else text


def highs_gap(mip_gap: float, integer: bool) -> float:
    """HiGHS's relative gap as the plan reports it. HiGHS says ``inf`` both for a pure LP (no
    gap: 0) and for a MIP stopped before it had any bound (1: nothing is proven; a bound from
    elsewhere, :func:`_with_bound`, may narrow it).

    >>> highs_gap(0.02, True), highs_gap(float("inf"), False), highs_gap(float("inf"), True)
    (0.02, 0.0, 1.0)
    """
    if mip_gap < 1e30:
        return max(0.0, float(mip_gap))
    return 1.0 if integer else 0.0


def _with_bound(objective: float, rel_gap: float, bound: float | None) -> float:
    """The gap against the better of the solver's bound and ``bound`` (e.g. the LP's).

    >>> round(_with_bound(100.0, 1.0, 60.0), 6)   # the MIP root never finished: 100 %
    0.4
    >>> round(_with_bound(100.0, 0.1, 60.0), 6)   # the solver's bound (90) is better
    0.1
    """
    if bound is None or not objective:
        return rel_gap
    best = max(bound_from_gap(objective, rel_gap), bound)
    return gap_to_bound(objective, best)
