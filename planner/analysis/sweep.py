"""What-if sweeps: scenario tasks and their results, solving one scenario (a deep copy of
the problem file's data with the task's values set, validated, resolved and planned), and
running many in order on a local process pool or a Dask cluster, with progress callbacks
and the JSON results file. A scenario that fails (invalid value, infeasible, solver error)
is a row with its status and message, never an abort.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.base.errors import InfeasibleError, InputError, PlannerError, SolverError
from planner.base.yamlio import YamlDoc
from planner.inputs.keys import (
    MAX_WORKERS,
    Base,
    Loc,
    Value,
    Vary,
    renormalise_probabilities,
    set_at,
)
from planner.plan.data import Plan


def grid(varies: Sequence[Vary]) -> list[dict[str, Value]]:
    """Cartesian product of the varies' values (the first vary changes slowest)."""
    return [
        dict(zip([v.key for v in varies], combo, strict=True))
        for combo in itertools.product(*(v.values for v in varies))
    ]


@dataclass
class Task:
    """Everything one scenario needs; picklable (sent to processes or Dask workers)."""

    index: int
    base: Base
    params: dict[str, Value]
    sets: list[tuple[Loc, Value]]
    solver: str = "auto"
    time_limit: float | None = None
    gap: float | None = None
    keep_plan: bool = False
    # A re-plan task: these purchases (a label saying whose, and the first stage by key)
    # held under the scenario's inputs instead of its own solve (planner.analysis.improve).
    replan: tuple[str, dict[tuple, float]] | None = None


@dataclass
class ScenarioResult:
    index: int
    params: dict[str, Value]
    status: str  # optimal | feasible | infeasible | invalid | error | time_limit ...
    message: str = ""
    totals: dict[str, Any] | None = None
    purchases: list[dict[str, Any]] = field(default_factory=list)
    owned_gpu_hours: dict[str, float] = field(default_factory=dict)
    rented_gpu_hours: dict[str, float] = field(default_factory=dict)
    rented_share: float | None = None
    usd_per_1m_tokens: float | None = None
    bought: dict[str, int] = field(default_factory=dict)  # GPUs bought per type over the horizon
    # Commitments signed (reserved offers): offer -> most GPUs under commitment at once
    reserved: dict[str, int] = field(default_factory=dict)
    rented_by: dict[str, dict[str, float]] = field(default_factory=dict)  # gpu -> {kind: GPU-h}
    rental_usd_by_gpu: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    plan_json: str | None = None
    # How sure the row is: its plan's present value (the objective), the relative gap to the
    # lower bound of the scenario's own solve and what that bound is (None: none proven),
    # and the gap tolerance the status was judged against.
    objective_usd: float | None = None
    gap: float | None = None
    bound: str | None = None
    bound_usd: float | None = None
    gap_tolerance: float | None = None
    # The base problem's purchases re-planned here (None: not re-planned, or they cannot be
    # held here), and whose purchases the kept plan has ("own", "base" or a neighbour's).
    base_plan_usd: float | None = None
    kept: str = "own"
    fleet: dict[tuple, float] | None = None  # the kept plan's first stage (not in the JSON)

    @property
    def ok(self) -> bool:
        return self.totals is not None

    @property
    def plan(self) -> Plan | None:
        return Plan.model_validate_json(self.plan_json) if self.plan_json else None

    def to_json(self) -> dict[str, Any]:
        """The JSON contract of ``planner whatif --json`` (one object per scenario)."""
        return {
            "params": self.params,
            "status": self.status,
            "message": self.message,
            "totals": self.totals,
            "purchases": self.purchases,
            "owned_gpu_hours": self.owned_gpu_hours,
            "rented_gpu_hours": self.rented_gpu_hours,
            "rented_share": self.rented_share,
            "usd_per_1m_tokens": self.usd_per_1m_tokens,
            "objective_usd": self.objective_usd,
            "gap": self.gap,
            "bound": self.bound,
            "base_plan_usd": self.base_plan_usd,
            "kept": self.kept,
        }


