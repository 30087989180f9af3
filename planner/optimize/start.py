"""MIP starts: feasible plans handed to the solver before it searches (stage 4, with solve).

On a large model (tens of thousands of integer replica counts) the solvers spend most of a
short time limit on the root relaxation; the plan they hold when the clock stops is the one
they were given or found by a heuristic. :func:`lp_rounded_start` builds a good one from the
LP relaxation: the LP's owned fleet rounded to whole nodes, its owned replicas rounded down to
whole ones that fit, every training job rented on its cheapest (candidate, on-demand offer),
and each service's remaining demand covered with whole replicas of one rental pair per spare
period. :func:`best_rounded_start` tries several fleet roundings, a local search over the
fleet and a re-solve of the LP with the fleet fixed. Every constraint is then checked in
Python; a start that breaks one is not used.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pulp

from planner.base import tolerances as tol
from planner.optimize.candidates import offer_restricted, progress_per_wall_hour
from planner.optimize.model import (
    SPARE_PERIOD_MONTHS,
    PlannerModel,
    existing_in_service,
    spare_flags,
)
from planner.physics.demand import HOURS_PER_MONTH

# Fleet roundings tried by :func:`best_rounded_start`: the LP's nodes rounded down, rounded at
# a quarter node, rounded up, and no fleet at all (every service rented). On the 10-workload,
# 36-month benchmark rounding down gave $913,906 and renting everything $877,601; on the
# 50-workload one rounding down gave $4.07M and renting everything $5.24M: neither wins
# everywhere; rounded up and searched, the 10-workload plan reached $697,419.
FLEET_SHIFTS = (1e-6, 0.25, 1 - 1e-6, -math.inf)


def best_rounded_start(
    m: PlannerModel,
    lp: dict[str, float],
    deadline: float = math.inf,
    relax: Callable[[dict[str, float]], dict[str, float] | None] | None = None,
) -> float | None:
    """The cheapest feasible plan rounded from the LP values ``lp``, left in ``m``'s variables;
    its present value, or None (values unspecified) if no rounding is feasible.

    1. Each fleet rounding of :data:`FLEET_SHIFTS` is tried (down to whole nodes, at a
       quarter node, up, and no fleet).
    2. With ``relax`` (solves the LP of ``m`` as its bounds stand, returns its values or None),
       each rounding's whole fleet is fixed and the LP solved again (:func:`refixed`): its
       owned replicas then fill whole servers, not the first LP's fractions of them.
    3. With ``relax``, each of these fleets that buys several GPU types is cut to one type
       at a time (:func:`_single_types`, at most a third of the time left): the rounded-up
       fleet holds a server of every type the LP touched, while one type's servers, bought
       when they pay, are often the plan.
    4. From each of these points, cheapest first, a local search over the fleet
       (:func:`_search_fleet`) drops a GPU type's purchases, moves a purchase by a few
       months or adds a server while that makes the plan cheaper, each move priced as in 2.
       Rounded up, the LP buys a server of every type it touched; the search keeps those
       that pay, in the months where they pay.

    Steps 2 to 4 stop at ``deadline`` (``time.perf_counter()``). On the 10-workload, 36-month
    benchmark: rounding down $913,906, no fleet $877,601, the fleet rounded up, searched and
    re-solved (one B200 server) $698,183; HiGHS alone: $649,471 after 600 s, $889,480 after
    400 s from no start.
    """
    memo: dict = {}
    points: list[_Point] = []
    for shift in FLEET_SHIFTS:
        if points and time.perf_counter() > deadline:
            break
        value = _try(m, lp, shift, memo)
        if value is not None:
            points.append(_Point(value, _values(m), lp, shift))
    if not points:
        return None
    plans = list(points)
    if relax is not None:
        for p in sorted(points, key=lambda p: p.value):
            if time.perf_counter() > deadline:
                break
            found = refixed(m, p.values, relax, memo)
            if found is not None:
                plans.append(found)
        now = time.perf_counter()
        plans += _single_types(m, plans, relax, memo, min(deadline, now + (deadline - now) / 3))
    seen: set[tuple] = set()
    for p in sorted(plans, key=lambda p: p.value):
        fleet = _fleet_of(m, p.values)
        if time.perf_counter() > deadline or fleet in seen or not any(fleet):
            continue
        seen.add(fleet)
        plans.append(_search_fleet(m, p, deadline, relax, memo, seen, lp))
    best = min(plans, key=lambda p: p.value)
    for v in _variables(m):
        v.varValue = best.values[v.name]
    return best.value


def _single_types(
    m: PlannerModel, plans: list[_Point], relax, memo: dict | None, deadline: float
) -> list[_Point]:
    """Every plan's fleet cut to one of its GPU types (the other types' purchases dropped),
    cheapest plan first, each priced by :func:`refixed` until ``deadline``."""
    out: list[_Point] = []
    done: set[tuple] = set()
    for p in sorted(plans, key=lambda p: p.value):
        types = _owned_types(m, p.values)
        for g in types if len(types) > 1 else ():
            values = dict(p.values)
            for other in types:
                if other != g:
                    values.update((n, 0.0) for n in _fleet_names(m, other))
            key = _fleet_of(m, values)
            if key in done or time.perf_counter() > deadline:
                continue
            done.add(key)
            found = refixed(m, values, relax, memo)
            if found is not None:
                out.append(found)
    return out


@dataclass
class _Point:
    """A feasible rounded plan: its present value, variable values, and the LP values and
    fleet shift it was rounded from."""

    value: float
    values: dict[str, float | None]
    lp: dict[str, float]
    shift: float


# Months by which the fleet search moves one purchase (:func:`_fleet_moves`). On the
# 10-workload, 36-month benchmark (flat prices) the rounded fleet bought its B200 server in
# month 4 ($698,183 rounded); bought in month 9 it costs $673,872, and with an A100 PCIe server
# added in month 9 $654,873 (HiGHS from the month-4 plan: $693,181 after 600 s).
SHIFT_MONTHS = (1, -1, 3, -3, 6, -6)


def _search_fleet(
    m: PlannerModel,
    start: _Point,
    deadline: float,
    relax: Callable[[dict[str, float]], dict[str, float] | None] | None,
    memo: dict | None = None,
    seen: set[tuple] | None = None,
    lp: dict[str, float] | None = None,
) -> _Point:
    """Local search from one plan over its fleet, until no move helps or the deadline.

    With ``relax`` the moves come in batches (:func:`_fleet_moves`: every drop of a GPU
    type's purchases; each purchase moved by :data:`SHIFT_MONTHS`; one more server of each
    type the LP ``lp`` bought any fraction of), each fleet priced by the LP re-solved with it
    fixed (:func:`refixed`), and the best of the first batch that has a cheaper plan is taken;
    fleets in ``seen`` are not priced again. Without ``relax`` only drops are tried (first
    improvement), priced by rounding the plan's LP values with that type taken out."""
    if relax is None:
        return _search_drops(m, start, deadline, memo)
    seen = set() if seen is None else seen
    best = start
    while time.perf_counter() < deadline:
        found = _first_better(m, best, relax, memo, seen, deadline, lp or best.lp)
        if found is None:
            break
        best = found
    return best


