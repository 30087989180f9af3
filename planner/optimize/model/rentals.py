"""Rentals' limits: reserved instances (``res``, committed for the offer's term) and the rows
that keep rented GPUs within them (``reserved_cap``), within an offer's cap (``availability``)
and within what one provider delivers of one GPU type over all its offers (``provider_cap``),
serving replicas and training blocks alike.
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from planner.optimize.candidates import rental_gpus
from planner.optimize.model.core import LE, PlannerModel, nid
from planner.optimize.model.families import row_name


def add_rental_constraints(m: PlannerModel) -> None:
    """reserved_cap and availability per offer, month and slice: serving replicas, and the
    GPUs of a training job's block on a capped offer in every month of its window."""
    T = len(m.cands.months)
    slices = m.cands.slices
    use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    for (w, key, oid, t, s), q in m.q.items():
        use[(oid, t, s)].append((q, float(index[(w, key)].tp)))
    for (job, key, oid), u in m.train_use.items():
        o = m.cands.offers[oid]
        if o.max_gpus is None:
            continue
        paid = float(rental_gpus(m.train_cand(job, key).gpus, o))
        for t in m.cands.window[job]:
            for s in range(len(slices)):
                use[(oid, t, s)].append((u, paid))
    for oid, o in m.cands.offers.items():
        if o.kind == "reserved":
            L = o.term_months or 1
            for t0 in range(T - L + 1):
                m.res[(oid, t0)] = m.var(
                    nid("res", oid, m.cands.months[t0]), 0, None, pulp.LpInteger
                )
        for t in range(T):
            for s, sl in enumerate(slices):
                terms = use.get((oid, t, s))
                if not terms:
                    continue
                if o.kind == "reserved":
                    L = o.term_months or 1
                    active = [
                        (m.res[(oid, t0)], -o.gpus_per_instance)
                        for t0 in range(max(0, t - L + 1), t + 1)
                        if (oid, t0) in m.res
                    ]
                    m.add(
                        [*terms, *active],
                        LE,
                        0,
                        row_name("reserved_cap", oid, m.cands.months[t], sl.name),
                    )
                if o.max_gpus is not None:
                    m.add(
                        terms,
                        LE,
                        o.max_gpus,
                        row_name("availability", oid, m.cands.months[t], sl.name),
                    )


def add_provider_cap_constraints(m: PlannerModel) -> None:
    """provider_cap per (provider, GPU type) of ``offers.provider_caps``, month and slice::

        sum_{o of p, g not reserved} (m_r q[.,o,t,s] + paid u[job,.,o] for t in the window)
          + sum_{o of p, g reserved} u_o sum_{t-L_o < tau <= t} res[o,tau]   <=   P_pg

    Reserved instances count as held whether used or not (the provider delivers them); a
    training block counts in every month of its job's window, as for ``availability``."""
    caps = {(c.provider, c.gpu): c.max_gpus for c in m.inputs.problem.offers.provider_caps}
    if not caps:
        return
    slices, months = m.cands.slices, m.cands.months
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    terms: dict[tuple[str, str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)

    def cap_of(oid: str) -> tuple[str, str] | None:
        o = m.cands.offers[oid]
        key = (o.provider, o.gpu)
        return key if key in caps and o.kind != "reserved" else None

    for (w, key, oid, t, s), q in m.q.items():
        if (pg := cap_of(oid)) is not None:
            terms[(*pg, t, s)].append((q, float(index[(w, key)].tp)))
    for (job, key, oid), u in m.train_use.items():
        if (pg := cap_of(oid)) is not None:
            paid = float(rental_gpus(m.train_cand(job, key).gpus, m.cands.offers[oid]))
            for t in m.cands.window[job]:
                for s in range(len(slices)):
                    terms[(*pg, t, s)].append((u, paid))
    for (oid, t0), v in m.res.items():
        o = m.cands.offers[oid]
        if (o.provider, o.gpu) not in caps:
            continue
        for t in range(t0, min(len(months), t0 + (o.term_months or 1))):
            for s in range(len(slices)):
                terms[(o.provider, o.gpu, t, s)].append((v, float(o.gpus_per_instance)))
    for (p, g, t, s), row in terms.items():
        name = row_name("provider_cap", p, g, months[t], slices[s].name)
        m.add(row, LE, caps[(p, g)], name)
