"""MIP starts (planner.optimize.start, planner.optimize.solve.mip_start) and the large-model path of
solve_model: a start is a whole, feasible plan, never dearer than the all-rental one, and the
plan solved from it passes the independent verifier."""

from __future__ import annotations

import dataclasses
import functools
import math

import pulp
import pytest

from benchmarks.generate import HOPPER_ERA, generate, load_inputs
from planner.base import tolerances as tol
from planner.optimize.bound import separable_bound
from planner.optimize.candidates import (
    build_candidates,
    offer_restricted,
    owned_serve_options,
    progress_per_wall_hour,
)
from planner.optimize.model import build_model
from planner.optimize.solve import (
    START_FROM_INTEGERS,
    _BulkHiGHS,
    _Relaxation,
    mip_start,
    rental_start,
    solve_model,
)
from planner.optimize.start import (
    FLEET_SHIFTS,
    _bought_types,
    _fleet_vars,
    _without_type,
    best_rounded_start,
    lp_rounded_start,
    refixed,
)
from planner.plan.extract import extract_plan
from planner.verify import verify_plan


def _model(workloads: int, gpus, months: int, seed: int):
    """A fresh model of a generated problem: tests fix, bound and solve its variables."""
    inputs, cands = _problem(workloads, gpus, months, seed)
    return inputs, build_model(inputs, cands)


# The generated problems the tests share (their candidates are built once per process): eight
# workloads on four drawn GPU types (seeds 1 and 3 round the LP to fleets of several types, and
# rent their training jobs on demand), and four workloads on the whole HOPPER_ERA catalog (its
# partial-fill cards and HGX servers, its default lead times).
SMALL = (8, 4, 12)
HOPPER = (4, HOPPER_ERA, 12)


@functools.cache
def _problem(workloads: int, gpus, months: int, seed: int):
    """A generated problem and its candidates, once per process: several tests model the same
    seed, and the candidates take longer than the LP. Building a model and solving it leaves
    them as they were (compared pickled)."""
    inputs = load_inputs(generate(workloads, gpus, months, seed))
    return inputs, build_candidates(inputs)


def _lp(m) -> tuple[float, dict[str, float]]:
    m.prob.solve(_BulkHiGHS(msg=False, mip=False))
    return pulp.value(m.prob.objective), {
        v.name: float(v.varValue or 0) for v in m.prob.variables()
    }


def _feasible_and_whole(m) -> bool:
    whole = all(tol.whole(v.varValue) for v in m.prob.variables() if v.cat == pulp.LpInteger)
    return whole and all(c.valid(tol.INTEGRALITY) for c in m.prob.constraints.values())


@pytest.mark.parametrize("seed", [1, 3])
def test_the_lp_rounded_start_is_a_whole_feasible_plan_above_the_lp(seed):
    _, m = _model(*SMALL, seed)
    lp_obj, lp = _lp(m)
    assert lp_rounded_start(m, lp)
    assert _feasible_and_whole(m)
    assert pulp.value(m.prob.objective) >= lp_obj * (1 - 1e-9)


@pytest.mark.parametrize("seed", [1, 3])
def test_the_best_rounded_start_beats_every_rounding_and_is_a_local_optimum(seed):
    """Never dearer than any single fleet rounding, whole and feasible, and never dearer than
    the first move of each rounding's search (dropping the first GPU type the LP buys)."""
    _, m = _model(*SMALL, seed)
    lp_obj, lp = _lp(m)
    singles = []
    for shift in FLEET_SHIFTS:
        if lp_rounded_start(m, lp, shift):
            singles.append(pulp.value(m.prob.objective))
    assert singles
    best = best_rounded_start(m, lp)
    assert best is not None and _feasible_and_whole(m)
    assert best == pytest.approx(pulp.value(m.prob.objective))
    assert lp_obj * (1 - 1e-9) <= best <= min(singles) * (1 + 1e-9)
    for shift in FLEET_SHIFTS:
        first = _bought_types(m, lp)[:1]
        assert first, "the LP buys no GPU type: no first move to compare"
        for g in first:
            if lp_rounded_start(m, _without_type(m, lp, g), shift):
                assert pulp.value(m.prob.objective) >= best * (1 - 1e-9)


@pytest.mark.parametrize("seed", [1, 3])
def test_mip_start_is_never_dearer_than_the_all_rental_plan(seed):
    _, m = _model(*SMALL, seed)
    assert rental_start(m)
    rental = pulp.value(m.prob.objective)
    started, bound, _, _ = mip_start(m, threads=1)
    assert started and bound is not None and bound <= rental * (1 + 1e-9)
    assert _feasible_and_whole(m)
    assert pulp.value(m.prob.objective) <= rental * (1 + 1e-9)


