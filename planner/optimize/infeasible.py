"""Why is a problem infeasible? Re-solve with limits relaxed, and look at each workload.

:func:`diagnose_infeasible` returns plain-language lines:

0. Before any solve: an existing fleet that may not be sold (``fleet.owned``, ``sell: never``)
   drawing more than the power cap on its own is named with its kW against the cap.
1. With every limit removed (capex budget, total budget, power cap) is there a plan? If not,
   the cause is structural: each workload is tried alone and, for one that cannot be placed,
   every GPU that could run it is listed with why it can be neither bought (licence:
   GeForce cards without ``site.consumer_gpus_allowed``; liquid cooling: a liquid-cooled
   server or rack without ``site.liquid_cooling``) nor rented (no trusted offer for
   it, offers filtered out by ``offers.providers``/``offers.marketplaces``, instances too
   small for the tensor-parallel group or the training job, availability caps, contracts
   whose terms miss the months the workload needs, reserved terms longer than the horizon,
   spot not allowed).
2. Otherwise each limit is probed on its own: the limit is removed (the others kept) and the
   smallest value of that limit that admits a plan is found by minimizing it (capex spend,
   total cost, peak kW of the owned fleet, existing cards included until sold). A limit below
   that value is reported with the smallest value that would do.
3. If no single limit is to blame, the limits act together; the lines say what each needs on
   its own and that relaxing any of them helps.

The warnings of loading (``Inputs.warnings``, e.g. a contract that ended before the horizon)
follow the lines as ``note:`` lines.

Relaxed problems are built from modified inputs (not by deleting constraints from a built
model) so that bounds the model derives from the limits are relaxed too. Candidates (the
physics) are computed once.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pulp

from planner.base.errors import InputError
from planner.inputs.catalog import Offer, load_offers, purchase_barrier
from planner.inputs.problem import Inputs, TrainJob, month_index
from planner.optimize.candidates import (
    Candidates,
    TrainCandidate,
    build_candidates,
    offer_months,
    offer_wall_hours,
    rental_gpus,
)
from planner.optimize.model import PlannerModel, build_model, nominal_total
from planner.optimize.model.core import existing_in_service
from planner.optimize.solve import solve_model
from planner.physics.demand import HOURS_PER_MONTH

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
    """Minimize the site's peak kW: bought servers and cards, and the existing cards in service
    (``fleet.owned``, until sold), as the ``power_cap`` rows count them."""
    site = m.inputs.problem.site
    peak = pulp.LpVariable("diagnose_peak_kw", lowBound=0)
    for t in range(len(m.cands.months)):
        terms: dict[pulp.LpVariable, float] = defaultdict(float)  # a full server's buy var
        existing_kw = 0.0
        for g, gpu in m.inputs.gpus.items():  # carries both its cards' and its host's kW
            card_kw, server_kw = gpu.tdp_w.value * site.pue / 1000, gpu.host_w * site.pue / 1000
            for v, coef in m.own[(g, t)].items():
                terms[v] += coef * card_kw
            for tau in range(t + 1):
                terms[m.buy[(g, tau)]] += server_kw
            per_card = (gpu.tdp_w.value + gpu.host_w / max(gpu.slots, 1)) * site.pue / 1000
            existing_kw += existing_in_service(m, g, t) * per_card
            for v, n in m.sold.get((g, t), {}).items():
                terms[v] -= n * per_card
        m.prob += (
            pulp.LpAffineExpression(dict(terms)) - peak <= -existing_kw,
            f"diagnose_peak_kw_{t}",
        )
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
    site = inputs.problem.site
    return purchase_barrier(inputs.gpus[gpu_id], site.consumer_gpus_allowed, site.liquid_cooling)


def _spans(months: list[int], labels: list[str]) -> str:
    """Month indexes as label ranges: ``[0, 1, 2, 5]`` -> ``2027-01..2027-03, 2027-06``."""
    out: list[str] = []
    for t in sorted(months):
        if out and out[-1][1] == t - 1:
            out[-1][1] = t
        else:
            out.append([t, t])
    text = [labels[a] if a == b else f"{labels[a]}..{labels[b]}" for a, b in out]
    return ", ".join(text[:4]) + (", ..." if len(text) > 4 else "")


def _window_gap(inputs: Inputs, good: list[Offer], need: Need) -> str | None:
    """Why offers that fit cannot carry a workload in time: their terms (a contract's start
    and end) leave months it needs without any offer (``need``: month indexes, every one
    needed, or any one)."""
    p = inputs.problem
    months, every, what = need
    have: set[int] = set()
    for o in good:
        have.update(offer_months(o, p.horizon.start, p.horizon.months))
    missing = [t for t in months if t not in have]
    if not missing or (not every and len(missing) < len(months)):
        return None
    terms = "; ".join(
        f"{o.id} {o.available_from or 'before'}..{o.available_until or 'after'}"
        for o in good
        if o.available_from is not None or o.available_until is not None
    )
    labels = p.month_labels()
    return (
        f"the {len(good)} offer(s) that fit are available only inside their terms ({terms}): "
        f"none in {_spans(missing, labels)}, where {what}"
    )


# What a workload needs of the offers' terms: month indexes, whether every one is needed
# (serving) or any one (a training run inside its window), and how to say it.
Need = tuple[list[int], bool, str]


def _offer_summary(
    inputs: Inputs, gpu_id: str, eligible: Callable, why_not: Callable, need: Need
) -> str:
    offers = [o for o in inputs.offers.values() if o.gpu == gpu_id]
    hidden = _untrusted_offers(inputs, gpu_id)
    if not offers:
        text = f"no trusted rental offer rents {gpu_id}"
        if hidden:
            text += " (filtered out: " + "; ".join(hidden) + ")"
        return text
    good = [o for o in offers if eligible(o)]
    gap = _window_gap(inputs, good, need) if good else None
    if gap:
        return gap
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


def _serve_gpu_line(inputs: Inputs, gpu_id: str, tps: list[int], need: Need) -> str:
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

    rent = _offer_summary(inputs, gpu_id, eligible, why_not, need)
    tp_text = "/".join(f"tp{t}" for t in tps)
    return f"{gpu_id} ({tp_text}) meets the SLO, but " + _neither_buy_nor_rent(inputs, gpu_id, rent)


def _train_gpu_line(
    inputs: Inputs, j: TrainJob, gpu_id: str, cl: list[TrainCandidate], need: Need
) -> str:
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
    rent = _offer_summary(inputs, gpu_id, eligible, why_not, need)
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
    labels = p.month_labels()
    if name in cands.serve:
        w = next(x for x in p.workloads.serve if x.name == name)
        act = cands.active.get(name, [])
        need: Need = (act, True, f"the workload runs {_spans(act, labels)}")
        parts = [
            _serve_gpu_line(inputs, g, sorted(c.tp for c in cands.serve[name] if c.gpu == g), need)
            for g in sorted({c.gpu for c in cands.serve[name]})
        ]
        return f"serving workload {w.name!r} cannot be placed: " + " | ".join(parts)
    j = next(x for x in p.workloads.train if x.name == name)
    window = cands.window.get(name, [])
    need = (window, False, f"the job's window is {_spans(window, labels)}")
    parts = [
        _train_gpu_line(inputs, j, g, [c for c in cands.train[name] if c.gpu == g], need)
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
    notes = [f"note: {w}" for w in inputs.warnings]  # said, not refused, on loading
    cands = cands or build_candidates(inputs)
    lines = _without_candidates(cands) or existing_power_lines(inputs)
    if lines:
        return lines + notes
    return _diagnose(inputs, cands, solver, time_limit) + notes


def existing_power_lines(inputs: Inputs) -> list[str]:
    """The existing fleet that may not be sold (``fleet.owned``, ``sell: never``) drawing more
    than ``site.power_cap_kw`` in some month on its own: no plan can fit under the cap.

    A card draws its TDP and its share of its server's host watts, times the PUE, as in the
    ``power_cap`` rows (:mod:`planner.optimize.model.limits`)."""
    p = inputs.problem
    cap = p.site.power_cap_kw
    if cap is None or not p.fleet.owned:
        return []
    T = p.horizon.months
    kw = [0.0] * T
    parts: list[list[str]] = [[] for _ in range(T)]
    for o in p.fleet.owned:
        gpu = inputs.gpus.get(o.gpu)
        if o.sell != "never" or gpu is None:
            continue
        per_card = (gpu.tdp_w.value + gpu.host_w / max(gpu.slots, 1)) * p.site.pue / 1000
        start = 0 if o.arrives is None else max(0, month_index(p.horizon.start, o.arrives))
        for t in range(start, T):
            kw[t] += o.count * per_card
            parts[t].append(f"{o.count:,} x {o.gpu} at {per_card:,.2f} kW")
    t = max(range(T), key=lambda k: kw[k])
    if kw[t] <= cap * (1 + 1e-9) + 1e-6:
        return []
    return [
        f"power cap too low for the existing fleet: the GPUs of fleet.owned that may not be "
        f"sold (sell: never) draw {kw[t]:,.1f} kW on their own in {p.month_labels()[t]} "
        f"({'; '.join(parts[t])}; TDP and host share x PUE {p.site.pue:g}), above "
        f"site.power_cap_kw = {cap:,.1f} kW (short by {kw[t] - cap:,.1f} kW); raise the cap "
        "or allow selling them (sell: allowed)"
    ]


def _diagnose(
    inputs: Inputs, cands: Candidates, solver: str, time_limit: float | None
) -> list[str]:
    """The probes of :func:`diagnose_infeasible` (steps 1-3 of the module docstring)."""

    def probe(inp: Inputs, objective: str, c: Candidates = cands) -> Probe:
        return minimize(inp, c, objective, solver, time_limit)

    caps = _provider_cap_lines(inputs, solver, time_limit)
    if caps:
        return caps
    free = probe(relaxed(inputs, capex=True, total=True, power=True), "none")
    if free.value is None:
        return _lead_time_lines(inputs, probe) or _unplaceable(inputs, cands, probe, free)
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


def _provider_cap_lines(inputs: Inputs, solver: str, time_limit: float | None) -> list[str]:
    """When ``offers.provider_caps`` are what stands in the way: the problem re-read without
    them (every other limit kept) has a plan; each cap is named with the most GPUs that plan
    takes from the provider at once."""
    from planner.inputs.problem import resolve

    p = inputs.problem
    caps = p.offers.provider_caps
    if not caps:
        return []
    free = p.model_copy(update={"offers": p.offers.model_copy(update={"provider_caps": []})})
    base = Path(inputs.source_path).parent if inputs.source_path != "<memory>" else None
    try:  # the problem's own catalogs (overrides applied once more: they replace, idempotent)
        uncapped = resolve(free, None, base, gpu_catalog=inputs.gpus, model_catalog=inputs.models)
    except InputError:
        return []
    m = build_model(uncapped, build_candidates(uncapped))
    limit = time_limit or min(p.solver.time_limit_s, PROBE_TIME_LIMIT_S)
    if not solve_model(m, solver=solver, time_limit=limit).has_solution:
        return []
    peak: defaultdict[tuple[str, str], float] = defaultdict(float)
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    use: defaultdict[tuple[str, str, int, int], float] = defaultdict(float)
    for (w, key, oid, t, s), q in m.q.items():
        o = m.cands.offers[oid]
        use[(o.provider, o.gpu, t, s)] += (q.varValue or 0.0) * index[(w, key)].tp
    for (job, key, oid), u in m.train_use.items():  # a training block, its window long
        o = m.cands.offers[oid]
        paid = rental_gpus(m.train_cand(job, key).gpus, o) * (u.varValue or 0.0)
        for t in m.cands.window[job]:
            for s in range(len(m.cands.slices)):
                use[(o.provider, o.gpu, t, s)] += paid
    for (oid, t0), v in m.res.items():  # reserved instances while active
        o = m.cands.offers[oid]
        for t in range(t0, min(len(m.cands.months), t0 + (o.term_months or 1))):
            for s in range(len(m.cands.slices)):
                use[(o.provider, o.gpu, t, s)] += (v.varValue or 0.0) * o.gpus_per_instance
    for (pr, g, _, _), gpus in use.items():
        peak[(pr, g)] = max(peak[(pr, g)], gpus)
    parts = [
        f"{c.provider} {c.gpu}: cap {c.max_gpus}, the plan without caps rents up to "
        f"{peak.get((c.provider, c.gpu), 0.0):,.0f} at once"
        for c in caps
    ]
    return [
        "offers.provider_caps leave the workloads short (without them, every other limit "
        "kept, there is a plan): " + "; ".join(parts) + ". Raise a cap, or trust more "
        "providers or offers (offers.providers, offers.files)."
    ]


def _lead_time_lines(inputs: Inputs, probe) -> list[str]:
    """When purchases take months to arrive (``market.lead_months`` or the catalog default)
    and the problem has a plan with no lead time and no limit: the lead times are the cause,
    named with the first month a purchase of each type can serve."""
    market = inputs.market
    leads = {g: market.lead_months(g) for g in inputs.gpus if market.lead_months(g) > 0}
    if not leads:
        return []
    instant = dataclasses.replace(
        market, lead={g: 0 for g in inputs.gpus}, sources=dict(market.sources)
    )
    unlimited = relaxed(dataclasses.replace(inputs, market=instant), True, True, True)
    if probe(unlimited, "none").value is None:
        return []
    months = inputs.problem.month_labels()
    parts = [
        f"{g}: {n} month(s) from order to service, so in service from {months[min(n, len(months) - 1)]}"
        f" at the earliest ({market.sources.get((g, 'lead_months'), 'market')})"
        for g, n in sorted(leads.items())
    ]
    return [
        "purchases cannot arrive in time: " + "; ".join(parts) + ". Before then every "
        "workload must run on rentals or GPUs already owned, and some cannot; with no lead "
        "time there is a plan. Allow rentals for the first months (offers), or set "
        "market.lead_months (0 when the GPUs are in stock)."
    ]


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
