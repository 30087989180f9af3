"""What every sheet writer of the Excel report shares: the sheet names and their order, the
workbook with its empty sheets, the plan, the Assumptions rows every formula input is looked
up in (and added to), the hours-per-month and finance cells, and the input lookups (site,
per-GPU, budget) the sheets' formulas read. Built once by :func:`new_context`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from openpyxl import Workbook
from openpyxl.worksheet.worksheet import Worksheet

from planner.plan.data import Plan
from planner.reports.excel.assumptions import (
    _ARow,
    _Assumptions,
    _build_assumptions,
    _finance_cells,
    _FinanceCells,
    _same,
)
from planner.reports.excel.cells import _finite
from planner.reports.excel.refs import EXISTING, SCENARIOS
from planner.reports.plan_facts import has_paths

SHEETS = (
    "Summary",
    "Purchases",
    "Rentals",
    "Workloads",
    "Allocation",
    "Cash flow",
    "P&L",
    "Fleet",
    "Assumptions",
    "Charts",
    "Frontier",  # planner.reports.excel.frontier_sheet
    "Solver",
)

_OWN_FIGURE = "this row (differs from Assumptions: solver's figure)"


def has_existing(plan: Plan) -> bool:
    """Whether the plan starts from assets the team had (fleet.owned, fleet.contracts)."""
    return bool(plan.existing or plan.commitments or plan.sales)


@dataclass
class Ctx:
    """The plan, its workbook and sheets, and the Assumptions every formula input lives on."""

    plan: Plan
    margins: list[str]
    a: _Assumptions
    wb: Workbook
    ws: dict[str, Worksheet]
    H: str  # the hours-per-month cell
    finance: _FinanceCells
    # price paths and lead times in force (planner.reports.plan_facts.has_paths): rental
    # and purchase prices follow them, purchases show order, service and capex months
    paths: bool = False
    month_at: dict[str, int] = field(default_factory=dict)  # month label -> index from 0
    capex_at: int | None = None  # Assumptions row of finance / capex_at (paths only)

    @property
    def lead_cols(self) -> bool:
        """Whether Purchases has the order, lead and capex-month columns (and Cash flow
        reads the capex month from them)."""
        return self.paths and bool(self.plan.purchases)

    @property
    def has_existing_sheet(self) -> bool:
        return EXISTING in self.ws

    # -- inputs -----------------------------------------------------------------------
    def site(self, keys: Sequence[str], unit: str) -> str:
        return self.a.ref("site", keys, fallback=None, unit=unit, source="")

    def gpu_in(self, gpu: str, key: str, unit: str) -> str:
        return self.a.ref(f"gpu:{gpu}", [key], fallback=None, unit=unit, source="")

    def budget_cell(self) -> str | None:
        i = self.a.find(["budget"], ["capex_usd", "capex_budget_usd", "capex"])
        if i is None:
            b = self.plan.totals.capex_budget_usd
            if b is None or not _finite(b):
                return None
            i = self.a.add(
                _ARow(
                    "budget", "capex_usd", b, "USD", "plan.totals.capex_budget_usd", note="derived"
                )
            )
        return self.a.cell(i)

    def total_budget_cell(self) -> str | None:
        if self.plan.totals.total_budget_usd is None or not _finite(
            self.plan.totals.total_budget_usd
        ):
            return None
        i = self.a.find(["budget"], ["total_usd", "total_budget_usd"])
        if i is None:
            i = self.a.add(
                _ARow(
                    "budget",
                    "total_usd",
                    self.plan.totals.total_budget_usd,
                    "USD",
                    "plan.totals.total_budget_usd",
                    note="derived",
                )
            )
        return self.a.cell(i)


def _sheets(plan: Plan) -> tuple[Workbook, dict[str, Worksheet]]:
    """The workbook with every sheet of the report, empty, in order."""
    wb = Workbook()
    ws0 = wb.active
    ws0.title = SHEETS[0]
    ws = {SHEETS[0]: ws0}
    for name in SHEETS[1:]:
        ws[name] = wb.create_sheet(name)
    if has_existing(plan):  # after Fleet; absent from a plan from an empty datacenter
        at = wb.sheetnames.index("Fleet") + 1
        ws[EXISTING] = wb.create_sheet(EXISTING, at)
    if plan.scenarios:  # a two-stage plan: beside page 1, whose risk sentences it backs
        ws[SCENARIOS] = wb.create_sheet(SCENARIOS, 1)
    return wb, ws


def new_context(plan: Plan, margins: Sequence[str] | None = None) -> Ctx:
    """The shared state of one workbook build: Assumptions first, then the empty sheets."""
    a = _build_assumptions(plan)
    wb, ws = _sheets(plan)
    h = [
        i
        for i, r in enumerate(a.rows)
        if r.key == "hours_per_month" and _same(r.value, plan.hours_per_month)
    ]
    H = a.cell(h[0])  # _build_assumptions guarantees one
    finance = _finance_cells(a, plan)
    ctx = Ctx(plan, list(margins or []), a, wb, ws, H, finance)
    ctx.month_at = {m: t for t, m in enumerate(plan.months)}
    ctx.paths = has_paths(plan)
    if ctx.lead_cols:
        ctx.capex_at = _capex_at_row(a, plan)
    return ctx


def _capex_at_row(a: _Assumptions, plan: Plan) -> int:
    """The Assumptions row of ``finance`` / ``capex_at``; a plan without it gets a derived
    row saying what its purchases do (paid in service while ordered before: delivery)."""
    for i, r in enumerate(a.rows):
        if r.group == "finance" and r.key == "capex_at" and r.value in ("order", "delivery"):
            return i
    late = [p for p in plan.purchases if p.order_month != p.month]
    mode = "delivery" if late and all(p.paid_month == p.month for p in late) else "order"
    source = "the plan's purchases: order = capex paid at the order; delivery = in service"
    return a.add(_ARow("finance", "capex_at", mode, "", source, note="derived"))
