"""Sheet-level building blocks of the Excel report: the column spec :class:`_Col`, titles,
header rows, section headings, data rows with wrapped-text heights, total rows, Excel
tables, column widths, print setup, and the column ranges and SUMIFS formulas by which one
sheet reads another.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.table import Table, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.cells import (
    _BORDER,
    _F_BOLD,
    _F_HEAD,
    _F_SECTION,
    _F_SUB,
    _F_TITLE,
    _FILL_HEAD,
    _FILL_TOTAL,
    _HEAD_ALIGN,
    _TOP_ALIGN,
    _WRAP,
    FIRST_ROW,
    FONT_NAME,
    F,
    _put,
    _sheet_ref,
)


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
