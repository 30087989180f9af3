"""Stage 4: whole rented replicas. The model may solve rented replica counts as fractional;
:func:`_make_whole` then makes them whole per load slice (:func:`whole_replicas`, or
:func:`round_up_replicas` if its re-solve fails) and polishes the plan on the exact model,
every rented replica integer (:func:`polish`, within :func:`exact_model`), keeping whichever
plan is cheaper (:func:`_keep_cheaper`). :func:`repair_bound` says what the repair may add at most.
A small model skips the relaxed solve and the repair where it can: :func:`prove_from_spare_start`
proves the exact model from a plan with each service's spare limited (:func:`spare_start`)."""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pulp

from planner.base.phases import phase
from planner.base.tolerances import whole
from planner.optimize.backends import _BulkHiGHS, _run_cancellable, bound_from_gap, gap_to_bound
from planner.optimize.model import PlannerModel


def exact_integers(m: PlannerModel) -> int:
    """Integer variables of ``m`` once every rented replica count is integer."""
    ints = sum(1 for v in m.prob.variables() if v.cat == pulp.LpInteger)
    return ints + sum(1 for v in m.q.values() if v.cat == pulp.LpContinuous)


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
# in ~4-4.5 s (:data:`PROOF_OPTIONS`, :data:`PROOF_THREADS`; from scratch 13-30 s, varying with
# its seed: the start prunes the tree).
EXACT_POLISH_INTEGERS = 4_000
# The relaxed MILP's gap on such a model: it only picks the fleet. On the reference HiGHS has
# a plan within 1.8 % of its bound at 2.6 s and needs 5.2 s for 0.1 %, with the same fleet.
FLEET_GAP = 0.02
# There is no refit with the fleet fixed between the repair and the proof: it only handed the
# proof a start, and since the issue-46 training calibration it found nothing cheaper on any
# shipped problem while taking 0.1-6.6 s (the reference: 6.1 s at the root, its fleet not the
# exact model's), and under a clock it made the plan depend on the machine's speed
# (benchmarks/README.md, 2026-11-28).
# HiGHS options of the proof on a small exact model: HiGHS's restarts (after a fifth of the
# integers became fixed at the root) cost the reference's proof ~1.2 s of ~5.5 s over four
# random seeds, with no node saved (benchmarks/README.md). Strong branching only until a
# variable has two pseudo-cost observations (HiGHS's default: 8): two thirds of the proof's
# simplex iterations went to strong branching over ~20 nodes; from the repaired start the
# reference's proof took 4.2-4.7 s against 4.9-5.6 s (seeds 0-2), the command 6.7-7.0 s against
# 7.6-7.8 s, the same plan (2026-11-29, benchmarks/README.md).
# No primal heuristics either: the proof starts from a plan (the restricted spare start, or the
# relaxed model's plan made whole), and HiGHS's sub-MIPs (RINS, RENS) and its other heuristics
# found nothing better on any shipped problem: they took 0.76 of the reference's 4.08 s. The
# same nodes, MPS of the exact model and the start, two threads, mean of seeds 0-2: from the
# restricted start the reference 4.47-4.84 -> 3.77-3.88 s, moe_serving 0.95 -> 0.38 s,
# inference_startup 0.53 -> 0.39 s, brownfield 0.87 -> 0.70 s; from the repaired plan the
# reference 5.38 -> 4.26 s, the reference at 2x traffic 3.24 -> 2.35 s, b200_committed
# 0.37 -> 0.30 s (benchmarks/README.md, issue 51).
PROOF_OPTIONS = {
    "mip_allow_restart": False,
    "mip_pscost_minreliable": 2,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_root_reduced_cost": False,
    "mip_heuristic_run_feasibility_jump": False,
}
# ... and its threads, which the first MILP uses too: HiGHS 1.16 runs two search workers on two
# threads, which cut the reference's proof from 6.3-6.5 s to 4.0-4.5 s and lab_2026's gap at its
# 60 s from 2.40 % to 2.04-2.13 % (2 cores; more were not measured). The count
# is fixed, not the machine's CPUs: the plan the proof returns depends on its number of search
# workers (the reference's nominal plan differed at one), and with two it is the same plan on
# one CPU as on two (measured with `taskset -c 0`: $716,010, 18.9 s).
PROOF_THREADS = 2


