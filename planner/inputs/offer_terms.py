"""Dated terms of a rental offer: its price steps (an announced increase, a new rate card),
split from :mod:`planner.inputs.catalog` (whose :class:`~planner.inputs.catalog.Offer` holds
them)."""

from __future__ import annotations

from pydantic import Field, field_validator

from planner.inputs.months import parse_month
from planner.inputs.strict import Strict


class PriceStep(Strict):
    """A dated price change of an offer: from ``month`` on (until a later step) it costs
    ``usd_per_gpu_hour`` (an announced increase, a provider's new rate card)."""

    month: str = Field(description="the first month of the new price, YYYY-MM")
    usd_per_gpu_hour: float = Field(gt=0, le=1000)
    source: str = Field(min_length=1, max_length=10_000)

    @field_validator("month")
    @classmethod
    def _month(cls, v: str) -> str:
        parse_month(v)
        return v
