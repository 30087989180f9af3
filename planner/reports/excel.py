"""The Excel report: a finance-ready workbook built from a :class:`planner.plan.data.Plan`.

Every cost in the workbook is a live formula that reproduces the solver's cost definitions
from the figures on the ``Assumptions`` sheet, so finance can change a power price or a unit
price in ONE cell and every total follows:

* ``Purchases``: extended cost = servers x chassis price + GPUs x card price; both prices
  reference ``Assumptions`` (``gpu:<id>`` / ``chassis_usd``, ``purchase_usd``). A partly
  filled server gets more cards in later rows with 0 servers.
* ``Rentals``: cost = GPU-hours x rate (the rate references ``offer:<id>`` /
  ``usd_per_gpu_hour``). Reserved commitments are rows of kind ``reserved``.
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
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE, Cell
from openpyxl.chart import BarChart, Reference
from openpyxl.chart.label import DataLabelList
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.pagebreak import Break
from openpyxl.worksheet.table import Table, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet

from planner.base.files import atomic_write_bytes
from planner.plan.data import Plan, Purchase, WorkloadResult
from planner.reports.plan_facts import (
    NOT_MODELED,
    decision_sentences,
    fleet_series,
    gpu_hours_used,
    peak_gpus,
    rate_text,
    rent_groups,
    rented_peak_by_workload,
    years,
)
from planner.reports.xlsx_cache import save_with_values

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
    "Solver",
)

FONT_NAME = "Arial"  # metric-compatible with Liberation Sans, so widths hold in LibreOffice
USD = '"$"#,##0;[Red]-"$"#,##0'
USD_CENTS = '"$"#,##0.00;[Red]-"$"#,##0.00'
USD_RATE = '"$"#,##0.000'
NUM0 = "#,##0"
NUM1 = "#,##0.0"
NUM2 = "#,##0.00"
NUMG = "#,##0.####"
PCT = "0.0%"
PCT2 = "0.00%"
MONTH_FMT = "yyyy-mm"

HEADER_ROW = 4  # header row of the table on every detail sheet
FIRST_ROW = HEADER_ROW + 1

_F_BASE = Font(name=FONT_NAME, size=10)
_F_BOLD = Font(name=FONT_NAME, size=10, bold=True)
_F_TITLE = Font(name=FONT_NAME, size=15, bold=True, color="1F3864")
_F_SUB = Font(name=FONT_NAME, size=9, italic=True, color="595959")
_F_HEAD = Font(name=FONT_NAME, size=10, bold=True, color="FFFFFF")
_F_SECTION = Font(name=FONT_NAME, size=11, bold=True, color="1F3864")
_F_BIG = Font(name=FONT_NAME, size=13, bold=True)
_F_WARN = Font(name=FONT_NAME, size=10, bold=True, color="C00000")
_FILL_HEAD = PatternFill("solid", fgColor="1F3864")
_FILL_TOTAL = PatternFill("solid", fgColor="D9E1F2")
_FILL_INPUT = PatternFill("solid", fgColor="FFF2CC")  # editable inputs (Assumptions values)
_FILL_KEY = PatternFill("solid", fgColor="E2EFDA")  # headline figures
_THIN = Side(style="thin", color="BFBFBF")
_BORDER = Border(left=_THIN, right=_THIN, top=_THIN, bottom=_THIN)
_TOP = Border(top=Side(style="thin", color="000000"))
_WRAP = Alignment(wrap_text=True, vertical="top")
_TOP_ALIGN = Alignment(vertical="top")
_HEAD_ALIGN = Alignment(wrap_text=True, vertical="center", horizontal="center")

_FORMULA_LIKE = ("=", "+", "-", "@", "\t", "\r")
_MAX_TEXT = 32767


@dataclass(frozen=True)
class F:
    """A formula. Only instances of this class are ever written as formulas."""

    text: str

    def __post_init__(self) -> None:
        if not self.text.startswith("="):
            raise ValueError(f"a formula starts with '=': {self.text!r}")


def _sheet_ref(sheet: str, cell: str) -> str:
    """``'Cash flow'!$B$5``: a sheet-qualified reference, quoted when needed.

    >>> _sheet_ref("Cash flow", "$B$5")
    "'Cash flow'!$B$5"
    >>> _sheet_ref("Fleet", "K5")
    'Fleet!K5'
    """
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z_.]*", sheet) is not None
    name = sheet if plain else "'" + sheet.replace("'", "''") + "'"
    return f"{name}!{cell}"


def _text(value: Any) -> str:
    """Any value as safe cell text: no control characters, not longer than Excel allows.

    >>> _text("a\\x00b")
    'ab'
    """
    s = value if isinstance(value, str) else str(value)
    s = ILLEGAL_CHARACTERS_RE.sub("", s)
    return s[:_MAX_TEXT]


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def month_date(label: str) -> dt.date | None:
    """``"2027-04"`` -> ``date(2027, 4, 1)``; None if the label is not ``YYYY-MM``.

    >>> month_date("2027-04")
    datetime.date(2027, 4, 1)
    >>> month_date("April") is None
    True
    """
    m = re.fullmatch(r"(\d{4})-(\d{2})", str(label))
    if not m or not 1 <= int(m.group(2)) <= 12:
        return None
    return dt.date(int(m.group(1)), int(m.group(2)), 1)


def _put(
    ws: Worksheet,
    row: int,
    col: int,
    value: Any,
    fmt: str | None = None,
    font: Font | None = None,
    fill: PatternFill | None = None,
    align: Alignment | None = None,
    border: Border | None = None,
) -> Cell:
    """Write one cell. Strings are always text (never formulas); ``F`` is a formula."""
    cell = ws.cell(row=row, column=col)
    if isinstance(value, F):
        cell.value = value.text
    elif value is None:
        cell.value = None
    elif isinstance(value, bool):
        cell.value = value
    elif isinstance(value, (int, float)):
        if math.isfinite(value):
            cell.value = value
        else:
            cell.value = "n/a"
            cell.data_type = "s"
    elif isinstance(value, (dt.date, dt.datetime)):
        cell.value = value
        fmt = fmt or MONTH_FMT
    else:
        s = _text(value)
        cell.value = s
        cell.data_type = "s"  # openpyxl treats a string starting with "=" as a formula
        if s.startswith(_FORMULA_LIKE):
            cell.quotePrefix = True  # and so does Excel when the cell is edited
    cell.font = font or _F_BASE
    if fmt:
        cell.number_format = fmt
    if fill:
        cell.fill = fill
    if align:
        cell.alignment = align
    if border:
        cell.border = border
    return cell


def _month_value(label: str) -> Any:
    d = month_date(label)
    return d if d is not None else label


def _num(x: float | None) -> Any:
    return x if _finite(x) else "n/a"


# ----------------------------------------------------------------------------- assumptions


@dataclass
class _ARow:
    group: str
    key: str
    value: Any
    unit: str = ""
    source: str = ""
    as_of: str = ""
    note: str = ""  # "derived" / "missing" rows added by the report


@dataclass
class _Assumptions:
    """The rows of the Assumptions sheet and the cell each formula input lives in."""

    rows: list[_ARow] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    used: set[int] = field(default_factory=set)  # rows referenced by formulas

    def __post_init__(self) -> None:
        self._value_col = "C"

    def add(self, row: _ARow) -> int:
        self.rows.append(row)
        return len(self.rows) - 1

    def cell(self, idx: int) -> str:
        self.used.add(idx)
        return _sheet_ref("Assumptions", f"${self._value_col}${FIRST_ROW + idx}")

    def find(self, groups: Sequence[str] | None, keys: Sequence[str]) -> int | None:
        """First row with a numeric value in one of ``groups`` (None = any) with one of ``keys``."""
        for key in keys:
            for i, r in enumerate(self.rows):
                if r.key == key and (groups is None or r.group in groups) and _finite(r.value):
                    return i
        return None

    def ref(
        self,
        group: str,
        keys: Sequence[str],
        *,
        fallback: float | None,
        unit: str,
        source: str,
        groups: Sequence[str] | None = None,
    ) -> str:
        """The cell of an input; adds a derived (or, lacking a fallback, missing) row if absent."""
        i = self.find(groups if groups is not None else [group], keys)
        if i is None:
            if fallback is not None and _finite(fallback):
                i = self.add(_ARow(group, keys[0], fallback, unit, source, note="derived"))
            else:
                i = self.add(
                    _ARow(
                        group,
                        keys[0],
                        0.0,
                        unit,
                        "MISSING from plan.assumptions: enter the figure",
                        note="missing",
                    )
                )
                self.missing.append(f"{group} / {keys[0]}")
        return self.cell(i)

    def ref_text(self, group: str, key: str, fallback: str, source: str) -> str:
        """The cell of a text input (such as the resale mode); adds a derived row if absent."""
        for i, r in enumerate(self.rows):
            if r.group == group and r.key == key and isinstance(r.value, str):
                return self.cell(i)
        return self.cell(self.add(_ARow(group, key, fallback, "", source, note="derived")))

    def ref_equal(self, group: str, key: str, value: float, unit: str, source: str) -> str | None:
        """The cell of ``group/key`` if it holds ``value`` (adding it if absent); None if it differs."""
        i = self.find([group], [key])
        if i is None:
            i = self.add(_ARow(group, key, value, unit, source, note="derived"))
        v = self.rows[i].value
        if math.isclose(float(v), float(value), rel_tol=1e-9, abs_tol=1e-9):
            return self.cell(i)
        return None


def _same(a: Any, b: Any) -> bool:
    if _finite(a) and _finite(b):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _build_assumptions(plan: Plan) -> _Assumptions:
    """The plan's assumptions, then the plan's own metadata unless an assumption already says it."""
    a = _Assumptions()
    for x in plan.assumptions:
        a.add(_ARow(x.group, x.key, x.value, x.unit, x.source, x.as_of))
    have = {(x.group, x.key): x.value for x in plan.assumptions}
    meta: list[tuple[str, Any, str, tuple[str, str]]] = [
        ("status", plan.status, "", ("solver", "status")),
        ("solver", plan.solver, "", ("solver", "solver")),
        ("gap", plan.gap if _finite(plan.gap) else "n/a", "", ("solver", "gap")),
        ("solve_seconds", plan.solve_seconds, "s", ("solver", "solve_seconds")),
        (
            "objective_usd",
            plan.objective_usd if _finite(plan.objective_usd) else "n/a",
            "USD",
            ("solver", "objective_usd"),
        ),
        ("planner_version", plan.planner_version, "", ("solver", "planner_version")),
        ("problem_name", plan.problem_name, "", ("problem", "name")),
        ("problem_file", plan.problem_file, "", ("problem", "file")),
        ("problem_sha256", plan.problem_sha256, "", ("problem", "sha256")),
        ("horizon_start", plan.horizon_start, "", ("problem", "horizon_start")),
        ("months", len(plan.months), "months", ("problem", "months")),
    ]
    if plan.message:
        meta.append(("message", plan.message, "", ("solver", "message")))
    for key, value, unit, alias in meta:
        if alias in have and _same(have[alias], value):
            continue
        a.add(_ARow("plan", key, value, unit, "plan (solver output)", note="meta"))
    i = a.find(None, ["hours_per_month"])
    if i is None or not _same(a.rows[i].value, plan.hours_per_month):
        a.add(
            _ARow(
                "plan",
                "hours_per_month",
                plan.hours_per_month,
                "h/month",
                "plan.hours_per_month",
                note="derived",
            )
        )
    return a


# ----------------------------------------------------------------------------- sheet helpers


@dataclass(frozen=True)
class _Col:
    header: str
    width: float
    fmt: str | None = None
    wrap: bool = False


def _title(ws: Worksheet, title: str, subtitle: str) -> None:
    _put(ws, 1, 1, title, font=_F_TITLE)
    _put(ws, 2, 1, subtitle, font=_F_SUB)
    ws.row_dimensions[1].height = 22


def _head_cells(ws: Worksheet, row: int, names: Sequence[str], start_col: int = 1) -> None:
    for j, name in enumerate(names):
        _put(
            ws,
            row,
            start_col + j,
            name,
            font=_F_HEAD,
            fill=_FILL_HEAD,
            align=_HEAD_ALIGN,
            border=_BORDER,
        )


def _header(ws: Worksheet, row: int, cols: Sequence[_Col], start_col: int = 1) -> None:
    _head_cells(ws, row, [c.header for c in cols], start_col)
    ws.row_dimensions[row].height = 30


def _section(ws: Worksheet, row: int, title: str) -> None:
    _put(ws, row, 1, title, font=_F_SECTION)


def _total_row(ws: Worksheet, row: int, last: int, sums: Sequence[tuple[int, str]]) -> None:
    """A "Total" row: the SUM of rows FIRST_ROW..last in each of the ``(column, format)``."""
    _put(ws, row, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL)
    for c, fmt in sums:
        L = get_column_letter(c)
        _put(ws, row, c, F(f"=SUM({L}{FIRST_ROW}:{L}{last})"), fmt, _F_BOLD, _FILL_TOTAL)


def _widths(ws: Worksheet, cols: Sequence[_Col], start_col: int = 1) -> None:
    for j, c in enumerate(cols):
        letter = get_column_letter(start_col + j)
        ws.column_dimensions[letter].width = max(ws.column_dimensions[letter].width or 0, c.width)


def _fit(width: float, texts: Iterable[Any], cap: float = 48) -> float:
    """A text column's width: its longest entry, between ``width`` and ``cap``."""
    longest = max((len(str(t)) for t in texts), default=0)
    return min(cap, max(width, longest * 1.1 + 2))


