"""The what-if workbook: a ``What-if`` table (one row per scenario), charts against each
varied parameter, and the base plan's sheets (built by :func:`planner.reports.excel.build_workbook`)
for reference. Written atomically (temp file beside the target, then ``os.replace``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from openpyxl import Workbook
from openpyxl.chart import LineChart, Reference, ScatterChart, Series
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.table import Table, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet

from planner.plan.data import atomic_write_bytes
from planner.reports.xlsx_cache import save_with_values

if TYPE_CHECKING:
    from planner.analysis.whatif import ScenarioResult, Vary, WhatIf

SHEET = "What-if"
CHART_SHEET = "What-if charts"
USD = '"$"#,##0;[Red]-"$"#,##0'
RATE = '"$"#,##0.000'
PCT = "0.0%"
_F = Font(name="Arial", size=10)
_F_TITLE = Font(name="Arial", size=15, bold=True, color="1F3864")
_F_SUB = Font(name="Arial", size=9, italic=True, color="595959")
_F_HEAD = Font(name="Arial", size=10, bold=True, color="FFFFFF")
_F_BOLD = Font(name="Arial", size=10, bold=True)
_FILL_HEAD = PatternFill("solid", fgColor="1F3864")
_HEAD_ROW = 4
_COLORS = [
    "1F4E79",
    "C55A11",
    "548235",
    "7030A0",
    "BF8F00",
    "2F5597",
    "C00000",
    "00B0F0",
    "7F7F7F",
    "FFC000",
]


def _num(x: Any) -> Any:
    return x if x is None or isinstance(x, int | float | str | bool) else str(x)


def _text(s: str) -> str:
    """Strip control characters openpyxl refuses; cap the length Excel accepts."""
    s = "".join(ch for ch in s if ch in "\n\t" or ord(ch) >= 32)
    return s[:32000]


def _put(ws: Worksheet, r: int, c: int, v: Any, fmt: str | None = None, font: Font = _F) -> None:
    """Write one cell; a string is always text, never a formula (``=HYPERLINK(...)`` in a
    scenario message or a varied value stays a string)."""
    if isinstance(v, str):
        cell = ws.cell(r, c)
        cell.value = _text(v)
        cell.data_type = "s"
        if cell.value.startswith(("=", "+", "-", "@")):
            cell.quotePrefix = True
    else:
        cell = ws.cell(r, c, _num(v))
    cell.font = font
    if fmt:
        cell.number_format = fmt


def _headers(ws: Worksheet, row: int, names: Sequence[str], col: int = 1) -> None:
    for j, h in enumerate(names):
        cell = ws.cell(row, col + j, h)
        cell.font = _F_HEAD
        cell.fill = _FILL_HEAD
        cell.alignment = Alignment(wrap_text=True, vertical="center", horizontal="center")
    ws.row_dimensions[row].height = 30


def _unique(names: list[str]) -> list[str]:
    """Excel table headers must be unique, non-empty strings."""
    out: list[str] = []
    for n in names:
        n = n or "column"
        m, k = n, 2
        while m.lower() in (x.lower() for x in out):
            m, k = f"{n} ({k})", k + 1
        out.append(m)
    return out


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


_Column = tuple[str, str | None, float]  # header, number format, width


def _scenario_sheet(wb: Workbook, res: WhatIf, note: str | None) -> None:
    ws = wb.create_sheet(SHEET, 0)
    keys = [v.key for v in res.varies]
    gpus = sorted({g for r in res.results for g in r.bought})
    _put(ws, 1, 1, f"What-if: {Path(res.base.path).name}", font=_F_TITLE)
    _put(ws, 2, 1, _scenario_subtitle(res, note), font=_F_SUB)
    cols = _scenario_cols(keys, gpus)
    _headers(ws, _HEAD_ROW, _unique([c[0] for c in cols]))
    r = _HEAD_ROW
    for r, s in enumerate(res.results, start=_HEAD_ROW + 1):
        row = _scenario_row(s, keys, gpus)
        for j, (v, (_, fmt, _w)) in enumerate(zip(row, cols, strict=True), start=1):
            _put(ws, r, j, v, fmt)
    for j, (_, _, w) in enumerate(cols, start=1):
        ws.column_dimensions[get_column_letter(j)].width = w
    _scenario_table(ws, len(cols), r)
    ws.freeze_panes = ws.cell(_HEAD_ROW + 1, 2 + len(keys))
    ws.sheet_view.zoomScale = 90
    _print_wide(ws, f"{_HEAD_ROW}:{_HEAD_ROW}")


def _print_wide(ws: Worksheet, title_rows: str | None) -> None:
    """Landscape, every column on the page width (pages run down), header rows repeated."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.oddFooter.left.text = "&A"
    ws.oddFooter.right.text = "Page &P of &N"
    if title_rows:
        ws.print_title_rows = title_rows


