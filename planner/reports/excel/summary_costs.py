"""The ``Summary`` blocks of live totals after page 1: the cost over the horizon (workbook
formulas line by line, then opex), the finance lines (discount rate, present value, resale
and book value, live over the P&L) and the capex and total budget with their headroom.
"""

from __future__ import annotations

from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.cells import (
    _BORDER,
    _F_BASE,
    _F_BIG,
    _F_BOLD,
    _F_SUB,
    _FILL_KEY,
    PCT,
    USD,
    F,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.costs import _RENTALS_LINE, cost_lines, finance_lines
from planner.reports.excel.refs import (
    SheetRows,
    _CostRows,
    _PnlRows,
)
from planner.reports.excel.tables import (
    _head_cells,
    _section,
)


def summary_costs(ctx: Ctx, ws: Worksheet, top: int, sheet_rows: SheetRows) -> _CostRows:
    """Cost over the horizon: workbook vs solver, line by line, then opex."""
    _section(ws, top, "Cost over the horizon")
    hdr = ["Item", "USD (live)", "", "", "Where the number comes from"]
    _head_cells(ws, top + 1, hdr)
    r = top + 1
    rows_at: dict[str, int] = {}
    for line in cost_lines(ctx, sheet_rows):
        r += 1
        rows_at[line.label] = r
        font = _F_BIG if line.key else _F_BASE
        fill = _FILL_KEY if line.key else None
        label_font = _F_BOLD if line.key else _F_BASE
        _put(ws, r, 1, line.label, font=label_font, fill=fill, border=_BORDER)
        _put(ws, r, 2, line.live, USD, font=font, fill=fill, border=_BORDER)
        _put(ws, r, 5, line.where, font=_F_SUB, border=_BORDER)
    cost = _CostRows(
        total=rows_at["Total cost"],
        capex=rows_at["Capex (purchases)"],
        power=rows_at["Power"],
        hosting=rows_at["Hosting"],
        rentals=rows_at[_RENTALS_LINE],
        opex=r + 1,
    )
    _opex_line(ctx, ws, cost)
    _summary_finance(ctx, ws, cost, sheet_rows.pnl)
    return cost


def _summary_finance(ctx: Ctx, ws: Worksheet, cost: _CostRows, pnl: _PnlRows) -> None:
    """Discount rate, present value, resale value and book value, live over the P&L."""
    r = cost.opex + 1
    _put(ws, r, 1, "Discount rate (per year)", border=_BORDER)
    _put(ws, r, 2, F(f"={ctx.finance.rate}"), PCT, border=_BORDER)
    _put(ws, r, 5, "Assumptions: finance / discount_rate (yellow)", font=_F_SUB, border=_BORDER)
    live = {
        cost.npv: F("=" + _sheet_ref("P&L", f"$J${pnl.year_total}")),
        cost.residual: F("=" + _sheet_ref("P&L", f"$H${pnl.year_total}")),
        cost.book: F("=" + _sheet_ref("P&L", f"$I${pnl.s_total}")),
    }
    for label, row, _solver, where in finance_lines(ctx, cost):
        key = row == cost.npv
        fill = _FILL_KEY if key else None
        _put(ws, row, 1, label, font=_F_BOLD if key else _F_BASE, fill=fill, border=_BORDER)
        _put(
            ws,
            row,
            2,
            live[row],
            USD,
            font=_F_BIG if key else _F_BASE,
            fill=fill,
            border=_BORDER,
        )
        _put(ws, row, 5, where, font=_F_SUB, border=_BORDER)


def _opex_line(ctx: Ctx, ws: Worksheet, cost: _CostRows) -> None:
    r = cost.opex
    _put(ws, r, 1, "Opex (power + hosting + rentals)", font=_F_BOLD, border=_BORDER)
    live = F(f"=B{cost.power}+B{cost.hosting}+B{cost.rentals}")
    _put(ws, r, 2, live, USD, font=_F_BOLD, border=_BORDER)
    _put(ws, r, 5, "Power + hosting + rentals", font=_F_SUB, border=_BORDER)


def summary_budget(ctx: Ctx, ws: Worksheet, top: int, cost: _CostRows) -> int:
    """Capex budget and headroom, then the total budget if the plan has one; the last row."""
    _section(ws, top, "Budget")
    r = top + 1
    budget = ctx.budget_cell()
    if budget:
        _put(ws, r, 1, "Capex budget")
        _put(ws, r, 2, F(f"={budget}"), USD)
        _put(ws, r, 5, "Assumptions: budget / capex_usd", font=_F_SUB)
        r += 1
        _put(ws, r, 1, "Capex headroom (budget - capex)")
        _put(ws, r, 2, F(f"=B{r - 1}-B{cost.capex}"), USD, font=_F_BOLD)
        _put(ws, r, 5, "Negative = over budget", font=_F_SUB)
        r += 1
        _put(ws, r, 1, "Capex used of budget")
        _put(ws, r, 2, F(f'=IF(B{r - 2}>0,B{cost.capex}/B{r - 2},"n/a")'), PCT)
    else:
        _put(ws, r, 1, "Capex budget")
        _put(ws, r, 2, "none")
    total_budget = ctx.total_budget_cell()
    if total_budget:
        r += 1
        _put(ws, r, 1, "Total budget")
        _put(ws, r, 2, F(f"={total_budget}"), USD)
        r += 1
        _put(ws, r, 1, "Total headroom (budget - total)")
        _put(ws, r, 2, F(f"=B{r - 1}-B{cost.total}"), USD, font=_F_BOLD)
    return r