def _rows(
    ws: Worksheet,
    first: int,
    cols: Sequence[_Col],
    rows: Sequence[Sequence[Any]],
    start_col: int = 1,
) -> int:
    """Write data rows below a header; returns the last row written (first - 1 if none)."""
    r = first - 1
    for r, values in enumerate(rows, start=first):
        lines = 1
        for j, (c, v) in enumerate(zip(cols, values, strict=True)):
            _put(
                ws,
                r,
                start_col + j,
                v,
                fmt=c.fmt,
                align=_WRAP if c.wrap else _TOP_ALIGN,
                border=_BORDER,
            )
            if c.wrap and isinstance(v, str):
                lines = max(lines, _lines(v, c.width))
        if lines > 1:
            ws.row_dimensions[r].height = 13 * lines + 1
    return r


def _lines(text: str, width: float) -> int:
    """Lines a wrapped text takes in a column ``width`` characters wide (a rough estimate).

    >>> _lines("abc", 10), _lines("x" * 25, 10)
    (1, 3)
    >>> _lines("a\\nb", 10)
    2
    """
    per_line = max(1, int(width * 1.3) - 1)
    return sum(max(1, math.ceil(len(part) / per_line)) for part in text.split("\n"))


def _table(
    ws: Worksheet, name: str, first_col: int, last_col: int, header_row: int, last_row: int
) -> None:
    ref = f"{get_column_letter(first_col)}{header_row}:{get_column_letter(last_col)}{max(last_row, header_row + 1)}"
    t = Table(displayName=name, ref=ref)
    t.tableStyleInfo = TableStyleInfo(
        name="TableStyleLight9", showRowStripes=True, showColumnStripes=False
    )
    ws.add_table(t)


def _print_setup(ws: Worksheet, title_rows: str | None = None, freeze: str | None = None) -> None:
    ws.page_setup.orientation = "landscape"
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.print_options.horizontalCentered = True
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.page_margins.top = ws.page_margins.bottom = 0.6
    ws.oddFooter.left.text = "&A"
    ws.oddFooter.left.font = FONT_NAME
    ws.oddFooter.left.size = 8
    ws.oddFooter.right.text = "Page &P of &N"
    ws.oddFooter.right.font = FONT_NAME
    ws.oddFooter.right.size = 8
    if title_rows:
        ws.print_title_rows = title_rows
    if freeze:
        ws.freeze_panes = freeze


def _col_range(sheet: str, col: int, first: int, last: int) -> str:
    letter = get_column_letter(col)
    return _sheet_ref(sheet, f"${letter}${first}:${letter}${last}")


def _sumifs(
    sheet: str, sum_col: int, first: int, last: int, crit: Sequence[tuple[int, str]]
) -> str:
    """SUMIFS over rows ``first..last`` of ``sheet`` (never an empty range)."""
    last = max(last, first)
    parts = [_col_range(sheet, sum_col, first, last)]
    for col, criterion in crit:
        parts += [_col_range(sheet, col, first, last), criterion]
    return f"SUMIFS({','.join(parts)})"


def _q(s: str) -> str:
    """A string literal for a formula (quotes doubled).

    >>> print(_q('a"b'))
    "a""b"
    """
    return '"' + s.replace('"', '""') + '"'


# ----------------------------------------------------------------------------- the writer


_OWN_FIGURE = "this row (differs from Assumptions: solver's figure)"

# columns of the Purchases sheet other sheets read (1-based)
P_SERVERS, P_GPUS, P_CARD, P_CHASSIS, P_EXTENDED, P_SOLVER = 3, 4, 5, 6, 8, 9
# columns of the Fleet sheet other sheets read
FL_POWER, FL_HOSTING = 13, 14
# columns of the Cash flow sheet the P&L reads: capex, power, hosting, rentals, plan year, PV
CF_CAPEX, CF_POWER, CF_HOSTING, CF_RENTALS, CF_PLAN_YEAR, CF_PV = 2, 3, 4, 5, 14, 16
CF_COMMITTED, CF_SALES = 17, 18
# the sheet of what the team had before the plan (only in plans that have something)
EXISTING = "Existing"
EXISTING_MARK = "existing (before the plan)"


@dataclass
class _Block:
    """Rows ``first..last`` of a table on the Existing sheet (``last < first``: no rows)."""

    first: int = 0
    last: int = -1

    def col(self, c: int) -> str:
        return _col_range(EXISTING, c, self.first, self.last)


def has_existing(plan: Plan) -> bool:
    """Whether the plan starts from assets the team had (fleet.owned, fleet.contracts)."""
    return bool(plan.existing or plan.commitments or plan.sales)


def _server_text(p: Purchase) -> str:
    """``pcie-8 (8 slots)``; a plan from before server types has none."""
    return f"{p.server} ({p.slots} slots)" if p.slots else p.server


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


_FLEET_DATA_ROW = 44  # header row of the fleet chart's data on Charts: below the charts of page 1


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


def _exact(text: str) -> str:
    """A SUMIFS criterion matching ``text`` exactly: a leading ``=`` so the text is never read
    as an operator, and ``~`` before Excel's wildcards ``* ? ~``. It is written as TEXT into a
    hidden key column (never into a formula: names come from the problem file).

    >>> print(_exact("a*b"))
    =a~*b
    """
    return "=" + re.sub(r"([*?~])", r"~\1", text)


_KEY_COL = 13  # hidden column M: exact-match SUMIFS keys of the row's name


def _workload_row(r: int, w: WorkloadResult, cost: F, share: F) -> list[Any]:
    per_m = F(f'=IF(J{r}>0,H{r}/J{r}*1000000,"")') if w.kind == "serve" else None
    return [
        w.name,
        w.kind,
        w.model,
        w.gpus,
        _config(w.config),
        ", ".join(w.gpu),
        "yes" if w.meets_target else "NO",
        cost,
        share,
        _num(w.tokens),
        per_m,
        _num(w.usd_per_1m_tokens) if w.usd_per_1m_tokens is not None else None,
    ]


def _cell_value(v: Any) -> Any:
    """An assumption's value as a cell holds it: numbers stay numbers, the rest becomes text."""
    if v is None:
        return ""
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    if isinstance(v, bool):
        return "true" if v else "false"
    if not isinstance(v, (int, float)):
        return str(v)
    return v


def _value_labels(numfmt: str) -> DataLabelList:
    """Data labels that show the value and nothing else."""
    labels = DataLabelList()
    labels.showVal = True
    for flag in ("showPercent", "showCatName", "showSerName", "showLegendKey", "showLeaderLines"):
        setattr(labels, flag, False)
    labels.numFmt = numfmt
    return labels


class _CostLine(NamedTuple):
    """One line of the Summary cost table: the live formula beside the solver's own figure."""

    label: str
    live: F
    solver: float
    where: str
    key: bool  # a headline figure: big font, highlighted


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


_RENTALS_LINE = "Rentals (on-demand, spot, reserved)"
_NPV_LINE = "Present value (NPV) of the cash, net of resale"
_RESIDUAL_LINE = "Resale value at the horizon end"
_BOOK_LINE = "Book value at the horizon end"


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


@dataclass(frozen=True)
class _FinanceCells:
    """The Assumptions cells of the finance inputs the discounting and the P&L read."""

    rate: str  # annual discount rate
    years: str  # straight-line depreciation life
    mode: str  # resale mode: curve | straight_line | none


def _finance_cells(a: _Assumptions, plan: Plan) -> _FinanceCells:
    """The finance inputs; a plan without them (written before issue 14) gets derived rows
    from its own fields: its discount rate, its resale mode, its depreciation life."""
    life = plan.depreciation[0].years if plan.depreciation else 5.0
    return _FinanceCells(
        rate=a.ref(
            "finance",
            ["discount_rate"],
            fallback=plan.discount_rate,
            unit="per year",
            source="plan.discount_rate",
        ),
        years=a.ref(
            "finance",
            ["depreciation_years"],
            fallback=life,
            unit="years",
            source="plan depreciation schedule (5 years if none)",
        ),
        mode=a.ref_text("finance", "residual", plan.residual_mode, "plan.residual_mode"),
    )


class _PnlRows(NamedTuple):
    """Rows of the P&L sheet other sheets read: the year table's total, the schedule's rows."""

    year_total: int
    s_first: int
    s_last: int

    @property
    def s_total(self) -> int:
        return self.s_last + 1


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


_CURVE_KEY = re.compile(r"residual_share_(\d+)m")


