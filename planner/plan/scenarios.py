"""A two-stage plan (issue 28): one purchase decision across demand scenarios, the rentals
that follow in each, and what planning for them is worth.

The steps, each in a share of the time limit (:data:`SHARES`):

1. **own**: every scenario solved alone (:func:`planner.plan.make.solve_inputs`): its own
   deterministic optimum, the regret's and EVPI's reference, and the union of GPU types any
   scenario may buy;
2. **base**: the first scenario's purchases held fixed and re-planned in every scenario (the
   plan a team would make for the base forecast alone: the VSS's reference, and the start of
   the next step);
3. **joint**: the two-stage model of :mod:`planner.optimize.stochastic`, from that start;
4. **refit**: its purchases held fixed and re-planned in every scenario by the deterministic
   solve (whole rented replicas, proven per scenario).

The plan kept is the cheaper, in the risk measure, of the joint one and the base one (so the
value of the stochastic solution is never negative by accident of a time limit); every
scenario's plan is an ordinary plan of its own inputs, verified as such.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.base.errors import InfeasibleError, SolverError
from planner.inputs.problem import Inputs
from planner.optimize.backends import bound_from_gap, gap_to_bound
from planner.optimize.candidates import Candidates, build_candidates, check_candidates
from planner.optimize.model import PlannerModel, build_model
from planner.optimize.solve import SolveResult, solve_model
from planner.optimize.stochastic import (
    Risk,
    build_two_stage,
    first_stage_bounds,
    first_stage_values,
    fix_first_stage,
    release_first_stage,
    risk_value,
    solve_two_stage,
)
from planner.plan.data import Plan, RiskTerms, ScenarioOutcome
from planner.plan.extract import extract_plan

if TYPE_CHECKING:
    from planner.inputs.problem import Scenario

# Shares of the solve's seconds per step, in their order (the rest is slack for building
# models): own solves, base re-plans, the joint model, its refit, the other forecasts' own
# purchases. Each step gets its share of what the earlier ones left (:meth:`_Clock.seconds`),
# and its solves split it evenly.
SHARES = {"own": 0.3, "base": 0.1, "joint": 0.25, "refit": 0.1, "alternatives": 0.15}
SLACK = 0.1  # kept back for building the copies and assembling the plan
# A forecast's own purchases are re-planned only with this many seconds per scenario left.
ALT_MIN_S = 1.0
# Processes at most for the scenarios' own solves (:func:`own_workers`).
MAX_OWN_WORKERS = 8


@dataclass
class _Clock:
    """Seconds for the steps, in the order of :data:`SHARES`, by ``end``."""

    total: float
    end: float
    spent: dict[str, float] = field(default_factory=dict)  # seconds each step took
    _mark: float = field(default_factory=time.perf_counter)

    def done(self, step: str) -> None:
        now = time.perf_counter()
        self.spent[step] = self.spent.get(step, 0.0) + now - self._mark
        self._mark = now

    def left(self) -> float:
        return self.end - time.perf_counter()

    def seconds(self, step: str, solves: int = 1) -> float:
        """Seconds for each of ``solves`` solves of ``step``: the step's share of what is left,
        against its own and the later steps' shares (time a step does not use goes on)."""
        steps = list(SHARES)
        rest = sum(SHARES[k] for k in steps[steps.index(step) :]) + SLACK
        return max(0.5, self.left() * SHARES[step] / rest / solves)


@dataclass
class _Own:
    plan: Plan | None  # None: no plan (then ``result`` says why)
    result: SolveResult
    ownable: set[str]
    fleet: dict[tuple, float]
    values: dict[str, float | None]  # the plan's variable values, by name


def risk_of(inputs: Inputs) -> Risk:
    """The problem's risk measure (expected value without a ``risk`` section)."""
    r = inputs.problem.risk
    return Risk() if r is None else Risk(r.measure, r.alpha, r.weight)


