"""Stage 4: MIP starts for the solve. :func:`mip_start` solves the LP relaxation with HiGHS and
sets the model to the cheaper of the best LP-rounded plan (:mod:`planner.optimize.start`, which
re-solves the LP with fleets fixed through :class:`_Relaxation`) and the all-rental plan
(:func:`rental_start`); CBC starts from the all-rental plan on models too small for the LP
search. Every start is a whole, checked plan."""

from __future__ import annotations

import math
import time

import pulp

from planner.base import tolerances as tol
from planner.optimize.backends import _BulkHiGHS, _run_cancellable
from planner.optimize.model import PlannerModel
from planner.physics.demand import HOURS_PER_MONTH


def mip_start(
    m: PlannerModel, threads: int, lp_seconds: float = 60.0, deadline: float | None = None
) -> tuple[bool, float | None, float, str]:
    """Set ``m``'s variables to the cheaper of two feasible plans, the best LP-rounded one
    (:func:`planner.optimize.start.best_rounded_start`, whose search runs until ``deadline``
    after the LP) and the all-rental one (:func:`rental_start`).

    Returns (a start is set, a lower bound, the LP's seconds, the bound's kind). The bound is
    the LP optimum,
    or when the LP did not finish :func:`planner.optimize.bound.separable_bound` (None where that is
    not computed); the gap uses it when the MIP's own root has not finished. On the
    50-workload, 36-month benchmark: LP 13 s ($2.66M), searched plan $3.88M against the
    all-rental $7.79M and HiGHS's own first plan of $20.8M after 30 s.
    """
    import highspy

    from planner.optimize.start import best_rounded_start

    t0 = time.perf_counter()
    m.prob.solve(_BulkHiGHS(msg=False, mip=False, threads=threads, timeLimit=lp_seconds))
    lp_s = time.perf_counter() - t0
    # HiGHS's own status: PuLP reads an LP stopped at its time limit as "Optimal", and the
    # objective of that interrupted point is no bound at all (a 200-workload model reported
    # "optimal, 0 %" on it)
    solved = m.prob.solverModel.getModelStatus() == highspy.HighsModelStatus.kOptimal
    bound = pulp.value(m.prob.objective) if solved else None
    lp = {v.name: float(v.varValue or 0.0) for v in m.prob.variables()}
    if bound is None:  # the LP did not finish: a bound that needs no LP (seconds, not minutes)
        from planner.optimize.bound import separable_bound

        bound = separable_bound(m)
    kind = "the LP relaxation" if solved else "the separable bound (planner/optimize/bound.py)"
    # An LP stopped at its limit still leaves a point to round (the rounded plan is checked
    # like any other): on the 200-workload benchmark the LP does not finish in 60 s, and
    # without a start HiGHS found no plan at all in the time left.
    deadline = time.perf_counter() if deadline is None else deadline
    plans = []

    relax = _Relaxation(m, deadline) if solved else None
    if best_rounded_start(m, lp, deadline, relax) is not None:
        plans.append(
            (pulp.value(m.prob.objective), {v.name: v.varValue for v in m.prob.variables()})
        )
    if rental_start(m) and all(c.valid(tol.INTEGRALITY) for c in m.prob.constraints.values()):
        plans.append(
            (pulp.value(m.prob.objective), {v.name: v.varValue for v in m.prob.variables()})
        )
    if not plans:
        return False, bound, lp_s, kind
    _, best = min(plans, key=lambda p: p[0])
    for v in m.prob.variables():
        v.varValue = best[v.name]
    return True, bound, lp_s, kind


class _Relaxation:
    """The LP just solved by HiGHS (``m.prob.solverModel``), re-solved with some variables
    fixed: ``relax({name: value})`` returns every variable's LP value, or None if HiGHS does
    not reach an optimum before ``deadline``. HiGHS keeps its basis between calls, so a
    re-solve with a different fleet takes a fraction of the first solve."""

    def __init__(self, m: PlannerModel, deadline: float) -> None:
        self.highs = m.prob.solverModel
        self.names = [v.name for v in m.prob.variables()]
        self.index = {name: i for i, name in enumerate(self.names)}
        lp = self.highs.getLp()
        self.lower, self.upper = list(lp.col_lower_), list(lp.col_upper_)
        self.deadline = deadline
        self.fixed: list[int] = []
        # presolve would rebuild the problem; off, HiGHS re-solves from its last basis
        self.highs.setOptionValue("presolve", "off")

    def __call__(self, fixed: dict[str, float]) -> dict[str, float] | None:
        import highspy

        left = self.deadline - time.perf_counter()
        if left <= 0:
            return None
        idx = sorted({*self.fixed, *(self.index[n] for n in fixed)})
        lo = [float(fixed.get(self.names[i], self.lower[i])) for i in idx]
        up = [float(fixed.get(self.names[i], self.upper[i])) for i in idx]
        self.highs.changeColsBounds(len(idx), idx, lo, up)
        self.fixed = [self.index[n] for n in fixed]
        # HiGHS's clock runs across the runs of one Highs object: the limit is on its total
        self.highs.setOptionValue("time_limit", self.highs.getRunTime() + left)
        # a thread of its own, as every HiGHS run (planner.optimize.backends), and an
        # interrupt reaches the planner mid-solve
        _run_cancellable("highs", self.highs.run, self.highs.cancelSolve, left)
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        return dict(zip(self.names, self.highs.getSolution().col_value, strict=True))