def summarize(plan: Plan, index: int = 0, params: dict[str, Value] | None = None) -> ScenarioResult:
    """The what-if row of a solved plan."""
    owned: dict[str, float] = defaultdict(float)
    rented: dict[str, float] = defaultdict(float)
    for f in plan.fleet:
        owned[f.gpu] += f.owned_busy_gpu_hours
        rented[f.gpu] += f.rented_gpu_hours
    by: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    rusd: dict[str, float] = defaultdict(float)
    for r in plan.rentals:
        by[r.gpu][r.kind] += r.gpu_hours
        rusd[r.gpu] += r.usd
    bought: dict[str, int] = defaultdict(int)
    for p in plan.purchases:
        bought[p.gpu] += p.count
    at_once: dict[tuple[str, str], int] = defaultdict(int)  # (offer, month) -> GPUs committed
    for res in plan.reservations:
        t0 = plan.months.index(res.start_month) if res.start_month in plan.months else 0
        for m in plan.months[t0 : t0 + res.term_months]:
            at_once[(res.offer, m)] += res.gpus
    reserved: dict[str, int] = defaultdict(int)
    for (offer, _m), n in at_once.items():
        reserved[offer] = max(reserved[offer], n)
    gpus = sorted(set(owned) | set(rented) | set(bought))
    total_h = sum(owned.values()) + sum(rented.values())
    serve = [w for w in plan.workloads if w.kind == "serve"]
    tokens = sum(w.tokens for w in serve)
    per_m = sum(w.cost_usd for w in serve) / tokens * 1e6 if serve and tokens > 0 else None
    return ScenarioResult(
        index=index,
        params=dict(params or {}),
        status=plan.status,
        message=plan.message,
        totals=plan.totals.model_dump(),
        purchases=[p.model_dump() for p in plan.purchases],
        owned_gpu_hours={g: round(owned.get(g, 0.0), 6) for g in gpus},
        rented_gpu_hours={g: round(rented.get(g, 0.0), 6) for g in gpus},
        rented_share=(sum(rented.values()) / total_h) if total_h > 0 else 0.0,
        usd_per_1m_tokens=per_m,
        bought={g: n for g, n in sorted(bought.items()) if n},
        reserved={o: n for o, n in sorted(reserved.items()) if n},
        rented_by={g: dict(k) for g, k in sorted(by.items())},
        rental_usd_by_gpu=dict(sorted(rusd.items())),
        seconds=plan.solve_seconds,
        objective_usd=plan.objective_usd,
        gap=plan.gap,
    )


def summary_line(results: Sequence[ScenarioResult]) -> str:
    """How sure the rows are, in one sentence ("5 of 6 scenarios proven within 0.1 %; the
    others within 4.2 %").

    >>> from types import SimpleNamespace as R
    >>> rows = [R(ok=True, status="optimal", gap=0.0005, gap_tolerance=0.001),
    ...         R(ok=True, status="feasible", gap=0.042, gap_tolerance=0.001),
    ...         R(ok=True, status="feasible", gap=None, gap_tolerance=0.001),
    ...         R(ok=False, status="infeasible", gap=None, gap_tolerance=None)]
    >>> summary_line(rows)
    '1 of 4 scenarios proven within 0.1 %; 1 more within 4.2 %, 1 with no bound proven, 1 without a plan'
    """
    n = len(results)
    proven = [r for r in results if r.ok and r.status == "optimal"]
    others = [r for r in results if r.ok and r.status != "optimal" and r.gap is not None]
    unbounded = [r for r in results if r.ok and r.gap is None]
    failed = n - len(proven) - len(others) - len(unbounded)
    tols = sorted({r.gap_tolerance for r in results if r.gap_tolerance is not None})
    tol = f"{tols[-1]:.1%}".replace("%", " %") if tols else "the tolerance"
    line = f"{len(proven)} of {n} scenarios proven within {tol}"
    parts = []
    if others:
        worst = max(r.gap for r in others)
        more = "the others" if not unbounded and not failed else f"{len(others)} more"
        parts.append(f"{more} within {worst:.1%}".replace("%", " %"))
    if unbounded:
        parts.append(f"{len(unbounded)} with no bound proven")
    if failed:
        parts.append(f"{failed} without a plan")
    return line + ("; " + ", ".join(parts) if parts else "")