def plan_scenarios(
    inputs: Inputs,
    solver: str,
    seconds: float,
    gap: float,
    diagnose: bool = True,
) -> Plan:
    """The two-stage plan of ``inputs.scenarios`` in about ``seconds`` of solving."""
    t0 = time.perf_counter()
    clock = _Clock(seconds, t0 + seconds)
    scen = list(inputs.scenarios)
    risk = risk_of(inputs)
    cands = [_candidates(s) for s in scen]
    own = _solve_all_own(scen, cands, solver, clock, gap, diagnose)
    clock.done("own")
    if len(scen) == 1:
        return _of_file(_single(own[0], scen[0], risk, time.perf_counter() - t0), inputs)
    union = frozenset().union(*(o.ownable for o in own))
    models = [build_model(s.inputs, c, union) for s, c in zip(scen, cands, strict=True)]
    fleets = _Fleets(models, own, solver, gap)
    clock.done("build")
    base = fleets.replan(own[0].fleet, clock.seconds("base", len(scen)))
    clock.done("base")
    fleets.release()
    joint = _joint(models, scen, risk, base, clock, gap)
    if joint.fleet is not None:
        fleets.replan(joint.fleet, clock.seconds("refit", len(scen)))
    clock.done("joint")
    for o in own[1:]:  # every forecast's own purchases, while the time lasts
        if fleets.get(o.fleet) is None and clock.left() > ALT_MIN_S * len(scen):
            fleets.replan(o.fleet, clock.seconds("alternatives", len(scen) * (len(own) - 1)))
    clock.done("alternatives")
    probs = [s.probability for s in scen]
    chosen, how = fleets.best(probs, risk, joint.fleet, own[0].fleet)
    if chosen is None and fleets.retry_timed_out(clock, [joint.fleet, own[0].fleet]):
        chosen, how = fleets.best(probs, risk, joint.fleet, own[0].fleet)
    if chosen is None:
        _no_first_stage(joint, base, scen, clock.total)
    return _of_file(_assemble(scen, risk, own, fleets, chosen, how, joint, clock, gap), inputs)


def _of_file(plan: Plan, inputs: Inputs) -> Plan:
    """The two-stage plan names the problem file it was made from (its scenarios' plans name
    their scenario: ``file [scenario NAME]``)."""
    return plan.model_copy(
        update={"problem_file": inputs.source_path, "problem_sha256": inputs.source_sha256}
    )


def _candidates(s: Scenario) -> Candidates:
    cands = build_candidates(s.inputs)
    try:
        check_candidates(s.inputs, cands)
    except InfeasibleError as exc:
        raise InfeasibleError(f"scenario '{s.name}': {exc}", exc.diagnosis) from None
    return cands


def own_workers(scenarios: int) -> int:
    """Processes for the scenarios' own solves: one per CPU, at most one per scenario and
    :data:`MAX_OWN_WORKERS` (each solve is single-threaded and independent of the others).

    >>> own_workers(1)
    1
    """
    if multiprocessing.current_process().daemon or threading.active_count() > 1:
        # a daemonic process (a Dask worker's, by its default) may not have children, and a
        # fork of a process running other threads (an in-process Dask worker) may deadlock
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(scenarios, cpus or 1, MAX_OWN_WORKERS))


def _solve_all_own(
    scen: Sequence[Scenario],
    cands: Sequence[Candidates],
    solver: str,
    clock: _Clock,
    gap: float,
    diagnose: bool,
) -> list[_Own]:
    """Every scenario alone, in parallel processes where there are CPUs for them (forked:
    the planner is already imported); each solve gets its share of the step's seconds times
    the solves running at once."""
    workers = own_workers(len(scen))
    seconds = clock.seconds("own", len(scen)) * workers
    if len(scen) == 1:  # nothing follows: the deterministic solve, with all of the time
        seconds = max(0.5, clock.left())
    if workers == 1:
        outs = [
            _own_run(s.inputs, c, solver, seconds, gap) for s, c in zip(scen, cands, strict=True)
        ]
    else:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            jobs = [
                pool.submit(_own_run, s.inputs, c, solver, seconds, gap)
                for s, c in zip(scen, cands, strict=True)
            ]
            try:
                outs = [j.result() for j in jobs]
            except BaseException:
                _stop(pool)
                raise
    outs = [
        _again_if_late(s, c, o, solver, clock, gap)
        for s, c, o in zip(scen, cands, outs, strict=True)
    ]
    return [_checked_own(s, o, solver, diagnose) for s, o in zip(scen, outs, strict=True)]


