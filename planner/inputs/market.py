"""Prices and deliveries that move with time: the ``market`` section of a problem file, its
defaults per GPU generation (``catalogs/market.yaml``, each with a source and a range) and
:class:`MarketTerms`, the resolved path of every GPU type.

A price in month ``m`` of the horizon (``m = 0`` in the first month) is ``price x (1 +
change)^(m / 12)`` (:func:`planner.physics.economics.price_factor`). A purchase ordered in month
``m`` is in service from ``m + lead_months``. Precedence, per GPU type and figure:
``market.gpus.<id>`` in the problem, then ``market`` in the problem, then the catalog default
of the GPU's generation, then none (0: no path, no lead time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from planner.base.errors import InputError
from planner.base.yamlio import did_you_mean, load_yaml, validate
from planner.inputs.catalog import CATALOG_DIR, SourcedRange, Strict

# A price may halve in a year or double; beyond that it is a typo, not a forecast (the
# steepest measured move, H100 rentals in 2023-25, was about -50 %/year).
CHANGE_LOW, CHANGE_HIGH = -0.9, 1.0
FIGURES = ("rent_change_per_year", "buy_change_per_year", "lead_months")


class GpuMarket(Strict):
    """One GPU type's path, overriding the problem's ``market`` and the catalog default."""

    rent_change_per_year: float | None = Field(
        None,
        ge=CHANGE_LOW,
        le=CHANGE_HIGH,
        description="yearly change of every rental price (-0.15: 15 % cheaper a year), compounded monthly",
    )
    buy_change_per_year: float | None = Field(
        None,
        ge=CHANGE_LOW,
        le=CHANGE_HIGH,
        description="yearly change of card and server prices, compounded monthly",
    )
    lead_months: int | None = Field(
        None, ge=0, le=600, strict=True, description="months from order to GPUs in service"
    )


class Market(GpuMarket):
    """The problem file's ``market`` section: every GPU type's path, and per-type overrides."""

    gpus: dict[str, GpuMarket] = Field(
        default_factory=dict,
        max_length=1_000,
        description="paths of single GPU types, by GPU id, overriding these",
    )


class MarketDefault(Strict):
    """One generation's defaults in ``catalogs/market.yaml``."""

    label: str = Field(min_length=1, max_length=200)
    gpus: list[str] = Field(min_length=1, max_length=1_000)
    rent_change_per_year: SourcedRange
    buy_change_per_year: SourcedRange
    lead_months: SourcedRange


class MarketFile(Strict):
    market: list[MarketDefault]
    notes: str | None = Field(None, max_length=10_000)


def load_market_defaults(path: str | Path = CATALOG_DIR / "market.yaml") -> list[MarketDefault]:
    return validate(MarketFile, load_yaml(path), "market defaults").market


@dataclass(frozen=True)
class MarketTerms:
    """Every GPU type's resolved path: annual rent and purchase changes, lead months, and where
    each came from (``(gpu, figure) -> source``) for the Assumptions sheet."""

    rent_change: dict[str, float] = field(default_factory=dict)
    buy_change: dict[str, float] = field(default_factory=dict)
    lead: dict[str, int] = field(default_factory=dict)
    sources: dict[tuple[str, str], str] = field(default_factory=dict)
    ranges: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def rent(self, gpu: str) -> float:
        return self.rent_change.get(gpu, 0.0)

    def buy(self, gpu: str) -> float:
        return self.buy_change.get(gpu, 0.0)

    def lead_months(self, gpu: str) -> int:
        return self.lead.get(gpu, 0)

    @property
    def off(self) -> bool:
        """No path and no lead time for any GPU: plans as before price paths existed."""
        values = [*self.rent_change.values(), *self.buy_change.values(), *self.lead.values()]
        return not any(values)


def _defaults_by_gpu(defaults: list[MarketDefault]) -> dict[str, MarketDefault]:
    out: dict[str, MarketDefault] = {}
    for d in defaults:
        for g in d.gpus:
            out[g] = d
    return out


def resolve_market(
    market: Market,
    gpu_ids: list[str],
    horizon_months: int,
    defaults: list[MarketDefault] | None = None,
) -> MarketTerms:
    """Each GPU type's path by the precedence in the module docstring. Raises InputError for a
    ``market.gpus`` id that is not a GPU of the problem, or a lead time the problem sets longer
    than the horizon."""
    unknown = [g for g in market.gpus if g not in gpu_ids]
    if unknown:
        raise InputError(
            f"market.gpus.{unknown[0]}: not a GPU type of this problem; "
            + did_you_mean(unknown[0], gpu_ids)
        )
    by_gpu = _defaults_by_gpu(load_market_defaults() if defaults is None else defaults)
    rent, buy, lead = {}, {}, {}
    sources: dict[tuple[str, str], str] = {}
    ranges: dict[tuple[str, str], tuple[float, float]] = {}
    for g in gpu_ids:
        own = market.gpus.get(g, GpuMarket())
        for figure, out in zip(FIGURES, (rent, buy, lead), strict=True):
            value, source = _pick(g, figure, own, market, by_gpu.get(g))
            out[g] = int(value) if figure == "lead_months" else float(value)
            sources[(g, figure)] = source
            if g in by_gpu:
                r = getattr(by_gpu[g], figure)
                ranges[(g, figure)] = (r.low, r.high)
        # a catalog default longer than a short horizon only means nothing ordered serves in
        # it; a lead the user wrote that outruns the horizon is a mistake
        user_set = sources[(g, "lead_months")].startswith("problem file")
        if user_set and lead[g] > horizon_months:
            raise InputError(
                f"{sources[(g, 'lead_months')].removeprefix('problem file: ')}: {lead[g]} "
                f"months is longer than the {horizon_months}-month horizon ({g}); allowed: "
                f"0 to {horizon_months}"
            )
    return MarketTerms(rent, buy, lead, sources, ranges)


def _pick(
    g: str, figure: str, own: GpuMarket, market: Market, default: MarketDefault | None
) -> tuple[float, str]:
    """(value, source) of one figure for GPU ``g``."""
    if getattr(own, figure) is not None:
        return getattr(own, figure), f"problem file: market.gpus.{g}.{figure}"
    if getattr(market, figure) is not None:
        return getattr(market, figure), f"problem file: market.{figure}"
    if default is not None:
        d = getattr(default, figure)
        return d.value, f"catalogs/market.yaml ({default.label}): {d.source} ({d.as_of})"
    return 0.0, "no default for this GPU type (catalogs/market.yaml): no path"
