"""The ``Frontier`` sheet: for each service of the plan, the serving frontier of the GPU types it
uses (output tokens/s per GPU against tokens/s per user over every layout and batch, each point
with its layout and its cost per million output tokens, owned and rented;
:mod:`planner.analysis.frontier`), as a data table and one native scatter chart per service
(log scale up; no matplotlib needed).

The plan does not carry a service's request shape, so the sheet reads the problem file the plan
names (``plan.problem_file``) when it is at hand and unchanged (its sha256 is the plan's);
otherwise it says why there is no frontier. Owned costs use the problem's site and finance
terms, rentals its trusted offers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.worksheet.worksheet import Worksheet

from planner.analysis.frontier import GpuFrontier, OwnedTerms, gpu_frontier, pick_precision
from planner.base.errors import PlannerError
from planner.plan.data import Plan, WorkloadResult
from planner.reports.excel.cells import (
    _F_WARN,
    FIRST_ROW,
    HEADER_ROW,
    NUM0,
    NUM1,
    USD_RATE,
    F,
    _put,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.tables import _Col, _header, _print_setup, _rows, _title, _widths

FRONTIER = "Frontier"
_COLS = [
    _Col("Service", 16, wrap=True),
    _Col("GPU", 12),
    _Col("Precision", 9),
    _Col("Tokens in / out", 11),
    _Col("Layout (workers x GPUs : mode)", 24, wrap=True),
    _Col("Batch (concurrent requests)", 11, NUM0),
    _Col("GPUs", 7, NUM0),
    _Col("Tokens/s per user", 10, NUM1),
    _Col("Output tokens/s per GPU", 11, NUM0),
    _Col("TPOT ms", 9, NUM1),
    _Col("TTFT ms", 9, NUM0),
    _Col("Owned $/GPU-h", 10, USD_RATE),
    _Col("Owned $ per M tokens", 11, USD_RATE),
    _Col("Rented $/GPU-h", 10, USD_RATE),
    _Col("Rented $ per M tokens", 11, USD_RATE),
    _Col("Rental offer", 28, wrap=True),
]
_X, _Y = 8, 9  # columns of tokens/s per user and per GPU (the chart's axes)
_CHART_COL = "R"  # charts to the right of the table
_CHART_ROWS = 20  # rows one chart takes
_COLORS = ["1F4E79", "C55A11", "548235", "7030A0", "BF8F00", "2F5597", "A50021"]


@dataclass(frozen=True)
class ServiceFrontier:
    """One service's frontiers, one per GPU type it uses."""

    service: str
    model: str
    prompt: int
    output: int
    fronts: dict[str, GpuFrontier]


def plan_inputs(plan: Plan) -> tuple[Any, str | None]:
    """The problem the plan was made from (:class:`planner.inputs.problem.Inputs`), or None
    and why not: no file, a different file now, or one that no longer loads."""
    name = plan.problem_file.split(" [scenario ")[0]
    path = Path(name)
    if not name or name.startswith("<") or not path.is_file():
        return None, f"the problem file ({name or 'none'}) is not at hand"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    scenario = plan.problem_file[len(name) :].removeprefix(" [scenario ").removesuffix("]")
    known = {digest, hashlib.sha256(f"{digest}\n{scenario}".encode()).hexdigest()}
    if plan.problem_sha256 and plan.problem_sha256 not in known:
        return None, f"{name} has changed since this plan was made (its sha256 differs)"
    from planner.inputs.problem import load_problem

    try:
        return load_problem(path), None
    except PlannerError as exc:
        return None, f"{name} does not load: {exc}"


def _shape(w: Any) -> tuple[int, int]:
    """A service's prompt and output tokens: its one shape, or the share-weighted mean of its
    buckets at their planned (upper) sizes."""
    if w.tokens is not None:
        return w.tokens.prompt, w.tokens.output

    def top(v: Any) -> int:
        return v if isinstance(v, int) else max(v)

    p = sum(b.share * top(b.prompt) for b in w.requests)
    o = sum(b.share * top(b.output) for b in w.requests)
    return max(1, round(p)), max(2, round(o))


def _wanted(result: WorkloadResult, w: Any) -> list[str]:
    """The precisions a service is served at, best first (the plan's, else the problem's)."""
    for given in (result.config.get("precision"), getattr(w, "precision", None)):
        if isinstance(given, str):
            return [given]
        if isinstance(given, list | tuple) and given:
            return [str(p) for p in given]
    return ["fp16"]