def _again_if_late(
    s: Scenario, c: Candidates, own: _Own, solver: str, clock: _Clock, gap: float
) -> _Own:
    """A scenario whose own solve found no plan in its share only for want of time is solved
    once more with half of what is left (the later steps degrade to shorter solves; without
    its own plan the whole two-stage solve would end): benchmarks/compose.py seed 1 problem
    796, a busy scenario solved one after another in a loaded worker process."""
    if own.plan is not None or own.result.status != "time_limit" or clock.left() < 1.0:
        return own
    return _own_run(s.inputs, c, solver, 0.5 * clock.left(), gap)


def _stop(pool: ProcessPoolExecutor) -> None:
    """On an interrupt (or a failure) in the parent: drop the solves not started and stop the
    running ones, which would otherwise run to their time limits before the command exits
    (a Ctrl-C in a terminal reaches them too; a signal to the parent alone does not)."""
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in list(getattr(pool, "_processes", {}).values()):  # no public handle on them
        proc.terminate()


def _own_run(inputs: Inputs, cands: Candidates, solver: str, seconds: float, gap: float) -> _Own:
    """One scenario's own solve (in a worker process: everything returned is plain data)."""
    m = build_model(inputs, cands)
    result = solve_model(m, solver=solver, time_limit=seconds, gap=gap)
    if not result.has_solution:
        return _Own(None, result, set(), {}, {})
    ownable = {g for g, ok in m.ownable.items() if ok}
    values = {v.name: v.varValue for v in m.prob.variables()}
    return _Own(extract_plan(m, result), result, ownable, first_stage_values(m), values)


def _checked_own(s: Scenario, own: _Own, solver: str, diagnose: bool) -> _Own:
    """A scenario's own solve, or why there is none: an infeasible scenario is exit 3,
    named, with its diagnosis."""
    result = own.result
    if result.status == "infeasible":
        diagnosis: list[str] = []
        if diagnose:
            from planner.optimize.infeasible import diagnose_infeasible

            diagnosis = diagnose_infeasible(s.inputs, solver=solver)
        raise InfeasibleError(
            f"infeasible: scenario '{s.name}' has no plan that meets every constraint", diagnosis
        )
    if own.plan is None:
        raise SolverError(f"scenario '{s.name}': {result.solver}: {result.message}")
    return own


@dataclass
class _Replan:
    """One first stage re-planned in every scenario: the plans (None where it cannot be
    made), their solves and the first stage itself."""

    plans: list[Plan | None]
    results: list[SolveResult | None]
    fleet: dict[tuple, float]

    @property
    def feasible(self) -> bool:
        return all(p is not None for p in self.plans)

    def costs(self) -> list[float]:
        return [p.objective_usd or 0.0 for p in self.plans if p is not None]


def _key(fleet: dict[tuple, float]) -> frozenset:
    return frozenset((k, v) for k, v in fleet.items() if v)


