"""Options shared by several commands, validated once (a bad value is a usage error, exit 2)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.inputs.model_arch import DraftAcceptance
from planner.inputs.schema_serve import Speculative

SOLVERS = click.Choice(["auto", "cbc", "highs", "scip"], case_sensitive=False)


class _FiniteRange(click.ParamType):
    """A finite float in ``(lo, hi]`` (``lo`` excluded); NaN and infinities are refused."""

    name = "number"

    def __init__(self, lo: float, hi: float, what: str) -> None:
        self.lo, self.hi, self.what = lo, hi, what

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; expected {self.what}", param, ctx)
        if not math.isfinite(x) or not (self.lo < x <= self.hi):
            self.fail(f"{value!r} is out of range; expected {self.what}", param, ctx)
        return x


TIME_LIMIT = _FiniteRange(0.0, 7 * 24 * 3600.0, "seconds > 0 (at most a week)")
GAP = _FiniteRange(-1e-300, 0.5, "a relative gap from 0 to 0.5 (0.001 = 0.1 %)")


def time_limit_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--time-limit", type=TIME_LIMIT, default=None, help=help_text)


def gap_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--gap", type=GAP, default=None, help=help_text)


wide_option = click.option(
    "--wide", is_flag=True, help="show every table column, whatever the terminal width"
)


def acceptance_option(text: str | None, draft: int | None, mtp: bool) -> DraftAcceptance | None:
    """``--acceptance`` / ``--draft`` as a measured acceptance (None without them)."""
    if text is None:
        if draft is not None:
            raise InputError("--draft: give it with --acceptance AL (the length measured at it)")
        return None
    if not mtp:
        raise InputError("--acceptance: speculative decoding is on with --mtp; add --mtp")
    try:
        lengths = [float(x) for x in text.split(",")]
    except ValueError:
        raise InputError(
            f"--acceptance: {text!r} is not a number or a comma-separated list of numbers"
        ) from None
    spec = {"acceptance_length": lengths if len(lengths) > 1 or draft is None else lengths[0]}
    try:
        return Speculative.model_validate(
            {**spec, "draft_tokens": draft, "source": "estimate serve --acceptance"}
        ).measured()
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(f"--acceptance {text}: {msg}") from None