def _first_better(
    m: PlannerModel, p: _Point, relax, memo: dict | None, seen: set, deadline: float, lp: dict
) -> _Point | None:
    """The best plan of the first batch of :func:`_fleet_moves` that has one cheaper than
    ``p``, or None."""
    for batch in _fleet_moves(m, p, lp):
        found = _best_of(m, batch, relax, memo, seen, deadline)
        if found is not None and _cheaper(found.value, p.value):
            return found
    return None


def _search_drops(m: PlannerModel, start: _Point, deadline: float, memo: dict | None) -> _Point:
    """Without an LP to re-solve: drop a GPU type's purchases while that makes the plan
    cheaper (first improvement, passes until none helps or the deadline)."""
    best, improved = start, True
    while improved and time.perf_counter() < deadline:
        improved = False
        for g in _owned_types(m, best.values):
            if time.perf_counter() > deadline:
                break
            found = _dropped(m, best, g, memo)
            if found is not None and _cheaper(found.value, best.value):
                best, improved = found, True
    return best


def _cheaper(a: float, b: float) -> bool:
    """``a`` is cheaper than ``b`` by more than a relative 1e-9 (either may be negative: an
    existing fleet's resale can make a plan's present value negative).

    >>> _cheaper(-101.0, -100.0), _cheaper(-100.0, -100.0), _cheaper(99.0, 100.0)
    (True, False, True)
    """
    return a < b - 1e-9 * abs(b)