class _Fleets:
    """First stages re-planned in every scenario's model, each once (by its nonzero
    entries)."""

    def __init__(
        self, models: list[PlannerModel], own: Sequence[_Own], solver: str, gap: float
    ) -> None:
        self.models, self.own, self.solver, self.gap = models, own, solver, gap
        self.bounds = [first_stage_bounds(m) for m in models]
        self.done: dict[frozenset, _Replan] = {}

    def _load_own(self, i: int) -> None:
        """Put scenario i's own plan in its copy's variables (by name; the copy's extra
        variables, of GPU types only other scenarios may buy, at 0): the joint model's start."""
        values, prefix = self.own[i].values, f"sc{i + 1}_"
        for v in self.models[i].prob.variables():
            v.varValue = values.get(v.name.removeprefix(prefix)) or 0.0

    def get(self, fleet: dict[tuple, float]) -> _Replan | None:
        return self.done.get(_key(fleet))

    def release(self) -> None:
        for m, b in zip(self.models, self.bounds, strict=True):
            release_first_stage(m, b)

    def replan(self, fleet: dict[tuple, float], seconds: float) -> _Replan:
        """Hold ``fleet`` in every scenario's model and solve the rest; the values of each
        solve stay in its model (the joint model starts from the base's)."""
        if (known := self.get(fleet)) is not None:
            return known
        plans: list[Plan | None] = []
        results: list[SolveResult | None] = []
        for i, (m, b) in enumerate(zip(self.models, self.bounds, strict=True)):
            missing = fix_first_stage(m, fleet, b)
            if not missing and _key(fleet) == _key(self.own[i].fleet):
                self._load_own(i)  # that is scenario i's own plan: no second solve
                plans.append(self.own[i].plan)
                results.append(self.own[i].result)
                continue
            result = None
            if not missing:
                result = solve_model(m, solver=self.solver, time_limit=seconds, gap=self.gap)
            # a large model's start search tests rows, not bounds: a plan that left the
            # fleet it was given is no plan of that fleet
            ok = result is not None and result.has_solution
            ok = ok and _key(first_stage_values(m)) == _key(fleet)
            plans.append(extract_plan(m, result) if ok else None)  # type: ignore[arg-type]
            results.append(result)
        self.done[_key(fleet)] = out = _Replan(plans, results, dict(fleet))
        return out

    def retry_timed_out(self, clock: _Clock, order: Sequence[dict | None]) -> _Replan | None:
        """Re-plan once more the first fleet of ``order`` (the joint model's, then the base
        forecast's) that some scenario could not re-plan only for want of time, with what is
        left of the time (none when under a second is: the time limit holds)."""
        if clock.left() < 1.0:
            return None
        for fleet in order:
            r = None if fleet is None else self.get(fleet)
            if r is None or r.feasible:
                continue
            if any(x is not None and x.status == "time_limit" for x in r.results):
                del self.done[_key(r.fleet)]
                return self.replan(r.fleet, clock.left())
        return None

    def best(
        self, probs: list[float], risk: Risk, joint: dict | None, base: dict
    ) -> tuple[_Replan | None, str]:
        """The cheapest first stage in the risk measure that every scenario can re-plan, and
        where it came from (ties go to the joint model's, then the base forecast's)."""
        order = [k for k in (joint and _key(joint), _key(base)) if k is not None]
        order += [k for k in self.done if k not in order]
        options = [(self.done[k], k) for k in order if k in self.done and self.done[k].feasible]
        if not options:
            return None, ""
        chosen, k = min(options, key=lambda o: risk_value(o[0].costs(), probs, risk))
        how = (
            "joint"
            if joint is not None and k == _key(joint)
            else ("base" if k == _key(base) else "alternative")
        )
        return chosen, how


@dataclass
class _Joint:
    fleet: dict[tuple, float] | None
    bound: float | None
    message: str
    infeasible: bool = False  # proven by HiGHS on the whole two-stage model


