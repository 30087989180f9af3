"""Training jobs: one candidate per job (``y``), its wall hours on owned GPUs (``a``, ``z``) or
rented per offer (``r``, with a ``use`` binary on restricted offers) and the rows that tie them
(the ``train_*`` families): progress, window, one run at a time, spot share, owned GPUs, an
offer's cap and minimum term, and one provider per run.
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from planner.inputs.catalog import Offer
from planner.inputs.problem import TrainJob
from planner.optimize.candidates import TrainCandidate, progress_per_wall_hour, rental_gpus
from planner.optimize.candidates import offer_restricted as restricted
from planner.optimize.model.core import (
    EQ,
    GE,
    LE,
    PlannerModel,
    existing_in_service,
    job_spec,
    minus_own,
    nid,
    offer_term_months,
)
from planner.optimize.model.families import row_name
from planner.physics.demand import HOURS_PER_MONTH


def train_offers(m: PlannerModel, c: TrainCandidate) -> list[tuple[Offer, float]]:
    """Offers a training candidate may rent, each with its progress per wall hour ``f_o``.

    Eligible: the candidate's GPU, not reserved, instances of at least ``min(k, 8)`` GPUs
    (NVLink/PCIe inside one server; forty-eight 1-GPU VMs are not a 48-GPU training node), a
    fabric that can carry the job when it spans instances (:func:`fabric_gbs`), the job's
    GPUs within ``max_gpus``, spot only when the job allows it.

    Per group (provider and kind when the run stays with one provider, else kind) only the
    cheapest unrestricted offer per hour of progress ``p_o paid_o / f_o`` is kept, plus
    restricted ones (a cap, a minimum term or block) cheaper than it: a dearer offer of the
    same group is never chosen.
    """
    job = job_spec(m.inputs, c.job)
    groups: dict[tuple[str, str], list[tuple[float, str, Offer, float]]] = defaultdict(list)
    for o in m.cands.offers.values():
        if (
            o.gpu != c.gpu
            or o.kind == "reserved"
            or o.gpus_per_instance < min(c.gpus, 8)
            or (o.max_gpus is not None and rental_gpus(c.gpus, o) > o.max_gpus)
            or (o.kind == "spot" and not (job.spot.allowed and job.spot.max_share > 0))
        ):
            continue
        f = progress_per_wall_hour(c, job, o)
        if f is None:
            continue
        group = (o.provider if job.providers == "single" else "", o.kind)
        price = o.lowest_marginal_usd_per_gpu_hour * rental_gpus(c.gpus, o) / f
        groups[group].append((price, o.id, o, f))
    out = []
    for _, rows in sorted(groups.items()):
        rows.sort(key=lambda row: row[:2])
        for _, _, o, f in rows:
            out.append((o, f))
            if not restricted(o):
                break
    return out


def add_training_constraints(m: PlannerModel) -> None:
    """train_assign, train_progress, train_window, train_month, train_spot_share, train_slot,
    train_use, train_gpus, train_offer_use, train_min_term, train_location."""
    for job, cands in m.cands.train.items():
        if not cands:
            continue
        spec = job_spec(m.inputs, job)
        ys = []
        where: dict[str, list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
        for c in cands:
            y = m.var(nid("y", job, c.key), 0, 1, pulp.LpInteger)
            m.y[(job, c.key)] = y
            ys.append((y, 1))
            owned = _add_owned_training(m, job, c)
            where[OWNED].extend((z, 1.0) for z in owned)
            rented, progress, spot, monthly = _add_rented_training(m, spec, c, where)
            own_terms = [(z, 1.0) for z in owned]
            m.add(
                [*own_terms, *progress, (y, -c.wall_hours)],
                EQ,
                0,
                row_name("train_progress", job, c.key),
            )
            m.add(
                [*own_terms, *rented, (y, -m.cands.window_hours[job])],
                LE,
                0,
                row_name("train_window", job, c.key),
            )
            _add_train_months(m, job, c, y, monthly)
            if spot:
                m.add(
                    [*spot, (y, -spec.spot.max_share * c.wall_hours)],
                    LE,
                    0,
                    row_name("train_spot_share", job, c.key),
                )
        m.add(ys, EQ, 1, row_name("train_assign", job))
        if spec.providers == "single":
            _add_train_location(m, job, where)


OWNED = "owned"  # the location of a run on the team's own GPUs


def _add_owned_training(m: PlannerModel, job: str, c: TrainCandidate) -> list[pulp.LpVariable]:
    """``a`` and ``z`` of one candidate on owned GPUs, with train_use, train_gpus, train_slot."""
    if not m.ownable[c.gpu]:
        return []
    months, y = m.cands.months, m.y[(job, c.key)]
    out = []
    for t in m.cands.window[job]:
        a = m.var(nid("a", job, c.key, months[t]), 0, 1, pulp.LpInteger)
        m.a[(job, c.key, t)] = a
        m.add([(a, 1), (y, -1)], LE, 0, row_name("train_use", job, c.key, months[t]))
        m.add(
            [(a, c.gpus), *minus_own(m, c.gpu, t)],
            LE,
            existing_in_service(m, c.gpu, t),
            row_name("train_gpus", job, c.key, months[t]),
        )
        for s, sl in enumerate(m.cands.slices):
            z = m.var(nid("z", job, c.key, months[t], sl.name), 0, sl.hours_per_month)
            m.z[(job, c.key, t, s)] = z
            out.append(z)
            m.add(
                [(z, 1), (a, -sl.hours_per_month)],
                LE,
                0,
                row_name("train_slot", job, c.key, months[t], sl.name),
            )
    return out


def _add_rented_training(
    m: PlannerModel,
    spec: TrainJob,
    c: TrainCandidate,
    where: dict[str, list[tuple[pulp.LpVariable, float]]],
) -> tuple[list, list, list, dict[int, list]]:
    """``r`` of one candidate per eligible offer and month: (wall terms, progress terms, spot
    progress terms, wall terms per month). Restricted offers get a binary ``use``: the job's
    block counts against the cap in every month of its window (train_offer_use), and a run
    on an offer with a minimum term lasts at least that term (train_min_term; a shorter run
    does not use the offer: the plan never pays for idle cluster time)."""
    job, months = spec.name, m.cands.months
    window_h = m.cands.window_hours[job]
    rented, progress, spot = [], [], []
    monthly: dict[int, list] = defaultdict(list)
    for o, f in train_offers(m, c):
        mine = []
        term = offer_term_months(m, o)
        for t in m.cands.window[job]:
            if t not in term:
                continue
            r = m.var(nid("r", job, c.key, o.id, months[t]), 0, HOURS_PER_MONTH)
            m.r[(job, c.key, o.id, t)] = r
            mine.append((r, 1.0))
            monthly[t].append((r, 1.0))
            progress.append((r, f))
            if o.kind == "spot":
                spot.append((r, f))
        rented.extend(mine)
        where[o.provider].extend(mine)
        if restricted(o):
            u = m.var(nid("use", job, c.key, o.id), 0, 1, pulp.LpInteger)
            m.train_use[(job, c.key, o.id)] = u
            m.add([*mine, (u, -window_h)], LE, 0, row_name("train_offer_use", job, c.key, o.id))
            if o.min_term_hours > 0:
                m.add(
                    [*mine, (u, -o.min_term_hours)],
                    GE,
                    0,
                    row_name("train_min_term", job, c.key, o.id),
                )
    return rented, progress, spot, monthly


def _add_train_months(
    m: PlannerModel, job: str, c: TrainCandidate, y: pulp.LpVariable, monthly: dict[int, list]
) -> None:
    """train_month: one run at a time, a month holds at most its hours, owned and rented."""
    months, S = m.cands.months, len(m.cands.slices)
    for t in m.cands.window[job]:
        terms = [(m.z[(job, c.key, t, s)], 1.0) for s in range(S) if (job, c.key, t, s) in m.z]
        terms += monthly.get(t, [])
        if terms and monthly.get(t):
            m.add(
                [*terms, (y, -HOURS_PER_MONTH)],
                LE,
                0,
                row_name("train_month", job, c.key, months[t]),
            )


def _add_train_location(
    m: PlannerModel, job: str, where: dict[str, list[tuple[pulp.LpVariable, float]]]
) -> None:
    """train_location: the run lives with one provider, or on owned GPUs, for all its hours:
    ``sum_p loc[j,p] = 1`` and each location's wall hours ``<= H_j loc[j,p]``."""
    places = {p: terms for p, terms in where.items() if terms}
    if len(places) <= 1:
        return
    window_h = m.cands.window_hours[job]
    locs = []
    for p, terms in sorted(places.items()):
        loc = m.var(nid("loc", job, p), 0, 1, pulp.LpInteger)
        m.loc[(job, p)] = loc
        locs.append((loc, 1.0))
        m.add([*terms, (loc, -window_h)], LE, 0, row_name("train_location", job, p))
    m.add(locs, EQ, 1, row_name("train_location", job))