def _best_of(
    m: PlannerModel, batch: list[dict], relax, memo: dict | None, seen: set, deadline: float
) -> _Point | None:
    """The cheapest plan of a batch of fleets not in ``seen`` (which gains them), each priced
    by :func:`refixed` until ``deadline``."""
    best = None
    for values in batch:
        key = _fleet_of(m, values)
        if key in seen or time.perf_counter() > deadline:
            continue
        seen.add(key)
        found = refixed(m, values, relax, memo)
        if found is not None and (best is None or found.value < best.value):
            best = found
    return best


def _dropped(m: PlannerModel, p: _Point, g: str, memo: dict | None) -> _Point | None:
    """Without an LP to re-solve: the point's LP values without type ``g``, rounded."""
    trial = _without_type(m, p.lp, g)
    value = _try(m, trial, p.shift, memo)
    return None if value is None else _Point(value, _values(m), trial, p.shift)


def _fleet_moves(
    m: PlannerModel, p: _Point, lp: dict[str, float]
) -> Iterator[list[dict[str, float | None]]]:
    """The fleets next to ``p``'s, as variable values, in batches in the order tried: every
    GPU type's purchases dropped; for each purchase (a month's servers and cards of one type),
    that purchase moved by :data:`SHIFT_MONTHS`; for each type the LP ``lp`` bought any
    fraction of, one more server (a partial one full of cards) in each month the LP or the
    plan buys something."""
    drops = []
    for g in _owned_types(m, p.values):
        values = dict(p.values)
        for name in _fleet_names(m, g):
            values[name] = 0.0
        drops.append(values)
    yield drops
    months = len(m.cands.months)
    bought = [(g, t) for (g, t) in m.buy if _units(m, p.values, g, t)[0] > 0.5]
    for g, t in bought:
        to = [t + d for d in SHIFT_MONTHS if 0 <= t + d < months and _buyable(m, g, t + d)]
        yield [_moved(m, p.values, g, t, t2) for t2 in to]
    when = sorted({t for _, t in bought} | {t for _, t in _lp_purchases(m, lp)})
    for g in _bought_types(m, lp):
        yield [_added(m, p.values, g, t) for t in when if _buyable(m, g, t)]


def _buyable(m: PlannerModel, g: str, t: int) -> bool:
    """A server of type ``g`` may be bought in month ``t`` (lead times bound earlier ones)."""
    v = m.buy.get((g, t))
    return v is not None and (v.upBound is None or v.upBound >= 1)


def _units(m: PlannerModel, values: dict, g: str, t: int) -> tuple[float, list]:
    """(servers bought of type ``g`` in month ``t``, its card variables with their values)."""
    buy = m.buy[(g, t)]
    cards = [v for v in m.cards.get((g, t), {}) if v.name != buy.name]
    return values.get(buy.name) or 0.0, [(v, values.get(v.name) or 0.0) for v in cards]


def _moved(m: PlannerModel, values: dict, g: str, t: int, to: int) -> dict:
    """``values`` with type ``g``'s purchase of month ``t`` (servers and cards) made in ``to``."""
    out = dict(values)
    servers, cards = _units(m, values, g, t)
    _, cards_to = _units(m, values, g, to)
    out[m.buy[(g, t)].name] = 0.0
    out[m.buy[(g, to)].name] = (values.get(m.buy[(g, to)].name) or 0.0) + servers
    for (v, n), (w, n_to) in zip(cards, cards_to, strict=True):
        out[v.name] = 0.0
        out[w.name] = n_to + n
    return out


def _added(m: PlannerModel, values: dict, g: str, t: int) -> dict:
    """``values`` with one more server of type ``g`` in month ``t`` (a partial one full)."""
    out = dict(values)
    gpu = m.inputs.gpus[g]
    out[m.buy[(g, t)].name] = (values.get(m.buy[(g, t)].name) or 0.0) + 1.0
    if gpu.partial_fill:
        for v, n in _units(m, values, g, t)[1]:
            out[v.name] = n + gpu.slots // gpu.node_gpus
    return out


