"""The ``Purchases`` sheet: one row per purchase, extended cost = servers x chassis price +
GPUs x card price, both prices live over ``Assumptions`` (or the solver's own figure, a
yellow input of the row, where it differs); also the chassis price lookup the P&L reuses.
"""

from __future__ import annotations

from typing import Any

from planner.plan.data import Purchase
from planner.reports.excel.cells import (
    _FILL_INPUT,
    FIRST_ROW,
    HEADER_ROW,
    MONTH_FMT,
    NUM0,
    USD,
    F,
    _month_value,
)
from planner.reports.excel.context import _OWN_FIGURE, Ctx
from planner.reports.excel.refs import (
    P_CARD,
    P_CHASSIS,
    P_EXTENDED,
    P_GPUS,
    P_SERVERS,
    P_SOLVER,
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


def _server_text(p: Purchase) -> str:
    """``pcie-8 (8 slots)``; a plan from before server types has none."""
    return f"{p.server} ({p.slots} slots)" if p.slots else p.server


def write_purchases(ctx: Ctx) -> int:
    """The Purchases sheet; returns its last data row."""
    ws = ctx.ws["Purchases"]
    _title(
        ws,
        "Purchases",
        "Extended cost = servers x chassis price + GPUs x card price (a partly filled server "
        "gets more cards in a later row with 0 servers). Yellow prices on the Assumptions "
        "sheet drive every total.",
    )
    cols = _purchase_cols(ctx)
    _header(ws, HEADER_ROW, cols)
    last = _rows(ws, FIRST_ROW, cols, _purchase_rows(ctx))
    # a price typed into the row (the solver's, differing from Assumptions) is an input too
    for r in range(FIRST_ROW, last + 1):
        for c in (P_CARD, P_CHASSIS):
            if ws.cell(r, c).data_type != "f":
                ws.cell(r, c).fill = _FILL_INPUT
    sums = [(P_SERVERS, NUM0), (P_GPUS, NUM0), (P_EXTENDED, USD), (P_SOLVER, USD)]
    _total_row(ws, last + 1, last, sums)
    _table(ws, "tblPurchases", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")
    return last


def _purchase_cols(ctx: Ctx) -> list[_Col]:
    return [
        _Col("GPU", _fit(10, [p.gpu for p in ctx.plan.purchases], 30)),
        _Col("Month", 10, MONTH_FMT),
        _Col("Servers", 8, NUM0),
        _Col("GPUs", 8, NUM0),
        _Col("Card USD / GPU", 14, USD),
        _Col("Chassis USD / server", 15, USD),
        _Col("Unit price USD / GPU", 14, USD),
        _Col("Extended cost USD", 16, USD),
        _Col("Solver's cost USD", 16, USD),
        _Col("Server type", _fit(14, [_server_text(p) for p in ctx.plan.purchases], 30)),
        _Col("Price source", 36, None, wrap=True),
    ]


def chassis_price(ctx: Ctx, p: Purchase) -> tuple[str | None, float]:
    """The chassis price cell on Assumptions (None if the row's figure differs) and the
    row's own figure; a plan from before servers were units (no slots) carries its server
    share per GPU, which becomes the row's chassis price per server."""
    if p.slots:
        cell = ctx.a.ref_equal(
            f"gpu:{p.gpu}", "chassis_usd", p.chassis_usd, "USD/server", "plan purchase row"
        )
        return cell, p.chassis_usd
    per_server = (p.total_usd - p.count * p.gpu_usd) / p.nodes if p.nodes else 0.0
    return None, per_server


def _purchase_rows(ctx: Ctx) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for r, p in enumerate(ctx.plan.purchases, start=FIRST_ROW):
        card = ctx.a.ref_equal(
            f"gpu:{p.gpu}", "purchase_usd", p.gpu_usd, "USD/GPU", "plan purchase row"
        )
        chassis, own_chassis = chassis_price(ctx, p)
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
