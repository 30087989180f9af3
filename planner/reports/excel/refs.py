"""Where the Excel report's sheets read each other: the column numbers other sheets
reference, the ``Existing`` sheet's name and marker, and the small typed records each sheet
writer returns (its last data row, its total row, the rows of its blocks) so that the sheets
built after it can point their formulas at the right cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from planner.reports.excel.tables import _col_range

# columns of the Purchases sheet other sheets read (1-based)
P_SERVERS, P_GPUS, P_CARD, P_CHASSIS, P_EXTENDED, P_SOLVER = 3, 4, 5, 6, 8, 9
# with price paths and lead times: months from the start to service, lead, order, capex
P_SERVICE_INDEX, P_LEAD, P_ORDER_INDEX, P_CAPEX_INDEX = 12, 13, 14, 16
# columns of the Fleet sheet other sheets read
FL_POWER, FL_HOSTING = 13, 14
# columns of the Cash flow sheet the P&L reads: capex, power, hosting, rentals, plan year, PV
CF_CAPEX, CF_POWER, CF_HOSTING, CF_RENTALS, CF_PLAN_YEAR, CF_PV = 2, 3, 4, 5, 14, 16
CF_COMMITTED, CF_SALES = 17, 18
# the sheet of what the team had before the plan (only in plans that have something)
EXISTING = "Existing"
EXISTING_MARK = "existing (before the plan)"
# the sheet of a two-stage plan's scenarios (only in plans that have them)
SCENARIOS = "Scenarios"

_KEY_COL = 13  # hidden column M: exact-match SUMIFS keys of the row's name


@dataclass
class _Block:
    """Rows ``first..last`` of a table on the Existing sheet (``last < first``: no rows)."""

    first: int = 0
    last: int = -1

    def col(self, c: int) -> str:
        return _col_range(EXISTING, c, self.first, self.last)


class DetailRows(NamedTuple):
    """Last data row of each detail table (at least FIRST_ROW: a placeholder row if empty)."""

    purchases: int
    rentals: int
    fleet: int


class ExistingRows(NamedTuple):
    """The three tables of the Existing sheet: GPUs owned, GPUs sold, contracts."""

    owned: _Block
    sales: _Block
    contracts: _Block


class CashFlowRows(NamedTuple):
    """The last month row of Cash flow and its total row."""

    last: int
    total: int


class _PnlRows(NamedTuple):
    """Rows of the P&L sheet other sheets read: the year table's total, the schedule's rows."""

    year_total: int
    s_first: int
    s_last: int

    @property
    def s_total(self) -> int:
        return self.s_last + 1


class _CostRows(NamedTuple):
    """Rows of the Summary cost table that later blocks, the defined names and the charts use."""

    total: int
    capex: int
    power: int
    hosting: int
    rentals: int
    opex: int

    @property
    def npv(self) -> int:  # the finance lines follow opex: rate, NPV, resale, book value
        return self.opex + 2

    @property
    def residual(self) -> int:
        return self.opex + 3

    @property
    def book(self) -> int:
        return self.opex + 4


class SheetRows(NamedTuple):
    """What the detail sheets returned, for the Summary and Solver sheets that read them all."""

    details: DetailRows
    cash: CashFlowRows
    pnl: _PnlRows
