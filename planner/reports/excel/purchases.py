"""The ``Purchases`` sheet: one row per purchase, extended cost = servers x chassis price +
GPUs x card price, both prices live over ``Assumptions`` (or the solver's own figure, a
yellow input of the row, where it differs); also the chassis price lookup the P&L reuses.
With lead times or price paths (:mod:`.paths`) the prices are read at the order month on the
GPU's buy path, and the row shows its lead, order month and capex month.
"""

from __future__ import annotations

from typing import Any

from openpyxl.utils import get_column_letter

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
from planner.reports.excel.paths import purchase_terms
from planner.reports.excel.refs import (
    P_CAPEX_INDEX,
    P_CARD,
    P_CHASSIS,
    P_EXTENDED,
    P_GPUS,
    P_LEAD,
    P_ORDER_INDEX,
    P_SERVERS,
    P_SERVICE_INDEX,
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
from planner.reports.plan_facts import unit_word


def _server_text(p: Purchase) -> str:
    """``pcie-8 (8 slots)``, ``nvl72-gb200 (rack, 72 slots)``; a plan from before server types
    has none."""
    if not p.slots:
        return p.server
    return (
        f"{p.server} (rack, {p.slots} slots)"
        if unit_word(p.slots) == "rack"
        else f"{p.server} ({p.slots} slots)"
    )


def write_purchases(ctx: Ctx) -> int:
    """The Purchases sheet; returns its last data row."""
    ws = ctx.ws["Purchases"]
    _title(
        ws,
        "Purchases",
        "Extended cost = servers x chassis price + GPUs x card price (a partly filled server "
        "gets more cards in a later row with 0 servers). Yellow prices on the Assumptions "
        "sheet drive every total." + (_LEAD_NOTE if ctx.lead_cols else ""),
    )
    cols = _purchase_cols(ctx)
    _header(ws, HEADER_ROW, cols)
    last = _rows(ws, FIRST_ROW, cols, _purchase_rows(ctx))
    # a price typed into the row (the solver's, differing from Assumptions) is an input too
    inputs = (P_CARD, P_CHASSIS, P_LEAD, P_CAPEX_INDEX) if ctx.lead_cols else (P_CARD, P_CHASSIS)
    for r in range(FIRST_ROW, last + 1):
        for c in inputs:
            if ws.cell(r, c).data_type != "f":
                ws.cell(r, c).fill = _FILL_INPUT
    sums = [(P_SERVERS, NUM0), (P_GPUS, NUM0), (P_EXTENDED, USD), (P_SOLVER, USD)]
    _total_row(ws, last + 1, last, sums)
    _table(ws, "tblPurchases", 1, len(cols), HEADER_ROW, last)
    _widths(ws, cols)
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"A{FIRST_ROW}")
    return last


_LEAD_NOTE = (
    " Card and chassis prices are the catalog's x (1 + the GPU's buy change per year)^(months "
    "from the start to the order / 12); ordered = in service - lead months; the capex is paid "
    "at the order, or in service with finance capex_at = delivery (Cash flow reads that month)."
)
_LEAD_COLS = (
    _Col("In service (months from start)", 12, "0"),
    _Col("Lead months", 8, "0"),
    _Col("Order (months from start)", 11, "0"),
    _Col("Ordered", 10, MONTH_FMT),
    _Col("Capex paid (months from start)", 12, "0"),
    _Col("Capex paid", 10, MONTH_FMT),
)


def _purchase_cols(ctx: Ctx) -> list[_Col]:
    extra = list(_LEAD_COLS) if ctx.lead_cols else []
    return [
        _Col("GPU", _fit(10, [p.gpu for p in ctx.plan.purchases], 30)),
        _Col("In service" if ctx.lead_cols else "Month", 10, MONTH_FMT),
        _Col("Servers", 8, NUM0),
        _Col("GPUs", 8, NUM0),
        _Col("Card USD / GPU", 14, USD),
        _Col("Chassis USD / server", 15, USD),
        _Col("Unit price USD / GPU", 14, USD),
        _Col("Extended cost USD", 16, USD),
        _Col("Solver's cost USD", 16, USD),
        _Col("Server type", _fit(14, [_server_text(p) for p in ctx.plan.purchases], 30)),
        _Col("Price source", 36, None, wrap=True),
        *extra,
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
        if ctx.lead_cols:
            rows.append(_lead_row(ctx, r, p))
            continue
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


def _lead_row(ctx: Ctx, r: int, p: Purchase) -> list[Any]:
    """A purchase of a plan with price paths and lead times: card and chassis prices on the
    GPU's buy path at the order month, the order month = in service - lead (live over
    Assumptions), the capex month by finance capex_at; a figure the Assumptions do not give
    stays the plan's own, a yellow input of the row."""
    pt = purchase_terms(ctx, p)
    cells = {
        k: f"{get_column_letter(c)}{r}" for k, c in (("L", P_SERVICE_INDEX), ("N", P_ORDER_INDEX))
    }
    own_box = chassis_price(ctx, p)[1] if not p.slots else p.chassis_usd
    card = F("=" + pt.card.format(**cells)) if pt.card else p.gpu_usd
    chassis = F("=" + pt.chassis.format(**cells)) if pt.chassis else own_box
    L, M, N, P = (
        get_column_letter(c) for c in (P_SERVICE_INDEX, P_LEAD, P_ORDER_INDEX, P_CAPEX_INDEX)
    )
    return [
        p.gpu,
        _month_value(p.month),
        p.nodes,
        p.count,
        card,
        chassis,
        F(f"=IF(D{r}>0,H{r}/D{r},H{r})"),
        F(f"=C{r}*F{r}+D{r}*E{r}"),
        p.total_usd,
        _server_text(p),
        "Assumptions: catalog price x buy path" if pt.card and pt.chassis else _OWN_FIGURE,
        pt.t_service,
        F(f"={pt.lead}") if pt.lead else pt.lead_value,
        F(f"=MAX(0,{L}{r}-{M}{r})"),
        F(f"=EDATE(B{r},{N}{r}-{L}{r})"),
        F("=" + pt.paid.format(**cells)) if pt.paid else pt.t_paid,
        F(f"=EDATE(B{r},{P}{r}-{L}{r})"),
    ]