def _lp_purchases(m: PlannerModel, lp: dict[str, float]) -> list[tuple[str, int]]:
    """(type, month) where the LP buys any fraction of a server."""
    return [(g, t) for (g, t), v in m.buy.items() if lp.get(v.name, 0.0) > 1e-9]


def _owned_types(m: PlannerModel, values: dict[str, float | None]) -> list[str]:
    """GPU types a plan buys, in catalog order."""
    return [g for g in m.inputs.gpus if any(values.get(n) for n in _fleet_names(m, g))]


def _try(
    m: PlannerModel, lp: dict[str, float], shift: float, memo: dict | None = None
) -> float | None:
    if not lp_rounded_start(m, lp, shift, memo):
        return None
    return pulp.value(m.prob.objective)


def _values(m: PlannerModel) -> dict[str, float | None]:
    return {v.name: v.varValue for v in _variables(m)}


def _variables(m: PlannerModel) -> list[pulp.LpVariable]:
    """``m.prob.variables()``, built once per model (PuLP rebuilds the list on every call:
    0.1 s on a 20,000-variable model, called for every plan the search rounds)."""
    cached = getattr(m.prob, "_planner_variables", None)
    if cached is None:
        cached = m.prob.variables()
        m.prob._planner_variables = cached
    return cached


def _fleet_names(m: PlannerModel, g: str) -> list[str]:
    names = [v.name for (gg, _t), v in m.buy.items() if gg == g]
    names += [v.name for (gg, _t), e in m.cards.items() if gg == g for v in e]
    return names


def _bought_types(m: PlannerModel, lp: dict[str, float]) -> list[str]:
    """GPU types the LP buys any fraction of, in catalog order."""
    return [g for g in m.inputs.gpus if any(lp.get(n, 0.0) > 1e-9 for n in _fleet_names(m, g))]


def _without_type(m: PlannerModel, lp: dict[str, float], g: str) -> dict[str, float]:
    trial = dict(lp)
    for name in _fleet_names(m, g):
        trial[name] = 0.0
    return trial


def refixed(
    m: PlannerModel,
    values: dict[str, float | None],
    relax: Callable[[dict[str, float]], dict[str, float] | None],
    memo: dict | None = None,
) -> _Point | None:
    """The plan rounded from the LP re-solved with the whole fleet of ``values`` fixed; None
    if that fleet is outside its variables' bounds (a purchase before its lead time allows,
    a type that may not be bought): fixing a variable sets both its bounds."""
    variables = _fleet_vars(m)
    fleet = {v.name: float(round(values[v.name] or 0.0)) for v in variables}
    if not all(_within(v, fleet[v.name]) for v in variables):
        return None
    lp = relax(fleet)
    if lp is None:
        return None
    value = _try(m, lp, 1e-6, memo)
    return None if value is None else _Point(value, _values(m), lp, 1e-6)


def _within(v: pulp.LpVariable, value: float) -> bool:
    lo = -math.inf if v.lowBound is None else v.lowBound
    up = math.inf if v.upBound is None else v.upBound
    return lo - 1e-9 <= value <= up + 1e-9


def _fleet_vars(m: PlannerModel) -> list[pulp.LpVariable]:
    out = {v.name: v for v in m.buy.values()}
    out.update((v.name, v) for e in m.cards.values() for v in e)
    return list(out.values())


def _fleet_of(m: PlannerModel, values: dict[str, float | None]) -> tuple:
    return tuple(round(values[v.name] or 0.0) for v in _fleet_vars(m))


