"""Catalog schemas (GPU specs, rental offers, model architectures) and their loaders.

Every figure in a catalog is *sourced*: it carries ``source`` and ``as_of``. Prices carry a
``low``/``high`` range beside the default because published figures disagree.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.base.errors import InputError
from planner.base.units import CaseInsensitive
from planner.base.yamlio import (
    LocatedError,
    YamlDoc,
    did_you_mean,
    load_yaml,
    require_mapping,
    validate,
    validation_message,
)
from planner.inputs.catalog_dir import CATALOG_DIR
from planner.inputs.model_arch import (
    ModelArch,  # re-exported: models have their own module
    check_published_counts,
)
from planner.inputs.offer_terms import PriceStep
from planner.inputs.strict import Strict

# The largest clusters built are ~100-200k GPUs: a count of GPUs anywhere in the inputs (an
# existing fleet, a contract, an offer's cap or block, a measured run, a planned serving peak)
# above a million is a typo, and would swamp the solver.
MAX_FLEET_GPUS = 1_000_000


class Sourced(Strict):
    """A number with where it came from."""

    value: float
    source: str = Field(min_length=1)
    as_of: str = Field(min_length=4, description="date of the source, YYYY-MM or YYYY-MM-DD")
    note: str | None = None


class SourcedRange(Sourced):
    """A figure on which sources disagree: the default ``value`` and the published range."""

    low: float
    high: float
    low_source: str | None = None
    high_source: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> SourcedRange:
        if not (self.low <= self.value <= self.high):
            raise ValueError(
                f"need low <= value <= high, got {self.low}, {self.value}, {self.high}"
            )
        return self


class Interconnect(Strict):
    """The scale-up link of a GPU: GB/s per GPU to its peers and how many peers share it."""

    nvlink_gbs: float = Field(
        0.0,
        ge=0,
        description="scale-up link GB/s per GPU, bidirectional (NVLink, or AMD Infinity Fabric/"
        "xGMI for Instinct cards); 0 = none",
    )
    pcie_gen: int = Field(ge=3, le=6)
    p2p: bool = Field(description="GPU peer-to-peer over PCIe/NVLink works")
    link: str | None = Field(None, max_length=60, description="the link's name, e.g. NVLink 5")
    domain_gpus: int | None = Field(
        None,
        ge=1,
        le=576,
        description="GPUs joined by the scale-up link without the network (8 in an HGX/OAM "
        "server, 72 in an NVL72 rack); None = the server's slots (PCIe cards: over PCIe)",
    )
    source: str
    as_of: str
    note: str | None = None


# The physical (and market) range of every GPU catalog figure: (low, high, unit). A value
# outside is a typo or a unit slip (W vs kW, $ vs k$), so it is refused with the range. Today's
# catalog spans 24-180 GB, 300-8,000 GB/s, 71-2,250 dense BF16 TFLOPS, 72-1,000 W TDP and
# $850-40,000 per card; the bounds leave room for the next generations.
GPU_RANGES: dict[str, tuple[float, float, str]] = {
    "memory_gb": (1.0, 4096.0, "GB"),
    "memory_bandwidth_gbs": (10.0, 100_000.0, "GB/s"),
    "bf16_dense_tflops": (0.1, 100_000.0, "TFLOPS"),
    "fp8_dense_tflops": (0.1, 200_000.0, "TFLOPS"),
    "int8_dense_tops": (0.1, 200_000.0, "TOPS"),
    "fp4_dense_tflops": (0.1, 400_000.0, "TFLOPS"),
    "tdp_w": (0.0, 5_000.0, "W"),  # 0 lets a test switch power off; negative is a typo
    "idle_w": (0.0, 5_000.0, "W"),
    "host_w_per_gpu": (0.0, 10_000.0, "W"),
    "node_size": (1.0, 576.0, "GPUs"),
    "purchase_usd": (0.0, 10_000_000.0, "USD"),
    "server_overhead_usd_per_gpu": (0.0, 10_000_000.0, "USD"),
}


def check_range(name: str, value: float) -> float:
    """``value`` if it lies in ``GPU_RANGES[name]``; a ValueError naming the range otherwise.

    >>> check_range("tdp_w", 700.0)
    700.0
    >>> check_range("tdp_w", -5.0)
    Traceback (most recent call last):
    ...
    ValueError: -5 is outside the allowed range 0 to 5000 W
    """
    lo, hi, unit = GPU_RANGES[name]
    if not lo <= value <= hi:
        raise ValueError(f"{value:g} is outside the allowed range {lo:g} to {hi:g} {unit}")
    return value


# A vendor's software efficiency relative to NVIDIA's lies in (0, 2]: 0 would mean a card that
# never finishes a step, and no stack is published at twice NVIDIA's speed on equal silicon.
EFFICIENCY_MAX = 2.0


def check_efficiency(value: float) -> float:
    """``value`` if it is a software efficiency relative to NVIDIA's, in (0, 2]; else ValueError.

    >>> check_efficiency(0.81)
    0.81
    >>> check_efficiency(0.0)
    Traceback (most recent call last):
    ...
    ValueError: a software efficiency relative to NVIDIA lies in (0, 2], got 0
    """
    if not 0.0 < value <= EFFICIENCY_MAX:
        raise ValueError(
            f"a software efficiency relative to NVIDIA lies in (0, {EFFICIENCY_MAX:g}], got {value:g}"
        )
    return value


class ResidualPoint(Strict):
    """What a used card fetches at ``age_months``, as a share of its purchase price."""

    age_months: int = Field(ge=1, le=240)
    share: float = Field(ge=0, le=1)
    low: float = Field(ge=0, le=1)
    high: float = Field(ge=0, le=1)
    source: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ResidualPoint:
        if not (self.low <= self.share <= self.high):
            raise ValueError(
                f"need low <= share <= high, got {self.low}, {self.share}, {self.high}"
            )
        return self


class ResidualCurve(Strict):
    """Resale value by age: ``(0, 1)`` then the points, linear between them and continuing the
    last segment's slope beyond the last point, never below 0."""

    points: tuple[ResidualPoint, ...] = Field(min_length=1, max_length=100)
    source: str = Field(min_length=1)
    as_of: str = Field(min_length=4)
    note: str | None = None

    @model_validator(mode="after")
    def _falling(self) -> ResidualCurve:
        ages = [p.age_months for p in self.points]
        if ages != sorted(set(ages)):
            raise ValueError(f"ages must be strictly ascending, got {ages}")
        shares = [1.0] + [p.share for p in self.points]
        for a, b, age in zip(shares, shares[1:], ages, strict=False):
            if b > a:
                raise ValueError(
                    f"a resale share cannot rise with age: {b:g} at {age} months after {a:g}"
                )
        return self

    def share_at(self, age_months: float, bound: str = "share") -> float:
        """Share of the purchase price at ``age_months`` (``bound``: share, low or high).

        >>> c = ResidualCurve(points=[{"age_months": 12, "share": 0.8, "low": 0.7,
        ...   "high": 0.9}, {"age_months": 36, "share": 0.5, "low": 0.4, "high": 0.6}],
        ...   source="s", as_of="2026")
        >>> c.share_at(6), c.share_at(24), c.share_at(60), c.share_at(200)
        (0.9, 0.65, 0.2, 0.0)
        >>> c.share_at(36, "low")
        0.4
        """
        xs = [0.0] + [float(p.age_months) for p in self.points]
        ys = [1.0] + [float(getattr(p, bound)) for p in self.points]
        if len(xs) == 2 or age_months <= xs[-1]:
            i = max(1, next((k for k, x in enumerate(xs) if x >= age_months), len(xs) - 1))
        else:
            i = len(xs) - 1
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        value = y0 + (y1 - y0) * (age_months - x0) / (x1 - x0)
        return round(min(1.0, max(0.0, value)), 12)