def rental_start(m: PlannerModel) -> bool:
    """Set every variable to an all-rental plan (a MIP start); False if there is none to hand.

    Nothing is bought; each serving workload rents one cheapest uncapped non-reserved pair
    (per req/s) in every month-slice, ``max(1 + R, ceil((D / max_load + R mu) / mu))``
    replicas of it; each training job runs its first candidate on an unrestricted on-demand
    offer, a month at a time from its window's start. CBC on large models may find no plan of
    its own within the time limit; with this start it always has one (it checks the start and
    drops it if a budget makes it infeasible).
    """
    serve = _serve_start_pairs(m)
    train = _train_start_offers(m)
    if serve is None or train is None:
        return False
    for v in m.prob.variables():
        v.varValue = 0.0
    specs = {w.name: w for w in m.inputs.problem.workloads.serve}
    for w, (c, oid) in serve.items():
        R, load = specs[w].redundancy, specs[w].slo.max_load
        for t in m.cands.active[w]:
            if R:
                _start_largest(m, w, c, t)
            for s in range(len(m.cands.slices)):
                need = max(0.0, m.cands.demand[(w, t, s)]) / load + R * c.rate_rps
                count = max(1 + R, math.ceil(need / c.rate_rps * (1 + 1e-9)))
                m.q[(w, c.key, oid, t, s)].varValue = float(count)
    for job, (key, oid, f) in train.items():
        m.y[(job, key)].varValue = 1.0
        if (job, m.cands.offers[oid].provider) in m.loc:
            m.loc[(job, m.cands.offers[oid].provider)].varValue = 1.0
        left = m.train_cand(job, key).wall_hours / f  # wall hours to rent
        for t in m.cands.window[job]:  # from the window's start, a month at a time
            m.r[(job, key, oid, t)].varValue = min(left, HOURS_PER_MONTH)
            left -= min(left, HOURS_PER_MONTH)
    return True


def _serve_start_pairs(m: PlannerModel) -> dict | None:
    """Per serving workload, its cheapest (candidate, offer) per req/s among the pairs with a
    continuous ``q`` (uncapped, not reserved); None if a workload has none."""
    offers = m.cands.offers
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    best: dict[str, tuple[float, str, str]] = {}
    for w, key, oid, t, s in m.q:
        o = offers[oid]
        if t != m.cands.active[w][0] or s != 0 or o.kind == "reserved" or o.max_gpus is not None:
            continue
        c = index[(w, key)]
        cand = (o.usd_per_gpu_hour * c.tp / c.rate_rps, key, oid)
        if w not in best or cand < best[w]:
            best[w] = cand
    if any(w not in best for w in m.cands.serve):
        return None
    return {w: (index[(w, key)], oid) for w, (_, key, oid) in best.items()}


def _start_largest(m: PlannerModel, w: str, c, t: int) -> None:
    """The start's spare term: the one replica type in use is the largest."""
    from planner.optimize.model import spare_flags

    if (w, t) in m.largest:
        m.largest[(w, t)].varValue = c.rate_rps
    for on in spare_flags(m, w, c.key, t):
        on.varValue = 1.0


def _train_start_offers(m: PlannerModel) -> dict | None:
    """Per training job: (first candidate, an unrestricted on-demand offer, its progress per
    wall hour) whose run fits in the window; None if a job has none."""
    from planner.optimize.candidates import offer_restricted, progress_per_wall_hour

    specs = {j.name: j for j in m.inputs.problem.workloads.train}
    out = {}
    for job, key, oid, _t in m.r:
        o = m.cands.offers[oid]
        if job in out or o.kind != "on_demand" or offer_restricted(o):
            continue
        c = m.train_cand(job, key)
        f = progress_per_wall_hour(c, specs[job], o)
        if f and c.wall_hours / f <= m.cands.window_hours[job]:
            out[job] = (key, oid, f)
    if any(job not in out for job, cl in m.cands.train.items() if cl):
        return None
    return out
