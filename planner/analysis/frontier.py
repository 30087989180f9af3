"""The serving frontier buyers compare GPUs by: output tokens/s per GPU against tokens/s per
user, over every layout the physics knows and a sweep of concurrency, with each point's cost
per million output tokens (owned, amortized, and the cheapest rental).

Pure: the caller passes the model, the GPU, the precision, the request shape, the owned-cost
terms and the rental (``planner estimate frontier`` and the workbook's Frontier sheet do).

* **Points.** Every deployment :func:`operating_points` returns (aggregated ``tp``/``ep``/``dep``
  workers of 1 GPU up to the scale-up domain, disaggregated prefill and decode pools, with and
  without multi-token prediction where the model has it, from
  :mod:`planner.physics.serving`; before that package exists, aggregated ``tp``/``ep``
  replicas of 1-8 GPUs from :func:`planner.physics.serve.estimate_serve`) at every batch of
  :data:`BATCHES` that fits: ``x = 1000 / TPOT ms`` tokens/s per user, ``y = tokens/s of the
  deployment / its GPUs``.
* **Frontier.** The points no other point beats on both axes (:func:`pareto`), sorted by
  tokens/s per user, rising (so tokens/s per GPU falls along the list).
* **Cost.** ``$/GPU-hour / (3600 x tokens/s per GPU) x 1e6`` per million output tokens, at
  full load (a point is a steady operating state): owned = straight-line depreciation of the
  card and its share of server/rack over ``depreciation_years`` + power at full TDP with the
  host's share, at the meter (PUE) + hosting (per-GPU fee, colocation by the kW), all from
  :mod:`planner.physics.economics`; rental = the cheapest on-demand or reserved offer that can
  hold the deployment's widest worker (:func:`cheapest_rental`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from planner.inputs.catalog import GpuSpec, ModelArch, Offer
from planner.inputs.months import this_month
from planner.physics import economics
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.demand import HOURS_PER_MONTH

# Concurrency swept per deployment: powers of two and the 1.5x steps between them. A deployment
# stops at the first batch that does not fit, or once a larger batch stops paying (dominated by
# the batch before it: fewer tokens/s per GPU and per user).
BATCHES: tuple[int, ...] = tuple(
    sorted({2**k for k in range(17)} | {3 * 2**k for k in range(15)})
)  # 1, 2, 3, 4, 6, 8, 12, ..., 49152, 65536
DEFAULT_POWER_USD_PER_KWH = 0.12  # the reference problem's (problems/2m_budget.yaml)
DEFAULT_PUE = 1.3  # the problem file's default (planner.inputs.schema.Site.pue)
PRECISION_ORDER = ("fp4", "fp8", "int4", "int8", "bf16", "fp16")


# ----------------------------------------------------------------------------- money


@dataclass(frozen=True)
class OwnedTerms:
    """What owning a GPU costs besides its price: the site's and the finance terms."""

    power_usd_per_kwh: float = DEFAULT_POWER_USD_PER_KWH
    pue: float = DEFAULT_PUE
    hosting_usd_per_gpu_month: float = 0.0
    colo_usd_per_kw_month: float = 195.0
    depreciation_years: float = 5.0

    @classmethod
    def defaults(cls, **given: float | None) -> OwnedTerms:
        """Terms with colocation and depreciation from ``catalogs/finance.yaml`` and the rest
        from the problem file's defaults; ``given`` (None = unset) replaces any of them."""
        from planner.inputs.finance import load_finance_defaults

        d = load_finance_defaults()
        base = cls(
            colo_usd_per_kw_month=d.colo_usd_per_kw_month.value,
            depreciation_years=d.depreciation_years.value,
        )
        set_ = {k: float(v) for k, v in given.items() if v is not None}
        return cls(**{**asdict(base), **set_})


@dataclass(frozen=True)
class OwnedRate:
    """An owned GPU's cost per hour in service at full load, and its parts."""

    capex: float  # card + server/rack share, straight line over the depreciation life
    power: float  # GPU TDP + the host's share, at the meter (PUE)
    hosting: float  # per-GPU fee + colocation by the kW of IT load

    @property
    def total(self) -> float:
        return self.capex + self.power + self.hosting


