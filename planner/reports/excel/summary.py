"""The ``Summary`` sheet, page 1: the title, the decision in plain words, cost per year and
per workload, peak GPU commitment and the risks; then, on page 2, the live cost and budget
blocks and what to buy and rent (from :mod:`.summary_costs` and :mod:`.summary_lists`), and
the workbook-level names of the headline cells.
"""

from __future__ import annotations

from openpyxl.styles import Alignment, Font
from openpyxl.utils import get_column_letter
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.pagebreak import Break
from openpyxl.worksheet.worksheet import Worksheet

from planner.plan.data import WorkloadResult
from planner.reports.excel.cells import (
    _BORDER,
    _F_BIG,
    _F_BOLD,
    _F_SUB,
    _F_TITLE,
    _FILL_TOTAL,
    _WRAP,
    FIRST_ROW,
    NUM0,
    PCT,
    USD,
    F,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    CF_COMMITTED,
    CF_SALES,
    CashFlowRows,
    SheetRows,
    _CostRows,
)
from planner.reports.excel.summary_costs import summary_budget, summary_costs
from planner.reports.excel.summary_lists import (
    summary_buy,
    summary_notes,
    summary_rent,
    summary_reserved,
)
from planner.reports.excel.tables import (
    _col_range,
    _head_cells,
    _lines,
    _print_setup,
    _section,
    _sumifs,
)
from planner.reports.fleet_facts import peak_gpus, rented_peak_by_workload, years
from planner.reports.plan_facts import decision_sentences, market_line, not_modeled

_SUMMARY_COLS = 5
_SUMMARY_WIDTH = 38 + 17 + 17 + 14 + 52  # the Summary's columns A:E, in characters
_NO_MARGIN = (
    "not computed for this workbook (rebuilt from a plan JSON); `planner explain PROBLEM` "
    "prints what the plan would cost without each GPU type it buys."
)


_NO_BUY = (
    "the plan buys nothing; renting beat owning every GPU type at these prices (`planner "
    "explain PROBLEM` shows what each limit and GPU type is worth)."
)


def write_summary(ctx: Ctx, rows: SheetRows) -> _CostRows:
    """Page 1: a stack of blocks, each starting two rows below the one before. Returns the
    rows of the cost table, which the charts and the Solver sheet read."""
    ws = ctx.ws["Summary"]
    _summary_title(ctx, ws)
    # page 1 answers "what do we do, what does it cost when, for what, and what could go
    # wrong"; the live cost lines and the detail tables follow
    r = _summary_decision(ctx, ws, 5)
    r = _summary_years(ctx, ws, r + 2, rows.cash.last)
    r = _summary_by_workload(ctx, ws, r + 2, rows.cash)
    r = _summary_peak(ctx, ws, r + 2)
    r = _summary_risks(ctx, ws, r + 2, rows)
    ws.row_breaks.append(Break(id=r + 1))
    cost = summary_costs(ctx, ws, r + 3, rows)
    r = summary_budget(ctx, ws, cost.book + 2, cost)
    r = summary_buy(ctx, ws, r + 2, rows.details.purchases)
    r = summary_rent(ctx, ws, r + 2, rows.details.rentals)
    if ctx.plan.reservations:
        r = summary_reserved(ctx, ws, r + 2)
    summary_notes(ctx, ws, r)
    for col, w in zip("ABCDE", (38, 17, 17, 14, 52), strict=True):
        ws.column_dimensions[col].width = w
    for name, row in (
        ("total_cost_usd", cost.total),
        ("capex_usd", cost.capex),
        ("npv_usd", cost.npv),
        ("residual_value_usd", cost.residual),
        ("book_value_usd", cost.book),
    ):
        ctx.wb.defined_names[name] = DefinedName(name, attr_text=_sheet_ref("Summary", f"$B${row}"))
    ws.column_dimensions["M"].hidden = True
    _print_setup(ws, None, None)
    ws.sheet_view.showGridLines = False
    return cost