def _curve_points(a: _Assumptions, gpu: str) -> list[tuple[int, int]]:
    """(age in months, Assumptions row) of each point of a GPU's resale curve, by age."""
    out = []
    for i, r in enumerate(a.rows):
        m = _CURVE_KEY.fullmatch(r.key)
        if r.group == f"gpu:{gpu}" and m and _finite(r.value):
            out.append((int(m[1]), i))
    return sorted(out)


def _curve_segment(points: list[tuple[int, int]], age: int) -> int:
    """Index k of the segment (xs[k-1], xs[k]) of ``[0] + ages`` the share at ``age`` is read
    on: the one around the age, the last one past the last point (as ResidualCurve.share_at)."""
    xs = [0] + [x for x, _ in points]
    if len(xs) == 2 or age <= xs[-1]:
        return max(1, next((j for j, x in enumerate(xs) if x >= age), len(xs) - 1))
    return len(xs) - 1


def _curve_value(a: _Assumptions, points: list[tuple[int, int]], age: int) -> float:
    """The curve's share at ``age`` from the figures on Assumptions (0 without a curve)."""
    if not points:
        return 0.0
    k = _curve_segment(points, age)
    xs = [0] + [x for x, _ in points]
    ys = [1.0] + [float(a.rows[i].value) for _, i in points]
    value = ys[k - 1] + (ys[k] - ys[k - 1]) * (age - xs[k - 1]) / (xs[k] - xs[k - 1])
    return min(1.0, max(0.0, value))


def _curve_formula(a: _Assumptions, points: list[tuple[int, int]], age: int, age_cell: str) -> str:
    """The curve's share at ``age`` as a formula over its points: linear between the two
    points around the age, from (0, 100 %), the last segment continued past the last point,
    between 0 and 1 (planner.inputs.catalog.ResidualCurve.share_at)."""
    if not points:
        return "0"
    k = _curve_segment(points, age)
    xs = [0] + [x for x, _ in points]
    y0 = "1" if k == 1 else a.cell(points[k - 2][1])
    y1 = a.cell(points[k - 1][1])
    x0, x1 = xs[k - 1], xs[k]
    return f"MAX(0,MIN(1,{y0}+({y1}-{y0})*({age_cell}-{x0})/{x1 - x0}))"


def _curve_source(gpu: str, points: list[tuple[int, int]]) -> str:
    if not points:
        return f"no resale curve for {gpu} on Assumptions: 0 under 'curve'"
    ages = ", ".join(f"{x}" for x, _ in points)
    return f"resale mode on Assumptions; curve gpu:{gpu} residual_share at {ages} months"


