"""Stage 4: the solver back ends. HiGHS (:class:`_BulkHiGHS`, the model handed over in one call)
and SCIP (:class:`_SCIP`) run in a worker thread (:func:`_run_cancellable`) so an interrupt
reaches the planner mid-solve; CBC (:func:`run_cbc`) runs as PuLP's subprocess in a private
temporary folder and is ended with the planner. How a run ended, where the model's own status
does not say it all, comes back typed (:class:`RunOutcome` in a :class:`SolverRun`), never as a
string in the log."""

from __future__ import annotations

import contextlib
import enum
import math
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pulp

from planner.base import tolerances as tol
from planner.base.errors import SolverError
from planner.optimize.model import PlannerModel


class RunOutcome(enum.Enum):
    """How a solver run ended. ``SOLVED``: the model's own status says it (read from PuLP);
    the others are ends PuLP's status cannot express."""

    SOLVED = "solved"
    TIME_LIMIT_NO_PLAN = "time limit, no solution file"
    START_KEPT = "time limit, the MIP start kept"
    SEARCHED = "the start's searched plan, no MIP"


@dataclass(frozen=True)
class SolverRun:
    """A solver run's outcome and its log (CBC's, from which its gap is read; else empty)."""

    outcome: RunOutcome = RunOutcome.SOLVED
    log: str = ""


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


class SolverAbandoned(pulp.PulpSolverError):
    """A solver that did not stop when cancelled at its time limit: its thread (a daemon) is
    left to itself and the run has no answer."""


class _BulkHiGHS(pulp.HiGHS):
    """PuLP's HiGHS interface, with the model passed in one call (``passModel``) instead of a
    column and a row at a time: ~10x faster to hand over a 100k-variable model; with
    ``start``, the variables' current values are handed to HiGHS as a MIP start; with
    ``abandon_s``, a run still going that long after its cancel raises
    :class:`SolverAbandoned` (HiGHS checks neither its clock nor its cancel flag inside some
    presolve loops: a two-stage model's RINS sub-MIP sat in
    ``HPresolve::strengthenInequalities`` for 20 minutes past a 20 s limit; HiGHS issue 2226)."""

    def __init__(
        self, *args, start: bool = False, abandon_s: float | None = None, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.start = start
        self.abandon_s = abandon_s

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
        # each run in a thread of its own also keeps HiGHS's thread count per run: in one
        # OS thread, a run asking for another count than that thread's first run can fail
        # at once (HiGHS 1.16: kError, measured for 1 then 2, and 2 then 1)
        _run_cancellable("highs", model.run, model.cancelSolve, self.timeLimit, self.abandon_s)

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
        # the objective's constant (existing GPUs' running costs less their resale, contracts)
        # is part of the objective HiGHS reports, bounds and measures its gap against
        model.offset_ = sign * float(lp.objective.constant or 0.0)
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
    name: str,
    run: Callable[[], object],
    cancel: Callable[[], object],
    limit: float | None,
    abandon_s: float | None = None,
) -> None:
    """Run a solver's ``run`` in a worker thread (HiGHS and SCIP release the GIL) while this
    thread waits in 0.1 s steps, so Ctrl-C and SIGTERM reach the planner during a solve: the
    solver is cancelled and the interrupt goes on (a plain call would hold it to the limit).
    Past ``limit`` + :data:`HIGHS_GRACE_S` the solver is cancelled too, and ``abandon_s`` after
    that cancel a run that has not stopped is left running and :class:`SolverAbandoned` raised.

    >>> import time
    >>> _run_cancellable("nap", lambda: time.sleep(0.05), lambda: None, 1.0)
    >>> _run_cancellable("deaf", lambda: time.sleep(5), lambda: None, 0.1, abandon_s=0.2)
    Traceback (most recent call last):
    ...
    planner.optimize.backends.SolverAbandoned: deaf ignored its cancel at its 0.1 s limit ...
    """
    import threading

    done = threading.Event()

    def work() -> None:
        try:
            run()
        finally:
            done.set()

    threading.Thread(target=work, name=name, daemon=True).start()
    stop_at = time.perf_counter() + (limit or math.inf) + HIGHS_GRACE_S
    give_up = math.inf
    try:
        while not done.wait(0.1):
            now = time.perf_counter()
            if now > stop_at:
                cancel()
                stop_at = math.inf
                give_up = now + (math.inf if abandon_s is None else abandon_s)
            if now > give_up:
                raise SolverAbandoned(
                    f"{name} ignored its cancel at its {limit:g} s limit for {abandon_s:g} s "
                    "more: left running, no answer taken"
                )
    except SolverAbandoned:
        raise
    except BaseException:
        cancel()
        done.wait(INTERRUPT_WAIT_S)  # the solver stops at its next check; leave it no time to print
        raise


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


def run_cbc(
    m: PlannerModel,
    time_limit: float,
    gap: float,
    threads: int,
    start_values: dict[str, float | None] | None,
) -> SolverRun:
    """Run CBC on ``m`` in a private temporary directory, from the MIP start now in ``m`` when
    ``start_values`` (that start's values) is given; returns CBC's log and how it ended.

    The model, solution and log files live in that directory and go with it whatever happens;
    on an interrupt (Ctrl-C, SIGTERM) the CBC process is ended too. When CBC stops at its
    time limit without writing a plan, the checked MIP start is kept as the plan.
    """
    warm = start_values is not None
    with tempfile.TemporaryDirectory(prefix="planner_cbc_", dir=_cbc_tmp_base()) as tmp:
        log_path = Path(tmp) / "cbc.log"
        cmd = pulp.PULP_CBC_CMD(
            msg=False,
            timeLimit=time_limit,
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
            if time.perf_counter() - start < 0.9 * time_limit:
                raise SolverError(f"CBC failed: {exc}") from None
            if start_values is None or not _restore(m, start_values):
                # CBC stopped by its clock, no plan
                return SolverRun(RunOutcome.TIME_LIMIT_NO_PLAN)
            return SolverRun(RunOutcome.START_KEPT)
        except BaseException:
            _stop_cbc()
            raise
        return SolverRun(log=log_path.read_text(errors="replace") if log_path.exists() else "")


def _restore(m: PlannerModel, values: dict[str, float | None]) -> bool:
    """Put a checked start back as the plan; False if it no longer satisfies the model."""
    for v in m.prob.variables():
        v.varValue = values.get(v.name)
    return all(c.valid(tol.INTEGRALITY) for c in m.prob.constraints.values())


def bound_from_gap(objective: float, gap: float) -> float:
    """The lower bound a relative ``gap`` proves for a plan of ``objective`` (HiGHS's gap is
    relative to the plan's magnitude, so a negative objective's bound lies further below).

    >>> bound_from_gap(100.0, 0.1), bound_from_gap(-100.0, 0.1)
    (90.0, -110.0)
    """
    return objective - abs(objective) * gap


def gap_to_bound(objective: float, bound: float) -> float:
    """The relative gap between a plan of ``objective`` and a lower ``bound``: 0 at or below
    it, relative to the plan's magnitude (never below the truth for a negative objective).

    >>> gap_to_bound(100.0, 90.0), gap_to_bound(-100.0, -110.0), gap_to_bound(5.0, 6.0)
    (0.1, 0.1, 0.0)
    """
    if objective == 0:
        return 0.0 if bound >= 0 else 1.0
    return max(0.0, (objective - bound) / abs(objective))
