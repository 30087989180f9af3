"""Serving candidates (:class:`ServeCandidate`: a plain replica or a deployment) and which
of them and of their (candidate, offer) pairs can matter: dominance pruning of owned replica
types and of rentals, and where a replica's workers may be rented.

Split from :mod:`planner.optimize.candidates` (which re-exports every name). The pruning
functions read candidates as data (``gpu``, ``tp``, ``rate_rps``, ``key``, ``bucket_rates``,
``workers``), so they are tested on plain namespaces.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.inputs.catalog import Offer
from planner.physics.capacity import BucketCapacity, layout_dict
from planner.physics.serve import ReplicaCapacity

if TYPE_CHECKING:
    from planner.physics.serving import Deployment


@dataclass(frozen=True)
class ServeCandidate:
    workload: str
    gpu: str
    tp: int  # GPUs per replica (a deployment: all its workers' GPUs)
    rate_rps: float  # one request shape: its rate; a mix: the mix rate (capacity.mix_rate)
    capacity: ReplicaCapacity
    # a request mix (workload.requests): the capacity per bucket, in the workload's order
    buckets: tuple[BucketCapacity, ...] = ()
    # None: a plain replica of tp GPUs (tp or ep, capacity.layout); else the deployment (rack-
    # wide workers, disaggregated prefill and decode, MTP) one replica is
    deployment: Deployment | None = None

    @property
    def key(self) -> str:
        if self.deployment is None:
            return f"{self.gpu}_tp{self.tp}"
        return f"{self.gpu}_{layout_slug(self.deployment.label())}"

    @property
    def layout(self) -> dict:
        """The replica's layout as a plan row carries it (:func:`planner.physics.capacity.layout_dict`)."""
        if self.deployment is not None:
            return layout_dict(self.deployment)
        mode = self.capacity.layout or "tp"
        worker = {"count": 1, "gpus": self.tp, "mode": mode}
        return {"label": f"1x{self.tp}:{mode}", "prefill": None, "decode": worker, "mtp": False}

    @property
    def workers(self) -> tuple[int, ...]:
        """GPUs of each worker kind (a plain replica: one worker of tp GPUs)."""
        return worker_gpus(self.layout)

    @property
    def mixed(self) -> bool:
        return len(self.buckets) > 1

    @property
    def bucket_rates(self) -> tuple[float, ...]:
        """Req/s per replica for each bucket (0: cannot serve it); one shape: ``(rate_rps,)``."""
        return tuple(b.rate for b in self.buckets) if self.buckets else (self.rate_rps,)

    @property
    def measured(self) -> bool:
        return any(b.measured is not None for b in self.buckets)


def layout_slug(label: str) -> str:
    """A deployment's label as part of a candidate key.

    >>> layout_slug("4x4:dep+1x32:dep mtp")
    '4x4dep_1x32dep_mtp'
    """
    return label.replace(":", "").replace("+", "_").replace(" ", "_")


def worker_gpus(layout: dict) -> tuple[int, ...]:
    """GPUs of each worker kind of a plan row's layout (decode, then prefill if any)."""
    kinds = [layout.get("decode"), layout.get("prefill")]
    return tuple(int(k["gpus"]) for k in kinds if isinstance(k, dict))


def rentable_on(workers: tuple[int, ...], offer: Offer) -> bool:
    """A replica whose workers have ``workers`` GPUs each can run on ``offer``'s instances:
    each worker inside one instance (its tensor-parallel or expert group shares the
    instance's NVLink), or, a worker wider than a server, across whole instances joined by a
    multi-node fabric. Workers of a
    disaggregated deployment may sit on different instances (the KV cache moves over the
    network).

    >>> from types import SimpleNamespace as NS
    >>> hgx, ib = NS(gpus_per_instance=8, multi_node=False), NS(gpus_per_instance=8, multi_node=True)
    >>> rentable_on((8,), hgx), rentable_on((16, 4), hgx), rentable_on((16, 4), ib), rentable_on((12,), ib)
    (True, False, True, False)
    >>> rentable_on((2,), NS(gpus_per_instance=1, multi_node=True))
    False
    """
    u = offer.gpus_per_instance
    multi = getattr(offer, "multi_node", False)
    return all(g <= u or (multi and g > SERVER_GPUS and g % u == 0) for g in workers)


# A worker of at most this many GPUs runs inside one server (one instance), as a plain
# replica always has; only a wider one spans instances over a multi-node fabric.
SERVER_GPUS = 8