def _total_ref(cash: CashFlowRows) -> str:
    return _sheet_ref("Cash flow", f"$F${cash.total}")


def _sentence(ws: Worksheet, r: int, text: str, font: Font | None = None) -> None:
    """A line of text across the page (A:E merged), its row tall enough for the wrap."""
    _put(ws, r, 1, text, font=font, align=_WRAP)
    ws.merge_cells(start_row=r, start_column=1, end_row=r, end_column=_SUMMARY_COLS)
    lines = _lines(text, _SUMMARY_WIDTH)
    if lines > 1:
        ws.row_dimensions[r].height = 13 * lines + 2


def _summary_decision(ctx: Ctx, ws: Worksheet, top: int) -> int:
    """The decision in plain words (figures as solved); returns the last row."""
    _section(ws, top, "The decision")
    r = top
    for line in decision_sentences(ctx.plan):
        r += 1
        _sentence(ws, r, line)
    market = market_line(ctx.plan)
    if market:  # the price paths and lead times the plan was solved under
        r += 1
        _sentence(ws, r, market + " They are yellow inputs on the Assumptions sheet.")
    return r


def _summary_years(ctx: Ctx, ws: Worksheet, top: int, cash_last: int) -> int:
    """Cost per calendar year, live over Cash flow; returns the total row."""
    _section(ws, top, "Cost per year (USD, live)")
    hdr = ["Year", "Capex", "Opex (power + hosting)", "Rentals", "Total"]
    fleet = ctx.has_existing_sheet  # then a sixth column: contracts less sales, in the total
    hdr += ["Contracts - sales"] if fleet else []
    _head_cells(ws, top + 1, hdr)
    r = top + 1
    last = cash_last
    for y in years(ctx.plan) or [0]:
        r += 1
        crit = [(12, f"$A{r}")]
        cap, pw, hs, rn = (_sumifs("Cash flow", c, FIRST_ROW, last, crit) for c in (2, 3, 4, 5))
        _put(ws, r, 1, y, "0", border=_BORDER, align=Alignment(horizontal="left"))
        _put(ws, r, 2, F(f"={cap}"), USD, border=_BORDER)
        _put(ws, r, 3, F(f"={pw}+{hs}"), USD, border=_BORDER)
        _put(ws, r, 4, F(f"={rn}"), USD, border=_BORDER)
        _put(ws, r, 5, F(f"=SUM(B{r}:D{r})" + (f"+F{r}" if fleet else "")), USD, border=_BORDER)
        if fleet:
            q, s = (
                _sumifs("Cash flow", c, FIRST_ROW, last, crit) for c in (CF_COMMITTED, CF_SALES)
            )
            _put(ws, r, 6, F(f"={q}-{s}"), USD, border=_BORDER)
    first = top + 2
    r += 1
    _put(ws, r, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL, border=_BORDER)
    for c in range(2, 7 if fleet else 6):
        L = get_column_letter(c)
        _put(
            ws,
            r,
            c,
            F(f"=SUM({L}{first}:{L}{r - 1})"),
            USD,
            _F_BOLD,
            _FILL_TOTAL,
            border=_BORDER,
        )
    return r


def _summary_by_workload(ctx: Ctx, ws: Worksheet, top: int, cash: CashFlowRows) -> int:
    """Cost per workload, live over the Workloads sheet; returns the last row."""
    _section(ws, top, "Cost per workload (USD, live)")
    _head_cells(ws, top + 1, ["Workload", "Kind", "Cost", "Share", "Runs on"])
    r = top + 1
    for i, w in enumerate(ctx.plan.workloads):
        r += 1
        src = FIRST_ROW + i
        _put(ws, r, 1, w.name, border=_BORDER)
        _put(ws, r, 2, w.kind, border=_BORDER)
        _put(ws, r, 3, F("=" + _sheet_ref("Workloads", f"$H${src}")), USD, border=_BORDER)
        _put(ws, r, 4, F("=" + _sheet_ref("Workloads", f"$I${src}")), PCT, border=_BORDER)
        _put(ws, r, 5, _runs_on(ctx, w), border=_BORDER)
    first = top + 2
    r += 1
    # what no workload used (idle owned GPUs, unused reservations) keeps the sum whole
    _put(ws, r, 1, "Not used by any workload", border=_BORDER)
    left = f"ROUND({_total_ref(cash)}-SUM(C{first}:C{r - 1}),2)"  # no "-$0" from rounding
    _put(ws, r, 3, F(f"={left}"), USD, border=_BORDER)
    _put(ws, r, 5, "idle owned GPUs, unused reserved hours", font=_F_SUB, border=_BORDER)
    return r