class ServerSpec(Strict):
    """A server type GPUs are bought in: ``slots`` cards, filled at purchase (``full``, HGX
    boards) or card by card (``partial``, PCIe chassis); the chassis price and host watts
    cover everything but the cards."""

    id: str = Field(min_length=1, max_length=100)
    name: str
    slots: int = Field(ge=1, le=576)
    fill: Annotated[Literal["full", "partial"], CaseInsensitive]
    chassis_usd: SourcedRange
    host_w: Sourced
    cooling: Annotated[Literal["air", "liquid"], CaseInsensitive] = Field(
        "air", description="liquid: needs direct liquid cooling (site.liquid_cooling)"
    )
    cooling_source: str | None = Field(None, description="where the cooling requirement is stated")

    @field_validator("chassis_usd", "host_w", mode="after")
    @classmethod
    def _in_range(cls, v: Sourced, info: Any) -> Sourced:
        hi = 10_000_000.0 if info.field_name == "chassis_usd" else 200_000.0
        for bound in (v.value, getattr(v, "low", v.value), getattr(v, "high", v.value)):
            if not 0 <= bound <= hi:
                raise ValueError(f"{bound:g} is outside the allowed range 0 to {hi:g}")
        return v


Vendor = Literal["nvidia", "amd"]


class GpuSpec(Strict):
    id: str
    name: str
    vendor: Annotated[Vendor, CaseInsensitive] = "nvidia"
    klass: Annotated[Literal["datacenter", "consumer"], CaseInsensitive] = Field(alias="class")
    form_factor: Annotated[Literal["sxm", "pcie"], CaseInsensitive]
    memory_gb: Sourced
    memory_bandwidth_gbs: Sourced
    bf16_dense_tflops: Sourced = Field(description="dense BF16/FP16 tensor TFLOPS, FP32 accumulate")
    fp8_dense_tflops: Sourced | None = None
    int8_dense_tops: Sourced | None = None
    fp4_dense_tflops: Sourced | None = Field(
        None, description="dense FP4 (NVFP4/MXFP4) tensor TFLOPS; absent = no FP4 tensor cores"
    )
    interconnect: Interconnect
    tdp_w: Sourced
    idle_w: Sourced
    host_w_per_gpu: Sourced | None = Field(
        None, description="server (CPU, fans, NICs) power per GPU, watts"
    )
    node_size: Sourced = Field(description="GPUs per purchasable unit (8 for SXM boards)")
    purchase_usd: SourcedRange
    # Per-GPU shares of the server: from ``server`` (catalogs/servers.yaml) when it is named,
    # else given here (a one-off catalog); never both.
    server_overhead_usd_per_gpu: SourcedRange | None = None
    server: str | None = Field(None, description="server type id (catalogs/servers.yaml)")
    residual: ResidualCurve | None = None
    server_spec: ServerSpec | None = Field(None, description="filled from `server` on load")
    # The vendor's software efficiency relative to NVIDIA's (catalogs/vendors.yaml), x the
    # predicted MFU and x the predicted serving tokens/s; filled from `vendor` on load.
    train_efficiency: SourcedRange | None = Field(None, description="x MFU; filled on load")
    serve_efficiency: SourcedRange | None = Field(None, description="x tokens/s; filled on load")

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, frozen=True, populate_by_name=True
    )

    @field_validator(*GPU_RANGES, mode="after")
    @classmethod
    def _in_range(cls, v: Sourced | None, info: Any) -> Sourced | None:
        if v is not None:
            for bound in (v.value, getattr(v, "low", v.value), getattr(v, "high", v.value)):
                check_range(info.field_name, bound)
        return v

    @field_validator("train_efficiency", "serve_efficiency", mode="after")
    @classmethod
    def _efficiency(cls, v: SourcedRange | None) -> SourcedRange | None:
        if v is not None:
            check_efficiency(v.low)
            check_efficiency(v.high)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> GpuSpec:
        if self.idle_w.value > self.tdp_w.value:
            raise ValueError(
                f"idle_w {self.idle_w.value:g} W is above tdp_w {self.tdp_w.value:g} W; "
                "a GPU idles below its board power"
            )
        if self.node_size.value != int(self.node_size.value):
            raise ValueError(
                f"node_size must be a whole number of GPUs, got {self.node_size.value:g}"
            )
        per_gpu = (self.server_overhead_usd_per_gpu, self.host_w_per_gpu)
        if self.server is None and None in per_gpu:
            raise ValueError(
                "name a server type (server: <id> from catalogs/servers.yaml) or give both "
                "server_overhead_usd_per_gpu and host_w_per_gpu"
            )
        if self.server is not None and self.server_spec is None and per_gpu != (None, None):
            raise ValueError(
                f"server {self.server!r} sets the chassis price and host watts; drop "
                "server_overhead_usd_per_gpu and host_w_per_gpu (or drop server)"
            )
        return self

    @property
    def partial_fill(self) -> bool:
        """Bought as servers plus cards (a PCIe chassis), not as full nodes."""
        return self.server_spec is not None and self.server_spec.fill == "partial"

    @property
    def slots(self) -> int:
        """GPU slots per server (a node's GPUs when no server type is named)."""
        return self.server_spec.slots if self.server_spec is not None else self.node_gpus

    @property
    def chassis_usd(self) -> float:
        """Price of one server without its cards: per-GPU share x slots."""
        return self.server_overhead_usd_per_gpu.value * self.slots  # type: ignore[union-attr]

    @property
    def host_w(self) -> float:
        """Non-GPU watts of one server at max: per-GPU share x slots."""
        return self.host_w_per_gpu.value * self.slots  # type: ignore[union-attr]

    @property
    def consumer(self) -> bool:
        return self.klass == "consumer"

    @property
    def liquid_cooled(self) -> bool:
        """Its server needs direct liquid cooling (an NVL72 rack, a 1.4 kW OAM platform)."""
        return self.server_spec is not None and self.server_spec.cooling == "liquid"

    @property
    def scale_up_gpus(self) -> int:
        """GPUs that reach each other without the network, the bound of tensor and expert
        parallelism (8 in an HGX/OAM server, 72 in an NVL72 rack; a PCIe server's slots over
        PCIe): the catalog's ``interconnect.domain_gpus``, else the server's slots."""
        if self.interconnect.domain_gpus is not None:
            return self.interconnect.domain_gpus
        return self.slots

    @property
    def node_gpus(self) -> int:
        """GPUs per purchase unit: a full server's slots, else the card's own node size."""
        if self.server_spec is not None and self.server_spec.fill == "full":
            return self.server_spec.slots
        return int(self.node_size.value)

    @property
    def unit_capex_usd(self) -> float:
        """Capex of one GPU in service: card plus its share of server and network."""
        return self.purchase_usd.value + self.server_overhead_usd_per_gpu.value


