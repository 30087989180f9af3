"""The ``Assumptions`` sheet: every figure the plan used, with its source; the values the
live formulas read are yellow inputs, per-GPU server figures are formulas over the server's,
and a missing input is flagged.
"""

from __future__ import annotations

import json
import math
from typing import Any

from openpyxl.styles import Alignment
from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.assumptions import (
    _ARow,
)
from planner.reports.excel.cells import (
    _F_WARN,
    _FILL_INPUT,
    FIRST_ROW,
    HEADER_ROW,
    NUMG,
    PCT2,
    F,
    _finite,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.tables import (
    _Col,
    _fit,
    _header,
    _lines,
    _print_setup,
    _rows,
    _table,
    _title,
    _widths,
)


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


def write_assumptions(ctx: Ctx) -> None:
    """The Assumptions sheet; written last, as the other sheets may add derived rows."""
    ws = ctx.ws["Assumptions"]
    a = ctx.a
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
    rows = [_assumption_row(ctx, i, r) for i, r in enumerate(a.rows)]
    last = _rows(ws, FIRST_ROW, cols, rows)
    for i, r in enumerate(a.rows):
        _style_assumption(ctx, ws, FIRST_ROW + i, i, r)
    _table(ws, "tblAssumptions", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    ws.column_dimensions["C"].width = 22
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")


def _assumption_row(ctx: Ctx, i: int, r: _ARow) -> list[Any]:
    note = {"derived": "from the plan", "missing": "MISSING", "meta": ""}.get(r.note, "")
    if i in ctx.a.used:
        note = f"{note}; formula input" if note else "formula input"
    value: Any = _cell_value(r.value)
    derived = _per_gpu_share(ctx, r)
    if derived is not None:
        value, note = derived
    return [r.group, r.key, value, r.unit, r.source, r.as_of, note]


def _per_gpu_share(ctx: Ctx, r: _ARow) -> tuple[F, str] | None:
    """The per-GPU server figures are derived from the server (price or host watts / slots):
    a formula, so an edited chassis price shows in them too. None for a plan whose per-GPU
    figure is not that share (a plan from before server types)."""
    of = {"server_overhead_usd_per_gpu": "chassis_usd", "host_w_per_gpu": "host_w"}
    if r.key not in of or not _finite(r.value):
        return None
    whole = ctx.a.find([r.group], [of[r.key]])
    slots = ctx.a.find([r.group], ["server_slots"])
    if whole is None or slots is None or not ctx.a.rows[slots].value:
        return None
    share = float(ctx.a.rows[whole].value) / float(ctx.a.rows[slots].value)
    if not math.isclose(share, float(r.value), rel_tol=1e-9, abs_tol=1e-9):
        return None
    formula = F(f"=$C${FIRST_ROW + whole}/$C${FIRST_ROW + slots}")
    return formula, f"derived: {of[r.key]} / server_slots"


def _style_assumption(ctx: Ctx, ws: Worksheet, row: int, i: int, r: _ARow) -> None:
    c = ws.cell(row, 3)
    if i in ctx.a.used:
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
