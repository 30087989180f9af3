"""A problem's finance terms: the defaults shipped in ``catalogs/finance.yaml`` (each with a
source and a range) and :class:`FinanceTerms`, the resolved settings the formulas of
:mod:`planner.physics.economics` take."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from planner.base.yamlio import load_yaml, validate
from planner.inputs.catalog import CATALOG_DIR, SourcedRange, Strict


class FinanceDefaults(Strict):
    discount_rate: SourcedRange
    depreciation_years: SourcedRange
    colo_usd_per_kw_month: SourcedRange


class FinanceFile(Strict):
    finance: FinanceDefaults
    notes: str | None = Field(None, max_length=10_000)


def load_finance_defaults(path: str | Path = CATALOG_DIR / "finance.yaml") -> FinanceDefaults:
    return validate(FinanceFile, load_yaml(path), "finance defaults").finance


@dataclass(frozen=True)
class FinanceTerms:
    """A problem's finance settings with every default filled in (and where it came from)."""

    discount_rate: float = 0.0
    residual: str = "none"  # curve | none | straight_line
    depreciation_years: float = 5.0
    colo_usd_per_kw_month: float = 0.0
    currency_label: str = "USD"
    capex_at: str = "order"  # order | delivery: when a purchase's capex is paid
    sources: tuple[tuple[str, str], ...] = ()  # (field, source) of each default used
