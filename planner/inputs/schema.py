"""The problem file's schema: the pydantic (v2) models of every section of a problem file.

Workloads (training jobs, serving workloads and their request mixes), horizon, budget, site,
GPU and offer overrides, the offers a problem trusts (files, providers, inline offers,
discounts), finance, solver options, the existing fleet (owned GPUs, signed contracts), custom
GPUs, demand scenarios and the risk measure that weighs them, and :class:`Problem` holding
them all. A problem file is a contract: other tools write it. Unknown keys are errors (a typo
must not be silently ignored), numbers must be finite and within the documented limits (docs/reference)
(fleets and contracts up to a million GPUs, commitments up to the budgets' $1e12), booleans
are not numbers, text holds nothing a workbook cannot (:func:`planner.base.units.check_text`),
inline offers set no field only the planner writes, dates are ``YYYY-MM`` months. Loading and
resolution against the catalogs are in :mod:`planner.inputs.problem`.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from planner.base.units import CaseInsensitive, Count, NotBool
from planner.base.yamlio import LocatedError
from planner.inputs.catalog import (
    EFFICIENCY_MAX,
    FABRICS,
    GPU_RANGES,
    MAX_FLEET_GPUS,
    Fabric,
    Offer,
    Strict,
    check_range,
    refuse_planner_fields,
)
from planner.inputs.catalog_dir import SHIPPED_OFFER_FILES
from planner.inputs.market import Market
from planner.inputs.months import month_index, month_label
from planner.inputs.schema_serve import (
    DEFAULT_MAX_LOAD as DEFAULT_MAX_LOAD,
)
from planner.inputs.schema_serve import (
    DEFAULT_REDUNDANCY as DEFAULT_REDUNDANCY,
)
from planner.inputs.schema_serve import NAME_MAX as NAME_MAX
from planner.inputs.schema_serve import SHARE_TOLERANCE as SHARE_TOLERANCE
from planner.inputs.schema_serve import Month as Month
from planner.inputs.schema_serve import RequestBucket as RequestBucket
from planner.inputs.schema_serve import ServeWorkload as ServeWorkload
from planner.inputs.schema_serve import Slo as Slo
from planner.inputs.schema_serve import TokenShape as TokenShape
from planner.inputs.schema_serve import TokenSize as TokenSize
from planner.inputs.schema_serve import Traffic as Traffic
from planner.inputs.schema_serve import _month as _month


class Horizon(Strict):
    start: Month = Field(description="the first month planned, YYYY-MM")
    months: int = Field(ge=1, le=120, description="how many months are planned")

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
    power_usd_per_kwh: float = Field(ge=0, le=10, description="electricity price, $ per kWh")
    pue: float = Field(1.3, ge=1.0, le=3.0, description="facility power over IT power")
    # Colocation at $150-250 per kW-month is ~$200-300 per GPU-month; $10k is a unit slip.
    hosting_usd_per_gpu_month: float = Field(
        0.0, ge=0, le=10_000, description="$ per owned GPU a month, on top of colocation"
    )
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
    liquid_cooling: bool = Field(
        False,
        description="the site has direct liquid cooling (a coolant loop to the racks); without "
        "it a liquid-cooled server or rack (GB200/GB300 NVL72, MI355X) cannot be bought",
    )


class GpuOverride(Strict):
    """Replace catalog figures for one GPU (a vendor quote, a measured spec); the same ranges
    as the catalog (:data:`planner.inputs.catalog.GPU_RANGES`) and, once applied, idle <= TDP."""

    purchase_usd: float | None = Field(None, gt=0, description="price of one card, $")
    server: str | None = Field(None, description="buy the card in this server type instead")
    server_overhead_usd_per_gpu: float | None = Field(None, ge=0, description="server $ per GPU")
    memory_gb: float | None = Field(None, gt=0, description="memory per card, GB")
    memory_bandwidth_gbs: float | None = Field(None, gt=0, description="memory bandwidth, GB/s")
    bf16_dense_tflops: float | None = Field(None, gt=0, description="dense (not sparse) TFLOPS")
    fp8_dense_tflops: float | None = Field(None, gt=0, description="dense (not sparse) TFLOPS")
    fp4_dense_tflops: float | None = Field(None, gt=0, description="dense (not sparse) TFLOPS")
    tdp_w: float | None = Field(None, gt=0, description="board power at full load, W")
    idle_w: float | None = Field(None, ge=0, description="board power when idle, W")
    host_w_per_gpu: float | None = Field(None, ge=0, description="the server's own watts per GPU")
    train_efficiency: float | None = Field(
        None, gt=0, le=EFFICIENCY_MAX, description="vendor's training efficiency vs NVIDIA: x MFU"
    )
    serve_efficiency: float | None = Field(
        None,
        gt=0,
        le=EFFICIENCY_MAX,
        description="vendor's serving efficiency vs NVIDIA: x tokens/s",
    )
    source: str = Field(
        "problem file override", max_length=500, description="where the figures come from"
    )

    @field_validator(
        *(k for k in GPU_RANGES if k not in ("node_size", "int8_dense_tops")), mode="after"
    )
    @classmethod
    def _in_range(cls, v: float | None, info: Any) -> float | None:
        return v if v is None else check_range(info.field_name, v)


class OfferOverride(Strict):
    usd_per_gpu_hour: float | None = Field(None, gt=0, le=1000, description="price per GPU-hour, $")
    max_gpus: int | None = Field(None, ge=1, le=MAX_FLEET_GPUS, description="most GPUs at once")
    fabric: Annotated[Fabric, CaseInsensitive] | None = Field(
        None, description="network between instances"
    )
    fabric_gbps_per_gpu: float | None = Field(
        None, gt=0, le=10_000, description="Gb/s per GPU between instances"
    )
    source: str = Field("problem file override", description="where the figures come from")


class Overrides(Strict):
    gpus: dict[str, GpuOverride] = Field({}, description="catalog figures replaced, by GPU id")
    offers: dict[str, OfferOverride] = Field({}, description="offer figures replaced, by offer id")


class ProviderCap(Strict):
    """What one provider can deliver of one GPU type at once, over all its offers (on-demand,
    spot, reserved instances and training blocks together): a quote's "up to N GPUs", or a
    limit the team sets to spread its risk across providers."""

    provider: str = Field(min_length=1, max_length=100, description="a provider of the offers")
    gpu: str = Field(min_length=1, max_length=100, description="a GPU id of the problem's gpus")
    max_gpus: int = Field(ge=0, le=1_000_000, description="most GPUs rented from it at once")
    source: str = Field("the problem file", max_length=2000, description="where the cap comes from")


class OfferChoice(Strict):
    """Which rental offers the problem trusts."""

    files: list[str] = Field(
        default_factory=lambda: list(SHIPPED_OFFER_FILES),
        description="offers files; relative to the problem file, else to catalogs/; default: "
        "every shipped offers file (offers.yaml, offers-manual.yaml, offers-market.yaml)",
    )
    estimates: bool | None = Field(
        None,
        description="use offers whose price is an estimate (a source starting 'estimate' or "
        "'illustrative'); default: only when the problem lists its offers files",
    )
    providers: list[str] | None = Field(None, description="allow list; None = every provider")
    marketplaces: bool = Field(
        False, description="allow marketplace/reseller offers (vast, shadeform, ...)"
    )
    spot_for_serving: bool = Field(False, description="allow spot offers for serving workloads")
    extra: list[Offer] = Field(default_factory=list, description="offers written inline")
    discounts: dict[str, Annotated[float, NotBool, Field(ge=0, lt=1)]] = Field(
        default_factory=dict, description="negotiated share off every price of a provider"
    )
    provider_caps: list[ProviderCap] = Field(
        default_factory=list,
        max_length=1000,
        description="most GPUs of a type one provider delivers at once, all its offers together",
    )

    # committed, available_from/until and list_usd_per_gpu_hour are the planner's own
    _planner_only = field_validator("extra", mode="before")(
        classmethod(lambda cls, v: refuse_planner_fields(v))
    )


class Window(Strict):
    start: Month = Field(description="the first month the job may run, YYYY-MM")
    deadline: Month = Field(description="done by the end of this month, YYYY-MM")

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

    allowed: bool = Field(False, description="allow spot offers for this job")
    max_share: float = Field(0.5, ge=0, le=1, description="largest share of the job's work on spot")
    overhead: float | None = Field(
        None,
        ge=0,
        le=2,
        description="extra hours per hour of spot progress; default: from the provider's "
        "preemption rate and the job's stack (planner/physics/realized.py)",
    )


class TrainJob(Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX, description="unique among workloads")
    model: str = Field(max_length=NAME_MAX, description="model id (catalogs/models.yaml)")
    # Llama 3 pre-trained on ~1.5e13 tokens; 1e15 leaves room and keeps hours finite.
    tokens: Count = Field(ge=1, le=1e15, description="tokens to train on (2T, 300B, 7e9)")
    method: Annotated[Literal["full", "lora", "qlora"], CaseInsensitive] = Field(
        "full", description="full training, LoRA or QLoRA"
    )
    window: Window = Field(description="the months the job may run in")
    seq_len: int = Field(4096, ge=128, le=1_048_576, description="sequence length, tokens")
    spot: Spot = Field(Spot(), description="spot capacity (off unless allowed)")
    # How real runs of this team compare with benchmarks (planner/physics/realized.py).
    stack: Annotated[Literal["mature", "typical", "first-run"], CaseInsensitive] = Field(
        "typical", description="this team's runs vs benchmarks: mature, typical or first-run"
    )
    # Plan the hours of this quantile: the deadline holds with this probability under the model.
    confidence: float = Field(0.8, gt=0, lt=1, description="quantile of real runs' hours planned")
    # Where the run lives: one provider (or the team's own GPUs) for the whole run, since its
    # checkpoints, data and network setup would otherwise move mid-run; `split` allows hops.
    providers: Annotated[Literal["single", "split"], CaseInsensitive] = Field(
        "single", description="single: one provider or owned GPUs for the whole run; split: mix"
    )
    # Multi-node runs need a training fabric (InfiniBand, RoCE, EFA, TCPX); `true` also allows
    # plain Ethernet and offers whose fabric is not stated, at Ethernet bandwidth.
    ethernet: bool = Field(False, description="allow multi-node runs over plain Ethernet")


class Workloads(Strict):
    train: list[TrainJob] = Field([], description="training jobs")
    serve: list[ServeWorkload] = Field([], description="serving workloads")


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
    depreciation_years: float | None = Field(
        None, ge=1, le=50, description="straight line, for the P&L view"
    )
    currency_label: str = Field(
        "USD",
        min_length=1,
        max_length=10,
        description="a label only: every figure is in US dollars (nothing is converted)",
    )
    capex_at: Annotated[Literal["order", "delivery"], CaseInsensitive] = Field(
        "order", description="a purchase's capex is paid when it is ordered or on delivery"
    )


class SolverOptions(Strict):
    time_limit_s: float = Field(60.0, gt=0, le=7 * 24 * 3600, description="at most a week")
    gap: float = Field(0.001, ge=0, le=0.5, description="relative optimality gap to stop at")


class OwnedGpus(Strict):
    """GPUs the team has before the plan: in service (``bought``) or on order (``arrives``)."""

    gpu: str = Field(description="GPU id")
    count: int = Field(ge=1, le=MAX_FLEET_GPUS, description="number of cards")
    bought: Month | None = Field(None, description="in service before the horizon, since")
    arrives: Month | None = Field(None, description="already paid; in service from this month")
    sell: Annotated[Literal["never", "allowed"], CaseInsensitive] = Field(
        "never", description="allowed: the plan may sell whole nodes at the used-market price"
    )

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

    provider: str = Field(min_length=1, description="provider id")
    gpu: str = Field(description="GPU id")
    count: int = Field(ge=1, le=MAX_FLEET_GPUS, description="GPUs under contract")
    start: Month = Field(description="the first month of the term")
    end: Month = Field(description="the last month of the term")
    usd_per_gpu_hour: float = Field(gt=0, le=1000, description="paid for every hour of the term")
    gpus_per_instance: int | None = Field(None, ge=1, le=576, description="default: node size")
    fabric: Annotated[Fabric, CaseInsensitive] | None = Field(
        None, description="network between instances"
    )
    fabric_gbps_per_gpu: float | None = Field(
        None, gt=0, le=10_000, description="Gb/s per GPU between instances"
    )

    _v = field_validator("start", "end")(classmethod(lambda cls, v: _month(v)))

    @model_validator(mode="after")
    def _order(self) -> Contract:
        errs: list[tuple[tuple, str]] = []
        if month_index(self.start, self.end) < 0:
            errs.append((("end",), f"end {self.end} is before start {self.start}"))
        if self.fabric in (None, "none") and self.fabric_gbps_per_gpu is not None:
            errs.append(
                (
                    ("fabric_gbps_per_gpu",),
                    f"fabric_gbps_per_gpu is given but fabric is {self.fabric or 'not stated'}; "
                    f"name the fabric ({', '.join(f for f in FABRICS if f != 'none')}) or drop "
                    "the bandwidth",
                )
            )
        if self.fabric not in (None, "none") and self.fabric_gbps_per_gpu is None:
            errs.append(
                (
                    ("fabric",),
                    f"fabric {self.fabric!r} needs fabric_gbps_per_gpu (Gb/s per GPU between "
                    "instances, e.g. 400 for one 400 Gb/s InfiniBand NIC per GPU)",
                )
            )
        if errs:
            raise LocatedError(errs)
        return self


HOURS_PER_MONTH = 730.0  # as planner.physics.demand (a contract's hours inside the horizon)


class Fleet(Strict):
    owned: list[OwnedGpus] = Field(default_factory=list, description="GPUs in service or on order")
    contracts: list[Contract] = Field(
        default_factory=list, description="rentals signed before the plan"
    )

    @model_validator(mode="after")
    def _sizes(self) -> Fleet:
        errs: list[tuple[tuple, str]] = []
        for key, items in (("owned", self.owned), ("contracts", self.contracts)):
            total = sum(x.count for x in items)
            if total > MAX_FLEET_GPUS:
                errs.append(
                    (
                        (key,),
                        f"{total:,} GPUs in all; the planner plans fleets of up to "
                        f"{MAX_FLEET_GPUS:,} GPUs (the largest clusters are ~100-200k)",
                    )
                )
        if errs:
            raise LocatedError(errs)
        return self


class CustomGpu(GpuOverride):
    """A GPU the catalogs do not list: a catalog GPU's figures (``like``) with the given ones
    replacing them, e.g. for a card measured in a profile and rented at a quoted price."""

    like: str = Field(min_length=1, description="catalog GPU whose figures are the default")
    name: str | None = Field(None, max_length=200, description="a display name")


def _scenario_number(v: Any) -> Any:
    """A scenario's ``set`` values are numbers: pydantic would read ``"0.5"`` as 0.5 and
    ``true`` as 1, and a forecast written as text is a typo, not a number."""
    if isinstance(v, bool):
        raise ValueError("expected a number, got a boolean (true/false/yes/no)")
    if not isinstance(v, int | float):
        shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
        raise ValueError(
            f"expected a number, got {type(v).__name__} {shown}; a scenario sets numbers "
            "(demand, prices, rates), written without quotes"
        )
    return v


class ScenarioScale(Strict):
    """Multipliers of a scenario: ``serving_demand`` scales every serving workload's daily
    active users (so its demand in every month)."""

    serving_demand: float = Field(
        gt=0,
        le=1000,
        description="multiplier of every serving workload's daily_active_users (demand)",
    )


MAX_SCENARIOS = 50  # each scenario is a copy of the serving model in a two-stage plan
PROBABILITY_TOLERANCE = 1e-9  # scenario probabilities sum to 1 within this


class ScenarioSpec(Strict):
    """One demand forecast: its probability, and the values (``set``, by the keys of
    ``planner whatif --vary``) and multipliers (``scale``) that differ from the file."""

    name: str = Field(min_length=1, max_length=NAME_MAX, description="unique among scenarios")
    probability: float = Field(gt=0, le=1, description="all probabilities sum to 1")
    set: dict[str, Annotated[float, BeforeValidator(_scenario_number)]] = Field(
        default_factory=dict,
        max_length=1_000,
        description="KEY: number, KEY a path or alias as in planner whatif --vary",
    )
    scale: ScenarioScale | None = Field(None, description="multipliers of the scenario")


class Risk(Strict):
    """How a two-stage plan weighs its scenarios' costs."""

    measure: Annotated[Literal["expected", "cvar", "worst_case"], CaseInsensitive] = Field(
        "expected",
        description="expected cost; cvar: plus weight x CVaR at alpha; worst_case: the largest",
    )
    alpha: float = Field(
        0.9, gt=0, lt=1, description="cvar: the share of outcomes it averages above"
    )
    weight: float = Field(
        1.0, ge=0, le=1000, description="cvar: its weight beside the expected cost"
    )

    @model_validator(mode="after")
    def _cvar_only(self) -> Risk:
        if self.measure == "cvar":
            return self
        given = [f for f in ("alpha", "weight") if f in self.model_fields_set]
        if given:
            raise LocatedError(
                [
                    (
                        (f,),
                        f"{f} applies to measure: cvar only; measure is {self.measure} "
                        f"(drop {f}, or set measure: cvar)",
                    )
                    for f in given
                ]
            )
        return self


