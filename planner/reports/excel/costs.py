"""The cost lines the ``Summary`` cost table and the ``Solver`` reconciliation share: each a
live formula over the Cash flow total row beside the solver's own figure and where it comes
from, and the finance lines (present value, resale value, book value) that follow them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from openpyxl.utils import get_column_letter

from planner.reports.excel.cells import (
    FIRST_ROW,
    F,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    CF_COMMITTED,
    CF_SALES,
    SheetRows,
    _CostRows,
)
from planner.reports.excel.tables import (
    _col_range,
)


class _CostLine(NamedTuple):
    """One line of the Summary cost table: the live formula beside the solver's own figure."""

    label: str
    live: F
    solver: float
    where: str
    key: bool  # a headline figure: big font, highlighted


_RENTALS_LINE = "Rentals (on-demand, spot, reserved)"
_NPV_LINE = "Present value (NPV) of the cash, net of resale"
_RESIDUAL_LINE = "Resale value at the horizon end"
_BOOK_LINE = "Book value at the horizon end"


def cost_lines(ctx: Ctx, rows: SheetRows) -> list[_CostLine]:
    """The cost lines of Summary and Solver: live totals of Cash flow beside the solver's."""
    t = ctx.plan.totals
    cf = rows.cash.total

    def total(col: str) -> F:
        return F("=" + _sheet_ref("Cash flow", f"${col}${cf}"))

    kind = _col_range("Rentals", 4, FIRST_ROW, rows.details.rentals)
    usd = _col_range("Rentals", 9, FIRST_ROW, rows.details.rentals)
    more = " + contracts - existing GPUs sold" if ctx.has_existing_sheet else ""
    return [
        _CostLine(
            "Total cost",
            total("F"),
            t.total_usd,
            "Cash flow total: capex + power + hosting + rentals" + more,
            True,
        ),
        _CostLine(
            "Capex (purchases)",
            total("B"),
            t.capex_usd,
            "Purchases: servers x chassis price + GPUs x card price",
            True,
        ),
        _CostLine(
            "Power",
            total("C"),
            t.power_usd,
            "Fleet: PUE x USD/kWh x energy of the owned fleet",
            False,
        ),
        _CostLine(
            "Hosting",
            total("D"),
            t.hosting_usd,
            "Fleet: owned GPUs x USD per GPU-month + IT kW x colocation USD per kW-month",
            False,
        ),
        _CostLine(_RENTALS_LINE, total("E"), t.rental_usd, "Rentals: GPU-hours x rate", False),
        _CostLine(
            "  of which reserved commitments",
            F(f'=SUMIFS({usd},{kind},"reserved")'),
            t.reserved_usd,
            "Rentals rows of kind 'reserved'",
            False,
        ),
        *_existing_cost_lines(ctx, total),
    ]


def _existing_cost_lines(ctx: Ctx, total: Callable[[str], F]) -> list[_CostLine]:
    """Contracts signed before the plan and existing GPUs sold, when the plan has them."""
    if not ctx.has_existing_sheet:
        return []
    t, q, r = ctx.plan.totals, get_column_letter(CF_COMMITTED), get_column_letter(CF_SALES)
    return [
        _CostLine(
            "Contracts signed before the plan",
            total(q),
            t.committed_usd,
            "Existing: GPUs x hours x rate, every month of the term inside the horizon",
            False,
        ),
        _CostLine(
            "Existing GPUs sold (inflow)",
            total(r),
            t.sale_proceeds_usd,
            "Existing: GPUs x catalog price x resale share at their age",
            False,
        ),
    ]


def finance_lines(ctx: Ctx, cost: _CostRows) -> list[tuple[str, int, float | None, str]]:
    """(label, Summary row, solver's figure, where) of the present value, resale value and
    book value lines."""
    t = ctx.plan.totals
    legacy = t.npv_usd is None  # a plan from before issue 14 has no finance figures
    return [
        (_NPV_LINE, cost.npv, t.npv_usd, "P&L: present value of every month's cash"),
        (
            _RESIDUAL_LINE,
            cost.residual,
            None if legacy else t.residual_value_usd,
            "P&L schedule: cards x price x resale share (+ chassis under straight_line)",
        ),
        (
            _BOOK_LINE,
            cost.book,
            None if legacy else t.book_value_usd,
            "P&L schedule: capex less straight-line depreciation",
        ),
    ]
