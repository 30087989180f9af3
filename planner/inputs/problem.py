"""The problem file: schema (pydantic v2), loading and resolution against the catalogs.

A problem file is a contract: other tools write it. Unknown keys are errors (a typo must
not be silently ignored), numbers must be finite, dates are ``YYYY-MM`` months.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from planner.base.errors import InputError
from planner.base.units import CaseInsensitive, Count
from planner.base.yamlio import (
    LocatedError,
    YamlDoc,
    did_you_mean,
    format_loc,
    load_yaml,
    parse_yaml_text,
    validate,
)
from planner.inputs.catalog import (
    CATALOG_DIR,
    GPU_RANGES,
    Fabric,
    GpuSpec,
    ModelArch,
    Offer,
    Sourced,
    SourcedRange,
    Strict,
    check_range,
    load_gpus,
    load_models,
    load_offers,
    load_servers,
    with_server,
)
from planner.inputs.finance import FinanceDefaults, FinanceTerms, load_finance_defaults
from planner.inputs.profiles import ProfileFile, Profiles

_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")  # ASCII digits only; fullmatch: no trailing text


def parse_month(text: str) -> tuple[int, int]:
    """``"2027-04"`` -> ``(2027, 4)``.

    >>> parse_month("2027-04")
    (2027, 4)
    """
    m = _MONTH.fullmatch(str(text))
    if not m or not 1 <= int(m.group(2)) <= 12 or not 1900 <= int(m.group(1)) <= 2200:
        raise ValueError(
            f"expected a month as YYYY-MM (e.g. 2027-01, years 1900-2200), got {text!r}"
        )
    return int(m.group(1)), int(m.group(2))


def month_index(start: str, month: str) -> int:
    """Months from ``start`` to ``month`` (0 = the same month).

    >>> month_index("2027-01", "2028-03")
    14
    """
    y0, m0 = parse_month(start)
    y1, m1 = parse_month(month)
    return (y1 - y0) * 12 + (m1 - m0)


def month_label(start: str, index: int) -> str:
    """The ``index``-th month after ``start`` as ``YYYY-MM``.

    >>> month_label("2027-11", 3)
    '2028-02'
    """
    y, m = parse_month(start)
    total = y * 12 + (m - 1) + index
    return f"{total // 12:04d}-{total % 12 + 1:02d}"


Month = str
NAME_MAX = 100  # workload and model names: labels in tables and workbook sheets


def _month(v: Any) -> str:
    parse_month(v)
    return str(v)


class Horizon(Strict):
    start: Month
    months: int = Field(ge=1, le=120)

    _v = field_validator("start")(classmethod(lambda cls, v: _month(v)))


# Upper bounds below are far beyond any real plan (a trillion dollars, ten billion users) and
# keep every model coefficient within what the solvers handle in double precision.
MAX_USD = 1e12


class Budget(Strict):
    capex_usd: float = Field(
        ge=0, le=MAX_USD, description="cap on purchases (GPUs + servers/network)"
    )
    total_usd: float | None = Field(
        None, gt=0, le=MAX_USD, description="cap on all spend over the horizon"
    )


class Site(Strict):
    power_usd_per_kwh: float = Field(ge=0, le=10)
    pue: float = Field(1.3, ge=1.0, le=3.0)
    # Colocation at $150-250 per kW-month is ~$200-300 per GPU-month; $10k is a unit slip.
    hosting_usd_per_gpu_month: float = Field(0.0, ge=0, le=10_000)
    colo_usd_per_kw_month: float | None = Field(
        None,
        ge=0,
        le=5_000,
        description="colocation per kW of IT load (GPU TDP + host watts) per month; default: "
        "catalogs/finance.yaml, or 0 when hosting_usd_per_gpu_month is given",
    )
    power_cap_kw: float | None = Field(None, gt=0, le=10_000_000, description="site cap, kW")
    consumer_gpus_allowed: bool = Field(
        False, description="GeForce EULA forbids datacenter deployment; true only for an office/lab"
    )


class GpuOverride(Strict):
    """Replace catalog figures for one GPU (a vendor quote, a measured spec); the same ranges
    as the catalog (:data:`planner.inputs.catalog.GPU_RANGES`) and, once applied, idle <= TDP."""

    purchase_usd: float | None = Field(None, gt=0)
    server: str | None = Field(None, description="buy the card in this server type instead")
    server_overhead_usd_per_gpu: float | None = Field(None, ge=0)
    memory_gb: float | None = Field(None, gt=0)
    memory_bandwidth_gbs: float | None = Field(None, gt=0)
    bf16_dense_tflops: float | None = Field(None, gt=0)
    fp8_dense_tflops: float | None = Field(None, gt=0)
    tdp_w: float | None = Field(None, gt=0)
    idle_w: float | None = Field(None, ge=0)
    host_w_per_gpu: float | None = Field(None, ge=0)
    source: str = Field("problem file override", max_length=500)

    @field_validator(
        *(k for k in GPU_RANGES if k not in ("node_size", "int8_dense_tops")), mode="after"
    )
    @classmethod
    def _in_range(cls, v: float | None, info: Any) -> float | None:
        return v if v is None else check_range(info.field_name, v)


class OfferOverride(Strict):
    usd_per_gpu_hour: float | None = Field(None, gt=0, le=1000)
    max_gpus: int | None = Field(None, ge=1, le=10_000_000)
    fabric: Annotated[Fabric, CaseInsensitive] | None = None
    fabric_gbps_per_gpu: float | None = Field(None, gt=0, le=10_000)
    source: str = "problem file override"


class Overrides(Strict):
    gpus: dict[str, GpuOverride] = {}
    offers: dict[str, OfferOverride] = {}


class OfferChoice(Strict):
    """Which rental offers the problem trusts."""

    files: list[str] = Field(
        default_factory=lambda: ["offers.yaml"],
        description="offers files; relative to the problem file, else to catalogs/",
    )
    providers: list[str] | None = Field(None, description="allow list; None = every provider")
    marketplaces: bool = Field(
        False, description="allow marketplace/reseller offers (vast, shadeform, ...)"
    )
    spot_for_serving: bool = False
    extra: list[Offer] = Field(default_factory=list, description="offers written inline")
    discounts: dict[str, Annotated[float, Field(ge=0, lt=1)]] = Field(
        default_factory=dict, description="negotiated share off every price of a provider"
    )


class Window(Strict):
    start: Month
    deadline: Month

    _v = field_validator("start", "deadline")(classmethod(lambda cls, v: _month(v)))

    @model_validator(mode="after")
    def _order(self) -> Window:
        if month_index(self.start, self.deadline) < 0:
            raise LocatedError(
                [
                    (
                        ("deadline",),
                        f"deadline {self.deadline} is before start {self.start}; "
                        "the deadline must be the same month as the start or later",
                    )
                ]
            )
        return self


class Spot(Strict):
    """Spot capacity for a training job: off unless asked for (defaults are safe)."""

    allowed: bool = False
    max_share: float = Field(0.5, ge=0, le=1, description="largest share of the job's work on spot")
    overhead: float | None = Field(
        None,
        ge=0,
        le=2,
        description="extra hours per hour of spot progress; default: from the provider's "
        "preemption rate and the job's stack (planner/physics/realized.py)",
    )


class TrainJob(Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    model: str = Field(max_length=NAME_MAX)
    # Llama 3 pre-trained on ~1.5e13 tokens; 1e15 leaves room and keeps hours finite.
    tokens: Count = Field(gt=0, le=1e15)
    method: Annotated[Literal["full", "lora", "qlora"], CaseInsensitive] = "full"
    window: Window
    seq_len: int = Field(4096, ge=128, le=1_048_576)
    spot: Spot = Spot()
    # How real runs of this team compare with benchmarks (planner/physics/realized.py).
    stack: Annotated[Literal["mature", "typical", "first-run"], CaseInsensitive] = "typical"
    # Plan the hours of this quantile: the deadline holds with this probability under the model.
    confidence: float = Field(0.8, gt=0, lt=1)
    # Where the run lives: one provider (or the team's own GPUs) for the whole run, since its
    # checkpoints, data and network setup would otherwise move mid-run; `split` allows hops.
    providers: Annotated[Literal["single", "split"], CaseInsensitive] = "single"
    # Multi-node runs need a training fabric (InfiniBand, RoCE, EFA, TCPX); `true` also allows
    # plain Ethernet and offers whose fabric is not stated, at Ethernet bandwidth.
    ethernet: bool = False


class Traffic(Strict):
    daily_active_users: float = Field(gt=0, le=1e10, description="at most 10 billion people")
    requests_per_user_per_day: float = Field(gt=0, le=100_000, description="about one a second")
    utilization: float = Field(0.5, ge=0.1, le=1.0, description="mean load / peak load over a day")
    growth_per_month: float = Field(0.0, ge=-0.5, le=2.0)


class TokenShape(Strict):
    prompt: int = Field(gt=0, le=1_000_000)
    output: int = Field(gt=0, le=1_000_000)


TokenSize = int | tuple[int, int]


class RequestBucket(Strict):
    """A share of a service's requests whose sizes lie in token ranges.

    ``prompt`` and ``output`` are a representative size or an inclusive ``[lo, hi]`` range; a
    range is planned at its upper end (every request of the bucket is at most that long, so
    its p95 latencies are not understated) unless a measured profile inside the range applies.
    """

    name: str = Field(min_length=1, max_length=NAME_MAX)
    prompt: TokenSize
    output: TokenSize
    share: float = Field(gt=0, le=1, description="share of the service's requests")

    @field_validator("prompt", "output", mode="after")
    @classmethod
    def _range(cls, v: TokenSize) -> TokenSize:
        lo, hi = (v, v) if isinstance(v, int) else v
        if lo < 1 or hi > 1_000_000:
            raise ValueError(f"token sizes must be within 1..1,000,000 (got {lo}..{hi})")
        if lo > hi:
            raise ValueError(f"empty token range [{lo}, {hi}]: the low end is above the high end")
        return v

    def prompt_range(self) -> tuple[int, int]:
        return (self.prompt, self.prompt) if isinstance(self.prompt, int) else self.prompt

    def output_range(self) -> tuple[int, int]:
        return (self.output, self.output) if isinstance(self.output, int) else self.output

    def shape(self) -> tuple[int, int]:
        """The (prompt, output) tokens planned for: the upper end of each range."""
        return self.prompt_range()[1], self.output_range()[1]


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Ranges share more than an end point (buckets may touch: [1, 256] and [256, 512]); a
    single size overlaps any range that contains it.

    >>> _overlap((1, 256), (256, 512)), _overlap((1, 300), (256, 512)), _overlap((5, 5), (1, 5))
    (False, True, True)
    """
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    if lo > hi:
        return False
    return lo < hi or a[0] == a[1] or b[0] == b[1]