def proof_threads(requested: int | None) -> int:
    """Threads for HiGHS's first MILP and the exact proof of a small model (:func:`polish`):
    ``requested`` if the caller chose (0 or None: not chosen), else :data:`PROOF_THREADS`
    whatever the machine's CPUs (so that every machine gets the same plan), but one in a child
    process (a scenario's own solve, a sweep's worker), whose siblings have the other CPUs.

    >>> proof_threads(3)
    3
    >>> proof_threads(None) in (1, PROOF_THREADS)
    True
    """
    if requested:
        return requested
    import multiprocessing

    return 1 if multiprocessing.parent_process() is not None else PROOF_THREADS


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
    # the rows every whole-replica plan found breaks (a total budget the rounded-up rentals
    # overran) when no valid plan was found: then objective is None, and ``proven`` says
    # whether the exact model proved there is none
    broken: tuple[str, ...] = ()
    proven: bool = False
    # the proof started from a plan with each service's spare limited (:func:`spare_start`)
    # instead of the relaxed model's plan made whole: no relaxed model was solved
    spare_start: bool = False


def _make_whole(
    m: PlannerModel,
    solver: str,
    objective: float,
    rel_gap: float | None,
    gap: float,
    deadline: float,
    threads: int,
    proof_threads: int = 1,
) -> _Whole:
    """Whole rented replicas (:func:`whole_replicas`), then the exact model from that plan
    (:func:`polish`) where the gap is open: to a proof on a small two-stage model, at a node
    limit on a large one. Everything ends by ``deadline`` (a ``perf_counter`` instant), except
    the repair's minimum of :data:`MIN_REPAIR_S` (a plan needs whole replicas). The proof on
    a small model runs on ``proof_threads`` (:func:`proof_threads`)."""
    relaxed = objective
    bound_usd = repair_bound(m)
    two_stage = solver == "highs" and _two_stage(m)
    left = deadline - time.perf_counter()
    with phase("solve: repair (whole replicas)"):
        whole_replicas(m, min(REPAIR_S, max(MIN_REPAIR_S, left)), threads)
    # the repair re-chooses rentals: dearer (whole replicas) or, after a time-limited solve,
    # sometimes cheaper; the objective is the repaired plan's either way
    objective = pulp.value(m.prob.objective)
    broken = broken_rows(m)
    if broken:
        return _whole_within(m, relaxed, rel_gap, gap, deadline, threads, bound_usd, broken)
    changed = abs(objective - relaxed) > 1e-9 * max(1.0, abs(relaxed))
    if changed:
        bound = bound_from_gap(relaxed, rel_gap or 0.0)
        rel_gap = gap_to_bound(objective, bound) if objective else rel_gap
    left = deadline - time.perf_counter()
    exact_proof = polished = False
    if (changed or two_stage) and (rel_gap or 0.0) > gap and left > 1.0:
        polished = True
        bound = bound_from_gap(objective, rel_gap or 0.0)
        polish_s = left if two_stage else POLISH_S
        polish_threads = proof_threads if two_stage else threads
        with phase("solve: exact model (proof / polish)"):
            objective, rel_gap = polish(m, min(left, polish_s), gap, polish_threads, bound)
        exact_proof = two_stage and rel_gap <= gap + 1e-9
    repair = max(0.0, objective - relaxed)
    return _Whole(objective, rel_gap, repair, bound_usd, exact_proof, polished)


# The share of the time left that the restricted spare start (:func:`spare_start`) may take
# before the proof: on the reference it takes 0.5 s of a 4 s solve. With 0.3, `--time-limit 2`
# left it 0.3 s, too little for a plan, and the relaxed MILP then had too little for a good one
# ($996,807, 34 % gap, against $676,660, 3.7 % before the start existed). If it finds no plan,
# the relaxed MILP and the repair run in what is left.
SPARE_START_SHARE = 0.5


