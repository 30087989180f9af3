"""Stage 4: run a MILP solver (CBC bundled with PuLP, or HiGHS) and map its outcome to a typed status."""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pulp

from planner.base import tolerances as tol
from planner.base.errors import InputError, SolverError
from planner.base.tolerances import whole
from planner.optimize.model import PlannerModel
from planner.physics.demand import HOURS_PER_MONTH

SOLVERS = ("auto", "cbc", "highs", "scip")


def exact_integers(m: PlannerModel) -> int:
    """Integer variables of ``m`` once every rented replica count is integer."""
    ints = sum(1 for v in m.prob.variables() if v.cat == pulp.LpInteger)
    return ints + sum(1 for v in m.q.values() if v.cat == pulp.LpContinuous)


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


def _cbc_gap(log: str, objective: float | None) -> float | None:
    """Relative gap from a CBC log (``Objective value`` and ``Lower bound`` lines)."""
    obj = re.search(r"Objective value:\s*([-+0-9.eE]+)", log)
    bound = re.search(r"Lower bound:\s*([-+0-9.eE]+)", log)
    if obj and bound:
        o, b = float(obj.group(1)), float(bound.group(1))
        return max(0.0, (o - b) / max(abs(o), 1e-9))
    gap = re.search(r"Gap:\s*([-+0-9.eE]+)", log)
    if gap:
        return float(gap.group(1))
    return 0.0 if objective is not None and "Optimal solution found" in log else None


