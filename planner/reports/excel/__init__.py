"""The Excel report: a finance-ready workbook built from a :class:`planner.plan.data.Plan`.

Every cost in the workbook is a live formula that reproduces the solver's cost definitions
from the figures on the ``Assumptions`` sheet, so finance can change a power price or a unit
price in ONE cell and every total follows:

* ``Purchases``: extended cost = servers x chassis price + GPUs x card price; both prices
  reference ``Assumptions`` (``gpu:<id>`` / ``chassis_usd``, ``purchase_usd``). A partly
  filled server gets more cards in later rows with 0 servers.
* ``Rentals``: cost = GPU-hours x rate (the rate references ``offer:<id>`` /
  ``usd_per_gpu_hour``). Reserved commitments are rows of kind ``reserved``.
* Price paths and lead times (a plan that has them, :mod:`.paths`): a rental's rate = the
  offer's first-month price x (1 + ``gpu:<id>`` / ``rent_change_per_year``)^(months from
  the start / 12), a reserved row at its reservation's start month; card and chassis prices
  x (1 + ``buy_change_per_year``)^(order month / 12); ``Purchases`` shows the in-service
  month, the lead (``lead_months``), the order month and the month the capex is paid
  (``finance`` / ``capex_at``), which ``Cash flow`` reads.
* ``Fleet``: IT kW = (owned x tdp_w + servers x host_w) / 1000; power = pue x usd/kWh x
  (H x (servers x host_w + owned x idle_w) + busy GPU-h x (tdp_w - idle_w)) / 1000; hosting =
  owned x usd/GPU-month + IT kW x colocation usd/kW-month, per GPU type and month.
* ``Cash flow``: one row per month, SUMIFS over the three detail sheets, total, running total,
  capex budget headroom, and the month's discount factor ``1/(1+rate)^(t/12)`` and present
  value; ``Summary`` references its total row.
* ``P&L``: per plan year (12 months from the horizon start) the cash view (capex, opex,
  resale inflow at the horizon end, present value) beside the P&L view (straight-line
  depreciation + power + hosting + rentals - gain on sale), and a schedule per purchase:
  age at the horizon end, resale share (a formula over the resale mode and the GPU's curve
  points on ``Assumptions``), resale value, book value, depreciation per year. Discount rate,
  depreciation years, resale mode and curve points are yellow inputs. ``Summary`` shows the
  present value (NPV), resale value and book value from here.

Months are written as real dates (first day of the month, shown ``yyyy-mm``) so that SUMIFS
matches them exactly in Excel and LibreOffice alike. Text from the problem (workload names,
sources, ids) is always written as text, never as a formula.

The workbook-level names ``total_cost_usd``, ``capex_usd``, ``npv_usd``, ``residual_value_usd``
and ``book_value_usd`` point at the headline cells on Summary.

The package holds one module per sheet (or group of closely related sheets), each writing
its sheet and returning the rows later sheets reference (:mod:`.refs`); :mod:`.workbook`
calls them in order.
"""

from planner.reports.excel.cells import (
    FIRST_ROW,
    FONT_NAME,
    HEADER_ROW,
    MONTH_FMT,
    NUM0,
    NUM1,
    NUM2,
    NUMG,
    PCT,
    PCT2,
    USD,
    USD_CENTS,
    USD_RATE,
    F,
    month_date,
)
from planner.reports.excel.context import SHEETS, has_existing
from planner.reports.excel.refs import (
    CF_CAPEX,
    CF_COMMITTED,
    CF_HOSTING,
    CF_PLAN_YEAR,
    CF_POWER,
    CF_PV,
    CF_RENTALS,
    CF_SALES,
    EXISTING,
    EXISTING_MARK,
    FL_HOSTING,
    FL_POWER,
    P_CARD,
    P_CHASSIS,
    P_EXTENDED,
    P_GPUS,
    P_SERVERS,
    P_SOLVER,
)
from planner.reports.excel.workbook import build_workbook, write_workbook

__all__ = [
    "CF_CAPEX",
    "CF_COMMITTED",
    "CF_HOSTING",
    "CF_PLAN_YEAR",
    "CF_POWER",
    "CF_PV",
    "CF_RENTALS",
    "CF_SALES",
    "EXISTING",
    "EXISTING_MARK",
    "FIRST_ROW",
    "FL_HOSTING",
    "FL_POWER",
    "FONT_NAME",
    "HEADER_ROW",
    "MONTH_FMT",
    "NUM0",
    "NUM1",
    "NUM2",
    "NUMG",
    "PCT",
    "PCT2",
    "P_CARD",
    "P_CHASSIS",
    "P_EXTENDED",
    "P_GPUS",
    "P_SERVERS",
    "P_SOLVER",
    "SHEETS",
    "USD",
    "USD_CENTS",
    "USD_RATE",
    "F",
    "build_workbook",
    "has_existing",
    "month_date",
    "write_workbook",
]
