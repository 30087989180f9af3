"""Why is a problem infeasible? Re-solve with limits relaxed, and look at each workload.

:func:`diagnose_infeasible` returns plain-language lines:

1. With every limit removed (capex budget, total budget, power cap) is there a plan? If not,
   the cause is structural: each workload is tried alone and, for one that cannot be placed,
   every GPU that could run it is listed with why it can be neither bought (licence:
   GeForce cards without ``site.consumer_gpus_allowed``) nor rented (no trusted offer for
   it, offers filtered out by ``offers.providers``/``offers.marketplaces``, instances too
   small for the tensor-parallel group or the training job, availability caps, reserved
   terms longer than the horizon, spot not allowed).
2. Otherwise each limit is probed on its own: the limit is removed (the others kept) and the
   smallest value of that limit that admits a plan is found by minimizing it (capex spend,
   total cost, peak kW of the owned fleet). A limit below that value is reported with the
   smallest value that would do.
3. If no single limit is to blame, the limits act together; the lines say what each needs on
   its own and that relaxing any of them helps.

Relaxed problems are built from modified inputs (not by deleting constraints from a built
model) so that bounds the model derives from the limits are relaxed too. Candidates (the
physics) are computed once.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable

import pulp

from planner.candidates import (
    Candidates,
    TrainCandidate,
    build_candidates,
    offer_wall_hours,
    rental_gpus,
)
from planner.catalog import GpuSpec, Offer, load_offers
from planner.demand import HOURS_PER_MONTH
from planner.model import PlannerModel, build_model, nid, nominal_total
from planner.plan import Plan
from planner.problem import Inputs, TrainJob, month_index
from planner.solve import solve_model

NO_LIMIT_USD = 1e15  # a budget that never binds (finite: the model divides by it)
PROBE_TIME_LIMIT_S = 60.0


@dataclasses.dataclass(frozen=True)
class Probe:
    """Outcome of one re-solve: ``value`` is the minimum found (None: no plan)."""

    value: float | None
    exact: bool  # solved to optimality (else ``value`` is an upper bound or unknown)
    status: str


def relaxed(
    inputs: Inputs,
    capex: bool = False,
    total: bool = False,
    power: bool = False,
    workloads: set[str] | None = None,
) -> Inputs:
    """``inputs`` with the named limits removed and (optionally) only some workloads kept."""
    p = inputs.problem
    budget = p.budget.model_copy(
        update={
            **({"capex_usd": NO_LIMIT_USD} if capex else {}),
            **({"total_usd": None} if total else {}),
        }
    )
    site = p.site.model_copy(update={"power_cap_kw": None} if power else {})
    update: dict = {"budget": budget, "site": site}
    if workloads is not None:
        update["workloads"] = p.workloads.model_copy(
            update={
                "train": [j for j in p.workloads.train if j.name in workloads],
                "serve": [w for w in p.workloads.serve if w.name in workloads],
            }
        )
    return dataclasses.replace(inputs, problem=p.model_copy(update=update))


def only_workloads(cands: Candidates, names: set[str]) -> Candidates:
    c = copy.copy(cands)
    c.train = {k: v for k, v in cands.train.items() if k in names}
    c.serve = {k: v for k, v in cands.serve.items() if k in names}
    c.window = {k: v for k, v in cands.window.items() if k in names}
    c.window_hours = {k: v for k, v in cands.window_hours.items() if k in names}
    c.active = {k: v for k, v in cands.active.items() if k in names}
    c.demand = {k: v for k, v in cands.demand.items() if k[0] in names}
    return c


def _peak_kw_objective(m: PlannerModel) -> None:
    site = m.inputs.problem.site
    peak = pulp.LpVariable("diagnose_peak_kw", lowBound=0)
    for t in range(len(m.cands.months)):
        terms: dict[pulp.LpVariable, float] = defaultdict(float)  # a full server's buy var
        for g, gpu in m.inputs.gpus.items():  # carries both its cards' and its host's kW
            card_kw, server_kw = gpu.tdp_w.value * site.pue / 1000, gpu.host_w * site.pue / 1000
            for v, coef in m.own[(g, t)].items():
                terms[v] += coef * card_kw
            for tau in range(t + 1):
                terms[m.buy[(g, tau)]] += server_kw
        m.prob += pulp.LpAffineExpression(dict(terms)) - peak <= 0, f"diagnose_peak_kw_{t}"
    m.prob.setObjective(pulp.LpAffineExpression([(peak, 1.0)]))


def minimize(
    inputs: Inputs,
    cands: Candidates,
    objective: str,
    solver: str = "auto",
    time_limit: float | None = None,
) -> Probe:
    """Minimize ``capex`` | ``total`` (undiscounted) | ``npv`` (the plan's objective) |
    ``power_kw`` | ``none`` (feasibility) on ``inputs``."""
    m = build_model(inputs, cands)
    if objective == "capex":
        m.prob.setObjective(m.cost_terms["capex"])
    elif objective == "total":  # what budget.total_usd caps: undiscounted spend
        m.prob.setObjective(pulp.LpAffineExpression(nominal_total(m)))
    elif objective == "npv":
        pass  # the model's own objective
    elif objective == "power_kw":
        _peak_kw_objective(m)
    elif objective == "none":
        m.prob.setObjective(pulp.LpAffineExpression())
    else:  # pragma: no cover - programming error
        raise ValueError(objective)
    limit = time_limit or min(inputs.problem.solver.time_limit_s, PROBE_TIME_LIMIT_S)
    res = solve_model(m, solver=solver, time_limit=limit, gap=1e-6)
    if not res.has_solution:
        return Probe(None, res.status == "infeasible", res.status)
    return Probe(float(res.objective or 0.0), res.status == "optimal", res.status)


# ------------------------------------------------------------------ structural explanations


def _untrusted_offers(inputs: Inputs, gpu: str) -> list[str]:
    """Why offers for ``gpu`` in the problem's offers files are not trusted, summarized."""
    p = inputs.problem
    by_reason: dict[str, set[str]] = {}
    for path in inputs.offer_files:
        try:
            offers = load_offers(path)
        except Exception:  # noqa: BLE001 - only for a hint; the file loaded before
            continue
        for o in offers.values():
            if o.gpu != gpu or o.id in inputs.offers:
                continue
            if o.marketplace and not p.offers.marketplaces:
                reason = "marketplace offers (offers.marketplaces: false)"
            elif p.offers.providers is not None and o.provider not in p.offers.providers:
                reason = "providers not in offers.providers"
            else:
                continue
            by_reason.setdefault(reason, set()).add(f"{o.provider}:{o.id}")
    out = []
    for reason, ids in sorted(by_reason.items()):
        provs = sorted({i.split(":")[0] for i in ids})
        out.append(f"{len(ids)} from {reason}: {', '.join(provs)}")
    return out


def _buy_reason(inputs: Inputs, gpu_id: str) -> str | None:
    """Why ``gpu_id`` cannot be bought at all (None: it can be, limits aside)."""
    gpu = inputs.gpus[gpu_id]
    if gpu.consumer and not inputs.problem.site.consumer_gpus_allowed:
        return (
            f"{gpu_id} is a GeForce (consumer) card: its licence forbids datacenter use, so it "
            "cannot be bought (site.consumer_gpus_allowed: false)"
        )
    return None


def _offer_summary(inputs: Inputs, gpu_id: str, eligible: Callable, why_not: Callable) -> str:
    offers = [o for o in inputs.offers.values() if o.gpu == gpu_id]
    hidden = _untrusted_offers(inputs, gpu_id)
    if not offers:
        text = f"no trusted rental offer rents {gpu_id}"
        if hidden:
            text += " (filtered out: " + "; ".join(hidden) + ")"
        return text
    good = [o for o in offers if eligible(o)]
    if good:
        capped = [o for o in good if o.max_gpus is not None]
        if len(capped) == len(good):
            total = sum(o.max_gpus for o in capped)
            return f"the offers that fit are capped at {total} GPUs in all ({', '.join(o.id for o in capped[:3])})"
        return f"{len(good)} rental offer(s) fit"
    reasons = sorted({why_not(o) for o in offers})
    return f"none of the {len(offers)} trusted offers for {gpu_id} fits: " + "; ".join(reasons[:3])


def _largest_instance(inputs: Inputs, gpu_id: str) -> int:
    """Most GPUs in one instance of any trusted offer for ``gpu_id`` (0: no offer)."""
    return max((o.gpus_per_instance for o in inputs.offers.values() if o.gpu == gpu_id), default=0)


def _neither_buy_nor_rent(inputs: Inputs, gpu_id: str, rent: str) -> str:
    """Why ``gpu_id`` cannot be bought (when it cannot), then ``rent``: why not rented."""
    buy = _buy_reason(inputs, gpu_id)
    return (buy + "; and " if buy else "") + rent


def _serve_gpu_line(inputs: Inputs, gpu_id: str, tps: list[int]) -> str:
    """Why a serving workload that ``gpu_id`` can run at tensor-parallel sizes ``tps`` cannot
    run on it: it cannot be bought, and no offer rents instances of it a replica fits in."""
    p = inputs.problem
    T = p.horizon.months
    biggest = _largest_instance(inputs, gpu_id)

    def eligible(o: Offer) -> bool:
        return (
            any(o.gpus_per_instance >= tp for tp in tps)
            and (o.kind != "spot" or p.offers.spot_for_serving)
            and (o.kind != "reserved" or (o.term_months or 1) <= T)
        )

    def why_not(o: Offer) -> str:
        if o.kind == "spot" and not p.offers.spot_for_serving:
            return "spot offers are not used for serving (offers.spot_for_serving: false)"
        if o.kind == "reserved" and (o.term_months or 1) > T:
            return f"a reserved term is longer than the {T}-month horizon"
        return f"instances hold at most {biggest} GPUs, a replica needs {min(tps)} in one instance"

    rent = _offer_summary(inputs, gpu_id, eligible, why_not)
    tp_text = "/".join(f"tp{t}" for t in tps)
    return f"{gpu_id} ({tp_text}) meets the SLO, but " + _neither_buy_nor_rent(inputs, gpu_id, rent)


def _train_gpu_line(inputs: Inputs, j: TrainJob, gpu_id: str, cl: list[TrainCandidate]) -> str:
    """Why training job ``j``, which fits its window on ``gpu_id`` in the configurations
    ``cl``, cannot run on it: it cannot be bought, and no offer rents enough of it."""
    kmin = min(c.gpus for c in cl)
    biggest = _largest_instance(inputs, gpu_id)

    def eligible(o: Offer) -> bool:
        return any(
            o.kind != "reserved"
            and o.gpus_per_instance >= min(c.gpus, 8)
            and offer_wall_hours(c, j, o) is not None
            and (o.max_gpus is None or rental_gpus(c.gpus, o) <= o.max_gpus)
            and (o.kind != "spot" or (j.spot.allowed and j.spot.max_share >= 1.0))
            for c in cl
        )

    def why_not(o: Offer) -> str:
        if o.kind == "reserved":
            return "reserved offers are not used for training"
        if o.gpus_per_instance < min(kmin, 8):
            return (
                f"instances hold at most {biggest} GPUs; a {kmin}-GPU job needs instances of at "
                f"least {min(kmin, 8)}"
            )
        if o.max_gpus is not None and rental_gpus(kmin, o) > o.max_gpus:
            return f"offers cap availability below the {kmin} GPUs the job needs"
        if all(offer_wall_hours(c, j, o) is None for c in cl):
            return (
                f"a {kmin}-GPU job spans several instances and the offers state no fabric made "
                "for multi-node training (set ethernet: true to allow Ethernet)"
            )
        return f"spot can carry at most {j.spot.max_share:.0%} of the job (spot.max_share)"

    sizes = ", ".join(f"x{c.gpus} {c.wall_hours:,.0f} h" for c in cl)
    rent = _offer_summary(inputs, gpu_id, eligible, why_not)
    return f"{gpu_id} ({sizes}) fits the window, but " + _neither_buy_nor_rent(inputs, gpu_id, rent)


def fabric_notes(inputs: Inputs, cands: Candidates) -> list[str]:
    """Training jobs that no trusted offer can carry across instances (none states a fabric
    made for training for a GPU the job fits on), so they can only run on owned GPUs."""
    lines = []
    specs = {j.name: j for j in inputs.problem.workloads.train}
    for job, cl in cands.train.items():
        j, multi = specs[job], [c for c in cl if c.gpus > 8]
        if (
            not multi
            or not cl
            or any(c.fabric_hours for c in multi)
            or any(c.gpus <= 8 for c in cl)
        ):
            continue
        gpus = sorted({c.gpu for c in multi})
        offers = [o for o in inputs.offers.values() if o.gpu in gpus and o.kind != "reserved"]
        stated = sorted({f"{o.provider} {o.fabric or 'not stated'}" for o in offers})
        lines.append(
            f"training job {job!r}: needs {min(c.gpus for c in multi)}+ GPUs across instances, "
            f"and no trusted offer for {', '.join(gpus)} has a fabric made for multi-node "
            f"training (fabrics: {'; '.join(stated[:6]) or 'no offers'}); so it can only run on "
            "owned GPUs. Allow a provider with InfiniBand, RoCE, EFA or TCPX (catalogs/fabrics.yaml, "
            "cluster products in catalogs/offers-manual.yaml), state an offer's fabric "
            "(overrides.offers.<id>.fabric), or accept Ethernet's slowdown with "
            + ("ethernet: true" if not j.ethernet else "a faster fabric (ethernet: true is set)")
        )
    return lines


def explain_workload(inputs: Inputs, cands: Candidates, name: str) -> str:
    """Why one workload, alone and without limits, has no plan."""
    p = inputs.problem
    if name in cands.serve:
        w = next(x for x in p.workloads.serve if x.name == name)
        parts = [
            _serve_gpu_line(inputs, g, sorted(c.tp for c in cands.serve[name] if c.gpu == g))
            for g in sorted({c.gpu for c in cands.serve[name]})
        ]
        return f"serving workload {w.name!r} cannot be placed: " + " | ".join(parts)
    j = next(x for x in p.workloads.train if x.name == name)
    parts = [
        _train_gpu_line(inputs, j, g, [c for c in cands.train[name] if c.gpu == g])
        for g in sorted({c.gpu for c in cands.train.get(name, [])})
    ]
    a = month_index(p.horizon.start, j.window.start)
    b = month_index(p.horizon.start, j.window.deadline)
    return (
        f"training job {j.name!r} ({j.window.start}..{j.window.deadline}, {(b - a + 1) * HOURS_PER_MONTH:,.0f} h) "
        "cannot be placed: " + " | ".join(parts)
    )


# ------------------------------------------------------------------ the diagnosis


def _fmt_usd(x: float) -> str:
    return f"${x:,.0f}"


def diagnose_infeasible(
    inputs: Inputs,
    solver: str = "auto",
    cands: Candidates | None = None,
    time_limit: float | None = None,
) -> list[str]:
    """Lines saying why ``inputs`` has no plan and what would fix it."""
    cands = cands or build_candidates(inputs)
    lines = _without_candidates(cands)
    if lines:
        return lines

    def probe(inp: Inputs, objective: str, c: Candidates = cands) -> Probe:
        return minimize(inp, c, objective, solver, time_limit)

    free = probe(relaxed(inputs, capex=True, total=True, power=True), "none")
    if free.value is None:
        return _unplaceable(inputs, cands, probe, free)
    spec = _limit_spec(inputs)
    unlimited: dict[str, Probe] = {}  # what each limit needs when no limit applies

    def need_alone(key: str) -> Probe:
        if key not in unlimited:
            unlimited[key] = probe(relaxed(inputs, True, True, True), spec[key][0])
        return unlimited[key]

    lines = _limits_too_small(inputs, spec, probe, need_alone)
    if lines:
        return lines + fabric_notes(inputs, cands)
    return _limits_together(spec, need_alone)


def _without_candidates(cands: Candidates) -> list[str]:
    """One line per workload that no allowed GPU can run (with each GPU's reason)."""
    lines = []
    for n, cl in {**cands.train, **cands.serve}.items():
        if not cl:
            reasons = [f"{d.gpu}: {d.reason}" for d in cands.dropped if d.workload == n]
            lines.append(f"workload {n!r}: no allowed GPU can run it ({'; '.join(reasons)})")
    return lines


def _unplaceable(inputs: Inputs, cands: Candidates, probe, free: Probe) -> list[str]:
    """No plan even without budgets and power cap: which workloads cannot be placed alone."""
    if not free.exact:
        return [
            f"could not decide feasibility without limits ({free.status}); raise solver.time_limit_s"
        ]
    lines = []
    for n in list(cands.train) + list(cands.serve):
        alone = probe(
            relaxed(inputs, True, True, True, workloads={n}), "none", only_workloads(cands, {n})
        )
        if alone.value is None:
            lines.append(explain_workload(inputs, cands, n))
    if not lines:
        lines.append(
            "each workload can be placed alone, but not all together: they compete for "
            "capped rental offers (max_gpus) or reserved capacity; allow more GPU types or offers"
        )
    return lines


def _limit_spec(inputs: Inputs) -> dict[str, tuple]:
    """The limits the problem sets: key -> (objective to minimize, limit, label, format)."""
    p = inputs.problem
    spec = {
        "capex": (
            "capex",
            p.budget.capex_usd,
            "capex budget too small: budget.capex_usd",
            _fmt_usd,
        ),
        "total": (
            "total",
            p.budget.total_usd,
            "total budget too small: budget.total_usd",
            _fmt_usd,
        ),
        "power": (
            "power_kw",
            p.site.power_cap_kw,
            "power cap too low: site.power_cap_kw",
            lambda x: f"{x:,.1f} kW",
        ),
    }
    has = {
        "capex": True,
        "total": p.budget.total_usd is not None,
        "power": p.site.power_cap_kw is not None,
    }
    return {k: v for k, v in spec.items() if has[k]}


def _limits_too_small(inputs: Inputs, spec: dict, probe, need_alone) -> list[str]:
    """Each limit too small: with the others as set, or even with no other limit."""
    lines: list[str] = []
    keys = list(spec)
    for key in keys:
        objective, limit, label, fmt = spec[key]
        res = probe(
            relaxed(inputs, capex=key == "capex", total=key == "total", power=key == "power"),
            objective,
        )
        if res.value is not None:
            if res.value > limit * (1 + 1e-9) + 1e-6:
                bound = "" if res.exact else " at most"
                others = [spec[k][2].split(": ")[1] for k in keys if k != key]
                given = f" (with {', '.join(others)} as set)" if others else ""
                lines.append(
                    f"{label} = {fmt(limit)}; the smallest that admits a plan{given} is{bound} "
                    f"{fmt(res.value)} (short by {fmt(res.value - limit)})"
                )
            continue
        # Even without this limit the others leave no plan; is this one too small by itself?
        alone = need_alone(key)
        if alone.value is not None and alone.value > limit * (1 + 1e-9) + 1e-6:
            lines.append(
                f"{label} = {fmt(limit)}; even with no other limit a plan needs at least "
                f"{fmt(alone.value)} (short by {fmt(alone.value - limit)})"
            )
    return lines


def _limits_together(spec: dict, need_alone) -> list[str]:
    """Every limit is large enough on its own; together they leave no plan."""
    parts = []
    for key, (_, limit, label, fmt) in spec.items():
        alone = need_alone(key)
        if alone.value is not None:
            parts.append(
                f"{label.split(': ')[1]} = {fmt(limit)} would do on its own (a plan needs {fmt(alone.value)})"
            )
    return [
        "the limits act together: each is large enough on its own, but no plan meets all of "
        "them at once (the cheapest plans draw too much power, the most power-efficient cost "
        "too much); raise one of them. " + "; ".join(parts)
    ]


# ------------------------------------------------------------------ a feasible plan: what binds


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
# money, kW). Families that only link a fixed binary to its continuous variable (train_slot,
# train_use, train_gpus, train_assign, licence, rent_whole) are left out: with the integers
# fixed their duals price an artifact of the fixing.
DUAL_FAMILIES = {
    "serve_demand": "$ per extra req/s of demand in that month and slice",
    "capacity": "$ per extra owned GPU in that month and slice (negative: it would save)",
    "train_progress": "$ per extra hour of training the job would need",
    "train_window": "$ per extra wall hour in the job's window",
    "train_spot_share": "$ per extra hour allowed on spot",
    "reserved_cap": "$ per extra reserved GPU in that month and slice",
    "availability": "$ per extra GPU the offer could supply",
    "train_min_term": "$ per hour less of an offer's minimum term",
    "budget_capex": "$ per extra $ of capex budget",
    "budget_total": "$ per extra $ of total budget",
    "power_cap": "$ per extra kW of power cap",
}


def _family(name: str) -> str | None:
    for fam in sorted(DUAL_FAMILIES, key=len, reverse=True):
        if name == fam or name.startswith(fam + "_"):
            return fam
    return None


def lp_duals(m: PlannerModel, top: int = 15) -> list[tuple[str, float, float]]:
    """``(constraint, dual, slack)`` of the LP left when every integer variable is fixed at its
    value in the solved MILP, for the constraint families of :data:`DUAL_FAMILIES`; sorted by
    |dual|, at most ``top``, and within a family one constraint per distinct dual value. The
    dual is the change of the total cost per unit of the constraint's right-hand side
    (purchases, owned replica counts and job choices held fixed; rented replicas free and
    fractional, so a demand's dual is the marginal rent per req/s). Mutates ``m``: its integer
    variables become continuous, fixed at their values, except rented replicas, only relaxed."""
    rented = {id(v) for v in m.q.values()}
    for v in m.prob.variables():
        if v.cat == pulp.LpInteger:
            if id(v) not in rented:
                v.lowBound = v.upBound = round(v.varValue or 0.0)
            v.cat = pulp.LpContinuous
    m.prob.solve(pulp.PULP_CBC_CMD(msg=False))
    if m.prob.status != pulp.LpStatusOptimal:
        return []
    rows = []
    for name, c in m.prob.constraints.items():
        pi = c.pi
        if pi is None or abs(pi) < 1e-7 or _family(name) is None:
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


def _limit_lines(inputs: Inputs, plan: Plan) -> list[str]:
    """One line per limit of the problem at the optimum: used of limit, binding or slack."""
    lines = [
        _capex_limit_line(inputs, plan),
        _total_limit_line(inputs, plan),
        _power_limit_line(inputs, plan),
        _licence_line(inputs),
    ]
    return [x for x in lines if x is not None]


@dataclasses.dataclass(frozen=True)
class _Resolver:
    """Re-solves a variant of the problem; says how its cost (present value, what the
    optimizer minimizes) compares with the plan's."""

    total: float  # the plan's objective: present value of its cash less the residual, USD
    solver: str
    time_limit: float
    gap: float
    noise: float = 0.0  # the plan's own gap (a repaired plan's can exceed the solver's)

    def outcome(self, inputs: Inputs, cands: Candidates) -> str:
        """``PV $X (+$D, +P%)``, or no change beyond the solver gap, or no plan; a re-solve
        stopped by its time limit says so and gives the range its bound proves."""
        # Differences within the solver's gap are noise, not the worth of the change.
        tol = max(abs(self.total) * max(self.gap, self.noise), 1.0)
        mm = build_model(inputs, cands)
        rr = solve_model(mm, solver=self.solver, time_limit=self.time_limit, gap=self.gap)
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
        if abs(d) <= tol:
            return (
                f"PV {_fmt_usd(new)}: no change beyond the solver gap ({_fmt_usd(tol)})" + unproven
            )
        pct = f", {d / self.total:+.1%}" if self.total else ""
        sign = "+" if d >= 0 else "-"
        return f"PV {_fmt_usd(new)} ({sign}{_fmt_usd(abs(d))}{pct}){unproven}"


def _limit_whatifs(inputs: Inputs, cands: Candidates, rs: _Resolver) -> list[str]:
    """Each limit of the problem raised by 10 %, re-solved."""
    p = inputs.problem
    out = [
        f"budget_capex +10% ({_fmt_usd(p.budget.capex_usd * 1.1)}) -> "
        + rs.outcome(_scaled(inputs, "capex", 1.1), cands)
    ]
    if p.budget.total_usd is not None:
        out.append(
            f"budget_total +10% ({_fmt_usd(p.budget.total_usd * 1.1)}) -> "
            + rs.outcome(_scaled(inputs, "total", 1.1), cands)
        )
    if p.site.power_cap_kw is not None:
        out.append(
            f"power_cap +10% ({p.site.power_cap_kw * 1.1:,.1f} kW) -> "
            + rs.outcome(_scaled(inputs, "power", 1.1), cands)
        )
    return out


def _binding_caps(m: PlannerModel, tol: float = 1e-6) -> list[str]:
    """Offers whose ``availability`` cap holds with equality somewhere in the solved model."""
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
            ):
                out.append(oid)
                break
    return out