def held_gpus(m: PlannerModel) -> frozenset[str]:
    """GPU types the plan holds whatever it decides: the existing fleet (``fleet.owned``) and
    the contracts signed before the plan (committed offers)."""
    owned = {o.gpu for o in m.inputs.problem.fleet.owned}
    return frozenset(owned | {o.gpu for o in m.cands.offers.values() if o.committed})


FlagOrder = list[tuple[float, pulp.LpVariable]]


def kept_levels(m: PlannerModel) -> list[tuple[FlagOrder, int]]:
    """Each service's ordered in-use flags per spare period, and how many of them the
    restricted spare start keeps: the slowest flagged type's, and up to the slowest flagged
    replica type of each GPU type the plan holds anyway (:func:`held_gpus`: replicas on cards already
    paid for cost nothing at the margin, and barring them made problems/brownfield.yaml's
    start $110k dearer). Flags are ordered by rate
    (:func:`planner.optimize.model.serving._largest_replica`), so the kept ones are a prefix.
    """
    held = held_gpus(m)
    key_of = {id(on): key for (_, key, _), on in m.on.items()}
    out: dict[int, tuple[FlagOrder, int]] = {}
    for (w, _), order in m.spare_order.items():
        keep, seen = 1, set()
        for i, (_, on) in enumerate(order):
            g = m.serve_cand(w, key_of[id(on)]).gpu
            if g in held and g not in seen:
                keep = max(keep, i + 1)
            seen.add(g)
        out[id(order)] = (order, keep)
    return list(out.values())


def _level_lps(
    m: PlannerModel, level_sets: list[list[tuple[FlagOrder, int | None]]]
) -> list[float | None]:
    """The LP relaxation of ``m`` with every in-use flag fixed, once per set of levels: per
    order, its first ``k`` flags at 1 (the largest type in use is its k-th) and the rest at 0;
    ``k`` None leaves the order's flags free (0 to 1). None where infeasible. Fixing the flags
    takes away the LP's fractional spare; what is left below the integer optimum is the
    replicas' rounding (0.8-2.3 % on the reference and its 2x-demand variant). One HiGHS model, its flags' bounds changed between runs (each LP
    starts from the last one's basis): 5-7 LPs in ~0.05 s on the reference, against 0.3 s
    built afresh each time."""
    solver = _BulkHiGHS(msg=False, mip=False, timeLimit=10.0, threads=1)
    solver.createAndConfigureSolver(m.prob)
    solver.buildSolverModel(m.prob)
    h = m.prob.solverModel
    out: list[float | None] = []

    def run_all() -> None:
        import highspy
        import numpy as np

        for levels in level_sets:
            cols = [
                (on.index, *((0.0, 1.0) if k is None else (1.0 * (i < k),) * 2))
                for order, k in levels
                for i, (_, on) in enumerate(order)
            ]
            idx = np.array([c for c, _, _ in cols], dtype=np.int32)
            lo = np.array([x for _, x, _ in cols], dtype=np.float64)
            up = np.array([x for _, _, x in cols], dtype=np.float64)
            h.changeColsBounds(len(cols), idx, lo, up)
            h.run()
            ok = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
            out.append(float(h.getInfo().objective_function_value) if ok else None)

    try:
        _run_cancellable("highs", run_all, h.cancelSolve, 10.0)
    except pulp.PulpSolverError:
        return [None] * len(level_sets)
    return out


