"""What-if rows a finance team can trust: every scenario keeps the best plan known for it.

After every scenario's own solve, the base problem's purchases and, for a row not proven
optimal, those of the best neighbouring scenario (one value step away on one vary; the most
proven one, then the cheapest) are re-planned under each scenario's inputs
(:mod:`planner.analysis.replan`), and each row keeps the cheapest plan. Its ``base_plan_usd`` is the base purchases re-planned
there, so ``objective_usd <= base_plan_usd`` holds by construction; its ``gap`` is measured
against its own solve's lower bound, and its status says whether that gap is within the
tolerance. A scenario whose own solve found no plan in its time limit gets the best
re-planned one, with no gap (no bound was proven).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from planner.analysis.replan import same_fleet
from planner.analysis.sweep import ScenarioResult, Task, summary_line
from planner.inputs.keys import Vary
from planner.optimize.backends import gap_to_bound

# Statuses after which no purchases are worth re-planning: the inputs are bad or proven
# infeasible (a plan of given purchases would be infeasible too).
_HOPELESS = ("invalid", "infeasible")
__all__ = ["improve", "keep_best", "neighbours", "replan_tasks", "summary_line"]


def neighbours(results: Sequence[ScenarioResult], varies: Sequence[Vary]) -> dict[int, list[int]]:
    """For each row's index, the indexes of the rows one value step away on exactly one vary.

    >>> from types import SimpleNamespace as R
    >>> vs = [R(key="a", values=[1, 2, 3]), R(key="b", values=[0, 1])]
    >>> rows = [R(index=i, params={"a": a, "b": b}) for i, (a, b) in
    ...         enumerate([(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)])]
    >>> neighbours(rows, vs)[2]
    [0, 3, 4]
    """
    where = {r.index: tuple(list(v.values).index(r.params[v.key]) for v in varies) for r in results}
    out: dict[int, list[int]] = {}
    for i, p in where.items():
        out[i] = sorted(
            j for j, q in where.items() if sum(abs(x - y) for x, y in zip(p, q, strict=True)) == 1
        )
    return out


def _best_neighbour(
    r: ScenarioResult, near: list[ScenarioResult], base: ScenarioResult | None
) -> ScenarioResult | None:
    """The neighbour whose purchases are worth trying here: of those with purchases unlike
    this row's and the base's, the most proven (smallest gap), then the cheapest."""
    useful = [
        n
        for n in near
        if n.ok
        and n.fleet is not None
        and not same_fleet(n.fleet, r.fleet)
        and not (base is not None and same_fleet(n.fleet, base.fleet))
    ]
    if not useful:
        return None
    return min(useful, key=lambda n: (1e9 if n.gap is None else n.gap, n.objective_usd or 0.0))


def _label(r: ScenarioResult) -> str:
    return "neighbour (" + ", ".join(f"{k}={v}" for k, v in r.params.items()) + ")"


def replan_tasks(
    tasks: Sequence[Task],
    results: Sequence[ScenarioResult],
    base: ScenarioResult | None,
    varies: Sequence[Vary],
) -> list[tuple[int, Task]]:
    """The re-plans worth making, each with the index of the row it is for: for each row, the
    base problem's purchases (its ``base_plan_usd``) and, unless the row is proven optimal,
    the best neighbour's (:func:`_best_neighbour`). The tasks are numbered apart (runners
    key results by it)."""
    by_index = {r.index: r for r in results}
    near = neighbours(results, varies)
    out: list[tuple[int, Task]] = []
    for task, r in zip(tasks, results, strict=True):
        if r.status in _HOPELESS or (r.ok and r.fleet is None):
            continue  # bad inputs, proven infeasible, or a two-stage problem
        fleets: list[tuple[str, dict[tuple, float]]] = []
        if base is not None and base.fleet is not None:
            # even where they are the row's own: a re-plan of fixed purchases is an easier
            # model than the row's own solve, and may find cheaper rentals in its time
            fleets.append(("base", base.fleet))
        proven = r.ok and r.status == "optimal"  # a neighbour's purchases cannot do better
        nb = (
            None
            if proven
            else _best_neighbour(r, [by_index[j] for j in near.get(r.index, [])], base)
        )
        if nb is not None and nb.fleet is not None:
            fleets.append((_label(nb), nb.fleet))
        for f in fleets:
            out.append(
                (r.index, dataclasses.replace(task, index=len(out), keep_plan=False, replan=f))
            )
    return out


def keep_best(
    own: ScenarioResult, replans: Sequence[ScenarioResult], base: ScenarioResult | None
) -> ScenarioResult:
    """The row to report: the cheapest of the scenario's own plan and the re-planned ones,
    with ``base_plan_usd``, its gap against the own solve's bound and a status to match."""
    base_usd = next((p.objective_usd for p in replans if p.ok and p.kept == "base"), None)
    if base_usd is None and own.ok and base is not None and same_fleet(own.fleet, base.fleet):
        base_usd = own.objective_usd  # the row's own plan has the base's purchases
    best = own if own.ok else None
    for p in replans:
        if (
            p.ok
            and p.objective_usd is not None
            and (best is None or best.objective_usd is None or p.objective_usd < best.objective_usd)
        ):
            best = p
    if best is None:
        return own
    row = dataclasses.replace(
        best,
        index=own.index,
        params=dict(own.params),
        bound_usd=own.bound_usd,
        bound=own.bound,
        gap_tolerance=own.gap_tolerance,
        base_plan_usd=base_usd,
        plan_json=own.plan_json if best is own else best.plan_json,
    )
    return _judged(row, own)


def _judged(row: ScenarioResult, own: ScenarioResult) -> ScenarioResult:
    """The row's gap against its own solve's bound, its status and message."""
    obj = row.objective_usd
    row.gap = None if row.bound_usd is None or obj is None else gap_to_bound(obj, row.bound_usd)
    tol = row.gap_tolerance if row.gap_tolerance is not None else 0.0
    row.status = "optimal" if row.gap is not None and row.gap <= tol + 1e-9 else "feasible"
    if row is not own and row.kept != "own":
        was = (
            f"${own.objective_usd:,.0f} from this scenario's own solve"
            if own.ok and own.objective_usd is not None
            else f"this scenario's own solve found no plan ({own.status})"
        )
        proof = f"; the gap is measured against {row.bound}" if row.bound else "; no bound proven"
        row.message = f"the {row.kept} purchases re-planned here: ${obj:,.0f} ({was}){proof}"
    return row


def improve(
    tasks: Sequence[Task],
    results: Sequence[ScenarioResult],
    base: ScenarioResult | None,
    varies: Sequence[Vary],
    run: Callable[[list[Task]], list[ScenarioResult]],
) -> list[ScenarioResult]:
    """The rows to report: each scenario's own result, improved by the re-plans of
    :func:`replan_tasks` (run by ``run``, e.g. on the sweep's workers) where they are cheaper
    (:func:`keep_best`). The base row's ``base_plan_usd`` is its own present value."""
    extra = replan_tasks(tasks, results, base, varies)
    done = run([t for _, t in extra]) if extra else []
    by_index: dict[int, list[ScenarioResult]] = {}
    for (row, _), r in zip(extra, done, strict=True):
        by_index.setdefault(row, []).append(r)
    if base is not None and base.ok:
        base.base_plan_usd = base.objective_usd
        base.gap_tolerance = base.gap_tolerance if base.gap_tolerance is not None else 0.0
    return [keep_best(r, by_index.get(r.index, []), base) for r in results]
