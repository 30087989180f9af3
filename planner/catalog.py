"""Catalog schemas (GPU specs, rental offers, model architectures) and their loaders.

Every figure in a catalog is *sourced*: it carries ``source`` and ``as_of``. Prices carry a
``low``/``high`` range beside the default because published figures disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import InputError
from planner.units import CaseInsensitive, no_bool_for_number
from planner.yamlio import did_you_mean, load_yaml, validate

CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalogs"


class Strict(BaseModel):
    """Base for every input model: unknown keys and NaN/inf are errors, not silently ignored."""

    # Text fields are labels and citations: 10,000 characters is a page; a megabyte is an attack.
    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, frozen=True, str_max_length=10_000
    )
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_for_number))


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
    nvlink_gbs: float = Field(0.0, ge=0, description="NVLink GB/s per GPU, bidirectional; 0 = none")
    pcie_gen: int = Field(ge=3, le=6)
    p2p: bool = Field(description="GPU peer-to-peer over PCIe/NVLink works")
    source: str
    as_of: str


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


class GpuSpec(Strict):
    id: str
    name: str
    klass: Annotated[Literal["datacenter", "consumer"], CaseInsensitive] = Field(alias="class")
    form_factor: Annotated[Literal["sxm", "pcie"], CaseInsensitive]
    memory_gb: Sourced
    memory_bandwidth_gbs: Sourced
    bf16_dense_tflops: Sourced = Field(description="dense BF16/FP16 tensor TFLOPS, FP32 accumulate")
    fp8_dense_tflops: Sourced | None = None
    int8_dense_tops: Sourced | None = None
    interconnect: Interconnect
    tdp_w: Sourced
    idle_w: Sourced
    host_w_per_gpu: Sourced = Field(description="server (CPU, fans, NICs) power per GPU, watts")
    node_size: Sourced = Field(description="GPUs per purchasable unit (8 for SXM boards)")
    purchase_usd: SourcedRange
    server_overhead_usd_per_gpu: SourcedRange

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
        return self

    @property
    def consumer(self) -> bool:
        return self.klass == "consumer"

    @property
    def node_gpus(self) -> int:
        return int(self.node_size.value)

    @property
    def unit_capex_usd(self) -> float:
        """Capex of one GPU in service: card plus its share of server and network."""
        return self.purchase_usd.value + self.server_overhead_usd_per_gpu.value


class ModelArch(Strict):
    id: str
    name: str
    # Bounds: a million parameters to 100 trillion; shapes of any published transformer.
    params: float = Field(gt=1e6, le=1e14, description="total parameters")
    layers: int = Field(gt=0, le=1000)
    hidden: int = Field(gt=0, le=1_000_000)
    heads: int = Field(gt=0, le=10_000)
    kv_heads: int = Field(gt=0, le=10_000)
    intermediate: int = Field(gt=0, le=10_000_000, description="MLP inner size")
    vocab: int = Field(gt=0, le=10_000_000)
    max_context: int = Field(gt=0, le=100_000_000)
    source: str
    as_of: str

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class Offer(Strict):
    id: str
    provider: str
    gpu: str
    kind: Annotated[Literal["on_demand", "spot", "reserved"], CaseInsensitive]
    # Bounds: rentals run $0.05-15 per GPU-hour today; $1,000 is a unit slip (per instance-month).
    usd_per_gpu_hour: float = Field(gt=0, le=1000)
    gpus_per_instance: int = Field(1, ge=1, le=576, description="rental unit")
    max_gpus: int | None = Field(
        None, ge=1, le=10_000_000, description="most GPUs available at once; None = no limit"
    )
    term_months: int | None = Field(None, ge=1, le=120, description="reserved: commitment length")
    marketplace: bool = False
    region: str | None = None
    instance_type: str | None = None
    source: str
    as_of: str

    @model_validator(mode="after")
    def _term(self) -> Offer:
        if self.kind == "reserved" and self.term_months is None:
            raise ValueError("a reserved offer needs term_months")
        return self


class GpuCatalogFile(Strict):
    gpus: list[GpuSpec]


class ModelCatalogFile(Strict):
    models: list[ModelArch]


class OfferFile(Strict):
    offers: list[Offer]
    provenance: dict[str, str | int | float | list[str] | None] | None = None


def _unique(items: list, what: str, path: Path) -> dict:
    out: dict = {}
    for item in items:
        if item.id in out:
            raise InputError(f"{path}: duplicate {what} id {item.id!r}")
        out[item.id] = item
    return out


def load_gpus(path: str | Path = CATALOG_DIR / "gpus.yaml") -> dict[str, GpuSpec]:
    doc = load_yaml(path)
    return _unique(validate(GpuCatalogFile, doc, "GPU catalog").gpus, "gpu", doc.path)


def load_models(path: str | Path = CATALOG_DIR / "models.yaml") -> dict[str, ModelArch]:
    doc = load_yaml(path)
    return _unique(validate(ModelCatalogFile, doc, "model catalog").models, "model", doc.path)


def load_offers(path: str | Path, gpus: dict[str, GpuSpec] | None = None) -> dict[str, Offer]:
    """Load an offers file; offers for GPUs missing from ``gpus`` are an error naming them."""
    doc = load_yaml(path)
    offers = _unique(validate(OfferFile, doc, "offers file").offers, "offer", doc.path)
    if gpus is not None:
        for i, o in enumerate(offers.values()):
            if o.gpu not in gpus:
                line = doc.line_of(("offers", i, "gpu"))
                raise InputError(
                    f"{doc.path}:{line}: offers[{i}].gpu: unknown gpu {o.gpu!r}; "
                    + did_you_mean(o.gpu, gpus.keys())
                )
    return offers
