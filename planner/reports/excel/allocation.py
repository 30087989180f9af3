"""The ``Allocation`` sheet: each GPU type's owned cost (capex + power + hosting) shared
among workloads by the owned GPU-hours each used, and reserved commitments by the reserved
GPU-hours used; the Workloads sheet sums it per workload.
"""

from __future__ import annotations

from typing import Any

from planner.reports.excel.cells import (
    FIRST_ROW,
    HEADER_ROW,
    NUM0,
    PCT,
    USD,
    F,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    FL_HOSTING,
    FL_POWER,
    P_EXTENDED,
    DetailRows,
)
from planner.reports.excel.tables import (
    _Col,
    _fit,
    _header,
    _print_setup,
    _rows,
    _sumifs,
    _table,
    _title,
    _total_row,
    _widths,
)
from planner.reports.fleet_facts import gpu_hours_used

_ALLOC_COLS = (
    _Col("Workload", 14),
    _Col("GPU", 16),
    _Col("Owned GPU-h used", 13, NUM0),
    _Col("Share of owned GPU-h", 11, PCT),
    _Col("Owned cost of GPU type USD", 15, USD),
    _Col("Owned cost allocated USD", 15, USD),
    _Col("Reserved GPU-h used", 13, NUM0),
    _Col("Share of reserved GPU-h", 11, PCT),
    _Col("Reserved cost of GPU type USD", 15, USD),
    _Col("Reserved cost allocated USD", 15, USD),
    _Col("Allocated USD", 14, USD),
)


def _no_allocation_row() -> list[Any]:
    r = FIRST_ROW
    return ["(no owned or reserved use)", "", 0, 0, 0, 0, 0, 0, 0, 0, F(f"=F{r}+J{r}")]


def write_allocation(ctx: Ctx, details: DetailRows) -> int:
    """The Allocation sheet, over the detail sheets; returns its last data row."""
    ws = ctx.ws["Allocation"]
    _title(
        ws,
        "Allocation of owned and reserved cost to workloads",
        "Each GPU type's owned cost (capex + power + hosting) is shared among workloads by "
        "the owned GPU-hours each used; reserved commitments by the reserved GPU-hours used.",
    )
    cols = _ALLOC_COLS
    _header(ws, HEADER_ROW, cols)
    rows = _allocation_rows(ctx, details) or [_no_allocation_row()]
    last = _rows(ws, FIRST_ROW, cols, rows)
    _total_row(
        ws,
        last + 1,
        last,
        [(3, NUM0), (6, USD), (7, NUM0), (10, USD), (11, USD)],
    )
    _table(ws, "tblAllocation", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    ws.column_dimensions["A"].width = _fit(12, [w.name for w in ctx.plan.workloads], 30)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"C{FIRST_ROW}")
    return last


def _allocation_rows(ctx: Ctx, details: DetailRows) -> list[list[Any]]:
    pl, fl, rl = details.purchases, details.fleet, details.rentals
    rows: list[list[Any]] = []
    used = gpu_hours_used(ctx.plan)
    last = FIRST_ROW + len(used) - 1
    for r, ((w, g), (owned_h, reserved_h)) in enumerate(used.items(), start=FIRST_ROW):
        crit = [(1, f"$B{r}")]
        same_gpu = f"SUMIFS($C${FIRST_ROW}:$C${last},$B${FIRST_ROW}:$B${last},$B{r})"
        same_gpu_res = f"SUMIFS($G${FIRST_ROW}:$G${last},$B${FIRST_ROW}:$B${last},$B{r})"
        owned_cost = "+".join(
            [
                _sumifs("Purchases", P_EXTENDED, FIRST_ROW, pl, crit),
                _sumifs("Fleet", FL_POWER, FIRST_ROW, fl, crit),
                _sumifs("Fleet", FL_HOSTING, FIRST_ROW, fl, crit),
            ]
        )
        reserved_cost = _sumifs("Rentals", 9, FIRST_ROW, rl, [(3, f"$B{r}"), (4, '"reserved"')])
        rows.append(
            [
                w,
                g,
                owned_h,
                F(f"=IF({same_gpu}>0,C{r}/{same_gpu},0)"),
                F(f"={owned_cost}"),
                F(f"=D{r}*E{r}"),
                reserved_h,
                F(f"=IF({same_gpu_res}>0,G{r}/{same_gpu_res},0)"),
                F(f"={reserved_cost}"),
                F(f"=H{r}*I{r}"),
                F(f"=F{r}+J{r}"),
            ]
        )
    return rows
