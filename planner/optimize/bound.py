r"""A lower bound on the cost of every plan with whole replicas, one workload at a time.

Stage 4, with :mod:`planner.optimize.solve`: the LP relaxation of a large model prices a service that
needs a third of a replica at a third of a replica and its spare at a fraction of one; whole
replicas and the spare are most of what a plan of many small services costs, so the LP bound
(and the gap measured against it) is far below every plan. This bound keeps the lumps and
drops the coupling instead:

* an owned GPU-hour of type ``g`` is priced at ``rho_g``, the least present value per
  discounted GPU-hour a card can cost: bought in the best month ``t0`` and busy every hour to
  the horizon end, ``rho_g = min_t0 k_g(t0) / (H sum_{t >= t0} d_t)`` where ``k_g(t0)`` is the
  objective's present value of one card bought in ``t0`` (capex, running costs, its share of
  the chassis in a full server, less resale). A card busy ``h_t`` hours in month t costs at
  least ``rho_g sum_t d_t h_t``, whoever uses it, so sharing cards between workloads, whole
  servers, budgets and the power cap are relaxed away;
* a rented replica is priced at its offer (a reserved offer at its hourly price, a committed
  contract at 0: it is paid whatever the plan does), capacity caps relaxed;
* each service then is its own problem: per spare period the largest replica type in use
  ``l`` (chosen), and per (month, slice) at least ``1 + R`` and ``R + ceil(D / l)`` replicas
  of types no faster than ``l`` with ``sum mu x >= D + R l`` req/s (``D`` = demand /
  max_load), each cell bounded by its linear relaxation (:func:`cell_bound`);
* each training job costs at least its cheapest progress-hour (owned at ``rho_g`` or rented)
  times the hours its cheapest candidate needs.

The sum is a lower bound on the model's optimum with whole replicas (the plan the repair
step delivers), so ``1 - bound / plan`` is a true gap. It is not computed (None) with an
existing fleet, sales or request mixes. :func:`planner.optimize.warm.mip_start` uses it when the LP
relaxation does not finish in its time: on the 200-workload, 36-month benchmark the LP takes
longer than a 120 s limit allows, and this bound ($10.5M against a $22.0M plan) takes 13 s.
Where the LP finishes it is usually the better bound: owned GPUs priced per busy hour, as
here, are cheap (50 workloads, 36 months: $2.59M here, LP $2.66M); with nothing to buy, the
whole replicas make this one the better (10 workloads: $734k here, LP $578k).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from planner.optimize.candidates import progress_per_wall_hour
from planner.optimize.model import SPARE_PERIOD_MONTHS, PlannerModel
from planner.optimize.model.core import rent_factor
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH


def cell_bound(mu: np.ndarray, price: np.ndarray, need: float, count: float) -> float:
    """``min price . x`` s.t. ``mu . x >= need``, ``sum x >= count``, ``x >= 0``: the linear
    relaxation of one cell's whole replicas (``mu`` req/s per replica, ``price`` $ per
    replica, ``inf`` where a type is not available). A basic optimum has one type covering
    both rows, or two types with both rows tight.

    >>> mu, price = np.array([1.0, 4.0]), np.array([1.0, 3.0])
    >>> round(cell_bound(mu, price, 6.0, 2.0), 4)   # 4/3 big + 2/3 small, both rows tight
    4.6667
    >>> cell_bound(mu, price, 6.0, 3.0)      # 1 big + 2 small (tight): $5
    5.0
    >>> cell_bound(mu, np.array([1.0, np.inf]), 2.0, 1.0)
    2.0
    """
    ok = np.isfinite(price)
    mu, price = mu[ok], price[ok]
    if mu.size == 0:
        return math.inf
    single = price * np.maximum(need / mu, count)
    best = float(single.min())
    if mu.size > 1:
        i, j = np.triu_indices(mu.size, 1)
        dmu = mu[i] - mu[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            xi = (need - mu[j] * count) / dmu
        xj = count - xi
        good = (dmu != 0) & (xi >= 0) & (xj >= 0)
        if good.any():
            pair = price[i][good] * xi[good] + price[j][good] * xj[good]
            best = min(best, float(pair.min()))
    return best


def owned_hour_price(m: PlannerModel) -> dict[str, float]:
    """``rho_g`` per GPU type that can be owned: the least present value of a card per
    discounted GPU-hour (the module docstring)."""
    T, r = len(m.cands.months), m.inputs.finance.discount_rate
    d = [economics.discount_factor(r, t) for t in range(T)]
    tail = np.cumsum(d[::-1])[::-1]  # sum_{t >= t0} d_t
    obj = m.prob.objective
    out: dict[str, float] = {}
    for g, gpu in m.inputs.gpus.items():
        if not m.ownable.get(g):
            continue
        per_hour = []
        for t in range(T):
            buy = m.buy[(g, t)]
            card = obj.get(buy, 0.0) / gpu.slots
            if gpu.partial_fill:
                card += sum(obj.get(v, 0.0) / c for v, c in m.cards[(g, t)].items())
            per_hour.append(max(0.0, card) / (HOURS_PER_MONTH * tail[t]))
        out[g] = min(per_hour)
    return out


def separable_bound(m: PlannerModel) -> float | None:
    """The lower bound of the module docstring; None where it is not computed."""
    if m.existing or m.sell or any(c.mixed for cl in m.cands.serve.values() for c in cl):
        return None
    rho = owned_hour_price(m)
    r = m.inputs.finance.discount_rate
    d = [economics.discount_factor(r, t) for t in range(len(m.cands.months))]
    total = float(m.prob.objective.constant)
    prices = _serve_prices(m, rho, d)
    for w in m.cands.serve:
        total += _serve_bound(m, w, prices[w])
    for job in m.cands.train:
        total += _train_bound(m, job, rho, d)
    return total if math.isfinite(total) else None


def _serve_prices(m: PlannerModel, rho: dict, d: list) -> dict:
    """Per workload: {(type, t, s): least present value of one replica in the cell}."""
    obj, slices = m.prob.objective, m.cands.slices
    out: dict[str, dict] = defaultdict(dict)

    def keep(w: str, cell: tuple, value: float) -> None:
        if value < out[w].get(cell, math.inf):
            out[w][cell] = value

    for (w, key, t, s), n in m.n.items():
        c = m.serve_cand(w, key)
        hours = slices[s].hours_per_month
        keep(w, (key, t, s), obj.get(n, 0.0) + rho.get(c.gpu, math.inf) * c.tp * hours * d[t])
    for (w, key, oid, t, s), q in m.q.items():
        o = m.cands.offers[oid]
        price = obj.get(q, 0.0)
        if o.kind == "reserved" and price == 0.0:  # paid through res: its hourly price
            c = m.serve_cand(w, key)
            # signed at its start month (at most t) on a monotone path: at least the lower
            # of month 0's price and month t's
            path = min(1.0, rent_factor(m, o.gpu, t))
            lowest = min([o.usd_per_gpu_hour, *(st.usd_per_gpu_hour for st in o.price_steps)])
            price = d[t] * lowest * path * c.tp * slices[s].hours_per_month
        keep(w, (key, t, s), price)
    return out


def _serve_bound(m: PlannerModel, w: str, prices: dict) -> float:
    spec = next(x for x in m.inputs.problem.workloads.serve if x.name == w)
    R, load = spec.redundancy, spec.slo.max_load
    keys = sorted({key for key, _, _ in prices})
    if not keys:
        return 0.0
    mu = np.array([m.serve_cand(w, k).rate_rps for k in keys])
    levels = sorted(set(mu.tolist())) if R > 0 else [float(mu.max())]
    active = m.cands.active[w]
    periods: dict[int, list[int]] = defaultdict(list)
    for t in active:
        periods[t - (t - active[0]) % SPARE_PERIOD_MONTHS].append(t)
    total = 0.0
    for months in periods.values():
        best = math.inf
        for level in levels:
            allowed = mu <= level * (1 + 1e-12)
            cost = 0.0
            for t in months:
                for s in range(len(m.cands.slices)):
                    need = max(m.cands.demand[(w, t, s)], 0.0) / load
                    price = np.array([prices.get((k, t, s), math.inf) for k in keys])
                    price[~allowed] = math.inf
                    count = max(1 + R, R + math.ceil(need / level - 1e-9))
                    cost += cell_bound(mu, price, need + R * level, count)
                if cost >= best:
                    break
            best = min(best, cost)
        total += best
    return total


def _train_bound(m: PlannerModel, job: str, rho: dict, d: list) -> float:
    """Hours of the cheapest candidate times its cheapest progress-hour, owned or rented."""
    spec = next(x for x in m.inputs.problem.workloads.train if x.name == job)
    obj = m.prob.objective
    per_hour: dict[str, float] = {}

    def keep(key: str, value: float) -> None:
        per_hour[key] = min(per_hour.get(key, math.inf), value)

    for (j, key, t, _s), z in m.z.items():
        if j == job:
            c = m.train_cand(job, key)
            owned = rho.get(c.gpu, math.inf) * c.gpus * d[t]
            keep(key, owned + obj.get(z, 0.0))
    for (j, key, oid, _t), r in m.r.items():
        if j == job:
            c = m.train_cand(job, key)
            f = progress_per_wall_hour(c, spec, m.cands.offers[oid])
            if f:
                keep(key, obj.get(r, 0.0) / f)
    costs = [m.train_cand(job, k).wall_hours * p for k, p in per_hour.items()]
    return min(costs, default=0.0)