def _joint(
    models: list[PlannerModel],
    scen: Sequence[Scenario],
    risk: Risk,
    base: _Replan,
    clock: _Clock,
    gap: float,
) -> _Joint:
    """Solve the two-stage model (from the base re-plans where all exist); its first stage."""
    if not base.feasible:
        for m in models:  # no start: HiGHS from nothing
            for v in m.prob.variables():
                v.varValue = None
    ts = build_two_stage(models, [s.probability for s in scen], risk)
    run = solve_two_stage(ts, clock.seconds("joint"), gap)
    fleet = first_stage_values(models[0]) if run.has_plan else None
    return _Joint(fleet, run.bound, run.message, run.infeasible)


def _no_first_stage(joint: _Joint, base: _Replan, scen: Sequence[Scenario], total: float) -> None:
    """No first stage serves every scenario: infeasible where HiGHS proved it on the
    two-stage model, else a time limit (exit 1 with its hint), never a guess called a proof."""
    why = [f"scenario '{name}': {w}" for name, w in _why_not(base, scen)]
    if joint.infeasible:
        raise InfeasibleError("infeasible: no single purchase plan meets every scenario", why)
    raise SolverError(
        f"no single purchase plan found for every scenario within {total:.0f} s of solving "
        f"({'; '.join(why)}): raise --time-limit (or solver.time_limit_s)"
    )


def _why_not(base: _Replan, scen: Sequence[Scenario]) -> list[tuple[str, str]]:
    """Scenarios where the base forecast's purchases cannot be re-planned, and why."""
    out = []
    for s, r in zip(scen, base.results, strict=True):
        if r is None:
            out.append((s.name, "a purchase of the base plan does not exist in it"))
        elif not r.has_solution:
            out.append((s.name, f"the base forecast's purchases: {r.message}"))
    return out or [(scen[0].name, "the joint model found no plan in its time")]


def _lower_bound(
    own: Sequence[_Own], probs: list[float], risk: Risk, joint: float | None
) -> float | None:
    """A valid lower bound on the two-stage optimum (None: none is known): the better of the
    joint solve's and the measure of every scenario's own lower bound (the wait-and-see
    bound: the measure is monotone, and no first stage beats a scenario's own optimum in it;
    it exists only when every scenario's own solve proved a bound)."""
    lows = []
    for o in own:
        gap = o.result.gap
        if gap is None or gap >= 1.0 or o.result.objective is None:
            lows = None  # that scenario's optimum could be any lower
            break
        lows.append(bound_from_gap(o.result.objective, gap))
    ws = None if lows is None else risk_value(lows, probs, risk)
    known = [b for b in (ws, joint) if b is not None]
    return max(known) if known else None


def _single(own: _Own, s: Scenario, risk: Risk, seconds: float) -> Plan:
    """One scenario of probability 1: today's plan, with its figures (VSS and EVPI 0)."""
    plan = own.plan
    cost = plan.objective_usd or 0.0
    outcome = ScenarioOutcome(
        name=s.name,
        probability=s.probability,
        changes=list(s.changes),
        cost_usd=cost,
        own_usd=cost,
        regret_usd=0.0,
        base_usd=cost,
        plan=plan,
        own_plan=plan,
        base_plan=plan,
    )
    totals = plan.totals.model_copy(update=_totals([cost], [1.0], risk, base=cost, own=[cost]))
    return plan.model_copy(
        update={
            "totals": totals,
            "scenarios": [outcome],
            "risk": _terms(risk),
            "solve_seconds": seconds,
        }
    )


def _terms(risk: Risk) -> RiskTerms:
    return RiskTerms(measure=risk.measure, alpha=risk.alpha, weight=risk.weight)


def _totals(
    costs: list[float], probs: list[float], risk: Risk, base: float | None, own: list[float]
) -> dict[str, float | None]:
    """The two-stage figures of the plan's totals (see :class:`planner.plan.data.Totals`)."""
    from planner.optimize.stochastic import cvar

    value = risk_value(costs, probs, risk)
    return {
        "expected_usd": sum(c * p for c, p in zip(costs, probs, strict=True)),
        "worst_usd": max(costs),
        "cvar_usd": cvar(costs, probs, risk.alpha) if risk.measure == "cvar" else None,
        "risk_usd": value,
        "vss_usd": None if base is None else base - value,
        "evpi_usd": value - risk_value(own, probs, risk),
    }