def purchase_barrier(gpu: GpuSpec, consumer_ok: bool, liquid_ok: bool) -> str | None:
    """Why ``gpu`` may not be bought on a site (None: it may, budgets and power aside).

    ``consumer_ok`` is ``site.consumer_gpus_allowed`` (the GeForce licence forbids datacenter
    use), ``liquid_ok`` is ``site.liquid_cooling`` (a liquid-cooled server or rack needs a
    coolant loop most colocation halls lack).
    """
    if gpu.consumer and not consumer_ok:
        return (
            f"{gpu.id} is a GeForce (consumer) card: its licence forbids datacenter use, so it "
            "cannot be bought (site.consumer_gpus_allowed: false)"
        )
    if gpu.liquid_cooled and not liquid_ok:
        unit = gpu.server_spec.id if gpu.server_spec is not None else "its server"
        return (
            f"{gpu.id} is sold in {unit}, which needs liquid cooling, so it cannot be bought "
            "on this site (site.liquid_cooling: false)"
        )
    return None


# Fabrics between rented instances. `ethernet` is a plain VPC network (no RDMA); `none` means
# the offer is sold as single instances with no inter-instance network worth training over.
FABRICS = ("infiniband", "roce", "efa", "tcpx", "ethernet", "none")
MULTI_NODE_FABRICS = ("infiniband", "roce", "efa", "tcpx")
Fabric = Literal["infiniband", "roce", "efa", "tcpx", "ethernet", "none"]


