"""Price paths and lead times in the workbook (issue 27): a price in month m of the horizon
(m = 0 in the first month) is ``price x (1 + change per year)^(m / 12)``, the change per GPU
type a yellow input on ``Assumptions`` (``gpu:<id>`` / ``rent_change_per_year``,
``buy_change_per_year``); a purchase is ordered ``lead_months`` (``gpu:<id>``) before it
enters service, at the order month's price, and paid at the order or, with ``finance`` /
``capex_at`` = ``delivery``, in the month it enters service.

A plan without paths (every change 0 and lead 0 for the GPU types it uses, or written before
price paths: :func:`planner.reports.plan_facts.has_paths`) gets the workbook it always got.
Each formula is checked against the plan's own figure before it is written: where the
figures on Assumptions do not give the plan's price (a hand-edited plan), the row keeps the
plan's figure, as for any other input that differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.plan.data import Purchase, Rental
from planner.reports.excel.context import Ctx

RENT, BUY, LEAD = "rent_change_per_year", "buy_change_per_year", "lead_months"


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def factor(change: float, t: int) -> float:
    """The price factor of month ``t`` on a path (as planner.physics.economics.price_factor)."""
    return (1.0 + change) ** (t / 12.0)


def month_index(ctx: Ctx, label: str) -> int | None:
    return ctx.month_at.get(label)


def _figure(ctx: Ctx, group: str, key: str) -> tuple[int, float] | None:
    """(Assumptions row, value) of a numeric input, None if the plan lacks it."""
    i = ctx.a.find([group], [key])
    return None if i is None else (i, float(ctx.a.rows[i].value))


def rental_rate(ctx: Ctx, x: Rental) -> tuple[str | None, int]:
    """The live rate of a rental row on its GPU's rent path: ``(formula body over the price
    month cell "{K}", months from the start to the price)``; the body has ``{K}`` where the
    row's price-month cell goes. A reserved row is priced at its reservation's start month.
    None as body where the figures on Assumptions do not give the row's price (a contract
    row, an offer or path missing, a hand-edited price): the caller keeps today's lookup."""
    t = month_index(ctx, x.month) or 0
    if x.kind == "committed":
        return None, t
    rent = _figure(ctx, f"gpu:{x.gpu}", RENT)
    if rent is None:
        return None, t
    for s in _price_months(ctx, x, t):
        base = _offer_price(ctx, x.offer, s)
        if base is not None and _close(base[1] * factor(rent[1], s), x.usd_per_gpu_hour):
            return f"{ctx.a.cell(base[0])}*(1+{ctx.a.cell(rent[0])})^({{K}}/12)", s
    return None, t


STEP = "usd_per_gpu_hour_from_"  # an offer's dated price on Assumptions: STEP + YYYY-MM


def offer_price_key(ctx: Ctx, offer: str, s: int) -> str:
    """The Assumptions key of the offer's price in month index ``s``: its last price step on
    or before that month (``usd_per_gpu_hour_from_YYYY-MM``), else ``usd_per_gpu_hour``."""
    group = f"offer:{offer}"
    label = next((m for m, i in ctx.month_at.items() if i == s), None)
    steps = sorted(
        a.key.removeprefix(STEP)
        for a in ctx.plan.assumptions
        if a.group == group and a.key.startswith(STEP)
    )
    for month in reversed(steps):
        if label is not None and month <= label:
            return STEP + month
    return "usd_per_gpu_hour"


def _offer_price(ctx: Ctx, offer: str, s: int) -> tuple[int, float] | None:
    """(Assumptions row, value) of the offer's price in month index ``s``."""
    return _figure(ctx, f"offer:{offer}", offer_price_key(ctx, offer, s))


def _price_months(ctx: Ctx, x: Rental, t: int) -> list[int]:
    """The month the row's price is read at: its own; for a reserved row its reservation's
    start (the one covering the month first, then any of the offer's)."""
    if x.kind != "reserved":
        return [t]
    starts = []
    for res in ctx.plan.reservations:
        s = month_index(ctx, res.start_month)
        if res.offer == x.offer and s is not None:
            covers = s <= t < s + res.term_months
            starts.insert(0, s) if covers else starts.append(s)
    return list(dict.fromkeys(starts)) or [t]


@dataclass(frozen=True)
class PurchaseTerms:
    """One purchase row's live figures in a plan with paths; each is a formula body, or
    None where the row keeps the plan's own figure. ``{L}``/``{N}`` stand for the row's
    in-service and order month-index cells."""

    t_service: int
    lead: str | None  # the lead-months cell on Assumptions
    lead_value: int  # the plan's lead (in service - ordered)
    t_paid: int  # the plan's capex month index
    paid: str | None  # IF(capex_at="delivery", in service, order)
    card: str | None  # catalog card price x buy factor of the order month
    chassis: str | None  # catalog chassis price x buy factor of the order month


def purchase_terms(ctx: Ctx, p: Purchase) -> PurchaseTerms:
    t = month_index(ctx, p.month) or 0
    order = month_index(ctx, p.order_month)
    paid = month_index(ctx, p.paid_month)
    t_order = t if order is None else order
    t_paid = t_order if paid is None else paid
    group = f"gpu:{p.gpu}"
    lead = _figure(ctx, group, LEAD)
    lead_cell = None
    if lead is not None and _close(lead[1], t - t_order) and t - t_order >= 0:
        lead_cell = ctx.a.cell(lead[0])
    at = ctx.capex_at
    delivery = ctx.a.rows[at].value == "delivery" if at is not None else False
    paid_cell = None
    if at is not None and t_paid == (t if delivery else t_order):
        paid_cell = f'IF({ctx.a.cell(at)}="delivery",{{L}},{{N}})'
    buy = _figure(ctx, group, BUY)
    card = chassis = None
    if buy is not None:
        f = factor(buy[1], t_order)
        path = f"*(1+{ctx.a.cell(buy[0])})^({{N}}/12)"
        price = _figure(ctx, group, "purchase_usd")
        if price is not None and _close(price[1] * f, p.gpu_usd):
            card = ctx.a.cell(price[0]) + path
        box = _figure(ctx, group, "chassis_usd")
        if p.slots and box is not None and _close(box[1] * f, p.chassis_usd):
            chassis = ctx.a.cell(box[0]) + path
    return PurchaseTerms(t, lead_cell, t - t_order, t_paid, paid_cell, card, chassis)