def test_no_start_when_a_budget_rules_out_every_constructed_plan():
    """A total budget below the LP optimum: neither constructed plan fits, so no start."""
    inputs, cands = _problem(*SMALL, 1)
    m = build_model(inputs, cands)
    lp_obj, _ = _lp(m)
    budget = inputs.problem.budget.model_copy(update={"total_usd": lp_obj * 0.5})
    tight = dataclasses.replace(
        inputs, problem=inputs.problem.model_copy(update={"budget": budget})
    )
    m2 = build_model(tight, cands)  # the candidates never read the budget (build_candidates)
    assert not mip_start(m2, threads=1)[0]


def test_a_large_model_solved_from_its_start_passes_verification():
    """A small problem over many months: ~12,000 integers, past START_FROM_INTEGERS (the 10
    workloads over 36 months this used took twice the CPU on the same path)."""
    inputs, m = _model(3, HOPPER_ERA, 42, 0)
    assert sum(v.cat == pulp.LpInteger for v in m.prob.variables()) >= START_FROM_INTEGERS
    res = solve_model(m, time_limit=5, gap=1e-3)  # the LP gets 3 s of it, the search 4.25 s
    assert res.has_solution
    plan = extract_plan(m, res)
    assert verify_plan(inputs, plan) == []
    # the gap is against a true bound: the LP's (it finishes here), never above the plan
    assert res.gap is not None and 0 < res.gap < 1
    if res.status == "feasible":
        assert "not proven optimal" in res.message


def test_owned_options_never_drop_the_fastest_replica_per_gpu():
    """The pruning keeps, per GPU type, a replica at least as fast as any dropped one."""
    _, cands = _problem(*HOPPER, 0)
    dropped = 0
    for cl in cands.serve.values():
        kept = owned_serve_options(cl)
        for c in cl:
            if c.rate_rps > 0 and c not in kept:
                dropped += 1
                assert any(
                    k.gpu == c.gpu and c.tp % k.tp == 0 and k.rate_rps <= c.rate_rps for k in kept
                )
    assert dropped, "the pruning dropped no option: nothing to check"


@pytest.mark.parametrize("seed", range(6))
def test_the_repair_stays_within_its_stated_bound_and_never_beats_the_exact_model(
    seed, monkeypatch
):
    """Seeded small services solved relaxed (every rental continuous, then repaired) and
    exactly: exact <= repaired <= relaxed + the stated bound; the plan reports both. (The
    restricted spare start, which skips the repair, is off here: tests/test_spare_start.py.)"""
    import random

    from planner.optimize import model as model_mod
    from planner.optimize import solve as solve_mod

    monkeypatch.setattr(solve_mod, "prove_from_spare_start", lambda *a, **k: None)
    from tests.factories import candidates, gpu, offer, problem, serve_workload

    rng = random.Random(seed)
    inputs = problem(
        months=2,
        gpus=[gpu(price=1e7)],
        offers=[
            offer("a-g1", "g1", round(rng.uniform(1.0, 3.0), 2)),
            offer("b-g1", "g1", round(rng.uniform(1.0, 3.0), 2), gpus_per_instance=2),
        ],
        serve=[
            serve_workload(
                rps=round(rng.uniform(0.5, 6.0), 2),
                util=round(rng.uniform(0.3, 0.9), 2),
                redundancy=rng.choice([0, 1]),
                max_load=rng.choice([0.8, 1.0]),
            )
        ],
    )
    cands = candidates(
        inputs, serve={"chat": [("g1", 1, 1.0), ("g1", 2, round(rng.uniform(1.2, 2.4), 2))]}
    )

    def run():
        m = build_model(inputs, cands)
        return m, solve_model(m, time_limit=30, gap=1e-7)

    monkeypatch.setattr(model_mod, "EXACT_RENTAL_CELLS", 0)
    m, relaxed = run()
    assert any(v.cat == pulp.LpContinuous for v in m.q.values())
    monkeypatch.setattr(model_mod, "EXACT_RENTAL_CELLS", 10**9)
    _, exact = run()
    assert exact.objective <= relaxed.objective + 1e-6
    fractional = relaxed.objective - relaxed.repair_usd
    assert relaxed.repair_usd <= relaxed.repair_bound_usd + 1e-4 * abs(fractional) + 1e-6
    plan = extract_plan(m, relaxed)
    assert (
        plan.repair_usd == relaxed.repair_usd and plan.repair_bound_usd == relaxed.repair_bound_usd
    )
    assert all(a.replicas == round(a.replicas) for a in plan.serve_allocations)