class Offer(Strict):
    id: str
    provider: str
    gpu: str
    kind: Annotated[Literal["on_demand", "spot", "reserved"], CaseInsensitive]
    usd_per_gpu_hour: float = Field(gt=0, le=1000)  # $0.05-15 today; $1,000 is a unit slip
    gpus_per_instance: int = Field(1, ge=1, le=576, description="rental unit")
    max_gpus: int | None = Field(
        None, ge=1, le=MAX_FLEET_GPUS, description="most GPUs available at once; None = no limit"
    )
    term_months: int | None = Field(None, ge=1, le=120, description="reserved: commitment length")
    upfront_share: float = Field(0.0, ge=0, le=1, description="reserved: share paid at signing")
    marketplace: bool = False
    region: str | None = None
    instance_type: str | None = None
    # Networking between instances. None = not stated by the source: the planner never assumes
    # a multi-node fabric it was not told about (a job may opt into Ethernet, see TrainJob).
    fabric: Annotated[Fabric, CaseInsensitive] | None = None
    fabric_gbps_per_gpu: float | None = Field(
        None, gt=0, le=10_000, description="inter-instance bandwidth per GPU, Gb/s"
    )
    # Cluster products: multi-node capacity sold as a block (1-click clusters, capacity blocks).
    cluster: bool = Field(False, description="a multi-node cluster product (training only)")
    min_gpus: int | None = Field(None, ge=1, le=MAX_FLEET_GPUS, description="smallest block rented")
    min_term_days: float | None = Field(
        None, gt=0, le=3660, description="shortest rental paid for, days (cluster products)"
    )
    # A contract signed before the plan (fleet.contracts): paid whatever the plan does, so its
    # capacity costs nothing at the margin, and only inside its term (YYYY-MM, inclusive).
    committed: bool = False
    # The listed price when offers.discounts scaled usd_per_gpu_hour (planner.inputs.problem.discounted)
    list_usd_per_gpu_hour: float | None = Field(None, gt=0, le=1000)
    available_from: str | None = None
    available_until: str | None = None
    price_steps: list[PriceStep] = Field(
        default_factory=list,
        max_length=100,
        description="dated price changes: from each step's month on, its price",
    )
    source: str
    as_of: str

    @field_validator("price_steps")
    @classmethod
    def _steps_in_order(cls, v: list[PriceStep]) -> list[PriceStep]:
        months = [s.month for s in v]
        if months != sorted(set(months)):
            raise ValueError(f"price_steps months must increase, each once (got {months})")
        return v

    @model_validator(mode="after")
    def _term(self) -> Offer:
        if self.kind == "reserved" and self.term_months is None:
            raise ValueError("a reserved offer needs term_months")
        if self.upfront_share and self.kind != "reserved":
            raise ValueError("upfront_share is for reserved offers (a term paid ahead)")
        if self.max_gpus is not None and self.max_gpus < self.gpus_per_instance:
            raise ValueError(
                f"max_gpus {self.max_gpus} is below gpus_per_instance {self.gpus_per_instance}: "
                "not even one instance could be rented; raise max_gpus or drop it"
            )
        if (
            self.min_gpus is not None
            and self.max_gpus is not None
            and self.min_gpus > self.max_gpus
        ):
            raise ValueError(f"min_gpus {self.min_gpus} is above max_gpus {self.max_gpus}")
        self._check_fabric()
        return self

    def _check_fabric(self) -> None:
        if self.fabric is None or self.fabric == "none":
            if self.fabric_gbps_per_gpu is not None:
                raise ValueError(
                    f"fabric_gbps_per_gpu is given but fabric is {self.fabric or 'not stated'}; "
                    f"name the fabric ({', '.join(FABRICS)})"
                )
            if self.cluster:
                raise ValueError(
                    "a cluster product needs its fabric and fabric_gbps_per_gpu "
                    f"({', '.join(MULTI_NODE_FABRICS)})"
                )
        elif self.fabric_gbps_per_gpu is None:
            raise ValueError(
                f"fabric {self.fabric!r} needs fabric_gbps_per_gpu (Gb/s per GPU between "
                "instances, e.g. 400 for one 400 Gb/s InfiniBand NIC per GPU, 3200/8 for EFA on p5)"
            )
        if self.cluster and self.fabric == "ethernet":
            raise ValueError("a cluster product needs a multi-node fabric, not plain ethernet")

    @property
    def estimated(self) -> bool:
        """Not a published price: its source says so first ("estimate: ...", "illustrative")."""
        return self.source.strip().lower().startswith(("estimate", "illustrative"))

    @property
    def multi_node(self) -> bool:
        """Instances are joined by a fabric made for multi-node training."""
        return self.fabric in MULTI_NODE_FABRICS

    @property
    def min_term_hours(self) -> float:
        return 24.0 * (self.min_term_days or 0.0)

    @property
    def marginal_usd_per_gpu_hour(self) -> float:
        """What one more GPU-hour costs: the price, or 0 on a contract already paid for."""
        return 0.0 if self.committed else self.usd_per_gpu_hour

    def price_in(self, month: str) -> float:
        """The listed price in ``month`` (YYYY-MM): the last price step on or before it, else
        ``usd_per_gpu_hour`` (tests/test_price_steps.py)."""
        price = self.usd_per_gpu_hour
        for step in self.price_steps:  # in month order (validated)
            if step.month <= month:  # YYYY-MM labels sort as months
                price = step.usd_per_gpu_hour
        return price

    @property
    def lowest_marginal_usd_per_gpu_hour(self) -> float:
        """The least a GPU-hour ever costs here, price steps included (what pruning compares)."""
        if self.committed:
            return 0.0
        return min([self.usd_per_gpu_hour, *(s.usd_per_gpu_hour for s in self.price_steps)])

    def marginal_in(self, month: str) -> float:
        """What one more GPU-hour costs in ``month``: :meth:`price_in`, 0 on a contract."""
        return 0.0 if self.committed else self.price_in(month)