def owned_serve_options(cands: list[ServeCandidate]) -> list[ServeCandidate]:
    """The serving candidates of one workload worth an owned-replica variable.

    Candidate ``b`` is left out when another ``a`` on the same GPU type has at most ``b``'s
    GPUs, ``mu_a <= mu_b`` and ``floor(tp_b / tp_a)`` replicas of ``a`` give at least
    ``mu_b``: on the same owned GPUs (some left idle where ``tp_a`` does not divide ``tp_b``,
    as a 20-GPU deployment's GPUs hold five of 4) they serve as much, count as at least as
    many replicas (``serve_floor``) and none is larger (the spare ``R L``), so any plan with
    ``b`` is matched at no higher cost (ties: the earlier key stays).

    >>> from types import SimpleNamespace as NS
    >>> c = lambda k, tp, mu: NS(gpu="g", tp=tp, rate_rps=mu, key=k)
    >>> [x.key for x in owned_serve_options([c("tp1", 1, 3.0), c("tp2", 2, 5.0), c("tp4", 4, 13.0)])]
    ['tp1', 'tp4']
    >>> [x.key for x in owned_serve_options([c("a", 1, 2.0), c("b", 1, 2.0)])]
    ['a']
    >>> [x.key for x in owned_serve_options([c("fast", 1, 4.0), c("tp2", 2, 3.0)])]
    ['fast', 'tp2']
    >>> [x.key for x in owned_serve_options([c("4", 4, 20.0), c("20", 20, 99.0), c("12", 12, 61.0)])]
    ['4', '12']
    """

    live = [c for c in cands if c.rate_rps > 0]
    test = mix_beats if any(getattr(c, "mixed", False) for c in live) else beats
    return [b for b in live if not any(test(a, b) for a in live)]


