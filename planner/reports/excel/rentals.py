"""The ``Rentals`` sheet: one row per rental (on-demand, spot, reserved), cost = GPU-hours x
rate, the rate live over ``Assumptions`` (``offer:<id>`` / ``usd_per_gpu_hour``), on a plan
with price paths times the GPU's rent path factor at the row's price month (:mod:`.paths`).
"""

from __future__ import annotations

from typing import Any

from openpyxl.utils import get_column_letter

from planner.plan.data import Rental
from planner.reports.excel.cells import (
    FIRST_ROW,
    HEADER_ROW,
    MONTH_FMT,
    NUM0,
    USD,
    USD_RATE,
    F,
    _month_value,
)
from planner.reports.excel.context import _OWN_FIGURE, Ctx
from planner.reports.excel.paths import month_index, offer_price_key, rental_rate
from planner.reports.excel.tables import (
    _Col,
    _fit,
    _header,
    _print_setup,
    _rows,
    _table,
    _title,
    _total_row,
    _widths,
)
from planner.reports.plan_facts import commitment_text, offer_terms_of


def write_rentals(ctx: Ctx) -> int:
    """The Rentals sheet; returns its last data row."""
    ws = ctx.ws["Rentals"]
    _title(
        ws,
        "Rentals",
        "Cost = GPU-hours x rate (USD per GPU-hour). Reserved commitments are rows of "
        "kind 'reserved' (workload '(reserved)'), paid whether used or not."
        + _commitments_note(ctx)
        + (_PATH_NOTE if ctx.paths else ""),
    )
    cols = _rental_cols(ctx)
    _header(ws, HEADER_ROW, cols)
    last = _rows(ws, FIRST_ROW, cols, _rental_rows(ctx))
    _total_row(ws, last + 1, last, [(7, NUM0), (9, USD)])
    _table(ws, "tblRentals", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")
    return last


def _commitments_note(ctx: Ctx) -> str:
    """The commitments the plan signs and for how long, or that it signs none."""
    res = ctx.plan.reservations
    if not res:
        return " The plan signs no new commitment (no reserved offer)."
    return " Commitments signed: " + "; ".join(commitment_text(r) for r in res) + "."


_PATH_NOTE = (
    " Rate = the offer's price in the first month x (1 + its GPU's rent change per year on "
    "Assumptions)^(months from the start / 12); a reserved row keeps its reservation's start "
    "month's rate, a contract row its signed price."
)
_K = 11  # the price month index column (plans with price paths)


def _rental_cols(ctx: Ctx) -> list[_Col]:
    rentals = ctx.plan.rentals
    extra = [_Col("Price month (months from start)", 12, "0")] if ctx.paths else []
    return [
        _Col("Provider", _fit(10, [x.provider for x in rentals], 24)),
        _Col("Offer", _fit(10, [x.offer for x in rentals], 48)),
        _Col("GPU", _fit(8, [x.gpu for x in rentals], 24)),
        _Col("Kind", 11),
        _Col("Month", 10, MONTH_FMT),
        _Col("Workload", _fit(12, [x.workload for x in rentals], 36)),
        _Col("GPU-hours", 12, NUM0),
        _Col("Rate USD / GPU-h", 12, USD_RATE),
        _Col("Cost USD", 14, USD),
        _Col("Rate source", 30, None, wrap=True),
        *extra,
        _Col("Offer terms and price date", 40, None, wrap=True),
    ]


def _rental_rows(ctx: Ctx) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for r, x in enumerate(ctx.plan.rentals, start=FIRST_ROW):
        if ctx.paths:
            rows.append(_path_row(ctx, r, x))
            continue
        rate = ctx.a.ref_equal(
            f"offer:{x.offer}",
            offer_price_key(ctx, x.offer, month_index(ctx, x.month) or 0),
            x.usd_per_gpu_hour,
            "USD/GPU-h",
            "plan rental row",
        )
        rows.append(
            [
                x.provider,
                x.offer,
                x.gpu,
                x.kind,
                _month_value(x.month),
                x.workload,
                x.gpu_hours,
                F(f"={rate}") if rate else x.usd_per_gpu_hour,
                F(f"=G{r}*H{r}"),
                "Assumptions" if rate else _OWN_FIGURE,
                offer_terms_of(ctx.plan, x.offer),
            ]
        )
    if not rows:
        r = FIRST_ROW
        # One placeholder row as wide as the header (a plan with paths has the month column).
        empty = ["(no rentals)", "", "", "", None, "", 0, 0, F(f"=G{r}*H{r}"), ""]
        rows.append(empty + [None] * (len(_rental_cols(ctx)) - len(empty)))
    return rows


def _path_row(ctx: Ctx, r: int, x: Rental) -> list[Any]:
    """A rental row of a plan with price paths: the rate live over the offer's first-month
    price and its GPU's rent change (or, where they do not give the row's price, as today)."""
    body, t = rental_rate(ctx, x)
    source = "Assumptions: offer price x rent path"
    if body is not None:
        rate: Any = F("=" + body.format(K=f"{get_column_letter(_K)}{r}"))
    else:
        cell = ctx.a.ref_equal(
            f"offer:{x.offer}",
            offer_price_key(ctx, x.offer, t),
            x.usd_per_gpu_hour,
            "USD/GPU-h",
            "plan rental row",
        )
        rate = F(f"={cell}") if cell else x.usd_per_gpu_hour
        source = "Assumptions" if cell else _OWN_FIGURE
    return [
        x.provider,
        x.offer,
        x.gpu,
        x.kind,
        _month_value(x.month),
        x.workload,
        x.gpu_hours,
        rate,
        F(f"=G{r}*H{r}"),
        source,
        t,
        offer_terms_of(ctx.plan, x.offer),
    ]
