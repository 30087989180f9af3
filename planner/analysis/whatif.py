"""What-if analysis: vary problem-file values over a grid, re-plan each scenario, find break-evens.

A *vary* is ``KEY=VALUES``. KEY is a dotted path into the problem file's data (the YAML
mapping, before validation); list items are addressed by their ``name``
(``workloads.serve.chat.traffic.utilization``), by their ``id`` (``offers.extra.<id>``) or by
their index. Aliases: ``utilization`` (every serving workload's ``traffic.utilization``),
``power_price`` (``site.power_usd_per_kwh``), ``discount_rate`` (``finance.discount_rate``)
and ``colo_price`` (``site.colo_usd_per_kw_month``). VALUES is a comma list (``0.08,0.12,0.2``) or an inclusive
range ``start:stop:step`` (``0.2:0.9:0.1`` -> 8 values ending at 0.9; the arithmetic is
decimal, so no float drift).

Each scenario applies its values to a deep copy of the data, validates it against
:class:`~planner.inputs.problem.Problem`, resolves it with the problem file's directory as base
(offers files are found relative to it) and calls :func:`~planner.plan.make.plan_problem`.
A scenario that fails (invalid value, infeasible, solver error) is a row with its status
and message, never an abort. Scenarios run in a process pool, or on a Dask cluster.

The work is split by job: :mod:`planner.inputs.keys` (values, keys, the problem
as data), :mod:`planner.analysis.sweep` (scenarios and their runners) and
:mod:`planner.analysis.breakeven`. This module keeps the entry point :func:`run_whatif`
and re-exports their public names, so ``planner.analysis.whatif`` stays the import path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.analysis.breakeven import BreakEven, breakeven, parse_watch
from planner.analysis.improve import improve, summary_line
from planner.analysis.sweep import (
    Progress,
    ScenarioResult,
    Task,
    grid,
    make_tasks,
    run_task,
    run_tasks,
    scenario_inputs,
    summarize,
    worker_signals,
    write_results_json,
)
from planner.base.errors import InputError
from planner.inputs.keys import (
    ALIASES,
    DEFAULT_VARIES,
    MAX_DIGITS,
    MAX_MAGNITUDE,
    MAX_SCENARIOS,
    MAX_VALUES,
    MAX_VARIES,
    MAX_WORKERS,
    MIN_MAGNITUDE,
    Base,
    Loc,
    Value,
    Vary,
    base_from_text,
    check_value,
    check_values,
    check_values_list,
    default_varies,
    load_base,
    make_varies,
    parse_bounds,
    parse_range,
    parse_values,
    parse_vary,
    resolve_key,
    set_at,
)

__all__ = [
    "ALIASES",
    "DEFAULT_VARIES",
    "MAX_DIGITS",
    "MAX_MAGNITUDE",
    "MAX_SCENARIOS",
    "MAX_VALUES",
    "MAX_VARIES",
    "MAX_WORKERS",
    "MIN_MAGNITUDE",
    "Base",
    "BreakEven",
    "Loc",
    "Progress",
    "ScenarioResult",
    "Task",
    "Value",
    "Vary",
    "WhatIf",
    "base_from_text",
    "breakeven",
    "check_value",
    "check_values",
    "check_values_list",
    "default_varies",
    "grid",
    "load_base",
    "make_tasks",
    "improve",
    "make_varies",
    "parse_bounds",
    "parse_range",
    "parse_values",
    "parse_vary",
    "parse_watch",
    "resolve_key",
    "run_task",
    "run_tasks",
    "run_whatif",
    "scenario_inputs",
    "set_at",
    "summarize",
    "summary_line",
    "worker_signals",
    "write_results_json",
]


@dataclass
class WhatIf:
    base: Base
    varies: list[Vary]
    results: list[ScenarioResult]
    base_result: ScenarioResult | None  # the problem as written (keep_plan=True)
    seconds: float

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.results]


def run_whatif(
    base: Base | str | Path,
    varies: Sequence[str | tuple[str, Sequence[Value] | str]] | Sequence[Vary] | None = None,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
    with_base: bool = True,
    more: Callable[[int], None] | None = None,
) -> WhatIf:
    """Run the grid (default: :data:`DEFAULT_VARIES`); with ``with_base`` also the problem as written.

    ``varies`` are specs for :func:`make_varies`, or the :class:`Vary` list it made for this
    ``base`` (not checked again). At most :data:`MAX_SCENARIOS` scenarios, each within the
    time limit; the sweep takes at most about ceil(scenarios / workers) time limits.

    Then the base problem's purchases and the best neighbouring scenario's are re-planned
    in each scenario (:mod:`planner.analysis.improve`; each re-plan gets a quarter of the
    time limit, and ``more`` is told how many there are before they run) and every row keeps
    the cheapest plan: ``objective_usd <= base_plan_usd`` on every row, and its ``gap``
    against the scenario's own lower bound says how sure it is."""
    if not isinstance(base, Base):
        base = load_base(base)
    from planner.optimize.solve import SOLVERS

    if solver not in SOLVERS:
        raise InputError(f"--solver: unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}")
    if varies and all(isinstance(v, Vary) for v in varies):
        vs = list(varies)  # already made and checked by make_varies (the CLI)
    else:
        vs = make_varies(base, list(varies) if varies else default_varies(base))
    tasks = make_tasks(base, vs, solver, time_limit, gap)
    if with_base:
        tasks.append(Task(len(tasks), base, {}, [], solver, time_limit, gap, keep_plan=True))
    t0 = time.perf_counter()
    results = run_tasks(tasks, workers, scheduler, progress)
    base_result = results.pop() if with_base else None

    def run(extra: list[Task]) -> list[ScenarioResult]:
        if more:
            more(len(extra))
        return run_tasks(extra, workers, scheduler, progress)

    results = improve(tasks[: len(results)], results, base_result, vs, run)
    seconds = time.perf_counter() - t0
    return WhatIf(base, vs, results, base_result, seconds)