def scenario_inputs(task: Task):
    """Apply the task's values to a deep copy of the data, validate and resolve."""
    from planner.base.yamlio import validate
    from planner.inputs.problem import Problem, resolve, with_source

    data = copy.deepcopy(task.base.data)
    for loc, value in task.sets:
        set_at(data, loc, value)
    renormalise_probabilities(data, [loc for loc, _ in task.sets])
    label = ", ".join(f"{k}={v}" for k, v in task.params.items())
    doc = YamlDoc(data, dict(task.base.lines), Path(task.base.path))
    problem = validate(Problem, doc, f"problem file ({label})" if label else "problem file")
    inputs = resolve(problem, doc, base_dir=Path(task.base.base_dir))
    text = json.dumps(data, sort_keys=True, default=str)
    return with_source(
        inputs,
        f"{task.base.path} [{label}]" if label else task.base.path,
        hashlib.sha256(text.encode()).hexdigest(),
    )


def changed_inputs(base: Base, sets: Sequence[str]):
    """The problem with ``KEY=VALUE`` changes applied (``planner solve --set``, the web
    page's what-if): the same keys, aliases, checks and validation as one scenario of a
    what-if grid, so a change planned here equals that grid's scenario. No change: the
    problem as written (still validated from its data)."""
    from planner.inputs.keys import make_varies, parse_vary

    for spec in sets:
        _key, values = parse_vary(spec)
        if len(values) != 1:
            raise InputError(f"--set {spec}: one value per key (a grid is `planner whatif`)")
    varies = make_varies(base, list(sets))
    params = {v.key: v.values[0] for v in varies}
    task_sets = [(loc, v.values[0]) for v in varies for loc in v.locs]
    return scenario_inputs(Task(0, base, params, task_sets))


def run_task(task: Task) -> ScenarioResult:
    """Solve one scenario (or re-plan given purchases in it: ``task.replan``); every failure
    becomes a row (never raises)."""
    from planner.analysis.replan import replan_fleet, replan_seconds, solve_own

    t0 = time.perf_counter()

    def fail(status: str, message: str) -> ScenarioResult:
        return ScenarioResult(
            task.index, dict(task.params), status, message, seconds=time.perf_counter() - t0
        )

    try:
        inputs = scenario_inputs(task)
        # the per-scenario time limit bounds the scenario, building and extracting included
        limit = (
            task.time_limit if task.time_limit is not None else inputs.problem.solver.time_limit_s
        )
        tol = task.gap if task.gap is not None else inputs.problem.solver.gap
        if task.replan is not None:
            label, fleet = task.replan
            plan = replan_fleet(inputs, fleet, task.solver, replan_seconds(limit), task.gap)
            if plan is None:
                out = fail("error", f"the {label} purchases cannot be re-planned here")
                out.kept = label
                return out
            res = summarize(plan, task.index, task.params)
            res.kept, res.fleet, res.seconds = label, fleet, time.perf_counter() - t0
            return res
        own = solve_own(inputs, task.solver, limit, task.gap, t0 + limit)
    except InputError as exc:
        return fail("invalid", str(exc))
    except InfeasibleError as exc:
        msg = str(exc) + ("".join(f"\n  - {d}" for d in exc.diagnosis) if exc.diagnosis else "")
        return fail("infeasible", msg)
    except SolverError as exc:
        return fail("error", str(exc))
    except PlannerError as exc:
        return fail("error", str(exc))
    except Exception as exc:  # noqa: BLE001 - a scenario never aborts the grid
        return fail("error", f"{type(exc).__name__}: {exc}")
    res = summarize(own.plan, task.index, task.params)
    res.seconds = time.perf_counter() - t0
    res.fleet, res.bound_usd, res.bound, res.gap_tolerance = (
        own.fleet,
        own.bound_usd,
        own.bound,
        tol,
    )
    if task.keep_plan:
        res.plan_json = own.plan.to_json()
    return res