def restriction_pays(
    m: PlannerModel, levels: list[tuple[FlagOrder, int]]
) -> tuple[bool, float | None]:
    """Whether the restricted spare start is worth solving, and the exact model's LP
    relaxation (its flags free: a lower bound on every plan, or None). It pays where the LP
    with the kept flags fixed (:func:`_level_lps`) is within :data:`FLEET_GAP` of the best LP
    with every service's largest type at one level k (the same k for every order, capped at
    its length). A restriction that costs more than the rounding could explain is not where
    the optimum is: on the reference at 2x demand the kept level's LP is 6.2 % above level
    4's, and the proof from its plan ($825,165, 6.3 % above the optimum) took 8-8.5 s against
    3.3-4.2 s for the whole relaxed path; on the reference it is 0.5 % (benchmarks/README.md,
    issue 51)."""
    longest = max(len(order) for order, _ in levels)
    uniform = [[(order, min(k, len(order))) for order, _ in levels] for k in range(1, longest + 1)]
    free: list[tuple[FlagOrder, int | None]] = [(order, None) for order, _ in levels]
    bound, kept, *others = _level_lps(m, [free, levels, *uniform])
    if kept is None:
        return False, bound
    floor = kept - FLEET_GAP * max(1.0, abs(kept))
    return all(other is None or other >= floor for other in others), bound


def spare_start(
    m: PlannerModel, time_limit: float, gap: float, threads: int
) -> tuple[float | None, float | None]:
    """A plan of the exact model (every rented replica whole) with the flags above the kept
    levels (:func:`kept_levels`) held at 0: each service's spare limited to its slowest
    replica types, the plan's values left in ``m``. Returns its present value (None when
    there is nothing to restrict, the restriction does not pay, :func:`restriction_pays`, or
    HiGHS found no plan in ``time_limit``: then ``m``'s values are not a plan) and the exact
    model's LP bound (None if not computed).

    On the reference the relaxed model (rentals fractional) points the wrong way: its optimum
    ($665,204) flags H100 replicas, whose fractions look cheap, and made whole it costs
    $676,660; the restricted model gives the optimum ($670,309, A100 PCIe bought, only the
    A100 flag set) in 0.5 s, and the relaxed MILP and the repair (1.4-1.6 s) are not needed
    (benchmarks/README.md, issue 51)."""
    levels = kept_levels(m)
    fixed = [on for order, keep in levels for _, on in order[keep:]]
    if not fixed:
        return None, None
    pays, bound = restriction_pays(m, levels)
    if not pays:
        return None, bound
    bounds = [(v, v.upBound) for v in fixed]
    try:
        for v in fixed:
            v.upBound = 0
        with exact_model(m):
            m.prob.solve(_BulkHiGHS(msg=False, timeLimit=time_limit, gapRel=gap, threads=threads))
        found = m.prob.sol_status in (1, 2) and pulp.value(m.prob.objective) is not None
    except pulp.PulpSolverError:
        found = False
    finally:
        for v, up in bounds:
            v.upBound = up
    return (pulp.value(m.prob.objective) if found else None), bound


def prove_from_spare_start(
    m: PlannerModel, deadline: float, gap: float, threads: int
) -> _Whole | None:
    """The exact model proven from :func:`spare_start`'s plan by ``deadline`` (a
    ``perf_counter`` instant), on a small model whose first MILP would relax rentals
    (:func:`_two_stage`); None when that start has no plan (the caller then solves the
    relaxed model and repairs it). The gap is against the better of HiGHS's bound on the exact
    model and its LP relaxation (:func:`restriction_pays`): a proof cut short by the time
    limit still has a bound."""
    left = deadline - time.perf_counter()
    with phase("solve: start (restricted spare)"):
        start, lp_bound = spare_start(m, SPARE_START_SHARE * left, gap, threads)
    if start is None:
        return None
    left = deadline - time.perf_counter()
    bound = -math.inf if lp_bound is None else lp_bound
    objective, rel_gap = start, gap_to_bound(start, bound)
    if left > 0.1:
        with phase("solve: exact model (proof / polish)"):
            objective, rel_gap = polish(m, left, gap, threads, bound)
    rel_gap = min(rel_gap, 1.0) if math.isinf(rel_gap) else rel_gap
    return _Whole(
        objective, rel_gap, exact_proof=rel_gap <= gap + 1e-9, polished=True, spare_start=True
    )


