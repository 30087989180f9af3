r"""The MILP: buy, own, rent and reserve GPUs to meet every workload at least cost.

Stage 3 of the flow. Builds a PuLP problem from :class:`~planner.problem.Inputs` (already
validated) and :class:`~planner.candidates.Candidates` (physics already applied). It never
reads files and never solves; :mod:`planner.solve` does that.

Notation
--------
=================  ==========================================================================
``g``              GPU type; ``n_g`` GPUs per purchasable node, ``K_g`` capex per GPU (card +
                   server/network share), ``P^idle_g``, ``P^busy_g`` watts (idle incl. host
                   share; busy adds ``tdp - idle``), ``P^max_g = tdp + host`` watts
``t``              month, ``H = 730`` hours each; ``s`` load slice with ``w_s`` hours/month
``j, c``           training job and its candidate (GPU ``g_c``, ``k_c`` GPUs, ``h_c`` wall
                   hours to finish); window months ``W_j``, window hours ``H_j``
``k, r``           serving workload and candidate (GPU ``g_r``, ``m_r`` GPUs per replica,
                   ``mu_r`` req/s per replica within the p95 SLO); demand ``D_kts`` req/s
``o``              rental offer: GPU ``g_o``, price ``p_o`` $/GPU-h, kind on-demand, spot or
                   reserved (term ``L_o`` months), cap ``A_o`` GPUs, unit ``u_o``
``e``              electricity $/kWh x PUE / 1000 (so watts x hours x e = dollars)
=================  ==========================================================================

Variables
---------
``buy[g,t]``      integer nodes bought at the start of month t; ``own[g,t] = n_g sum_{tau<=t} buy``
``y[j,c]``        binary, job j runs as candidate c
``a[j,c,t]``      binary, the job uses owned GPUs in month t (then ``own >= k_c``)
``z[j,c,t,s]``    wall hours of job j on owned GPUs in month t, slice s
``r[j,c,o]``      wall hours of job j rented from offer o (spot hours progress 1/(1+overhead))
``n[k,r,t,s]``    integer replicas of workload k on owned GPUs
``q[k,r,o,t,s]``  replicas rented from offer o; ``v[k,r,t,s] = sum_o q`` is integer (demand is
                  flat within a slice, so each of its hours needs whole replicas)
``res[o,t]``      integer instances of reserved offer o committed from month t for ``L_o`` months

Objective (``total_cost``)
--------------------------
.. math::
   \min \sum_{g,t} n_g K_g buy_{gt}
      + e \sum_{g,t} \big(H P^{idle}_g own_{gt} + (tdp_g - idle_g) busy_{gt}\big)
      + hosting \sum_{g,t} own_{gt}
      + \sum_{j,c,o} p_o \lceil k_c/u_o \rceil u_o\, r_{jco}
      + \sum_{k,r,o\,\notin reserved,t,s} p_o m_r w_s q_{krots}
      + \sum_{o \in reserved, t} p_o u_o L_o H\, res_{ot}

with ``busy[g,t] = sum_s w_s sum m_r n[k,r,t,s] + sum k_c z[j,c,t,s]`` (GPU-hours).

Constraints (label used for the constraint names)
-------------------------------------------------
``train_assign_<j>``            sum_c y[j,c] = 1
``train_progress_<j>_<c>``      sum_ts z + sum_o r (1/(1+ovh) for spot) = h_c y[j,c]
``train_window_<j>_<c>``        sum_ts z + sum_o r <= H_j y[j,c]
``train_spot_share_<j>_<c>``    spot progress <= share_j h_c y[j,c]
``train_slot_<j>_<c>_<t>_<s>``  z <= w_s a[j,c,t];  ``train_use_<j>_<c>_<t>``: a <= y
``train_gpus_<j>_<c>_<t>``      k_c a[j,c,t] <= own[g_c,t]
``serve_demand_<k>_<t>_<s>``    sum_r mu_r (n + sum_o q) >= D[k,t,s]
``rent_whole_<k>_<r>_<t>_<s>``  sum_o q[k,r,o,t,s] = v[k,r,t,s] (integer)
``capacity_<g>_<t>_<s>``        sum m_r n + sum k_c z / w_s <= own[g,t]
``reserved_cap_<o>_<t>_<s>``    sum m_r q[.,o,t,s] <= u_o sum_{t-L_o < tau <= t} res[o,tau]
``availability_<o>_<t>_<s>``    sum m_r q[.,o,t,s] <= A_o (offers with a cap)
``budget_capex``                sum n_g K_g buy <= capex budget
``budget_total``                total cost <= total budget (when given)
``power_cap_<t>``               sum_g own[g,t] P^max_g PUE / 1000 <= cap kW
``licence_<g>``                 sum_t buy[g,t] = 0 for GeForce cards unless the site allows them
                                (renting consumer cards from a provider is allowed)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pulp

from planner.candidates import Candidates, ServeCandidate, TrainCandidate, rental_gpus
from planner.catalog import GpuSpec, Offer
from planner.demand import HOURS_PER_MONTH
from planner.problem import Inputs


def nid(*parts: object) -> str:
    """A PuLP-safe name from domain ids.

    >>> nid("buy", "h100-sxm", "2027-01")
    'buy_h100_sxm_2027_01'
    """
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(str(p) for p in parts)).strip("_")


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


@dataclass
class PlannerModel:
    """The PuLP problem and handles to its variables, by domain ids."""

    prob: pulp.LpProblem
    inputs: Inputs
    cands: Candidates
    buy: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)
    own: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)
    y: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)
    a: dict[tuple[str, str, int], pulp.LpVariable] = field(default_factory=dict)
    z: dict[tuple[str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    r: dict[tuple[str, str, str], pulp.LpVariable] = field(default_factory=dict)
    n: dict[tuple[str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    q: dict[tuple[str, str, str, int, int], pulp.LpVariable] = field(default_factory=dict)
    res: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)
    cost_terms: dict[str, pulp.LpAffineExpression] = field(default_factory=dict)
    busy: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)

    def train_cand(self, job: str, key: str) -> TrainCandidate:
        return next(c for c in self.cands.train[job] if c.key == key)

    def serve_cand(self, w: str, key: str) -> ServeCandidate:
        return next(c for c in self.cands.serve[w] if c.key == key)


def _spot_overhead(inputs: Inputs, job: str) -> tuple[float, float, bool]:
    j = next(x for x in inputs.problem.workloads.train if x.name == job)
    return j.spot.overhead, j.spot.max_share, j.spot.allowed


def train_offers(m: PlannerModel, c: TrainCandidate) -> list[Offer]:
    """Offers a training candidate may rent.

    A multi-GPU job needs its GPUs inside instances linked like the physics assumes: an
    instance of at least ``min(k, 8)`` GPUs (NVLink/PCIe inside one server; between 8-GPU
    instances the cluster network). Forty-eight 1-GPU VMs are not a 48-GPU training node.
    """
    ovh, share, allowed = _spot_overhead(m.inputs, c.job)
    return [
        o
        for o in m.cands.offers.values()
        if o.gpu == c.gpu
        and o.kind != "reserved"
        and o.gpus_per_instance >= min(c.gpus, 8)
        and (o.max_gpus is None or rental_gpus(c.gpus, o) <= o.max_gpus)
        and (o.kind != "spot" or (allowed and share > 0))
    ]


def serve_offers(m: PlannerModel, c: ServeCandidate) -> list[Offer]:
    """Offers a serving candidate may rent: a tensor-parallel replica needs its ``tp`` GPUs
    in one instance; spot only where the problem allows it for serving."""
    spot_ok = m.inputs.problem.offers.spot_for_serving
    return [
        o
        for o in m.cands.offers.values()
        if o.gpu == c.gpu and o.gpus_per_instance >= c.tp and (o.kind != "spot" or spot_ok)
    ]


def add_purchase_variables(m: PlannerModel) -> None:
    T = len(m.cands.months)
    for g, gpu in m.inputs.gpus.items():
        running = pulp.LpAffineExpression()
        for t in range(T):
            v = pulp.LpVariable(nid("buy", g, m.cands.months[t]), lowBound=0, cat="Integer")
            m.buy[(g, t)] = v
            running = running + gpu.node_gpus * v
            m.own[(g, t)] = running


def add_training_constraints(m: PlannerModel) -> None:
    """train_assign, train_progress, train_window, train_spot_share, train_slot, train_use, train_gpus."""
    p = m.prob
    slices = m.cands.slices
    for job, cands in m.cands.train.items():
        ovh, share, _ = _spot_overhead(m.inputs, job)
        if not cands:
            continue
        ys = []
        for c in cands:
            y = pulp.LpVariable(nid("y", job, c.key), cat="Binary")
            m.y[(job, c.key)] = y
            ys.append(y)
            owned_hours = []
            for t in m.cands.window[job]:
                a = pulp.LpVariable(nid("a", job, c.key, m.cands.months[t]), cat="Binary")
                m.a[(job, c.key, t)] = a
                p += a <= y, nid("train_use", job, c.key, m.cands.months[t])
                p += (
                    c.gpus * a <= m.own[(c.gpu, t)],
                    nid("train_gpus", job, c.key, m.cands.months[t]),
                )
                for s, sl in enumerate(slices):
                    z = pulp.LpVariable(
                        nid("z", job, c.key, m.cands.months[t], sl.name), lowBound=0
                    )
                    m.z[(job, c.key, t, s)] = z
                    owned_hours.append(z)
                    p += (
                        z <= sl.hours_per_month * a,
                        nid("train_slot", job, c.key, m.cands.months[t], sl.name),
                    )
            rented, progress, spot_progress = [], [], []
            for o in train_offers(m, c):
                r = pulp.LpVariable(nid("r", job, c.key, o.id), lowBound=0)
                m.r[(job, c.key, o.id)] = r
                rented.append(r)
                if o.kind == "spot":
                    progress.append((r, 1.0 / (1.0 + ovh)))
                    spot_progress.append((r, 1.0 / (1.0 + ovh)))
                else:
                    progress.append((r, 1.0))
            p += (
                pulp.lpSum(owned_hours) + pulp.LpAffineExpression(progress) == c.wall_hours * y,
                nid("train_progress", job, c.key),
            )
            p += (
                pulp.lpSum(owned_hours) + pulp.lpSum(rented)
                <= m.cands.window_hours[job] * y,
                nid("train_window", job, c.key),
            )
            if spot_progress:
                p += (
                    pulp.LpAffineExpression(spot_progress) <= share * c.wall_hours * y,
                    nid("train_spot_share", job, c.key),
                )
        p += pulp.lpSum(ys) == 1, nid("train_assign", job)


def add_serving_constraints(m: PlannerModel) -> None:
    """serve_demand per workload, month and slice."""
    p = m.prob
    slices = m.cands.slices
    for w, cands in m.cands.serve.items():
        for t in m.cands.active[w]:
            for s, sl in enumerate(slices):
                terms = []
                for c in cands:
                    n = pulp.LpVariable(
                        nid("n", w, c.key, m.cands.months[t], sl.name), lowBound=0, cat="Integer"
                    )
                    m.n[(w, c.key, t, s)] = n
                    terms.append((n, c.rate_rps))
                    rented = []
                    for o in serve_offers(m, c):
                        q = pulp.LpVariable(
                            nid("q", w, c.key, o.id, m.cands.months[t], sl.name), lowBound=0
                        )
                        m.q[(w, c.key, o.id, t, s)] = q
                        terms.append((q, c.rate_rps))
                        rented.append(q)
                    if rented:
                        # Demand is flat within a slice, so every hour of it needs the same
                        # whole number of rented replicas: their total is an integer.
                        v = pulp.LpVariable(
                            nid("v", w, c.key, m.cands.months[t], sl.name), lowBound=0, cat="Integer"
                        )
                        p += (
                            pulp.lpSum(rented) == v,
                            nid("rent_whole", w, c.key, m.cands.months[t], sl.name),
                        )
                p += (
                    pulp.LpAffineExpression(terms) >= m.cands.demand[(w, t, s)],
                    nid("serve_demand", w, m.cands.months[t], sl.name),
                )


def add_capacity_constraints(m: PlannerModel) -> None:
    """capacity per GPU type, month and slice; also builds busy GPU-hours per (g, t)."""
    T = len(m.cands.months)
    slices = m.cands.slices
    use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = {}
    for (w, key, t, s), n in m.n.items():
        c = m.serve_cand(w, key)
        use.setdefault((c.gpu, t, s), []).append((n, float(c.tp)))
    for (job, key, t, s), z in m.z.items():
        c = m.train_cand(job, key)
        use.setdefault((c.gpu, t, s), []).append((z, c.gpus / slices[s].hours_per_month))
    for g in m.inputs.gpus:
        for t in range(T):
            busy = []
            for s, sl in enumerate(slices):
                terms = use.get((g, t, s), [])
                if terms:
                    m.prob += (
                        pulp.LpAffineExpression(terms) <= m.own[(g, t)],
                        nid("capacity", g, m.cands.months[t], sl.name),
                    )
                busy.extend((v, coef * sl.hours_per_month) for v, coef in terms)
            m.busy[(g, t)] = pulp.LpAffineExpression(busy)


def add_rental_constraints(m: PlannerModel) -> None:
    """reserved_cap and availability per offer, month and slice (serving rentals)."""
    T = len(m.cands.months)
    slices = m.cands.slices
    use: dict[tuple[str, int, int], list[tuple[pulp.LpVariable, float]]] = {}
    for (w, key, oid, t, s), q in m.q.items():
        use.setdefault((oid, t, s), []).append((q, float(m.serve_cand(w, key).tp)))
    for oid, o in m.cands.offers.items():
        if o.kind == "reserved":
            L = o.term_months or 1
            for t0 in range(T - L + 1):
                m.res[(oid, t0)] = pulp.LpVariable(
                    nid("res", oid, m.cands.months[t0]), lowBound=0, cat="Integer"
                )
        for t in range(T):
            for s, sl in enumerate(slices):
                terms = use.get((oid, t, s))
                if not terms:
                    continue
                lhs = pulp.LpAffineExpression(terms)
                if o.kind == "reserved":
                    L = o.term_months or 1
                    active = [
                        m.res[(oid, t0)] for t0 in range(max(0, t - L + 1), t + 1) if (oid, t0) in m.res
                    ]
                    m.prob += (
                        lhs <= o.gpus_per_instance * pulp.lpSum(active),
                        nid("reserved_cap", oid, m.cands.months[t], sl.name),
                    )
                if o.max_gpus is not None:
                    m.prob += (
                        lhs <= o.max_gpus,
                        nid("availability", oid, m.cands.months[t], sl.name),
                    )


def add_budget_constraints(m: PlannerModel) -> None:
    """budget_capex and (optional) budget_total."""
    b = m.inputs.problem.budget
    m.prob += m.cost_terms["capex"] <= b.capex_usd, "budget_capex"
    if b.total_usd is not None:
        m.prob += pulp.lpSum(m.cost_terms.values()) <= b.total_usd, "budget_total"


def add_site_constraints(m: PlannerModel) -> None:
    """power_cap per month and licence per consumer GPU type."""
    site = m.inputs.problem.site
    T = len(m.cands.months)
    if site.power_cap_kw is not None:
        for t in range(T):
            kw = pulp.LpAffineExpression(
                [
                    (v, gpu.node_gpus * (gpu.tdp_w.value + gpu.host_w_per_gpu.value) * site.pue / 1000)
                    for g, gpu in m.inputs.gpus.items()
                    for (gg, tau), v in m.buy.items()
                    if gg == g and tau <= t
                ]
            )
            m.prob += kw <= site.power_cap_kw, nid("power_cap", m.cands.months[t])
    if not site.consumer_gpus_allowed:
        for g, gpu in m.inputs.gpus.items():
            if gpu.consumer:
                m.prob += (
                    pulp.lpSum(m.buy[(g, t)] for t in range(T)) == 0,
                    nid("licence", g),
                )


def build_cost_terms(m: PlannerModel) -> None:
    site = m.inputs.problem.site
    e = site.power_usd_per_kwh * site.pue / 1000.0
    T = len(m.cands.months)
    slices = m.cands.slices
    capex, power, hosting = [], [], []
    for (g, t), v in m.buy.items():
        gpu = m.inputs.gpus[g]
        capex.append((v, gpu.node_gpus * gpu.unit_capex_usd))
    for g, gpu in m.inputs.gpus.items():
        per_month, per_busy = power_coefficients(gpu, e)
        for t in range(T):
            power.append((m.own[(g, t)], per_month))
            power.append((m.busy[(g, t)], per_busy))
            hosting.append((m.own[(g, t)], site.hosting_usd_per_gpu_month))
    rental = []
    for (job, key, oid), r in m.r.items():
        c = m.train_cand(job, key)
        o = m.cands.offers[oid]
        rental.append((r, o.usd_per_gpu_hour * rental_gpus(c.gpus, o)))
    for (w, key, oid, t, s), q in m.q.items():
        o = m.cands.offers[oid]
        if o.kind != "reserved":
            c = m.serve_cand(w, key)
            rental.append((q, o.usd_per_gpu_hour * c.tp * slices[s].hours_per_month))
    for (oid, _t0), v in m.res.items():
        o = m.cands.offers[oid]
        L = o.term_months or 1
        rental.append((v, o.usd_per_gpu_hour * o.gpus_per_instance * L * HOURS_PER_MONTH))

    def expr(pairs: list) -> pulp.LpAffineExpression:
        out = pulp.LpAffineExpression()
        for x, coef in pairs:
            out.addInPlace(x * coef if isinstance(x, pulp.LpAffineExpression) else pulp.LpAffineExpression([(x, coef)]))
        return out

    m.cost_terms = {
        "capex": pulp.LpAffineExpression(capex),
        "power": expr(power),
        "hosting": expr(hosting),
        "rental": pulp.LpAffineExpression(rental),
    }


def build_model(inputs: Inputs, cands: Candidates) -> PlannerModel:
    """Build the MILP described in this module's docstring."""
    prob = pulp.LpProblem(nid("gpu_plan", inputs.problem.name)[:60] or "gpu_plan", pulp.LpMinimize)
    m = PlannerModel(prob=prob, inputs=inputs, cands=cands)
    add_purchase_variables(m)
    add_training_constraints(m)
    add_serving_constraints(m)
    add_capacity_constraints(m)
    add_rental_constraints(m)
    build_cost_terms(m)
    m.prob += pulp.lpSum(m.cost_terms.values()), "total_cost"
    add_budget_constraints(m)
    add_site_constraints(m)
    return m