class FabricEntry(Strict):
    """The fabric of a provider's instance types (catalogs/fabrics.yaml)."""

    provider: str
    instance_types: list[str] = Field(min_length=1)
    fabric: Annotated[Fabric, CaseInsensitive]
    gbps_per_gpu: float = Field(gt=0, le=10_000)
    source: str = Field(min_length=1)
    as_of: str


class FabricFile(Strict):
    fabrics: list[FabricEntry]


class VendorSpec(Strict):
    """A vendor's software efficiency relative to NVIDIA's, on which the calibration is
    fitted: multiplies the predicted training (MFU) and serving (tokens/s) throughput."""

    vendor: Annotated[Vendor, CaseInsensitive]
    train_efficiency: SourcedRange
    serve_efficiency: SourcedRange

    @field_validator("train_efficiency", "serve_efficiency", mode="after")
    @classmethod
    def _share(cls, v: SourcedRange) -> SourcedRange:
        if not 0.05 <= v.low <= v.high <= 2.0:
            raise ValueError(
                f"an efficiency relative to NVIDIA lies in 0.05-2, got {v.low:g}-{v.high:g}"
            )
        return v


class VendorFile(Strict):
    vendors: list[VendorSpec]


class GpuCatalogFile(Strict):
    gpus: list[GpuSpec]