def broken_rows(m: PlannerModel) -> tuple[str, ...]:
    """The rows of ``m`` its current plan breaks by more than 1e-6 of their right-hand side
    (at least 1e-6). A whole-replica plan made by rounding rentals up breaks a total budget
    when the extra replicas cost more than the budget has left.

    A row ``sum a x + c <= 0`` (pulp's form) is broken when ``sum a x + c`` exceeds the
    tolerance; ``>=`` rows the other way, ``==`` rows either way.
    """
    out = []
    for name, c in m.prob.constraints.items():
        value = c.value()
        if value is None:
            continue
        excess = {pulp.LpConstraintLE: value, pulp.LpConstraintGE: -value}.get(c.sense, abs(value))
        if excess > 1e-6 * max(1.0, abs(c.constant)):
            out.append(name)
    return tuple(out)


def _whole_within(
    m: PlannerModel,
    relaxed: float,
    rel_gap: float | None,
    gap: float,
    deadline: float,
    threads: int,
    bound_usd: float,
    broken: tuple[str, ...],
) -> _Whole:
    """The whole-replica plan breaks ``broken``: the exact model (every rented replica whole)
    is solved from scratch for the time left (at least :data:`MIN_REPAIR_S`). Its plan is kept
    whatever it costs (the only valid one); without one the result says whether the exact
    model proved that none exists. The gap is against the better of the relaxed model's bound
    and the exact run's."""
    left = max(MIN_REPAIR_S, deadline - time.perf_counter())
    try:
        with exact_model(m):
            m.prob.solve(_BulkHiGHS(msg=False, timeLimit=left, gapRel=gap, threads=threads))
        found = m.prob.sol_status in (1, 2) and pulp.value(m.prob.objective) is not None
        proven = m.prob.status == pulp.LpStatusInfeasible and not found
        exact_bound = float(m.prob.solverModel.getInfo().mip_dual_bound) if found else -math.inf
    except pulp.PulpSolverError:
        found, proven, exact_bound = False, False, -math.inf
    if not found or broken_rows(m):
        return _Whole(bound_usd=bound_usd, broken=broken, proven=proven, polished=True)
    round_up_replicas(m)  # snaps integers 1e-9 off
    objective = pulp.value(m.prob.objective)
    bound = max(bound_from_gap(relaxed, rel_gap or 0.0), min(exact_bound, 1e30))
    return _Whole(
        objective,
        gap_to_bound(objective, bound),
        max(0.0, objective - relaxed),
        bound_usd,
        exact_proof=False,
        polished=True,
    )


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


def polish(
    m: PlannerModel, time_limit: float, gap: float, threads: int, bound: float
) -> tuple[float, float]:
    """Solve the exact model (every rented replica integer) with HiGHS, started from the
    repaired plan now in ``m``; keep whichever plan is cheaper. Returns (objective, gap), the
    gap against the best of ``bound`` (the relaxed model's) and the exact run's own bound."""
    values = {v.name: v.varValue for v in m.prob.variables()}
    before = pulp.value(m.prob.objective) or 0.0
    # a small exact model runs to its gap (a proof); a large one stops at a node limit
    small = exact_integers(m) <= EXACT_POLISH_INTEGERS
    nodes = dict(PROOF_OPTIONS) if small else {"mip_max_nodes": POLISH_NODES}
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
    return after, gap_to_bound(after, best_bound) if after else 0.0


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
    return max(0.0, (pulp.value(m.prob.objective) or 0.0) - before)


def _two_stage(m: PlannerModel) -> bool:
    """A small model solved with relaxed rentals: its plan is then made whole and proven on
    the exact model (:func:`polish` without a node limit)."""
    relaxed = any(v.cat == pulp.LpContinuous for v in m.q.values())
    return relaxed and exact_integers(m) <= EXACT_POLISH_INTEGERS


def fleet_variables(m: PlannerModel) -> list[pulp.LpVariable]:
    """The integer decisions that are the fleet: servers and card nodes bought, reservations
    signed, existing nodes sold."""
    cards = [v for e in m.cards.values() for v in e if v.cat == pulp.LpInteger]
    return list(dict.fromkeys([*m.buy.values(), *cards, *m.res.values(), *m.sell.values()]))


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