def lp_rounded_start(
    m: PlannerModel, lp: dict[str, float], shift: float = 1e-6, memo: dict | None = None
) -> bool:
    """Set every variable of ``m`` to a plan rounded from the LP values ``lp``; False (values
    left unspecified) if the plan breaks a constraint, e.g. a budget. The LP's cards owned by
    each month are rounded to whole nodes at ``shift`` (``floor(nodes + shift)``; 1e-6 rounds
    down, ``-inf`` buys nothing)."""
    for v in _variables(m):
        v.varValue = 0.0
    cards = _round_fleet(m, lp, shift)
    _owned_replicas(m, lp, cards)
    if not _rent_training(m, lp) or not _rent_serving(m, memo):
        return False
    # bounds are no rows in PuLP: an LP stopped at its limit (a dual simplex point) can own
    # GPUs before a lead time allows, and its rounding then buys them (an l4 in service in
    # the first month of a 2-month lead: exit 4 under load, tests/test_hostile.py)
    if not all(_within(v, v.varValue or 0.0) for v in _fleet_vars(m)):
        return False
    return all(c.valid(tol.INTEGRALITY) for c in m.prob.constraints.values())


def _round_fleet(
    m: PlannerModel, lp: dict[str, float], shift: float = 1e-6
) -> dict[tuple[str, int], int]:
    """Whole purchases: the LP's cards owned by month t rounded down to whole nodes (still
    non-decreasing), in as few servers as hold them. Returns cards owned per (g, t)."""
    owned: dict[tuple[str, int], int] = {}
    for g, gpu in m.inputs.gpus.items():
        prev_nodes = prev_servers = 0
        for t in range(len(m.cands.months)):
            frac = sum(lp.get(v.name, 0.0) * c for v, c in m.own[(g, t)].items())
            raw = frac / gpu.node_gpus + shift
            nodes = max(prev_nodes, math.floor(raw) if raw > 0 else 0)
            if gpu.partial_fill:
                servers = math.ceil(nodes * gpu.node_gpus / gpu.slots)
                m.buy[(g, t)].varValue = float(servers - prev_servers)
                for v, _ in m.cards[(g, t)].items():
                    v.varValue = float(nodes - prev_nodes)
                prev_servers = servers
            else:
                m.buy[(g, t)].varValue = float(nodes - prev_nodes)
            prev_nodes = nodes
            owned[(g, t)] = nodes * gpu.node_gpus
            if (g, t) in m.owned:
                m.owned[(g, t)].varValue = float(nodes)
    return owned