def _scenario_subtitle(res: WhatIf, note: str | None) -> str:
    varied = "; ".join(
        f"{v.key} = {', '.join(f'{x:g}' if isinstance(x, float) else str(x) for x in v.values)}"
        for v in res.varies
    )
    ok = sum(1 for r in res.results if r.ok)
    from planner.analysis.sweep import summary_line  # no PuLP in a report

    sub = (
        f"{len(res.results)} scenarios ({ok} solved) in {res.seconds:.1f} s: "
        f"{summary_line(res.results)}. Varied: {varied}. Each row keeps the cheapest of its "
        "own plan and the base's and a neighbour's purchases re-planned there; its gap is to "
        "its own solve's lower bound. The other sheets are the base plan (the problem file "
        "as written)."
    )
    return sub + " " + note if note else sub


def _scenario_cols(keys: Sequence[str], gpus: Sequence[str]) -> list[_Column]:
    cols: list[_Column] = [("#", "0", 5)]
    cols += [(k, None, max(10, len(k) * 1.1)) for k in keys]
    cols += [
        ("status", None, 11),
        ("gap", PCT, 8),
        ("present value (USD)", USD, 13),
        ("base purchases re-planned (USD)", USD, 14),
        ("total (USD)", USD, 13),
        ("capex (USD)", USD, 12),
        ("power (USD)", USD, 11),
        ("hosting (USD)", USD, 11),
        ("rental (USD)", USD, 12),
    ]
    cols += [(f"bought {g}", "0", 11) for g in gpus]
    cols += [
        ("owned GPU-h", "#,##0", 12),
        ("rented GPU-h", "#,##0", 12),
        ("rented share", PCT, 10),
        ("USD per 1M tokens (serving)", RATE, 13),
        ("purchases of", None, 14),
        ("gap measured against", None, 40),
        ("message", None, 60),
    ]
    return cols


def _scenario_row(s: ScenarioResult, keys: Sequence[str], gpus: Sequence[str]) -> list[Any]:
    """One scenario in the columns of :func:`_scenario_cols`; a failed one leaves its fleet blank."""
    t = s.totals or {}
    row: list[Any] = [s.index + 1] + [s.params.get(k) for k in keys] + [s.status]
    row += [
        s.gap if s.ok else None,
        s.objective_usd if s.ok else None,
        s.base_plan_usd,
        t.get("total_usd"),
        t.get("capex_usd"),
        t.get("power_usd"),
        t.get("hosting_usd"),
        t.get("rental_usd"),
    ]
    row += [s.bought.get(g, 0) if s.ok else None for g in gpus]
    row += [
        sum(s.owned_gpu_hours.values()) if s.ok else None,
        sum(s.rented_gpu_hours.values()) if s.ok else None,
        s.rented_share,
        s.usd_per_1m_tokens,
        s.kept if s.ok else None,
        (s.bound or "no bound proven") if s.ok else None,
        # the first line only: the table keeps one line per scenario
        ""
        if s.ok and s.status == "optimal"
        else (s.message or "").splitlines()[0]
        if s.message
        else "",
    ]
    return row