class ServerCatalogFile(Strict):
    servers: list[ServerSpec]


class ModelCatalogFile(Strict):
    models: list[ModelArch]

    @model_validator(mode="after")
    def _counts(self) -> ModelCatalogFile:
        check_published_counts(self.models)  # published params vs the shape, within 2 %
        return self


# Offer fields only the planner writes: a contract of fleet.contracts becomes a committed offer
# available inside its term, and offers.discounts keeps the listed price beside the discounted
# one. Set by a user they would make capacity free (committed) or fake a discount.
PLANNER_ONLY_OFFER_FIELDS = {
    "committed": "a contract signed before the plan goes in fleet.contracts",
    "available_from": "a contract's term goes in fleet.contracts (start, end)",
    "available_until": "a contract's term goes in fleet.contracts (start, end)",
    "list_usd_per_gpu_hour": "a negotiated discount goes in offers.discounts",
}


def refuse_planner_fields(items: Any) -> Any:
    """Pydantic ``field_validator(mode="before")`` for a list of offers a user wrote: no offer
    sets a field only the planner writes (:data:`PLANNER_ONLY_OFFER_FIELDS`)."""
    if not isinstance(items, list):
        return items
    bad = [
        ((i, key), f"{key} is set by the planner, not in an offer: {why}")
        for i, item in enumerate(items)
        if isinstance(item, dict)
        for key, why in PLANNER_ONLY_OFFER_FIELDS.items()
        if key in item
    ]
    if bad:
        raise LocatedError(bad)
    return items


class OfferFile(Strict):
    offers: list[Offer]
    provenance: dict[str, str | int | float | list[str] | None] | None = None

    _planner_only = field_validator("offers", mode="before")(
        classmethod(lambda cls, v: refuse_planner_fields(v))
    )


