"""The ``P&L`` sheet: per plan year (12 months from the horizon start) the cash view (capex,
opex, resale inflow at the horizon end, present value) beside the P&L view (straight-line
depreciation + power + hosting + rentals - gain on sale), and a schedule per purchase: age
at the horizon end, resale share (a formula over the resale mode and the GPU's curve points
on ``Assumptions``), resale value, book value and depreciation per year.
"""

from __future__ import annotations

import math
from typing import Any

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from planner.plan.data import Purchase
from planner.reports.excel.assumptions import (
    _curve_formula,
    _curve_points,
    _curve_source,
    _curve_value,
)
from planner.reports.excel.cells import (
    _F_BOLD,
    _FILL_INPUT,
    _FILL_TOTAL,
    FIRST_ROW,
    HEADER_ROW,
    MONTH_FMT,
    PCT,
    USD,
    USD_CENTS,
    F,
    _month_value,
    _num,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.existing import existing_end
from planner.reports.excel.purchases import chassis_price
from planner.reports.excel.refs import (
    CF_CAPEX,
    CF_COMMITTED,
    CF_HOSTING,
    CF_PLAN_YEAR,
    CF_POWER,
    CF_PV,
    CF_RENTALS,
    CF_SALES,
    CashFlowRows,
    ExistingRows,
    _PnlRows,
)
from planner.reports.excel.tables import (
    _Col,
    _fit,
    _header,
    _print_setup,
    _rows,
    _section,
    _sumifs,
    _table,
    _title,
    _total_row,
    _widths,
)

_PNL_YEAR_COLS = (
    _Col("Plan year", 7, "0"),
    _Col("First month", 10, MONTH_FMT),
    _Col("Last month", 10, MONTH_FMT),
    _Col("Capex USD", 14, USD),
    _Col("Power USD", 13, USD),
    _Col("Hosting USD", 13, USD),
    _Col("Rentals USD", 13, USD),
    _Col("Resale at horizon end USD (inflow)", 15, USD),
    _Col("Cash USD", 14, USD),
    _Col("Present value USD", 14, USD),
    _Col("Depreciation USD", 14, USD),
    _Col("Gain on sale USD", 13, USD),
    _Col("P&L cost USD", 14, USD),
    _Col("Solver's P&L cost USD", 14, USD),
    _Col("Workbook - solver USD", 13, USD_CENTS),
    _Col("Contracts USD", 13, USD),
    _Col("Existing GPUs sold USD", 13, USD),
)

_SCHEDULE_COLS = (
    _Col("GPU", 7),
    _Col("Month", 10, MONTH_FMT),
    _Col("Month index", 10, "0"),
    _Col("Capex USD", 14, USD),
    _Col("Age at horizon end (months)", 13, "0"),
    _Col("Card resale share", 10, PCT),
    _Col("Chassis resale share", 10, PCT),
    _Col("Resale value USD", 15, USD),
    _Col("Book value at horizon end USD", 14, USD),
)
_S_CARD_SHARE = 6
_S_FIRST_YEAR = len(_SCHEDULE_COLS) + 1


def _no_year_row() -> list[Any]:
    return ["(no months)", None, None, *([0] * 10), "n/a", "n/a"]


def write_pnl(ctx: Ctx, cash: CashFlowRows, ex: ExistingRows | None) -> _PnlRows:
    """Per plan year the cash view and the P&L view side by side, then each purchase's
    depreciation, book value and resale value; all live over Cash flow, Purchases and
    the finance inputs on Assumptions. Returns the rows Summary reads."""
    ws = ctx.ws["P&L"]
    _title(
        ws,
        "P&L and present value by plan year",
        "Plan year = 12 months from the horizon start. Cash = capex + power + hosting + "
        "rentals - resale at the horizon end; present value discounts each month at the "
        "discount rate. P&L cost = depreciation + power + hosting + rentals - gain on sale.",
    )
    n_years = max(1, (len(ctx.plan.months) + 11) // 12)
    year_total = FIRST_ROW + n_years
    s_head = year_total + 3
    pl = _PnlRows(year_total, s_head + 1, s_head + max(1, len(ctx.plan.purchases)))
    cols = _PNL_YEAR_COLS
    _header(ws, HEADER_ROW, cols)
    last = _rows(ws, FIRST_ROW, cols, _pnl_year_rows(ctx, pl, cash, ex) or [_no_year_row()])
    sums = [(c, USD) for c in (*range(4, 15), 16, 17)]
    _total_row(ws, last + 1, last, sums)
    _put(ws, last + 1, 15, F(f"=M{last + 1}-N{last + 1}"), USD_CENTS, _F_BOLD, _FILL_TOTAL)
    _table(ws, "tblPnL", 1, len(cols), HEADER_ROW, last)
    _depreciation_table(ctx, ws, s_head, n_years, pl)
    _widths(ws, cols)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"B{FIRST_ROW}")
    return pl


def _pnl_year_rows(
    ctx: Ctx, pl: _PnlRows, cash: CashFlowRows, ex: ExistingRows | None
) -> list[list[Any]]:
    fin, T = ctx.finance, len(ctx.plan.months)
    solver = {y.year: y.pnl_cost_usd for y in ctx.plan.years}
    bought_end = sum(d.residual_value_usd for d in ctx.plan.depreciation)
    existing_value = ctx.plan.totals.residual_value_usd - bought_end
    rows: list[list[Any]] = []
    for k in range(0, T, 12):
        r, y = FIRST_ROW + k // 12, k // 12 + 1
        last = k + 12 >= T
        crit = [(CF_PLAN_YEAR, f"$A{r}")]

        def cf(col: int, crit: list[tuple[int, str]] = crit) -> F:
            return F("=" + _sumifs("Cash flow", col, FIRST_ROW, cash.last, crit))

        dep_col = get_column_letter(_S_FIRST_YEAR + y - 1)
        sol = solver.get(y)
        rows.append(
            [
                y,
                _month_value(ctx.plan.months[k]),
                _month_value(ctx.plan.months[min(T, k + 12) - 1]),
                *(cf(c) for c in (CF_CAPEX, CF_POWER, CF_HOSTING, CF_RENTALS)),
                # resale at the horizon end: purchases (live) + existing GPUs (the plan's)
                F(f"=$H${pl.s_total}+{existing_end(ex, existing_value)}") if last else 0,
                F(f"=D{r}+E{r}+F{r}+G{r}+P{r}-Q{r}-H{r}"),
                F(f"={cf(CF_PV).text[1:]}-H{r}/(1+{fin.rate})^({T}/12)"),
                F(f"=SUM({dep_col}{pl.s_first}:{dep_col}{pl.s_last})"),
                F(f'=IF({fin.mode}="none",0,$H${pl.s_total}-$I${pl.s_total})') if last else 0,
                F(f"=K{r}+E{r}+F{r}+G{r}+P{r}-L{r}"),
                _num(sol) if sol is not None else "n/a",
                F(f"=M{r}-N{r}") if sol is not None else "n/a",
                cf(CF_COMMITTED),
                cf(CF_SALES),
            ]
        )
    return rows


def _depreciation_table(ctx: Ctx, ws: Worksheet, top: int, n_years: int, pl: _PnlRows) -> None:
    _section(ws, top - 1, "Depreciation, book value and resale value per purchase")
    gpus = [p.gpu for p in ctx.plan.purchases]
    cols = [_Col("GPU", _fit(7, gpus, 30)), *_SCHEDULE_COLS[1:]]
    cols += [_Col(f"Depreciation year {y} USD", 14, USD) for y in range(1, n_years + 1)]
    cols.append(_Col("Resale share source", 40, None, wrap=True))
    _header(ws, top, cols)
    rows = [_schedule_row(ctx, i, p, n_years, pl) for i, p in enumerate(ctx.plan.purchases)]
    if not rows:
        rows = [["(no purchases)", None, 0, *([0] * (len(cols) - 4)), ""]]
    last = _rows(ws, top + 1, cols, rows)
    for r in range(top + 1, last + 1):
        if ws.cell(r, _S_CARD_SHARE).data_type != "f":
            ws.cell(r, _S_CARD_SHARE).fill = _FILL_INPUT
    sums = [(4, USD), (8, USD), (9, USD)]
    sums += [(_S_FIRST_YEAR + k, USD) for k in range(n_years)]
    _put(ws, last + 1, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL)
    for c, fmt in sums:
        L = get_column_letter(c)
        _put(ws, last + 1, c, F(f"=SUM({L}{top + 1}:{L}{last})"), fmt, _F_BOLD, _FILL_TOTAL)
    _table(ws, "tblDepreciation", 1, len(cols), top, last)
    _widths(ws, cols)


def _schedule_row(ctx: Ctx, i: int, p: Purchase, n_years: int, pl: _PnlRows) -> list[Any]:
    """One purchase: capex, age at the horizon end, resale shares (card: the resale mode's
    share; chassis: book value under straight_line, else 0), resale and book value, and
    straight-line depreciation per plan year (12 x life months from the purchase)."""
    fin, T = ctx.finance, len(ctx.plan.months)
    s, pr = pl.s_first + i, FIRST_ROW + i
    t = ctx.plan.months.index(p.month) if p.month in ctx.plan.months else 0
    pur = lambda c: _sheet_ref("Purchases", f"${c}${pr}")  # noqa: E731
    sl = f"MAX(0,1-E{s}/(12*{fin.years}))"
    card, source = _card_share(ctx, i, p, T - t, f"E{s}", sl)
    life = f"C{s}+ROUND(12*{fin.years},0)"
    deps = [
        F(f"=D{s}/(12*{fin.years})*MAX(0,MIN({min(T, k + 12)},{life})-MAX({k},C{s}))")
        for k in range(0, 12 * n_years, 12)
    ]
    return [
        p.gpu,
        _month_value(p.month),
        t,
        F(f"={pur('H')}"),
        F(f"={T}-C{s}"),
        card,
        F(f'=IF({fin.mode}="straight_line",{sl},0)'),
        F(f"={pur('D')}*{pur('E')}*F{s}+{pur('C')}*{pur('F')}*G{s}"),
        F(f"=D{s}*{sl}"),
        *deps,
        source,
    ]


def _card_share(ctx: Ctx, i: int, p: Purchase, age: int, age_cell: str, sl: str) -> tuple[Any, str]:
    """A card's resale share at the horizon end: a formula over the resale mode and the
    GPU's curve points on Assumptions; where that does not give the plan's resale value
    (a plan without the curve), the plan's share as a yellow input of this row."""
    fin = ctx.finance
    points = _curve_points(ctx.a, p.gpu)
    source = _curve_source(p.gpu, points)

    def formula() -> F:
        curve = _curve_formula(ctx.a, points, age, age_cell)
        return F(f'=IF({fin.mode}="none",0,IF({fin.mode}="straight_line",{sl},{curve}))')

    dep = ctx.plan.depreciation[i] if i < len(ctx.plan.depreciation) else None
    if dep is None or dep.gpu != p.gpu or dep.month != p.month:
        return formula(), source
    life = dep.years
    sl_value = max(0.0, 1.0 - age / (12.0 * life)) if life > 0 else 0.0
    mode = ctx.plan.residual_mode
    card = {"none": 0.0, "straight_line": sl_value}.get(mode, _curve_value(ctx.a, points, age))
    chassis = sl_value if mode == "straight_line" else 0.0
    _, chassis_usd = chassis_price(ctx, p)
    want = dep.residual_value_usd
    got = p.count * p.gpu_usd * card + p.nodes * chassis_usd * chassis
    if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6) or not p.count * p.gpu_usd:
        return formula(), source
    share = (want - p.nodes * chassis_usd * chassis) / (p.count * p.gpu_usd)
    return share, "the plan's resale share (not from the curve on Assumptions): edit here"
