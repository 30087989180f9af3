"""The ``Summary`` lists at the end of the page: what to buy (live over Purchases), what to
rent (live over Rentals), the reserved commitments, the missing-inputs warning and how to
read the page.
"""

from __future__ import annotations

from openpyxl.styles import Alignment
from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.cells import (
    _BORDER,
    _F_SUB,
    _F_WARN,
    _WRAP,
    FIRST_ROW,
    MONTH_FMT,
    NUM0,
    USD,
    F,
    _exact,
    _month_value,
    _num,
    _put,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    _KEY_COL,
)
from planner.reports.excel.tables import (
    _head_cells,
    _lines,
    _section,
    _sumifs,
)
from planner.reports.plan_facts import rent_groups


def summary_buy(ctx: Ctx, ws: Worksheet, top: int, purchases_last: int) -> int:
    """What to buy: one row per GPU type and month, live over Purchases; the last row."""
    _section(ws, top, "What to buy")
    when = "In service" if ctx.lead_cols else "Month bought"
    _head_cells(ws, top + 1, ["GPU", "GPUs bought", "Servers", "Capex USD", when])
    bought = list(dict.fromkeys((p.gpu, p.month) for p in ctx.plan.purchases))
    r = top + 1
    if not bought:
        r += 1
        _put(ws, r, 1, "Nothing: no purchases in this plan", border=_BORDER)
    for g, month in bought:
        r += 1
        crit = [(1, f"$A{r}"), (2, f"$E{r}")]
        _put(ws, r, 1, g, border=_BORDER)
        # GPUs, nodes and extended cost columns of Purchases
        for c, (src, fmt) in enumerate(((4, NUM0), (3, NUM0), (8, USD)), start=2):
            sumifs = _sumifs("Purchases", src, FIRST_ROW, purchases_last, crit)
            _put(ws, r, c, F("=" + sumifs), fmt, border=_BORDER)
        left = Alignment(horizontal="left")
        _put(ws, r, 5, _month_value(month), MONTH_FMT, border=_BORDER, align=left)
    return r


def summary_rent(ctx: Ctx, ws: Worksheet, top: int, rentals_last: int) -> int:
    """What to rent: one row per (offer, workload), live over Rentals; the last row."""
    _section(ws, top, "What to rent")
    hdr = ["Offer", "GPU-hours", "Workload", "Cost USD", "Provider, GPU, kind, USD/GPU-h"]
    _head_cells(ws, top + 1, hdr)
    r = top + 1
    if not ctx.plan.rentals:
        r += 1
        _put(ws, r, 1, "Nothing: no rentals in this plan", border=_BORDER)
    for (workload, offer), g in rent_groups(ctx.plan).items():
        r += 1
        _put(ws, r, _KEY_COL, _exact(workload))
        crit = [(2, f"$A{r}"), (6, f"$M{r}")]
        hours = _sumifs("Rentals", 7, FIRST_ROW, rentals_last, crit)
        usd = _sumifs("Rentals", 9, FIRST_ROW, rentals_last, crit)
        _put(ws, r, 1, offer, border=_BORDER, align=_WRAP)
        _put(ws, r, 2, F("=" + hours), NUM0, border=_BORDER)
        _put(ws, r, 3, workload, border=_BORDER, align=_WRAP)
        _put(ws, r, 4, F("=" + usd), USD, border=_BORDER)
        kind = g.kind.replace("_", "-")
        desc = f"{g.provider}, {g.gpu}, {kind}, {g.rate_span()}"
        _put(ws, r, 5, desc, border=_BORDER)
        ws.row_dimensions[r].height = 13 * max(_lines(offer, 38), _lines(workload, 17)) + 2
    return r


def summary_reserved(ctx: Ctx, ws: Worksheet, top: int) -> int:
    """Reserved commitments, the solver's figures; returns the last row."""
    _section(ws, top, "Reserved commitments (paid whether used or not)")
    hdr = ["Offer", "GPUs", "Term (months)", "Cost USD (solver)", "Start, provider, rate"]
    _head_cells(ws, top + 1, hdr)
    r = top + 1
    for res in ctx.plan.reservations:
        r += 1
        _put(ws, r, 1, res.offer, border=_BORDER)
        _put(ws, r, 2, res.gpus, NUM0, border=_BORDER)
        _put(ws, r, 3, res.term_months, NUM0, border=_BORDER)
        _put(ws, r, 4, _num(res.usd), USD, border=_BORDER)
        rate = f"${res.usd_per_gpu_hour:,.3f}/GPU-h"
        _put(ws, r, 5, f"from {res.start_month}, {res.provider}, {rate}", border=_BORDER)
    return r


def summary_notes(ctx: Ctx, ws: Worksheet, last: int) -> int:
    """The missing-inputs warning (if any) and how to read the page; returns the last row."""
    r = last
    if ctx.a.missing:
        r += 2
        _put(
            ws,
            r,
            1,
            "Warning: inputs missing from the plan (set to 0 on the Assumptions sheet): "
            + "; ".join(ctx.a.missing),
            font=_F_WARN,
        )
    r += 2
    _put(
        ws,
        r,
        1,
        "Every figure above is a live formula over the detail sheets; the inputs (prices, power, "
        "PUE, hosting, colocation, budget, discount rate, depreciation years, resale curves"
        + (", price paths, lead times" if ctx.paths else "")
        + ") live on the Assumptions sheet. 'Solver' is the plan's own figure.",
        font=_F_SUB,
    )
    return r