def _owned_replicas(m: PlannerModel, lp: dict[str, float], cards: dict) -> None:
    """The LP's owned replicas made whole within the GPUs owned: rounded down, then rounded up
    by largest fraction while GPUs are left (an owned replica beyond the need costs only its
    busy power, a missing one a rented replica)."""
    cells: dict[tuple[str, int, int], list] = defaultdict(list)
    for (w, key, t, s), x in m.n.items():
        c = m.serve_cand(w, key)
        cells[(c.gpu, t, s)].append((x, c.tp, lp.get(x.name, 0.0)))
    for (g, t, _s), xs in cells.items():
        room = cards[(g, t)] + existing_in_service(m, g, t)
        for x, tp, value in sorted(xs, key=lambda row: -row[1]):
            take = max(0, min(math.floor(value + 1e-6), room // tp))
            x.varValue = float(take)
            room -= take * tp
        for x, tp, value in sorted(xs, key=lambda row: -(row[2] - math.floor(row[2] + 1e-6))):
            if value - x.varValue > 1e-6 and room >= tp:
                x.varValue += 1.0
                room -= tp


def _rent_training(m: PlannerModel, lp: dict[str, float]) -> bool:
    """Each job rented whole, month by month from its window's start, on the (candidate,
    unrestricted on-demand offer) that costs least in present value among those on which it
    fits its window (the LP's leaning breaks ties). The LP leans to candidates it runs on
    owned GPUs; rented, those can cost more than another candidate's rental: choosing by
    rental cost took the 10-workload, 36-month benchmark's rent-only plan from $877,601 to
    $799,446."""
    specs = {j.name: j for j in m.inputs.problem.workloads.train}
    options: dict[str, list] = defaultdict(list)
    for job, key, oid, t in m.r:
        o = m.cands.offers[oid]
        if t != m.cands.window[job][0] or o.kind != "on_demand" or offer_restricted(o):
            continue
        c = m.train_cand(job, key)
        f = progress_per_wall_hour(c, specs[job], o)
        if f and c.wall_hours / f <= m.cands.window_hours[job]:
            cost = sum(m.prob.objective.get(r, 0.0) * h for r, h in _fill(m, job, key, oid, f))
            options[job].append((cost, -lp.get(m.y[(job, key)].name, 0.0), key, oid, f))
    for job, cl in m.cands.train.items():
        if not cl:
            continue
        if not options[job]:
            return False
        _, _, key, oid, f = min(options[job])
        m.y[(job, key)].varValue = 1.0
        if (job, m.cands.offers[oid].provider) in m.loc:
            m.loc[(job, m.cands.offers[oid].provider)].varValue = 1.0
        for r, hours in _fill(m, job, key, oid, f):
            r.varValue = hours
    return True


def _fill(m: PlannerModel, job: str, key: str, oid: str, f: float) -> list:
    """(rental variable, wall hours) of a run on ``oid`` from the window's start, a month
    at a time, until its ``wall_hours / f`` are done."""
    left = m.train_cand(job, key).wall_hours / f
    out = []
    for t in m.cands.window[job]:
        out.append((m.r[(job, key, oid, t)], min(left, HOURS_PER_MONTH)))
        left -= min(left, HOURS_PER_MONTH)
    return out


def _rent_serving(m: PlannerModel, memo: dict | None = None) -> bool:
    """Per service and spare period, whole rented replicas of one uncapped rental pair (and,
    cell by cell, a slower filler pair) cover what the owned replicas leave; the pairs, and
    whether owned replicas larger than the main pair are dropped (they raise the spare ``R L``
    of every cell), are chosen at least rental cost. ``memo`` keeps each (service, period,
    owned replicas)'s choice across calls on the same model (the local search rounds many
    plans that differ in a few services)."""
    specs = {w.name: w for w in m.inputs.problem.workloads.serve}
    pairs = _rental_pairs(m)
    owned: dict[tuple[str, int, int], list] = defaultdict(list)
    for (w, key, t, s), x in m.n.items():
        if x.varValue:
            owned[(w, t, s)].append((key, x, m.serve_cand(w, key).rate_rps))
    slices = range(len(m.cands.slices))
    memo = {} if memo is None else memo
    for w, months in m.cands.active.items():
        spec = specs[w]
        for first in range(0, len(months), SPARE_PERIOD_MONTHS):
            period = months[first : first + SPARE_PERIOD_MONTHS]
            cells = [(t, s, owned[(w, t, s)]) for t in period for s in slices]
            key = (w, first, tuple((x.name, x.varValue) for _, _, xs in cells for _, x, _ in xs))
            if key not in memo:
                memo[key] = _best_option(m, w, spec, cells, pairs, period)
            if memo[key] is None:
                return False
            _apply(m, w, period, memo[key])
    return True


def _best_option(m: PlannerModel, w: str, spec, cells: list, pairs: dict, period: list):
    usable = [p for p in pairs.get(w, []) if all((w, *p, t, 0) in m.q for t in period)]
    fastest_owned = max((r for _, _, xs in cells for _, _, r in xs), default=0.0)
    options = []
    for pair in usable:
        mu = m.serve_cand(w, pair[0]).rate_rps
        caps = (math.inf, mu) if fastest_owned > mu * (1 + 1e-12) else (math.inf,)
        for filler in _fillers(m, w, pair, usable, period[0]):
            for cap in caps:
                options.append(_period_option(m, w, spec, cells, pair, cap, filler))
    return min(options, key=lambda o: o[0]) if options else None


def _period_option(
    m: PlannerModel, w: str, spec, cells: list, pair, cap: float, filler=None
) -> tuple:
    """(rental cost, rentals per cell, owned replicas kept, types in use, L) of covering the
    period with ``pair`` and, cell by cell where it is cheaper, whole replicas of a slower
    ``filler`` pair (:func:`cover_two`), keeping only owned replicas no faster than ``cap``
    req/s. The spare ``R L`` is that of the fastest type in use: ``pair``'s or a kept owned
    one's."""
    key, oid = pair
    two = [(key, oid)] + ([filler] if filler is not None and filler != pair else [])
    mus = [m.serve_cand(w, k).rate_rps for k, _ in two]
    kept = [(t, s, [(k, x, r) for k, x, r in xs if r <= cap * (1 + 1e-12)]) for t, s, xs in cells]
    owned_used = {k for _, _, xs in kept for k, _, _ in xs}
    largest = max(m.serve_cand(w, k).rate_rps for k in owned_used | {key})
    R, cost, rents, used = spec.redundancy, 0.0, {}, {key} | owned_used
    for t, s, xs in kept:
        need = max(m.cands.demand[(w, t, s)], 0.0) / spec.slo.max_load + R * largest
        have = sum(x.varValue * r for _, x, r in xs)
        count = sum(x.varValue for _, x, _ in xs)
        qs = [m.q[(w, k, o, t, s)] for k, o in two]
        prices = [m.prob.objective.get(q, 0.0) for q in qs]
        counts = cover_two(list(zip(mus, prices, strict=True)), need - have, 1 + R - count)
        for q, k, n in zip(qs, (k for k, _ in two), counts, strict=True):
            rents[q] = float(n)
            cost += m.prob.objective.get(q, 0.0) * n
            if n:
                used.add(k)
    dropped = [x for (_, _, xs), (_, _, ks) in zip(cells, kept, strict=True) for x in _gone(xs, ks)]
    return cost, rents, dropped, used, largest


def cover_two(types: list[tuple[float, float]], rps: float, count: float) -> list[int]:
    """Cheapest whole counts of one or two replica types ``(req/s, price)`` with at least
    ``rps`` req/s and ``count`` replicas in all: enumerate the first type's count, fill with
    the second.

    >>> cover_two([(10.0, 10.0), (3.0, 3.5)], 23.0, 1.0)
    [2, 1]
    >>> cover_two([(10.0, 10.0)], 23.0, 4.0)
    [4]
    >>> cover_two([(10.0, 10.0), (3.0, 3.5)], -5.0, 0.0)
    [0, 0]
    """

    def enough(x: float) -> int:  # whole replicas for x (1e-9 short counts as met)
        return max(math.ceil(x - 1e-9), 0)

    mu_a, p_a = types[0]
    first = max(enough(rps / mu_a), enough(count))
    if len(types) == 1:
        return [first]
    mu_b, p_b = types[1]
    best: tuple[float, list[int]] | None = None
    for na in range(first + 1):
        nb = max(enough((rps - na * mu_a) / mu_b), enough(count) - na)
        total = na * p_a + nb * p_b
        if best is None or total < best[0] - 1e-12:
            best = (total, [na, nb])
    return best[1] if best is not None else [first, 0]


def _fillers(m: PlannerModel, w: str, pair, usable: list, t: int) -> list:
    """``None`` (the pair alone) and the slower pairs cheapest per replica and per req/s."""
    mu = m.serve_cand(w, pair[0]).rate_rps
    slower = []
    for k, o in usable:
        rate = m.serve_cand(w, k).rate_rps
        if rate < mu * (1 - 1e-12):
            price = m.prob.objective.get(m.q[(w, k, o, t, 0)], 0.0)
            slower.append((price, price / rate, (k, o)))
    if not slower:
        return [None]
    return [None, *dict.fromkeys((min(slower)[2], min(slower, key=lambda r: r[1])[2]))]


def _gone(xs: list, kept: list) -> list:
    ids = {id(x) for _, x, _ in kept}
    return [x for _, x, _ in xs if id(x) not in ids]


def _apply(m: PlannerModel, w: str, period: list[int], option: tuple) -> None:
    _, rents, dropped, used, largest = option
    for x in dropped:
        x.varValue = 0.0
    for q, count in rents.items():
        q.varValue = count
    for t in period:
        if (w, t) in m.largest:
            m.largest[(w, t)].varValue = largest
        for k in used:
            for on in spare_flags(m, w, k, t):
                on.varValue = 1.0


def _rental_pairs(m: PlannerModel) -> dict[str, list[tuple[str, str]]]:
    """Per workload, the cheapest uncapped non-reserved offer of each replica type."""
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for w, key, oid, _t, s in m.q:
        o = m.cands.offers[oid]
        if s != 0 or o.kind == "reserved" or offer_restricted(o):
            continue
        row = (o.usd_per_gpu_hour, oid)
        if (w, key) not in best or row < best[(w, key)]:
            best[(w, key)] = row
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for (w, key), (_, oid) in sorted(best.items()):
        out[w].append((key, oid))
    return out
