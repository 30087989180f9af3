"""The ``Workloads`` sheet: chosen configuration, GPUs, live cost and cost share per
workload (its own rentals plus its share from Allocation), then predicted vs target for each
key and the configurations the solver dropped; also how a configuration is shown as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from openpyxl.worksheet.worksheet import Worksheet

from planner.plan.data import WorkloadResult
from planner.reports.excel.cells import (
    _F_WARN,
    FIRST_ROW,
    HEADER_ROW,
    NUM0,
    NUMG,
    PCT,
    USD,
    USD_CENTS,
    F,
    _exact,
    _num,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    _KEY_COL,
    CashFlowRows,
    DetailRows,
)
from planner.reports.excel.tables import (
    _Col,
    _fit,
    _header,
    _print_setup,
    _rows,
    _section,
    _sumifs,
    _table,
    _title,
    _total_row,
    _widths,
)


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


def write_workloads(ctx: Ctx, details: DetailRows, alloc_last: int, cash: CashFlowRows) -> None:
    """The Workloads sheet: live cost per workload over Rentals, Allocation and Cash flow."""
    ws = ctx.ws["Workloads"]
    _title(
        ws,
        "Workloads",
        "Chosen configuration, GPUs, cost and cost share per workload (the solver's "
        "attribution); below: predicted vs target for each key.",
    )
    cols = _workload_cols(ctx)
    total_row = _workload_table(ctx, ws, cols, details.rentals, alloc_last, cash)
    tlast = _targets_table(ctx, ws, cols, total_row + 3)
    if ctx.plan.dropped:
        _dropped_table(ctx, ws, cols, tlast + 3)
    _widths(ws, cols)
    _print_setup(ws, None, f"B{FIRST_ROW}")


def _workload_cols(ctx: Ctx) -> list[_Col]:
    plan = ctx.plan
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


def _workload_table(
    ctx: Ctx,
    ws: Worksheet,
    cols: Sequence[_Col],
    rentals_last: int,
    alloc_last: int,
    cash: CashFlowRows,
) -> int:
    """The table of workloads and its total row; returns the total row."""
    _header(ws, HEADER_ROW, cols)
    rows = [
        _workload_row(r, w, *_workload_cost(r, rentals_last, alloc_last, cash))
        for r, w in enumerate(ctx.plan.workloads, start=FIRST_ROW)
    ]
    if not rows:
        rows.append(["(no workloads)", "", "", 0, "", "", "", 0, 0, 0, None, None])
    last = _rows(ws, FIRST_ROW, cols, rows)
    for r, w in enumerate(ctx.plan.workloads, start=FIRST_ROW):
        _put(ws, r, _KEY_COL, _exact(w.name))
    ws.column_dimensions["M"].hidden = True
    for r in range(FIRST_ROW, last + 1):
        if ws.cell(r, 7).value == "NO":
            ws.cell(r, 7).font = _F_WARN
    _total_row(ws, last + 1, last, [(8, USD), (9, PCT)])
    _table(ws, "tblWorkloads", 1, len(cols), HEADER_ROW, last)
    return last + 1


def _workload_cost(r: int, rentals_last: int, alloc_last: int, cash: CashFlowRows) -> tuple[F, F]:
    """Live cost of the workload in row ``r``: its own rentals plus its allocated owned and
    reserved cost; and its share of the Cash flow total."""
    crit = f"$M{r}"
    own = _sumifs("Rentals", 9, FIRST_ROW, rentals_last, [(6, crit)])
    shared = _sumifs("Allocation", 11, FIRST_ROW, alloc_last, [(1, crit)])
    total = _sheet_ref("Cash flow", f"$F${cash.total}")
    return F(f"={own}+{shared}"), F(f"=IF({total}>0,H{r}/{total},0)")


def _targets_table(ctx: Ctx, ws: Worksheet, cols: Sequence[_Col], top: int) -> int:
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
    for w in ctx.plan.workloads:
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


def _dropped_table(ctx: Ctx, ws: Worksheet, cols: Sequence[_Col], top: int) -> None:
    _section(ws, top - 1, "Configurations the solver dropped")
    kinds = {w.name: w.kind for w in ctx.plan.workloads}
    dcols = [  # in the columns of the workloads table, so the widths suit both
        cols[0],
        cols[1],
        _Col("GPU", cols[2].width, wrap=True),
        _Col("Configuration", cols[3].width, wrap=True),
        _Col("Reason", cols[4].width, wrap=True),
    ]
    _header(ws, top, dcols)
    drows = [
        [d.workload, kinds.get(d.workload, ""), d.gpu, d.config, d.reason] for d in ctx.plan.dropped
    ]
    dlast = _rows(ws, top + 1, dcols, drows)
    _table(ws, "tblDropped", 1, len(dcols), top, dlast)
