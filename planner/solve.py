"""Stage 4: run a MILP solver (CBC bundled with PuLP, or HiGHS) and map its outcome to a typed status."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pulp

from planner.demand import HOURS_PER_MONTH
from planner.errors import InputError, SolverError
from planner.model import PlannerModel

SOLVERS = ("cbc", "highs")


@dataclass(frozen=True)
class SolveResult:
    status: str  # optimal | feasible | infeasible | unbounded | time_limit | error
    objective: float | None
    gap: float | None  # relative gap between the plan and the best bound
    seconds: float
    solver: str
    message: str = ""

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


class _BulkHiGHS(pulp.HiGHS):
    """PuLP's HiGHS interface, with the model passed in one call (``passModel``) instead of a
    column and a row at a time: ~10x faster to hand over a 100k-variable model."""

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        # HiGHS prints its banner on stdout when created, before output_flag can be set:
        # with `--json -` that banner would corrupt the JSON.
        with _quiet_stdout_fd():
            super().createAndConfigureSolver(lp)

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


def rental_start(m: PlannerModel) -> bool:
    """Set every variable to an all-rental plan (a MIP start); False if there is none to hand.

    Nothing is bought; each serving month-slice rents ``max(1, D / mu)`` replicas of its
    cheapest uncapped non-reserved pair, each training job runs its first candidate with an
    on-demand offer entirely on it. CBC on large models may find no plan of its own within the
    time limit; with this start it always has one (it checks the start and drops it if a
    budget makes it infeasible).
    """
    offers = m.cands.offers
    serve_opts: dict[str, list[tuple[str, str, float, float]]] = {}
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    for w, key, oid, t, s in m.q:
        if t != m.cands.active[w][0] or s != 0:
            continue
        o = offers[oid]
        if o.kind != "reserved" and o.max_gpus is None:
            c = index[(w, key)]
            serve_opts.setdefault(w, []).append((key, oid, c.rate_rps, o.usd_per_gpu_hour * c.tp))
    if any(w not in serve_opts for w in m.cands.serve):
        return False
    train_pick: dict[str, tuple[str, str]] = {}
    for job, key, oid, _t in m.r:
        if job not in train_pick and offers[oid].kind == "on_demand":
            train_pick[job] = (key, oid)
    if any(job not in train_pick for job, cl in m.cands.train.items() if cl):
        return False
    for v in m.prob.variables():
        v.varValue = 0.0
    for w, opts in serve_opts.items():
        for t in m.cands.active[w]:
            for s in range(len(m.cands.slices)):
                d = max(0.0, m.cands.demand[(w, t, s)])
                key, oid, mu, _ = min(opts, key=lambda x: (x[3] * max(1.0, d / x[2]), x[0], x[1]))
                m.q[(w, key, oid, t, s)].varValue = max(1.0, d / mu)
    for job, (key, oid) in train_pick.items():
        m.y[(job, key)].varValue = 1.0
        left = m.train_cand(job, key).wall_hours
        for t in m.cands.window[job]:  # from the window's start, a month at a time
            m.r[(job, key, oid, t)].varValue = min(left, HOURS_PER_MONTH)
            left -= min(left, HOURS_PER_MONTH)
    return True


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


def _solve_cbc(m: PlannerModel, time_limit: float, gap: float, threads: int) -> str:
    """Run CBC on ``m`` in a private temporary directory; returns CBC's log.

    The model, solution and log files live in that directory and go with it whatever happens;
    on an interrupt (Ctrl-C, SIGTERM) the CBC process is ended too.
    """
    with tempfile.TemporaryDirectory(prefix="planner_cbc_", dir=_cbc_tmp_base()) as tmp:
        log_path = Path(tmp) / "cbc.log"
        cmd = pulp.PULP_CBC_CMD(
            msg=False,
            timeLimit=time_limit,
            gapRel=gap,
            threads=threads,
            logPath=str(log_path),
            warmStart=rental_start(m),
        )
        cmd.tmpDir = tmp
        start = time.perf_counter()
        try:
            m.prob.solve(cmd)
        except pulp.PulpSolverError as exc:
            if time.perf_counter() - start >= 0.9 * time_limit:
                return _TIME_LIMIT_NO_PLAN  # CBC stopped by its clock before any solution
            raise SolverError(f"CBC failed: {exc}") from None
        except BaseException:
            _stop_cbc()
            raise
        return log_path.read_text(errors="replace") if log_path.exists() else ""


def solve_model(
    m: PlannerModel,
    solver: str = "cbc",
    time_limit: float = 60.0,
    gap: float = 0.001,
    threads: int | None = None,
) -> SolveResult:
    """Solve in place (variable values are set on ``m``) and return the typed outcome."""
    solver = solver.lower()
    if solver not in SOLVERS:
        raise InputError(f"--solver: unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}")
    threads = threads or 1
    start = time.perf_counter()
    log = ""
    if solver == "cbc":
        log = _solve_cbc(m, time_limit, gap, threads)
    else:
        cmd = _BulkHiGHS(msg=False, timeLimit=time_limit, gapRel=gap, threads=threads)
        try:
            m.prob.solve(cmd)
        except pulp.PulpSolverError as exc:
            raise SolverError(f"HiGHS failed: {exc}") from None
    elapsed = time.perf_counter() - start
    status = "time_limit" if log == _TIME_LIMIT_NO_PLAN else _status(m.prob, elapsed, time_limit)
    objective = pulp.value(m.prob.objective) if status in ("optimal", "feasible") else None
    if solver == "cbc":
        rel_gap = _cbc_gap(log, objective) if objective is not None else None
    else:
        rel_gap = None
        model = getattr(m.prob, "solverModel", None)
        if model is not None and objective is not None:
            info = model.getInfo()
            rel_gap = max(0.0, float(info.mip_gap)) if info.mip_gap < 1e30 else 0.0
    if status == "optimal" and rel_gap is not None and rel_gap > gap + 1e-9:
        status = "feasible"
    message = {
        "optimal": f"optimal within the {gap:.2%} gap tolerance",
        "feasible": "stopped at the time limit with a feasible plan",
        "infeasible": "no plan meets every constraint",
        "unbounded": "the model is unbounded (a bug: costs are non-negative)",
        "time_limit": f"no feasible plan found within {time_limit:g} s",
        "error": "the solver ended without a usable answer",
    }[status]
    return SolveResult(status, objective, rel_gap, elapsed, solver, message)