def make_tasks(
    base: Base,
    varies: Sequence[Vary],
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
) -> list[Task]:
    locs = {v.key: v.locs for v in varies}
    tasks = []
    for i, params in enumerate(grid(varies)):
        sets = [(loc, val) for k, val in params.items() for loc in locs[k]]
        tasks.append(Task(i, base, params, sets, solver, time_limit, gap))
    return tasks


Progress = Callable[[ScenarioResult], None]


def worker_signals() -> None:
    """In a sweep worker, SIGTERM and SIGHUP raise like in the main process, so a solve in
    progress ends its CBC process and removes its temporary files before the worker goes."""
    import signal

    from planner.base.errors import terminate

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, terminate)


def _run_local(
    tasks: Sequence[Task], workers: int, progress: Progress | None
) -> list[ScenarioResult]:
    if workers <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            r = run_task(t)
            if progress:
                progress(r)
            out.append(r)
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: no fork of a parent that runs threads (rich's refresh thread, dask, ...)
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if "forkserver" in methods:
        ctx.set_forkserver_preload(["planner.analysis.sweep", "planner.plan.make", "pulp"])
    results: dict[int, ScenarioResult] = {}
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)), mp_context=ctx, initializer=worker_signals
    )
    try:
        futs = {pool.submit(run_task, t): t for t in tasks}
        for fut in as_completed(futs):
            t = futs[fut]
            try:
                r = fut.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker is a row, not an abort
                r = ScenarioResult(
                    t.index, dict(t.params), "error", f"worker failed: {type(exc).__name__}: {exc}"
                )
            results[t.index] = r
            if progress:
                progress(r)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the whole grid
        raise
    pool.shutdown(wait=True)
    return [results[t.index] for t in tasks]


def _run_dask(
    tasks: Sequence[Task], address: str, progress: Progress | None
) -> list[ScenarioResult]:
    """Run on an existing Dask cluster. The workers need ``planner`` installed, and the
    problem's offers files at the same absolute path (a shared file system), since each
    scenario resolves them from the problem file's directory."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError(
            "--scheduler needs Dask distributed, which is not installed; "
            "install the cluster extra: pip install 'gpu-planner[cluster]'"
        ) from None
    try:
        client = Client(address, timeout="10s")  # a scheduler that answers does so in ms
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: a malformed address
        raise InputError(
            f"--scheduler {address}: cannot connect to the Dask scheduler: {exc}"
        ) from None
    results: dict[int, ScenarioResult] = {}
    try:
        futs = client.map(run_task, list(tasks), pure=False)
        by_key = {f.key: t for f, t in zip(futs, tasks, strict=True)}
        for fut in as_completed(futs):
            t = by_key[fut.key]
            try:
                r = fut.result()
            except Exception as exc:  # noqa: BLE001
                r = ScenarioResult(
                    t.index,
                    dict(t.params),
                    "error",
                    f"dask task failed: {type(exc).__name__}: {exc}",
                )
            results[t.index] = r
            if progress:
                progress(r)
    finally:
        client.close()
    return [results[t.index] for t in tasks]


def run_tasks(
    tasks: Sequence[Task],
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> list[ScenarioResult]:
    """Run scenarios (process pool of ``workers``, or a Dask cluster at ``scheduler``), in order.

    ``workers`` is 1 to :data:`MAX_WORKERS` (None: the number of CPUs); the pool never has
    more processes than scenarios. Each scenario ends within its time limit, so a sweep of
    N scenarios takes at most about ceil(N / workers) time limits."""
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS
    ):
        raise InputError(f"--workers: {workers!r} is not a whole number from 1 to {MAX_WORKERS}")
    if scheduler:
        return _run_dask(tasks, scheduler, progress)
    return _run_local(tasks, workers or min(os.cpu_count() or 1, MAX_WORKERS), progress)


def write_results_json(results: Sequence[ScenarioResult], path: str | Path) -> None:
    from planner.plan.data import atomic_write_bytes

    text = json.dumps([r.to_json() for r in results], indent=2)
    atomic_write_bytes(path, text.encode("utf-8"))
