"""Cell-level building blocks of the Excel report: number formats, fonts and fills, the
formula class :class:`F` (the only thing ever written as a formula), and :func:`_put`, which
writes one cell safely (problem text is always text), with the small value helpers the
sheets share (month dates, sheet-qualified references, SUMIFS criteria and literals).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import weakref
from dataclasses import dataclass
from typing import Any

from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE, Cell
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.styles.cell_style import StyleArray
from openpyxl.workbook.workbook import Workbook
from openpyxl.worksheet.worksheet import Worksheet

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
    _style(cell, font or _F_BASE, fmt, fill, align, border)
    return cell


# Per workbook: (the cell's style before, the style objects asked for) -> the style after.
# openpyxl hashes each style object on every assignment (most of a large report's time);
# the first cell with a combination is styled as before, the others copy its result, so the
# workbook's style tables and every cell's style are the same as styling each cell.
_STYLE_CACHE: weakref.WeakKeyDictionary[Workbook, dict[tuple[Any, ...], tuple[Any, ...]]] = (
    weakref.WeakKeyDictionary()
)


def _style(
    cell: Cell,
    font: Font,
    fmt: str | None,
    fill: PatternFill | None,
    align: Alignment | None,
    border: Border | None,
) -> None:
    cache = _STYLE_CACHE.setdefault(cell.parent.parent, {})
    before = None if cell._style is None else tuple(cell._style)
    key = (before, id(font), fmt, id(fill), id(align), id(border))
    hit = cache.get(key)
    if hit is not None:
        cell._style = StyleArray(hit[0])
        return
    cell.font = font
    if fmt:
        cell.number_format = fmt
    if fill:
        cell.fill = fill
    if align:
        cell.alignment = align
    if border:
        cell.border = border
    # the objects are kept with the result so that their ids are never reused while cached
    cache[key] = (tuple(cell._style), font, fill, align, border)


def _month_value(label: str) -> Any:
    d = month_date(label)
    return d if d is not None else label


def _num(x: float | None) -> Any:
    return x if _finite(x) else "n/a"


def _q(s: str) -> str:
    """A string literal for a formula (quotes doubled).

    >>> print(_q('a"b'))
    "a""b"
    """
    return '"' + s.replace('"', '""') + '"'


def _exact(text: str) -> str:
    """A SUMIFS criterion matching ``text`` exactly: a leading ``=`` so the text is never read
    as an operator, and ``~`` before Excel's wildcards ``* ? ~``. It is written as TEXT into a
    hidden key column (never into a formula: names come from the problem file).

    >>> print(_exact("a*b"))
    =a~*b
    """
    return "=" + re.sub(r"([*?~])", r"~\1", text)