def _runs_on(ctx: Ctx, w: WorkloadResult) -> str:
    peak = rented_peak_by_workload(ctx.plan)
    parts = [
        g + (f" (rents up to {peak[(w.name, g)]:,.0f})" if (w.name, g) in peak else "")
        for g in w.gpu
    ]
    return f"{w.gpus:,} GPUs at peak; " + ", ".join(parts)


def _summary_peak(ctx: Ctx, ws: Worksheet, top: int) -> int:
    """The most GPUs committed at once per type (not a monthly average); the last row."""
    _section(ws, top, "Peak GPU commitment by type (most at once, from the plan)")
    hdr = [
        "GPU",
        "Owned",
        "Reserved",
        "Rented at once",
        "Most at once (owned + reserved + rented)",
    ]
    _head_cells(ws, top + 1, hdr)
    r = top + 1
    for p in peak_gpus(ctx.plan):
        r += 1
        _put(ws, r, 1, p.gpu, border=_BORDER)
        _put(ws, r, 2, p.owned, NUM0, border=_BORDER)
        _put(ws, r, 3, p.reserved, NUM0, border=_BORDER)
        _put(ws, r, 4, p.rented, NUM0, border=_BORDER)
        _put(ws, r, 5, p.total, NUM0, border=_BORDER)
    return r


def _summary_risks(ctx: Ctx, ws: Worksheet, top: int, rows: SheetRows) -> int:
    """Spot exposure, how close buying is to renting, and what is not modeled."""
    _section(ws, top, "Risks")
    r = top
    kind = _col_range("Rentals", 4, FIRST_ROW, rows.details.rentals)
    usd = _col_range("Rentals", 9, FIRST_ROW, rows.details.rentals)
    total = _total_ref(rows.cash)
    for label, k, why in (
        ("Share of spend on spot", "spot", "spot capacity can be taken back at any time"),
        ("Share of spend on on-demand", "on_demand", "rates can change; capacity not held"),
    ):
        r += 1
        _put(ws, r, 1, label)
        _put(ws, r, 2, F(f'=IF({total}>0,SUMIFS({usd},{kind},"{k}")/{total},0)'), PCT, _F_BOLD)
        _put(ws, r, 3, why, font=_F_SUB)
    for line in ctx.margins or [_NO_BUY if not ctx.plan.purchases else _NO_MARGIN]:
        r += 1
        _sentence(ws, r, "Buying vs the next-best plan: " + line)
    r += 1
    _put(ws, r, 1, "Not modeled:", font=_F_BOLD)
    for line in not_modeled(ctx.plan):
        r += 1
        _sentence(ws, r, "- " + line, font=_F_SUB)
    return r


def _summary_title(ctx: Ctx, ws: Worksheet) -> None:
    plan = ctx.plan
    _put(ws, 1, 1, "GPU procurement plan", font=_F_TITLE)
    _put(ws, 2, 1, plan.problem_name, font=_F_BIG)
    horizon = (
        f"{plan.months[0]} to {plan.months[-1]} ({len(plan.months)} months)"
        if plan.months
        else "none"
    )
    _put(
        ws,
        3,
        1,
        f"Horizon {horizon}; problem file {plan.problem_file} (sha256 {plan.problem_sha256[:12]}); "
        f"planner {plan.planner_version}",
        font=_F_SUB,
    )
    ws.row_dimensions[1].height = 22
