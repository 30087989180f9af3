"""Serving workloads: whole replicas owned (``n``) or rented per offer (``q``) in every month and
load slice, the demand and floor rows, the spare capacity for ``redundancy`` (the largest
replica rate in use, its ordered in-use flags and the in-use rows) and request mixes (buckets
routed to replica types by ``alloc``). Which form the rows take on a large model comes in a
:class:`ServingForm` from :func:`planner.optimize.model.serving_form`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import pulp

from planner.inputs.catalog import Offer
from planner.inputs.problem import ServeWorkload
from planner.optimize.candidates import (
    ServeCandidate,
    owned_serve_options,
    rentable_on,
    serve_rental_pairs,
)
from planner.optimize.model.core import GE, LE, PlannerModel, nid, offer_term_months
from planner.optimize.model.families import row_name

# Which replica types a service uses is decided per period of this many months (from its
# first active month): the spare capacity R L covers the largest replica type in use in the
# period. Per month was exact but left CBC and HiGHS at a 2-7 % gap after 60 s on the
# reference (a binary per type and month); per year solves in seconds and is conservative
# only in a year whose replica types change.
SPARE_PERIOD_MONTHS = 12


@dataclass(frozen=True)
class ServingForm:
    """Which form the serving rows take, chosen from the model's rented cells by
    :func:`planner.optimize.model.serving_form`: every rented replica an integer (``exact``),
    the spare's in-use rows per load slice (``per_cell``), the largest replica rate in
    incremental form (``incremental``)."""

    exact: bool
    per_cell: bool
    incremental: bool


def serve_offers(m: PlannerModel, c: ServeCandidate) -> list[Offer]:
    """Offers a serving candidate may rent: each worker's GPUs in one instance or across
    whole instances of a multi-node fabric (:func:`planner.optimize.candidates.rentable_on`);
    spot only where the problem allows it for serving. (The model creates ``q`` only for the
    non-dominated pairs of :func:`planner.optimize.candidates.serve_rental_pairs`.)"""
    spot_ok = m.inputs.problem.offers.spot_for_serving
    return [
        o
        for o in m.cands.offers.values()
        if o.gpu == c.gpu and rentable_on(c.workers, o) and (o.kind != "spot" or spot_ok)
    ]


def add_serving_constraints(m: PlannerModel, form: ServingForm) -> None:
    """serve_demand, serve_floor and (with redundancy) serve_largest, serve_largest_order and
    serve_in_use per workload, month and slice.

    Every replica is whole, owned or rented: a load slice is a period of constant load, so a
    service rents whole replicas in it. Capacity is planned at ``max_load`` of the SLO rate
    (headroom) with ``R = redundancy`` replicas down: ``sum_r mu_r x_r - R L >= D / max_load``
    where ``L`` is the largest replica rate in use that month (exact when one replica type is
    used, conservative when several are), and at least ``1 + R`` replicas up.
    """
    slices, months = m.cands.slices, m.cands.months
    spot_ok = m.inputs.problem.offers.spot_for_serving
    # names are built from cached pieces: nid(a, b) == nid(a) + "_" + nid(b) for non-empty parts
    when = {
        (t, s): nid(months[t], sl.name) for t in range(len(months)) for s, sl in enumerate(slices)
    }
    specs = {w.name: w for w in m.inputs.problem.workloads.serve}
    exact, per_cell, incremental = form.exact, form.per_cell, form.incremental
    for w, cands in m.cands.serve.items():
        spec = specs[w]
        R, load = spec.redundancy, spec.slo.max_load
        options = [
            (c, None, nid("n", w, c.key)) for c in owned_serve_options(cands) if m.ownable[c.gpu]
        ]
        options += [
            (c, o, nid("q", w, c.key, o.id))
            for c, o in serve_rental_pairs(cands, m.cands.offers.values(), spot_ok)
        ]
        if any(c.mixed for c, _, _ in options):
            add_mix_serving_constraints(m, spec, options, when, exact)
            continue
        mu_max = max((c.rate_rps for c, _, _ in options), default=0.0)
        demand_name, floor_name = row_name("serve_demand", w), row_name("serve_floor", w)
        periods: dict[int, _Largest] = {}
        in_use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
        for t in m.cands.active[w]:
            first = t - (t - m.cands.active[w][0]) % SPARE_PERIOD_MONTHS
            if first not in periods:
                periods[first] = _largest_replica(m, w, first, options, R, incremental)
            largest = periods[first]
            for key, on in largest.flags.items():
                m.on[(w, key, t)] = on
            if largest.order:
                m.spare_order[(w, t)] = largest.order
            if largest.minus:
                m.largest[(w, t)] = largest.minus[0][0]
            for s in range(len(slices)):
                need = max(m.cands.demand[(w, t, s)], 0.0) / load
                ts = when[(t, s)]
                terms = []
                for c, o, name in options:
                    if o is not None and t not in offer_term_months(m, o):
                        continue
                    up = max(1 + R, math.ceil((need + R * mu_max) / c.rate_rps * (1 + 1e-9)))
                    x = m.var(f"{name}_{ts}", 0, up, _replica_category(o, exact))
                    if o is None:
                        m.n[(w, c.key, t, s)] = x
                    else:
                        m.q[(w, c.key, o.id, t, s)] = x
                    terms.append((x, c.rate_rps))
                    if c.key in largest.flags:
                        in_use[(c.key, t, s if per_cell else -1)].append((x, float(up)))
                m.add([*terms, *largest.minus], GE, need + largest.constant, f"{demand_name}_{ts}")
                m.add([(v, 1.0) for v, _ in terms], GE, 1.0 + R, f"{floor_name}_{ts}")
                _add_count_row(m, w, ts, terms, largest, need, R)
        _add_in_use(m, w, periods, in_use)


def replicas_needed(need: float, mu: float, R: int) -> int:
    """The fewest whole replicas that carry ``need`` req/s with ``R`` of them down when no
    replica in use is faster than ``mu`` req/s: ``ceil(need / mu) + R`` (``need / mu``
    less 1e-6, so a plan that covers ``need`` exactly in floating point is never cut off).

    >>> replicas_needed(10.0, 4.0, 1), replicas_needed(8.0, 4.0, 1), replicas_needed(0.0, 4.0, 1)
    (4, 3, 1)
    """
    return max(0, math.ceil(need / mu - 1e-6)) + R


def _add_count_row(
    m: PlannerModel,
    w: str,
    ts: str,
    terms: list[tuple[pulp.LpVariable, float]],
    largest: _Largest,
    need: float,
    R: int,
) -> None:
    """serve_count: whole replicas implied by the largest type in use (incremental form).

    If the largest type in use is ``j`` (rate ``mu_j``: ``on_1 .. on_j`` set), no replica in
    use is faster, so ``mu_j N >= sum mu_r x_r >= D + R mu_j`` and the cell holds ``N = sum x
    >= K_j = ceil(D / mu_j) + R`` replicas (:func:`replicas_needed`; ``K`` falls as ``mu``
    rises). Over the ordered flags that is one row::

        serve_count_<k>_<t>_<s>   sum x + sum_i (K_{i-1} - K_i) on_i >= K_0

    (choice ``j`` leaves ``K_0 - sum_{i<=j} (K_{i-1} - K_i) = K_j``). It cuts no plan, and
    it gives the LP what it cannot see: a fraction of a fast type's flag no longer buys a
    fraction of its replicas' worth of slow ones; HiGHS proves the reference's optimum from
    a tighter root (benchmarks/README.md, issue 51).
    """
    if not largest.order or need <= 0:
        return
    rates = [largest.lowest, *(mu for mu, _ in largest.order)]
    ks = [replicas_needed(need, mu, R) for mu in rates]
    if ks[0] <= 1 + R:  # the floor row says as much
        return
    row = [(x, 1.0) for x, _ in terms]
    row += [(on, float(ks[i] - ks[i + 1])) for i, (_, on) in enumerate(largest.order)]
    m.add(row, GE, float(ks[0]), row_name("serve_count", w, ts))


def add_mix_serving_constraints(
    m: PlannerModel, spec: ServeWorkload, options: list, when: dict, exact: bool
) -> None:
    """A request mix: buckets ``b`` with shares ``f_b``, rates ``mu_rb`` per replica type.

    Continuous ``alloc[k,b,r,t,s] >= 0``: req/s of capacity the replicas of type ``r`` (owned
    and on every offer ``x`` of it, pooled) give bucket ``b``; replicas ``x`` whole as for one
    shape; ``on[k,r,p]`` binary per type and spare period. Rows per month and slice::

        serve_bucket_<k>_<b>   sum_r alloc[b,r] >= f_b D / max_load
        serve_share_<k>_<r>    sum_b alloc[b,r] / mu_rb <= sum_{x of r} x - R on[r,p]
        serve_floor_<k>        sum_x x >= 1 + R
        serve_in_use_<k>_<r>   sum x of r <= (their bounds) on[r,p]   (R > 0 only)

    A replica's time is shared among buckets (Mélange's pooled capacity, with a bucket's load
    split continuously where Mélange cuts it in slices), and each replica type in use keeps
    ``R`` spares of its own: buckets are routed by type, so a failed replica's requests must
    be taken by replicas of its type (exact for one type, the routing the plan describes).
    """
    w, R, load = spec.name, spec.redundancy, spec.slo.max_load
    buckets = [b.name for b in spec.buckets()]
    shares = [b.share for b in spec.buckets()]
    types = sorted({c.key for c, _, _ in options})
    on: dict[tuple[str, int], pulp.LpVariable] = {}
    in_use: dict[tuple[str, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    active = m.cands.active[w]
    for t in active:
        first = t - (t - active[0]) % SPARE_PERIOD_MONTHS
        for key in types if R > 0 else ():
            if (key, first) not in on:
                name = nid("on", w, key, m.cands.months[first])
                on[(key, first)] = m.var(name, 0, 1, pulp.LpInteger)
            m.on[(w, key, t)] = on[(key, first)]
        for s in range(len(m.cands.slices)):
            need = [f * max(m.cands.demand[(w, t, s)], 0.0) / load for f in shares]
            ts = when[(t, s)]
            cell = _MixCell(w, buckets, need, t, s, ts, R)
            _add_mix_cell(m, cell, options, exact)
            for key, terms in cell.share_rows.items():
                if R > 0:
                    terms.append((on[(key, first)], float(R)))
                m.add(terms, LE, 0.0, row_name("serve_share", w, key, ts))
            for i, b in enumerate(buckets):
                m.add(cell.bucket_rows[i], GE, need[i], row_name("serve_bucket", w, b, ts))
            m.add([(x, 1.0) for x, _, _ in cell.xs], GE, 1.0 + R, row_name("serve_floor", w, ts))
            for x, key, up in cell.xs if R > 0 else ():
                in_use[(key, t)].append((x, up))
    for (key, t), cells in in_use.items():
        big = sum(up for _, up in cells)
        name = row_name("serve_in_use", w, key, m.cands.months[t])
        m.add([*((x, 1.0) for x, _ in cells), (m.on[(w, key, t)], -big)], LE, 0, name)


@dataclass
class _MixCell:
    """One (month, slice) of a request mix: its variables and rows as they are built."""

    w: str
    buckets: list[str]
    need: list[float]  # req/s of capacity per bucket (demand / max_load)
    t: int
    s: int
    ts: str
    R: int
    xs: list[tuple[pulp.LpVariable, str, float]] = field(default_factory=list)
    share_rows: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    bucket_rows: dict[int, list] = field(default_factory=lambda: defaultdict(list))


def _add_mix_cell(m: PlannerModel, cell: _MixCell, options: list, exact: bool) -> None:
    """Replica and alloc variables of one (month, slice) of a mix. Alloc is per replica type
    (owned and rented replicas of a type pool their time); an option's bound is the replicas
    it needs to serve every bucket it can alone, plus the spares."""
    w, t, s = cell.w, cell.t, cell.s
    for c, o, name in options:
        if o is not None and t not in offer_term_months(m, o):
            continue
        rates = c.bucket_rates
        alone = sum(cell.need[i] / mu for i, mu in enumerate(rates) if mu > 0)
        up = max(1 + cell.R, math.ceil(alone * (1 + 1e-9)) + cell.R)
        x = m.var(f"{name}_{cell.ts}", 0, up, _replica_category(o, exact))
        if o is None:
            m.n[(w, c.key, t, s)] = x
        else:
            m.q[(w, c.key, o.id, t, s)] = x
        cell.xs.append((x, c.key, float(up)))
        first = c.key not in cell.share_rows
        cell.share_rows[c.key].append((x, -1.0))
        for i, mu in enumerate(rates if first else ()):
            if mu <= 0 or cell.need[i] <= 0:
                continue
            a = m.var(nid("alloc", w, cell.buckets[i], c.key, cell.ts), 0, cell.need[i])
            m.alloc[(w, cell.buckets[i], c.key, t, s)] = a
            cell.share_rows[c.key].append((a, 1.0 / mu))
            cell.bucket_rows[i].append((a, 1.0))


def _add_in_use(
    m: PlannerModel,
    w: str,
    periods: dict[int, _Largest],
    in_use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]],
) -> None:
    """serve_in_use per workload, replica type and month (``s = -1``: ``sum_{s,o} x <= (sum
    up_x) on``), or on large models per month and slice (``sum_o x <= up on``).

    Per slice, ``up`` is the most replicas of the type an optimal plan uses in the cell
    (enough alone for the demand and the spare, the bound of each of its variables); summed
    over a month's slices and options, as in the compact row, it is several times too large
    and the LP sets ``on`` (and with it the spare) to a fraction. The fine rows lift the LP
    bound of the 50-workload, 36-month benchmark from $2.53M to $2.69M and its plan from
    $4.29M to $4.07M; on the reference they lift the exact model's LP bound from $685,301 to
    $697,639, and HiGHS proves its optimum in 13-30 s from scratch where with the compact rows
    it stopped at 2 % after 90 s (issue 25), so small models have them too. (One row per spare
    period was smaller still, but HiGHS 1.16's presolve returned a dearer plan as optimal on
    tests/fixtures/infeasible/budget.yaml with it.)
    """
    for (key, t, s), xs in in_use.items():
        on = m.on[(w, key, t)]
        month = m.cands.months[t]
        if s < 0:
            big, name = sum(up for _, up in xs), row_name("serve_in_use", w, key, month)
        else:
            big = max(up for _, up in xs)
            name = row_name("serve_in_use", w, key, month, m.cands.slices[s].name)
        m.add([*((x, 1.0) for x, _ in xs), (on, -big)], LE, 0, name)


def rental_cells(m: PlannerModel) -> int:
    """Rented (pair, month, slice) cells of the serving workloads: the model's size, which
    picks the :class:`ServingForm`."""
    spot_ok = m.inputs.problem.offers.spot_for_serving
    per_month = len(m.cands.slices)
    return sum(
        len(serve_rental_pairs(cands, m.cands.offers.values(), spot_ok))
        * len(m.cands.active[w])
        * per_month
        for w, cands in m.cands.serve.items()
    )


def _replica_category(o: Offer | None, exact: bool) -> str:
    """Owned replicas and those on capped offers are always integer; the rest are integer in a
    small model, else continuous and made whole after the solve (rounding up an uncapped
    rental keeps every constraint: more capacity, no cap to break). Replicas on a reserved
    offer are made whole by the repair too, within the instances reserved (the repair holds
    them; if the whole replicas no longer fit, the exact model is solved instead,
    :func:`planner.optimize.whole._whole_within`): as integers in the first MILP they left
    HiGHS without a plan for 20 s on a flat B200 load with the published commitments of
    catalogs/offers-committed.yaml (28.4 s against 3.8 s, the same plan)."""
    if exact or o is None or o.max_gpus is not None:
        return pulp.LpInteger
    return pulp.LpContinuous


@dataclass
class _Largest:
    """The spare capacity term ``-R L`` of one workload and month, and the binaries that say
    which replica types are in use (only types faster than the slowest need one)."""

    minus: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    flags: dict[str, pulp.LpVariable] = field(default_factory=dict)
    order: list[tuple[float, pulp.LpVariable]] = field(default_factory=list)  # by rate
    constant: float = 0.0
    lowest: float = 0.0  # the slowest type's rate, mu_0 (its replicas need no flag)


def _largest_replica(
    m: PlannerModel, w: str, t: int, options: list, R: int, incremental: bool = True
) -> _Largest:
    """The largest replica rate in use ``L[w,p]`` for the period ``p`` starting in month
    ``t``, in incremental form over the types faster than the slowest, sorted by rate
    ``mu_1 <= mu_2 <= ...`` (``mu_0`` the slowest's; one type only: ``L = mu`` is a constant)::

        serve_largest_<k>_<p>            L - sum_i (mu_i - mu_{i-1}) on_i >= mu_0
        serve_largest_order_<k>_<r>_<p>  on_{i+1} <= on_i

    ``on_i`` reads "the largest type in use is at least as fast as type i", so type i may
    serve only where ``on_i`` is 1 (``serve_in_use``), and ``L >= mu_i`` then. This is the
    same set of plans as ``L >= mu_i on_i`` per type (a flag costs nothing; a slower type's
    flag set with a faster one's only permits it), with a tighter LP: on the reference the
    exact model's LP bound is $710,250 against $697,639, and HiGHS proves the optimum from
    it in 5.4 s instead of 9.4 s. With ``incremental`` False (models of more than
    :data:`planner.optimize.model.INCREMENTAL_SPARE_CELLS` rental cells) the rows are ``serve_largest_<k>_<r>_<p>``:
    ``L >= mu_r on_r`` per type, the form the searched start of large models was tuned on."""
    out = _Largest()
    if R == 0 or not options:
        return out
    rates = {c.key: c.rate_rps for c, _, _ in options}
    lo = min(rates.values())
    if max(rates.values()) <= lo * (1 + 1e-12):
        out.constant = R * lo
        return out
    month = m.cands.months[t]
    out.lowest = lo
    big = m.var(nid("largest", w, month), lo, max(rates.values()))
    out.minus = [(big, -float(R))]
    steps, below, prev = [(big, 1.0)], None, lo
    for mu, key in sorted((mu, key) for key, mu in rates.items() if mu > lo * (1 + 1e-12)):
        on = m.var(nid("on", w, key, month), 0, 1, pulp.LpInteger)
        out.flags[key] = on
        if not incremental:
            m.add([(big, 1.0), (on, -mu)], GE, 0, row_name("serve_largest", w, key, month))
            continue
        out.order.append((mu, on))
        steps.append((on, -(mu - prev)))
        if below is not None:
            m.add([(on, 1.0), (below, -1.0)], LE, 0, row_name("serve_largest_order", w, key, month))
        below, prev = on, mu
    if incremental:
        m.add(steps, GE, lo, row_name("serve_largest", w, month))
    return out


def spare_flags(m: PlannerModel, w: str, key: str, t: int) -> list[pulp.LpVariable]:
    """The in-use flags a plan sets when replica type ``key`` is the largest it uses in month
    ``t``: its own and every slower type's (the flags are ordered, :func:`_largest_replica`);
    a request mix's flags are per type (:func:`add_mix_serving_constraints`)."""
    order = m.spare_order.get((w, t))
    if order is None:
        return [m.on[(w, key, t)]] if (w, key, t) in m.on else []
    mu = m.serve_cand(w, key).rate_rps
    return [on for rate, on in order if rate <= mu * (1 + 1e-12)]
