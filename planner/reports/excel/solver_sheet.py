"""The ``Solver`` sheet, away from page 1: how the solve went (status, gap, time, message)
and the reconciliation of the workbook's live totals against the solver's, line by line.
"""

from __future__ import annotations

from typing import Any

from openpyxl.styles import Alignment, Font
from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.cells import (
    _BORDER,
    _F_BOLD,
    _F_SUB,
    _F_WARN,
    HEADER_ROW,
    NUM1,
    PCT2,
    USD,
    USD_CENTS,
    F,
    _num,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.costs import cost_lines, finance_lines
from planner.reports.excel.refs import (
    SheetRows,
    _CostRows,
)
from planner.reports.excel.tables import (
    _head_cells,
    _print_setup,
    _section,
    _title,
)


def write_solver(ctx: Ctx, cost: _CostRows, rows: SheetRows) -> None:
    """Solver status and the workbook-vs-solver reconciliation, away from page 1."""
    ws = ctx.ws["Solver"]
    _title(ws, "Solver", "How the solve went, and the workbook's live totals against the solver's.")
    r = _summary_solve(ctx, ws, HEADER_ROW)
    _reconciliation(ctx, ws, r + 2, cost, rows)
    for col, w in zip("ABCDE", (38, 17, 17, 14, 52), strict=True):
        ws.column_dimensions[col].width = w
    _print_setup(ws, None, None)


def _reconciliation(
    ctx: Ctx, ws: Worksheet, top: int, cost: _CostRows, sheet_rows: SheetRows
) -> None:
    _section(ws, top, "Reconciliation: workbook (live) vs solver")
    hdr = ["Item", "Workbook (live)", "Solver", "Difference", "Where the number comes from"]
    _head_cells(ws, top + 1, hdr)
    t = ctx.plan.totals
    opex = t.power_usd + t.hosting_usd + t.rental_usd
    rows = [cost.total, cost.capex, cost.power, cost.hosting, cost.rentals, cost.rentals + 1]
    rows += [cost.rentals + 2, cost.rentals + 3] if ctx.has_existing_sheet else []
    lines = [
        (line.label, src, line.solver, line.where)
        for line, src in zip(cost_lines(ctx, sheet_rows), rows, strict=True)
    ]
    lines += [
        ("Opex (power + hosting + rentals)", cost.opex, opex, "Power + hosting + rentals"),
        *((label, row, solver, where) for label, row, solver, where in finance_lines(ctx, cost)),
    ]
    r = top + 1
    for label, src, solver, where in lines:
        r += 1
        _put(ws, r, 1, label, border=_BORDER)
        _put(ws, r, 2, F("=" + _sheet_ref("Summary", f"$B${src}")), USD, border=_BORDER)
        _put(ws, r, 3, _num(solver) if solver is not None else "n/a", USD, border=_BORDER)
        diff = F(f"=B{r}-C{r}") if solver is not None else "n/a"
        _put(ws, r, 4, diff, USD_CENTS, border=_BORDER)
        _put(ws, r, 5, where, font=_F_SUB, border=_BORDER)


def _summary_solve(ctx: Ctx, ws: Worksheet, top: int) -> int:
    """How the solve went; returns the last row."""
    plan = ctx.plan
    _section(ws, top, "Solve")
    status_font = _F_BOLD if plan.status in ("optimal", "feasible") else _F_WARN
    info: list[tuple[str, Any, str | None, Font | None]] = [
        ("Status", plan.status, None, status_font),
        ("Solver", plan.solver, None, None),
        ("Optimality gap", _num(plan.gap) if plan.gap is not None else "n/a", PCT2, None),
        ("Solve time (s)", _num(plan.solve_seconds), NUM1, None),
    ]
    if plan.message:
        info.append(("Message", plan.message, None, None))
    r = top
    for label, value, fmt, font in info:
        r += 1
        _put(ws, r, 1, label)
        _put(ws, r, 2, value, fmt, font=font, align=Alignment(horizontal="left"))
    return r
