"""The Excel report: a finance-ready workbook built from a :class:`planner.plan.Plan`.

Every cost in the workbook is a live formula that reproduces the solver's cost definitions
from the figures on the ``Assumptions`` sheet, so finance can change a power price or a unit
price in ONE cell and every total follows:

* ``Purchases``: extended cost = GPUs x (card + server/network share per GPU); the two prices
  reference ``Assumptions`` (``gpu:<id>`` / ``purchase_usd``, ``server_overhead_usd_per_gpu``).
* ``Rentals``: cost = GPU-hours x rate (the rate references ``offer:<id>`` /
  ``usd_per_gpu_hour``). Reserved commitments are rows of kind ``reserved``.
* ``Fleet``: power = pue x usd/kWh x (owned x H x (idle_w + host_w) + busy GPU-h x
  (tdp_w - idle_w)) / 1000 and hosting = owned x usd/GPU-month, per GPU type and month.
* ``Cash flow``: one row per month, SUMIFS over the three detail sheets, total, running total
  and capex budget headroom; ``Summary`` references its total row.

Months are written as real dates (first day of the month, shown ``yyyy-mm``) so that SUMIFS
matches them exactly in Excel and LibreOffice alike. Text from the problem (workload names,
sources, ids) is always written as text, never as a formula.

The workbook-level names ``total_cost_usd`` and ``capex_usd`` point at the two headline cells.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

from planner.plan import Plan

SHEETS = (
    "Summary",
    "Purchases",
    "Rentals",
    "Workloads",
    "Cash flow",
    "Fleet",
    "Assumptions",
    "Charts",
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


def _header(ws: Worksheet, row: int, cols: Sequence[_Col], start_col: int = 1) -> None:
    for j, c in enumerate(cols):
        _put(
            ws,
            row,
            start_col + j,
            c.header,
            font=_F_HEAD,
            fill=_FILL_HEAD,
            align=_HEAD_ALIGN,
            border=_BORDER,
        )
    ws.row_dimensions[row].height = 30


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


class _Writer:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.a = _build_assumptions(plan)
        self.wb = Workbook()
        ws0 = self.wb.active
        ws0.title = SHEETS[0]
        self.ws = {SHEETS[0]: ws0}
        for name in SHEETS[1:]:
            self.ws[name] = self.wb.create_sheet(name)
        self.gpus = self._gpu_ids()
        h = [
            i
            for i, r in enumerate(self.a.rows)
            if r.key == "hours_per_month" and _same(r.value, plan.hours_per_month)
        ]
        self.H = self.a.cell(h[0])  # _build_assumptions guarantees one
        # last data row of each detail table (at least FIRST_ROW: a placeholder row if empty)
        self.p_last = self.r_last = self.f_last = FIRST_ROW
        self.cf_total_row = 0

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

    # -- sheets -----------------------------------------------------------------------
    def purchases(self) -> None:
        ws = self.ws["Purchases"]
        plan = self.plan
        _title(
            ws,
            "Purchases",
            "Extended cost = GPUs x unit price; unit price = card + server/network "
            "share per GPU. Yellow prices on the Assumptions sheet drive every total.",
        )
        cols = [
            _Col("GPU", _fit(10, [p.gpu for p in plan.purchases], 30)),
            _Col("Month", 10, MONTH_FMT),
            _Col("Nodes", 8, NUM0),
            _Col("GPUs", 8, NUM0),
            _Col("Card USD / GPU", 14, USD),
            _Col("Server + network USD / GPU", 16, USD),
            _Col("Unit price USD / GPU", 14, USD),
            _Col("Extended cost USD", 16, USD),
            _Col("Solver's cost USD", 16, USD),
            _Col("Price source", 36, None, wrap=True),
        ]
        _header(ws, HEADER_ROW, cols)
        rows = []
        for r, p in enumerate(plan.purchases, start=FIRST_ROW):
            card = self.a.ref_equal(
                f"gpu:{p.gpu}", "purchase_usd", p.gpu_usd, "USD/GPU", "plan purchase row"
            )
            over = self.a.ref_equal(
                f"gpu:{p.gpu}",
                "server_overhead_usd_per_gpu",
                p.overhead_usd,
                "USD/GPU",
                "plan purchase row",
            )
            src = (
                "Assumptions"
                if card and over
                else "this row (differs from Assumptions: solver's figure)"
            )
            rows.append(
                [
                    p.gpu,
                    _month_value(p.month),
                    p.nodes,
                    p.count,
                    F(f"={card}") if card else p.gpu_usd,
                    F(f"={over}") if over else p.overhead_usd,
                    F(f"=E{r}+F{r}"),
                    F(f"=D{r}*G{r}"),
                    p.total_usd,
                    src,
                ]
            )
        if not rows:
            r = FIRST_ROW
            rows.append(
                ["(no purchases)", None, 0, 0, 0, 0, F(f"=E{r}+F{r}"), F(f"=D{r}*G{r}"), 0, ""]
            )
        self.p_last = _rows(ws, FIRST_ROW, cols, rows)
        for r in range(FIRST_ROW, self.p_last + 1):
            for c in (5, 6):
                if ws.cell(r, c).data_type != "f":
                    ws.cell(r, c).fill = _FILL_INPUT
        tr = self.p_last + 1
        _put(ws, tr, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL)
        _put(ws, tr, 4, F(f"=SUM(D{FIRST_ROW}:D{self.p_last})"), NUM0, _F_BOLD, _FILL_TOTAL)
        _put(ws, tr, 8, F(f"=SUM(H{FIRST_ROW}:H{self.p_last})"), USD, _F_BOLD, _FILL_TOTAL)
        _put(ws, tr, 9, F(f"=SUM(I{FIRST_ROW}:I{self.p_last})"), USD, _F_BOLD, _FILL_TOTAL)
        _table(ws, "tblPurchases", 1, len(cols), HEADER_ROW, self.p_last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")

    def rentals(self) -> None:
        ws = self.ws["Rentals"]
        plan = self.plan
        _title(
            ws,
            "Rentals",
            "Cost = GPU-hours x rate (USD per GPU-hour). Reserved commitments are rows of "
            "kind 'reserved' (workload '(reserved)'), paid whether used or not.",
        )
        cols = [
            _Col("Provider", _fit(10, [x.provider for x in plan.rentals], 24)),
            _Col("Offer", _fit(10, [x.offer for x in plan.rentals], 36)),
            _Col("GPU", _fit(8, [x.gpu for x in plan.rentals], 24)),
            _Col("Kind", 11),
            _Col("Month", 10, MONTH_FMT),
            _Col("Workload", _fit(12, [x.workload for x in plan.rentals], 36)),
            _Col("GPU-hours", 12, NUM0),
            _Col("Rate USD / GPU-h", 12, USD_RATE),
            _Col("Cost USD", 14, USD),
            _Col("Rate source", 30, None, wrap=True),
        ]
        _header(ws, HEADER_ROW, cols)
        rows = []
        for r, x in enumerate(plan.rentals, start=FIRST_ROW):
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
                    "Assumptions"
                    if rate
                    else "this row (differs from Assumptions: solver's figure)",
                ]
            )
        if not rows:
            r = FIRST_ROW
            rows.append(["(no rentals)", "", "", "", None, "", 0, 0, F(f"=G{r}*H{r}"), ""])
        self.r_last = _rows(ws, FIRST_ROW, cols, rows)
        tr = self.r_last + 1
        _put(ws, tr, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL)
        _put(ws, tr, 7, F(f"=SUM(G{FIRST_ROW}:G{self.r_last})"), NUM0, _F_BOLD, _FILL_TOTAL)
        _put(ws, tr, 9, F(f"=SUM(I{FIRST_ROW}:I{self.r_last})"), USD, _F_BOLD, _FILL_TOTAL)
        _table(ws, "tblRentals", 1, len(cols), HEADER_ROW, self.r_last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")

    def fleet(self) -> None:
        ws = self.ws["Fleet"]
        plan = self.plan
        _title(
            ws,
            "Fleet by GPU type and month",
            "Power USD = PUE x USD/kWh x (owned x H x (idle W + host W) "
            "+ busy GPU-h x (TDP W - idle W)) / 1000.  Hosting USD = owned x USD per GPU-month.",
        )
        cols = [
            _Col("GPU", _fit(10, [f.gpu for f in plan.fleet], 30)),
            _Col("Month", 10, MONTH_FMT),
            _Col("Bought", 8, NUM0),
            _Col("Owned", 8, NUM0),
            _Col("Reserved", 9, NUM0),
            _Col("Owned busy GPU-h", 14, NUM0),
            _Col("Rented GPU-h", 12, NUM0),
            _Col("Rented (avg GPUs)", 10, NUM1),
            _Col("Owned utilization", 11, PCT),
            _Col("Peak kW at meter (solver)", 12, NUM1),
            _Col("Power USD", 13, USD),
            _Col("Hosting USD", 13, USD),
        ]
        _header(ws, HEADER_ROW, cols)
        pue = self.site(["pue"], "")
        kwh = self.site(["power_usd_per_kwh"], "USD/kWh")
        host = self.site(["hosting_usd_per_gpu_month"], "USD/GPU-month")
        H = self.H
        rows = []
        for r, f in enumerate(plan.fleet, start=FIRST_ROW):
            tdp = self.gpu_in(f.gpu, "tdp_w", "W")
            idle = self.gpu_in(f.gpu, "idle_w", "W")
            hw = self.gpu_in(f.gpu, "host_w_per_gpu", "W")
            rows.append(
                [
                    f.gpu,
                    _month_value(f.month),
                    f.bought,
                    f.owned,
                    f.reserved,
                    f.owned_busy_gpu_hours,
                    f.rented_gpu_hours,
                    F(f"=G{r}/{H}"),
                    F(f"=IF(D{r}*{H}>0,F{r}/(D{r}*{H}),0)"),
                    f.power_kw,
                    F(f"={pue}*{kwh}*(D{r}*{H}*({idle}+{hw})+F{r}*({tdp}-{idle}))/1000"),
                    F(f"=D{r}*{host}"),
                ]
            )
        if not rows:
            r = FIRST_ROW
            rows.append(["(no fleet)", None, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        self.f_last = _rows(ws, FIRST_ROW, cols, rows)
        tr = self.f_last + 1
        _put(ws, tr, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL)
        for c, fmt in ((3, NUM0), (6, NUM0), (7, NUM0), (11, USD), (12, USD)):
            L = get_column_letter(c)
            _put(ws, tr, c, F(f"=SUM({L}{FIRST_ROW}:{L}{self.f_last})"), fmt, _F_BOLD, _FILL_TOTAL)
        _table(ws, "tblFleet", 1, len(cols), HEADER_ROW, self.f_last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"C{FIRST_ROW}")

    def cash_flow(self) -> None:
        ws = self.ws["Cash flow"]
        plan = self.plan
        _title(
            ws,
            "Cash flow by month",
            "Capex, power, hosting and rentals are SUMIFS over the Purchases, Fleet "
            "and Rentals sheets; headroom = capex budget - cumulative capex.",
        )
        cols = [
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
        ]
        _header(ws, HEADER_ROW, cols)
        budget = self.budget_cell()
        solver_month = {m.month: m.total_usd for m in plan.cash_flow}
        rows = []
        pl, rl, fl = self.p_last, self.r_last, self.f_last
        for r, m in enumerate(plan.months, start=FIRST_ROW):
            crit = f"$A{r}"
            prev_run = f"G{r - 1}+" if r > FIRST_ROW else ""
            prev_cap = f"H{r - 1}+" if r > FIRST_ROW else ""
            rows.append(
                [
                    _month_value(m),
                    F("=" + _sumifs("Purchases", 8, FIRST_ROW, pl, [(2, crit)])),
                    F("=" + _sumifs("Fleet", 11, FIRST_ROW, fl, [(2, crit)])),
                    F("=" + _sumifs("Fleet", 12, FIRST_ROW, fl, [(2, crit)])),
                    F("=" + _sumifs("Rentals", 9, FIRST_ROW, rl, [(5, crit)])),
                    F(f"=SUM(B{r}:E{r})"),
                    F(f"={prev_run}F{r}"),
                    F(f"={prev_cap}B{r}"),
                    F(f"={budget}-H{r}") if budget else "n/a",
                    solver_month.get(m, 0.0),
                    F(f"=F{r}-J{r}"),
                ]
            )
        last = _rows(ws, FIRST_ROW, cols, rows)
        if last < FIRST_ROW:  # a plan without months: one zero row keeps every reference valid
            last = _rows(
                ws,
                FIRST_ROW,
                cols,
                [
                    [
                        "(no months)",
                        0,
                        0,
                        0,
                        0,
                        F(f"=SUM(B{FIRST_ROW}:E{FIRST_ROW})"),
                        0,
                        0,
                        "n/a",
                        0,
                        F(f"=F{FIRST_ROW}-J{FIRST_ROW}"),
                    ]
                ],
            )
        tr = last + 1
        self.cf_total_row = tr
        self.cf_last = last
        _put(ws, tr, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL, border=_TOP)
        for c in range(2, 12):
            L = get_column_letter(c)
            v = F(f"=SUM({L}{FIRST_ROW}:{L}{last})") if c in (2, 3, 4, 5, 6, 10) else None
            if c == 11:
                v = F(f"=F{tr}-J{tr}")
            if c == 9 and budget:
                v = F(f"={budget}-B{tr}")
            _put(ws, tr, c, v, cols[c - 1].fmt, _F_BOLD, _FILL_TOTAL, border=_TOP)
        _table(ws, "tblCashFlow", 1, len(cols), HEADER_ROW, last)
        _widths(ws, cols)
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"B{FIRST_ROW}")

    def workloads(self) -> None:
        ws = self.ws["Workloads"]
        plan = self.plan
        _title(
            ws,
            "Workloads",
            "Chosen configuration, GPUs, cost and cost share per workload (the solver's "
            "attribution); below: predicted vs target for each key.",
        )
        keys = [k for w in plan.workloads for k in [*w.target, *w.predicted, *w.slack]]
        cols = [
            _Col("Workload", _fit(12, [w.name for w in plan.workloads], 28), wrap=True),
            _Col("Kind", 7),
            _Col(
                "Model",
                _fit(
                    10, [w.model for w in plan.workloads] + keys + [d.gpu for d in plan.dropped], 24
                ),
                wrap=True,
            ),
            _Col("GPUs", 12, NUM0),
            _Col(
                "Configuration",
                _fit(22, [ln for w in plan.workloads for ln in _config(w.config).split("\n")], 50),
                wrap=True,
            ),
            _Col("GPU types", _fit(12, [", ".join(w.gpu) for w in plan.workloads], 22), wrap=True),
            _Col("Meets targets", 9),
            _Col("Cost USD", 14, USD),
            _Col("Cost share", 9, PCT),
            _Col("Tokens", 15, NUM0),
            _Col("USD per 1M tokens", 11, USD_CENTS),
            _Col("Solver's USD per 1M tokens", 12, USD_CENTS),
        ]
        _header(ws, HEADER_ROW, cols)
        rows = []
        for r, w in enumerate(plan.workloads, start=FIRST_ROW):
            per_m = F(f'=IF(J{r}>0,H{r}/J{r}*1000000,"")') if w.kind == "serve" else None
            rows.append(
                [
                    w.name,
                    w.kind,
                    w.model,
                    w.gpus,
                    _config(w.config),
                    ", ".join(w.gpu),
                    "yes" if w.meets_target else "NO",
                    _num(w.cost_usd),
                    _num(w.cost_share),
                    _num(w.tokens),
                    per_m,
                    _num(w.usd_per_1m_tokens) if w.usd_per_1m_tokens is not None else None,
                ]
            )
        if not rows:
            rows.append(["(no workloads)", "", "", 0, "", "", "", 0, 0, 0, None, None])
        last = _rows(ws, FIRST_ROW, cols, rows)
        for r in range(FIRST_ROW, last + 1):
            if ws.cell(r, 7).value == "NO":
                ws.cell(r, 7).font = _F_WARN
        tr = last + 1
        _put(ws, tr, 1, "Total", font=_F_BOLD, fill=_FILL_TOTAL)
        _put(ws, tr, 8, F(f"=SUM(H{FIRST_ROW}:H{last})"), USD, _F_BOLD, _FILL_TOTAL)
        _put(ws, tr, 9, F(f"=SUM(I{FIRST_ROW}:I{last})"), PCT, _F_BOLD, _FILL_TOTAL)
        _table(ws, "tblWorkloads", 1, len(cols), HEADER_ROW, last)

        # predicted vs target, one row per workload and key
        top = tr + 3
        _put(ws, top - 1, 1, "Predicted vs target", font=_F_SECTION)
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
        trows = []
        for w in plan.workloads:
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

        if plan.dropped:
            top = tlast + 3
            _put(ws, top - 1, 1, "Configurations the solver dropped", font=_F_SECTION)
            kinds = {w.name: w.kind for w in plan.workloads}
            dcols = [
                cols[0],
                cols[1],
                _Col("GPU", cols[2].width, wrap=True),
                _Col("Configuration", cols[3].width, wrap=True),
                _Col("Reason", cols[4].width, wrap=True),
            ]
            _header(ws, top, dcols)
            dlast = _rows(
                ws,
                top + 1,
                dcols,
                [
                    [d.workload, kinds.get(d.workload, ""), d.gpu, d.config, d.reason]
                    for d in plan.dropped
                ],
            )
            _table(ws, "tblDropped", 1, len(dcols), top, dlast)
        _widths(ws, cols)
        _print_setup(ws, None, f"B{FIRST_ROW}")

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
        rows = []
        for i, r in enumerate(a.rows):
            v = r.value
            if v is None:
                v = ""
            elif isinstance(v, (list, dict, tuple)):
                v = json.dumps(v, sort_keys=True, default=str)
            elif isinstance(v, bool):
                v = "true" if v else "false"
            elif not isinstance(v, (int, float)):
                v = str(v)
            note = {"derived": "from the plan", "missing": "MISSING", "meta": ""}.get(r.note, "")
            if i in a.used:
                note = f"{note}; formula input" if note else "formula input"
            rows.append([r.group, r.key, v, r.unit, r.source, r.as_of, note])
        last = _rows(ws, FIRST_ROW, cols, rows)
        for i, r in enumerate(a.rows):
            c = ws.cell(FIRST_ROW + i, 3)
            if i in a.used:
                c.fill = _FILL_INPUT
            if r.key in ("gap",) and _finite(r.value):
                c.number_format = PCT2
            if r.note == "missing":
                ws.cell(FIRST_ROW + i, 7).font = _F_WARN
            if isinstance(r.value, str) and len(r.value) > 20:
                c.alignment = Alignment(horizontal="left", wrap_text=True, vertical="top")
                height = 13 * _lines(r.value, 22) + 1
                cur = ws.row_dimensions[FIRST_ROW + i].height or 0
                ws.row_dimensions[FIRST_ROW + i].height = max(cur, height)
        _table(ws, "tblAssumptions", 1, len(cols), HEADER_ROW, last)
        _widths(ws, cols)
        ws.column_dimensions["C"].width = 22
        _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")

    def summary(self) -> None:
        ws = self.ws["Summary"]
        plan = self.plan
        t = plan.totals
        cf = self.cf_total_row
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

        r = 5
        _put(ws, r, 1, "Solve", font=_F_SECTION)
        status_font = _F_BOLD if plan.status in ("optimal", "feasible") else _F_WARN
        info: list[tuple[str, Any, str | None, Font | None]] = [
            ("Status", plan.status, None, status_font),
            ("Solver", plan.solver, None, None),
            ("Optimality gap", _num(plan.gap) if plan.gap is not None else "n/a", PCT2, None),
            ("Solve time (s)", _num(plan.solve_seconds), NUM1, None),
        ]
        if plan.message:
            info.append(("Message", plan.message, None, None))
        for label, value, fmt, font in info:
            r += 1
            _put(ws, r, 1, label)
            _put(ws, r, 2, value, fmt, font=font, align=Alignment(horizontal="left"))

        r += 2
        _put(ws, r, 1, "Cost over the horizon", font=_F_SECTION)
        r += 1
        hdr = ["Item", "Workbook (live)", "Solver", "Difference", "Where the number comes from"]
        for j, h in enumerate(hdr, start=1):
            _put(ws, r, j, h, font=_F_HEAD, fill=_FILL_HEAD, align=_HEAD_ALIGN, border=_BORDER)
        cfr = lambda col: _sheet_ref("Cash flow", f"${col}${cf}")  # noqa: E731
        rental_kind = _col_range("Rentals", 4, FIRST_ROW, self.r_last)
        rental_usd = _col_range("Rentals", 9, FIRST_ROW, self.r_last)
        budget = self.budget_cell()
        lines: list[tuple[str, Any, Any, str, bool]] = [
            (
                "Total cost",
                F(f"={cfr('F')}"),
                t.total_usd,
                "Cash flow total: capex + power + hosting + rentals",
                True,
            ),
            (
                "Capex (purchases)",
                F(f"={cfr('B')}"),
                t.capex_usd,
                "Purchases: GPUs x (card + server/network)",
                True,
            ),
            (
                "Power",
                F(f"={cfr('C')}"),
                t.power_usd,
                "Fleet: PUE x USD/kWh x energy of the owned fleet",
                False,
            ),
            (
                "Hosting",
                F(f"={cfr('D')}"),
                t.hosting_usd,
                "Fleet: owned GPUs x hosting USD per GPU-month",
                False,
            ),
            (
                "Rentals (on-demand, spot, reserved)",
                F(f"={cfr('E')}"),
                t.rental_usd,
                "Rentals: GPU-hours x rate",
                False,
            ),
            (
                "  of which reserved commitments",
                F(f'=SUMIFS({rental_usd},{rental_kind},"reserved")'),
                t.reserved_usd,
                "Rentals rows of kind 'reserved'",
                False,
            ),
        ]
        first_line = r + 1
        rows_at: dict[str, int] = {}
        for label, live, solver, where, key in lines:
            r += 1
            rows_at[label] = r
            font = _F_BIG if key else _F_BASE
            fill = _FILL_KEY if key else None
            _put(ws, r, 1, label, font=_F_BOLD if key else _F_BASE, fill=fill, border=_BORDER)
            _put(ws, r, 2, live, USD, font=font, fill=fill, border=_BORDER)
            _put(ws, r, 3, _num(solver), USD, border=_BORDER)
            _put(ws, r, 4, F(f"=B{r}-C{r}"), USD_CENTS, border=_BORDER)
            _put(ws, r, 5, where, font=_F_SUB, border=_BORDER)
        total_row, capex_row = first_line, first_line + 1
        p, h, rr = (
            rows_at["Power"],
            rows_at["Hosting"],
            rows_at["Rentals (on-demand, spot, reserved)"],
        )
        r += 1
        self.opex_row = r
        _put(ws, r, 1, "Opex (power + hosting + rentals)", font=_F_BOLD, border=_BORDER)
        _put(ws, r, 2, F(f"=B{p}+B{h}+B{rr}"), USD, font=_F_BOLD, border=_BORDER)
        _put(ws, r, 3, _num(t.power_usd + t.hosting_usd + t.rental_usd), USD, border=_BORDER)
        _put(ws, r, 4, F(f"=B{r}-C{r}"), USD_CENTS, border=_BORDER)
        _put(ws, r, 5, "Power + hosting + rentals", font=_F_SUB, border=_BORDER)
        self.split_rows = (capex_row, p, h, rr)

        r += 2
        _put(ws, r, 1, "Budget", font=_F_SECTION)
        r += 1
        if budget:
            _put(ws, r, 1, "Capex budget")
            _put(ws, r, 2, F(f"={budget}"), USD)
            _put(ws, r, 5, "Assumptions: budget / capex_usd", font=_F_SUB)
            r += 1
            _put(ws, r, 1, "Capex headroom (budget - capex)")
            _put(ws, r, 2, F(f"=B{r - 1}-B{capex_row}"), USD, font=_F_BOLD)
            _put(ws, r, 5, "Negative = over budget", font=_F_SUB)
            r += 1
            _put(ws, r, 1, "Capex used of budget")
            _put(ws, r, 2, F(f'=IF(B{r - 2}>0,B{capex_row}/B{r - 2},"n/a")'), PCT)
        else:
            _put(ws, r, 1, "Capex budget")
            _put(ws, r, 2, "none")
        if t.total_budget_usd is not None and _finite(t.total_budget_usd):
            i = self.a.find(["budget"], ["total_usd", "total_budget_usd"])
            if i is None:
                i = self.a.add(
                    _ARow(
                        "budget",
                        "total_usd",
                        t.total_budget_usd,
                        "USD",
                        "plan.totals.total_budget_usd",
                        note="derived",
                    )
                )
            r += 1
            _put(ws, r, 1, "Total budget")
            _put(ws, r, 2, F(f"={self.a.cell(i)}"), USD)
            r += 1
            _put(ws, r, 1, "Total headroom (budget - total)")
            _put(ws, r, 2, F(f"=B{r - 1}-B{total_row}"), USD, font=_F_BOLD)

        # what to buy
        r += 2
        _put(ws, r, 1, "What to buy", font=_F_SECTION)
        r += 1
        buy_hdr = ["GPU", "GPUs bought", "Nodes", "Capex USD", "Months bought"]
        for j, hname in enumerate(buy_hdr, start=1):
            _put(ws, r, j, hname, font=_F_HEAD, fill=_FILL_HEAD, align=_HEAD_ALIGN, border=_BORDER)
        bought: dict[str, list[str]] = {}
        for pch in plan.purchases:
            bought.setdefault(pch.gpu, []).append(pch.month)
        if not bought:
            r += 1
            _put(ws, r, 1, "Nothing: no purchases in this plan", border=_BORDER)
        for g, months in bought.items():
            r += 1
            crit = [(1, f"$A{r}")]
            _put(ws, r, 1, g, border=_BORDER)
            _put(
                ws,
                r,
                2,
                F("=" + _sumifs("Purchases", 4, FIRST_ROW, self.p_last, crit)),
                NUM0,
                border=_BORDER,
            )
            _put(
                ws,
                r,
                3,
                F("=" + _sumifs("Purchases", 3, FIRST_ROW, self.p_last, crit)),
                NUM0,
                border=_BORDER,
            )
            _put(
                ws,
                r,
                4,
                F("=" + _sumifs("Purchases", 8, FIRST_ROW, self.p_last, crit)),
                USD,
                border=_BORDER,
            )
            _put(ws, r, 5, ", ".join(dict.fromkeys(months)), border=_BORDER)

        # what to rent
        r += 2
        _put(ws, r, 1, "What to rent", font=_F_SECTION)
        r += 1
        rent_hdr = ["Offer", "GPU-hours", "Avg GPUs / month", "Cost USD", "Provider, GPU, kind"]
        for j, hname in enumerate(rent_hdr, start=1):
            _put(ws, r, j, hname, font=_F_HEAD, fill=_FILL_HEAD, align=_HEAD_ALIGN, border=_BORDER)
        offers: dict[str, str] = {}
        spent: dict[str, float] = {}
        for x in plan.rentals:
            offers.setdefault(x.offer, f"{x.provider}, {x.gpu}, {x.kind.replace('_', '-')}")
            spent[x.offer] = spent.get(x.offer, 0.0) + (x.usd if _finite(x.usd) else 0.0)
        offers = dict(sorted(offers.items(), key=lambda kv: -spent[kv[0]]))  # biggest spend first
        if not offers:
            r += 1
            _put(ws, r, 1, "Nothing: no rentals in this plan", border=_BORDER)
        nm = max(1, len(plan.months))
        for o, desc in offers.items():
            r += 1
            crit = [(2, f"$A{r}")]
            _put(ws, r, 1, o, border=_BORDER)
            _put(
                ws,
                r,
                2,
                F("=" + _sumifs("Rentals", 7, FIRST_ROW, self.r_last, crit)),
                NUM0,
                border=_BORDER,
            )
            _put(ws, r, 3, F(f"=B{r}/({self.H}*{nm})"), NUM1, border=_BORDER)
            _put(
                ws,
                r,
                4,
                F("=" + _sumifs("Rentals", 9, FIRST_ROW, self.r_last, crit)),
                USD,
                border=_BORDER,
            )
            _put(ws, r, 5, desc, border=_BORDER)
        if plan.reservations:
            r += 2
            _put(ws, r, 1, "Reserved commitments (paid whether used or not)", font=_F_SECTION)
            r += 1
            for j, hname in enumerate(
                ["Offer", "GPUs", "Term (months)", "Cost USD (solver)", "Start, provider, rate"],
                start=1,
            ):
                _put(
                    ws,
                    r,
                    j,
                    hname,
                    font=_F_HEAD,
                    fill=_FILL_HEAD,
                    align=_HEAD_ALIGN,
                    border=_BORDER,
                )
            for res in plan.reservations:
                r += 1
                _put(ws, r, 1, res.offer, border=_BORDER)
                _put(ws, r, 2, res.gpus, NUM0, border=_BORDER)
                _put(ws, r, 3, res.term_months, NUM0, border=_BORDER)
                _put(ws, r, 4, _num(res.usd), USD, border=_BORDER)
                _put(
                    ws,
                    r,
                    5,
                    f"from {res.start_month}, {res.provider}, ${res.usd_per_gpu_hour:,.3f}/GPU-h",
                    border=_BORDER,
                )

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
            "PUE, hosting, budget) live on the Assumptions sheet. 'Solver' is the plan's own figure.",
            font=_F_SUB,
        )

        for col, w in zip("ABCDE", (38, 17, 17, 14, 52), strict=True):
            ws.column_dimensions[col].width = w
        for name, row in (("total_cost_usd", total_row), ("capex_usd", capex_row)):
            self.wb.defined_names[name] = DefinedName(
                name, attr_text=_sheet_ref("Summary", f"$B${row}")
            )
        _print_setup(ws, None, None)
        ws.sheet_view.showGridLines = False

    def charts(self) -> None:
        ws = self.ws["Charts"]
        plan = self.plan
        _title(
            ws,
            "Charts",
            "Monthly spend by kind (Cash flow), fleet by GPU type (Fleet) and cost split (Summary). "
            "The charts follow every edit of the Assumptions.",
        )
        cf = self.ws["Cash flow"]
        first, last = FIRST_ROW, self.cf_last

        spend = BarChart()
        spend.type = "col"
        spend.grouping = "stacked"
        spend.overlap = 100
        spend.title = "Monthly spend by kind (USD)"
        spend.add_data(
            Reference(cf, min_col=2, max_col=5, min_row=HEADER_ROW, max_row=last),
            titles_from_data=True,
        )
        spend.set_categories(Reference(cf, min_col=1, min_row=first, max_row=last))
        _style_chart(spend, '"$"#,##0', _KIND_COLORS)
        ws.add_chart(spend, "A4")

        s = self.ws["Summary"]
        split = BarChart()
        split.type = "bar"
        split.title = "Cost split (USD)"
        capex_row, p, h, rr = self.split_rows
        # capex, power, hosting and rentals are contiguous rows on Summary
        split.add_data(
            Reference(s, min_col=2, min_row=capex_row, max_row=rr), titles_from_data=False
        )
        split.set_categories(Reference(s, min_col=1, min_row=capex_row, max_row=rr))
        _style_chart(split, '"$"#,##0', ["1F4E79"])
        split.width = 13
        split.legend = None
        split.x_axis.scaling.orientation = "maxMin"  # capex on top, as on Summary
        split.y_axis.crosses = "max"  # keeps the value axis at the bottom
        split.y_axis.majorGridlines = None
        split.dataLabels = DataLabelList()
        split.dataLabels.showVal = True
        for flag in (
            "showPercent",
            "showCatName",
            "showSerName",
            "showLegendKey",
            "showLeaderLines",
        ):
            setattr(split.dataLabels, flag, False)
        split.dataLabels.numFmt = '"$"#,##0'
        ws.add_chart(split, "K4")

        # fleet helper table (live: SUMIFS over Fleet), below the charts
        hc = 1
        top = 44
        _put(
            ws,
            top - 1,
            hc,
            "Chart data: fleet by GPU type, owned GPUs and rented (average GPUs in use)",
            font=_F_SECTION,
        )
        fcols = [_Col("Month", 10, MONTH_FMT)]
        for g in self.gpus:
            fcols += [_Col(f"{g} owned", 11, NUM1), _Col(f"{g} rented", 11, NUM1)]
        _header(ws, top, fcols, start_col=hc)
        frows = []
        for k in range(len(plan.months)):
            rr_ = top + 1 + k
            row: list[Any] = [F(f"={_sheet_ref('Cash flow', f'$A${FIRST_ROW + k}')}")]
            for g in self.gpus:
                crit = [(1, _q(g)), (2, f"${get_column_letter(hc)}{rr_}")]
                row.append(F("=" + _sumifs("Fleet", 4, FIRST_ROW, self.f_last, crit)))
                row.append(F("=" + _sumifs("Fleet", 8, FIRST_ROW, self.f_last, crit)))
            frows.append(row)
        flast = _rows(ws, top + 1, fcols, frows, start_col=hc)
        if self.gpus and plan.months:
            fleet = BarChart()
            fleet.type = "col"
            fleet.grouping = "stacked"
            fleet.overlap = 100
            fleet.title = "Fleet: owned vs rented GPUs"
            fleet.add_data(
                Reference(
                    ws, min_col=hc + 1, max_col=hc + len(fcols) - 1, min_row=top, max_row=flast
                ),
                titles_from_data=True,
            )
            fleet.set_categories(Reference(ws, min_col=hc, min_row=top + 1, max_row=flast))
            colors = [c for k in range(len(self.gpus)) for c in _GPU_COLORS[k % len(_GPU_COLORS)]]
            _style_chart(fleet, "#,##0", colors)
            ws.add_chart(fleet, "A23")
        ws.column_dimensions[get_column_letter(hc)].width = 10
        for j in range(1, len(fcols)):
            ws.column_dimensions[get_column_letter(hc + j)].width = 10
        ws.row_breaks.append(Break(id=top - 2))  # the charts on page 1, their data after
        _print_setup(ws, f"{top}:{top}", None)
        ws.sheet_view.showGridLines = False

    def build(self) -> Workbook:
        # detail sheets first: the summary and cash flow reference their last rows
        self.purchases()
        self.rentals()
        self.fleet()
        self.cash_flow()
        self.workloads()
        self.summary()
        self.charts()
        self.assumptions()  # last: the other sheets may add derived rows
        wb = self.wb
        wb.calculation.fullCalcOnLoad = True
        wb.properties.title = _text(f"GPU procurement plan: {self.plan.problem_name}")
        wb.properties.creator = _text(f"gpu-planner {self.plan.planner_version}")
        return wb


_KIND_COLORS = ["1F4E79", "ED7D31", "A5A5A5", "70AD47"]  # capex, power, hosting, rentals
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


def build_workbook(plan: Plan) -> Workbook:
    """The report workbook for ``plan`` (in memory)."""
    return _Writer(plan).build()


def _file_mode(path: Path) -> int:
    """The mode a new file at ``path`` gets: the old file's, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask is process-wide, racy in threads)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_workbook(plan: Plan, path: str | Path) -> None:
    """Write the report for ``plan`` to ``path`` atomically.

    The whole workbook is built in memory first; then it goes to a temporary file beside
    ``path`` that is renamed over it, so a failure at any point leaves the old file intact.
    The file gets ordinary permissions (not the 0600 of a bare temporary file).
    """
    wb = build_workbook(plan)
    buf = io.BytesIO()
    wb.save(buf)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(buf.getvalue())
            fh.flush()
            os.fchmod(fh.fileno(), _file_mode(p))
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
