"""The ``Fleet`` sheet: per GPU type and month the owned, rented and busy GPUs, IT kW, and
power and hosting cost as live formulas over the site and GPU figures on ``Assumptions``.
"""

from __future__ import annotations

from typing import Any

from planner.reports.excel.cells import (
    FIRST_ROW,
    HEADER_ROW,
    MONTH_FMT,
    NUM0,
    NUM1,
    PCT,
    USD,
    F,
    _month_value,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import (
    FL_HOSTING,
    FL_POWER,
)
from planner.reports.excel.tables import (
    _Col,
    _fit,
    _header,
    _print_setup,
    _rows,
    _table,
    _title,
    _total_row,
    _widths,
)


def write_fleet(ctx: Ctx) -> int:
    """The Fleet sheet; returns its last data row."""
    ws = ctx.ws["Fleet"]
    _title(
        ws,
        "Fleet by GPU type and month",
        "IT kW = (owned x TDP W + servers x host W) / 1000.  Power USD = PUE x USD/kWh x "
        "(H x (servers x host W + owned x idle W) + busy GPU-h x (TDP W - idle W)) / 1000.  "
        "Hosting USD = owned x USD per GPU-month + IT kW x colocation USD per kW-month.",
    )
    cols = _fleet_cols(ctx)
    _header(ws, HEADER_ROW, cols)
    last = _rows(ws, FIRST_ROW, cols, _fleet_rows(ctx))
    sums = [(3, NUM0), (7, NUM0), (8, NUM0), (FL_POWER, USD), (FL_HOSTING, USD)]
    _total_row(ws, last + 1, last, sums)
    _table(ws, "tblFleet", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"C{FIRST_ROW}")
    return last


def _fleet_cols(ctx: Ctx) -> list[_Col]:
    return [
        _Col("GPU", _fit(10, [f.gpu for f in ctx.plan.fleet], 30)),
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


def _host_watts(ctx: Ctx, gpu: str, r: int, existing: bool) -> str:
    """Host watts of row ``r`` in the energy and the kW terms: servers x host W per server,
    existing GPUs (column O) their share of theirs (host W / slots); a plan from before
    server types (no ``host_w`` on Assumptions) counts host watts per owned GPU.
    ``existing``: whether any fleet row has existing or sold GPUs."""
    if ctx.a.find([f"gpu:{gpu}"], ["host_w"]) is not None:
        host = ctx.gpu_in(gpu, "host_w", "W/server")
        if existing and ctx.a.find([f"gpu:{gpu}"], ["server_slots"]) is not None:
            slots = ctx.gpu_in(gpu, "server_slots", "slots")
            return f"(E{r}*{host}+O{r}*{host}/{slots})"
        return f"E{r}*{host}"
    return f"D{r}*{ctx.gpu_in(gpu, 'host_w_per_gpu', 'W')}"


def _fleet_rows(ctx: Ctx) -> list[list[Any]]:
    pue = ctx.site(["pue"], "")
    kwh = ctx.site(["power_usd_per_kwh"], "USD/kWh")
    host = ctx.site(["hosting_usd_per_gpu_month"], "USD/GPU-month")
    colo = ctx.a.ref(
        "site",
        ["colo_usd_per_kw_month"],
        fallback=0.0,
        unit="USD/kW-month",
        source="not in the plan: no colocation charge by the kW",
    )
    H = ctx.H
    existing = any(f.existing or f.sold for f in ctx.plan.fleet)
    rows: list[list[Any]] = []
    for r, f in enumerate(ctx.plan.fleet, start=FIRST_ROW):
        tdp = ctx.gpu_in(f.gpu, "tdp_w", "W")
        idle = ctx.gpu_in(f.gpu, "idle_w", "W")
        host_w = _host_watts(ctx, f.gpu, r, existing)
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