def owned_rate(gpu: GpuSpec, terms: OwnedTerms) -> OwnedRate:
    """$/GPU-hour of owning ``gpu`` and running it flat out (:mod:`planner.physics.economics`).

    >>> from types import SimpleNamespace as NS
    >>> g = NS(unit_capex_usd=43800.0, tdp_w=NS(value=700.0), idle_w=NS(value=100.0),
    ...        host_w_per_gpu=NS(value=300.0), host_w=2400.0, slots=8)
    >>> r = owned_rate(g, OwnedTerms(0.10, 1.0, 0.0, 0.0, 5.0))
    >>> round(r.capex, 6), round(r.power, 6), r.hosting  # $43,800 / 43,800 h; 1 kW x $0.10
    (1.0, 0.1, 0.0)
    """
    H = HOURS_PER_MONTH
    y = terms.depreciation_years
    capex = gpu.unit_capex_usd
    capex_month = economics.book_value(capex, 0, y) - economics.book_value(capex, 1, y)
    e = economics.meter_usd_per_wh(terms.power_usd_per_kwh, terms.pue)
    tdp, idle = gpu.tdp_w.value, gpu.idle_w.value
    power_month = economics.power_usd(e, idle + gpu.host_w_per_gpu.value, H, tdp - idle)
    kw = economics.it_kw(1, tdp, 1 / max(gpu.slots, 1), gpu.host_w)
    hosting_month = economics.hosting_usd(
        1, terms.hosting_usd_per_gpu_month, kw, terms.colo_usd_per_kw_month
    )
    return OwnedRate(capex_month / H, power_month / H, hosting_month / H)


@dataclass(frozen=True)
class Rental:
    """The offer a frontier's rental cost is priced at."""

    offer: str
    provider: str
    kind: str
    usd_per_gpu_hour: float


def cheapest_rental(
    gpu_id: str, offers: Iterable[Offer], marketplaces: bool = False, worker_gpus: int = 1
) -> Rental | None:
    """The lowest on-demand or reserved $/GPU-hour for ``gpu_id`` a plan would use by default:
    no spot (serving does not take it by default), no marketplace unless ``marketplaces``, no
    training-only cluster product, no contract already signed; and one that can hold a worker
    of ``worker_gpus`` GPUs: in one instance, or across instances joined by a multi-node
    fabric (InfiniBand, RoCE, EFA, TCPX). None: no such offer."""
    now = this_month()  # an offer with dated price steps costs this month's price
    best: Offer | None = None
    for o in offers:
        if (
            o.gpu == gpu_id
            and o.kind in ("on_demand", "reserved")
            and not o.cluster
            and not o.committed
            and (marketplaces or not o.marketplace)
            and (worker_gpus <= o.gpus_per_instance or o.multi_node)
            and (best is None or (o.price_in(now), o.id) < (best.price_in(now), best.id))
        ):
            best = o
    if best is None:
        return None
    return Rental(best.id, best.provider, best.kind, best.price_in(now))


def usd_per_mtok(usd_per_gpu_hour: float, tokens_per_s_per_gpu: float) -> float:
    """Dollars per million output tokens: ``$/GPU-h / (3600 x tokens/s per GPU) x 1e6``.

    >>> usd_per_mtok(3.6, 1000.0)
    1.0
    """
    if tokens_per_s_per_gpu <= 0:
        return math.inf
    return usd_per_gpu_hour / (3600.0 * tokens_per_s_per_gpu) * 1e6


# ----------------------------------------------------------------------------- precisions


def supported_precisions(gpu: GpuSpec) -> tuple[str, ...]:
    """The serving precisions ``gpu`` runs, best (fewest bytes) first: fp4 and fp8 need their
    tensor cores, int8/int4 (weight-only) and bf16/fp16 run everywhere."""
    have = {"fp4": gpu.fp4_dense_tflops is not None, "fp8": gpu.fp8_dense_tflops is not None}
    return tuple(p for p in PRECISION_ORDER if have.get(p, True))


def pick_precision(gpu: GpuSpec, wanted: Sequence[str]) -> str | None:
    """The first of ``wanted`` that ``gpu`` supports (None: none of them)."""
    ok = supported_precisions(gpu)
    return next((p for p in wanted if p in ok), None)


# ----------------------------------------------------------------------------- physics


@dataclass(frozen=True)
class Operating:
    """One deployment at one concurrency, as the physics estimates it."""

    layout: str  # "1x8:ep", "4x4:dep+1x32:dep mtp"
    gpus: int
    batch: int
    tokens_per_s: float  # output tokens/s of the whole deployment
    tpot_ms: float
    ttft_ms: float
    mtp: bool = False
    disaggregated: bool = False
    worker_gpus: int = 1  # GPUs of its widest worker (what a rental must hold in one piece)

    @property
    def per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def per_user(self) -> float:
        return 1000.0 / self.tpot_ms if self.tpot_ms > 0 else math.inf


