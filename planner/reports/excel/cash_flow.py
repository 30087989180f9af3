"""The ``Cash flow`` sheet: one row per month, SUMIFS over the Purchases, Fleet and Rentals
sheets (and the Existing sheet's contracts and sales), total, running total, capex budget
headroom, and the month's discount factor ``1/(1+rate)^(t/12)`` and present value.
"""

from __future__ import annotations

from typing import Any

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.cells import (
    _F_BOLD,
    _FILL_TOTAL,
    _TOP,
    FIRST_ROW,
    HEADER_ROW,
    MONTH_FMT,
    USD,
    USD_CENTS,
    F,
    _month_value,
    _put,
    month_date,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.existing import existing_cash
from planner.reports.excel.refs import (
    CF_COMMITTED,
    CF_PV,
    CF_SALES,
    FL_HOSTING,
    FL_POWER,
    P_CAPEX_INDEX,
    P_EXTENDED,
    CashFlowRows,
    DetailRows,
    ExistingRows,
)
from planner.reports.excel.tables import (
    _Col,
    _header,
    _print_setup,
    _rows,
    _sumifs,
    _table,
    _title,
    _widths,
)

_CASH_FLOW_COLS = (
    _Col("Month", 10, MONTH_FMT),
    _Col("Capex USD", 14, USD),
    _Col("Power USD", 13, USD),
    _Col("Hosting USD", 13, USD),
    _Col("Rentals USD", 13, USD),
    _Col("Total USD", 14, USD),
    _Col("Running total USD", 15, USD),
    _Col("Cumulative capex USD", 15, USD),
    _Col("Capex budget headroom USD", 16, USD),
    _Col("Solver's total USD", 14, USD),
    _Col("Workbook - solver USD", 13, USD_CENTS),
    _Col("Year", 7, "0"),
    _Col("Month index", 8, "0"),
    _Col("Plan year", 7, "0"),
    _Col("Discount factor", 10, "0.0000"),
    _Col("Present value USD", 15, USD),
    _Col("Contracts signed before the plan USD", 15, USD),
    _Col("Existing GPUs sold USD (inflow)", 15, USD),
)


def _no_months_row() -> list[Any]:
    r = FIRST_ROW
    return [
        "(no months)",
        *(0, 0, 0, 0),
        F(f"=SUM(B{r}:E{r})"),
        *(0, 0, "n/a", 0),
        F(f"=F{r}-J{r}"),
        *(0, 0, 1, 1),
        F(f"=F{r}*O{r}"),
    ]


def _cash_flow_total(ws: Worksheet, tr: int, last: int, budget: str | None) -> None:
    """The total row of Cash flow: running and cumulative columns have no meaningful sum."""
    _put(ws, tr, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL, border=_TOP)
    for c in range(2, len(_CASH_FLOW_COLS) + 1):
        L = get_column_letter(c)
        summed = (2, 3, 4, 5, 6, 10, CF_PV, CF_COMMITTED, CF_SALES)
        v = F(f"=SUM({L}{FIRST_ROW}:{L}{last})") if c in summed else None
        if c == 11:
            v = F(f"=F{tr}-J{tr}")
        if c == 9 and budget:
            v = F(f"={budget}-B{tr}")
        _put(ws, tr, c, v, _CASH_FLOW_COLS[c - 1].fmt, _F_BOLD, _FILL_TOTAL, border=_TOP)


def write_cash_flow(ctx: Ctx, details: DetailRows, ex: ExistingRows | None) -> CashFlowRows:
    """The Cash flow sheet, over the detail sheets; returns its last month row and total row."""
    ws = ctx.ws["Cash flow"]
    _title(
        ws,
        "Cash flow by month",
        "Capex, power, hosting and rentals are SUMIFS over the Purchases, Fleet "
        "and Rentals sheets; headroom = capex budget - cumulative capex.",
    )
    cols = _CASH_FLOW_COLS
    _header(ws, HEADER_ROW, cols)
    budget = ctx.budget_cell()
    # a plan without months gets one zero row, so every reference stays valid
    rows = _cash_flow_rows(ctx, budget, details, ex) or [_no_months_row()]
    last = _rows(ws, FIRST_ROW, cols, rows)
    _cash_flow_total(ws, last + 1, last, budget)
    _table(ws, "tblCashFlow", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"B{FIRST_ROW}")
    return CashFlowRows(last=last, total=last + 1)


def _cash_flow_rows(
    ctx: Ctx, budget: str | None, details: DetailRows, ex: ExistingRows | None
) -> list[list[Any]]:
    solver_month = {m.month: m.total_usd for m in ctx.plan.cash_flow}
    fleet_cash = {m.month: (m.committed_usd, m.sales_usd) for m in ctx.plan.cash_flow}
    pl, rl, fl = details.purchases, details.rentals, details.fleet
    rate = ctx.finance.rate

    def capex_crit(r: int) -> list[tuple[int, str]]:
        # capex in the month it is paid: the order's, or in service (finance capex_at)
        return [(P_CAPEX_INDEX, f"$M{r}")] if ctx.lead_cols else [(2, f"$A{r}")]

    rows: list[list[Any]] = []
    for t, (r, m) in enumerate(enumerate(ctx.plan.months, start=FIRST_ROW)):
        crit = f"$A{r}"
        prev_run = f"G{r - 1}+" if r > FIRST_ROW else ""
        prev_cap = f"H{r - 1}+" if r > FIRST_ROW else ""
        rows.append(
            [
                _month_value(m),
                F("=" + _sumifs("Purchases", P_EXTENDED, FIRST_ROW, pl, capex_crit(r))),
                F("=" + _sumifs("Fleet", FL_POWER, FIRST_ROW, fl, [(2, crit)])),
                F("=" + _sumifs("Fleet", FL_HOSTING, FIRST_ROW, fl, [(2, crit)])),
                F("=" + _sumifs("Rentals", 9, FIRST_ROW, rl, [(5, crit)])),
                F(f"=SUM(B{r}:E{r})+Q{r}-R{r}"),
                F(f"={prev_run}F{r}"),
                F(f"={prev_cap}B{r}"),
                F(f"={budget}-H{r}") if budget else "n/a",
                solver_month.get(m, 0.0),
                F(f"=F{r}-J{r}"),
                # the calendar year, for the per-year totals on Summary (SUMIFS)
                int(m[:4]) if month_date(m) else 0,
                # months from the horizon start, and the 12-month block the P&L sums by
                t,
                t // 12 + 1,
                # start-of-month cash at an annual rate, compounded monthly
                F(f"=1/(1+{rate})^(M{r}/12)"),
                F(f"=F{r}*O{r}"),
                # contracts and sales of existing GPUs: live over the Existing sheet
                *existing_cash(ex, crit, fleet_cash.get(m, (0.0, 0.0))),
            ]
        )
    return rows
