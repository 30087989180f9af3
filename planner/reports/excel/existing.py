"""The ``Existing`` sheet (only in a plan that starts from assets the team had): GPUs owned
before the plan, the sales of them and the contracts signed before it, each a table of rows
marked as existing with live formulas over ``Assumptions``; and the cells by which Cash flow
and the P&L read those tables (contracts and sales per month, value at the horizon end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.assumptions import (
    _curve_formula,
    _curve_points,
)
from planner.reports.excel.cells import (
    _BORDER,
    HEADER_ROW,
    MONTH_FMT,
    PCT,
    USD,
    USD_RATE,
    F,
    _month_value,
    _num,
    _put,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    EXISTING,
    EXISTING_MARK,
    ExistingRows,
    _Block,
)
from planner.reports.excel.tables import (
    _Col,
    _header,
    _rows,
    _section,
    _table,
    _title,
    _widths,
)

_EX_OWNED = (
    _Col("Existing", 22),
    _Col("GPU", 16),
    _Col("GPUs", 8, "0"),
    _Col("Bought", 9),
    _Col("Arrives", 9),
    _Col("Sell", 8),
    _Col("Sold", 8, "0"),
    _Col("Kept to the end", 9, "0"),
    _Col("Capex USD", 10, USD),
    _Col("Age at end (months)", 10, "0"),
    _Col("Catalog price USD", 12, USD),
    _Col("End value share", 10, PCT),
    _Col("End value USD", 13, USD),
)

_EX_SALES = (
    _Col("Existing", 22),
    _Col("GPU", 16),
    _Col("Month", 10, MONTH_FMT),
    _Col("GPUs", 8, "0"),
    _Col("Age (months)", 9, "0"),
    _Col("Catalog price USD", 12, USD),
    _Col("Resale share", 10, PCT),
    _Col("Proceeds USD", 13, USD),
    _Col("Solver's proceeds USD", 13, USD),
)

_EX_CONTRACTS = (
    _Col("Existing", 22),
    _Col("Provider", 16),
    _Col("GPU", 9),
    _Col("Offer", 9),
    _Col("Month", 10, MONTH_FMT),
    _Col("GPUs", 9, "0"),
    _Col("Hours", 10, "0"),
    _Col("Rate USD / GPU-h", 12, USD_RATE),
    _Col("Cost USD", 13, USD),
)


def write_existing(ctx: Ctx) -> ExistingRows | None:
    """GPUs owned before the plan, sales of them and contracts signed before it, each on
    its own rows marked as existing, with live formulas over Assumptions. Returns the rows of
    its three tables; None when the plan has nothing from before it (no Existing sheet)."""
    ws = ctx.ws.get(EXISTING)
    if ws is None:
        return None
    _title(
        ws,
        "What the team had before the plan",
        "Existing GPUs carry no capex; they pay power and hosting on the Fleet sheet (column "
        "O). Sale = GPUs x catalog price x resale share at their age. Contract = GPUs x hours "
        "x rate, paid used or not. Cash flow reads the sale and contract columns.",
    )
    top = HEADER_ROW
    owned = _ex_block(ws, top, "tblExisting", _EX_OWNED, _ex_owned_rows(ctx, top))
    top = max(owned.last, top + 1) + 3
    _section(ws, top - 1, "Existing GPUs sold")
    sales = _ex_block(ws, top, "tblSales", _EX_SALES, _ex_sale_rows(ctx, top))
    top = max(sales.last, top + 1) + 3
    _section(ws, top - 1, "Contracts signed before the plan (months inside the horizon)")
    rows = _ex_contract_rows(ctx, top)
    contracts = _ex_block(ws, top, "tblContracts", _EX_CONTRACTS, rows)
    for cols in (_EX_OWNED, _EX_SALES, _EX_CONTRACTS):
        _widths(ws, cols)
    return ExistingRows(owned, sales, contracts)


def _ex_block(
    ws: Worksheet, top: int, name: str, cols: Sequence[_Col], rows: list[list[Any]]
) -> _Block:
    _header(ws, top, cols)
    if not rows:
        _put(ws, top + 1, 1, "(none)", border=_BORDER)
        return _Block(top + 1, top)
    last = _rows(ws, top + 1, cols, rows)
    _table(ws, name, 1, len(cols), top, last)
    return _Block(top + 1, last)


def _ex_owned_rows(ctx: Ctx, top: int) -> list[list[Any]]:
    rows = []
    for r, e in enumerate(ctx.plan.existing, start=top + 1):
        price = ctx.gpu_in(e.gpu, "purchase_usd", "USD")
        rows.append(
            [
                EXISTING_MARK,
                e.gpu,
                e.count,
                e.bought or "",
                e.arrives or "",
                e.sell,
                e.sold,
                F(f"=C{r}-G{r}"),
                0,  # no capex: owned before the plan
                e.age_end_months,
                F(f"={price}"),
                e.residual_share,
                F(f"=H{r}*K{r}*L{r}"),
            ]
        )
    return rows


def _ex_sale_rows(ctx: Ctx, top: int) -> list[list[Any]]:
    rows = []
    for r, x in enumerate(ctx.plan.sales, start=top + 1):
        points = _curve_points(ctx.a, x.gpu)
        share = _curve_formula(ctx.a, points, x.age_months, f"E{r}")
        price = ctx.gpu_in(x.gpu, "purchase_usd", "USD")
        rows.append(
            [
                EXISTING_MARK,
                x.gpu,
                _month_value(x.month),
                x.count,
                x.age_months,
                F(f"={price}"),
                F(f"={share}"),
                F(f"=D{r}*F{r}*G{r}"),
                x.usd,
            ]
        )
    return rows


def _ex_contract_rows(ctx: Ctx, top: int) -> list[list[Any]]:
    rows: list[list[Any]] = []
    r = top
    for c in ctx.plan.commitments:
        rate = ctx.a.ref_equal(
            f"offer:{c.offer}",
            "committed_usd_per_gpu_hour",
            c.usd_per_gpu_hour,
            "USD/GPU-h",
            "plan commitment row",
        )
        for m in c.months:
            r += 1
            rows.append(
                [
                    EXISTING_MARK,
                    c.provider,
                    c.gpu,
                    c.offer,
                    _month_value(m),
                    c.count,
                    F(f"={ctx.H}"),
                    F(f"={rate}") if rate else c.usd_per_gpu_hour,
                    F(f"=F{r}*G{r}*H{r}"),
                ]
            )
    return rows


def existing_cash(
    ex: ExistingRows | None, crit: str, plan_values: tuple[float, float]
) -> list[Any]:
    """Cash flow's contract and sale cells for the month in ``crit``: SUMIFS over the
    Existing sheet, or the plan's figures (0) when the plan has no existing assets."""
    if ex is None:
        return list(plan_values)
    out: list[Any] = []
    for b, usd_col, month_col in ((ex.contracts, 9, 5), (ex.sales, 8, 3)):
        if b.last < b.first:
            out.append(0)
        else:
            out.append(F(f"=SUMIFS({b.col(usd_col)},{b.col(month_col)},{crit})"))
    return out


def existing_end(ex: ExistingRows | None, plan_value: float) -> str:
    """Existing GPUs' value at the horizon end: the sum over the Existing sheet."""
    if ex is None or ex.owned.last < ex.owned.first:
        return str(_num(plan_value))
    return f"SUM({ex.owned.col(13)})"
