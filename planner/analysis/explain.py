"""Why this plan: which limits bind, what relaxing each is worth (re-solved), what the plan
would cost without each GPU type it buys (the buy margins of the workbook's Risks block), and
the duals of the LP left when the plan's integers are fixed.

The infeasible side (why there is no plan) is :mod:`planner.optimize.infeasible`; this module
borrows its re-solve helpers.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping

import pulp

from planner.inputs.catalog import GpuSpec
from planner.inputs.problem import Inputs
from planner.optimize.candidates import (
    Candidates,
    build_candidates,
)
from planner.optimize.infeasible import _fmt_usd, diagnose_infeasible
from planner.optimize.model import PlannerModel, build_model, dual_families, family_of, nid
from planner.optimize.model.families import CUT_FAMILIES
from planner.optimize.solve import solve_model
from planner.plan.data import Plan

# ------------------------------------------------------------------ a feasible plan: what binds

Progress = Callable[[str], None]
# ``planner explain``'s time limit bounds the whole command. The plan's solve gets what
# ``planner solve`` gives its solve at the same limit (:func:`planner.plan.make.solve_inputs`):
# the same plan, never a dearer one (with a fixed 60 % share it came back $67k dearer than
# solve's). The LP of the shadow prices keeps this share of the limit for the end, and the
# re-solves share what is left between the two.
DUALS_SHARE = 0.1
# A re-solve is not started with less than this many seconds for it (its line says so),
# and no solve gets less than MIN_SOLVE_S.
MIN_RESOLVE_S, MIN_SOLVE_S = 2.0, 0.5


@dataclasses.dataclass
class Explanation:
    """What binds in an optimal plan and what the limits are worth."""

    total_usd: float
    status: str
    limits: list[str]  # one line per limit: used / limit, binding or not
    whatif: list[str]  # re-solves: limit +10 %, each GPU type removed
    duals: list[str]  # LP duals with the integer decisions fixed
    gap: float | None = None
    binding: list[str] = dataclasses.field(default_factory=list)  # per family, at the optimum
    # where the limits and bindings are read: "at the optimum" only for a proven plan
    where: str = "at the optimum"


def _without_gpu(inputs: Inputs, cands: Candidates, g: str) -> tuple[Inputs, Candidates, list[str]]:
    gpus = {k: v for k, v in inputs.gpus.items() if k != g}
    offers = {k: o for k, o in inputs.offers.items() if o.gpu != g}
    prob = inputs.problem.model_copy(update={"gpus": list(gpus)})
    c = copy.copy(cands)
    c.train = {j: [x for x in cl if x.gpu != g] for j, cl in cands.train.items()}
    c.serve = {w: [x for x in cl if x.gpu != g] for w, cl in cands.serve.items()}
    c.offers = {k: o for k, o in cands.offers.items() if o.gpu != g}
    orphans = [n for n, cl in {**c.train, **c.serve}.items() if not cl]
    return dataclasses.replace(inputs, problem=prob, gpus=gpus, offers=offers), c, orphans


def _scaled(inputs: Inputs, key: str, factor: float) -> Inputs:
    p = inputs.problem
    if key == "capex":
        return dataclasses.replace(
            inputs,
            problem=p.model_copy(
                update={
                    "budget": p.budget.model_copy(update={"capex_usd": p.budget.capex_usd * factor})
                }
            ),
        )
    if key == "total":
        return dataclasses.replace(
            inputs,
            problem=p.model_copy(
                update={
                    "budget": p.budget.model_copy(update={"total_usd": p.budget.total_usd * factor})
                }
            ),
        )
    return dataclasses.replace(
        inputs,
        problem=p.model_copy(
            update={
                "site": p.site.model_copy(update={"power_cap_kw": p.site.power_cap_kw * factor})
            }
        ),
    )


# Constraint families whose right-hand side is a real quantity (demand, capacity, hours,
# money, kW), with what their dual prices: the registry's families with a dual meaning
# (:data:`planner.optimize.model.families.FAMILIES`). Families that only link a fixed binary
# to its continuous variable (train_slot, train_use, train_gpus, train_assign, licence, ...)
# are left out: with the integers fixed their duals price an artifact of the fixing.
DUAL_FAMILIES = dual_families()


def _family(name: str) -> str | None:
    """The dual family of a constraint name (its registered family, if that has a dual)."""
    fam = family_of(name)
    return fam if fam in DUAL_FAMILIES else None


def lp_duals(
    m: PlannerModel, top: int = 15, time_limit: float | None = None
) -> list[tuple[str, float, float]]:
    """``(constraint, dual, slack)`` of the LP left when every integer variable is fixed at its
    value in the solved MILP, for the constraint families of :data:`DUAL_FAMILIES`; sorted by
    |dual|, at most ``top``, and within a family one constraint per distinct dual value. The
    dual is the change of the total cost per unit of the constraint's right-hand side
    (purchases, owned replica counts and job choices held fixed; rented replicas free and
    fractional, so a demand's dual is the marginal rent per req/s). Only constraints on
    something the plan uses are listed (some variable of the row is non-zero): the cap of a
    reservation or offer the plan never touches may carry a dual of a degenerate LP, but
    relaxing it is worth nothing to this plan. Mutates ``m``: its integer variables become
    continuous, fixed at their values, except rented replicas, only relaxed."""
    rented = {id(v) for v in m.q.values()}
    for name in [n for n in m.prob.constraints if family_of(n) in CUT_FAMILIES]:
        del m.prob.constraints[name]  # cuts for whole replicas; rentals are relaxed here
    for v in m.prob.variables():
        if v.cat == pulp.LpInteger:
            if id(v) not in rented:
                v.lowBound = v.upBound = round(v.varValue or 0.0)
            v.cat = pulp.LpContinuous
    m.prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit))
    if m.prob.status != pulp.LpStatusOptimal:
        return []
    rows = []
    for name, c in m.prob.constraints.items():
        pi = c.pi
        if pi is None or abs(pi) < 1e-7 or _family(name) is None or not _touched(c):
            continue
        rows.append((name, float(pi), float(c.slack or 0.0)))
    rows.sort(key=lambda x: (-abs(x[1]), x[0]))
    out, seen = [], set()
    for name, pi, slack in rows:
        key = (_family(name), round(pi, 6))
        if key in seen:
            continue
        seen.add(key)
        out.append((name, pi, slack))
    return out[:top]


def _touched(c: pulp.LpConstraint) -> bool:
    """Whether the plan uses something a row holds: some variable of it is non-zero."""
    return any(abs(v.varValue or 0.0) > 1e-9 for v in c)


def _smallest_purchase(g: GpuSpec) -> tuple[float, float]:
    """(USD, IT kW) of the smallest addition to a fleet: one node of cards, in a free slot of
    a partial-fill server, or with its own server when servers come full."""
    usd, kw = g.node_gpus * g.purchase_usd.value, g.node_gpus * g.tdp_w.value / 1000
    if g.partial_fill:
        return usd, kw
    return usd + g.chassis_usd, kw + g.host_w / 1000


def _capex_limit_line(inputs: Inputs, plan: Plan) -> str:
    """budget_capex at the optimum: binding when what is left buys no further node."""
    budget = inputs.problem.budget.capex_usd
    node_cost = min(_smallest_purchase(g)[0] for g in inputs.gpus.values())
    used = plan.totals.capex_usd
    slack = budget - used
    return f"budget_capex: {_fmt_usd(used)} of {_fmt_usd(budget)} " + (
        "BINDING (not enough left for one more node)"
        if slack < node_cost
        else f"(slack {_fmt_usd(slack)})"
    )


def _total_limit_line(inputs: Inputs, plan: Plan) -> str | None:
    """budget_total at the optimum (None: no total budget); binding within $1 or 0.01 %."""
    budget = inputs.problem.budget.total_usd
    if budget is None:
        return None
    total = plan.totals.total_usd
    slack = budget - total
    return f"budget_total: {_fmt_usd(total)} of {_fmt_usd(budget)} " + (
        "BINDING" if slack <= max(1.0, 1e-4 * budget) else f"(slack {_fmt_usd(slack)})"
    )


def _power_limit_line(inputs: Inputs, plan: Plan) -> str | None:
    """power_cap at the optimum (None: no cap): the owned fleet's peak kW at the meter, and
    the months where the headroom is less than the smallest node draws."""
    site = inputs.problem.site
    if site.power_cap_kw is None:
        return None
    node = min(_smallest_purchase(g)[1] * site.pue for g in inputs.gpus.values())
    kw = {t: 0.0 for t in plan.months}
    for fm in plan.fleet:
        kw[fm.month] = kw.get(fm.month, 0.0) + fm.power_kw
    binding = [mo for mo, v in kw.items() if site.power_cap_kw - v < node]
    peak = max(kw.values(), default=0.0)
    return f"power_cap: peak {peak:,.1f} kW of {site.power_cap_kw:,.1f} kW " + (
        f"BINDING in {len(binding)} month(s) ({', '.join('power_cap_' + b.replace('-', '_') for b in binding[:3])}"
        + (", ..." if len(binding) > 3 else "")
        + ")"
        if binding
        else f"(slack {site.power_cap_kw - peak:,.1f} kW)"
    )


def _licence_line(inputs: Inputs) -> str | None:
    """The GeForce cards the site may not buy (None: there are none)."""
    site = inputs.problem.site
    consumer = [
        g for g, spec in inputs.gpus.items() if spec.consumer and not site.consumer_gpus_allowed
    ]
    if not consumer:
        return None
    return f"licence: {', '.join(consumer)} may not be bought (site.consumer_gpus_allowed: false)"


def _liquid_line(inputs: Inputs) -> str | None:
    """The liquid-cooled units the site may not buy (None: there are none)."""
    site = inputs.problem.site
    liquid = [
        g for g, spec in inputs.gpus.items() if spec.liquid_cooled and not site.liquid_cooling
    ]
    if not liquid:
        return None
    return (
        f"liquid cooling: {', '.join(liquid)} may not be bought (their servers or racks need "
        "liquid cooling; site.liquid_cooling: false)"
    )


def _limit_lines(inputs: Inputs, plan: Plan) -> list[str]:
    """One line per limit of the problem at the optimum: used of limit, binding or slack."""
    lines = [
        _capex_limit_line(inputs, plan),
        _total_limit_line(inputs, plan),
        _power_limit_line(inputs, plan),
        _licence_line(inputs),
        _liquid_line(inputs),
    ]
    return [x for x in lines if x is not None]


@dataclasses.dataclass(frozen=True)
class _Resolver:
    """Re-solves a variant of the problem; says how its cost (present value, what the
    optimizer minimizes) compares with the plan's."""

    total: float  # the plan's objective: present value of its cash less the residual, USD
    solver: str
    time_limit: float  # seconds for one re-solve, building its model included
    gap: float
    noise: float = 0.0  # the plan's own gap (a repaired plan's can exceed the solver's)
    relaxes: bool = False  # the variant only relaxes a limit: it cannot cost more
    # the plan's variable values by name: a variant that only relaxes a limit starts from it
    # (the plan keeps every row of the variant, so HiGHS holds it from its first node)
    plan_values: Mapping[str, float | None] | None = None

    def outcome(self, inputs: Inputs, cands: Candidates) -> str:
        """``PV $X (+$D, +P%)``, or no change beyond the solver gap, or no plan; a re-solve
        stopped by its time limit says so and gives the range its bound proves."""
        # Differences within the solver's gap are noise, not the worth of the change.
        tol = max(abs(self.total) * max(self.gap, self.noise), 1.0)
        t0 = time.perf_counter()
        mm = build_model(inputs, cands)
        left = max(MIN_SOLVE_S, self.time_limit - (time.perf_counter() - t0))
        start = self.plan_values if self.relaxes else None
        rr = solve_model(mm, solver=self.solver, time_limit=left, gap=self.gap, start=start)
        if not rr.has_solution:
            return f"no plan ({rr.status})"
        new = float(rr.objective or 0.0)
        d = new - self.total
        unproven = ""
        if rr.status == "feasible" and rr.gap is not None:
            low = new * (1 - rr.gap)
            unproven = (
                f"; re-solved for {rr.seconds:.0f} s, not proven: the cost without it is "
                f"between {_fmt_usd(low)} and {_fmt_usd(new)}"
            )
        if self.relaxes and d > tol and rr.status != "optimal":
            return (
                f"no cheaper plan found in {rr.seconds:.0f} s (relaxing a limit never costs "
                f"more: the re-solve's best, {_fmt_usd(new)}, is not proven)"
            )
        if abs(d) <= tol:
            return (
                f"PV {_fmt_usd(new)}: no change beyond the solver gap ({_fmt_usd(tol)})" + unproven
            )
        pct = f", {d / self.total:+.1%}" if self.total else ""
        sign = "+" if d >= 0 else "-"
        return f"PV {_fmt_usd(new)} ({sign}{_fmt_usd(abs(d))}{pct}){unproven}"


@dataclasses.dataclass(frozen=True)
class _Job:
    """One line of the re-solves: ``label -> outcome`` where ``variant`` gives the inputs and
    candidates to re-solve, or a ``line`` known without a re-solve."""

    label: str
    variant: Callable[[], tuple[Inputs, Candidates]] | None = None
    line: str | None = None
    relaxes: bool = False  # a limit raised or a rule relaxed: the plan cannot get dearer


def _limit_jobs(inputs: Inputs, cands: Candidates) -> list[_Job]:
    """Each limit of the problem raised by 10 %."""
    p = inputs.problem
    out = [
        _Job(
            f"budget_capex +10% ({_fmt_usd(p.budget.capex_usd * 1.1)})",
            lambda: (_scaled(inputs, "capex", 1.1), cands),
            relaxes=True,
        )
    ]
    if p.budget.total_usd is not None:
        out.append(
            _Job(
                f"budget_total +10% ({_fmt_usd(p.budget.total_usd * 1.1)})",
                lambda: (_scaled(inputs, "total", 1.1), cands),
                relaxes=True,
            )
        )
    if p.site.power_cap_kw is not None:
        out.append(
            _Job(
                f"power_cap +10% ({p.site.power_cap_kw * 1.1:,.1f} kW)",
                lambda: (_scaled(inputs, "power", 1.1), cands),
                relaxes=True,
            )
        )
    if _liquid_line(inputs) is not None:
        out.append(
            _Job(
                "with liquid cooling (site.liquid_cooling: true)",
                lambda: (_liquid(inputs), cands),
                relaxes=True,
            )
        )
    return out


def _liquid(inputs: Inputs) -> Inputs:
    """The problem on a site with direct liquid cooling (same physics, same candidates)."""
    p = inputs.problem
    site = p.site.model_copy(update={"liquid_cooling": True})
    return dataclasses.replace(inputs, problem=p.model_copy(update={"site": site}))


def _binding_caps(m: PlannerModel, tol: float = 1e-6) -> list[str]:
    """Offers the plan uses whose ``availability`` cap holds with equality somewhere in the
    solved model."""
    out: list[str] = []
    for oid, o in m.cands.offers.items():
        if o.max_gpus is None:
            continue
        prefix = nid("availability", oid) + "_"
        for name, c in m.prob.constraints.items():
            if (
                name.startswith(prefix)
                and c.value() is not None
                and abs(c.value()) <= tol * max(1, o.max_gpus)
                and _touched(c)
            ):
                out.append(oid)
                break
    return out


def _with_job(inputs: Inputs, name: str, **update: object) -> Inputs:
    p = inputs.problem
    train = [j.model_copy(update=update) if j.name == name else j for j in p.workloads.train]
    work = p.workloads.model_copy(update={"train": train})
    return dataclasses.replace(inputs, problem=p.model_copy(update={"workloads": work}))


def _bigger_cap(inputs: Inputs, cands: Candidates, oid: str) -> tuple[Inputs, Candidates]:
    """The problem with offer ``oid``'s availability cap doubled."""
    o = inputs.offers[oid]
    bigger = o.model_copy(update={"max_gpus": 2 * (o.max_gpus or 0)})
    c = copy.copy(cands)
    c.offers = {**cands.offers, oid: bigger}
    return dataclasses.replace(inputs, offers={**inputs.offers, oid: bigger}), c


def _capacity_jobs(inputs: Inputs, cands: Candidates, m: PlannerModel) -> list[_Job]:
    """Capacity rules relaxed one at a time: each binding offer cap the plan uses doubled,
    and per training job one provider relaxed to ``split`` and Ethernet allowed."""
    out = []
    for oid in _binding_caps(m)[:3]:
        cap = inputs.offers[oid].max_gpus or 0
        out.append(
            _Job(
                f"{oid} max_gpus {cap} -> {2 * cap} (binding)",
                lambda oid=oid: _bigger_cap(inputs, cands, oid),
                relaxes=True,
            )
        )
    for j in inputs.problem.workloads.train:
        if j.providers == "single":
            split = _with_job(inputs, j.name, providers="split")
            out.append(
                _Job(f"{j.name}: providers split", lambda split=split: (split, cands), None, True)
            )
        if not j.ethernet:
            eth = _with_job(inputs, j.name, ethernet=True)
            out.append(
                _Job(
                    f"{j.name}: ethernet allowed",
                    lambda eth=eth: (eth, build_candidates(eth)),
                    relaxes=True,
                )
            )
    return out


def _gpu_job(inputs: Inputs, cands: Candidates, g: str, used_gpus: set[str]) -> _Job:
    """The problem without GPU type ``g`` (neither bought nor rented): a re-solve when the
    plan uses ``g`` and every workload can run on another type, else the line why not."""
    tag = "used" if g in used_gpus else "unused"
    if len(inputs.gpus) == 1:
        return _Job("", line=f"without {g}: no GPU type left")
    if g not in used_gpus:
        return _Job("", line=f"without {g} ({tag}): no change (the plan does not use it)")
    pi, pc, orphans = _without_gpu(inputs, cands, g)
    if orphans:
        why = f"{', '.join(orphans)} cannot run on any other allowed GPU"
        return _Job("", line=f"without {g} ({tag}): no plan: {why}")
    return _Job(f"without {g} ({tag})", lambda: (pi, pc))


def _gpu_whatif(
    inputs: Inputs, cands: Candidates, g: str, used_gpus: set[str], rs: _Resolver
) -> str:
    """The line of :func:`_gpu_job`, re-solved by ``rs`` where it needs a re-solve."""
    job = _gpu_job(inputs, cands, g, used_gpus)
    if job.variant is None:
        return job.line or ""
    return f"{job.label} -> " + rs.outcome(*job.variant())


def _run_jobs(jobs: list[_Job], rs: _Resolver, deadline: float, say: Progress) -> list[str]:
    """Each job's line, in order, its re-solve given an equal share of what is left before
    ``deadline`` among the re-solves still to come (at most as many as get
    :data:`MIN_RESOLVE_S` each); one reached with less than that says it was not re-solved."""
    n = sum(1 for j in jobs if j.variant is not None)
    out, done = [], 0
    for j in jobs:
        if j.variant is None:
            out.append(j.line or "")
            continue
        left = deadline - time.perf_counter()
        # the first ones get their share: as many as the time left allows at the minimum
        share = left / max(1, min(n - done, int(left // MIN_RESOLVE_S)))
        done += 1
        if share < MIN_RESOLVE_S:
            out.append(
                f"{j.label} -> not re-solved: the time limit left {max(left, 0.0):.0f} s "
                f"for {n - done + 1} re-solve(s) (raise --time-limit)"
            )
            continue
        say(f"re-solving {done} of {n}: {j.label} ({share:.0f} s)")
        one = dataclasses.replace(rs, time_limit=share, relaxes=j.relaxes)
        out.append(f"{j.label} -> " + one.outcome(*j.variant()))
    return out


def _all_jobs(inputs: Inputs, cands: Candidates, m: PlannerModel, plan: Plan) -> list[_Job]:
    """The re-solves in the order they are worth: limits, GPU types, capacity rules."""
    used_gpus = {pu.gpu for pu in plan.purchases} | {r.gpu for r in plan.rentals}
    jobs = _limit_jobs(inputs, cands)
    jobs += [_gpu_job(inputs, cands, g, used_gpus) for g in inputs.gpus]
    return jobs + _capacity_jobs(inputs, cands, m)


def _where(status: str, gap: float | None) -> str:
    """Where the limits are read: at the optimum only for a proven plan.

    >>> _where("optimal", 0.0005), _where("feasible", 0.042)
    ('at the optimum', 'in this plan (feasible, gap 4.2 %: not proven optimal)')
    """
    if status == "optimal":
        return "at the optimum"
    gap_text = "no bound" if gap is None else f"gap {gap:.1%}".replace("%", " %")
    return f"in this plan ({status}, {gap_text}: not proven optimal)"


def explain_plan(
    inputs: Inputs,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    resolve: bool = True,
    top: int = 15,
    progress: Progress | None = None,
    started: float | None = None,
) -> Explanation:
    """Solve ``inputs``; say which limits bind and what relaxing each is worth.

    ``time_limit`` (None: the problem's) bounds the whole call from ``started`` (a
    ``time.perf_counter()`` instant, default now; the CLI passes its own start, as ``planner
    solve`` does): the plan's solve gets what ``planner solve`` gives it at that limit, so
    the plan is solve's; the duals' LP keeps :data:`DUALS_SHARE` of the limit for the end,
    and the re-solves share what is left between them (:func:`_run_jobs`). ``progress`` is
    told each step as it starts. Raises :class:`~planner.base.errors.InfeasibleError` (with
    the diagnosis) when there is no plan.
    """
    from planner.base.errors import InfeasibleError, SolverError
    from planner.plan.extract import extract_plan
    from planner.plan.make import solve_inputs, solver_seconds

    started = time.perf_counter() if started is None else started
    say = progress or (lambda _line: None)
    p = inputs.problem
    limit = time_limit if time_limit is not None else p.solver.time_limit_s
    rel_gap = gap if gap is not None else p.solver.gap
    deadline = started + limit
    # the smallest model's reserve after the solve: the most the solver can be given
    most = solver_seconds(limit, deadline, time.perf_counter(), columns=0)
    say(f"solving the plan (at most {most:.0f} s, as `planner solve` at this time limit)")
    m, res = solve_inputs(inputs, solver, limit, rel_gap, deadline=deadline)
    cands = m.cands
    if res.status == "infeasible":
        say("infeasible: diagnosing")
        raise InfeasibleError(
            "infeasible: no plan meets every constraint",
            diagnose_infeasible(inputs, solver=solver, cands=cands, time_limit=time_limit),
        )
    if not res.has_solution:
        raise SolverError(f"{res.solver}: {res.status}: {res.message}")
    plan = extract_plan(m, res)
    whatif: list[str] = []
    if resolve:
        # variants are compared on what the optimizer minimizes: the present value
        rs = _Resolver(float(res.objective or plan.totals.total_usd), solver, limit, rel_gap)
        values = {v.name: v.varValue for v in m.prob.variables()}
        rs = dataclasses.replace(rs, noise=res.gap or 0.0, plan_values=values)
        jobs = _all_jobs(inputs, cands, m, plan)
        whatif = _run_jobs(jobs, rs, deadline - DUALS_SHARE * limit, say)
    binding = binding_families(m)
    say("shadow prices (the LP with the plan's integers fixed)")
    lp_s = max(MIN_SOLVE_S, deadline - time.perf_counter())
    duals = [
        f"{name}: {pi:+,.4g} ({DUAL_FAMILIES[_family(name)]})"
        for name, pi, _ in lp_duals(m, top, time_limit=lp_s)
    ]
    limits = _limit_lines(inputs, plan)
    where = _where(res.status, res.gap)
    total = plan.totals.total_usd
    return Explanation(total, res.status, limits, whatif, duals, res.gap, binding, where)


def binding_families(m: PlannerModel, tol: float = 1e-6) -> list[str]:
    """Per constraint family: how many constraints hold with equality in the solved model
    (with some variable non-zero), e.g. ``capacity: 40 of 132 binding (e.g. ...)``."""
    fams: dict[str, list[int]] = {}
    example: dict[str, str] = {}
    for name, c in m.prob.constraints.items():
        fam = _family(name)
        if fam is None:
            continue
        val = c.value()
        if val is None:
            continue
        scale = max(1.0, abs(c.constant) + sum(abs(a * (v.varValue or 0.0)) for v, a in c.items()))
        # tight, and not trivially so (0 <= 0 for a GPU type or job choice the plan does not use)
        tight = abs(val) <= tol * scale and any(abs(v.varValue or 0.0) > 1e-9 for v in c)
        counts = fams.setdefault(fam, [0, 0])
        counts[1] += 1
        if tight:
            counts[0] += 1
            example.setdefault(fam, name)
    return [
        f"{fam}: {b} of {n} binding" + (f" (e.g. {example[fam]})" if fam in example else "")
        for fam, (b, n) in sorted(fams.items())
    ]


# A margin's re-solve is not worth starting with less than this many seconds for it.
MIN_MARGIN_S = 1.0


def buy_margins(
    inputs: Inputs, plan: Plan, solver: str = "auto", time_limit: float | None = None
) -> list[str]:
    """How close buying is to the next-best plan: for each GPU type the plan buys, the line
    ``planner explain`` prints for the problem without that type (re-solved), e.g.
    ``without a100-pcie-80gb (used) -> total $496,672 (+$5,538, +1.1%)``.

    ``time_limit``: seconds for all of it together, building included (``planner solve`` gives
    what its own time limit leaves); each re-solve gets an equal share of what is left when it
    starts; None gives each the problem's solver time limit. A type reached with less than
    :data:`MIN_MARGIN_S` left is not computed, and its line says so and where to get it."""
    bought = list(dict.fromkeys(p.gpu for p in plan.purchases))
    if not bought:
        return []
    opts = inputs.problem.solver
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    if deadline is not None and time_limit / len(bought) < MIN_MARGIN_S:
        return [_margin_not_computed(max(time_limit, 0.0), len(bought))]
    cands = build_candidates(inputs)
    total = plan.objective_usd if plan.objective_usd is not None else plan.totals.total_usd
    used = {p.gpu for p in plan.purchases} | {r.gpu for r in plan.rentals}
    lines = []
    for i, g in enumerate(bought):
        per_type = opts.time_limit_s
        if deadline is not None:
            per_type = (deadline - time.perf_counter()) / (len(bought) - i)
            if per_type < MIN_MARGIN_S:
                lines.append(f"without {g}: " + _margin_not_computed(per_type, 1))
                continue
        rs = _Resolver(total, solver, per_type, opts.gap)
        lines.append(_gpu_whatif(inputs, cands, g, used, rs))
    return lines


def _margin_not_computed(seconds: float, solves: int) -> str:
    """The Risks line of margins the time limit left no room for."""
    return (
        f"not computed: the time limit left {max(seconds, 0.0):.0f} s for {solves} re-solve(s); "
        "`planner explain PROBLEM` prints what the plan would cost without each GPU type it buys."
    )


def margins_for(
    inputs: Inputs, plan: Plan, solver: str, time_limit: float, max_gap: float
) -> list[str]:
    """The buy margins ``planner solve`` writes: :func:`buy_margins` in ``time_limit`` when
    the plan's own gap is at most ``max_gap``; above it the comparison would be noise (both
    plans are that far from proven), and the line says so."""
    if plan.scenarios:
        return [
            "not computed for a two-stage plan (scenarios): a re-solve without a GPU type would "
            "re-plan every scenario; the Scenarios sheet says what each forecast's own "
            "purchases would cost instead."
        ]
    if plan.purchases and (plan.gap is None or plan.gap > max_gap):
        gap = "unknown" if plan.gap is None else f"{plan.gap:.1%}"
        return [
            f"not computed: the plan is not proven within {max_gap:.0%} (gap {gap}), so a "
            "re-solve without a GPU type would compare two unproven plans; `planner explain "
            "PROBLEM --time-limit S` with a longer limit prints it."
        ]
    return buy_margins(inputs, plan, solver=solver, time_limit=time_limit)