def _with_job(inputs: Inputs, name: str, **update: object) -> Inputs:
    p = inputs.problem
    train = [j.model_copy(update=update) if j.name == name else j for j in p.workloads.train]
    work = p.workloads.model_copy(update={"train": train})
    return dataclasses.replace(inputs, problem=p.model_copy(update={"workloads": work}))


def _capacity_whatifs(
    inputs: Inputs, cands: Candidates, m: PlannerModel, rs: _Resolver
) -> list[str]:
    """Capacity rules relaxed one at a time and re-solved: each binding offer cap doubled, and
    per training job one provider relaxed to ``split`` and Ethernet allowed."""
    out = []
    for oid in _binding_caps(m)[:3]:
        o = inputs.offers[oid]
        bigger = o.model_copy(update={"max_gpus": 2 * (o.max_gpus or 0)})
        inp = dataclasses.replace(inputs, offers={**inputs.offers, oid: bigger})
        c = copy.copy(cands)
        c.offers = {**cands.offers, oid: bigger}
        out.append(
            f"{oid} max_gpus {o.max_gpus} -> {bigger.max_gpus} (binding) -> " + rs.outcome(inp, c)
        )
    for j in inputs.problem.workloads.train:
        if j.providers == "single":
            inp = _with_job(inputs, j.name, providers="split")
            out.append(f"{j.name}: providers split -> " + rs.outcome(inp, cands))
        if not j.ethernet:
            inp = _with_job(inputs, j.name, ethernet=True)
            out.append(f"{j.name}: ethernet allowed -> " + rs.outcome(inp, build_candidates(inp)))
    return out