SHARE_TOLERANCE = 1e-6


# Serving headroom defaults (sources: catalogs/NOTES.md, "Serving headroom").
DEFAULT_MAX_LOAD = 0.8
DEFAULT_REDUNDANCY = 1


class Slo(Strict):
    p95_ttft_ms: float = Field(gt=0, le=3_600_000, description="at most an hour")
    p95_tpot_ms: float = Field(gt=0, le=60_000, description="at most a minute per token")
    max_load: float = Field(
        DEFAULT_MAX_LOAD,
        gt=0,
        le=1,
        description="share of the fleet's SLO capacity used at peak (the rest is headroom)",
    )


class ServeWorkload(Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    model: str = Field(max_length=NAME_MAX)
    precision: Annotated[Literal["fp16", "bf16", "fp8", "int8", "int4"], CaseInsensitive] = "fp16"
    start: Month
    end: Month | None = None
    traffic: Traffic
    tokens: TokenShape | None = None
    requests: list[RequestBucket] | None = Field(
        None, min_length=1, max_length=200, description="a mix of request sizes (buckets)"
    )
    slo: Slo
    redundancy: int = Field(
        DEFAULT_REDUNDANCY,
        ge=0,
        le=100,
        description="spare replicas: the SLO holds at peak with this many replicas down",
    )
    measured_only: bool = Field(
        False,
        description="plan only replica configurations a profile measured (no modeled capacity)",
    )

    _v = field_validator("start", "end")(classmethod(lambda cls, v: v if v is None else _month(v)))

    @model_validator(mode="after")
    def _mix(self) -> ServeWorkload:
        if (self.tokens is None) == (self.requests is None):
            raise ValueError(
                "give tokens: {prompt, output} (one request shape) or requests: [buckets with "
                "prompt, output and share], one of them"
            )
        if self.requests is None:
            return self
        total = sum(b.share for b in self.requests)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(
                f"request shares sum to {total:.6g}; they must sum to 1 "
                f"({', '.join(f'{b.name}: {b.share:g}' for b in self.requests)})"
            )
        names = [b.name for b in self.requests]
        for i, a in enumerate(self.requests):
            if a.name in names[:i]:
                raise ValueError(f"request bucket name {a.name!r} is used twice")
            for b in self.requests[:i]:
                if _overlap(a.prompt_range(), b.prompt_range()) and _overlap(
                    a.output_range(), b.output_range()
                ):
                    raise ValueError(
                        f"request buckets {b.name!r} and {a.name!r} overlap (prompt "
                        f"{list(b.prompt_range())} and {list(a.prompt_range())}, output "
                        f"{list(b.output_range())} and {list(a.output_range())}): a request "
                        "must fall in one bucket"
                    )
        return self

    def buckets(self) -> list[RequestBucket]:
        """The request mix; a single ``tokens`` shape is one bucket named ``all``."""
        if self.requests is not None:
            return list(self.requests)
        assert self.tokens is not None  # the validator guarantees one of them
        return [
            RequestBucket(
                name="all", prompt=self.tokens.prompt, output=self.tokens.output, share=1.0
            )
        ]


class Workloads(Strict):
    train: list[TrainJob] = []
    serve: list[ServeWorkload] = []


class Finance(Strict):
    """How money is compared over time; unset figures come from catalogs/finance.yaml."""

    discount_rate: float | None = Field(
        None, ge=0, lt=1, description="annual cost of capital; cash is discounted monthly"
    )
    residual: Annotated[Literal["curve", "none", "straight_line"], CaseInsensitive] = Field(
        "curve",
        description="value of owned hardware at the horizon end: the catalog's resale curve "
        "for the cards, none, or book value after straight-line depreciation",
    )
    depreciation_years: float | None = Field(None, ge=1, le=50)
    currency_label: str = Field("USD", min_length=1, max_length=10)


class SolverOptions(Strict):
    time_limit_s: float = Field(60.0, gt=0, le=7 * 24 * 3600, description="at most a week")
    gap: float = Field(0.001, ge=0, le=0.5, description="relative optimality gap to stop at")


class OwnedGpus(Strict):
    """GPUs the team has before the plan: in service (``bought``) or on order (``arrives``)."""

    gpu: str
    count: int = Field(ge=1, le=10_000_000)
    bought: Month | None = Field(None, description="in service before the horizon, since")
    arrives: Month | None = Field(None, description="already paid; in service from this month")
    sell: Annotated[Literal["never", "allowed"], CaseInsensitive] = "never"

    _v = field_validator("bought", "arrives")(
        classmethod(lambda cls, v: v if v is None else _month(v))
    )

    @model_validator(mode="after")
    def _one_date(self) -> OwnedGpus:
        if (self.bought is None) == (self.arrives is None):
            raise ValueError(
                "give bought: YYYY-MM (in service before the horizon) or arrives: YYYY-MM "
                "(on order, in service from that month), one of them"
            )
        return self


class Contract(Strict):
    """Rented capacity signed before the plan: paid whatever the plan does."""

    provider: str = Field(min_length=1)
    gpu: str
    count: int = Field(ge=1, le=10_000_000)
    start: Month
    end: Month
    usd_per_gpu_hour: float = Field(gt=0, le=1000)
    gpus_per_instance: int | None = Field(None, ge=1, le=576, description="default: node size")
    fabric: Annotated[Fabric, CaseInsensitive] | None = None
    fabric_gbps_per_gpu: float | None = Field(None, gt=0, le=10_000)

    _v = field_validator("start", "end")(classmethod(lambda cls, v: _month(v)))

    @model_validator(mode="after")
    def _order(self) -> Contract:
        if month_index(self.start, self.end) < 0:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class Fleet(Strict):
    owned: list[OwnedGpus] = []
    contracts: list[Contract] = []


class CustomGpu(GpuOverride):
    """A GPU the catalogs do not list: a catalog GPU's figures (``like``) with the given ones
    replacing them, e.g. for a card measured in a profile and rented at a quoted price."""

    like: str = Field(min_length=1, description="catalog GPU whose figures are the default")
    name: str | None = Field(None, max_length=200)


class Problem(Strict):
    name: str = Field(min_length=1, max_length=500)
    horizon: Horizon
    budget: Budget
    site: Site
    gpus: list[str] | None = None
    overrides: Overrides = Overrides()
    offers: OfferChoice = OfferChoice()
    workloads: Workloads
    fleet: Fleet = Fleet()
    finance: Finance = Finance()
    solver: SolverOptions = SolverOptions()
    custom_gpus: dict[str, CustomGpu] = Field(
        default_factory=dict, description="GPUs the catalogs do not list, by id"
    )
    profiles: list[str] = Field(
        default_factory=list, description="measured profiles files, relative to the problem"
    )

    @model_validator(mode="after")
    def _names_and_dates(self) -> Problem:
        errs: list[tuple[tuple, str]] = []
        names = [("train", i, w.name) for i, w in enumerate(self.workloads.train)] + [
            ("serve", i, w.name) for i, w in enumerate(self.workloads.serve)
        ]
        seen: dict[str, str] = {}
        for kind, i, n in names:
            if n in seen:
                errs.append(
                    (
                        (("workloads", kind, i, "name")),
                        f"workload name {n!r} is already used by {seen[n]}; names must be unique",
                    )
                )
            else:
                seen[n] = f"workloads.{kind}[{i}]"
        if not names:
            errs.append(
                (("workloads",), "no workloads: add workloads.train or workloads.serve entries")
            )
        end = self.horizon.months - 1
        span = f"{self.horizon.start}..{month_label(self.horizon.start, end)}"
        for i, j in enumerate(self.workloads.train):
            a = month_index(self.horizon.start, j.window.start)
            b = month_index(self.horizon.start, j.window.deadline)
            if a < 0 or a > end:
                errs.append(
                    (
                        (("workloads", "train", i, "window", "start")),
                        f"training job {j.name!r}: window start {j.window.start} is outside "
                        f"the horizon {span} (horizon.start + horizon.months)",
                    )
                )
            elif b > end:
                errs.append(
                    (
                        (("workloads", "train", i, "window", "deadline")),
                        f"training job {j.name!r}: deadline {j.window.deadline} is after the "
                        f"horizon's last month ({span}); extend horizon.months or move the deadline",
                    )
                )
        for i, s in enumerate(self.workloads.serve):
            a = month_index(self.horizon.start, s.start)
            if a < 0 or a > end:
                errs.append(
                    (
                        (("workloads", "serve", i, "start")),
                        f"serving workload {s.name!r}: start {s.start} is outside the horizon {span}",
                    )
                )
            if s.end is not None and month_index(s.start, s.end) < 0:
                errs.append(
                    (
                        (("workloads", "serve", i, "end")),
                        f"serving workload {s.name!r}: end {s.end} is before start {s.start}",
                    )
                )
        if errs:
            raise LocatedError(errs)
        return self

    def month_labels(self) -> list[str]:
        return [month_label(self.horizon.start, t) for t in range(self.horizon.months)]

    def month_of(self, label: str) -> int:
        return month_index(self.horizon.start, label)


@dataclass(frozen=True)
class Inputs:
    """A problem resolved against the catalogs: everything the physics and model need."""

    problem: Problem
    gpus: dict[str, GpuSpec]  # the allowed GPU types, overrides applied
    models: dict[str, ModelArch]
    offers: dict[str, Offer]  # trusted offers for allowed GPUs, overrides applied
    source_path: str = "<memory>"
    source_sha256: str = ""
    offer_files: list[str] = field(default_factory=list)
    finance: FinanceTerms = field(default_factory=FinanceTerms)
    warnings: list[str] = field(default_factory=list)  # said, not refused (e.g. a past contract)
    profiles: Profiles = field(default_factory=Profiles)


def finance_terms(problem: Problem, defaults: FinanceDefaults | None = None) -> FinanceTerms:
    """The problem's finance settings, each unset one from catalogs/finance.yaml.

    Colocation: a problem that prices hosting per GPU (``hosting_usd_per_gpu_month``) and
    names no per-kW rate pays no per-kW rate; otherwise the catalog's default applies.
    """
    f, site = problem.finance, problem.site
    d = defaults if defaults is not None else load_finance_defaults()
    used: list[tuple[str, str]] = []

    def pick(name: str, given: float | None, default: SourcedRange) -> float:
        if given is not None:
            return given
        used.append((name, f"{default.value:g}: {default.source} ({default.as_of})"))
        return default.value

    rate = pick("finance.discount_rate", f.discount_rate, d.discount_rate)
    years = pick("finance.depreciation_years", f.depreciation_years, d.depreciation_years)
    if site.colo_usd_per_kw_month is None and "hosting_usd_per_gpu_month" in site.model_fields_set:
        colo = 0.0
    else:
        colo = pick(
            "site.colo_usd_per_kw_month", site.colo_usd_per_kw_month, d.colo_usd_per_kw_month
        )
    return FinanceTerms(
        discount_rate=rate,
        residual=f.residual,
        depreciation_years=years,
        colo_usd_per_kw_month=colo,
        currency_label=f.currency_label,
        sources=tuple(used),
    )


def _override_gpu(gpu: GpuSpec, ov: GpuOverride) -> GpuSpec:
    changes: dict[str, Any] = {}
    for key, value in ov.model_dump(exclude={"source", "server", "like", "name"}).items():
        if value is None:
            continue
        old = getattr(gpu, key)
        if isinstance(old, SourcedRange):
            changes[key] = old.model_copy(
                update={
                    "value": value,
                    "low": min(old.low, value),
                    "high": max(old.high, value),
                    "source": ov.source,
                    "note": f"overridden in the problem file; catalog default {old.value:g} ({old.source})",
                }
            )
        elif isinstance(old, Sourced) or old is None:
            changes[key] = Sourced(
                value=value,
                source=ov.source,
                as_of="problem",
                note=f"overridden in the problem file; catalog default {old.value:g}"
                if old is not None
                else "set in the problem file",
            )
    # Validate the result as a whole: an override must respect the same ranges and the same
    # cross-field rules (idle <= TDP) as a catalog entry.
    return GpuSpec.model_validate({**gpu.model_dump(by_alias=True), **changes})


def _find_offer_file(name: str, base: Path) -> Path | None:
    p = Path(name)
    for cand in [p] if p.is_absolute() else [base / p, CATALOG_DIR / p]:
        if cand.exists():
            return cand
    return None


@dataclass
class _Errors:
    """Bad ids found while resolving, each as ``file:line: field.path: text``.

    Collected rather than raised so that one run reports every unknown id, not just the first.
    """

    doc: YamlDoc | None
    messages: list[str] = field(default_factory=list)

    def add(self, loc: tuple, text: str) -> None:
        """Record ``text`` at ``loc`` (a field path of the problem file)."""
        where = self.doc.where(loc) if self.doc is not None else "problem"
        self.messages.append(f"{where}: {format_loc(loc)}: {text}")

    def raise_if_any(self) -> None:
        """One InputError holding every message (indented one per line when several)."""
        if not self.messages:
            return
        errors = self.messages
        head = "invalid problem file: " if self.doc is not None else "invalid problem: "
        raise InputError(head + (errors[0] if len(errors) == 1 else "\n  " + "\n  ".join(errors)))


def _allowed_gpus(
    problem: Problem, all_gpus: dict[str, GpuSpec], errors: _Errors
) -> dict[str, GpuSpec]:
    """The problem's GPU types (every catalog GPU when it names none), overrides applied."""
    allowed = problem.gpus if problem.gpus is not None else list(all_gpus)
    for i, g in enumerate(allowed):
        if g not in all_gpus:
            errors.add(("gpus", i), f"unknown gpu {g!r}; {did_you_mean(g, all_gpus.keys())}")
        elif g in allowed[:i]:
            errors.add(("gpus", i), f"gpu {g!r} is listed twice (also gpus[{allowed.index(g)}])")
    if not allowed:
        errors.add(
            ("gpus",),
            "the list is empty; name at least one GPU type (or omit gpus to allow every catalog GPU)",
        )
    gpus = {g: all_gpus[g] for g in allowed if g in all_gpus}
    for g, ov in problem.overrides.gpus.items():
        if g not in all_gpus:
            errors.add(
                ("overrides", "gpus", g), f"unknown gpu {g!r}; {did_you_mean(g, all_gpus.keys())}"
            )
        elif g in gpus:
            try:
                if ov.server is not None:
                    gpus[g] = _rehouse(gpus[g], ov.server)
                gpus[g] = _override_gpu(gpus[g], ov)
            except ValidationError as exc:
                why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
                errors.add(("overrides", "gpus", g), f"the overridden GPU is not valid: {why}")
            except _OverrideError as exc:
                errors.add(("overrides", "gpus", g, "server"), str(exc))
    return gpus


def _rehouse(gpu: GpuSpec, server_id: str) -> GpuSpec:
    """``gpu`` bought in another server type of catalogs/servers.yaml."""
    servers = load_servers()
    if server_id not in servers:
        raise _OverrideError(
            f"unknown server type {server_id!r}; {did_you_mean(server_id, servers.keys())}"
        )
    try:
        return with_server(gpu, servers[server_id])
    except ValueError as exc:
        raise _OverrideError(str(exc)) from None


class _OverrideError(ValueError):
    pass


def _custom_gpus(
    problem: Problem, all_gpus: dict[str, GpuSpec], errors: _Errors
) -> dict[str, GpuSpec]:
    """The catalog plus ``custom_gpus``: each a copy of its ``like`` GPU with the given figures."""
    out = dict(all_gpus)
    for cid, c in problem.custom_gpus.items():
        loc = ("custom_gpus", cid)
        if cid in all_gpus:
            errors.add(loc, f"gpu {cid!r} is in the catalog; use overrides.gpus to change it")
            continue
        if c.like not in all_gpus:
            errors.add(
                (*loc, "like"), f"unknown gpu {c.like!r}; {did_you_mean(c.like, all_gpus.keys())}"
            )
            continue
        base = all_gpus[c.like].model_copy(
            update={"id": cid, "name": c.name or f"{cid} (figures of {c.like} unless given)"}
        )
        try:
            if c.server is not None:
                base = _rehouse(base, c.server)
            out[cid] = _override_gpu(base, c)
        except ValidationError as exc:
            why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            errors.add(loc, f"the custom GPU is not valid: {why}")
        except _OverrideError as exc:
            errors.add((*loc, "server"), str(exc))
    return out


def _read_profiles(
    problem: Problem,
    base: Path,
    gpus: dict[str, GpuSpec],
    models: dict[str, ModelArch],
    errors: _Errors,
) -> Profiles:
    """Load ``profiles`` files; every entry must name a known model and GPU (file:line)."""
    serve, train = [], []
    for i, name in enumerate(problem.profiles):
        path = Path(name) if Path(name).is_absolute() else base / name
        if not path.is_file():
            errors.add(("profiles", i), f"profiles file {name!r} not found (looked in {base})")
            continue
        try:
            doc = load_yaml(path)
            pf = validate(ProfileFile, doc, "profiles file")
        except InputError as exc:
            errors.add(("profiles", i), f"profiles file {name!r}: {exc}")
            continue
        for kind, entries, out in (("serve", pf.serve, serve), ("train", pf.train, train)):
            for j, e in enumerate(entries):
                bad = _profile_ids(e.model, e.gpu, gpus, models)
                if bad:
                    where = doc.where((kind, j, bad[0]))
                    errors.add(("profiles", i), f"{where}: {kind}[{j}].{bad[0]}: {bad[1]}")
                else:
                    out.append((e, str(path)))
    return Profiles(tuple(serve), tuple(train))


def _profile_ids(
    model: str, gpu: str, gpus: dict[str, GpuSpec], models: dict[str, ModelArch]
) -> tuple[str, str] | None:
    """(field, message) for an unknown model or GPU of a profile entry."""
    if model not in models:
        return "model", f"unknown model {model!r}; {did_you_mean(model, models.keys())}"
    if gpu not in gpus:
        return "gpu", f"unknown gpu {gpu!r}; {did_you_mean(gpu, gpus.keys())}"
    return None


def _check_models(problem: Problem, models: dict[str, ModelArch], errors: _Errors) -> None:
    """Every workload's model must be in the model catalog."""
    for kind in ("train", "serve"):
        for i, w in enumerate(getattr(problem.workloads, kind)):
            if w.model not in models:
                errors.add(
                    ("workloads", kind, i, "model"),
                    f"unknown model {w.model!r}; {did_you_mean(w.model, models.keys())}",
                )


def _read_offer_files(
    problem: Problem, base: Path, all_gpus: dict[str, GpuSpec], errors: _Errors
) -> tuple[dict[str, Offer], list[str]]:
    """Offers of the problem's offers files (a later file's id wins) and the paths read."""
    offers: dict[str, Offer] = {}
    files: list[str] = []
    for i, name in enumerate(problem.offers.files):
        path = _find_offer_file(name, base)
        if path is None:
            errors.add(
                ("offers", "files", i),
                f"offers file {name!r} not found (looked in {base} and {CATALOG_DIR})",
            )
            continue
        files.append(str(path))
        try:
            offers.update(load_offers(path, all_gpus))
        except InputError as exc:  # say which entry of the problem named the bad file
            errors.add(("offers", "files", i), f"offers file {name!r}: {exc}")
    return offers, files


def _add_inline_offers(
    problem: Problem, all_gpus: dict[str, GpuSpec], offers: dict[str, Offer], errors: _Errors
) -> None:
    """Add ``offers.extra`` to ``offers``; an inline offer replaces a file's offer of its id
    (that is what inline offers are for), but two inline offers may not share an id."""
    seen: dict[str, int] = {}
    for i, o in enumerate(problem.offers.extra):
        if o.id in seen:
            errors.add(
                ("offers", "extra", i, "id"),
                f"offer id {o.id!r} is also offers.extra[{seen[o.id]}]; ids must be unique",
            )
            continue
        seen[o.id] = i
        if o.gpu not in all_gpus:
            errors.add(
                ("offers", "extra", i, "gpu"),
                f"offer {o.id!r}: unknown gpu {o.gpu!r}; {did_you_mean(o.gpu, all_gpus.keys())}",
            )
            continue
        offers[o.id] = o


def _override_offers(problem: Problem, offers: dict[str, Offer], errors: _Errors) -> None:
    """Apply ``overrides.offers`` in place; the override's source replaces the offer's."""
    for oid, ov in problem.overrides.offers.items():
        if oid not in offers:
            errors.add(
                ("overrides", "offers", oid),
                f"unknown offer {oid!r}; {did_you_mean(oid, offers.keys())}",
            )
            continue
        upd = {k: v for k, v in ov.model_dump(exclude={"source"}).items() if v is not None}
        if upd.get("fabric") == "none":
            upd["fabric_gbps_per_gpu"] = None
        data = {**offers[oid].model_dump(), **upd, "source": ov.source}
        try:  # re-validate: an override must leave a consistent offer
            offers[oid] = Offer.model_validate(data)
        except ValidationError as exc:
            why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            errors.add(("overrides", "offers", oid), f"the overridden offer is not valid: {why}")


def _check_providers(problem: Problem, offers: dict[str, Offer], errors: _Errors) -> None:
    """Every provider of ``offers.providers`` must have an offer (before any filtering)."""
    providers = problem.offers.providers
    if providers is None:
        return
    known = {o.provider for o in offers.values()}
    for i, p in enumerate(providers):
        if p not in known:
            errors.add(
                ("offers", "providers", i), f"unknown provider {p!r}; {did_you_mean(p, known)}"
            )


def _trusted_offers(
    problem: Problem, offers: dict[str, Offer], gpus: dict[str, GpuSpec]
) -> dict[str, Offer]:
    """Offers for allowed GPUs from allowed providers; marketplaces only when allowed; each
    provider's negotiated discount applied once, here."""
    providers = problem.offers.providers
    return {
        oid: discounted(o, problem.offers.discounts.get(o.provider, 0.0))
        for oid, o in offers.items()
        if o.gpu in gpus
        and (providers is None or o.provider in providers)
        and (problem.offers.marketplaces or not o.marketplace)
    }


def discounted(o: Offer, share: float) -> Offer:
    """The offer at ``(1 - share)`` of its listed price, its source saying so. Idempotent:
    the listed price is kept (``list_usd_per_gpu_hour``), so the discount applies once.

    >>> from planner.inputs.catalog import Offer
    >>> o = Offer(id="x", provider="p", gpu="g", kind="on_demand", usd_per_gpu_hour=4.0,
    ...           source="list", as_of="2026")
    >>> discounted(o, 0.25).usd_per_gpu_hour
    3.0
    >>> discounted(discounted(o, 0.25), 0.25).usd_per_gpu_hour
    3.0
    """
    if share <= 0:
        return o
    listed = o.list_usd_per_gpu_hour or o.usd_per_gpu_hour
    return o.model_copy(
        update={
            "usd_per_gpu_hour": listed * (1 - share),
            "list_usd_per_gpu_hour": listed,
            "source": f"{o.source}; negotiated discount {share:.0%} off "
            f"${listed:g} (offers.discounts)",
        }
    )


def contract_offer_id(i: int, c: Contract) -> str:
    """The id of ``fleet.contracts[i]`` as a committed offer.

    >>> c = Contract(provider="lambda", gpu="h100-sxm", count=16, start="2026-07",
    ...              end="2027-06", usd_per_gpu_hour=2.0)
    >>> contract_offer_id(0, c)
    'contract-1-lambda-h100-sxm'
    """
    return f"contract-{i + 1}-{c.provider}-{c.gpu}"


def contract_offers(problem: Problem, gpus: dict[str, GpuSpec]) -> dict[str, Offer]:
    """``fleet.contracts`` as committed offers: capacity of ``count`` GPUs inside the term,
    at no marginal cost (the contract is paid whatever the plan does)."""
    out = {}
    for i, c in enumerate(problem.fleet.contracts):
        if c.gpu not in gpus:
            continue
        unit = c.gpus_per_instance or min(gpus[c.gpu].node_gpus, c.count)
        oid = contract_offer_id(i, c)
        out[oid] = Offer(
            id=oid,
            provider=c.provider,
            gpu=c.gpu,
            kind="on_demand",
            usd_per_gpu_hour=c.usd_per_gpu_hour,
            gpus_per_instance=min(unit, c.count),
            max_gpus=c.count,
            fabric=c.fabric,
            fabric_gbps_per_gpu=c.fabric_gbps_per_gpu,
            committed=True,
            available_from=c.start,
            available_until=c.end,
            source=f"fleet.contracts[{i}]: signed before the plan",
            as_of=c.start,
        )
    return out


def _check_fleet(
    problem: Problem,
    gpus: dict[str, GpuSpec],
    offers: dict[str, Offer],
    errors: _Errors,
    warnings: list[str],
) -> None:
    """GPUs and providers of ``fleet`` and ``offers.discounts`` exist; dates make sense."""
    start, T = problem.horizon.start, problem.horizon.months
    for i, o in enumerate(problem.fleet.owned):
        where = ("fleet", "owned", i)
        if o.gpu not in gpus:
            errors.add(
                (*where, "gpu"),
                f"unknown or not allowed gpu {o.gpu!r}; {did_you_mean(o.gpu, gpus.keys())}",
            )
        if o.bought is not None and month_index(start, o.bought) >= 0:
            errors.add(
                (*where, "bought"),
                f"bought {o.bought} is not before the horizon start {start}; GPUs that arrive "
                "during the horizon are `arrives: YYYY-MM` (on order) or purchases to plan",
            )
        if o.arrives is not None and not 0 <= month_index(start, o.arrives) < T:
            errors.add(
                (*where, "arrives"),
                f"arrives {o.arrives} is outside the horizon {start} + {T} months",
            )
    known = {o.provider for o in offers.values()}
    for i, c in enumerate(problem.fleet.contracts):
        where = ("fleet", "contracts", i)
        if c.gpu not in gpus:
            errors.add(
                (*where, "gpu"),
                f"unknown or not allowed gpu {c.gpu!r}; {did_you_mean(c.gpu, gpus.keys())}",
            )
        if c.provider not in known:
            errors.add(
                (*where, "provider"),
                f"unknown provider {c.provider!r}; {did_you_mean(c.provider, known)}",
            )
        if month_index(start, c.end) < 0:
            warnings.append(
                f"fleet.contracts[{i}]: ends {c.end}, before the horizon starts ({start}): "
                "it neither costs nor gives anything in this plan"
            )
    for p in problem.offers.discounts:
        if p not in known:
            errors.add(
                ("offers", "discounts", p), f"unknown provider {p!r}; {did_you_mean(p, known)}"
            )


def resolve(
    problem: Problem,
    doc: YamlDoc | None = None,
    base_dir: Path | None = None,
    gpu_catalog: dict[str, GpuSpec] | None = None,
    model_catalog: dict[str, ModelArch] | None = None,
) -> Inputs:
    """Check ids against the catalogs, apply overrides, gather trusted offers.

    Every unknown id is reported (not just the first), each as
    ``file:line: field.path: unknown gpu 'x'; did you mean 'y'?``.
    """
    errors = _Errors(doc)
    all_gpus = gpu_catalog if gpu_catalog is not None else load_gpus()
    all_gpus = _custom_gpus(problem, all_gpus, errors)
    models = model_catalog if model_catalog is not None else load_models()
    gpus = _allowed_gpus(problem, all_gpus, errors)
    _check_models(problem, models, errors)
    profiles = _read_profiles(problem, base_dir or Path.cwd(), all_gpus, models, errors)
    offers, files = _read_offer_files(problem, base_dir or Path.cwd(), all_gpus, errors)
    _add_inline_offers(problem, all_gpus, offers, errors)
    _override_offers(problem, offers, errors)
    _check_providers(problem, offers, errors)
    warnings: list[str] = []
    _check_fleet(problem, gpus, offers, errors, warnings)
    errors.raise_if_any()
    return Inputs(
        problem,
        gpus,
        models,
        _trusted_offers(problem, offers, gpus) | contract_offers(problem, gpus),
        offer_files=files,
        finance=finance_terms(problem),
        warnings=warnings,
        profiles=profiles,
    )


def load_problem(path: str | Path) -> Inputs:
    """Load, validate and resolve a problem file. Every bad input is an InputError."""
    p = Path(path)
    doc = load_yaml(p)
    problem = validate(Problem, doc, "problem file")
    inputs = resolve(problem, doc, base_dir=p.resolve().parent)
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    return Inputs(
        inputs.problem,
        inputs.gpus,
        inputs.models,
        inputs.offers,
        source_path=str(p),
        source_sha256=digest,
        offer_files=inputs.offer_files,
        finance=inputs.finance,
        warnings=inputs.warnings,
        profiles=inputs.profiles,
    )


def load_problem_text(text: str, name: str = "<text>", base_dir: Path | None = None) -> Inputs:
    """Same as :func:`load_problem` for YAML text (tests, what-if scenarios)."""
    doc = parse_yaml_text(text, Path(name))
    problem = validate(Problem, doc, "problem file")
    inputs = resolve(problem, doc, base_dir=base_dir)
    return Inputs(
        inputs.problem,
        inputs.gpus,
        inputs.models,
        inputs.offers,
        source_path=name,
        source_sha256=hashlib.sha256(text.encode()).hexdigest(),
        offer_files=inputs.offer_files,
        finance=inputs.finance,
        warnings=inputs.warnings,
        profiles=inputs.profiles,
    )
