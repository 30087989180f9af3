"""The ``Charts`` sheet: monthly spend (live over Cash flow), the serving and the training
fleet by GPU type (owned vs rented GPUs, from the plan) and the cost split (live over
Summary), with the charts' data below them on page 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openpyxl.chart import BarChart, Reference
from openpyxl.chart.label import DataLabelList
from openpyxl.worksheet.pagebreak import Break
from openpyxl.worksheet.worksheet import Worksheet

from planner.reports.excel.cells import (
    _F_SECTION,
    FIRST_ROW,
    MONTH_FMT,
    NUM0,
    USD,
    F,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    _CostRows,
)
from planner.reports.excel.tables import (
    _Col,
    _header,
    _lines,
    _print_setup,
    _rows,
    _title,
    _widths,
)
from planner.reports.fleet_facts import fleet_series

_FLEET_DATA_ROW = 44  # header row of the fleet chart's data on Charts: below the charts of page 1


def _value_labels(numfmt: str) -> DataLabelList:
    """Data labels that show the value and nothing else."""
    labels = DataLabelList()
    labels.showVal = True
    for flag in ("showPercent", "showCatName", "showSerName", "showLegendKey", "showLeaderLines"):
        setattr(labels, flag, False)
    labels.numFmt = numfmt
    return labels


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


def write_charts(ctx: Ctx, cost: _CostRows) -> None:
    """The Charts sheet: the charts on page 1, their data below them."""
    ws = ctx.ws["Charts"]
    _title(
        ws,
        "Charts",
        "Monthly spend (live over Cash flow), the serving and the training fleet by GPU "
        "type (owned vs rented GPUs, from the plan), and the cost split (Summary).",
    )
    top = _FLEET_DATA_ROW
    groups = _chart_data(ctx, ws, top)
    last = top + max(1, len(ctx.plan.months))
    ws.add_chart(_spend_chart(ws, top, last), "A4")
    ws.add_chart(_split_chart(ctx, cost), "K4")
    for (first_col, ncols), title, anchor in zip(
        groups,
        ("Serving fleet: GPUs at the busiest hours", "Training: GPUs in use"),
        ("A23", "K23"),
        strict=True,
    ):
        if ncols:  # no chart of a fleet the plan does not have
            ws.add_chart(_fleet_chart(ws, top, last, first_col, ncols, title), anchor)
    ws.row_breaks.append(Break(id=top - 2))  # the charts on page 1, their data after
    _print_setup(ws, f"{top}:{top}", None)
    ws.sheet_view.showGridLines = False


def _chart_data(ctx: Ctx, ws: Worksheet, top: int) -> list[tuple[int, int]]:
    """The charts' data below them: month, capex, opex, rentals (live), then the serving
    and training series. Returns (first column, columns) of the two fleet groups."""
    _put(ws, top - 1, 1, "Chart data", font=_F_SECTION)
    serve, train = fleet_series(ctx.plan, "serve"), fleet_series(ctx.plan, "train")
    cols = [_Col("Month", 10, MONTH_FMT), _Col("Capex", 12, USD), _Col("Opex", 12, USD)]
    cols += [_Col("Rentals", 12, USD)]
    cols += [_Col(f"Serving: {k}", 12, NUM0, wrap=True) for k in serve]
    cols += [_Col(f"Training: {k}", 12, NUM0, wrap=True) for k in train]
    _header(ws, top, cols)
    ws.row_dimensions[top].height = 13 * max(_lines(c.header, c.width) for c in cols) + 4
    rows: list[list[Any]] = []
    for k in range(max(1, len(ctx.plan.months))):
        cf = FIRST_ROW + k
        ref = lambda c, cf=cf: _sheet_ref("Cash flow", f"${c}${cf}")  # noqa: E731
        row: list[Any] = [F(f"={ref('A')}"), F(f"={ref('B')}"), F(f"={ref('C')}+{ref('D')}")]
        row.append(F(f"={ref('E')}"))
        row += [v[k] if k < len(v) else 0 for v in [*serve.values(), *train.values()]]
        rows.append(row)
    _rows(ws, top + 1, cols, rows)
    _widths(ws, cols)
    return [(5, len(serve)), (5 + len(serve), len(train))]


def _spend_chart(ws: Worksheet, top: int, last: int) -> BarChart:
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


def _split_chart(ctx: Ctx, cost: _CostRows) -> BarChart:
    s = ctx.ws["Summary"]
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
    ws: Worksheet, top: int, last: int, first_col: int, ncols: int, title: str
) -> BarChart:
    fleet = BarChart()
    fleet.type = "col"
    fleet.grouping = "stacked"
    fleet.overlap = 100
    fleet.title = title
    fleet.add_data(
        Reference(ws, min_col=first_col, max_col=first_col + ncols - 1, min_row=top, max_row=last),
        titles_from_data=True,
    )
    fleet.set_categories(Reference(ws, min_col=1, min_row=top + 1, max_row=last))
    colors = [c for pair in _GPU_COLORS for c in pair]
    _style_chart(fleet, "#,##0", colors)
    return fleet