def worker_sizes(gpu: GpuSpec, calib: Calibration) -> list[int]:
    """The worker sizes swept: powers of two up to the scale-up domain, the whole domain, and
    16 and 32 GPUs over the scale-out fabric where the domain is one HGX server (each size one
    a worker can have, :func:`planner.physics.serving.gpus_error`)."""
    from planner.physics.serving import gpus_error, scaleup_domain

    dom = scaleup_domain(gpu, calib)
    top = max(dom, 32)
    sizes = {g for g in (1, 2, 4, 8, 16, 32, 64) if g <= top} | {dom}
    return sorted(g for g in sizes if gpus_error(gpu, g, calib) is None)


def frontier_deployments(
    model: ModelArch,
    gpu: GpuSpec,
    precision: str,
    prompt: int,
    output: int,
    calib: Calibration,
    disaggregated: bool | None = None,
    mtp: bool | None = None,
) -> tuple[list[Any], list[str]]:
    """Every deployment the frontier tries, and why the workers that cannot serve cannot.

    Aggregated: one worker of each size of :func:`worker_sizes` in each mode (tp; ep and dep for
    a mixture of experts) that fits. Disaggregated: the planner's own candidates
    (:func:`planner.physics.serving.candidate_deployments`: decode pools of 8, 16, 32 GPUs and
    the whole domain, the prefill pool sized to match), each also with half and twice the
    prefill workers (the best ratio moves with the batch). With MTP where the model has it
    (``mtp``: None = with and without). At most a few dozen deployments.
    """
    from planner.physics.serving import Deployment, Worker, WorkerPhysics, candidate_deployments

    has_mtp = model.num_nextn_predict_layers > 0
    mtps = [m for m in (False, True) if mtp is None or m == mtp]
    mtps = [m for m in mtps if has_mtp or not m]
    modes = ("tp", "ep", "dep") if model.moe is not None else ("tp",)
    out: list[Any] = []
    reasons: list[str] = []
    if disaggregated is not True:
        for g in worker_sizes(gpu, calib):
            for mode in modes:
                if mode != "tp" and g == 1:
                    continue  # ep/dep on one GPU is tp
                for m in mtps:
                    why = WorkerPhysics(model, gpu, Worker(g, mode), precision, calib, m).check(
                        prompt, output
                    )
                    if why is None:
                        out.append(Deployment(Worker(g, mode), None, m))
                    elif mode == "tp" and not m and why not in reasons:
                        reasons.append(why)  # the plain worker's, by size: the last the largest
    if disaggregated is not False:
        base = candidate_deployments(
            model, gpu, precision, prompt, output, disaggregated=True, mtp=mtp, calib=calib
        )
        for d in base:
            assert d.prefill is not None
            p = d.prefill
            for count in sorted({max(1, p.count // 2), p.count, p.count * 2}):
                out.append(Deployment(d.decode, Worker(p.gpus, p.mode, count), d.mtp))
    seen: list[Any] = []
    for d in out:
        if d not in seen:
            seen.append(d)
    return seen, reasons


def _sweep(
    estimate: Any, label: str, gpus: int, flags: tuple[bool, bool, int], slots: int | None = None
) -> tuple[list[Operating], str | None]:
    """The deployment ``estimate(batch)`` at every batch of :data:`BATCHES` up to its KV-cache
    ``slots`` (and at ``slots`` itself: beyond them requests only wait for one) until one does
    not fit (after one did) or stops paying; the first reason it could not serve if none fit."""
    out: list[Operating] = []
    reason = None
    batches = list(BATCHES)
    if slots is not None and slots >= 1:
        batches = [b for b in BATCHES if b < slots] + [slots]
    for b in batches:
        est = estimate(b)
        ok = est.fits and est.tokens_per_s > 0 and math.isfinite(est.tpot_ms) and est.tpot_ms > 0
        if not ok:
            if out:
                break
            reason = reason or est.reason or "does not fit"
            if not _curable(est.reason):
                break
            continue
        n = int(getattr(est, "gpus", 0) or gpus)
        p = Operating(label, n, b, est.tokens_per_s, est.tpot_ms, est.ttft_ms, *flags)
        if out and p.per_gpu <= out[-1].per_gpu and p.per_user <= out[-1].per_user:
            break  # past the throughput peak: every larger batch is dominated
        out.append(p)
    return out, (None if out else reason)


def _slots(
    model: ModelArch,
    gpu: GpuSpec,
    d: Any,
    precision: str,
    prompt: int,
    output: int,
    calib: Calibration,
) -> int | None:
    """Requests the deployment's decode workers hold at once (their KV cache): past it the
    physics has the extra requests wait for a slot (only TTFT grows), which is no operating
    point to draw. None: not known (a worker that cannot serve at all)."""
    from planner.physics.serving import WorkerPhysics

    draft = getattr(d, "mtp_draft", None)
    try:
        wp = WorkerPhysics(model, gpu, d.decode, precision, calib, bool(d.mtp), draft)
        if wp.check(prompt, output) is not None:
            return None
        return int(wp.max_batch(prompt, output)) * d.decode.count
    except (TypeError, ValueError):  # a physics without these figures: sweep the whole range
        return None


def _curable(reason: str | None) -> bool:
    """Whether a larger batch might serve where this one did not: a deployment that needs a
    least concurrency (a wide worker's attention ranks), never memory or a missing feature."""
    return reason is not None and "at least" in reason and not reason.startswith("batch ")


@functools.lru_cache(maxsize=256)
def operating_points(
    model: ModelArch,
    gpu: GpuSpec,
    precision: str,
    prompt: int,
    output: int,
    calib: Calibration | None = None,
    disaggregated: bool | None = None,
    mtp: bool | None = None,
) -> tuple[tuple[Operating, ...], tuple[str, ...], int]:
    """Every (deployment, batch) point that serves (:func:`frontier_deployments` x
    :data:`BATCHES`, :func:`planner.physics.serving.estimate_deployment`), the distinct reasons
    deployments could not, and the number of deployments tried. ``disaggregated`` / ``mtp``:
    None = with and without."""
    from planner.physics.serving import estimate_deployment

    calib = calib or default_calibration()
    deployments, reasons = frontier_deployments(
        model, gpu, precision, prompt, output, calib, disaggregated, mtp
    )
    points: list[Operating] = []
    for d in deployments:

        def est(b: int, d: Any = d) -> Any:
            return estimate_deployment(model, gpu, d, precision, prompt, output, b, calib)

        widest = max(d.decode.gpus, d.prefill.gpus if d.prefill is not None else 0)
        flags = (bool(d.mtp), bool(d.disaggregated), widest)
        slots = _slots(model, gpu, d, precision, prompt, output, calib)
        got, why = _sweep(est, d.label(), d.total_gpus, flags, slots)
        points += got
        if why and why not in reasons:
            reasons.append(why)
    return tuple(points), tuple(reasons), len(deployments)


# ----------------------------------------------------------------------------- frontier


@dataclass(frozen=True)
class FrontierPoint:
    """One point of a GPU's frontier, with its cost per million output tokens."""

    layout: str
    batch: int
    gpus: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    tpot_ms: float
    ttft_ms: float
    owned_usd_per_gpu_hour: float
    owned_usd_per_mtok: float
    rental_usd_per_gpu_hour: float | None
    rental_usd_per_mtok: float | None
    rental_offer: str | None
    mtp: bool = False
    disaggregated: bool = False
    worker_gpus: int = 1  # its widest worker: a rental must hold it (one instance, or a fabric)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuFrontier:
    """One GPU type's frontier (empty, with the reasons, where it cannot serve the model)."""

    gpu: str
    precision: str | None
    points: tuple[FrontierPoint, ...]
    reasons: tuple[str, ...]  # why deployments could not serve (all of them, when no points)
    owned: OwnedRate
    rental: Rental | None  # the cheapest for a one-GPU worker (wider ones may cost more)
    deployments: int  # deployments tried
    evaluated: int  # (deployment, batch) points that served, before the frontier

    @property
    def serves(self) -> bool:
        return bool(self.points)

    def summary(self) -> dict[str, Any]:
        """Everything but the points: the rates they are priced at, what was tried, why not."""
        return {
            "gpu": self.gpu,
            "precision": self.precision,
            "serves": self.serves,
            "reasons": list(self.reasons),
            "owned_usd_per_gpu_hour": self.owned.total,
            "owned_parts_usd_per_gpu_hour": asdict(self.owned),
            "rental": None if self.rental is None else asdict(self.rental),
            "deployments": self.deployments,
            "evaluated": self.evaluated,
        }


def pareto(points: Iterable[Operating]) -> list[Operating]:
    """The points no other beats on both tokens/s per user and per GPU, sorted by tokens/s per
    user (rising; tokens/s per GPU then falls). Of equal points the one with fewer GPUs stays.

    >>> ps = [Operating("a", 1, 1, 10, 10, 1), Operating("b", 1, 8, 70, 20, 1),
    ...       Operating("c", 2, 8, 100, 40, 1), Operating("d", 1, 4, 30, 12, 1)]
    >>> [p.layout for p in pareto(ps)]  # c: 50 tokens/s per GPU at 25 per user, b beats it
    ['b', 'd', 'a']
    """
    ranked = sorted(points, key=lambda p: (-p.per_user, -p.per_gpu, p.gpus, p.layout, p.batch))
    out: list[Operating] = []
    best_y = -math.inf
    for p in ranked:
        if p.per_gpu > best_y:
            out.append(p)
            best_y = p.per_gpu
    return out[::-1]


def gpu_frontier(
    model: ModelArch,
    gpu: GpuSpec,
    precision: str | None,
    prompt: int,
    output: int,
    terms: OwnedTerms,
    offers: Sequence[Offer] = (),
    marketplaces: bool = False,
    calib: Calibration | None = None,
    disaggregated: bool | None = None,
    mtp: bool | None = None,
    max_ttft_ms: float | None = None,
) -> GpuFrontier:
    """``gpu``'s frontier for ``model`` at ``precision`` (None: the GPU supports none of the
    precisions asked for; ``reasons`` then says so) and ``prompt``/``output`` tokens, each point
    rented at the cheapest of ``offers`` that holds its widest worker (:func:`cheapest_rental`).
    ``max_ttft_ms``: points with a longer TTFT are left out before the frontier is drawn."""
    owned = owned_rate(gpu, terms)
    rentals: dict[int, Rental | None] = {}

    def rental(width: int) -> Rental | None:
        if width not in rentals:
            rentals[width] = cheapest_rental(gpu.id, offers, marketplaces, width)
        return rentals[width]

    if precision is None:
        why = f"{gpu.id} supports none of the precisions asked for"
        return GpuFrontier(gpu.id, None, (), (why,), owned, rental(1), 0, 0)
    ops, reasons, tried = operating_points(
        model, gpu, precision, prompt, output, calib, disaggregated, mtp
    )
    if not tried and not reasons:
        reasons = ("no deployment of this kind for this GPU and model",)
    if max_ttft_ms is not None and ops:
        fastest = min(p.ttft_ms for p in ops)
        ops = tuple(p for p in ops if p.ttft_ms <= max_ttft_ms)
        if not ops:
            reasons = (f"no point has a TTFT within {max_ttft_ms:g} ms (the shortest: "
                       f"{fastest:,.0f} ms)",)  # fmt: skip
    points = tuple(_priced(p, owned, rental(p.worker_gpus)) for p in pareto(ops))
    return GpuFrontier(
        gpu.id, precision, points, () if points else reasons, owned, rental(1), tried, len(ops)
    )


def _priced(p: Operating, owned: OwnedRate, rental: Rental | None) -> FrontierPoint:
    r = None if rental is None else rental.usd_per_gpu_hour
    return FrontierPoint(
        layout=p.layout,
        batch=p.batch,
        gpus=p.gpus,
        tokens_per_s_per_gpu=p.per_gpu,
        tokens_per_s_per_user=p.per_user,
        tpot_ms=p.tpot_ms,
        ttft_ms=p.ttft_ms,
        owned_usd_per_gpu_hour=owned.total,
        owned_usd_per_mtok=usd_per_mtok(owned.total, p.per_gpu),
        rental_usd_per_gpu_hour=r,
        rental_usd_per_mtok=None if r is None else usd_per_mtok(r, p.per_gpu),
        rental_offer=None if rental is None else rental.offer,
        mtp=p.mtp,
        disaggregated=p.disaggregated,
        worker_gpus=p.worker_gpus,
    )


def frontiers(
    model: ModelArch,
    gpus: Sequence[GpuSpec],
    precisions: Sequence[str],
    prompt: int,
    output: int,
    terms: OwnedTerms,
    offers: Iterable[Offer] = (),
    *,
    marketplaces: bool = False,
    calib: Calibration | None = None,
    disaggregated: bool | None = None,
    mtp: bool | None = None,
    max_ttft_ms: float | None = None,
) -> dict[str, GpuFrontier]:
    """Each GPU's frontier, in the order given; each GPU serves at the first of ``precisions``
    it supports (:func:`pick_precision`) and rents at :func:`cheapest_rental`."""
    offers = list(offers)
    return {
        g.id: gpu_frontier(
            model,
            g,
            pick_precision(g, precisions),
            prompt,
            output,
            terms,
            offers,
            marketplaces,
            calib,
            disaggregated,
            mtp,
            max_ttft_ms,
        )
        for g in gpus
    }


def to_json(fronts: dict[str, GpuFrontier]) -> dict[str, list[dict[str, Any]]]:
    """``{gpu_id: [point, ...]}``: a GPU that cannot serve has an empty list."""
    return {gid: [p.to_dict() for p in f.points] for gid, f in fronts.items()}
