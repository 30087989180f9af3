r"""The MILP: buy, own, rent and reserve GPUs to meet every workload at least present cost.

Stage 3 of the flow. Builds a PuLP problem from :class:`~planner.inputs.problem.Inputs` (already
validated) and :class:`~planner.optimize.candidates.Candidates` (physics already applied). It never
reads files and never solves; :mod:`planner.optimize.solve` does that.

Notation
--------
=================  ==========================================================================
``g``              GPU type, bought in a server type of ``S_g`` slots: *full* (HGX: a server
                   comes with ``S_g`` cards) or *partial* (PCIe: cards added ``n_g`` at a
                   time); ``C_g`` chassis price, ``K_g`` card price, ``W^host_g`` host watts
                   per server, ``P^idle_g``, ``P^tdp_g`` card watts
``t``              month 0..T-1, ``H = 730`` hours each; ``s`` load slice with ``w_s`` h/month;
                   ``d_t = (1 + r)^(-t/12)`` the discount factor at the annual rate ``r``
``j, c``           training job and its candidate (GPU ``g_c``, ``k_c`` GPUs, ``h_c`` wall
                   hours to finish); window months ``W_j``, window hours ``H_j``
``k, r``           serving workload and candidate (GPU ``g_r``, ``m_r`` GPUs per replica,
                   ``mu_r`` req/s per replica within the p95 SLO); demand ``D_kts`` req/s
``o``              rental offer: GPU ``g_o``, price ``p_o`` $/GPU-h, kind on-demand, spot or
                   reserved (term ``L_o`` months), cap ``A_o`` GPUs, unit ``u_o``
``e``              electricity $/kWh x PUE / 1000 (so watts x hours x e = dollars);
                   ``colo`` $/kW-month of IT load; ``host`` $/GPU-month
``rho_g(a)``       resale share of a card of age ``a`` months (:mod:`planner.physics.economics`)
``i``              an entry of ``fleet.owned`` (issue 20): ``N_i`` existing cards of type
                   ``g_i``, in service from month ``t_i`` (0, or ``arrives``), age ``a_it``
                   months at the start of month t (from ``bought``, or from arrival)
``E_gt``           existing cards of type g in service in month t before any sale
``sigma_g(a)``     what a sale fetches per $ of catalog price: the used-market curve at age a
                   (whatever ``finance.residual`` says; :func:`planner.physics.economics.sale_share`)
``F_g``            running cost of one existing card a month: ``H e (P^idle_g + W^host_g/S_g) +
                   host + colo (P^tdp_g + W^host_g/S_g)/1000`` (it came in its catalog server
                   type: no chassis capex, its share of the host watts)
``o in C``         committed offers, one per ``fleet.contracts`` entry: ``A_o`` GPUs in the
                   months of the term inside the horizon, price ``p_o`` paid used or not
=================  ==========================================================================

Variables
---------
``buy[g,t]``      integer servers bought at the start of month t
``cards[g,t]``    partial servers: integer nodes of cards bought (``n_g`` cards each); full
                  servers: the expression ``S_g buy[g,t]``. ``own[g,t] = sum_{tau<=t} cards``
``y[j,c]``        binary, job j runs as candidate c
``a[j,c,t]``      binary, the job uses owned GPUs in month t (then ``own >= k_c``)
``z[j,c,t,s]``    wall hours of job j on owned GPUs in month t, slice s
``r[j,c,o,t]``    wall hours of job j rented from offer o in month t (spot hours progress
                  1/(1+overhead))
``n[k,r,t,s]``    integer replicas of workload k on owned GPUs
``q[k,r,o,t,s]``  replicas rented from offer o, continuous: the average over the slice's hours
                  of hourly rentals, with at least one whole replica always up (``serve_floor``)
``alloc[k,b,r,t,s]``  request mixes (``requests:``): req/s of capacity replica type r (owned
                  and rented replicas pooled) gives bucket b of workload k
``res[o,t]``      integer instances of reserved offer o committed from month t for ``L_o`` months
``sell[i,t]``     integer nodes (``n_g`` cards) of existing entry i sold at the start of month
                  t (entries with ``sell: allowed``); ``X_gt = sum_{i: g_i = g} sum_{tau<=t}
                  n_g sell[i,tau]`` cards sold by month t

Objective (``npv_cost``): the present value of all cash less the resale value
-----------------------------------------------------------------------------
.. math::
   \min \sum_{g,t} \Big[ d_t (C_g buy_{gt} + K_g cards_{gt})
      + A_t \big(H e (W^{host}_g buy_{gt} + P^{idle}_g cards_{gt})
                 + colo (W^{host}_g buy_{gt} + P^{tdp}_g cards_{gt}) / 1000
                 + host\, cards_{gt}\big)
      - d_T K_g \rho_g(T - t)\, cards_{gt} \Big]
      + \sum_{g,t} d_t e (P^{tdp}_g - P^{idle}_g) busy_{gt}
      + \sum_{j,c,o,t} d_t p_o \lceil k_c/u_o \rceil u_o\, r_{jcot}
      + \sum_{k,r,o\,\notin reserved,t,s} d_t p_o m_r w_s q_{krots}
      + \sum_{o \in reserved, t} p_o u_o H A^{L_o}_t res_{ot}

plus what the team already has (:func:`add_existing_fleet_constraints`,
:func:`_existing_cost_terms`; every term is 0 without ``fleet``):

.. math::
   + \sum_i N_i \big(F_{g_i} \sum_{t \ge t_i} d_t - d_T K_{g_i} \rho_{g_i}(a_{iT})\big)
   - \sum_{i,t} n_{g_i} sell_{it} \big(d_t K_{g_i} \sigma_{g_i}(a_{it}) + A_t F_{g_i}
        - d_T K_{g_i} \rho_{g_i}(a_{iT})\big)
   + \sum_{o \in C} \sum_{t \in term_o} d_t p_o A_o H

(the first and last sums are constants: existing cards pay their running costs and are
valued at the horizon end like purchases, by ``finance.residual``; a sale earns the
used-market price now and gives up both; a contract is paid whatever the plan does, and its
hours cost 0 at the margin in the ``r`` and ``q`` terms above),
with ``A_t = sum_{tau=t}^{T-1} d_tau`` (a purchase pays its running costs every month to the
horizon end; ``A^L_t`` over the L months of a term), ``busy[g,t] = sum_s w_s sum m_r
n[k,r,t,s] + sum k_c z[j,c,t,s]`` (GPU-hours). Under ``residual: straight_line`` the resale is
the book value of cards and chassis; under ``none`` it is 0. With ``r = 0`` and no resale the
objective is the undiscounted total (``nominal_total``), which is what the budgets cap.

Constraints (label used for the constraint names)
-------------------------------------------------
``train_assign_<j>``            sum_c y[j,c] = 1
``train_progress_<j>_<c>``      sum_ts z + sum_ot r (1/(1+ovh) for spot) = h_c y[j,c]
``train_window_<j>_<c>``        sum_ts z + sum_ot r <= H_j y[j,c]
``train_month_<j>_<c>_<t>``     sum_s z[t,s] + sum_o r[o,t] <= H y[j,c]: one run at a time
``train_spot_share_<j>_<c>``    spot progress <= share_j h_c y[j,c]
``train_slot_<j>_<c>_<t>_<s>``  z <= w_s a[j,c,t];  ``train_use_<j>_<c>_<t>``: a <= y
``train_gpus_<j>_<c>_<t>``      k_c a[j,c,t] <= own[g_c,t]
``serve_demand_<k>_<t>_<s>``    sum_r mu_r (n + sum_o q) - R_k L[k,p] >= D[k,t,s] / max_load_k:
                                headroom, and R_k replicas of the largest type in use down
``serve_floor_<k>_<t>_<s>``     sum_r (n + sum_o q) >= 1 + R_k: a live service keeps replicas up
``serve_largest_<k>_<p>``       L[k,p] - sum_i (mu_i - mu_{i-1}) on[k,i,p] >= mu_0 over the types
                                faster than the slowest (mu_0), sorted by rate, per spare period
                                p of 12 months; ``serve_largest_order_<k>_<r>_<p>``: on_{i+1} <=
                                on_i (on_i: the largest type in use is at least as fast as i)
``serve_in_use_<k>_<r>_<t>``    sum_{s, o} (n + q)[k,r,.,t,s] <= (sum of their bounds) on[k,r,p]
                                (t in p): a type serves only in periods it is counted in L; from
                                5,000 to 50,000 rental cells one row per slice, ``sum_o (n + q)
                                <= up_r on``
``serve_bucket_<k>_<b>_<t>_<s>`` a request mix instead of serve_demand (shares ``f_b``, rates
                                ``mu_rb``): sum_r alloc[b,r] >= f_b D[k,t,s] / max_load_k
``serve_share_<k>_<r>_<t>_<s>``  sum_b alloc[b,r] / mu_rb <= sum_o x[r,o] - R_k on[k,r,p]: each
                                replica type in use keeps R spares (buckets are routed by type)
``capacity_<g>_<t>_<s>``        sum m_r n + sum k_c z / w_s <= own[g,t]
``server_slots_<g>_<t>``        partial servers: own[g,t] <= S_g sum_{tau<=t} buy
``server_used_<g>_<t>``         partial servers: sum_{tau<=t} buy <= own[g,t] (an empty server
                                is never needed: bought with its first card it costs no more)
``reserved_cap_<o>_<t>_<s>``    sum m_r q[.,o,t,s] <= u_o sum_{t-L_o < tau <= t} res[o,tau]
``availability_<o>_<t>_<s>``    sum m_r q[.,o,t,s] <= A_o (offers with a cap)
``budget_capex``                sum (C_g buy + K_g cards) <= capex budget (cash, undiscounted;
                                existing cards are never in it)
``budget_total``                nominal_total <= total budget (when given; contracts in, sale
                                proceeds out)
``power_cap_<t>``               sum_g (W^host_g servers + P^tdp_g cards owned + (E - X)(P^tdp_g
                                + W^host_g/S_g)) PUE/1000 <= cap kW
``sell_at_most_<g>_<i>``        sum_t sell[i,t] <= floor(N_i / n_g): whole nodes, each sold once

With ``fleet.owned``, ``own[g,t]`` in ``train_gpus`` and ``capacity`` is the whole fleet
``own[g,t] + E_gt - X_gt`` (the constant ``E_gt`` on the right-hand side). A committed offer's
``r`` and ``q`` exist only in the months of its term inside the horizon, capped at ``A_o``.
``licence_<g>``                 sum_t buy[g,t] = 0 for GeForce cards unless the site allows them
                                (renting consumer cards from a provider is allowed)

Size reductions (the optimum is unchanged; see also :mod:`planner.optimize.candidates`)
------------------------------------------------------------------------------
Variables that no optimal plan needs are not created, and implied bounds are stated:

* ``q`` exists only for (candidate, offer) pairs that are not dominated replica for replica
  (:func:`planner.optimize.candidates.serve_rental_pairs`): per candidate the cheapest uncapped
  non-reserved offer, capped offers cheaper than it and every reserved offer; and no
  non-reserved pair when an uncapped pair gives at least its req/s for at most its price per
  replica-hour.
* ``n`` exists only for owned replica types not matched on the same GPUs by a smaller one
  (:func:`planner.optimize.candidates.owned_serve_options`: ``tp_a | tp_b`` and ``(tp_b/tp_a) mu_a >=
  mu_b``).
* ``r`` exists only for the cheapest offer per training candidate and kind
  (:func:`train_offers`): nothing but price and kind tells training offers apart.
* ``n``, ``a`` and ``z`` exist only on GPU types that can be owned at all (not a GeForce card
  without ``consumer_gpus_allowed``, one node within the capex budget and the power cap) and
  whose ownership can pay off against renting (:func:`worth_owning`; else ``buy`` is 0).
* bounds: ``buy[g,t] <= min(capex / (C_g + n_g K_g), cap kW / ((W^host_g + n_g P^tdp_g)
  PUE / 1000))`` servers (the cheapest purchase is one server with one node of cards),
  ``n[k,r,t,s] <= max(1, ceil(D_kts / mu_r))``, ``q[k,r,o,t,s] <= max(1, D_kts / mu_r)``.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import pulp

from planner.inputs.catalog import GpuSpec, Offer
from planner.inputs.problem import Inputs, ServeWorkload, TrainJob, month_index
from planner.optimize.candidates import (
    Candidates,
    ServeCandidate,
    TrainCandidate,
    offer_months,
    owned_serve_options,
    progress_per_wall_hour,
    rental_gpus,
    serve_rental_pairs,
)
from planner.optimize.candidates import (
    offer_restricted as restricted,
)
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH

LE, GE, EQ = pulp.LpConstraintLE, pulp.LpConstraintGE, pulp.LpConstraintEQ
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


@functools.lru_cache(maxsize=65536)
def _part(p: str) -> str:
    return _NON_ALNUM.sub("_", p).strip("_")


def nid(*parts: object) -> str:
    """A PuLP-safe name from domain ids.

    >>> nid("buy", "h100-sxm", "2027-01")
    'buy_h100_sxm_2027_01'
    >>> nid("-a-", "", "b..c", "_")
    'a_b_c'
    """
    # Sanitizing each part and joining with "_" is the same as sanitizing the joined string
    # (runs of other characters across a boundary collapse to one "_"); parts repeat, so cache.
    return "_".join(s for s in (_part(str(p)) for p in parts) if s)


def power_coefficients(gpu: GpuSpec, e: float) -> tuple[float, float]:
    """Dollars per owned GPU-month (idle + host) and per busy GPU-hour (extra over idle).

    ``e`` is $/Wh at the meter (price x PUE / 1000).

    >>> from types import SimpleNamespace as NS
    >>> g = NS(tdp_w=NS(value=700), idle_w=NS(value=100), host_w_per_gpu=NS(value=500))
    >>> power_coefficients(g, 0.12 * 1.3 / 1000)
    (68.328, 0.0936)
    """
    idle = gpu.idle_w.value + gpu.host_w_per_gpu.value
    per_month = round(HOURS_PER_MONTH * idle * e, 9)
    per_busy_hour = round((gpu.tdp_w.value - gpu.idle_w.value) * e, 9)
    return per_month, per_busy_hour


def node_kw(gpu: GpuSpec, pue: float) -> float:
    """kW the smallest purchase draws at the meter: one server with one node of cards
    (``(host_w + n_g tdp) PUE / 1000``)."""
    return (gpu.host_w + gpu.node_gpus * gpu.tdp_w.value) * pue / 1000


@dataclass
class PlannerModel:
    """The PuLP problem and handles to its variables, by domain ids."""

    prob: pulp.LpProblem
    inputs: Inputs
    cands: Candidates
    buy: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)  # servers
    cards: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)
    own: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)
    y: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)
    a: dict[tuple[str, str, int], pulp.LpVariable] = field(default_factory=dict)
    z: dict[tuple[str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    r: dict[tuple[str, str, str, int], pulp.LpVariable] = field(default_factory=dict)
    n: dict[tuple[str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    q: dict[tuple[str, str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    res: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)
    train_use: dict[tuple[str, str, str], pulp.LpVariable] = field(default_factory=dict)
    loc: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)
    largest: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)
    existing: dict[tuple[str, int], int] = field(default_factory=dict)  # cards before sales
    sell: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)  # (entry, t)
    sold: dict[tuple[str, int], dict] = field(default_factory=dict)  # cards sold by month t
    on: dict[tuple[str, str, int], pulp.LpVariable] = field(default_factory=dict)
    # per (workload, month) of a single-shape service: its ordered flags (rate, on), slowest first
    spare_order: dict[tuple[str, int], list[tuple[float, pulp.LpVariable]]] = field(
        default_factory=dict
    )
    # request mixes: req/s of capacity (demand / max_load) given to a bucket by the replicas
    # of one type (owned and rented pooled), keyed (workload, bucket, candidate key, t, s)
    alloc: dict[tuple[str, str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    cost_terms: dict[str, pulp.LpAffineExpression] = field(default_factory=dict)  # nominal
    pv_terms: dict[str, pulp.LpAffineExpression] = field(default_factory=dict)  # present value
    residual: pulp.LpAffineExpression = field(default_factory=pulp.LpAffineExpression)  # nominal
    busy: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)
    ownable: dict[str, bool] = field(default_factory=dict)  # GPU type -> can any be bought
    _serve_index: dict[tuple[str, str], ServeCandidate] = field(default_factory=dict, repr=False)
    _train_index: dict[tuple[str, str], TrainCandidate] = field(default_factory=dict, repr=False)

    def train_cand(self, job: str, key: str) -> TrainCandidate:
        if not self._train_index:
            self._train_index = {(j, c.key): c for j, cl in self.cands.train.items() for c in cl}
        return self._train_index[(job, key)]

    def serve_cand(self, w: str, key: str) -> ServeCandidate:
        if not self._serve_index:
            self._serve_index = {(k, c.key): c for k, cl in self.cands.serve.items() for c in cl}
        return self._serve_index[(w, key)]

    def var(
        self,
        name: str,
        low: float | None = 0,
        up: float | None = None,
        cat: str = pulp.LpContinuous,
    ) -> pulp.LpVariable:
        return self.prob.add_variable(name, low, up, cat)

    def add(self, terms, sense: int, rhs: float, name: str) -> None:
        """Add ``sum terms  sense  rhs``; ``terms`` is a list of (variable, coefficient) with
        no variable repeated, or a dict."""
        e = pulp.LpAffineExpression(terms)
        self.prob.addConstraint(pulp.LpConstraint(e, sense, name, rhs), name)


def _job(inputs: Inputs, job: str) -> TrainJob:
    return next(x for x in inputs.problem.workloads.train if x.name == job)


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
    job = _job(m.inputs, c.job)
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
        price = o.marginal_usd_per_gpu_hour * rental_gpus(c.gpus, o) / f
        groups[group].append((price, o.id, o, f))
    out = []
    for _, rows in sorted(groups.items()):
        rows.sort(key=lambda row: row[:2])
        for _, _, o, f in rows:
            out.append((o, f))
            if not restricted(o):
                break
    return out


def serve_offers(m: PlannerModel, c: ServeCandidate) -> list[Offer]:
    """Offers a serving candidate may rent: a tensor-parallel replica needs its ``tp`` GPUs
    in one instance; spot only where the problem allows it for serving. (The model creates
    ``q`` only for the non-dominated pairs of :func:`planner.optimize.candidates.serve_rental_pairs`.)"""
    spot_ok = m.inputs.problem.offers.spot_for_serving
    return [
        o
        for o in m.cands.offers.values()
        if o.gpu == c.gpu and o.gpus_per_instance >= c.tp and (o.kind != "spot" or spot_ok)
    ]


def _ownable(m: PlannerModel) -> dict[str, int | None]:
    """Most nodes of each GPU type any feasible plan can buy (None = no bound); 0 means the
    type can never be owned (licence, one node over the capex budget or the power cap)."""
    p = m.inputs.problem
    site, b = p.site, p.budget
    money = b.capex_usd if b.total_usd is None else min(b.capex_usd, b.total_usd)
    out: dict[str, int | None] = {}
    for g, gpu in m.inputs.gpus.items():
        bound: float = math.inf
        if gpu.consumer and not site.consumer_gpus_allowed:
            bound = 0
        # the cheapest purchase: one server holding one node of cards
        node_cost = gpu.chassis_usd + gpu.node_gpus * gpu.purchase_usd.value
        if node_cost > 0:
            bound = min(bound, math.floor(money / node_cost * (1 + 1e-9)))
        kw = node_kw(gpu, site.pue)
        if site.power_cap_kw is not None and kw > 0:
            bound = min(bound, math.floor(site.power_cap_kw / kw * (1 + 1e-9)))
        out[g] = None if math.isinf(bound) else int(bound)
    return out


def rent_value_per_gpu_hour(m: PlannerModel) -> dict[str, float]:
    """Per GPU type, the most an hour of one owned GPU can save in rentals (inf if some use
    of it has no uncapped rental to fall back on).

    An owned replica of serving candidate ``r`` can always be replaced, replica for replica,
    by ``max(1, mu_r / mu_r')`` rented replicas of a candidate ``r'`` of the same workload on
    an uncapped non-reserved offer ``o'`` (as many req/s, at least as many replicas for the
    floor), at ``p_o' m_r' max(1, mu_r / mu_r')`` per hour, i.e. per GPU-hour of ``r``
    divided by ``m_r``; an owned wall hour of training candidate ``c`` by one rented on-demand
    wall hour of the same candidate at ``p_o ceil(k/u_o) u_o``, per GPU-hour divided by ``k``.
    """
    spot_ok = m.inputs.problem.offers.spot_for_serving
    plain = [
        o
        for o in m.cands.offers.values()
        if o.kind != "reserved" and o.max_gpus is None and (o.kind != "spot" or spot_ok)
    ]
    value: dict[str, float] = {g: 0.0 for g in m.inputs.gpus}
    for cands in m.cands.serve.values():
        options = []  # (price per replica-hour, req/s) of the workload's uncapped rentals
        for c in cands:
            prices = [
                o.usd_per_gpu_hour for o in plain if o.gpu == c.gpu and o.gpus_per_instance >= c.tp
            ]
            if prices and c.rate_rps > 0:
                options.append((min(prices) * c.tp, c.rate_rps))
        for c in cands:
            if c.gpu not in value or c.rate_rps <= 0:
                continue
            best = min((p * max(1.0, c.rate_rps / mu) for p, mu in options), default=math.inf)
            value[c.gpu] = max(value[c.gpu], best / c.tp)
    for cands in m.cands.train.values():
        for c in cands:
            if c.gpu not in value:
                continue
            # an owned wall hour is replaced by 1/f rented ones (a slower fabric), uncapped
            prices = [
                o.usd_per_gpu_hour * rental_gpus(c.gpus, o) / c.gpus / f
                for o, f in train_offers(m, c)
                if o.kind != "spot" and not restricted(o)
            ]
            value[c.gpu] = max(value[c.gpu], min(prices, default=math.inf))
    return value


def worth_owning(m: PlannerModel) -> dict[str, bool]:
    """Per GPU type, whether owning any of it can ever beat renting.

    A card bought in month t0 costs, in present value, at least its share of a server plus its
    own capex, idle power and hosting less its residual value (per server figures / slots:
    a server holds at most ``slots`` cards, and a server's net cost is not negative), and can
    save at most ``sum_{t >= t0} d_t H (V_g - busy power)`` in rentals (``V_g`` from
    :func:`rent_value_per_gpu_hour`, ``d_t`` the discount factor). When for every t0 the cost
    is at least the saving, a plan that owns the type is matched by the same plan with every
    one of those GPUs removed and all their work rented instead (busy GPU-hours never exceed
    owned GPU-hours), so the type never needs ``n``, ``a`` or ``z`` and ``buy`` is 0.
    (Only the whole type: removing some nodes can force whole replicas or a whole training
    month onto rentals, which the per-GPU saving does not cover.)
    """
    site = m.inputs.problem.site
    e = site.power_usd_per_kwh * site.pue / 1000.0
    T = len(m.cands.months)
    value = rent_value_per_gpu_hour(m)
    out: dict[str, bool] = {}
    for g, gpu in m.inputs.gpus.items():
        if math.isinf(value[g]):
            out[g] = True
            continue
        _, per_busy = power_coefficients(gpu, e)
        hourly = HOURS_PER_MONTH * max(0.0, value[g] - per_busy)
        out[g] = any(_owning_may_pay(m, gpu, t0, hourly) for t0 in range(T))
    return out


def _owning_may_pay(m: PlannerModel, gpu: GpuSpec, t0: int, hourly: float) -> bool:
    """Whether one card bought in month ``t0`` may save more than it costs (see
    :func:`worth_owning`): in present value, or, when ``budget.total_usd`` caps undiscounted
    spend, in cash (renting instead must not break that budget)."""
    k = owned_coefficients(m, gpu, t0)
    T, r = len(m.cands.months), m.inputs.finance.discount_rate

    def per_card(parts: tuple[tuple[float, float], ...]) -> float:
        return sum(p[0] for p in parts) / gpu.slots + sum(p[1] for p in parts)

    pv_cost = per_card((k.pv_capex, k.pv_power, k.pv_hosting)) - per_card((k.pv_residual,))
    if hourly * economics.annuity_factor(r, t0, T - t0) > pv_cost * (1 - 1e-9):
        return True
    if m.inputs.problem.budget.total_usd is None:
        return False
    cash_cost = per_card((k.capex, k.power, k.hosting))
    return hourly * (T - t0) > cash_cost * (1 - 1e-9)


def add_purchase_variables(m: PlannerModel) -> None:
    """buy (servers) and, for partial-fill servers, cards; own[g,t] = cards bought so far."""
    T = len(m.cands.months)
    bounds = _ownable(m)
    worth = worth_owning(m)
    for g, gpu in m.inputs.gpus.items():
        up = bounds[g] if worth[g] else 0
        m.ownable[g] = up is None or up > 0
        owned: dict[pulp.LpVariable, float] = {}
        for t in range(T):
            v = m.var(nid("buy", g, m.cands.months[t]), 0, up, pulp.LpInteger)
            m.buy[(g, t)] = v
            if gpu.partial_fill:  # cards come in whole nodes of the card (usually 1)
                node = gpu.node_gpus
                card_up = None if up is None else up * (gpu.slots // node)
                c = m.var(nid("cards", g, m.cands.months[t]), 0, card_up, pulp.LpInteger)
                m.cards[(g, t)] = pulp.LpAffineExpression([(c, node)])
            else:
                m.cards[(g, t)] = pulp.LpAffineExpression([(v, gpu.node_gpus)])
            for x, coef in m.cards[(g, t)].items():
                owned[x] = owned.get(x, 0) + coef
            m.own[(g, t)] = pulp.LpAffineExpression(owned)


def existing_start(m: PlannerModel, i: int) -> int:
    """Month index from which ``fleet.owned[i]`` is in service (0: before the horizon)."""
    o = m.inputs.problem.fleet.owned[i]
    return 0 if o.arrives is None else month_index(m.inputs.problem.horizon.start, o.arrives)


def existing_age(m: PlannerModel, i: int, t: int) -> int:
    """Age in months of ``fleet.owned[i]`` at the start of month t (from bought or arrival)."""
    o = m.inputs.problem.fleet.owned[i]
    start = m.inputs.problem.horizon.start
    if o.bought is not None:
        return month_index(o.bought, start) + t
    return t - month_index(start, o.arrives or start)


def add_existing_fleet_constraints(m: PlannerModel) -> None:
    """GPUs owned before the plan (``fleet.owned``): cards in service from their month, no
    capex; where ``sell: allowed``, integer ``sell[i,t]`` nodes sold at the start of month t.

    The fleet of type g in month t is ``own[g,t] + E[g,t] - sum_i sum_{tau<=t} n_g sell[i,tau]``
    with ``E`` the existing cards in service (a constant on the right-hand side of capacity
    and train_gpus).
    """
    T = len(m.cands.months)
    for i, o in enumerate(m.inputs.problem.fleet.owned):
        if o.gpu not in m.inputs.gpus:
            continue
        gpu, t0 = m.inputs.gpus[o.gpu], existing_start(m, i)
        m.ownable[o.gpu] = True  # existing cards can serve and train
        for t in range(t0, T):
            m.existing[(o.gpu, t)] = m.existing.get((o.gpu, t), 0) + o.count
        if o.sell != "allowed":
            continue
        unit = gpu.node_gpus
        sold: dict[pulp.LpVariable, float] = {}
        sells = []
        for t in range(t0, T):
            v = m.var(
                nid("sell", o.gpu, i + 1, m.cands.months[t]), 0, o.count // unit, pulp.LpInteger
            )
            m.sell[(i, t)] = v
            sells.append((v, 1.0))
            sold[v] = float(unit)
            acc = m.sold.setdefault((o.gpu, t), {})
            for x, c in sold.items():
                acc[x] = acc.get(x, 0.0) + c
        m.add(sells, LE, o.count // unit, nid("sell_at_most", o.gpu, i + 1))


def add_server_constraints(m: PlannerModel) -> None:
    """server_slots: cards owned <= slots x servers owned; server_used: servers owned <= cards
    owned (partial-fill servers only). An empty server is never needed: buying it with its
    first card costs no more (later cash is discounted, a younger chassis resells higher)."""
    T = len(m.cands.months)
    for g, gpu in m.inputs.gpus.items():
        if not gpu.partial_fill or not m.ownable[g]:
            continue
        servers: list[tuple[pulp.LpVariable, float]] = []
        for t in range(T):
            servers.append((m.buy[(g, t)], -float(gpu.slots)))
            m.add(
                [*m.own[(g, t)].items(), *servers],
                LE,
                0,
                nid("server_slots", g, m.cands.months[t]),
            )
            m.add(
                [*((v, -c) for v, c in m.own[(g, t)].items()), *((v, 1.0) for v, _ in servers)],
                LE,
                0,
                nid("server_used", g, m.cands.months[t]),
            )


def _minus_own(m: PlannerModel, g: str, t: int) -> list[tuple[pulp.LpVariable, float]]:
    """``-(cards bought so far) + (existing cards sold so far)``: with the existing cards in
    service (:func:`existing_in_service`) on the right-hand side, the fleet in month t."""
    terms = {v: -coef for v, coef in m.own[(g, t)].items()}
    for v, coef in m.sold.get((g, t), {}).items():
        terms[v] = terms.get(v, 0.0) + coef
    return list(terms.items())


def existing_in_service(m: PlannerModel, g: str, t: int) -> int:
    """Cards of ``fleet.owned`` of type g in service in month t before any sale."""
    return m.existing.get((g, t), 0)


def add_training_constraints(m: PlannerModel) -> None:
    """train_assign, train_progress, train_window, train_month, train_spot_share, train_slot,
    train_use, train_gpus, train_offer_use, train_min_term, train_location."""
    for job, cands in m.cands.train.items():
        if not cands:
            continue
        spec = _job(m.inputs, job)
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
                nid("train_progress", job, c.key),
            )
            m.add(
                [*own_terms, *rented, (y, -m.cands.window_hours[job])],
                LE,
                0,
                nid("train_window", job, c.key),
            )
            _add_train_months(m, job, c, y, monthly)
            if spot:
                m.add(
                    [*spot, (y, -spec.spot.max_share * c.wall_hours)],
                    LE,
                    0,
                    nid("train_spot_share", job, c.key),
                )
        m.add(ys, EQ, 1, nid("train_assign", job))
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
        m.add([(a, 1), (y, -1)], LE, 0, nid("train_use", job, c.key, months[t]))
        m.add(
            [(a, c.gpus), *_minus_own(m, c.gpu, t)],
            LE,
            existing_in_service(m, c.gpu, t),
            nid("train_gpus", job, c.key, months[t]),
        )
        for s, sl in enumerate(m.cands.slices):
            z = m.var(nid("z", job, c.key, months[t], sl.name), 0, sl.hours_per_month)
            m.z[(job, c.key, t, s)] = z
            out.append(z)
            m.add(
                [(z, 1), (a, -sl.hours_per_month)],
                LE,
                0,
                nid("train_slot", job, c.key, months[t], sl.name),
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
        term = _offer_months(m, o)
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
            m.add([*mine, (u, -window_h)], LE, 0, nid("train_offer_use", job, c.key, o.id))
            if o.min_term_hours > 0:
                m.add(
                    [*mine, (u, -o.min_term_hours)], GE, 0, nid("train_min_term", job, c.key, o.id)
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
            m.add([*terms, (y, -HOURS_PER_MONTH)], LE, 0, nid("train_month", job, c.key, months[t]))


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
        m.add([*terms, (loc, -window_h)], LE, 0, nid("train_location", job, p))
    m.add(locs, EQ, 1, nid("train_location", job))


def add_serving_constraints(m: PlannerModel) -> None:
    """serve_demand, serve_floor and (with redundancy) serve_spare / serve_largest per
    workload, month and slice.

    Every replica is whole, owned or rented: a load slice is a period of constant load, so a
    service rents whole replicas in it. Capacity is planned at ``max_load`` of the SLO rate
    (headroom) with ``R = redundancy`` replicas down: ``sum_r mu_r x_r - R L >= D / max_load``
    where ``L`` is the largest replica rate in use that month (exact when one replica type is
    used, conservative when several are), and at least ``1 + R`` replicas up.
    """
    slices, months = m.cands.slices, m.cands.months
    spot_ok = m.inputs.problem.offers.spot_for_serving
    # names are built from cached pieces: nid(a, b) == nid(a) + "_" + nid(b) for non-empty parts
    when = {
        (t, s): nid(months[t], sl.name) for t in range(len(months)) for s, sl in enumerate(slices)
    }
    specs = {w.name: w for w in m.inputs.problem.workloads.serve}
    cells = _rental_cells(m)
    exact = cells <= EXACT_RENTAL_CELLS
    per_cell = IN_USE_PER_CELL[0] <= cells <= IN_USE_PER_CELL[1]
    incremental = cells <= INCREMENTAL_SPARE_CELLS
    for w, cands in m.cands.serve.items():
        spec = specs[w]
        R, load = spec.redundancy, spec.slo.max_load
        options = [
            (c, None, nid("n", w, c.key)) for c in owned_serve_options(cands) if m.ownable[c.gpu]
        ]
        options += [
            (c, o, nid("q", w, c.key, o.id))
            for c, o in serve_rental_pairs(cands, m.cands.offers.values(), spot_ok)
        ]
        if any(c.mixed for c, _, _ in options):
            add_mix_serving_constraints(m, spec, options, when, exact)
            continue
        mu_max = max((c.rate_rps for c, _, _ in options), default=0.0)
        demand_name, floor_name = nid("serve_demand", w), nid("serve_floor", w)
        periods: dict[int, _Largest] = {}
        in_use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
        for t in m.cands.active[w]:
            first = t - (t - m.cands.active[w][0]) % SPARE_PERIOD_MONTHS
            if first not in periods:
                periods[first] = _largest_replica(m, w, first, options, R, incremental)
            largest = periods[first]
            for key, on in largest.flags.items():
                m.on[(w, key, t)] = on
            if largest.order:
                m.spare_order[(w, t)] = largest.order
            if largest.minus:
                m.largest[(w, t)] = largest.minus[0][0]
            for s in range(len(slices)):
                need = max(m.cands.demand[(w, t, s)], 0.0) / load
                ts = when[(t, s)]
                terms = []
                for c, o, name in options:
                    if o is not None and t not in _offer_months(m, o):
                        continue
                    up = max(1 + R, math.ceil((need + R * mu_max) / c.rate_rps * (1 + 1e-9)))
                    x = m.var(f"{name}_{ts}", 0, up, _replica_category(o, exact))
                    if o is None:
                        m.n[(w, c.key, t, s)] = x
                    else:
                        m.q[(w, c.key, o.id, t, s)] = x
                    terms.append((x, c.rate_rps))
                    if c.key in largest.flags:
                        in_use[(c.key, t, s if per_cell else -1)].append((x, float(up)))
                m.add([*terms, *largest.minus], GE, need + largest.constant, f"{demand_name}_{ts}")
                m.add([(v, 1.0) for v, _ in terms], GE, 1.0 + R, f"{floor_name}_{ts}")
        _add_in_use(m, w, periods, in_use)


def add_mix_serving_constraints(
    m: PlannerModel, spec: ServeWorkload, options: list, when: dict, exact: bool
) -> None:
    """A request mix: buckets ``b`` with shares ``f_b``, rates ``mu_rb`` per replica type.

    Continuous ``alloc[k,b,r,t,s] >= 0``: req/s of capacity the replicas of type ``r`` (owned
    and on every offer ``x`` of it, pooled) give bucket ``b``; replicas ``x`` whole as for one
    shape; ``on[k,r,p]`` binary per type and spare period. Rows per month and slice::

        serve_bucket_<k>_<b>   sum_r alloc[b,r] >= f_b D / max_load
        serve_share_<k>_<r>    sum_b alloc[b,r] / mu_rb <= sum_{x of r} x - R on[r,p]
        serve_floor_<k>        sum_x x >= 1 + R
        serve_in_use_<k>_<r>   sum x of r <= (their bounds) on[r,p]   (R > 0 only)

    A replica's time is shared among buckets (Mélange's pooled capacity, with a bucket's load
    split continuously where Mélange cuts it in slices), and each replica type in use keeps
    ``R`` spares of its own: buckets are routed by type, so a failed replica's requests must
    be taken by replicas of its type (exact for one type, the routing the plan describes).
    """
    w, R, load = spec.name, spec.redundancy, spec.slo.max_load
    buckets = [b.name for b in spec.buckets()]
    shares = [b.share for b in spec.buckets()]
    types = sorted({c.key for c, _, _ in options})
    on: dict[tuple[str, int], pulp.LpVariable] = {}
    in_use: dict[tuple[str, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    active = m.cands.active[w]
    for t in active:
        first = t - (t - active[0]) % SPARE_PERIOD_MONTHS
        for key in types if R > 0 else ():
            if (key, first) not in on:
                name = nid("on", w, key, m.cands.months[first])
                on[(key, first)] = m.var(name, 0, 1, pulp.LpInteger)
            m.on[(w, key, t)] = on[(key, first)]
        for s in range(len(m.cands.slices)):
            need = [f * max(m.cands.demand[(w, t, s)], 0.0) / load for f in shares]
            ts = when[(t, s)]
            cell = _MixCell(w, buckets, need, t, s, ts, R)
            _add_mix_cell(m, cell, options, exact)
            for key, terms in cell.share_rows.items():
                if R > 0:
                    terms.append((on[(key, first)], float(R)))
                m.add(terms, LE, 0.0, nid("serve_share", w, key, ts))
            for i, b in enumerate(buckets):
                m.add(cell.bucket_rows[i], GE, need[i], nid("serve_bucket", w, b, ts))
            m.add([(x, 1.0) for x, _, _ in cell.xs], GE, 1.0 + R, nid("serve_floor", w, ts))
            for x, key, up in cell.xs if R > 0 else ():
                in_use[(key, t)].append((x, up))
    for (key, t), cells in in_use.items():
        big = sum(up for _, up in cells)
        name = nid("serve_in_use", w, key, m.cands.months[t])
        m.add([*((x, 1.0) for x, _ in cells), (m.on[(w, key, t)], -big)], LE, 0, name)


@dataclass
class _MixCell:
    """One (month, slice) of a request mix: its variables and rows as they are built."""

    w: str
    buckets: list[str]
    need: list[float]  # req/s of capacity per bucket (demand / max_load)
    t: int
    s: int
    ts: str
    R: int
    xs: list[tuple[pulp.LpVariable, str, float]] = field(default_factory=list)
    share_rows: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    bucket_rows: dict[int, list] = field(default_factory=lambda: defaultdict(list))


def _add_mix_cell(m: PlannerModel, cell: _MixCell, options: list, exact: bool) -> None:
    """Replica and alloc variables of one (month, slice) of a mix. Alloc is per replica type
    (owned and rented replicas of a type pool their time); an option's bound is the replicas
    it needs to serve every bucket it can alone, plus the spares."""
    w, t, s = cell.w, cell.t, cell.s
    for c, o, name in options:
        if o is not None and t not in _offer_months(m, o):
            continue
        rates = c.bucket_rates
        alone = sum(cell.need[i] / mu for i, mu in enumerate(rates) if mu > 0)
        up = max(1 + cell.R, math.ceil(alone * (1 + 1e-9)) + cell.R)
        x = m.var(f"{name}_{cell.ts}", 0, up, _replica_category(o, exact))
        if o is None:
            m.n[(w, c.key, t, s)] = x
        else:
            m.q[(w, c.key, o.id, t, s)] = x
        cell.xs.append((x, c.key, float(up)))
        first = c.key not in cell.share_rows
        cell.share_rows[c.key].append((x, -1.0))
        for i, mu in enumerate(rates if first else ()):
            if mu <= 0 or cell.need[i] <= 0:
                continue
            a = m.var(nid("alloc", w, cell.buckets[i], c.key, cell.ts), 0, cell.need[i])
            m.alloc[(w, cell.buckets[i], c.key, t, s)] = a
            cell.share_rows[c.key].append((a, 1.0 / mu))
            cell.bucket_rows[i].append((a, 1.0))


def _add_in_use(
    m: PlannerModel,
    w: str,
    periods: dict[int, _Largest],
    in_use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]],
) -> None:
    """serve_in_use per workload, replica type and month (``s = -1``: ``sum_{s,o} x <= (sum
    up_x) on``), or on large models per month and slice (``sum_o x <= up on``).

    Per slice, ``up`` is the most replicas of the type an optimal plan uses in the cell
    (enough alone for the demand and the spare, the bound of each of its variables); summed
    over a month's slices and options, as in the compact row, it is several times too large
    and the LP sets ``on`` (and with it the spare) to a fraction. The fine rows lift the LP
    bound of the 50-workload, 36-month benchmark from $2.53M to $2.69M and its plan from
    $4.29M to $4.07M; on the reference they lift the exact model's LP bound from $685,301 to
    $697,639, and HiGHS proves its optimum in 13-30 s from scratch where with the compact rows
    it stopped at 2 % after 90 s (issue 25), so small models have them too. (One row per spare
    period was smaller still, but HiGHS 1.16's presolve returned a dearer plan as optimal on
    tests/fixtures/infeasible/budget.yaml with it.)
    """
    for (key, t, s), xs in in_use.items():
        on = m.on[(w, key, t)]
        month = m.cands.months[t]
        if s < 0:
            big, name = sum(up for _, up in xs), nid("serve_in_use", w, key, month)
        else:
            big = max(up for _, up in xs)
            name = nid("serve_in_use", w, key, month, m.cands.slices[s].name)
        m.add([*((x, 1.0) for x, _ in xs), (on, -big)], LE, 0, name)


# Up to this many rented (pair, month, slice) cells every rented replica is an integer of
# the model (the exact optimum); above it, uncapped rentals are solved as continuous and made
# whole afterwards (the repair step, :func:`planner.optimize.solve.whole_replicas`). Integer rentals
# everywhere left CBC and HiGHS at a 2-4 % gap after 60 s on the reference (~1,000 cells);
# small models are then proven on the exact model from the repaired plan
# (:data:`planner.optimize.solve.EXACT_POLISH_INTEGERS`), which needs that plan as its start.
EXACT_RENTAL_CELLS = 300
# Up to this many rented cells the spare's in-use rows are per load slice (:func:`_add_in_use`;
# from 0 since issue 25: they make the reference provable). Above (the 200-workload, 36-month
# benchmark: 116k cells, 259k rows), the LP relaxation that the MIP start rounds no longer
# finished in half of a 120 s limit, and HiGHS's own plan cost 4x more.
IN_USE_PER_CELL = (0, 50_000)


def _rental_cells(m: PlannerModel) -> int:
    spot_ok = m.inputs.problem.offers.spot_for_serving
    per_month = len(m.cands.slices)
    return sum(
        len(serve_rental_pairs(cands, m.cands.offers.values(), spot_ok))
        * len(m.cands.active[w])
        * per_month
        for w, cands in m.cands.serve.items()
    )


def _offer_months(m: PlannerModel, o: Offer) -> range:
    p = m.inputs.problem
    return offer_months(o, p.horizon.start, len(m.cands.months))


def _replica_category(o: Offer | None, exact: bool) -> str:
    """Owned replicas and those on capped or reserved offers are always integer; the rest are
    integer in a small model, else continuous and made whole after the solve (rounding up an
    uncapped rental keeps every constraint: more capacity, no cap to break)."""
    if exact or o is None or o.kind == "reserved" or o.max_gpus is not None:
        return pulp.LpInteger
    return pulp.LpContinuous


@dataclass
class _Largest:
    """The spare capacity term ``-R L`` of one workload and month, and the binaries that say
    which replica types are in use (only types faster than the slowest need one)."""

    minus: list[tuple[pulp.LpVariable, float]] = field(default_factory=list)
    flags: dict[str, pulp.LpVariable] = field(default_factory=dict)
    order: list[tuple[float, pulp.LpVariable]] = field(default_factory=list)  # by rate
    constant: float = 0.0


# Up to this many rented cells the spare's largest rate is in incremental form
# (:func:`_largest_replica`): it makes small models provable. Above, the per-type form stays:
# with the incremental one the searched start of 50 workloads x all GPUs x 36 months left a
# $5.13M plan at 120 s where the per-type form leaves $3.86M.
INCREMENTAL_SPARE_CELLS = 5_000


# Which replica types a service uses is decided per period of this many months (from its
# first active month): the spare capacity R L covers the largest replica type in use in the
# period. Per month was exact but left CBC and HiGHS at a 2-7 % gap after 60 s on the
# reference (a binary per type and month); per year solves in seconds and is conservative
# only in a year whose replica types change.
SPARE_PERIOD_MONTHS = 12


def _largest_replica(
    m: PlannerModel, w: str, t: int, options: list, R: int, incremental: bool = True
) -> _Largest:
    """The largest replica rate in use ``L[w,p]`` for the period ``p`` starting in month
    ``t``, in incremental form over the types faster than the slowest, sorted by rate
    ``mu_1 <= mu_2 <= ...`` (``mu_0`` the slowest's; one type only: ``L = mu`` is a constant)::

        serve_largest_<k>_<p>            L - sum_i (mu_i - mu_{i-1}) on_i >= mu_0
        serve_largest_order_<k>_<r>_<p>  on_{i+1} <= on_i

    ``on_i`` reads "the largest type in use is at least as fast as type i", so type i may
    serve only where ``on_i`` is 1 (``serve_in_use``), and ``L >= mu_i`` then. This is the
    same set of plans as ``L >= mu_i on_i`` per type (a flag costs nothing; a slower type's
    flag set with a faster one's only permits it), with a tighter LP: on the reference the
    exact model's LP bound is $710,250 against $697,639, and HiGHS proves the optimum from
    it in 5.4 s instead of 9.4 s. With ``incremental`` False (models of more than
    :data:`INCREMENTAL_SPARE_CELLS` rental cells) the rows are ``serve_largest_<k>_<r>_<p>``:
    ``L >= mu_r on_r`` per type, the form the searched start of large models was tuned on."""
    out = _Largest()
    if R == 0 or not options:
        return out
    rates = {c.key: c.rate_rps for c, _, _ in options}
    lo = min(rates.values())
    if max(rates.values()) <= lo * (1 + 1e-12):
        out.constant = R * lo
        return out
    month = m.cands.months[t]
    big = m.var(nid("largest", w, month), lo, max(rates.values()))
    out.minus = [(big, -float(R))]
    steps, below, prev = [(big, 1.0)], None, lo
    for mu, key in sorted((mu, key) for key, mu in rates.items() if mu > lo * (1 + 1e-12)):
        on = m.var(nid("on", w, key, month), 0, 1, pulp.LpInteger)
        out.flags[key] = on
        if not incremental:
            m.add([(big, 1.0), (on, -mu)], GE, 0, nid("serve_largest", w, key, month))
            continue
        out.order.append((mu, on))
        steps.append((on, -(mu - prev)))
        if below is not None:
            m.add([(on, 1.0), (below, -1.0)], LE, 0, nid("serve_largest_order", w, key, month))
        below, prev = on, mu
    if incremental:
        m.add(steps, GE, lo, nid("serve_largest", w, month))
    return out


def spare_flags(m: PlannerModel, w: str, key: str, t: int) -> list[pulp.LpVariable]:
    """The in-use flags a plan sets when replica type ``key`` is the largest it uses in month
    ``t``: its own and every slower type's (the flags are ordered, :func:`_largest_replica`);
    a request mix's flags are per type (:func:`add_mix_serving_constraints`)."""
    order = m.spare_order.get((w, t))
    if order is None:
        return [m.on[(w, key, t)]] if (w, key, t) in m.on else []
    mu = m.serve_cand(w, key).rate_rps
    return [on for rate, on in order if rate <= mu * (1 + 1e-12)]


def add_capacity_constraints(m: PlannerModel) -> None:
    """capacity per GPU type, month and slice; also builds busy GPU-hours per (g, t)."""
    T = len(m.cands.months)
    slices = m.cands.slices
    use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = defaultdict(list)
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    for (w, key, t, s), n in m.n.items():
        c = index[(w, key)]
        use[(c.gpu, t, s)].append((n, float(c.tp)))
    for (job, key, t, s), z in m.z.items():
        c = m.train_cand(job, key)
        use[(c.gpu, t, s)].append((z, c.gpus / slices[s].hours_per_month))
    for g in m.inputs.gpus:
        for t in range(T):
            busy = []
            for s, sl in enumerate(slices):
                terms = use.get((g, t, s))
                if terms:
                    m.add(
                        [*terms, *_minus_own(m, g, t)],
                        LE,
                        existing_in_service(m, g, t),
                        nid("capacity", g, m.cands.months[t], sl.name),
                    )
                    busy.extend((v, coef * sl.hours_per_month) for v, coef in terms)
            m.busy[(g, t)] = pulp.LpAffineExpression(busy)


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
                        nid("reserved_cap", oid, m.cands.months[t], sl.name),
                    )
                if o.max_gpus is not None:
                    m.add(
                        terms, LE, o.max_gpus, nid("availability", oid, m.cands.months[t], sl.name)
                    )


def add_budget_constraints(m: PlannerModel) -> None:
    """budget_capex and (optional) budget_total."""
    b = m.inputs.problem.budget
    m.add(m.cost_terms["capex"], LE, b.capex_usd, "budget_capex")
    if b.total_usd is not None:
        m.add(nominal_total(m), LE, b.total_usd, "budget_total")


def add_site_constraints(m: PlannerModel) -> None:
    """power_cap per month and licence per consumer GPU type."""
    site = m.inputs.problem.site
    T = len(m.cands.months)
    if site.power_cap_kw is not None:
        kw: dict[pulp.LpVariable, float] = defaultdict(float)
        for t in range(T):
            # servers and cards bought up to month t: host watts per server, TDP per card
            for g, gpu in m.inputs.gpus.items():
                kw[m.buy[(g, t)]] += gpu.host_w * site.pue / 1000
                for x, n in m.cards[(g, t)].items():
                    kw[x] += n * gpu.tdp_w.value * site.pue / 1000
            terms, existing_kw = dict(kw), 0.0
            for g, gpu in m.inputs.gpus.items():  # existing cards draw too, until sold
                per_card = (gpu.tdp_w.value + gpu.host_w / max(gpu.slots, 1)) * site.pue / 1000
                existing_kw += existing_in_service(m, g, t) * per_card
                for x, n in m.sold.get((g, t), {}).items():
                    terms[x] = terms.get(x, 0.0) - n * per_card
            m.add(terms, LE, site.power_cap_kw - existing_kw, nid("power_cap", m.cands.months[t]))
    if not site.consumer_gpus_allowed:
        for g, gpu in m.inputs.gpus.items():
            if gpu.consumer:
                m.add([(m.buy[(g, t)], 1) for t in range(T)], EQ, 0, nid("licence", g))


@dataclass(frozen=True)
class OwnedCoefficients:
    """Cost of one server and of one card bought at the start of month ``t``, per kind.

    Nominal dollars over the rest of the horizon (``rem = T - t`` months):
    capex ``K^srv`` / ``K^card``; idle power ``H e rem`` x (host watts / card idle watts);
    hosting ``rem`` x (per-GPU fee for a card; colocation $/kW-month x kW of host / card TDP);
    residual value at the horizon end (resale share of the card, chassis share of the chassis).
    ``pv_*`` are the same cash discounted monthly (:mod:`planner.physics.economics`).
    """

    capex: tuple[float, float]
    power: tuple[float, float]
    hosting: tuple[float, float]
    residual: tuple[float, float]
    pv_capex: tuple[float, float]
    pv_power: tuple[float, float]
    pv_hosting: tuple[float, float]
    pv_residual: tuple[float, float]


def owned_coefficients(m: PlannerModel, gpu: GpuSpec, t: int) -> OwnedCoefficients:
    """(per server, per card) costs of owning from month ``t``; see :class:`OwnedCoefficients`."""
    site, fin = m.inputs.problem.site, m.inputs.finance
    T, r = len(m.cands.months), fin.discount_rate
    rem = T - t
    e = site.power_usd_per_kwh * site.pue / 1000.0
    host_w, chassis = gpu.host_w, gpu.chassis_usd
    card_usd = gpu.purchase_usd.value
    pv_now = economics.discount_factor(r, t)
    months_pv = economics.annuity_factor(r, t, rem)
    month_power = (host_w * HOURS_PER_MONTH * e, gpu.idle_w.value * HOURS_PER_MONTH * e)
    colo = fin.colo_usd_per_kw_month / 1000.0
    month_host = (colo * host_w, site.hosting_usd_per_gpu_month + colo * gpu.tdp_w.value)
    age, years, mode = rem, fin.depreciation_years, fin.residual
    resid = (
        chassis * economics.chassis_residual_share(age, mode, years),
        card_usd * economics.residual_share(gpu, age, mode, years),
    )
    pv_end = economics.discount_factor(r, T)
    return OwnedCoefficients(
        capex=(chassis, card_usd),
        power=(month_power[0] * rem, month_power[1] * rem),
        hosting=(month_host[0] * rem, month_host[1] * rem),
        residual=resid,
        pv_capex=(chassis * pv_now, card_usd * pv_now),
        pv_power=(month_power[0] * months_pv, month_power[1] * months_pv),
        pv_hosting=(month_host[0] * months_pv, month_host[1] * months_pv),
        pv_residual=(resid[0] * pv_end, resid[1] * pv_end),
    )


def _owned_cost_terms(m: PlannerModel) -> dict[str, dict[pulp.LpVariable, float]]:
    """Nominal and present-value owned costs by kind, on buy (servers) and card variables."""
    site = m.inputs.problem.site
    e = site.power_usd_per_kwh * site.pue / 1000.0
    r = m.inputs.finance.discount_rate
    kinds = ("capex", "power", "hosting", "residual")
    out: dict[str, dict[pulp.LpVariable, float]] = {
        k: defaultdict(float) for k in (*kinds, *(f"pv_{k}" for k in kinds))
    }
    for g, gpu in m.inputs.gpus.items():
        _, per_busy = power_coefficients(gpu, e)
        for t in range(len(m.cands.months)):
            k = owned_coefficients(m, gpu, t)
            for kind in (*kinds, *(f"pv_{k}" for k in kinds)):
                per_server, per_card = getattr(k, kind)
                out[kind][m.buy[(g, t)]] += per_server
                for x, n in m.cards[(g, t)].items():
                    out[kind][x] += per_card * n
            pv_t = economics.discount_factor(r, t)
            for x, coef in m.busy[(g, t)].items():
                out["power"][x] += per_busy * coef
                out["pv_power"][x] += per_busy * coef * pv_t
    return out


def _rental_cost_terms(m: PlannerModel) -> tuple[list, list]:
    """(nominal, present value) rental terms: hours paid in their month, a reservation
    monthly over its term."""
    r = m.inputs.finance.discount_rate
    slices = m.cands.slices
    nominal: list[tuple[pulp.LpVariable, float]] = []
    pv: list[tuple[pulp.LpVariable, float]] = []
    for (job, key, oid, t), v in m.r.items():
        c = m.train_cand(job, key)
        o = m.cands.offers[oid]
        usd = o.marginal_usd_per_gpu_hour * rental_gpus(c.gpus, o)
        nominal.append((v, usd))
        pv.append((v, usd * economics.discount_factor(r, t)))
    index = {(w, c.key): c for w, cl in m.cands.serve.items() for c in cl}
    for (w, key, oid, t, s), q in m.q.items():
        o = m.cands.offers[oid]
        if o.kind != "reserved":
            usd = o.marginal_usd_per_gpu_hour * index[(w, key)].tp * slices[s].hours_per_month
            nominal.append((q, usd))
            pv.append((q, usd * economics.discount_factor(r, t)))
    for (oid, t0), v in m.res.items():
        o = m.cands.offers[oid]
        L = o.term_months or 1
        month = o.usd_per_gpu_hour * o.gpus_per_instance * HOURS_PER_MONTH
        nominal.append((v, month * L))
        pv.append((v, month * economics.annuity_factor(r, t0, L)))
    return nominal, pv


def existing_month_costs(m: PlannerModel, gpu: GpuSpec) -> tuple[float, float]:
    """(power, hosting) USD per existing card per month in service: idle watts of the card
    and its share of the host (``host_w / slots``) at the site's power price and PUE; the
    per-GPU fee plus colocation on its TDP and host share (busy power is in ``busy``)."""
    site, fin = m.inputs.problem.site, m.inputs.finance
    e = site.power_usd_per_kwh * site.pue / 1000.0
    host_share = gpu.host_w / max(gpu.slots, 1)
    power = (gpu.idle_w.value + host_share) * HOURS_PER_MONTH * e
    colo = fin.colo_usd_per_kw_month / 1000.0 * (gpu.tdp_w.value + host_share)
    return power, site.hosting_usd_per_gpu_month + colo


def _existing_cost_terms(m: PlannerModel) -> dict[str, pulp.LpAffineExpression]:
    """Nominal and present-value terms of ``fleet``: power and hosting of existing cards in
    service (a constant, less what each sale saves), sale proceeds (negative: the card's
    resale share at its age x its catalog price), their residual value at the horizon end,
    and contracts' committed cost (a constant)."""
    T, fin = len(m.cands.months), m.inputs.finance
    r = fin.discount_rate
    d = [economics.discount_factor(r, t) for t in range(T + 1)]
    out = {
        k: pulp.LpAffineExpression()
        for k in (
            "power",
            "hosting",
            "sales",
            "residual",
            "committed",
            "pv_power",
            "pv_hosting",
            "pv_sales",
            "pv_residual",
            "pv_committed",
        )
    }
    for i, o in enumerate(m.inputs.problem.fleet.owned):
        if o.gpu not in m.inputs.gpus:
            continue
        gpu, t0 = m.inputs.gpus[o.gpu], existing_start(m, i)
        power, hosting = existing_month_costs(m, gpu)
        price = gpu.purchase_usd.value
        end_value = price * economics.residual_share(
            gpu, existing_age(m, i, T), fin.residual, fin.depreciation_years
        )
        for kind, per in (("power", power), ("hosting", hosting)):
            out[kind] += o.count * per * (T - t0)
            out[f"pv_{kind}"] += o.count * per * sum(d[t0:T])
        out["residual"] += o.count * end_value
        out["pv_residual"] += o.count * end_value * d[T]
        unit = gpu.node_gpus
        for t in range(t0, T):
            v = m.sell.get((i, t))
            if v is None:
                continue
            share = economics.sale_share(gpu, existing_age(m, i, t))
            for kind, per in (("power", power), ("hosting", hosting)):
                out[kind] += -unit * per * (T - t) * v
                out[f"pv_{kind}"] += -unit * per * sum(d[t:T]) * v
            out["sales"] += -unit * price * share * v
            out["pv_sales"] += -unit * price * share * d[t] * v
            out["residual"] += -unit * end_value * v
            out["pv_residual"] += -unit * end_value * d[T] * v
    for o in m.cands.offers.values():
        if not o.committed:
            continue
        month = o.usd_per_gpu_hour * (o.max_gpus or 0) * HOURS_PER_MONTH
        for t in _offer_months(m, o):
            out["committed"] += month
            out["pv_committed"] += month * d[t]
    return out


def build_cost_terms(m: PlannerModel) -> None:
    """Nominal cost terms (capex, power, hosting, rental), their present values and the
    residual value of owned hardware at the horizon end."""
    owned = _owned_cost_terms(m)
    rental, pv_rental = _rental_cost_terms(m)
    fleet = _existing_cost_terms(m)
    m.cost_terms = {
        k: pulp.LpAffineExpression(owned[k]) + fleet.get(k, 0)
        for k in ("capex", "power", "hosting")
    } | {
        "rental": pulp.LpAffineExpression(rental),
        "committed": fleet["committed"],
        "sales": fleet["sales"],
    }
    m.pv_terms = {
        k: pulp.LpAffineExpression(owned[f"pv_{k}"]) + fleet.get(f"pv_{k}", 0)
        for k in ("capex", "power", "hosting")
    } | {
        "rental": pulp.LpAffineExpression(pv_rental),
        "committed": fleet["pv_committed"],
        "sales": fleet["pv_sales"],
        "residual": -(pulp.LpAffineExpression(owned["pv_residual"]) + fleet["pv_residual"]),
    }
    m.residual = pulp.LpAffineExpression(owned["residual"]) + fleet["residual"]


def _present_value(m: PlannerModel) -> pulp.LpAffineExpression:
    """The objective: every term's present value (constants of ``fleet`` included)."""
    return pulp.lpSum(m.pv_terms.values())


def nominal_total(m: PlannerModel) -> pulp.LpAffineExpression:
    """Undiscounted spend over the horizon (capex + power + hosting + rental + committed
    contracts - sale proceeds), what ``budget.total_usd`` caps; the objective is its present
    value less the residual."""
    return pulp.lpSum(m.cost_terms.values())


def build_model(inputs: Inputs, cands: Candidates) -> PlannerModel:
    """Build the MILP described in this module's docstring."""
    prob = pulp.LpProblem(nid("gpu_plan", inputs.problem.name)[:60] or "gpu_plan", pulp.LpMinimize)
    m = PlannerModel(prob=prob, inputs=inputs, cands=cands)
    add_purchase_variables(m)
    add_existing_fleet_constraints(m)
    add_training_constraints(m)
    add_serving_constraints(m)
    add_capacity_constraints(m)
    add_rental_constraints(m)
    add_server_constraints(m)
    build_cost_terms(m)
    m.prob += _present_value(m), "npv_cost"
    add_budget_constraints(m)
    add_site_constraints(m)
    return m
