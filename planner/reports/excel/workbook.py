"""The Excel report's orchestration: :func:`build_workbook` writes the sheets in the one
order their references allow (detail sheets first, Summary and the sheets reading it next,
Assumptions last), passing each sheet the rows the earlier ones returned, and
:func:`write_workbook` saves the result atomically with every formula's value stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from openpyxl import Workbook

from planner.base.files import atomic_write_bytes
from planner.plan.data import Plan
from planner.reports.excel.allocation import write_allocation
from planner.reports.excel.assumptions_sheet import write_assumptions
from planner.reports.excel.cash_flow import write_cash_flow
from planner.reports.excel.cells import _text
from planner.reports.excel.charts import write_charts
from planner.reports.excel.context import new_context
from planner.reports.excel.existing import write_existing
from planner.reports.excel.fleet import write_fleet
from planner.reports.excel.frontier_sheet import write_frontier
from planner.reports.excel.pnl import write_pnl
from planner.reports.excel.purchases import write_purchases
from planner.reports.excel.refs import DetailRows, SheetRows
from planner.reports.excel.rentals import write_rentals
from planner.reports.excel.scenarios import write_scenarios
from planner.reports.excel.solver_sheet import write_solver
from planner.reports.excel.summary import write_summary
from planner.reports.excel.workloads import write_workloads
from planner.reports.xlsx_cache import save_with_values


def build_workbook(plan: Plan, margins: Sequence[str] | None = None) -> Workbook:
    """The report workbook for ``plan`` (in memory).

    ``margins``: lines saying what the plan would cost without each GPU type it buys (from
    :func:`planner.analysis.explain.buy_margins`); the report cannot re-solve, so the caller passes them.
    """
    ctx = new_context(plan, margins)
    # detail sheets first: the summary and cash flow reference their last rows
    details = DetailRows(
        purchases=write_purchases(ctx), rentals=write_rentals(ctx), fleet=write_fleet(ctx)
    )
    existing = write_existing(ctx)
    cash = write_cash_flow(ctx, details, existing)
    pnl = write_pnl(ctx, cash, existing)
    alloc_last = write_allocation(ctx, details)
    write_workloads(ctx, details, alloc_last, cash)
    rows = SheetRows(details, cash, pnl)
    cost = write_summary(ctx, rows)
    write_charts(ctx, cost)
    write_frontier(ctx)  # each service's serving frontier (issue 44)
    write_solver(ctx, cost, rows)
    write_scenarios(ctx)  # a two-stage plan only
    write_assumptions(ctx)  # last: the other sheets may add derived rows
    wb = ctx.wb
    wb.calculation.fullCalcOnLoad = True
    wb.properties.title = _text(f"GPU procurement plan: {plan.problem_name}")
    wb.properties.creator = _text(f"gpu-planner {plan.planner_version}")
    return wb


def write_workbook(plan: Plan, path: str | Path, margins: Sequence[str] | None = None) -> None:
    """Write the report for ``plan`` to ``path`` atomically.

    The whole workbook is built in memory first; then it goes to a temporary file beside
    ``path`` that is renamed over it, so a failure at any point leaves the old file intact.
    The file gets ordinary permissions (not the 0600 of a bare temporary file).
    """
    # every formula's value is stored too: pandas and previews read numbers, not blanks
    atomic_write_bytes(path, save_with_values(build_workbook(plan, margins)))