def _unique(items: list, what: str, path: Path) -> dict:
    out: dict = {}
    for item in items:
        if item.id in out:
            raise InputError(f"{path}: duplicate {what} id {item.id!r}")
        out[item.id] = item
    return out


def load_servers(path: str | Path = CATALOG_DIR / "servers.yaml") -> dict[str, ServerSpec]:
    doc = load_yaml(path)
    return _unique(validate(ServerCatalogFile, doc, "server catalog").servers, "server", doc.path)


def load_gpus(
    path: str | Path = CATALOG_DIR / "gpus.yaml", servers_path: str | Path | None = None
) -> dict[str, GpuSpec]:
    """The GPU catalog with each card's server type attached (its per-GPU shares derived).

    Servers come from ``servers_path``, else ``servers.yaml`` beside the GPU file, else the
    shipped catalog's."""
    doc = load_yaml(path)
    gpus = _unique(validate(GpuCatalogFile, doc, "GPU catalog").gpus, "gpu", doc.path)
    gpus = with_vendors(gpus, load_vendors(_beside(path, "vendors.yaml")))
    if not any(g.server for g in gpus.values()):
        return gpus
    if servers_path is None:
        beside = Path(path).with_name("servers.yaml")
        servers_path = beside if beside.is_file() else CATALOG_DIR / "servers.yaml"
    servers = load_servers(servers_path)
    out = {}
    for i, (gid, g) in enumerate(gpus.items()):
        if g.server not in servers and g.server is not None:
            line = doc.line_of(("gpus", i, "server"))
            raise InputError(
                f"{doc.path}:{line}: gpus[{i}].server: unknown server type {g.server!r}; "
                + did_you_mean(g.server, servers.keys())
            )
        try:
            out[gid] = with_server(g, servers[g.server]) if g.server else g
        except ValueError as exc:
            line = doc.line_of(("gpus", i, "server"))
            raise InputError(f"{doc.path}:{line}: gpus[{i}].server: {exc}") from None
    return out


def _beside(path: str | Path, name: str) -> Path:
    """The catalog file ``name`` beside ``path`` if there is one, else the shipped one."""
    beside = Path(path).with_name(name)
    return beside if beside.is_file() else CATALOG_DIR / name


def with_vendors(gpus: dict[str, GpuSpec], vendors: dict[str, VendorSpec]) -> dict[str, GpuSpec]:
    """Each GPU with its vendor's training and serving efficiency (catalogs/vendors.yaml)
    where the GPU entry gives none; a vendor the file does not list is an error."""
    out = {}
    for gid, g in gpus.items():
        v = vendors.get(g.vendor)
        if v is None:
            raise InputError(f"gpu {gid!r}: vendor {g.vendor!r} is not in the vendor catalog")
        update = {
            k: getattr(v, k)
            for k in ("train_efficiency", "serve_efficiency")
            if getattr(g, k) is None
        }
        out[gid] = g.model_copy(update=update) if update else g
    return out


def with_server(gpu: GpuSpec, server: ServerSpec) -> GpuSpec:
    """``gpu`` bought in ``server``: per-GPU chassis and host shares derived (chassis / slots,
    host watts / slots); a full server's slots are its purchase unit (``node_gpus``).

    A server must hold whole nodes of the card: ``slots`` a multiple of ``node_size``.
    """
    node = gpu.node_gpus
    if server.slots < node or server.slots % node:
        raise ValueError(
            f"server {server.id!r} has {server.slots} slots, not a whole number of "
            f"{gpu.id} nodes of {node} GPUs; use a server with a multiple of {node} slots"
        )
    n, c, h = server.slots, server.chassis_usd, server.host_w
    why = f"derived: server {server.id} / {n} slots; "
    update: dict[str, Any] = {
        "server": server.id,
        "server_spec": server,
        "server_overhead_usd_per_gpu": SourcedRange(
            value=c.value / n,
            low=c.low / n,
            high=c.high / n,
            source=why + c.source,
            low_source=c.low_source,
            high_source=c.high_source,
            as_of=c.as_of,
            note=c.note,
        ),
        "host_w_per_gpu": Sourced(value=h.value / n, source=why + h.source, as_of=h.as_of),
    }
    return gpu.model_copy(update=update)