def _gpu_whatif(
    inputs: Inputs, cands: Candidates, g: str, used_gpus: set[str], rs: _Resolver
) -> str:
    """The problem without GPU type ``g`` (neither bought nor rented), re-solved when the plan
    uses ``g`` and every workload can run on another type."""
    tag = "used" if g in used_gpus else "unused"
    if len(inputs.gpus) == 1:
        return f"without {g}: no GPU type left"
    if g not in used_gpus:
        return f"without {g} ({tag}): no change (the plan does not use it)"
    pi, pc, orphans = _without_gpu(inputs, cands, g)
    if orphans:
        return f"without {g} ({tag}): no plan: {', '.join(orphans)} cannot run on any other allowed GPU"
    return f"without {g} ({tag}) -> " + rs.outcome(pi, pc)


def explain_plan(
    inputs: Inputs,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    resolve: bool = True,
    top: int = 15,
) -> Explanation:
    """Solve ``inputs``; say which limits bind and what relaxing each is worth.

    Raises :class:`~planner.errors.InfeasibleError` (with the diagnosis) when there is no plan.
    """
    from planner.candidates import check_candidates
    from planner.errors import InfeasibleError, SolverError
    from planner.extract import extract_plan

    p = inputs.problem
    cands = build_candidates(inputs)
    check_candidates(inputs, cands)
    limit = time_limit if time_limit is not None else p.solver.time_limit_s
    rel_gap = gap if gap is not None else p.solver.gap
    m = build_model(inputs, cands)
    res = solve_model(m, solver=solver, time_limit=limit, gap=rel_gap)
    if res.status == "infeasible":
        raise InfeasibleError(
            "infeasible: no plan meets every constraint",
            diagnose_infeasible(inputs, solver=solver, cands=cands, time_limit=time_limit),
        )
    if not res.has_solution:
        raise SolverError(f"{res.solver}: {res.status}: {res.message}")
    plan = extract_plan(m, res)
    total = plan.totals.total_usd
    limits = _limit_lines(inputs, plan)
    whatif: list[str] = []
    if resolve:
        # variants are compared on what the optimizer minimizes: the present value
        rs = _Resolver(float(res.objective or total), solver, limit, rel_gap, res.gap or 0.0)
        used_gpus = {pu.gpu for pu in plan.purchases} | {r.gpu for r in plan.rentals}
        whatif = _limit_whatifs(inputs, cands, rs)
        whatif += [_gpu_whatif(inputs, cands, g, used_gpus, rs) for g in inputs.gpus]
        whatif += _capacity_whatifs(inputs, cands, m, rs)
    binding = binding_families(m)
    duals = [
        f"{name}: {pi:+,.4g} ({DUAL_FAMILIES[_family(name)]})" for name, pi, _ in lp_duals(m, top)
    ]
    return Explanation(total, res.status, limits, whatif, duals, res.gap, binding)


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
    if plan.purchases and (plan.gap is None or plan.gap > max_gap):
        gap = "unknown" if plan.gap is None else f"{plan.gap:.1%}"
        return [
            f"not computed: the plan is not proven within {max_gap:.0%} (gap {gap}), so a "
            "re-solve without a GPU type would compare two unproven plans; `planner explain "
            "PROBLEM --time-limit S` with a longer limit prints it."
        ]
    return buy_margins(inputs, plan, solver=solver, time_limit=time_limit)
