"""The base of every input model: strict keys, finite numbers, no booleans for numbers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

from planner.base.units import no_bool_for_number


class Strict(BaseModel):
    """Base for every input model: unknown keys and NaN/inf are errors, not silently ignored."""

    # Text fields are labels and citations: 10,000 characters is a page; a megabyte is an attack.
    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, frozen=True, str_max_length=10_000
    )
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_for_number))