def test_cbc_stopped_without_a_plan_keeps_the_checked_start(monkeypatch):
    """A large model on CBC starts from the LP-rounded plan; when CBC's clock runs out before
    it writes any plan, that checked start is the answer (feasible, verified), not a failure,
    and its gap is measured against the LP bound."""
    import time

    import planner.optimize.solve as solve

    inputs, m = _model(*SMALL, 1)
    monkeypatch.setattr(solve, "_large", lambda _m: True)

    real = m.prob.solve

    def out_of_time(cmd, **kw):
        if not isinstance(cmd, pulp.PULP_CBC_CMD):
            return real(cmd, **kw)  # the start's LP (HiGHS), the repair and the polish
        time.sleep(1.0)  # CBC used its whole (1 s) limit
        raise pulp.PulpSolverError("Pulp: Error while executing")

    monkeypatch.setattr(m.prob, "solve", out_of_time)
    res = solve_model(m, solver="cbc", time_limit=0.5)
    assert res.status in ("feasible", "optimal") and res.objective is not None
    assert res.gap is not None and 0 <= res.gap < 1
    assert _feasible_and_whole(m)
    assert verify_plan(inputs, extract_plan(m, res)) == []


def test_an_lp_stopped_by_its_time_limit_is_no_bound_but_still_a_start():
    """PuLP reads an LP that HiGHS stopped at its time limit as 'Optimal'; its objective is
    then no bound at all, so mip_start reports the separable bound instead (planner.optimize.bound),
    and it still hands over a checked plan (rounded from wherever the LP stopped, or
    all-rental), never below that bound."""
    _, m = _model(*HOPPER, 0)
    started, bound, _, _ = mip_start(m, threads=1, lp_seconds=1e-9)
    assert started and bound is not None
    assert bound == pytest.approx(separable_bound(m))
    assert _feasible_and_whole(m)
    assert bound <= pulp.value(m.prob.objective) * (1 + 1e-9)


def test_refixed_keeps_the_fleet_and_is_feasible():
    """The LP re-solved with a plan's whole fleet fixed (HiGHS warm from its last basis): no
    cheaper than the free LP, at that very fleet; the plan rounded from it is whole and
    feasible with the same fleet, and the PuLP model's bounds are untouched."""
    _, m = _model(*SMALL, 1)
    lp_obj, lp = _lp(m)
    relax = _Relaxation(m, math.inf)
    assert lp_rounded_start(m, lp)
    values = {v.name: v.varValue for v in m.prob.variables()}
    fleet = _fleet_vars(m)
    bounds = [(v.lowBound, v.upBound) for v in fleet]
    fixed = {v.name: float(values[v.name]) for v in fleet}
    assert any(fixed.values()), "the rounded plan buys nothing: no fleet to keep"
    again = relax(fixed)
    assert again is not None
    assert all(again[n] == pytest.approx(x, abs=1e-6) for n, x in fixed.items())
    cost = sum(c * again[v.name] for v, c in m.prob.objective.items())
    assert cost >= lp_obj * (1 - 1e-7)
    found = refixed(m, values, relax)
    assert found is not None
    assert _feasible_and_whole(m)
    assert found.value == pytest.approx(pulp.value(m.prob.objective))
    assert [(v.lowBound, v.upBound) for v in fleet] == bounds
    assert all(v.varValue == pytest.approx(values[v.name]) for v in fleet)


@pytest.mark.parametrize("seed", [1, 3])
def test_a_rented_job_runs_on_its_cheapest_rental(seed):
    """In the rent-only rounding, no other (candidate, on-demand offer) that fits the window
    would rent a job for less than the one chosen."""
    inputs, m = _model(*SMALL, seed)
    _, lp = _lp(m)
    assert lp_rounded_start(m, lp, -math.inf)
    specs = {j.name: j for j in inputs.problem.workloads.train}
    compared = 0
    for job in m.cands.train:
        chosen = sum(
            m.prob.objective.get(r, 0.0) * (r.varValue or 0.0)
            for (j, *_), r in m.r.items()
            if j == job
        )
        for (j, key, oid, t), _r in m.r.items():
            o = m.cands.offers[oid]
            if j != job or t != m.cands.window[job][0] or o.kind != "on_demand":
                continue
            if offer_restricted(o):
                continue
            c = m.train_cand(job, key)
            f = progress_per_wall_hour(c, specs[job], o)
            if not f or c.wall_hours / f > m.cands.window_hours[job]:
                continue
            left, other = c.wall_hours / f, 0.0
            for month in m.cands.window[job]:
                hours = min(left, 730.0)
                other += m.prob.objective.get(m.r[(job, key, oid, month)], 0.0) * hours
                left -= hours
            assert chosen <= other * (1 + 1e-9)
            compared += 1
    assert compared, "no on-demand rental of a training job to compare"


