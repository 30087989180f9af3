"""The model's frame: :class:`PlannerModel` (the PuLP problem and handles to its variables by
domain ids), :func:`nid` (PuLP-safe names) and the small helpers every constraint family shares:
a training job's spec, an offer's months inside the horizon, the fleet of a GPU type in a month
(cards bought, existing cards in service, cards sold) and an existing entry's start and age.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import pulp

from planner.inputs.catalog import Offer
from planner.inputs.problem import Inputs, TrainJob, month_index
from planner.optimize.candidates import Candidates, ServeCandidate, TrainCandidate, offer_months
from planner.physics import economics

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


@dataclass
class PlannerModel:
    """The PuLP problem and handles to its variables, by domain ids."""

    prob: pulp.LpProblem
    inputs: Inputs
    cands: Candidates
    buy: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)  # servers
    cards: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)
    own: dict[tuple[str, int], pulp.LpAffineExpression] = field(default_factory=dict)
    # nodes of cards owned in month t, an integer of its own (``fleet_owned`` rows): the rows
    # that draw on the fleet (capacity, train_gpus) see it instead of the sum of purchases
    owned: dict[tuple[str, int], pulp.LpVariable] = field(default_factory=dict)
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
    # GPU types kept buyable even where owning them cannot pay off in this model alone: a
    # scenario of a two-stage plan shares its purchases with the others (planner.plan.scenarios)
    force_ownable: frozenset[str] = frozenset()
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


def job_spec(inputs: Inputs, job: str) -> TrainJob:
    """The problem's training job of this name."""
    return next(x for x in inputs.problem.workloads.train if x.name == job)


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


def minus_own(m: PlannerModel, g: str, t: int) -> list[tuple[pulp.LpVariable, float]]:
    """``-(cards bought so far) + (existing cards sold so far)``: with the existing cards in
    service (:func:`existing_in_service`) on the right-hand side, the fleet in month t."""
    node = m.owned.get((g, t))
    own = {node: float(m.inputs.gpus[g].node_gpus)} if node is not None else m.own[(g, t)]
    terms = {v: -coef for v, coef in own.items()}
    for v, coef in m.sold.get((g, t), {}).items():
        terms[v] = terms.get(v, 0.0) + coef
    return list(terms.items())


def existing_in_service(m: PlannerModel, g: str, t: int) -> int:
    """Cards of ``fleet.owned`` of type g in service in month t before any sale."""
    return m.existing.get((g, t), 0)


def offer_term_months(m: PlannerModel, o: Offer) -> range:
    """Month indexes of the horizon in which offer ``o`` can be used (a committed offer: its
    term)."""
    p = m.inputs.problem
    return offer_months(o, p.horizon.start, len(m.cands.months))


def rent_factor(m: PlannerModel, gpu: str, t: int) -> float:
    """A rented GPU-hour of ``gpu`` in month ``t`` relative to its catalog price."""
    return economics.price_factor(m.inputs.market.rent(gpu), t)


def buy_factor(m: PlannerModel, gpu: str, t: int) -> float:
    """A card or server of ``gpu`` ordered in month ``t`` relative to its catalog price."""
    return economics.price_factor(m.inputs.market.buy(gpu), t)


def lead_months(m: PlannerModel, gpu: str) -> int:
    """Months from ordering ``gpu`` to its cards in service."""
    return m.inputs.market.lead_months(gpu)


def capex_month(m: PlannerModel, gpu: str, t: int) -> tuple[int, int]:
    """(order month, month the capex is paid) of a purchase in service from month ``t``:
    ordered ``lead`` months before; paid at the order unless ``finance.capex_at: delivery``."""
    order = max(0, t - lead_months(m, gpu))
    return order, (order if m.inputs.finance.capex_at == "order" else t)