class _Writer:
    def __init__(self, plan: Plan, margins: Sequence[str] | None = None) -> None:
        self.plan = plan
        self.margins = list(margins or [])
        self.a = _build_assumptions(plan)
        self.wb = Workbook()
        ws0 = self.wb.active
        ws0.title = SHEETS[0]
        self.ws = {SHEETS[0]: ws0}
        for name in SHEETS[1:]:
            self.ws[name] = self.wb.create_sheet(name)
        if has_existing(plan):  # after Fleet; absent from a plan from an empty datacenter
            at = self.wb.sheetnames.index("Fleet") + 1
            self.ws[EXISTING] = self.wb.create_sheet(EXISTING, at)
        self.ex_owned, self.ex_sales, self.ex_contracts = _Block(), _Block(), _Block()
        self.gpus = self._gpu_ids()
        h = [
            i
            for i, r in enumerate(self.a.rows)
            if r.key == "hours_per_month" and _same(r.value, plan.hours_per_month)
        ]
        self.H = self.a.cell(h[0])  # _build_assumptions guarantees one
        self.finance = _finance_cells(self.a, plan)
        # last data row of each detail table (at least FIRST_ROW: a placeholder row if empty)
        self.p_last = self.r_last = self.f_last = self.cf_last = self.al_last = FIRST_ROW
        self.cf_total_row = 0
        self.pl = _PnlRows(0, 0, 0)  # set by pnl()

    def _gpu_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for g in (
            [p.gpu for p in self.plan.purchases]
            + [f.gpu for f in self.plan.fleet]
            + [r.gpu for r in self.plan.rentals]
        ):
            seen.setdefault(g, None)
        return list(seen)

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

    # -- Purchases --------------------------------------------------------------------
    def purchases(self) -> None:
        ws = self.ws["Purchases"]
        _title(
            ws,
            "Purchases",
            "Extended cost = servers x chassis price + GPUs x card price (a partly filled server "
            "gets more cards in a later row with 0 servers). Yellow prices on the Assumptions "
            "sheet drive every total.",
        )
        cols = self._purchase_cols()
        _header(ws, HEADER_ROW, cols)
        self.p_last = _rows(ws, FIRST_ROW, cols, self._purchase_rows())
        # a price typed into the row (the solver's, differing from Assumptions) is an input too
        for r in range(FIRST_ROW, self.p_last + 1):
            for c in (P_CARD, P_CHASSIS):
                if ws.cell(r, c).data_type != "f":
                    ws.cell(r, c).fill = _FILL_INPUT
        sums = [(P_SERVERS, NUM0), (P_GPUS, NUM0), (P_EXTENDED, USD), (P_SOLVER, USD)]
        _total_row(ws, self.p_last + 1, self.p_last, sums)
        _table(ws, "tblPurchases", 1, len(cols), HEADER_ROW, self.p_last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")

    def _purchase_cols(self) -> list[_Col]:
        return [
            _Col("GPU", _fit(10, [p.gpu for p in self.plan.purchases], 30)),
            _Col("Month", 10, MONTH_FMT),
            _Col("Servers", 8, NUM0),
            _Col("GPUs", 8, NUM0),
            _Col("Card USD / GPU", 14, USD),
            _Col("Chassis USD / server", 15, USD),
            _Col("Unit price USD / GPU", 14, USD),
            _Col("Extended cost USD", 16, USD),
            _Col("Solver's cost USD", 16, USD),
            _Col("Server type", _fit(14, [_server_text(p) for p in self.plan.purchases], 30)),
            _Col("Price source", 36, None, wrap=True),
        ]

    def _chassis_price(self, p: Purchase) -> tuple[str | None, float]:
        """The chassis price cell on Assumptions (None if the row's figure differs) and the
        row's own figure; a plan from before servers were units (no slots) carries its server
        share per GPU, which becomes the row's chassis price per server."""
        if p.slots:
            cell = self.a.ref_equal(
                f"gpu:{p.gpu}", "chassis_usd", p.chassis_usd, "USD/server", "plan purchase row"
            )
            return cell, p.chassis_usd
        per_server = (p.total_usd - p.count * p.gpu_usd) / p.nodes if p.nodes else 0.0
        return None, per_server

    def _purchase_rows(self) -> list[list[Any]]:
        rows: list[list[Any]] = []
        for r, p in enumerate(self.plan.purchases, start=FIRST_ROW):
            card = self.a.ref_equal(
                f"gpu:{p.gpu}", "purchase_usd", p.gpu_usd, "USD/GPU", "plan purchase row"
            )
            chassis, own_chassis = self._chassis_price(p)
            rows.append(
                [
                    p.gpu,
                    _month_value(p.month),
                    p.nodes,
                    p.count,
                    F(f"={card}") if card else p.gpu_usd,
                    F(f"={chassis}") if chassis else own_chassis,
                    F(f"=IF(D{r}>0,H{r}/D{r},H{r})"),
                    F(f"=C{r}*F{r}+D{r}*E{r}"),
                    p.total_usd,
                    _server_text(p),
                    "Assumptions" if card and chassis else _OWN_FIGURE,
                ]
            )
        if not rows:
            r = FIRST_ROW
            rows.append(
                [
                    "(no purchases)",
                    None,
                    0,
                    0,
                    0,
                    0,
                    F(f"=IF(D{r}>0,H{r}/D{r},H{r})"),
                    F(f"=C{r}*F{r}+D{r}*E{r}"),
                    0,
                    "",
                    "",
                ]
            )
        return rows

    # -- Rentals ----------------------------------------------------------------------
    def rentals(self) -> None:
        ws = self.ws["Rentals"]
        _title(
            ws,
            "Rentals",
            "Cost = GPU-hours x rate (USD per GPU-hour). Reserved commitments are rows of "
            "kind 'reserved' (workload '(reserved)'), paid whether used or not.",
        )
        cols = self._rental_cols()
        _header(ws, HEADER_ROW, cols)
        self.r_last = _rows(ws, FIRST_ROW, cols, self._rental_rows())
        _total_row(ws, self.r_last + 1, self.r_last, [(7, NUM0), (9, USD)])
        _table(ws, "tblRentals", 1, len(cols), HEADER_ROW, self.r_last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")

    def _rental_cols(self) -> list[_Col]:
        rentals = self.plan.rentals
        return [
            _Col("Provider", _fit(10, [x.provider for x in rentals], 24)),
            _Col("Offer", _fit(10, [x.offer for x in rentals], 48)),
            _Col("GPU", _fit(8, [x.gpu for x in rentals], 24)),
            _Col("Kind", 11),
            _Col("Month", 10, MONTH_FMT),
            _Col("Workload", _fit(12, [x.workload for x in rentals], 36)),
            _Col("GPU-hours", 12, NUM0),
            _Col("Rate USD / GPU-h", 12, USD_RATE),
            _Col("Cost USD", 14, USD),
            _Col("Rate source", 30, None, wrap=True),
        ]

    def _rental_rows(self) -> list[list[Any]]:
        rows: list[list[Any]] = []
        for r, x in enumerate(self.plan.rentals, start=FIRST_ROW):
            rate = self.a.ref_equal(
                f"offer:{x.offer}",
                "usd_per_gpu_hour",
                x.usd_per_gpu_hour,
                "USD/GPU-h",
                "plan rental row",
            )
            rows.append(
                [
                    x.provider,
                    x.offer,
                    x.gpu,
                    x.kind,
                    _month_value(x.month),
                    x.workload,
                    x.gpu_hours,
                    F(f"={rate}") if rate else x.usd_per_gpu_hour,
                    F(f"=G{r}*H{r}"),
                    "Assumptions" if rate else _OWN_FIGURE,
                ]
            )
        if not rows:
            r = FIRST_ROW
            rows.append(["(no rentals)", "", "", "", None, "", 0, 0, F(f"=G{r}*H{r}"), ""])
        return rows

    # -- Fleet ------------------------------------------------------------------------
    def fleet(self) -> None:
        ws = self.ws["Fleet"]
        _title(
            ws,
            "Fleet by GPU type and month",
            "IT kW = (owned x TDP W + servers x host W) / 1000.  Power USD = PUE x USD/kWh x "
            "(H x (servers x host W + owned x idle W) + busy GPU-h x (TDP W - idle W)) / 1000.  "
            "Hosting USD = owned x USD per GPU-month + IT kW x colocation USD per kW-month.",
        )
        cols = self._fleet_cols()
        _header(ws, HEADER_ROW, cols)
        self.f_last = _rows(ws, FIRST_ROW, cols, self._fleet_rows())
        sums = [(3, NUM0), (7, NUM0), (8, NUM0), (FL_POWER, USD), (FL_HOSTING, USD)]
        _total_row(ws, self.f_last + 1, self.f_last, sums)
        _table(ws, "tblFleet", 1, len(cols), HEADER_ROW, self.f_last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"C{FIRST_ROW}")

    def _fleet_cols(self) -> list[_Col]:
        return [
            _Col("GPU", _fit(10, [f.gpu for f in self.plan.fleet], 30)),
            _Col("Month", 10, MONTH_FMT),
            _Col("Bought", 8, NUM0),
            _Col("Owned", 8, NUM0),
            _Col("Servers", 8, NUM0),
            _Col("Reserved", 9, NUM0),
            _Col("Owned busy GPU-h", 14, NUM0),
            _Col("Rented GPU-h", 12, NUM0),
            _Col("Rented (avg GPUs)", 10, NUM1),
            _Col("Owned utilization", 11, PCT),
            _Col("IT kW (GPUs + hosts)", 11, NUM1),
            _Col("Peak kW at meter (solver)", 12, NUM1),
            _Col("Power USD", 13, USD),
            _Col("Hosting USD", 13, USD),
            _Col("Of owned: existing (fleet.owned)", 12, NUM0),
            _Col("Existing sold so far", 10, NUM0),
        ]

    def _host_watts(self, gpu: str, r: int) -> str:
        """Host watts of row ``r`` in the energy and the kW terms: servers x host W per server,
        existing GPUs (column O) their share of theirs (host W / slots); a plan from before
        server types (no ``host_w`` on Assumptions) counts host watts per owned GPU."""
        if self.a.find([f"gpu:{gpu}"], ["host_w"]) is not None:
            host = self.gpu_in(gpu, "host_w", "W/server")
            existing = any(f.existing or f.sold for f in self.plan.fleet)
            if existing and self.a.find([f"gpu:{gpu}"], ["server_slots"]) is not None:
                slots = self.gpu_in(gpu, "server_slots", "slots")
                return f"(E{r}*{host}+O{r}*{host}/{slots})"
            return f"E{r}*{host}"
        return f"D{r}*{self.gpu_in(gpu, 'host_w_per_gpu', 'W')}"

    def _fleet_rows(self) -> list[list[Any]]:
        pue = self.site(["pue"], "")
        kwh = self.site(["power_usd_per_kwh"], "USD/kWh")
        host = self.site(["hosting_usd_per_gpu_month"], "USD/GPU-month")
        colo = self.a.ref(
            "site",
            ["colo_usd_per_kw_month"],
            fallback=0.0,
            unit="USD/kW-month",
            source="not in the plan: no colocation charge by the kW",
        )
        H = self.H
        rows: list[list[Any]] = []
        for r, f in enumerate(self.plan.fleet, start=FIRST_ROW):
            tdp = self.gpu_in(f.gpu, "tdp_w", "W")
            idle = self.gpu_in(f.gpu, "idle_w", "W")
            host_w = self._host_watts(f.gpu, r)
            rows.append(
                [
                    f.gpu,
                    _month_value(f.month),
                    f.bought,
                    f.owned,
                    f.servers,
                    f.reserved,
                    f.owned_busy_gpu_hours,
                    f.rented_gpu_hours,
                    F(f"=H{r}/{H}"),
                    F(f"=IF(D{r}*{H}>0,G{r}/(D{r}*{H}),0)"),
                    F(f"=(D{r}*{tdp}+{host_w})/1000"),
                    f.power_kw,
                    F(f"={pue}*{kwh}*({H}*({host_w}+D{r}*{idle})+G{r}*({tdp}-{idle}))/1000"),
                    F(f"=D{r}*{host}+K{r}*{colo}"),
                    f.existing,
                    f.sold,
                ]
            )
        if not rows:
            rows.append(["(no fleet)", None, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        return rows

    # -- Existing ---------------------------------------------------------------------
    def existing(self) -> None:
        """GPUs owned before the plan, sales of them and contracts signed before it, each on
        its own rows marked as existing, with live formulas over Assumptions."""
        ws = self.ws.get(EXISTING)
        if ws is None:
            return
        _title(
            ws,
            "What the team had before the plan",
            "Existing GPUs carry no capex; they pay power and hosting on the Fleet sheet (column "
            "O). Sale = GPUs x catalog price x resale share at their age. Contract = GPUs x hours "
            "x rate, paid used or not. Cash flow reads the sale and contract columns.",
        )
        top = HEADER_ROW
        self.ex_owned = self._ex_block(ws, top, "tblExisting", _EX_OWNED, self._ex_owned_rows(top))
        top = max(self.ex_owned.last, top + 1) + 3
        _section(ws, top - 1, "Existing GPUs sold")
        self.ex_sales = self._ex_block(ws, top, "tblSales", _EX_SALES, self._ex_sale_rows(top))
        top = max(self.ex_sales.last, top + 1) + 3
        _section(ws, top - 1, "Contracts signed before the plan (months inside the horizon)")
        rows = self._ex_contract_rows(top)
        self.ex_contracts = self._ex_block(ws, top, "tblContracts", _EX_CONTRACTS, rows)
        for cols in (_EX_OWNED, _EX_SALES, _EX_CONTRACTS):
            _widths(ws, cols)

    def _ex_block(
        self, ws: Worksheet, top: int, name: str, cols: Sequence[_Col], rows: list[list[Any]]
    ) -> _Block:
        _header(ws, top, cols)
        if not rows:
            _put(ws, top + 1, 1, "(none)", border=_BORDER)
            return _Block(top + 1, top)
        last = _rows(ws, top + 1, cols, rows)
        _table(ws, name, 1, len(cols), top, last)
        return _Block(top + 1, last)

    def _ex_owned_rows(self, top: int) -> list[list[Any]]:
        rows = []
        for r, e in enumerate(self.plan.existing, start=top + 1):
            price = self.gpu_in(e.gpu, "purchase_usd", "USD")
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

    def _ex_sale_rows(self, top: int) -> list[list[Any]]:
        rows = []
        for r, x in enumerate(self.plan.sales, start=top + 1):
            points = _curve_points(self.a, x.gpu)
            share = _curve_formula(self.a, points, x.age_months, f"E{r}")
            price = self.gpu_in(x.gpu, "purchase_usd", "USD")
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

    def _ex_contract_rows(self, top: int) -> list[list[Any]]:
        rows: list[list[Any]] = []
        r = top
        for c in self.plan.commitments:
            rate = self.a.ref_equal(
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
                        F(f"={self.H}"),
                        F(f"={rate}") if rate else c.usd_per_gpu_hour,
                        F(f"=F{r}*G{r}*H{r}"),
                    ]
                )
        return rows

    def _existing_cash(self, crit: str, plan_values: tuple[float, float]) -> list[Any]:
        """Cash flow's contract and sale cells for the month in ``crit``: SUMIFS over the
        Existing sheet, or the plan's figures (0) when the plan has no existing assets."""
        if EXISTING not in self.ws:
            return list(plan_values)
        out: list[Any] = []
        for b, usd_col, month_col in ((self.ex_contracts, 9, 5), (self.ex_sales, 8, 3)):
            if b.last < b.first:
                out.append(0)
            else:
                out.append(F(f"=SUMIFS({b.col(usd_col)},{b.col(month_col)},{crit})"))
        return out

    def _existing_end(self, plan_value: float) -> str:
        """Existing GPUs' value at the horizon end: the sum over the Existing sheet."""
        b = self.ex_owned
        if EXISTING not in self.ws or b.last < b.first:
            return str(_num(plan_value))
        return f"SUM({b.col(13)})"

    # -- Cash flow --------------------------------------------------------------------
    def cash_flow(self) -> None:
        ws = self.ws["Cash flow"]
        _title(
            ws,
            "Cash flow by month",
            "Capex, power, hosting and rentals are SUMIFS over the Purchases, Fleet "
            "and Rentals sheets; headroom = capex budget - cumulative capex.",
        )
        cols = _CASH_FLOW_COLS
        _header(ws, HEADER_ROW, cols)
        budget = self.budget_cell()
        # a plan without months gets one zero row, so every reference stays valid
        rows = self._cash_flow_rows(budget) or [_no_months_row()]
        last = _rows(ws, FIRST_ROW, cols, rows)
        self.cf_total_row = last + 1
        self.cf_last = last
        _cash_flow_total(ws, last + 1, last, budget)
        _table(ws, "tblCashFlow", 1, len(cols), HEADER_ROW, last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"B{FIRST_ROW}")

    def _cash_flow_rows(self, budget: str | None) -> list[list[Any]]:
        solver_month = {m.month: m.total_usd for m in self.plan.cash_flow}
        fleet_cash = {m.month: (m.committed_usd, m.sales_usd) for m in self.plan.cash_flow}
        pl, rl, fl = self.p_last, self.r_last, self.f_last
        rate = self.finance.rate
        rows: list[list[Any]] = []
        for t, (r, m) in enumerate(enumerate(self.plan.months, start=FIRST_ROW)):
            crit = f"$A{r}"
            prev_run = f"G{r - 1}+" if r > FIRST_ROW else ""
            prev_cap = f"H{r - 1}+" if r > FIRST_ROW else ""
            rows.append(
                [
                    _month_value(m),
                    F("=" + _sumifs("Purchases", P_EXTENDED, FIRST_ROW, pl, [(2, crit)])),
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
                    *self._existing_cash(crit, fleet_cash.get(m, (0.0, 0.0))),
                ]
            )
        return rows

    # -- P&L --------------------------------------------------------------------------
    def pnl(self) -> None:
        """Per plan year the cash view and the P&L view side by side, then each purchase's
        depreciation, book value and resale value; all live over Cash flow, Purchases and
        the finance inputs on Assumptions."""
        ws = self.ws["P&L"]
        _title(
            ws,
            "P&L and present value by plan year",
            "Plan year = 12 months from the horizon start. Cash = capex + power + hosting + "
            "rentals - resale at the horizon end; present value discounts each month at the "
            "discount rate. P&L cost = depreciation + power + hosting + rentals - gain on sale.",
        )
        n_years = max(1, (len(self.plan.months) + 11) // 12)
        year_total = FIRST_ROW + n_years
        s_head = year_total + 3
        self.pl = _PnlRows(year_total, s_head + 1, s_head + max(1, len(self.plan.purchases)))
        cols = _PNL_YEAR_COLS
        _header(ws, HEADER_ROW, cols)
        last = _rows(ws, FIRST_ROW, cols, self._pnl_year_rows() or [_no_year_row()])
        sums = [(c, USD) for c in (*range(4, 15), 16, 17)]
        _total_row(ws, last + 1, last, sums)
        _put(ws, last + 1, 15, F(f"=M{last + 1}-N{last + 1}"), USD_CENTS, _F_BOLD, _FILL_TOTAL)
        _table(ws, "tblPnL", 1, len(cols), HEADER_ROW, last)
        self._depreciation_table(ws, s_head, n_years)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"B{FIRST_ROW}")

    def _pnl_year_rows(self) -> list[list[Any]]:
        fin, pl, T = self.finance, self.pl, len(self.plan.months)
        solver = {y.year: y.pnl_cost_usd for y in self.plan.years}
        bought_end = sum(d.residual_value_usd for d in self.plan.depreciation)
        existing_end = self.plan.totals.residual_value_usd - bought_end
        rows: list[list[Any]] = []
        for k in range(0, T, 12):
            r, y = FIRST_ROW + k // 12, k // 12 + 1
            last = k + 12 >= T
            crit = [(CF_PLAN_YEAR, f"$A{r}")]

            def cf(col: int, crit: list[tuple[int, str]] = crit) -> F:
                return F("=" + _sumifs("Cash flow", col, FIRST_ROW, self.cf_last, crit))

            dep_col = get_column_letter(_S_FIRST_YEAR + y - 1)
            sol = solver.get(y)
            rows.append(
                [
                    y,
                    _month_value(self.plan.months[k]),
                    _month_value(self.plan.months[min(T, k + 12) - 1]),
                    *(cf(c) for c in (CF_CAPEX, CF_POWER, CF_HOSTING, CF_RENTALS)),
                    # resale at the horizon end: purchases (live) + existing GPUs (the plan's)
                    F(f"=$H${pl.s_total}+{self._existing_end(existing_end)}") if last else 0,
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

    def _depreciation_table(self, ws: Worksheet, top: int, n_years: int) -> None:
        _section(ws, top - 1, "Depreciation, book value and resale value per purchase")
        gpus = [p.gpu for p in self.plan.purchases]
        cols = [_Col("GPU", _fit(7, gpus, 30)), *_SCHEDULE_COLS[1:]]
        cols += [_Col(f"Depreciation year {y} USD", 14, USD) for y in range(1, n_years + 1)]
        cols.append(_Col("Resale share source", 40, None, wrap=True))
        _header(ws, top, cols)
        rows = [self._schedule_row(i, p, n_years) for i, p in enumerate(self.plan.purchases)]
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

    def _schedule_row(self, i: int, p: Purchase, n_years: int) -> list[Any]:
        """One purchase: capex, age at the horizon end, resale shares (card: the resale mode's
        share; chassis: book value under straight_line, else 0), resale and book value, and
        straight-line depreciation per plan year (12 x life months from the purchase)."""
        fin, T = self.finance, len(self.plan.months)
        s, pr = self.pl.s_first + i, FIRST_ROW + i
        t = self.plan.months.index(p.month) if p.month in self.plan.months else 0
        pur = lambda c: _sheet_ref("Purchases", f"${c}${pr}")  # noqa: E731
        sl = f"MAX(0,1-E{s}/(12*{fin.years}))"
        card, source = self._card_share(i, p, T - t, f"E{s}", sl)
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

    def _card_share(self, i: int, p: Purchase, age: int, age_cell: str, sl: str) -> tuple[Any, str]:
        """A card's resale share at the horizon end: a formula over the resale mode and the
        GPU's curve points on Assumptions; where that does not give the plan's resale value
        (a plan without the curve), the plan's share as a yellow input of this row."""
        fin = self.finance
        points = _curve_points(self.a, p.gpu)
        source = _curve_source(p.gpu, points)

        def formula() -> F:
            curve = _curve_formula(self.a, points, age, age_cell)
            return F(f'=IF({fin.mode}="none",0,IF({fin.mode}="straight_line",{sl},{curve}))')

        dep = self.plan.depreciation[i] if i < len(self.plan.depreciation) else None
        if dep is None or dep.gpu != p.gpu or dep.month != p.month:
            return formula(), source
        life = dep.years
        sl_value = max(0.0, 1.0 - age / (12.0 * life)) if life > 0 else 0.0
        mode = self.plan.residual_mode
        card = {"none": 0.0, "straight_line": sl_value}.get(mode, _curve_value(self.a, points, age))
        chassis = sl_value if mode == "straight_line" else 0.0
        _, chassis_usd = self._chassis_price(p)
        want = dep.residual_value_usd
        got = p.count * p.gpu_usd * card + p.nodes * chassis_usd * chassis
        if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6) or not p.count * p.gpu_usd:
            return formula(), source
        share = (want - p.nodes * chassis_usd * chassis) / (p.count * p.gpu_usd)
        return share, "the plan's resale share (not from the curve on Assumptions): edit here"

    # -- Workloads --------------------------------------------------------------------
    def workloads(self) -> None:
        ws = self.ws["Workloads"]
        _title(
            ws,
            "Workloads",
            "Chosen configuration, GPUs, cost and cost share per workload (the solver's "
            "attribution); below: predicted vs target for each key.",
        )
        cols = self._workload_cols()
        total_row = self._workload_table(ws, cols)
        tlast = self._targets_table(ws, cols, total_row + 3)
        if self.plan.dropped:
            self._dropped_table(ws, cols, tlast + 3)
        _widths(ws, cols)
        _print_setup(ws, None, f"B{FIRST_ROW}")

    def _workload_cols(self) -> list[_Col]:
        plan = self.plan
        keys = [k for w in plan.workloads for k in [*w.target, *w.predicted, *w.slack]]
        models = [w.model for w in plan.workloads] + keys + [d.gpu for d in plan.dropped]
        config_lines = [ln for w in plan.workloads for ln in _config(w.config).split("\n")]
        return [
            _Col("Workload", _fit(12, [w.name for w in plan.workloads], 28), wrap=True),
            _Col("Kind", 7),
            # the tables below reuse this column for target keys and GPU ids
            _Col("Model", _fit(10, models, 24), wrap=True),
            _Col("GPUs", 12, NUM0),
            _Col("Configuration", _fit(22, config_lines, 50), wrap=True),
            _Col("GPU types", _fit(12, [", ".join(w.gpu) for w in plan.workloads], 22), wrap=True),
            _Col("Meets targets", 9),
            _Col("Cost USD", 14, USD),
            _Col("Cost share", 9, PCT),
            _Col("Tokens", 15, NUM0),
            _Col("USD per 1M tokens", 11, USD_CENTS),
            _Col("Solver's USD per 1M tokens", 12, USD_CENTS),
        ]

    def _workload_table(self, ws: Worksheet, cols: Sequence[_Col]) -> int:
        """The table of workloads and its total row; returns the total row."""
        _header(ws, HEADER_ROW, cols)
        rows = [
            _workload_row(r, w, *self._workload_cost(r, w))
            for r, w in enumerate(self.plan.workloads, start=FIRST_ROW)
        ]
        if not rows:
            rows.append(["(no workloads)", "", "", 0, "", "", "", 0, 0, 0, None, None])
        last = _rows(ws, FIRST_ROW, cols, rows)
        for r, w in enumerate(self.plan.workloads, start=FIRST_ROW):
            _put(ws, r, _KEY_COL, _exact(w.name))
        ws.column_dimensions["M"].hidden = True
        for r in range(FIRST_ROW, last + 1):
            if ws.cell(r, 7).value == "NO":
                ws.cell(r, 7).font = _F_WARN
        _total_row(ws, last + 1, last, [(8, USD), (9, PCT)])
        _table(ws, "tblWorkloads", 1, len(cols), HEADER_ROW, last)
        return last + 1

    def _workload_cost(self, r: int, w: WorkloadResult) -> tuple[F, F]:
        """Live cost of a workload: its own rentals plus its allocated owned/reserved cost."""
        crit = f"$M{r}"
        own = _sumifs("Rentals", 9, FIRST_ROW, self.r_last, [(6, crit)])
        shared = _sumifs("Allocation", 11, FIRST_ROW, self.al_last, [(1, crit)])
        total = _sheet_ref("Cash flow", f"$F${self.cf_total_row}")
        return F(f"={own}+{shared}"), F(f"=IF({total}>0,H{r}/{total},0)")

    # -- Allocation -------------------------------------------------------------------
    def allocation(self) -> None:
        ws = self.ws["Allocation"]
        _title(
            ws,
            "Allocation of owned and reserved cost to workloads",
            "Each GPU type's owned cost (capex + power + hosting) is shared among workloads by "
            "the owned GPU-hours each used; reserved commitments by the reserved GPU-hours used.",
        )
        cols = _ALLOC_COLS
        _header(ws, HEADER_ROW, cols)
        rows = self._allocation_rows() or [_no_allocation_row()]
        self.al_last = _rows(ws, FIRST_ROW, cols, rows)
        _total_row(
            ws,
            self.al_last + 1,
            self.al_last,
            [(3, NUM0), (6, USD), (7, NUM0), (10, USD), (11, USD)],
        )
        _table(ws, "tblAllocation", 1, len(cols), HEADER_ROW, self.al_last)
        _widths(ws, cols)
        ws.column_dimensions["A"].width = _fit(12, [w.name for w in self.plan.workloads], 30)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"C{FIRST_ROW}")

    def _allocation_rows(self) -> list[list[Any]]:
        pl, fl, rl = self.p_last, self.f_last, self.r_last
        rows: list[list[Any]] = []
        used = gpu_hours_used(self.plan)
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

    def _targets_table(self, ws: Worksheet, cols: Sequence[_Col], top: int) -> int:
        """Predicted vs target, one row per workload and key; returns the last row."""
        _section(ws, top - 1, "Predicted vs target")
        tcols = [  # in the columns of the table above, so the widths suit both
            cols[0],
            cols[1],
            _Col("Key", cols[2].width),
            _Col("Predicted", 12, NUMG),
            _Col("Target", 12, NUMG),
            _Col("Slack", 12, NUMG),
            _Col("Meets targets", 9),
        ]
        _header(ws, top, tcols)
        trows: list[list[Any]] = []
        for w in self.plan.workloads:
            for key in list(dict.fromkeys([*w.target, *w.predicted, *w.slack])):
                trows.append(
                    [
                        w.name,
                        w.kind,
                        key,
                        _num(w.predicted.get(key)) if key in w.predicted else None,
                        _num(w.target.get(key)) if key in w.target else None,
                        _num(w.slack.get(key)) if key in w.slack else None,
                        "yes" if w.meets_target else "NO",
                    ]
                )
        if not trows:
            trows.append(["(none)", "", "", None, None, None, ""])
        tlast = _rows(ws, top + 1, tcols, trows)
        _table(ws, "tblTargets", 1, len(tcols), top, tlast)
        return tlast

    def _dropped_table(self, ws: Worksheet, cols: Sequence[_Col], top: int) -> None:
        _section(ws, top - 1, "Configurations the solver dropped")
        kinds = {w.name: w.kind for w in self.plan.workloads}
        dcols = [  # in the columns of the workloads table, so the widths suit both
            cols[0],
            cols[1],
            _Col("GPU", cols[2].width, wrap=True),
            _Col("Configuration", cols[3].width, wrap=True),
            _Col("Reason", cols[4].width, wrap=True),
        ]
        _header(ws, top, dcols)
        drows = [
            [d.workload, kinds.get(d.workload, ""), d.gpu, d.config, d.reason]
            for d in self.plan.dropped
        ]
        dlast = _rows(ws, top + 1, dcols, drows)
        _table(ws, "tblDropped", 1, len(dcols), top, dlast)

    # -- Assumptions ------------------------------------------------------------------
    def assumptions(self) -> None:
        ws = self.ws["Assumptions"]
        a = self.a
        _title(
            ws,
            "Assumptions",
            "Every figure the plan used, with its source. The yellow values are the inputs "
            "of the live formulas: edit one here and every total in the workbook updates.",
        )
        cols = [
            _Col("Group", _fit(10, [r.group for r in a.rows], 28)),
            _Col("Key", _fit(10, [r.key for r in a.rows], 34)),
            _Col("Value", 16, NUMG),
            _Col("Unit", _fit(6, [r.unit for r in a.rows], 16)),
            _Col("Source", _fit(24, [r.source for r in a.rows], 60), wrap=True),
            _Col("As of", 11),
            _Col("Note", 18),
        ]
        _header(ws, HEADER_ROW, cols)
        rows = [self._assumption_row(i, r) for i, r in enumerate(a.rows)]
        last = _rows(ws, FIRST_ROW, cols, rows)
        for i, r in enumerate(a.rows):
            self._style_assumption(ws, FIRST_ROW + i, i, r)
        _table(ws, "tblAssumptions", 1, len(cols), HEADER_ROW, last)
        _widths(ws, cols)
        ws.column_dimensions["C"].width = 22
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")

    def _assumption_row(self, i: int, r: _ARow) -> list[Any]:
        note = {"derived": "from the plan", "missing": "MISSING", "meta": ""}.get(r.note, "")
        if i in self.a.used:
            note = f"{note}; formula input" if note else "formula input"
        value: Any = _cell_value(r.value)
        derived = self._per_gpu_share(r)
        if derived is not None:
            value, note = derived
        return [r.group, r.key, value, r.unit, r.source, r.as_of, note]

    def _per_gpu_share(self, r: _ARow) -> tuple[F, str] | None:
        """The per-GPU server figures are derived from the server (price or host watts / slots):
        a formula, so an edited chassis price shows in them too. None for a plan whose per-GPU
        figure is not that share (a plan from before server types)."""
        of = {"server_overhead_usd_per_gpu": "chassis_usd", "host_w_per_gpu": "host_w"}
        if r.key not in of or not _finite(r.value):
            return None
        whole = self.a.find([r.group], [of[r.key]])
        slots = self.a.find([r.group], ["server_slots"])
        if whole is None or slots is None or not self.a.rows[slots].value:
            return None
        share = float(self.a.rows[whole].value) / float(self.a.rows[slots].value)
        if not math.isclose(share, float(r.value), rel_tol=1e-9, abs_tol=1e-9):
            return None
        formula = F(f"=$C${FIRST_ROW + whole}/$C${FIRST_ROW + slots}")
        return formula, f"derived: {of[r.key]} / server_slots"

    def _style_assumption(self, ws: Worksheet, row: int, i: int, r: _ARow) -> None:
        c = ws.cell(row, 3)
        if i in self.a.used:
            c.fill = _FILL_INPUT
        if r.key in ("gap",) and _finite(r.value):
            c.number_format = PCT2
        if r.note == "missing":
            ws.cell(row, 7).font = _F_WARN
        if isinstance(r.value, str) and len(r.value) > 20:
            # a long text value wraps in the narrow value column: the row grows to show it
            c.alignment = Alignment(horizontal="left", wrap_text=True, vertical="top")
            height = 13 * _lines(r.value, 22) + 1
            cur = ws.row_dimensions[row].height or 0
            ws.row_dimensions[row].height = max(cur, height)

    # -- Summary ----------------------------------------------------------------------
    def summary(self) -> _CostRows:
        """Page 1: a stack of blocks, each starting two rows below the one before."""
        ws = self.ws["Summary"]
        self._summary_title(ws)
        # page 1 answers "what do we do, what does it cost when, for what, and what could go
        # wrong"; the live cost lines and the detail tables follow
        r = self._summary_decision(ws, 5)
        r = self._summary_years(ws, r + 2)
        r = self._summary_by_workload(ws, r + 2)
        r = self._summary_peak(ws, r + 2)
        r = self._summary_risks(ws, r + 2)
        ws.row_breaks.append(Break(id=r + 1))
        cost = self._summary_costs(ws, r + 3)
        r = self._summary_budget(ws, cost.book + 2, cost)
        r = self._summary_buy(ws, r + 2)
        r = self._summary_rent(ws, r + 2)
        if self.plan.reservations:
            r = self._summary_reserved(ws, r + 2)
        self._summary_notes(ws, r)
        for col, w in zip("ABCDE", (38, 17, 17, 14, 52), strict=True):
            ws.column_dimensions[col].width = w
        for name, row in (
            ("total_cost_usd", cost.total),
            ("capex_usd", cost.capex),
            ("npv_usd", cost.npv),
            ("residual_value_usd", cost.residual),
            ("book_value_usd", cost.book),
        ):
            self.wb.defined_names[name] = DefinedName(
                name, attr_text=_sheet_ref("Summary", f"$B${row}")
            )
        ws.column_dimensions["M"].hidden = True
        _print_setup(ws, None, None)
        ws.sheet_view.showGridLines = False
        return cost

    def _total_ref(self) -> str:
        return _sheet_ref("Cash flow", f"$F${self.cf_total_row}")

    def _sentence(self, ws: Worksheet, r: int, text: str, font: Font | None = None) -> None:
        """A line of text across the page (A:E merged), its row tall enough for the wrap."""
        _put(ws, r, 1, text, font=font, align=_WRAP)
        ws.merge_cells(start_row=r, start_column=1, end_row=r, end_column=_SUMMARY_COLS)
        lines = _lines(text, _SUMMARY_WIDTH)
        if lines > 1:
            ws.row_dimensions[r].height = 13 * lines + 2

    def _summary_decision(self, ws: Worksheet, top: int) -> int:
        """The decision in plain words (figures as solved); returns the last row."""
        _section(ws, top, "The decision")
        r = top
        for line in decision_sentences(self.plan):
            r += 1
            self._sentence(ws, r, line)
        return r

    def _summary_years(self, ws: Worksheet, top: int) -> int:
        """Cost per calendar year, live over Cash flow; returns the total row."""
        _section(ws, top, "Cost per year (USD, live)")
        hdr = ["Year", "Capex", "Opex (power + hosting)", "Rentals", "Total"]
        fleet = EXISTING in self.ws  # then a sixth column: contracts less sales, in the total
        hdr += ["Contracts - sales"] if fleet else []
        _head_cells(ws, top + 1, hdr)
        r = top + 1
        last = self.cf_last
        for y in years(self.plan) or [0]:
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

    def _summary_by_workload(self, ws: Worksheet, top: int) -> int:
        """Cost per workload, live over the Workloads sheet; returns the last row."""
        _section(ws, top, "Cost per workload (USD, live)")
        _head_cells(ws, top + 1, ["Workload", "Kind", "Cost", "Share", "Runs on"])
        r = top + 1
        for i, w in enumerate(self.plan.workloads):
            r += 1
            src = FIRST_ROW + i
            _put(ws, r, 1, w.name, border=_BORDER)
            _put(ws, r, 2, w.kind, border=_BORDER)
            _put(ws, r, 3, F("=" + _sheet_ref("Workloads", f"$H${src}")), USD, border=_BORDER)
            _put(ws, r, 4, F("=" + _sheet_ref("Workloads", f"$I${src}")), PCT, border=_BORDER)
            _put(ws, r, 5, self._runs_on(w), border=_BORDER)
        first = top + 2
        r += 1
        # what no workload used (idle owned GPUs, unused reservations) keeps the sum whole
        _put(ws, r, 1, "Not used by any workload", border=_BORDER)
        left = f"ROUND({self._total_ref()}-SUM(C{first}:C{r - 1}),2)"  # no "-$0" from rounding
        _put(ws, r, 3, F(f"={left}"), USD, border=_BORDER)
        _put(ws, r, 5, "idle owned GPUs, unused reserved hours", font=_F_SUB, border=_BORDER)
        return r

    def _runs_on(self, w: WorkloadResult) -> str:
        peak = rented_peak_by_workload(self.plan)
        parts = [
            g + (f" (rents up to {peak[(w.name, g)]:,.0f})" if (w.name, g) in peak else "")
            for g in w.gpu
        ]
        return f"{w.gpus:,} GPUs at peak; " + ", ".join(parts)

    def _summary_peak(self, ws: Worksheet, top: int) -> int:
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
        for p in peak_gpus(self.plan):
            r += 1
            _put(ws, r, 1, p.gpu, border=_BORDER)
            _put(ws, r, 2, p.owned, NUM0, border=_BORDER)
            _put(ws, r, 3, p.reserved, NUM0, border=_BORDER)
            _put(ws, r, 4, p.rented, NUM0, border=_BORDER)
            _put(ws, r, 5, p.total, NUM0, border=_BORDER)
        return r

    def _summary_risks(self, ws: Worksheet, top: int) -> int:
        """Spot exposure, how close buying is to renting, and what is not modeled."""
        _section(ws, top, "Risks")
        r = top
        kind = _col_range("Rentals", 4, FIRST_ROW, self.r_last)
        usd = _col_range("Rentals", 9, FIRST_ROW, self.r_last)
        total = self._total_ref()
        for label, k, why in (
            ("Share of spend on spot", "spot", "spot capacity can be taken back at any time"),
            ("Share of spend on on-demand", "on_demand", "rates can change; capacity not held"),
        ):
            r += 1
            _put(ws, r, 1, label)
            _put(ws, r, 2, F(f'=IF({total}>0,SUMIFS({usd},{kind},"{k}")/{total},0)'), PCT, _F_BOLD)
            _put(ws, r, 3, why, font=_F_SUB)
        for line in self.margins or [_NO_BUY if not self.plan.purchases else _NO_MARGIN]:
            r += 1
            self._sentence(ws, r, "Buying vs the next-best plan: " + line)
        r += 1
        _put(ws, r, 1, "Not modeled:", font=_F_BOLD)
        for line in NOT_MODELED:
            r += 1
            self._sentence(ws, r, "- " + line, font=_F_SUB)
        return r

    def _summary_title(self, ws: Worksheet) -> None:
        plan = self.plan
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

    def solver(self, cost: _CostRows) -> None:
        """Solver status and the workbook-vs-solver reconciliation, away from page 1."""
        ws = self.ws["Solver"]
        _title(
            ws, "Solver", "How the solve went, and the workbook's live totals against the solver's."
        )
        r = self._summary_solve(ws, HEADER_ROW)
        self._reconciliation(ws, r + 2, cost)
        for col, w in zip("ABCDE", (38, 17, 17, 14, 52), strict=True):
            ws.column_dimensions[col].width = w
        _print_setup(ws, None, None)

    def _reconciliation(self, ws: Worksheet, top: int, cost: _CostRows) -> None:
        _section(ws, top, "Reconciliation: workbook (live) vs solver")
        hdr = ["Item", "Workbook (live)", "Solver", "Difference", "Where the number comes from"]
        _head_cells(ws, top + 1, hdr)
        t = self.plan.totals
        opex = t.power_usd + t.hosting_usd + t.rental_usd
        rows = [cost.total, cost.capex, cost.power, cost.hosting, cost.rentals, cost.rentals + 1]
        rows += [cost.rentals + 2, cost.rentals + 3] if EXISTING in self.ws else []
        lines = [
            (line.label, src, line.solver, line.where)
            for line, src in zip(self._cost_lines(), rows, strict=True)
        ]
        lines += [
            ("Opex (power + hosting + rentals)", cost.opex, opex, "Power + hosting + rentals"),
            *(
                (label, row, solver, where)
                for label, row, solver, where in self._finance_lines(cost)
            ),
        ]
        r = top + 1
        for label, src, solver, where in lines:
            r += 1
            _put(ws, r, 1, label, border=_BORDER)
            _put(ws, r, 2, F("=" + _sheet_ref("Summary", f"$B${src}")), USD, border=_BORDER)
            _put(ws, r, 3, _num(solver) if solver is not None else "n/a", USD, border=_BORDER)
            diff = F(f"=B{r}-C{r}") if solver is not None else "n/a"
            _put(ws, r, 4, diff, USD_CENTS, border=_BORDER)
            _put(ws, r, 5, where, font=_F_SUB, border=_BORDER)

    def _finance_lines(self, cost: _CostRows) -> list[tuple[str, int, float | None, str]]:
        """(label, Summary row, solver's figure, where) of the present value, resale value and
        book value lines."""
        t = self.plan.totals
        legacy = t.npv_usd is None  # a plan from before issue 14 has no finance figures
        return [
            (_NPV_LINE, cost.npv, t.npv_usd, "P&L: present value of every month's cash"),
            (
                _RESIDUAL_LINE,
                cost.residual,
                None if legacy else t.residual_value_usd,
                "P&L schedule: cards x price x resale share (+ chassis under straight_line)",
            ),
            (
                _BOOK_LINE,
                cost.book,
                None if legacy else t.book_value_usd,
                "P&L schedule: capex less straight-line depreciation",
            ),
        ]

    def _summary_solve(self, ws: Worksheet, top: int) -> int:
        """How the solve went; returns the last row."""
        plan = self.plan
        _section(ws, top, "Solve")
        status_font = _F_BOLD if plan.status in ("optimal", "feasible") else _F_WARN
        info: list[tuple[str, Any, str | None, Font | None]] = [
            ("Status", plan.status, None, status_font),
            ("Solver", plan.solver, None, None),
            ("Optimality gap", _num(plan.gap) if plan.gap is not None else "n/a", PCT2, None),
            ("Solve time (s)", _num(plan.solve_seconds), NUM1, None),
        ]
        if plan.message:
            info.append(("Message", plan.message, None, None))
        r = top
        for label, value, fmt, font in info:
            r += 1
            _put(ws, r, 1, label)
            _put(ws, r, 2, value, fmt, font=font, align=Alignment(horizontal="left"))
        return r

    def _cost_lines(self) -> list[_CostLine]:
        t = self.plan.totals
        cf = self.cf_total_row

        def total(col: str) -> F:
            return F("=" + _sheet_ref("Cash flow", f"${col}${cf}"))

        kind = _col_range("Rentals", 4, FIRST_ROW, self.r_last)
        usd = _col_range("Rentals", 9, FIRST_ROW, self.r_last)
        more = " + contracts - existing GPUs sold" if EXISTING in self.ws else ""
        return [
            _CostLine(
                "Total cost",
                total("F"),
                t.total_usd,
                "Cash flow total: capex + power + hosting + rentals" + more,
                True,
            ),
            _CostLine(
                "Capex (purchases)",
                total("B"),
                t.capex_usd,
                "Purchases: servers x chassis price + GPUs x card price",
                True,
            ),
            _CostLine(
                "Power",
                total("C"),
                t.power_usd,
                "Fleet: PUE x USD/kWh x energy of the owned fleet",
                False,
            ),
            _CostLine(
                "Hosting",
                total("D"),
                t.hosting_usd,
                "Fleet: owned GPUs x USD per GPU-month + IT kW x colocation USD per kW-month",
                False,
            ),
            _CostLine(_RENTALS_LINE, total("E"), t.rental_usd, "Rentals: GPU-hours x rate", False),
            _CostLine(
                "  of which reserved commitments",
                F(f'=SUMIFS({usd},{kind},"reserved")'),
                t.reserved_usd,
                "Rentals rows of kind 'reserved'",
                False,
            ),
            *self._existing_cost_lines(total),
        ]

    def _existing_cost_lines(self, total: Callable[[str], F]) -> list[_CostLine]:
        """Contracts signed before the plan and existing GPUs sold, when the plan has them."""
        if EXISTING not in self.ws:
            return []
        t, q, r = self.plan.totals, get_column_letter(CF_COMMITTED), get_column_letter(CF_SALES)
        return [
            _CostLine(
                "Contracts signed before the plan",
                total(q),
                t.committed_usd,
                "Existing: GPUs x hours x rate, every month of the term inside the horizon",
                False,
            ),
            _CostLine(
                "Existing GPUs sold (inflow)",
                total(r),
                t.sale_proceeds_usd,
                "Existing: GPUs x catalog price x resale share at their age",
                False,
            ),
        ]

    def _summary_costs(self, ws: Worksheet, top: int) -> _CostRows:
        """Cost over the horizon: workbook vs solver, line by line, then opex."""
        _section(ws, top, "Cost over the horizon")
        hdr = ["Item", "USD (live)", "", "", "Where the number comes from"]
        _head_cells(ws, top + 1, hdr)
        r = top + 1
        rows_at: dict[str, int] = {}
        for line in self._cost_lines():
            r += 1
            rows_at[line.label] = r
            font = _F_BIG if line.key else _F_BASE
            fill = _FILL_KEY if line.key else None
            label_font = _F_BOLD if line.key else _F_BASE
            _put(ws, r, 1, line.label, font=label_font, fill=fill, border=_BORDER)
            _put(ws, r, 2, line.live, USD, font=font, fill=fill, border=_BORDER)
            _put(ws, r, 5, line.where, font=_F_SUB, border=_BORDER)
        cost = _CostRows(
            total=rows_at["Total cost"],
            capex=rows_at["Capex (purchases)"],
            power=rows_at["Power"],
            hosting=rows_at["Hosting"],
            rentals=rows_at[_RENTALS_LINE],
            opex=r + 1,
        )
        self._opex_line(ws, cost)
        self._summary_finance(ws, cost)
        return cost

    def _summary_finance(self, ws: Worksheet, cost: _CostRows) -> None:
        """Discount rate, present value, resale value and book value, live over the P&L."""
        r = cost.opex + 1
        _put(ws, r, 1, "Discount rate (per year)", border=_BORDER)
        _put(ws, r, 2, F(f"={self.finance.rate}"), PCT, border=_BORDER)
        _put(ws, r, 5, "Assumptions: finance / discount_rate (yellow)", font=_F_SUB, border=_BORDER)
        pnl = self.pl
        live = {
            cost.npv: F("=" + _sheet_ref("P&L", f"$J${pnl.year_total}")),
            cost.residual: F("=" + _sheet_ref("P&L", f"$H${pnl.year_total}")),
            cost.book: F("=" + _sheet_ref("P&L", f"$I${pnl.s_total}")),
        }
        for label, row, _solver, where in self._finance_lines(cost):
            key = row == cost.npv
            fill = _FILL_KEY if key else None
            _put(ws, row, 1, label, font=_F_BOLD if key else _F_BASE, fill=fill, border=_BORDER)
            _put(
                ws,
                row,
                2,
                live[row],
                USD,
                font=_F_BIG if key else _F_BASE,
                fill=fill,
                border=_BORDER,
            )
            _put(ws, row, 5, where, font=_F_SUB, border=_BORDER)

    def _opex_line(self, ws: Worksheet, cost: _CostRows) -> None:
        r = cost.opex
        _put(ws, r, 1, "Opex (power + hosting + rentals)", font=_F_BOLD, border=_BORDER)
        live = F(f"=B{cost.power}+B{cost.hosting}+B{cost.rentals}")
        _put(ws, r, 2, live, USD, font=_F_BOLD, border=_BORDER)
        _put(ws, r, 5, "Power + hosting + rentals", font=_F_SUB, border=_BORDER)

    def _summary_budget(self, ws: Worksheet, top: int, cost: _CostRows) -> int:
        """Capex budget and headroom, then the total budget if the plan has one; the last row."""
        _section(ws, top, "Budget")
        r = top + 1
        budget = self.budget_cell()
        if budget:
            _put(ws, r, 1, "Capex budget")
            _put(ws, r, 2, F(f"={budget}"), USD)
            _put(ws, r, 5, "Assumptions: budget / capex_usd", font=_F_SUB)
            r += 1
            _put(ws, r, 1, "Capex headroom (budget - capex)")
            _put(ws, r, 2, F(f"=B{r - 1}-B{cost.capex}"), USD, font=_F_BOLD)
            _put(ws, r, 5, "Negative = over budget", font=_F_SUB)
            r += 1
            _put(ws, r, 1, "Capex used of budget")
            _put(ws, r, 2, F(f'=IF(B{r - 2}>0,B{cost.capex}/B{r - 2},"n/a")'), PCT)
        else:
            _put(ws, r, 1, "Capex budget")
            _put(ws, r, 2, "none")
        total_budget = self.total_budget_cell()
        if total_budget:
            r += 1
            _put(ws, r, 1, "Total budget")
            _put(ws, r, 2, F(f"={total_budget}"), USD)
            r += 1
            _put(ws, r, 1, "Total headroom (budget - total)")
            _put(ws, r, 2, F(f"=B{r - 1}-B{cost.total}"), USD, font=_F_BOLD)
        return r

    def _summary_buy(self, ws: Worksheet, top: int) -> int:
        """What to buy: one row per GPU type and month, live over Purchases; the last row."""
        _section(ws, top, "What to buy")
        _head_cells(ws, top + 1, ["GPU", "GPUs bought", "Servers", "Capex USD", "Month bought"])
        bought = list(dict.fromkeys((p.gpu, p.month) for p in self.plan.purchases))
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
                sumifs = _sumifs("Purchases", src, FIRST_ROW, self.p_last, crit)
                _put(ws, r, c, F("=" + sumifs), fmt, border=_BORDER)
            left = Alignment(horizontal="left")
            _put(ws, r, 5, _month_value(month), MONTH_FMT, border=_BORDER, align=left)
        return r

    def _summary_rent(self, ws: Worksheet, top: int) -> int:
        """What to rent: one row per (offer, workload), live over Rentals; the last row."""
        _section(ws, top, "What to rent")
        hdr = ["Offer", "GPU-hours", "Workload", "Cost USD", "Provider, GPU, kind, USD/GPU-h"]
        _head_cells(ws, top + 1, hdr)
        r = top + 1
        if not self.plan.rentals:
            r += 1
            _put(ws, r, 1, "Nothing: no rentals in this plan", border=_BORDER)
        for (workload, offer), g in rent_groups(self.plan).items():
            r += 1
            _put(ws, r, _KEY_COL, _exact(workload))
            crit = [(2, f"$A{r}"), (6, f"$M{r}")]
            hours = _sumifs("Rentals", 7, FIRST_ROW, self.r_last, crit)
            usd = _sumifs("Rentals", 9, FIRST_ROW, self.r_last, crit)
            _put(ws, r, 1, offer, border=_BORDER, align=_WRAP)
            _put(ws, r, 2, F("=" + hours), NUM0, border=_BORDER)
            _put(ws, r, 3, workload, border=_BORDER, align=_WRAP)
            _put(ws, r, 4, F("=" + usd), USD, border=_BORDER)
            kind = g.kind.replace("_", "-")
            desc = f"{g.provider}, {g.gpu}, {kind}, {rate_text(g.rate)}"
            _put(ws, r, 5, desc, border=_BORDER)
            ws.row_dimensions[r].height = 13 * max(_lines(offer, 38), _lines(workload, 17)) + 2
        return r

    def _summary_reserved(self, ws: Worksheet, top: int) -> int:
        """Reserved commitments, the solver's figures; returns the last row."""
        _section(ws, top, "Reserved commitments (paid whether used or not)")
        hdr = ["Offer", "GPUs", "Term (months)", "Cost USD (solver)", "Start, provider, rate"]
        _head_cells(ws, top + 1, hdr)
        r = top + 1
        for res in self.plan.reservations:
            r += 1
            _put(ws, r, 1, res.offer, border=_BORDER)
            _put(ws, r, 2, res.gpus, NUM0, border=_BORDER)
            _put(ws, r, 3, res.term_months, NUM0, border=_BORDER)
            _put(ws, r, 4, _num(res.usd), USD, border=_BORDER)
            rate = f"${res.usd_per_gpu_hour:,.3f}/GPU-h"
            _put(ws, r, 5, f"from {res.start_month}, {res.provider}, {rate}", border=_BORDER)
        return r

    def _summary_notes(self, ws: Worksheet, last: int) -> int:
        """The missing-inputs warning (if any) and how to read the page; returns the last row."""
        r = last
        if self.a.missing:
            r += 2
            _put(
                ws,
                r,
                1,
                "Warning: inputs missing from the plan (set to 0 on the Assumptions sheet): "
                + "; ".join(self.a.missing),
                font=_F_WARN,
            )
        r += 2
        _put(
            ws,
            r,
            1,
            "Every figure above is a live formula over the detail sheets; the inputs (prices, power, "
            "PUE, hosting, colocation, budget, discount rate, depreciation years, resale curves) "
            "live on the Assumptions sheet. 'Solver' is the plan's own figure.",
            font=_F_SUB,
        )
        return r

    # -- Charts -----------------------------------------------------------------------
    def charts(self, cost: _CostRows) -> None:
        ws = self.ws["Charts"]
        _title(
            ws,
            "Charts",
            "Monthly spend (live over Cash flow), the serving and the training fleet by GPU "
            "type (owned vs rented GPUs, from the plan), and the cost split (Summary).",
        )
        top = _FLEET_DATA_ROW
        groups = self._chart_data(ws, top)
        last = top + max(1, len(self.plan.months))
        ws.add_chart(self._spend_chart(ws, top, last), "A4")
        ws.add_chart(self._split_chart(cost), "K4")
        for (first_col, ncols), title, anchor in zip(
            groups,
            ("Serving fleet: GPUs at the busiest hours", "Training: GPUs in use"),
            ("A23", "K23"),
            strict=True,
        ):
            if ncols:  # no chart of a fleet the plan does not have
                ws.add_chart(self._fleet_chart(ws, top, last, first_col, ncols, title), anchor)
        ws.row_breaks.append(Break(id=top - 2))  # the charts on page 1, their data after
        _print_setup(ws, f"{top}:{top}", None)
        ws.sheet_view.showGridLines = False

    def _chart_data(self, ws: Worksheet, top: int) -> list[tuple[int, int]]:
        """The charts' data below them: month, capex, opex, rentals (live), then the serving
        and training series. Returns (first column, columns) of the two fleet groups."""
        _put(ws, top - 1, 1, "Chart data", font=_F_SECTION)
        serve, train = fleet_series(self.plan, "serve"), fleet_series(self.plan, "train")
        cols = [_Col("Month", 10, MONTH_FMT), _Col("Capex", 12, USD), _Col("Opex", 12, USD)]
        cols += [_Col("Rentals", 12, USD)]
        cols += [_Col(f"Serving: {k}", 12, NUM0, wrap=True) for k in serve]
        cols += [_Col(f"Training: {k}", 12, NUM0, wrap=True) for k in train]
        _header(ws, top, cols)
        ws.row_dimensions[top].height = 13 * max(_lines(c.header, c.width) for c in cols) + 4
        rows: list[list[Any]] = []
        for k in range(max(1, len(self.plan.months))):
            cf = FIRST_ROW + k
            ref = lambda c, cf=cf: _sheet_ref("Cash flow", f"${c}${cf}")  # noqa: E731
            row: list[Any] = [F(f"={ref('A')}"), F(f"={ref('B')}"), F(f"={ref('C')}+{ref('D')}")]
            row.append(F(f"={ref('E')}"))
            row += [v[k] if k < len(v) else 0 for v in [*serve.values(), *train.values()]]
            rows.append(row)
        _rows(ws, top + 1, cols, rows)
        _widths(ws, cols)
        return [(5, len(serve)), (5 + len(serve), len(train))]

    def _spend_chart(self, ws: Worksheet, top: int, last: int) -> BarChart:
        spend = BarChart()
        spend.type = "col"
        spend.grouping = "stacked"
        spend.overlap = 100
        spend.title = "Monthly spend: capex, opex, rentals (USD)"
        spend.add_data(
            Reference(ws, min_col=2, max_col=4, min_row=top, max_row=last), titles_from_data=True
        )
        spend.set_categories(Reference(ws, min_col=1, min_row=top + 1, max_row=last))
        _style_chart(spend, '"$"#,##0', _KIND_COLORS)
        return spend

    def _split_chart(self, cost: _CostRows) -> BarChart:
        s = self.ws["Summary"]
        split = BarChart()
        split.type = "bar"
        split.title = "Cost split (USD)"
        # capex, power, hosting and rentals are contiguous rows on Summary
        first, last = cost.capex, cost.rentals
        split.add_data(Reference(s, min_col=2, min_row=first, max_row=last), titles_from_data=False)
        split.set_categories(Reference(s, min_col=1, min_row=first, max_row=last))
        _style_chart(split, '"$"#,##0', ["1F4E79"])
        split.width = 13
        split.legend = None
        split.x_axis.scaling.orientation = "maxMin"  # capex on top, as on Summary
        split.y_axis.crosses = "max"  # keeps the value axis at the bottom
        split.y_axis.majorGridlines = None
        split.dataLabels = _value_labels('"$"#,##0')
        return split

    def _fleet_chart(
        self, ws: Worksheet, top: int, last: int, first_col: int, ncols: int, title: str
    ) -> BarChart:
        fleet = BarChart()
        fleet.type = "col"
        fleet.grouping = "stacked"
        fleet.overlap = 100
        fleet.title = title
        fleet.add_data(
            Reference(
                ws, min_col=first_col, max_col=first_col + ncols - 1, min_row=top, max_row=last
            ),
            titles_from_data=True,
        )
        fleet.set_categories(Reference(ws, min_col=1, min_row=top + 1, max_row=last))
        colors = [c for pair in _GPU_COLORS for c in pair]
        _style_chart(fleet, "#,##0", colors)
        return fleet

    def build(self) -> Workbook:
        # detail sheets first: the summary and cash flow reference their last rows
        self.purchases()
        self.rentals()
        self.fleet()
        self.existing()
        self.cash_flow()
        self.pnl()
        self.allocation()
        self.workloads()
        cost = self.summary()
        self.charts(cost)
        self.solver(cost)
        self.assumptions()  # last: the other sheets may add derived rows
        wb = self.wb
        wb.calculation.fullCalcOnLoad = True
        wb.properties.title = _text(f"GPU procurement plan: {self.plan.problem_name}")
        wb.properties.creator = _text(f"gpu-planner {self.plan.planner_version}")
        return wb


_KIND_COLORS = ["1F4E79", "ED7D31", "70AD47"]  # capex, opex, rentals
_GPU_COLORS = [
    ("1F4E79", "9DC3E6"),
    ("C55A11", "F4B183"),
    ("548235", "A9D18E"),
    ("7030A0", "CDB4E0"),
    ("BF8F00", "FFE699"),
    ("2F5597", "B4C7E7"),
]  # (owned, rented) per GPU type


def _style_chart(ch: BarChart, numfmt: str, colors: Sequence[str]) -> None:
    ch.width, ch.height = 17, 9
    ch.legend.position = "b"
    ch.y_axis.numFmt = numfmt
    ch.y_axis.number_format = numfmt
    ch.x_axis.number_format = MONTH_FMT
    ch.x_axis.delete = False
    ch.y_axis.delete = False
    ch.gapWidth = 60
    for k, series in enumerate(ch.series):
        color = colors[k % len(colors)]
        series.graphicalProperties.solidFill = color
        series.graphicalProperties.line.solidFill = color


def _fmt(v: Any) -> str:
    """A configuration value, short: floats to 4 significant digits, nested values inline.

    >>> _fmt(0.47440559), _fmt(115942.41), _fmt({"tp": 1, "recompute": False}), _fmt([1, 2.5])
    ('0.4744', '115,942', 'tp=1, recompute=false', '1; 2.5')
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "; ".join(_fmt(x) for x in v)
    return str(v)


def _config(cfg: dict[str, Any]) -> str:
    """A configuration dict as text: scalars on the first line, nested values below.

    >>> _config({"tp": 4, "batch": 32})
    'tp=4, batch=32'
    >>> print(_config({"precision": "fp8", "replicas": [{"gpu": "h100", "n": 2}], "layout": {"tp": 2}}))
    precision=fp8
    replicas:
      gpu=h100, n=2
    layout: tp=2
    """
    scalars = [f"{k}={_fmt(v)}" for k, v in cfg.items() if not isinstance(v, (dict, list, tuple))]
    lines = [", ".join(scalars)] if scalars else []
    for k, v in cfg.items():
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            lines.append(f"{k}:")
            lines += [f"  {_fmt(x)}" for x in v]
        elif isinstance(v, (dict, list, tuple)):
            lines.append(f"{k}: {_fmt(v)}")
    return "\n".join(lines)


def build_workbook(plan: Plan, margins: Sequence[str] | None = None) -> Workbook:
    """The report workbook for ``plan`` (in memory).

    ``margins``: lines saying what the plan would cost without each GPU type it buys (from
    :func:`planner.analysis.explain.buy_margins`); the report cannot re-solve, so the caller passes them.
    """
    return _Writer(plan, margins).build()


def write_workbook(plan: Plan, path: str | Path, margins: Sequence[str] | None = None) -> None:
    """Write the report for ``plan`` to ``path`` atomically.

    The whole workbook is built in memory first; then it goes to a temporary file beside
    ``path`` that is renamed over it, so a failure at any point leaves the old file intact.
    The file gets ordinary permissions (not the 0600 of a bare temporary file).
    """
    # every formula's value is stored too: pandas and previews read numbers, not blanks
    atomic_write_bytes(path, save_with_values(build_workbook(plan, margins)))