def test_fleet_moves_keep_the_fleet_whole_and_move_what_they_say():
    """A moved purchase keeps its servers and cards, in the new month; an added server of a
    partial type comes full of cards; every move is a fleet of whole servers."""
    from planner.optimize.start import _added, _moved, _units

    _, m = _model(*HOPPER, 0)
    partial = next(g for g, gpu in m.inputs.gpus.items() if gpu.partial_fill and (g, 3) in m.buy)
    gpu = m.inputs.gpus[partial]
    values = {v.name: 0.0 for v in m.prob.variables()}
    added = _added(m, values, partial, 3)
    servers, cards = _units(m, added, partial, 3)
    assert servers == 1.0 and [n for _, n in cards] == [gpu.slots // gpu.node_gpus]
    moved = _moved(m, added, partial, 3, 7)
    assert _units(m, moved, partial, 3)[0] == 0.0
    assert all(n == 0.0 for _, n in _units(m, moved, partial, 3)[1])
    assert _units(m, moved, partial, 7)[0] == 1.0
    assert [n for _, n in _units(m, moved, partial, 7)[1]] == [gpu.slots // gpu.node_gpus]
    fleet = {v.name for v in _fleet_vars(m)}
    assert sum(moved[n] for n in fleet) == sum(added[n] for n in fleet)
    # a full server (HGX): its cards are the buy variable itself, so only that one moves
    full = next(g for g, gpu in m.inputs.gpus.items() if not gpu.partial_fill and (g, 3) in m.buy)
    one = _added(m, values, full, 3)
    assert _units(m, one, full, 3) == (1.0, [])
    assert [n for n in fleet if one[n]] == [m.buy[(full, 3)].name]
    there = _moved(m, one, full, 3, 7)
    assert [n for n in fleet if there[n]] == [m.buy[(full, 7)].name]


# seeds whose roundings buy several types (of SMALL: 1, 3 and 8 of 0-11 do; of 8 workloads on
# HOPPER_ERA, 0, 6 and 11 do, at several times the CPU)
@pytest.mark.parametrize("seed", [1, 3])
def test_the_searched_start_is_never_dearer_than_its_roundings(seed):
    """With the LP re-solved for each fleet: the result is whole, feasible and no dearer than
    any rounding; the one-type cuts of a fleet that buys several types each buy one. (The
    cuts' prices are not compared: a re-solve of the same fleet may end at another of the
    LP's optima, so its rounding depends on the re-solves before it.)"""
    from planner.optimize.start import _owned_types, _single_types, _try

    _, m = _model(*SMALL, seed)
    _, lp = _lp(m)
    relax = _Relaxation(m, math.inf)
    best = best_rounded_start(m, lp, relax=relax)
    assert best is not None and _feasible_and_whole(m)
    assert best == pytest.approx(pulp.value(m.prob.objective))
    points = [_point(m, lp, s) for s in FLEET_SHIFTS if _try(m, lp, s) is not None]
    assert best <= min(p.value for p in points) * (1 + 1e-9)
    several = [p for p in points if len(_owned_types(m, p.values)) > 1]
    assert several, "the seed's roundings buy one type at most: the cuts are not exercised"
    cuts = _single_types(m, several, relax, {}, math.inf)
    assert cuts and all(len(_owned_types(m, c.values)) == 1 for c in cuts)


def _point(m, lp, shift):
    from planner.optimize.start import _Point, _values

    return _Point(pulp.value(m.prob.objective), _values(m), lp, shift)


def test_the_search_never_buys_before_a_lead_time_allows():
    """A purchase in a month its lead time rules out (its bound is 0 there) is no fleet the
    search prices: fixing a variable in the LP would set both its bounds and hide the rule."""
    from planner.optimize.start import _added, _buyable

    _, m = _model(*HOPPER, 0)
    early = [
        (g, t)
        for (g, t), v in m.buy.items()
        if v.upBound == 0 and m.ownable.get(g) and any(_buyable(m, g, u) for u in range(12))
    ]
    assert early, "the catalog's default lead times bound some first months of a type"
    g, t = early[0]
    assert not _buyable(m, g, t)
    _, lp = _lp(m)
    values = {v.name: 0.0 for v in m.prob.variables()}
    assert refixed(m, _added(m, values, g, t), _Relaxation(m, math.inf)) is None