def service_frontiers(plan: Plan, inputs: Any) -> list[ServiceFrontier]:
    """Each served workload's frontier on each GPU type the plan serves it with."""
    serve = {w.name: w for w in inputs.problem.workloads.serve}
    site, fin = inputs.problem.site, inputs.finance
    terms = OwnedTerms(
        power_usd_per_kwh=site.power_usd_per_kwh,
        pue=site.pue,
        hosting_usd_per_gpu_month=site.hosting_usd_per_gpu_month,
        colo_usd_per_kw_month=fin.colo_usd_per_kw_month,
        depreciation_years=fin.depreciation_years,
    )
    offers = list(inputs.offers.values())
    out = []
    for r in plan.workloads:
        w = serve.get(r.name)
        if r.kind != "serve" or w is None or w.model not in inputs.models:
            continue
        model = inputs.models[w.model]
        prompt, output = _shape(w)
        wanted = _wanted(r, w)
        fronts = {}
        for gid in r.gpu:
            g = inputs.gpus.get(gid)
            if g is None:
                continue
            # the problem's offers are the trusted ones (marketplaces already decided)
            fronts[gid] = gpu_frontier(model, g, pick_precision(g, wanted), prompt, output,
                                       terms, offers, marketplaces=True,
                                       max_ttft_ms=w.slo.p95_ttft_ms)  # fmt: skip
        out.append(ServiceFrontier(r.name, model.id, prompt, output, fronts))
    return out


def write_frontier(ctx: Ctx) -> None:
    """The Frontier sheet: the table of every service's frontier points, a chart per service."""
    ws = ctx.ws[FRONTIER]
    _title(
        ws,
        "Frontier",
        "Per service, the GPU types it uses: output tokens/s per GPU against tokens/s per user "
        "(1000 / TPOT) over every layout and batch the physics knows, the points no other "
        "beats on both; $ per M output tokens = $/GPU-h / (3600 x tokens/s per GPU) x 1e6 at "
        "full load (owned: depreciation + power + hosting; rented: the cheapest on-demand or "
        "reserved offer that holds the widest worker); points with a TTFT above the service's p95 "
        "TTFT target are left out. From planner estimate frontier.",
    )
    _header(ws, HEADER_ROW, _COLS)
    _widths(ws, _COLS)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")
    services = [w for w in ctx.plan.workloads if w.kind == "serve"]
    if not services:
        _put(ws, FIRST_ROW, 1, "(no serving workloads)")
        return
    inputs, why = plan_inputs(ctx.plan)
    if inputs is None:
        _put(ws, FIRST_ROW, 1, f"(no frontier: {why}; run planner report beside it, or "
             "planner estimate frontier)", font=_F_WARN)  # fmt: skip
        return
    row = FIRST_ROW
    for k, sf in enumerate(service_frontiers(ctx.plan, inputs)):
        blocks: list[tuple[str, int, int]] = []
        for gid, f in sf.fronts.items():
            first = row
            row = _rows(ws, row, _COLS, _frontier_rows(sf, f, row)) + 1
            if f.points:
                blocks.append((gid, first, row - 1))
        if blocks:
            ws.add_chart(_chart(ws, sf, blocks), f"{_CHART_COL}{HEADER_ROW + k * _CHART_ROWS}")


def _frontier_rows(sf: ServiceFrontier, f: GpuFrontier, first: int) -> list[list[Any]]:
    head = [sf.service, f.gpu, f.precision or "-", f"{sf.prompt:,} / {sf.output:,}"]
    if not f.points:
        why = f.reasons[-1] if f.reasons else "no deployment serves"
        return [[*head, f"cannot serve {sf.model}: {why}", *[None] * (len(_COLS) - 5)]]
    rows = []
    for i, p in enumerate(f.points):
        r = first + i
        rent: list[Any] = ["-", "-", "-"]
        if p.rental_usd_per_gpu_hour is not None:
            rent = [p.rental_usd_per_gpu_hour, F(f"=N{r}/(3600*I{r})*1000000"), p.rental_offer]
        rows.append([
            *head, p.layout, p.batch, p.gpus, p.tokens_per_s_per_user, p.tokens_per_s_per_gpu,
            p.tpot_ms, p.ttft_ms, p.owned_usd_per_gpu_hour, F(f"=L{r}/(3600*I{r})*1000000"),
            *rent,
        ])  # fmt: skip
    return rows


def _chart(ws: Worksheet, sf: ServiceFrontier, blocks: list[tuple[str, int, int]]) -> ScatterChart:
    ch = ScatterChart()
    ch.title = f"{sf.service} ({sf.model}, {sf.prompt:,} in / {sf.output:,} out)"
    ch.style = 13
    ch.width, ch.height = 18, 9.5
    ch.x_axis.title = "tokens/s per user"
    ch.y_axis.title = "output tokens/s per GPU (log)"
    ch.y_axis.scaling.logBase = 10
    ch.x_axis.number_format = ch.y_axis.number_format = "#,##0"
    ch.x_axis.delete = ch.y_axis.delete = False
    ch.legend.position = "b"
    for j, (gid, first, last) in enumerate(blocks):
        x = Reference(ws, min_col=_X, min_row=first, max_row=last)
        y = Reference(ws, min_col=_Y, min_row=first, max_row=last)
        s = Series(y, x, title=gid)
        color = _COLORS[j % len(_COLORS)]
        s.marker.symbol = "circle"
        s.marker.size = 4
        s.marker.graphicalProperties.solidFill = color
        s.marker.graphicalProperties.line.solidFill = color
        s.graphicalProperties.line.solidFill = color
        s.graphicalProperties.line.width = 19050  # 1.5 pt
        s.smooth = False
        ch.series.append(s)
    return ch