def beats(a: ServeCandidate, b: ServeCandidate) -> bool:
    """``floor(tp_b / tp_a)`` replicas of ``a`` do what one of ``b`` does on its GPUs (one
    request shape; :func:`owned_serve_options`)."""
    if a is b or a.gpu != b.gpu or b.tp < a.tp:
        return False
    if a.rate_rps > b.rate_rps:  # a larger replica: more spare capacity to hold
        return False
    given, wanted = (b.tp // a.tp) * a.rate_rps, b.rate_rps
    return given > wanted * (1 + 1e-12) or (given >= wanted and (a.tp, a.key) < (b.tp, b.key))


def mix_beats(a: ServeCandidate, b: ServeCandidate) -> bool:
    """For a request mix: ``floor(tp_b / tp_a)`` replicas of ``a`` on the same GPUs serve at least
    what one of ``b`` does in every bucket (each type keeps its own spares, so a smaller
    replica never needs more of them). Ties: the smaller, then earlier key stays.

    >>> from types import SimpleNamespace as NS
    >>> c = lambda k, tp, r: NS(gpu="g", tp=tp, key=k, bucket_rates=r)
    >>> mix_beats(c("a", 1, (3.0, 1.0)), c("b", 2, (5.0, 2.0))), mix_beats(c("a", 1, (3.0, 0.9)), c("b", 2, (5.0, 2.0)))
    (True, False)
    """
    if a is b or a.gpu != b.gpu or b.tp < a.tp:
        return False
    k = b.tp // a.tp
    pairs = list(zip(a.bucket_rates, b.bucket_rates, strict=True))
    if any(k * ra < rb for ra, rb in pairs):
        return False
    return any(k * ra > rb * (1 + 1e-12) for ra, rb in pairs) or (a.tp, a.key) < (b.tp, b.key)


def _lowest(o: Offer) -> float:
    """The least a GPU-hour of ``o`` costs in any month (its price steps included)."""
    return getattr(o, "lowest_marginal_usd_per_gpu_hour", o.marginal_usd_per_gpu_hour)


def capped(o: Offer) -> bool:
    """An offer whose capacity is limited: a cap on its GPUs, or an availability window (a
    contract's term), or whose price changes on a date (cheaper in some months, dearer in
    others). Such an offer never stands in for an unlimited one when pairs are pruned.

    >>> from types import SimpleNamespace as NS
    >>> capped(NS(max_gpus=None)), capped(NS(max_gpus=None, available_until="2027-03"))
    (False, True)
    """
    return (
        o.max_gpus is not None
        or bool(getattr(o, "price_steps", None))
        or getattr(o, "available_from", None) is not None
        or getattr(o, "available_until", None) is not None
    )


def serve_rental_pairs(
    cands: list[ServeCandidate], offers: Iterable[Offer], spot_ok: bool
) -> list[tuple[ServeCandidate, Offer]]:
    """The (candidate, offer) pairs of one serving workload that can matter when renting.

    A rented replica of candidate ``r`` on offer ``o`` gives ``mu_r`` req/s, counts as one
    replica (``serve_floor``), costs ``p_o m_r`` per hour and uses ``m_r`` of a cap. A pair is
    left out when another pair does at least as well replica for replica, so any plan using it
    can use the other instead at no higher cost:

    * per candidate: offers are the same replica at different prices, so only the cheapest
      uncapped non-reserved offer, capped offers cheaper than it and every reserved offer;
    * across candidates: a non-reserved pair is dropped when an uncapped pair gives at least
      the req/s for at most the price per replica-hour (ties: uncapped, then earlier, wins).

    (Not by $ per req/s alone: the one-replica floor makes small replicas worth keeping.)

    >>> from types import SimpleNamespace as NS
    >>> c1, c2 = NS(gpu="g", tp=1, rate_rps=1.0, key="g_tp1"), NS(gpu="g", tp=2, rate_rps=3.0, key="g_tp2")
    >>> o = lambda i, p, u=1, cap=None: NS(id=i, gpu="g", kind="on_demand", usd_per_gpu_hour=p,
    ...     marginal_usd_per_gpu_hour=p, gpus_per_instance=u, max_gpus=cap, cluster=False)
    >>> pairs = lambda cs, os: [(c.key, o.id) for c, o in serve_rental_pairs(cs, os, False)]
    >>> pairs([c1, c2], [o("a", 1.0), o("b", 1.2, 8), o("c", 0.5, 1, 4), o("d", 0.9, 8, 4)])
    [('g_tp1', 'c'), ('g_tp1', 'd'), ('g_tp1', 'a'), ('g_tp2', 'd'), ('g_tp2', 'b')]
    >>> pairs([c1, NS(gpu="g", tp=1, rate_rps=0.5, key="slow")], [o("a", 1.0)])
    [('g_tp1', 'a')]
    """
    # cluster products are multi-node training blocks, not serving capacity
    offers = [o for o in offers if (o.kind != "spot" or spot_ok) and not o.cluster]
    kept: list[tuple[ServeCandidate, Offer]] = []
    for c in cands:
        if c.rate_rps <= 0:
            continue
        workers = getattr(c, "workers", (c.tp,))
        eligible = [o for o in offers if o.gpu == c.gpu and rentable_on(workers, o)]
        plain = sorted(
            (o for o in eligible if o.kind != "reserved"),
            key=lambda o: (o.marginal_usd_per_gpu_hour, o.id),
        )
        uncapped = next((o for o in plain if not capped(o)), None)
        for o in plain:
            if o is uncapped or (
                capped(o) and (uncapped is None or _lowest(o) < uncapped.marginal_usd_per_gpu_hour)
            ):
                kept.append((c, o))
        kept.extend((c, o) for o in sorted(eligible, key=lambda o: o.id) if o.kind == "reserved")

    def rank(i: int) -> tuple[float, float, bool, int]:
        c, o = kept[i]
        return (c.rate_rps, _lowest(o) * c.tp, capped(o), i)

    if any(getattr(c, "mixed", False) for c, _ in kept):
        return _same_offer(_mix_pairs(kept), mix_beats)
    leaders = [rank(i) for i, (_, o) in enumerate(kept) if o.kind != "reserved" and not capped(o)]
    out = []
    for i, (c, o) in enumerate(kept):
        if o.kind != "reserved":
            me = rank(i)
            mu, cost = me[0], me[1]
            if any(
                r[0] >= mu and r[1] <= cost and (r[0] > mu or r[1] < cost or r[2:] < me[2:])
                for r in leaders
                if r[3] != i
            ):
                continue
        out.append((c, o))
    return _copies_of_smaller(_same_offer(out, beats))


def copies_beat(d: ServeCandidate, p: Offer, c: ServeCandidate, o: Offer) -> bool:
    """``k = ceil(mu_c / mu_d) >= 2`` rented replicas of plain candidate ``d`` on uncapped,
    non-reserved offer ``p`` do what one of ``c`` on ``o`` does, for no more: the same GPU type
    (so the same price path), ``mu_d <= mu_c`` (no larger replica: the spare ``R L`` does not
    grow), ``k mu_d >= mu_c`` req/s, at least as many replicas (``serve_floor``), no cap to
    break, and ``k p_p m_d <= p_o m_c`` per hour (ties: the smaller, then earlier key wins).

    >>> from types import SimpleNamespace as NS
    >>> c = lambda k, tp, mu: NS(gpu="g", tp=tp, rate_rps=mu, key=k, deployment=None)
    >>> o = lambda p: NS(kind="on_demand", marginal_usd_per_gpu_hour=p, max_gpus=None)
    >>> copies_beat(c("tp1", 1, 2.8), o(1.0), c("tp2", 2, 5.5), o(1.0))   # 2 x 2.8 >= 5.5, $2 <= $2
    True
    >>> copies_beat(c("tp1", 1, 2.7), o(1.0), c("tp2", 2, 5.5), o(1.0))   # 3 replicas needed: $3
    False
    >>> copies_beat(c("tp1", 1, 2.8), o(1.1), c("tp2", 2, 5.5), o(1.0))   # dearer per GPU
    False
    """
    if d is c or d.gpu != c.gpu or p.kind == "reserved" or capped(p):
        return False
    if getattr(d, "deployment", None) is not None or getattr(c, "deployment", None) is not None:
        return False
    if not 0 < d.rate_rps <= c.rate_rps:
        return False
    k = math.ceil(c.rate_rps / d.rate_rps * (1 - 1e-12))
    if k < 2:  # replica for replica: serve_rental_pairs' own rule
        return False
    # the pair dropped at its lowest price in any month (price steps), the copies' offer flat
    mine, theirs = k * p.marginal_usd_per_gpu_hour * d.tp, _lowest(o) * c.tp
    return mine < theirs * (1 - 1e-12) or (mine <= theirs and (d.tp, d.key) < (c.tp, c.key))


def _copies_of_smaller(pairs: list) -> list:
    """Drop a non-reserved pair that :func:`copies_beat` says whole copies of a smaller kept
    pair do for no more (single request shapes; the relation only ever points to a slower
    replica, so the slowest of a chain stays and stands in for the rest). On the reference
    it drops the A100 PCIe TP2 rentals (two TP1 replicas carry more for the same price): the
    relaxed MILP 2.0 -> 0.7 s with one spare flag fewer (benchmarks/README.md, issue 51)."""
    if any(getattr(c, "mixed", False) for c, _ in pairs):
        return pairs
    return [
        (c, o)
        for c, o in pairs
        if o.kind == "reserved" or not any(copies_beat(d, p, c, o) for d, p in pairs)
    ]


def _same_offer(pairs: list, test) -> list:
    """Drop a non-reserved pair when another candidate on the same offer beats it (``test``:
    :func:`beats` or :func:`mix_beats`): its replicas fit in the GPUs, the cap and the price of
    one of the other's, so any plan renting it can rent them instead (capped offers included:
    every on-demand offer of a GPU may be capped, and then no uncapped pair leads). Only
    deployments are dropped so: the plain replicas' pairs stay as they always were."""
    by_offer: dict[str, list] = {}
    for c, o in pairs:
        by_offer.setdefault(o.id, []).append(c)
    return [
        (c, o)
        for c, o in pairs
        if o.kind == "reserved"
        or getattr(c, "deployment", None) is None
        or not any(test(d, c) for d in by_offer[o.id] if d is not c)
    ]


def _mix_pairs(kept: list[tuple[ServeCandidate, Offer]]) -> list[tuple[ServeCandidate, Offer]]:
    """A request mix: a non-reserved pair is dropped when an uncapped non-reserved pair gives
    at least its req/s in every bucket for at most its price per replica-hour (ties: earlier
    wins). Swapping each of its replicas for one of the other keeps every bucket served and
    needs no more spares (each type keeps its own)."""

    def cost(c: ServeCandidate, o: Offer) -> float:
        return _lowest(o) * c.tp  # the dominating offer is flat (uncapped): its price

    def dominated(i: int) -> bool:
        c, o = kept[i]
        for j, (d, p) in enumerate(kept):
            if j == i or p.kind == "reserved" or capped(p):
                continue
            pairs = list(zip(d.bucket_rates, c.bucket_rates, strict=True))
            if cost(d, p) > cost(c, o) or any(x < y for x, y in pairs):
                continue
            better = cost(d, p) < cost(c, o) or any(x > y for x, y in pairs)
            if better or j < i:
                return True
        return False

    return [kc for i, kc in enumerate(kept) if kc[1].kind == "reserved" or not dominated(i)]
