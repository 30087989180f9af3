"""Facts of the fleet read off a Plan: GPU-hours each workload used, GPUs in use at once (peaks,
never monthly averages), and the series the charts draw. Pure functions of
:class:`planner.plan.data.Plan`, like :mod:`planner.reports.plan_facts` (which re-exports
them).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from planner.plan.data import Plan


def _slice_hours(plan: Plan) -> dict[str, float]:
    return {s.name: s.hours_per_month for s in plan.slices}


def _reserved_offers(plan: Plan) -> set[str]:
    return {r.offer for r in plan.reservations}


def gpu_hours_used(plan: Plan) -> dict[tuple[str, str], tuple[float, float]]:
    """(workload, GPU type) -> (owned GPU-hours, reserved GPU-hours) the workload used.

    The solver shares owned and reserved costs among workloads in these proportions.
    """
    hours = _slice_hours(plan)
    reserved = _reserved_offers(plan)
    out: defaultdict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for a in plan.serve_allocations:
        gh = a.replicas * a.gpus_per_replica * hours.get(a.slice, 0.0)
        if a.source == "owned":
            out[(a.workload, a.gpu)][0] += gh
        elif a.source in reserved:
            out[(a.workload, a.gpu)][1] += gh
    for tr in plan.train_allocations:
        if tr.source == "owned":
            out[(tr.workload, tr.gpu)][0] += tr.gpus * tr.wall_hours
    return {k: (v[0], v[1]) for k, v in out.items()}


def slices_or_blank(plan: Plan) -> list[str]:
    return [s.name for s in plan.slices] or [""]


def _in_use(plan: Plan) -> defaultdict[tuple[str, str, str, str], float]:
    """(GPU type, month, slice, 'owned'/'reserved'/'rented') -> GPUs in use at once.

    Training rentals run all their GPUs at once in every slice of their months.
    """
    reserved = _reserved_offers(plan)
    slices = slices_or_blank(plan)
    use: defaultdict[tuple[str, str, str, str], float] = defaultdict(float)
    for a in plan.serve_allocations:
        how = "owned" if a.source == "owned" else "reserved" if a.source in reserved else "rented"
        use[(a.gpu, a.month, a.slice, how)] += a.replicas * a.gpus_per_replica
    for tr in plan.train_allocations:
        if tr.source == "owned":
            continue  # owned GPUs are counted as owned, busy or not
        for s in slices if tr.slice is None else [tr.slice]:
            use[(tr.gpu, tr.month, s, "rented")] += tr.gpus
    return use


@dataclass(frozen=True)
class PeakGpus:
    gpu: str
    owned: int  # most GPUs owned in any month
    reserved: int  # most GPUs under reservation in any month
    rented: float  # most GPUs rented at once (any month and slice)
    total: float  # most GPUs committed at once: owned + reserved + rented in one slice


def peak_gpus(plan: Plan) -> list[PeakGpus]:
    """The peak GPU commitment per type: never an average over the month."""
    use = _in_use(plan)
    owned = {(f.gpu, f.month): f.owned for f in plan.fleet}
    reserved = {(f.gpu, f.month): f.reserved for f in plan.fleet}
    gpus = list(dict.fromkeys([f.gpu for f in plan.fleet] + [k[0] for k in use]))
    out = []
    # GPUs rented at once in a month are at least the month's average (rentals without
    # allocation rows, e.g. a hand-edited plan, still count); a reservation's own rows are
    # its commitment, in the reserved column already
    by_month: defaultdict[tuple[str, str], float] = defaultdict(float)
    for rent in plan.rentals:
        if rent.kind != "reserved":
            by_month[(rent.gpu, rent.month)] += rent.gpu_hours
    for f in plan.fleet:
        for s in slices_or_blank(plan):
            key = (f.gpu, f.month, s, "rented")
            use[key] = max(use[key], by_month[(f.gpu, f.month)] / plan.hours_per_month)
    for g in gpus:
        rented = [v for (gg, *_rest, how), v in use.items() if gg == g and how == "rented"]
        at_once = [
            owned.get((g, m), 0) + reserved.get((g, m), 0) + v
            for (gg, m, _s, how), v in use.items()
            if gg == g and how == "rented"
        ]
        own = max((v for (gg, _m), v in owned.items() if gg == g), default=0)
        res = max((v for (gg, _m), v in reserved.items() if gg == g), default=0)
        out.append(PeakGpus(g, own, res, max(rented, default=0.0), max([*at_once, own + res])))
    return out


def rented_peak_by_workload(plan: Plan) -> dict[tuple[str, str], float]:
    """(workload, GPU type) -> most GPUs rented at once for that workload (on-demand/spot)."""
    reserved = _reserved_offers(plan)
    at: defaultdict[tuple[str, str, str, str], float] = defaultdict(float)
    for a in plan.serve_allocations:
        if a.source != "owned" and a.source not in reserved:
            at[(a.workload, a.gpu, a.month, a.slice)] += a.replicas * a.gpus_per_replica
    for tr in plan.train_allocations:
        if tr.source != "owned":
            at[(tr.workload, tr.gpu, tr.month, "")] += tr.gpus
    out: dict[tuple[str, str], float] = {}
    for (w, g, _m, _s), v in at.items():
        out[(w, g)] = max(out.get((w, g), 0.0), v)
    return out


def years(plan: Plan) -> list[int]:
    """The calendar years the horizon touches, in order."""
    return sorted({int(m[:4]) for m in plan.months if m[:4].isdigit()})


def _serve_series(plan: Plan) -> dict[tuple[str, str], dict[str, float]]:
    """(GPU type, 'owned'/'rented') -> month -> serving GPUs in the month's busiest slice."""
    at: defaultdict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for a in plan.serve_allocations:
        at[(a.gpu, a.month, a.slice)][0 if a.source == "owned" else 1] += (
            a.replicas * a.gpus_per_replica
        )
    busiest: dict[tuple[str, str], list[float]] = {}
    for (g, m, _s), v in at.items():
        if sum(v) > sum(busiest.get((g, m), [0.0, 0.0])):
            busiest[(g, m)] = v
    out: defaultdict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for (g, m), (own, rent) in busiest.items():
        out[(g, "owned")][m] = own
        out[(g, "rented")][m] = rent
    return out


def _train_series(plan: Plan) -> dict[tuple[str, str], dict[str, float]]:
    """(GPU type, 'owned'/'rented') -> month -> GPUs training runs on at once."""
    out: defaultdict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for tr in plan.train_allocations:
        key = (tr.gpu, "owned" if tr.source == "owned" else "rented")
        out[key][tr.month] = max(out[key].get(tr.month, 0.0), float(tr.gpus))
    return out


def fleet_series(plan: Plan, kind: str) -> dict[str, list[float]]:
    """``"<gpu> owned"`` / ``"<gpu> rented"`` -> GPUs per month of the horizon, for serving
    (``kind="serve"``, the busiest slice of each month) or training; all-zero series left out."""
    raw = _serve_series(plan) if kind == "serve" else _train_series(plan)
    out: dict[str, list[float]] = {}
    for (g, how), by_month in sorted(raw.items()):
        values = [by_month.get(m, 0.0) for m in plan.months]
        if any(v > 0 for v in values):
            out[f"{g} {how}"] = values
    return out