@contextlib.contextmanager
def _quiet_stdout_fd() -> Iterator[None]:
    """Silence file descriptor 1 (C++ writes to it directly; ``sys.stdout`` cannot catch it)."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


# Seconds past its time limit after which a HiGHS run is cancelled (:class:`_BulkHiGHS`).
HIGHS_GRACE_S = 0.5
# Seconds an interrupted solve is given to stop before the interrupt goes on regardless (the
# solver's thread is a daemon and ends with the process): HiGHS checks its cancel flag only
# between steps, and in presolve on a 10-workload, 36-month model took ~10 s to see it.
INTERRUPT_WAIT_S = 2.0


class _BulkHiGHS(pulp.HiGHS):
    """PuLP's HiGHS interface, with the model passed in one call (``passModel``) instead of a
    column and a row at a time: ~10x faster to hand over a 100k-variable model; with
    ``start``, the variables' current values are handed to HiGHS as a MIP start."""

    def __init__(self, *args, start: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.start = start

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        # HiGHS prints its banner on stdout when created, before output_flag can be set:
        # with `--json -` that banner would corrupt the JSON.
        with _quiet_stdout_fd():
            super().createAndConfigureSolver(lp)

    def callSolver(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        """HiGHS runs in a worker thread (:func:`_run_cancellable`)."""
        # HiGHS checks its clock between LP solves: in the root's cut loop of a large model
        # it overran a 15 s limit by 6 s. A cancel at the limit stops it at its next check of
        # the interrupt flag, which comes sooner.
        model = lp.solverModel
        _run_cancellable("highs", model.run, model.cancelSolve, self.timeLimit)

    def findSolutionValues(self, lp: pulp.LpProblem):  # noqa: N802 (PuLP's name)
        """PuLP's reading, plus the statuses it does not map (a node or solution limit):
        integer-feasible when HiGHS holds a feasible plan (PuLP has read its values)."""
        try:
            return super().findSolutionValues(lp)
        except KeyError:
            feasible = lp.solverModel.getInfo().primal_solution_status == 2
            if feasible:
                return pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible
            return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound

    def buildSolverModel(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        import highspy

        inf = highspy.kHighsInf
        variables = lp.variables()
        for i, v in enumerate(variables):
            v.index = i
        sign = -1.0 if lp.sense == pulp.LpMaximize else 1.0
        cost = [0.0] * len(variables)
        for v, coef in lp.objective.items():
            cost[v.index] = sign * coef
        starts, index, value, lower, upper = [], [], [], [], []
        for i, c in enumerate(lp._constraints.values()):
            c.index = i
            starts.append(len(index))
            for v, coef in c.items():
                if coef != 0:
                    index.append(v.index)
                    value.append(coef)
            lb, ub = c.getLb(), c.getUb()
            lower.append(-inf if lb is None else lb)
            upper.append(inf if ub is None else ub)
        starts.append(len(index))
        model = highspy.HighsLp()
        model.num_col_ = len(variables)
        model.num_row_ = len(lower)
        model.col_cost_ = cost
        model.col_lower_ = [-inf if v.lowBound is None else v.lowBound for v in variables]
        model.col_upper_ = [inf if v.upBound is None else v.upBound for v in variables]
        model.row_lower_ = lower
        model.row_upper_ = upper
        model.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        model.a_matrix_.num_col_ = len(variables)
        model.a_matrix_.num_row_ = len(lower)
        model.a_matrix_.start_ = starts
        model.a_matrix_.index_ = index
        model.a_matrix_.value_ = value
        if self.mip:
            integer, continuous = highspy.HighsVarType.kInteger, highspy.HighsVarType.kContinuous
            model.integrality_ = [
                integer if v.cat == pulp.LpInteger else continuous for v in variables
            ]
        lp.solverModel.passModel(model)
        if self.start and self.mip:
            sol = highspy.HighsSolution()
            sol.col_value = [float(v.varValue or 0.0) for v in variables]
            sol.value_valid = True
            lp.solverModel.setSolution(sol)


class _SCIP(pulp.SCIP_PY):
    """PuLP's SCIP interface (``pyscipopt``), run in a worker thread as :class:`_BulkHiGHS`:
    SCIP's own Ctrl-C handler is off, so an interrupt reaches the planner, which stops SCIP
    (``interruptSolve``) and goes on with the interrupt; SCIP is also stopped at its time
    limit plus :data:`HIGHS_GRACE_S` if it overruns it."""

    def buildSolverModel(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        with _quiet_stdout_fd():  # SCIP's banner would corrupt `--json -`
            super().buildSolverModel(lp)
        lp.solverModel.setParam("misc/catchctrlc", False)

    def callSolver(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        model = lp.solverModel

        def run() -> None:
            with _quiet_stdout_fd():
                model.optimizeNogil()

        _run_cancellable("scip", run, model.interruptSolve, self.timeLimit)


def _run_cancellable(
    name: str, run: Callable[[], object], cancel: Callable[[], object], limit: float | None
) -> None:
    """Run a solver's ``run`` in a worker thread (HiGHS and SCIP release the GIL) while this
    thread waits in 0.1 s steps, so Ctrl-C and SIGTERM reach the planner during a solve: the
    solver is cancelled and the interrupt goes on (a plain call would hold it to the limit).
    Past ``limit`` + :data:`HIGHS_GRACE_S` the solver is cancelled too."""
    import threading

    done = threading.Event()

    def work() -> None:
        try:
            run()
        finally:
            done.set()

    threading.Thread(target=work, name=name, daemon=True).start()
    stop_at = time.perf_counter() + (limit or math.inf) + HIGHS_GRACE_S
    try:
        while not done.wait(0.1):
            if time.perf_counter() > stop_at:
                cancel()
                stop_at = math.inf
    except BaseException:
        cancel()
        done.wait(INTERRUPT_WAIT_S)  # the solver stops at its next check; leave it no time to print
        raise


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


def _large(m: PlannerModel) -> bool:
    return sum(1 for v in m.prob.variables() if v.cat == pulp.LpInteger) >= START_FROM_INTEGERS


def mip_start(
    m: PlannerModel, threads: int, lp_seconds: float = 60.0, deadline: float | None = None
) -> tuple[bool, float | None, float, str]:
    """Set ``m``'s variables to the cheaper of two feasible plans, the best LP-rounded one
    (:func:`planner.optimize.start.best_rounded_start`, whose search runs until ``deadline``
    after the LP) and the all-rental one (:func:`rental_start`).

    Returns (a start is set, a lower bound, the LP's seconds, the bound's kind). The bound is
    the LP optimum,
    or when the LP did not finish :func:`planner.optimize.bound.separable_bound` (None where that is
    not computed); the gap uses it when the MIP's own root has not finished. On the
    50-workload, 36-month benchmark: LP 13 s ($2.66M), searched plan $3.88M against the
    all-rental $7.79M and HiGHS's own first plan of $20.8M after 30 s.
    """
    import highspy

    from planner.optimize.start import best_rounded_start

    t0 = time.perf_counter()
    m.prob.solve(_BulkHiGHS(msg=False, mip=False, threads=threads, timeLimit=lp_seconds))
    lp_s = time.perf_counter() - t0
    # HiGHS's own status: PuLP reads an LP stopped at its time limit as "Optimal", and the
    # objective of that interrupted point is no bound at all (a 200-workload model reported
    # "optimal, 0 %" on it)
    solved = m.prob.solverModel.getModelStatus() == highspy.HighsModelStatus.kOptimal
    bound = pulp.value(m.prob.objective) if solved else None
    lp = {v.name: float(v.varValue or 0.0) for v in m.prob.variables()}
    if bound is None:  # the LP did not finish: a bound that needs no LP (seconds, not minutes)
        from planner.optimize.bound import separable_bound

        bound = separable_bound(m)
    kind = "the LP relaxation" if solved else "the separable bound (planner/optimize/bound.py)"
    # An LP stopped at its limit still leaves a point to round (the rounded plan is checked
    # like any other): on the 200-workload benchmark the LP does not finish in 60 s, and
    # without a start HiGHS found no plan at all in the time left.
    deadline = time.perf_counter() if deadline is None else deadline
    plans = []

    relax = _Relaxation(m, deadline) if solved else None
    if best_rounded_start(m, lp, deadline, relax) is not None:
        plans.append(
            (pulp.value(m.prob.objective), {v.name: v.varValue for v in m.prob.variables()})
        )
    if rental_start(m) and all(c.valid(tol.INTEGRALITY) for c in m.prob.constraints.values()):
        plans.append(
            (pulp.value(m.prob.objective), {v.name: v.varValue for v in m.prob.variables()})
        )
    if not plans:
        return False, bound, lp_s, kind
    _, best = min(plans, key=lambda p: p[0])
    for v in m.prob.variables():
        v.varValue = best[v.name]
    return True, bound, lp_s, kind


class _Relaxation:
    """The LP just solved by HiGHS (``m.prob.solverModel``), re-solved with some variables
    fixed: ``relax({name: value})`` returns every variable's LP value, or None if HiGHS does
    not reach an optimum before ``deadline``. HiGHS keeps its basis between calls, so a
    re-solve with a different fleet takes a fraction of the first solve."""

    def __init__(self, m: PlannerModel, deadline: float) -> None:
        self.highs = m.prob.solverModel
        self.names = [v.name for v in m.prob.variables()]
        self.index = {name: i for i, name in enumerate(self.names)}
        lp = self.highs.getLp()
        self.lower, self.upper = list(lp.col_lower_), list(lp.col_upper_)
        self.deadline = deadline
        self.fixed: list[int] = []
        # presolve would rebuild the problem; off, HiGHS re-solves from its last basis
        self.highs.setOptionValue("presolve", "off")

    def __call__(self, fixed: dict[str, float]) -> dict[str, float] | None:
        import highspy

        left = self.deadline - time.perf_counter()
        if left <= 0:
            return None
        idx = sorted({*self.fixed, *(self.index[n] for n in fixed)})
        lo = [float(fixed.get(self.names[i], self.lower[i])) for i in idx]
        up = [float(fixed.get(self.names[i], self.upper[i])) for i in idx]
        self.highs.changeColsBounds(len(idx), idx, lo, up)
        self.fixed = [self.index[n] for n in fixed]
        # HiGHS's clock runs across the runs of one Highs object: the limit is on its total
        self.highs.setOptionValue("time_limit", self.highs.getRunTime() + left)
        self.highs.run()
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        return dict(zip(self.names, self.highs.getSolution().col_value, strict=True))


def rental_start(m: PlannerModel) -> bool:
    """Set every variable to an all-rental plan (a MIP start); False if there is none to hand.

    Nothing is bought; each serving workload rents one cheapest uncapped non-reserved pair
    (per req/s) in every month-slice, ``max(1 + R, ceil((D / max_load + R mu) / mu))``
    replicas of it; each training job runs its first candidate on an unrestricted on-demand
    offer, a month at a time from its window's start. CBC on large models may find no plan of
    its own within the time limit; with this start it always has one (it checks the start and
    drops it if a budget makes it infeasible).
    """
    serve = _serve_start_pairs(m)
    train = _train_start_offers(m)
    if serve is None or train is None:
        return False
    for v in m.prob.variables():
        v.varValue = 0.0
    specs = {w.name: w for w in m.inputs.problem.workloads.serve}
    for w, (c, oid) in serve.items():
        R, load = specs[w].redundancy, specs[w].slo.max_load
        for t in m.cands.active[w]:
            if R:
                _start_largest(m, w, c, t)
            for s in range(len(m.cands.slices)):
                need = max(0.0, m.cands.demand[(w, t, s)]) / load + R * c.rate_rps
                count = max(1 + R, math.ceil(need / c.rate_rps * (1 + 1e-9)))
                m.q[(w, c.key, oid, t, s)].varValue = float(count)
    for job, (key, oid, f) in train.items():
        m.y[(job, key)].varValue = 1.0
        if (job, m.cands.offers[oid].provider) in m.loc:
            m.loc[(job, m.cands.offers[oid].provider)].varValue = 1.0
        left = m.train_cand(job, key).wall_hours / f  # wall hours to rent
        for t in m.cands.window[job]:  # from the window's start, a month at a time
            m.r[(job, key, oid, t)].varValue = min(left, HOURS_PER_MONTH)
            left -= min(left, HOURS_PER_MONTH)
    return True


def _serve_start_pairs(m: PlannerModel) -> dict | None:
    """Per serving workload, its cheapest (candidate, offer) per req/s among the pairs with a
    continuous ``q`` (uncapped, not reserved); None if a workload has none."""
    offers = m.cands.offers
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    best: dict[str, tuple[float, str, str]] = {}
    for w, key, oid, t, s in m.q:
        o = offers[oid]
        if t != m.cands.active[w][0] or s != 0 or o.kind == "reserved" or o.max_gpus is not None:
            continue
        c = index[(w, key)]
        cand = (o.usd_per_gpu_hour * c.tp / c.rate_rps, key, oid)
        if w not in best or cand < best[w]:
            best[w] = cand
    if any(w not in best for w in m.cands.serve):
        return None
    return {w: (index[(w, key)], oid) for w, (_, key, oid) in best.items()}


def _start_largest(m: PlannerModel, w: str, c, t: int) -> None:
    """The start's spare term: the one replica type in use is the largest."""
    from planner.optimize.model import spare_flags

    if (w, t) in m.largest:
        m.largest[(w, t)].varValue = c.rate_rps
    for on in spare_flags(m, w, c.key, t):
        on.varValue = 1.0


def _train_start_offers(m: PlannerModel) -> dict | None:
    """Per training job: (first candidate, an unrestricted on-demand offer, its progress per
    wall hour) whose run fits in the window; None if a job has none."""
    from planner.optimize.candidates import offer_restricted, progress_per_wall_hour

    specs = {j.name: j for j in m.inputs.problem.workloads.train}
    out = {}
    for job, key, oid, _t in m.r:
        o = m.cands.offers[oid]
        if job in out or o.kind != "on_demand" or offer_restricted(o):
            continue
        c = m.train_cand(job, key)
        f = progress_per_wall_hour(c, specs[job], o)
        if f and c.wall_hours / f <= m.cands.window_hours[job]:
            out[job] = (key, oid, f)
    if any(job not in out for job, cl in m.cands.train.items() if cl):
        return None
    return out


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


def _cbc_children() -> list[int]:
    """Process ids of this process's CBC children (Linux ``/proc``; elsewhere none found)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat_fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat_fields[1]) == me and "cbc" in (entry / "comm").read_text().lower():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _stop_cbc() -> None:
    """End CBC with the planner: an interrupted solve must not run on to its time limit."""
    for pid in _cbc_children():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
            _reap(pid)


def _reap(pid: int, wait_s: float = 2.0) -> None:
    """Collect an ended child (no zombie left); SIGKILL it if it does not end in ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _cbc_tmp_base() -> str:
    """A temporary folder whose path CBC can take: PuLP passes CBC its file names on a command
    line split at whitespace, so a ``TMPDIR`` with a space would break every solve."""
    base = tempfile.gettempdir()
    if not any(ch.isspace() for ch in base):
        return base
    for alt in ("/tmp", "/var/tmp"):
        if os.path.isdir(alt) and os.access(alt, os.W_OK):
            return alt
    raise SolverError(
        f"the temporary folder {base!r} has a space, which CBC cannot take; set TMPDIR to a "
        "folder without spaces or use --solver highs"
    )


_TIME_LIMIT_NO_PLAN = "\x00time limit, no solution file"


_START_KEPT = "\x00time limit, the MIP start kept"
_SEARCHED = "\x00the start's searched plan, no MIP"


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
) -> tuple[str, float | None]:
    """Run CBC on ``m`` in a private temporary directory; returns (CBC's log, the LP bound of
    its start or None).

    The model, solution and log files live in that directory and go with it whatever happens;
    on an interrupt (Ctrl-C, SIGTERM) the CBC process is ended too. When CBC stops at its
    time limit without writing a plan, the checked MIP start is kept as the plan.
    """
    t0 = time.perf_counter()
    warm, lp_bound = _cbc_start(m, time_limit, threads)
    start_values = {v.name: v.varValue for v in m.prob.variables()} if warm else None
    left = max(1.0, time_limit - (time.perf_counter() - t0))
    with tempfile.TemporaryDirectory(prefix="planner_cbc_", dir=_cbc_tmp_base()) as tmp:
        log_path = Path(tmp) / "cbc.log"
        cmd = pulp.PULP_CBC_CMD(
            msg=False,
            timeLimit=left,
            gapRel=gap,
            threads=threads,
            logPath=str(log_path),
            warmStart=warm,
        )
        cmd.tmpDir = tmp
        start = time.perf_counter()
        try:
            m.prob.solve(cmd)
        except pulp.PulpSolverError as exc:
            if time.perf_counter() - start < 0.9 * left:
                raise SolverError(f"CBC failed: {exc}") from None
            if start_values is None or not _restore(m, start_values):
                return _TIME_LIMIT_NO_PLAN, lp_bound  # CBC stopped by its clock, no plan
            return _START_KEPT, lp_bound
        except BaseException:
            _stop_cbc()
            raise
        return (log_path.read_text(errors="replace") if log_path.exists() else ""), lp_bound


def _restore(m: PlannerModel, values: dict[str, float | None]) -> bool:
    """Put a checked start back as the plan; False if it no longer satisfies the model."""
    for v in m.prob.variables():
        v.varValue = values.get(v.name)
    return all(c.valid(tol.INTEGRALITY) for c in m.prob.constraints.values())


def solve_model(
    m: PlannerModel,
    solver: str = "auto",
    time_limit: float = 60.0,
    gap: float = 0.001,
    threads: int | None = None,
) -> SolveResult:
    """Solve in place (variable values are set on ``m``) and return the typed outcome."""
    solver = solver.lower()
    if solver not in SOLVERS:
        raise InputError(f"--solver: unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}")
    if solver == "auto":
        solver = pick_solver(m)
    threads = threads or 1
    start = time.perf_counter()
    log = ""
    lp_bound: float | None = None
    lp_kind = "the LP relaxation"  # CBC's start (on a large model) and mip_start say which
    scip_gap: float | None = None
    if solver == "cbc":
        log, lp_bound = _solve_cbc(m, time_limit, gap, threads)
    elif solver == "scip":
        if not scip_available():
            raise InputError("--solver scip: pyscipopt is not installed (pip install pyscipopt)")
        scip_gap = _solve_scip(m, time_limit, gap)
    else:
        start_plan, lp_s = False, 0.0
        if _large(m):
            start_plan, lp_bound, lp_s, lp_kind = mip_start(
                m,
                threads,
                lp_seconds=LP_SHARE * time_limit,
                deadline=start + SEARCH_SHARE * time_limit,
            )
        left = max(1.0, time_limit - (time.perf_counter() - start))
        if start_plan and left < ROOT_FACTOR * lp_s:
            log = _SEARCHED  # HiGHS's root would overrun the limit and not better the start
        else:
            # two stages on a small model with relaxed rentals: the relaxed MILP only picks the
            # fleet (its gap need not be tight: the exact polish proves the plan)
            first_gap = max(gap, FLEET_GAP) if _two_stage(m) else gap
            cmd = _BulkHiGHS(
                msg=False, timeLimit=left, gapRel=first_gap, threads=threads, start=start_plan
            )
            try:
                m.prob.solve(cmd)
            except pulp.PulpSolverError as exc:
                raise SolverError(f"HiGHS failed: {exc}") from None
    elapsed = time.perf_counter() - start
    status = {
        _TIME_LIMIT_NO_PLAN: "time_limit",
        _START_KEPT: "feasible",
        _SEARCHED: "feasible",
    }.get(log) or _status(m.prob, elapsed, time_limit)
    objective = pulp.value(m.prob.objective) if status in ("optimal", "feasible") else None
    if solver == "scip":
        rel_gap = scip_gap if objective is not None else None
    elif solver == "cbc":
        rel_gap = _cbc_gap(log, objective) if objective is not None else None
        if objective is not None and lp_bound is not None:
            rel_gap = _with_bound(objective, 1.0 if rel_gap is None else rel_gap, lp_bound)
    else:
        rel_gap = None
        model = getattr(m.prob, "solverModel", None)
        if model is not None and objective is not None:
            integer = any(v.cat == pulp.LpInteger for v in m.prob.variables())
            rel_gap = highs_gap(model.getInfo().mip_gap, integer)
            rel_gap = _with_bound(objective, rel_gap, lp_bound)
    whole = _Whole()
    if objective is not None:
        whole = _make_whole(m, solver, objective, rel_gap, gap, start + time_limit, threads)
        objective, rel_gap = whole.objective, whole.gap
    repair, bound_usd = whole.repair, whole.bound_usd
    kind = bound_kind(m, solver, lp_bound is not None, lp_kind, whole.polished)
    if status in ("optimal", "feasible") and rel_gap is not None:
        status = "optimal" if rel_gap <= gap + 1e-9 else "feasible"
    elapsed = time.perf_counter() - start  # the repair and polish included
    searched = log == _SEARCHED
    gap_of = kind if rel_gap is not None else None
    message = _message(status, gap, time_limit, searched, whole, gap_of)
    return SolveResult(status, objective, rel_gap, elapsed, solver, message, repair, bound_usd)


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
    if whole.exact_proof:
        message += (
            "; proven on the exact model (every rented replica whole), from the relaxed "
            "model's fleet refitted with whole replicas"
        )
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


def bound_kind(m: PlannerModel, solver: str, other: bool, other_kind: str, polished: bool) -> str:
    """What the reported gap is measured against: the solver's bound on the exact model
    (every rented replica whole) or on the relaxed one (rentals fractional: below every plan
    with whole replicas, so the gap overstates the truth), the better of it and ``other_kind``
    (the LP relaxation or the separable bound) where ``other``, and the exact model's bound
    where the polish ran. Every one of these is a valid lower bound for the exact model, so
    the gap is never below the true one."""
    name = {"scip": "SCIP's", "cbc": "CBC's"}.get(solver, "HiGHS's")
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


@dataclass(frozen=True)
class _Whole:
    """The plan after :func:`_make_whole`: its objective and gap, the present value the
    repair added, what it may add at most, and whether the exact model proved the plan."""

    objective: float | None = None
    gap: float | None = None
    repair: float = 0.0
    bound_usd: float = 0.0
    exact_proof: bool = False
    polished: bool = False


def _make_whole(
    m: PlannerModel,
    solver: str,
    objective: float,
    rel_gap: float | None,
    gap: float,
    deadline: float,
    threads: int,
) -> _Whole:
    """Whole rented replicas (:func:`whole_replicas`), then the exact model from that plan
    (:func:`polish`) where the gap is open: to a proof on a small two-stage model, at a node
    limit on a large one. Everything ends by ``deadline`` (a ``perf_counter`` instant), except
    the repair's minimum of :data:`MIN_REPAIR_S` (a plan needs whole replicas)."""
    relaxed = objective
    bound_usd = repair_bound(m)
    two_stage = solver == "highs" and _two_stage(m)
    left = deadline - time.perf_counter()
    whole_replicas(m, min(REPAIR_S, max(MIN_REPAIR_S, left)), threads)
    # the repair re-chooses rentals: dearer (whole replicas) or, after a time-limited solve,
    # sometimes cheaper; the objective is the repaired plan's either way
    objective = pulp.value(m.prob.objective)
    changed = abs(objective - relaxed) > 1e-9 * max(1.0, abs(relaxed))
    if changed:
        bound = relaxed * (1 - (rel_gap or 0.0))
        rel_gap = max(0.0, 1 - bound / objective) if objective else rel_gap
    left = deadline - time.perf_counter()
    exact_proof = polished = False
    if (changed or two_stage) and (rel_gap or 0.0) > gap and left > 1.0:
        polished = True
        bound = objective * (1 - (rel_gap or 0.0))
        polish_s = left if two_stage else POLISH_S
        objective, rel_gap = polish(m, min(left, polish_s), gap, threads, bound)
        exact_proof = two_stage and rel_gap <= gap + 1e-9
    repair = max(0.0, objective - relaxed)
    return _Whole(objective, rel_gap, repair, bound_usd, exact_proof, polished)


def repair_bound(m: PlannerModel) -> float:
    """What the repair step can add at most to the relaxed plan in ``m``: one replica-slice
    of every rental pair whose relaxed count is fractional, ``sum_{q frac} d_t p_o m_r w_s``
    (its objective coefficient). Rounding each such count up costs less than that and keeps
    every constraint (more capacity, no cap on these offers); the repair re-solve is never
    dearer than rounding up."""
    obj = m.prob.objective
    return sum(
        obj.get(v, 0.0)
        for v in m.q.values()
        if v.cat == pulp.LpContinuous and v.varValue is not None and not whole(v.varValue)
    )


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
    best = max(objective * (1 - rel_gap), bound)
    return max(0.0, 1 - best / objective)


# Seconds at most, and at least, the repair's re-solve gets (:func:`whole_replicas`).
REPAIR_S, MIN_REPAIR_S = 30.0, 0.5
# Seconds at most the exact model (whole rentals) gets after the repair, started from the
# repaired plan: it proves the repaired plan optimal on problems of a few hundred cells (~1 s
# on problems/finetune_lab.yaml and inference_startup.yaml); on the reference, where the
# relaxed bound is weak, it stops at its node limit.
POLISH_S = 30.0
# ... and at most this many branch-and-bound nodes: a node limit, unlike a clock, gives the
# same plan on every machine (the golden plans and what-if sweeps stay reproducible).
POLISH_NODES = 30
# ... except on models of at most this many integers once rentals are whole, where the exact
# model from the repaired plan runs to its gap or the time left: with per-cell in-use rows
# (:data:`planner.optimize.model.IN_USE_PER_CELL`) and that start HiGHS proves the reference optimal
# in ~7-9 s (from scratch 13-30 s, varying with its seed: the start prunes the tree).
EXACT_POLISH_INTEGERS = 4_000
# The relaxed MILP's gap on such a model: it only picks the fleet. On the reference HiGHS has
# a plan within 1.8 % of its bound at 2.6 s and needs 5.2 s for 0.1 %, with the same fleet.
FLEET_GAP = 0.02
# The refit with the fleet fixed (:func:`refit_with_fleet_fixed`) stops at this gap or at this
# share of the repair's time: on tests/fixtures/buying.yaml it would take 20 s of 60; on the
# reference it reaches the optimum ($749,672.73; ~4.5 s) where a gap of 1e-3 stops $464 above.
REFIT_GAP, REFIT_SHARE = 1e-4, 0.25


def polish(
    m: PlannerModel, time_limit: float, gap: float, threads: int, bound: float
) -> tuple[float, float]:
    """Solve the exact model (every rented replica integer) with HiGHS, started from the
    repaired plan now in ``m``; keep whichever plan is cheaper. Returns (objective, gap), the
    gap against the best of ``bound`` (the relaxed model's) and the exact run's own bound."""
    values = {v.name: v.varValue for v in m.prob.variables()}
    before = pulp.value(m.prob.objective) or 0.0
    # a small exact model runs to its gap (a proof); a large one stops at a node limit
    nodes = {} if exact_integers(m) <= EXACT_POLISH_INTEGERS else {"mip_max_nodes": POLISH_NODES}
    try:
        with exact_model(m):
            m.prob.solve(
                _BulkHiGHS(
                    msg=False,
                    timeLimit=time_limit,
                    gapRel=gap,
                    threads=threads,
                    start=True,
                    **nodes,
                )
            )
        info = m.prob.solverModel.getInfo()
        found = m.prob.sol_status in (1, 2) and pulp.value(m.prob.objective) is not None
        after = pulp.value(m.prob.objective) if found else None
        exact_bound = float(info.mip_dual_bound) if found else -math.inf
    except pulp.PulpSolverError:
        after, exact_bound = None, -math.inf
    after = _keep_cheaper(m, values, before, after)
    best_bound = max(bound, exact_bound if exact_bound < 1e30 else -math.inf)
    return after, max(0.0, 1 - best_bound / after) if after else 0.0


def whole_replicas(m: PlannerModel, time_limit: float, threads: int) -> float:
    """The repair step: whole rented replicas in every load slice; returns the present value
    it added to the solver's plan.

    Every integer decision of the plan (purchases, owned replicas, runs, flags) is fixed, the
    continuous rentals become integer and HiGHS re-solves what is left, a small problem of
    one knapsack per (workload, month, slice) that takes well under a second; if that fails
    :func:`round_up_replicas` rounds up instead. The model's bounds and categories are
    restored afterwards.
    """
    frac = [
        v
        for v in m.q.values()
        if v.cat == pulp.LpContinuous and v.varValue is not None and not whole(v.varValue)
    ]
    if not frac:
        return round_up_replicas(m)  # snaps near-whole values
    before = pulp.value(m.prob.objective) or 0.0
    values = {v.name: v.varValue for v in m.prob.variables()}
    fixed = [v for v in m.prob.variables() if v.cat == pulp.LpInteger and v.varValue is not None]
    try:
        with exact_model(m, fixed):
            m.prob.solve(_BulkHiGHS(msg=False, timeLimit=time_limit, gapRel=1e-4, threads=threads))
        ok = pulp.LpStatus[m.prob.status] == "Optimal" and m.prob.sol_status in (1, 2)
    except pulp.PulpSolverError:
        ok = False
    if not ok:
        for v in m.prob.variables():
            v.varValue = values.get(v.name)
        round_up_replicas(m)
    if exact_integers(m) <= EXACT_POLISH_INTEGERS:
        refit_with_fleet_fixed(m, REFIT_SHARE * time_limit, threads)
    return max(0.0, (pulp.value(m.prob.objective) or 0.0) - before)


def _two_stage(m: PlannerModel) -> bool:
    """A small model solved with relaxed rentals: its plan is then made whole, refitted with
    its fleet fixed, and proven on the exact model (:func:`polish` without a node limit)."""
    relaxed = any(v.cat == pulp.LpContinuous for v in m.q.values())
    return relaxed and exact_integers(m) <= EXACT_POLISH_INTEGERS


def fleet_variables(m: PlannerModel) -> list[pulp.LpVariable]:
    """The integer decisions that are the fleet: servers and card nodes bought, reservations
    signed, existing nodes sold."""
    cards = [v for e in m.cards.values() for v in e if v.cat == pulp.LpInteger]
    return list(dict.fromkeys([*m.buy.values(), *cards, *m.res.values(), *m.sell.values()]))


def refit_with_fleet_fixed(m: PlannerModel, time_limit: float, threads: int) -> None:
    """With the whole-replica plan now in ``m`` as a start, fix only the fleet
    (:func:`fleet_variables`) and re-solve everything else exactly: which replica types serve
    (owned and rented, whole), the spare's types, training placement. Keeps the cheaper plan.

    The plan's fleet came from the relaxed model, whose owned replicas and spare flags were
    chosen against fractional rentals; on the reference this step takes ~3 s and lowers the
    repaired plan from $753,335 to the optimum, $749,672.73, which is what lets :func:`polish`
    prove it in ~6 s (from the repaired plan alone it took ~12 s)."""
    values = {v.name: v.varValue for v in m.prob.variables()}
    before = pulp.value(m.prob.objective) or 0.0
    fixed = [v for v in fleet_variables(m) if v.varValue is not None]
    try:
        with exact_model(m, fixed):
            m.prob.solve(
                _BulkHiGHS(
                    msg=False, timeLimit=time_limit, gapRel=REFIT_GAP, threads=threads, start=True
                )
            )
        after = pulp.value(m.prob.objective) if m.prob.sol_status in (1, 2) else None
    except pulp.PulpSolverError:
        after = None
    _keep_cheaper(m, values, before, after)


@contextlib.contextmanager
def exact_model(m: PlannerModel, fixed: Sequence[pulp.LpVariable] = ()) -> Iterator[None]:
    """For the duration: every relaxed rented replica integer (the exact model) and each of
    ``fixed`` held at its current value, rounded; categories and bounds restored after."""
    bounds = [(v, v.lowBound, v.upBound) for v in fixed]
    rented = [v for v in m.q.values() if v.cat == pulp.LpContinuous]
    try:
        for v in fixed:
            v.lowBound = v.upBound = float(round(v.varValue))
        for v in rented:
            v.cat = pulp.LpInteger
        yield
    finally:
        for v, lo, up in bounds:
            v.lowBound, v.upBound = lo, up
        for v in rented:
            v.cat = pulp.LpContinuous


def _keep_cheaper(
    m: PlannerModel, values: dict[str, float | None], before: float, after: float | None
) -> float:
    """After a re-solve from the plan ``values`` (present value ``before``): put that plan
    back when the re-solve found none or a dearer one, else snap the new plan's integers
    (1e-9 off) to whole numbers. Returns the kept plan's objective."""
    if after is None or after > before:
        for v in m.prob.variables():
            v.varValue = values.get(v.name)
        return before
    round_up_replicas(m)
    return pulp.value(m.prob.objective) or after


def round_up_replicas(m: PlannerModel) -> float:
    """Make every continuous rented replica count whole (the repair step); returns the
    present value it added.

    Only uncapped, non-reserved rentals are continuous in the model. Per (workload, month,
    slice) the whole counts are re-chosen with everything else fixed: cover the same
    capacity (req/s) and the same number of replicas at least cost with the cell's one or two
    rental pairs in use, or one of them with the cheapest pair per req/s, exactly by
    enumeration; with more pairs, or a request mix (whose buckets' capacity is given to
    these very replicas), each count is rounded up. Either way only capacity is added
    and no cap exists to break, so every constraint still holds; the cost added is at most
    one replica-slice per fractional pair, ``sum d_t p_o m_r w_s``.
    """
    before = pulp.value(m.prob.objective) or 0.0
    cells: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    on: dict[str, pulp.LpVariable | None] = {}
    mixed: dict[int, bool] = {}
    for (w, key, _oid, t, s), v in m.q.items():
        if v.cat == pulp.LpContinuous and v.varValue is not None:
            c = m.serve_cand(w, key)
            cells[(w, t, s)].append((v, c.rate_rps))
            on[v.name] = m.on.get((w, key, t))
            mixed[id(v)] = c.mixed
    cost = m.prob.objective
    changed = False
    for vs in cells.values():
        if all(whole(v.varValue) for v, _ in vs):
            for v, _ in vs:
                v.varValue = float(round(v.varValue))
            continue
        changed = True
        if mixed[id(vs[0][0])]:
            # a request mix: the buckets' capacity sits on these very replicas; only more of them
            for v, _ in vs:
                v.varValue = float(math.ceil(v.varValue - 1e-6))
        else:
            _whole_cell(vs, cost, on)
    return max(0.0, (pulp.value(m.prob.objective) or 0.0) - before) if changed else 0.0


def _whole_cell(vs: list, objective, on: dict[str, pulp.LpVariable | None]) -> None:
    """Whole rented replicas for one cell, as :func:`round_up_replicas` describes."""
    rps = sum(mu * v.varValue for v, mu in vs) - 1e-9
    count = sum(v.varValue for v, _ in vs) - 1e-9
    price = {v.name: objective.get(v, 0.0) for v, _ in vs}
    used = [(v, mu) for v, mu in vs if v.varValue > 1e-9]
    # a replica type whose in-use flag is off stays unused (the spare did not cover it)
    pool = [p for p in vs if on[p[0].name] is None or (on[p[0].name].varValue or 0.0) > 0.5]
    options: list[dict[str, int]] = []
    if len(used) <= 2:
        cheapest = min(pool, key=lambda p: (price[p[0].name] / p[1], p[0].name), default=None)
        pairs = [used] + ([[u, cheapest] for u in used] if cheapest is not None else [])
        options = [_cover(list(dict.fromkeys(p)), rps, count, price) for p in pairs if p]
    options.append({v.name: max(0, math.ceil(v.varValue - 1e-6)) for v, _ in vs})
    best = min(options, key=lambda o: (sum(price[k] * n for k, n in o.items()), sorted(o.items())))
    for v, _ in vs:
        v.varValue = float(best.get(v.name, 0))


def _cover(pairs: list, rps: float, count: float, price: dict[str, float]) -> dict[str, int]:
    """Cheapest whole counts of one or two replica types ``(variable, req/s)`` with at least
    ``rps`` req/s and ``count`` replicas (:func:`planner.optimize.start.cover_two`, by variable name).

    >>> from types import SimpleNamespace as NS
    >>> a, b = NS(name="a"), NS(name="b")
    >>> _cover([(a, 10.0), (b, 3.0)], 23.0, 1.0, {"a": 10.0, "b": 3.5})
    {'a': 2, 'b': 1}
    >>> _cover([(a, 10.0)], 23.0, 4.0, {"a": 10.0})
    {'a': 4}
    """
    from planner.optimize.start import cover_two

    chosen = pairs[:1] if pairs[0][0] is pairs[-1][0] else [pairs[0], pairs[-1]]
    counts = cover_two([(mu, price[v.name]) for v, mu in chosen], rps, count)
    return {v.name: n for (v, _), n in zip(chosen, counts, strict=True)}