def _scenario_table(ws: Worksheet, ncols: int, last_written: int) -> None:
    last = max(last_written, _HEAD_ROW + 1)
    if last_written == _HEAD_ROW:  # a table needs a data row
        _put(ws, last, 1, None)
    tab = Table(displayName="WhatIfScenarios", ref=f"A{_HEAD_ROW}:{get_column_letter(ncols)}{last}")
    tab.tableStyleInfo = TableStyleInfo(name="TableStyleMedium2", showRowStripes=True)
    ws.add_table(tab)


def _value_label(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


class _Metric(NamedTuple):
    """A figure charted against each varied parameter."""

    name: str
    value: Callable[[ScenarioResult], Any]
    fmt: str  # of the data cells
    axis_fmt: str
    share: bool  # a fraction: the axis spans 0..1 whatever the data


_METRICS = (
    _Metric(
        "total cost (USD)", lambda r: (r.totals or {}).get("total_usd"), USD, '"$"#,##0', False
    ),
    _Metric("rented share of GPU-hours", lambda r: r.rented_share, PCT, "0%", True),
)


def _pivot(
    results: Sequence[ScenarioResult],
    x_key: str,
    s_key: str | None,
    fixed: dict[str, Any],
    metric: Callable[[ScenarioResult], Any],
) -> dict[tuple[Any, Any], Any]:
    """{(x, s): metric} over the scenarios matching ``fixed``."""
    out: dict[tuple[Any, Any], Any] = {}
    for r in results:
        if any(r.params.get(k) != v for k, v in fixed.items()):
            continue
        out[(r.params.get(x_key), r.params.get(s_key) if s_key else None)] = metric(r)
    return out


def _chart_sheet(wb: Workbook, res: WhatIf) -> None:
    varies = res.varies
    if not varies or not res.results:
        return
    ws = wb.create_sheet(CHART_SHEET, 1)
    _put(ws, 1, 1, "What-if charts", font=_F_TITLE)
    _put(
        ws,
        2,
        1,
        "Total cost and rented share (rented / (owned busy + rented) GPU-hours) against each varied "
        "parameter; the tables beside each chart are its data. Failed scenarios are gaps.",
        font=_F_SUB,
    )
    # the charts sit right of the widest data table
    widest = max(1 + (len(v.values) if len(varies) > 1 else 1) for v in varies)
    anchor_col = get_column_letter(
        max(widest, 1 + max((len(o.values) for o in varies[:2]), default=1)) + 2
    )
    row = 4
    for xv in varies:
        row = _charts_against(ws, res.results, varies, xv, row, anchor_col)
    ws.column_dimensions["A"].width = 14
    for j in range(2, 2 + max(len(v.values) for v in varies) + 1):
        ws.column_dimensions[get_column_letter(j)].width = 13
    _print_wide(ws, None)


def _charts_against(
    ws: Worksheet,
    results: Sequence[ScenarioResult],
    varies: Sequence[Vary],
    xv: Vary,
    row: int,
    anchor_col: str,
) -> int:
    """Every metric against ``xv``, one series per value of the next parameter, the rest at
    their first value; each chart beside its data table. Returns the next free row."""
    others = [v for v in varies if v is not xv]
    sv = others[0] if others else None
    fixed = {v.key: v.values[0] for v in others[1:]}
    s_vals: list[Any] = sv.values if sv else [None]
    n = len(xv.values)
    for metric in _METRICS:
        data = _pivot(results, xv.key, sv.key if sv else None, fixed, metric.value)
        head = [xv.key] + ([f"{sv.key}={_value_label(s)}" for s in s_vals] if sv else [metric.name])
        _headers(ws, row, head)
        for i, x in enumerate(xv.values, start=1):
            _put(ws, row + i, 1, x)
            for j, s in enumerate(s_vals, start=2):
                _put(ws, row + i, j, data.get((x, s)), metric.fmt)
        if _numeric(xv.values):
            ch: ScatterChart | LineChart = _scatter_chart(ws, row, n, len(s_vals), xv.values)
        else:
            ch = _line_chart(ws, row, n, len(s_vals))
        title = f"{metric.name} vs {xv.key}"
        if fixed:
            title += " (" + ", ".join(f"{k}={_value_label(v)}" for k, v in fixed.items()) + ")"
        _style_chart(ch, title, xv.key, metric)
        ws.add_chart(ch, f"{anchor_col}{row}")
        row += max(n + 3, 19)
    return row


def _scatter_chart(
    ws: Worksheet, row: int, n: int, nseries: int, xs: Sequence[float]
) -> ScatterChart:
    """A numeric parameter: x values to scale, so uneven steps show as such."""
    ch = ScatterChart()
    ch.style = 13
    ch.scatterStyle = "lineMarker"
    xref = Reference(ws, min_col=1, min_row=row + 1, max_row=row + n)
    for j in range(nseries):
        yref = Reference(ws, min_col=2 + j, min_row=row, max_row=row + n)
        se = Series(yref, xref, title_from_data=True)
        color = _COLORS[j % len(_COLORS)]
        se.marker.symbol = "circle"
        se.marker.size = 6
        se.marker.graphicalProperties.solidFill = color
        se.marker.graphicalProperties.line.solidFill = color
        se.graphicalProperties.line.solidFill = color
        se.graphicalProperties.line.width = 20000
        se.smooth = False
        ch.series.append(se)
    lo, hi = min(xs), max(xs)
    if hi > lo:
        ch.x_axis.scaling.min = lo
        ch.x_axis.scaling.max = hi
    return ch


def _line_chart(ws: Worksheet, row: int, n: int, nseries: int) -> LineChart:
    """A parameter with text values: evenly spaced categories."""
    ch = LineChart()
    for j in range(nseries):
        yref = Reference(ws, min_col=2 + j, min_row=row, max_row=row + n)
        ch.add_data(yref, titles_from_data=True)
        ch.series[-1].graphicalProperties.line.solidFill = _COLORS[j % len(_COLORS)]
    ch.set_categories(Reference(ws, min_col=1, min_row=row + 1, max_row=row + n))
    return ch


def _style_chart(ch: ScatterChart | LineChart, title: str, x_title: str, metric: _Metric) -> None:
    ch.title = title
    ch.x_axis.title = x_title
    ch.y_axis.title = metric.name
    ch.y_axis.numFmt = metric.axis_fmt
    ch.y_axis.number_format = metric.axis_fmt
    ch.x_axis.delete = False
    ch.y_axis.delete = False
    ch.legend.position = "b"
    if metric.share:
        ch.y_axis.scaling.min = 0
        ch.y_axis.scaling.max = 1
    ch.width, ch.height = 16, 8.5


def build_whatif_workbook(res: WhatIf) -> tuple[Workbook, str | None]:
    """The what-if workbook for a :class:`planner.analysis.whatif.WhatIf`; returns (workbook, warning)."""
    warning = None
    base_plan = res.base_result.plan if res.base_result is not None else None
    wb: Workbook | None = None
    if base_plan is not None:
        try:
            from planner.reports.excel import build_workbook

            wb = build_workbook(base_plan)
        except Exception as exc:  # noqa: BLE001 - the scenarios matter more than the reference sheets
            warning = f"the base plan's sheets could not be built ({type(exc).__name__}: {exc})"
    elif res.base_result is not None:
        warning = (
            f"the base problem has no plan ({res.base_result.status}: "
            f"{(res.base_result.message or '').splitlines()[0] if res.base_result.message else ''})"
        )
    if wb is None:
        wb = Workbook()
        wb.remove(wb.active)
    _scenario_sheet(wb, res, f"Note: {warning}." if warning else None)
    _chart_sheet(wb, res)
    wb.active = 0
    for ws in wb.worksheets:
        ws.sheet_view.tabSelected = ws.title == SHEET
    return wb, warning


def write_whatif_workbook(res: WhatIf, path: str | Path) -> str | None:
    """Write the workbook atomically; returns a warning (or None) for the caller to print."""
    wb, warning = build_whatif_workbook(res)
    # the base plan's sheets are formulas: store their values, as the plan workbook does
    atomic_write_bytes(path, save_with_values(wb))
    return warning