class Problem(Strict):
    name: str = Field(
        min_length=1, max_length=500, description="what the plan is for (the workbook's title)"
    )
    horizon: Horizon = Field(description="the months planned")
    budget: Budget = Field(description="caps on cash: purchases, all spend")
    site: Site = Field(description="power, colocation, hosting, power cap")
    gpus: list[str] | None = Field(None, description="GPU ids the plan may use; none: all")
    overrides: Overrides = Field(Overrides(), description="catalog figures replaced: GPUs, offers")
    offers: OfferChoice = Field(OfferChoice(), description="the rental offers the problem trusts")
    workloads: Workloads = Field(description="training jobs and serving workloads")
    fleet: Fleet = Field(Fleet(), description="GPUs owned and contracts signed")
    finance: Finance = Field(Finance(), description="how money is compared over time")
    market: Market = Field(Market(), description="price paths and lead times")
    solver: SolverOptions = Field(SolverOptions(), description="the time limit and the gap")
    custom_gpus: dict[str, CustomGpu] = Field(
        default_factory=dict, description="GPUs the catalogs do not list, by id"
    )
    profiles: list[str] = Field(
        default_factory=list, description="measured profiles files, relative to the problem"
    )
    model_files: list[str] = Field(
        default_factory=list,
        description="model catalog files (planner model import-hf), relative to the problem",
    )
    scenarios: list[ScenarioSpec] | None = Field(
        None,
        min_length=1,
        max_length=MAX_SCENARIOS,
        description="demand forecasts with probabilities (a two-stage plan); none: one forecast",
    )
    risk: Risk | None = Field(None, description="how the scenarios' costs are weighed")

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

    @model_validator(mode="after")
    def _provider_caps(self) -> Problem:
        """A provider cap names a GPU type of the problem, once per (provider, GPU)."""
        errs: list[tuple[tuple, str]] = []
        seen: dict[tuple[str, str], int] = {}
        for i, c in enumerate(self.offers.provider_caps):
            where = ("offers", "provider_caps", i)
            if self.gpus is not None and c.gpu not in self.gpus:
                errs.append(
                    (
                        (*where, "gpu"),
                        f"gpu {c.gpu!r} is not one of the problem's gpus ({', '.join(self.gpus)})",
                    )
                )
            key = (c.provider, c.gpu)
            if key in seen:
                errs.append(
                    (where, f"{c.provider} {c.gpu} is capped twice (provider_caps[{seen[key]}])")
                )
            seen.setdefault(key, i)
        if errs:
            raise LocatedError(errs)
        return self

    @model_validator(mode="after")
    def _commitments(self) -> Problem:
        """What the contracts commit inside the horizon (count x hours x price) stays within
        the planner's money ceiling, each and all together."""
        errs: list[tuple[tuple, str]] = []
        total = 0.0
        for i, c in enumerate(self.fleet.contracts):
            usd = self.contract_months(c) * HOURS_PER_MONTH * c.count * c.usd_per_gpu_hour
            total += usd
            if usd > MAX_USD:
                errs.append(
                    (
                        ("fleet", "contracts", i),
                        f"commits ${usd:,.4g} inside the horizon ({c.count:,} GPUs x "
                        f"{self.contract_months(c)} months x ${c.usd_per_gpu_hour:g}/GPU-h); "
                        f"commitments are at most ${MAX_USD:,.0f}, like budgets",
                    )
                )
        if not errs and total > MAX_USD:
            errs.append(
                (
                    ("fleet", "contracts"),
                    f"the contracts commit ${total:,.4g} inside the horizon; commitments are at "
                    f"most ${MAX_USD:,.0f} in all, like budgets",
                )
            )
        if errs:
            raise LocatedError(errs)
        return self

    @model_validator(mode="after")
    def _scenarios(self) -> Problem:
        """Scenario names are unique and their probabilities a distribution (sum 1); a risk
        measure weighs scenarios, so it needs them."""
        errs: list[tuple[tuple, str]] = []
        if self.risk is not None and self.scenarios is None:
            errs.append(
                (
                    ("risk",),
                    "risk weighs the costs of scenarios, and the problem has none; add "
                    "scenarios: [{name, probability, set, scale}, ...] or drop risk",
                )
            )
        specs = self.scenarios or []
        first: dict[str, int] = {}
        for i, sc in enumerate(specs):
            if sc.name in first:
                errs.append(
                    (
                        ("scenarios", i, "name"),
                        f"scenario name {sc.name!r} is used twice: scenarios[{first[sc.name]}] "
                        f"and scenarios[{i}]; names must be unique",
                    )
                )
            first.setdefault(sc.name, i)
        total = math.fsum(sc.probability for sc in specs)
        if specs and abs(total - 1.0) > PROBABILITY_TOLERANCE:
            each = ", ".join(f"{sc.name}: {sc.probability:g}" for sc in specs)
            errs.append(
                (
                    ("scenarios",),
                    f"scenario probabilities sum to {total:.12g}; they must sum to 1 ({each})",
                )
            )
        if errs:
            raise LocatedError(errs)
        return self

    def contract_months(self, c: Contract) -> int:
        """Months of contract ``c``'s term inside the horizon."""
        a = max(0, month_index(self.horizon.start, c.start))
        b = min(self.horizon.months - 1, month_index(self.horizon.start, c.end))
        return max(0, b - a + 1)

    def month_labels(self) -> list[str]:
        return [month_label(self.horizon.start, t) for t in range(self.horizon.months)]

    def month_of(self, label: str) -> int:
        return month_index(self.horizon.start, label)