def load_vendors(path: str | Path = CATALOG_DIR / "vendors.yaml") -> dict[str, VendorSpec]:
    """Vendor id -> its software efficiency (catalogs/vendors.yaml); a vendor twice is an error."""
    doc = load_yaml(path)
    out: dict[str, VendorSpec] = {}
    for v in validate(VendorFile, doc, "vendor catalog").vendors:
        if v.vendor in out:
            raise InputError(f"{doc.path}: vendor {v.vendor!r} is listed twice")
        out[v.vendor] = v
    return out


# A model catalog file: the shipped one is 14 kB for ~40 models; 4 MB holds ~10,000 and reads
# in seconds with the event reader. A 10 MB file of 60,000 models took over 100 s with the
# checked reader (pure-Python composer, ~1 MB a second at best); no plan picks from more.
MAX_MODEL_FILE_BYTES = 4 * 1024 * 1024


def load_models(path: str | Path = CATALOG_DIR / "models.yaml") -> dict[str, ModelArch]:
    """A model catalog file, validated: the shipped one, or a user's (``--models-file``,
    ``model_files:``) of at most :data:`MAX_MODEL_FILE_BYTES`."""
    from planner.base.files import read_text
    from planner.base.yamlevents import load_plain_yaml

    read_text(path, "model catalog", MAX_MODEL_FILE_BYTES)  # size, kind and encoding first
    doc = load_plain_yaml(path, "model catalog")
    return _unique(_validated_models(doc).models, "model", doc.path)


def _validated_models(doc: YamlDoc) -> ModelCatalogFile:
    """:func:`validate` for a document whose lines are found on demand (an event-read file)."""
    from planner.base.yamlevents import locate

    require_mapping(doc, "model catalog", ModelCatalogFile)
    try:
        return ModelCatalogFile.model_validate(doc.data)
    except ValidationError as exc:
        locs = []
        for err in exc.errors():
            base = tuple(err["loc"])
            located = err.get("ctx", {}).get("error")
            subs = [s for s, _ in located.items] if isinstance(located, LocatedError) else [()]
            locs += [base + tuple(s) for s in subs]
        locate(doc, locs)
        raise InputError(validation_message(exc, doc, "model catalog", ModelCatalogFile)) from None


@functools.cache
def load_fabrics(path: Path = CATALOG_DIR / "fabrics.yaml") -> dict[tuple[str, str], FabricEntry]:
    """(provider, instance type) -> its fabric, from catalogs/fabrics.yaml."""
    doc = load_yaml(path)
    entries = validate(FabricFile, doc, "fabrics file").fabrics
    return {(e.provider, it): e for e in entries for it in e.instance_types}


def with_fabric(o: Offer, fabrics: dict[tuple[str, str], FabricEntry]) -> Offer:
    """The offer with the catalog's fabric for its instance type when it states none."""
    e = fabrics.get((o.provider, o.instance_type or ""))
    if o.fabric is not None or e is None:
        return o
    return o.model_copy(
        update={
            "fabric": e.fabric,
            "fabric_gbps_per_gpu": e.gbps_per_gpu,
            "source": f"{o.source}; fabric: {e.source}",
        }
    )


def load_offers(path: str | Path, gpus: dict[str, GpuSpec] | None = None) -> dict[str, Offer]:
    """Load an offers file, filling fabrics from catalogs/fabrics.yaml where an offer states
    none; offers for GPUs missing from ``gpus`` are an error naming them."""
    doc = load_yaml(path)
    offers = _unique(validate(OfferFile, doc, "offers file").offers, "offer", doc.path)
    fabrics = load_fabrics()
    offers = {k: with_fabric(o, fabrics) for k, o in offers.items()}
    if gpus is not None:
        for i, o in enumerate(offers.values()):
            if o.gpu not in gpus:
                line = doc.line_of(("offers", i, "gpu"))
                raise InputError(
                    f"{doc.path}:{line}: offers[{i}].gpu: unknown gpu {o.gpu!r}; "
                    + did_you_mean(o.gpu, gpus.keys())
                )
    return offers