def _outcomes(
    scen: Sequence[Scenario], own: Sequence[_Own], fleets: _Fleets, chosen: _Replan
) -> list[ScenarioOutcome]:
    """Every scenario's plan under the chosen purchases, its own best and the base's."""
    base = fleets.get(own[0].fleet)
    out = []
    for i, s in enumerate(scen):
        plan = chosen.plans[i]
        if plan is None:  # _Fleets.best keeps only first stages re-planned in every scenario
            raise SolverError(f"scenario '{s.name}': the chosen purchases have no plan in it")
        cheaper = (own[i].plan.objective_usd or 0.0) <= (plan.objective_usd or 0.0)
        own_plan = own[i].plan if cheaper else plan
        cost, best = plan.objective_usd or 0.0, own_plan.objective_usd or 0.0
        bp = None if base is None else base.plans[i]
        alt = fleets.get(own[i].fleet)
        out.append(
            ScenarioOutcome(
                name=s.name,
                probability=s.probability,
                changes=list(s.changes),
                cost_usd=cost,
                own_usd=best,
                regret_usd=cost - best,
                base_usd=None if bp is None else bp.objective_usd,
                fleet_costs_usd=None if alt is None else [p and p.objective_usd for p in alt.plans],
                plan=plan,
                own_plan=own_plan,
                base_plan=bp,
            )
        )
    return out


def _assemble(
    scen: Sequence[Scenario],
    risk: Risk,
    own: Sequence[_Own],
    fleets: _Fleets,
    chosen: _Replan,
    how: str,
    joint: _Joint,
    clock: _Clock,
    gap: float,
) -> Plan:
    """The plan: the first scenario's realisation, every scenario's outcome, the totals."""
    probs = [s.probability for s in scen]
    outcomes = _outcomes(scen, own, fleets, chosen)
    costs = [o.cost_usd for o in outcomes]
    base = fleets.get(own[0].fleet)
    base_value = risk_value(base.costs(), probs, risk) if base and base.feasible else None
    figures = _totals(costs, probs, risk, base_value, [o.own_usd for o in outcomes])
    value = figures["risk_usd"] or 0.0
    low = _lower_bound(own, probs, risk, joint.bound)
    # relative to the plan's magnitude: a fleet that sells GPUs can have a negative cost
    rel = 1.0 if low is None else gap_to_bound(value, low)
    status = "optimal" if rel <= gap + 1e-9 else "feasible"
    first = outcomes[0].plan
    message = _message(status, gap, how, joint, len(scen), risk)
    message += "; seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in clock.spent.items())
    return first.model_copy(
        update={
            "totals": first.totals.model_copy(update=figures),
            "scenarios": outcomes,
            "risk": _terms(risk),
            "status": status,
            "gap": rel,
            "solve_seconds": sum(clock.spent.values()),
            "message": message,
        }
    )


def _message(status: str, gap: float, how: str, joint: _Joint, n: int, risk: Risk) -> str:
    """The plan's one-line account of its two-stage solve."""
    head = (
        f"optimal within the {gap:.2%} gap tolerance"
        if status == "optimal"
        else "the best two-stage plan found in the time limit, not proven optimal"
    )
    made = {
        "joint": "purchases from the two-stage model over the scenarios",
        "base": "the base forecast's own purchases (no other found was cheaper)",
        "alternative": "another forecast's own purchases (the two-stage model found none cheaper)",
    }[how]
    return (
        f"{head}; {n} scenarios, {risk.measure.replace('_', ' ')} cost; {made}, re-planned "
        "in every scenario with whole rented replicas; the gap is measured against the better "
        "of HiGHS's bound on the two-stage model (rentals fractional) and the scenarios' own "
        f"bounds ({joint.message})"
    )
