"""Price paths and lead times in the workbook (issue 27): yellow inputs, live formulas.

The rent change, buy change and lead months of each GPU type the plan uses are inputs on
Assumptions; every rental rate is the offer's first-month price x (1 + rent change)^(months
/ 12) (a reservation's rate is its start month's), every card and chassis price the catalog's
x (1 + buy change)^(order month / 12), the order month = in service - lead, and Cash flow puts
the capex in the month it is paid (finance capex_at). LibreOffice recalculates the reference
plan (problems/2m_budget.yaml, catalog default paths) untouched, with a rent change edited,
and with the buy change, the lead and capex_at edited; a plan without paths gets the
workbook it always got.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from openpyxl import load_workbook
from rich.console import Console

from planner.plan.data import Assumption, Plan, load_plan, write_json
from planner.reports.excel import write_workbook
from planner.reports.plan_facts import buy_sentences, has_paths, market_line
from planner.reports.terminal import print_summary
from tests.conftest_excel import make_plan
from tests.test_excel_recalc import (
    assert_no_errors,
    assumption_row,
    cash_flow,
    named,
    recalc,
    soffice,
    summary_value,
)

REFERENCE = Path(__file__).resolve().parents[1] / "problems" / "2m_budget.yaml"
RENTALS = "Rentals (on-demand, spot, reserved)"
EDIT_GPU = "h100-sxm"  # the reference rents it on-demand for the training run
NEW_RENT = -0.40  # its rent change per year after the edit
NEW_BUY, NEW_LEAD = -0.20, 3  # the bought type's buy change and lead after the edit


def near(got, want) -> bool:
    """Within a cent or 1e-6 relative."""
    return isinstance(got, (int, float)) and abs(got - want) <= max(0.01, 1e-6 * abs(want))


def market(plan: Plan, gpu: str, key: str) -> float:
    return next(
        float(a.value) for a in plan.assumptions if a.group == f"gpu:{gpu}" and a.key == key
    )


def index(plan: Plan, month: str) -> int:
    return plan.months.index(month)


# ---------------------------------------------------------------- the reference, in LibreOffice
@pytest.fixture(scope="module")
def books(tmp_path_factory):
    soffice()  # fail before the solve if LibreOffice is missing
    from tests.solved import solved

    d = tmp_path_factory.mktemp("market_recalc")
    write_json(solved(REFERENCE)[1], d / "reference.json")
    plan = load_plan(d / "reference.json")  # as `planner report` reads it
    assert has_paths(plan) and plan.purchases
    assert any(p.order_month != p.month for p in plan.purchases)
    paths = {"plan": d / "plan.xlsx", "rent": d / "rent.xlsx", "buy": d / "buy.xlsx"}
    write_workbook(plan, paths["plan"])
    wb = load_workbook(paths["plan"])
    ws = wb["Assumptions"]
    ws.cell(assumption_row(ws, f"gpu:{EDIT_GPU}", "rent_change_per_year"), 3).value = NEW_RENT
    wb.save(paths["rent"])
    wb = load_workbook(paths["plan"])
    ws = wb["Assumptions"]
    bought = plan.purchases[0].gpu
    ws.cell(assumption_row(ws, f"gpu:{bought}", "buy_change_per_year"), 3).value = NEW_BUY
    ws.cell(assumption_row(ws, f"gpu:{bought}", "lead_months"), 3).value = NEW_LEAD
    ws.cell(assumption_row(ws, "finance", "capex_at"), 3).value = "delivery"
    wb.save(paths["buy"])
    outs = recalc(list(paths.values()), d / "out")
    lo = {k: load_workbook(o, data_only=True) for k, o in zip(paths, outs, strict=True)}
    return plan, paths, lo


@pytest.mark.parametrize("which", ["plan", "rent", "buy"])
def test_no_error_values(books, which):
    assert_no_errors(books[2][which], which)


def test_market_inputs_are_yellow_formula_inputs(books):
    plan, paths, _ = books
    ws = load_workbook(paths["plan"])["Assumptions"]
    for g in {p.gpu for p in plan.purchases} | {r.gpu for r in plan.rentals}:
        for key in ("rent_change_per_year", "buy_change_per_year", "lead_months"):
            if key != "rent_change_per_year" and g not in {p.gpu for p in plan.purchases}:
                continue
            r = assumption_row(ws, f"gpu:{g}", key)
            assert ws.cell(r, 3).fill.fgColor.rgb.endswith("FFF2CC"), (g, key)
            assert "formula input" in ws.cell(r, 7).value, (g, key)
            assert ws.cell(r, 5).value, (g, key, "a source")


def test_untouched_workbook_recalculates_to_the_plan(books):
    plan, _, lo = books
    wb, t = lo["plan"], plan.totals
    assert near(named(wb, "total_cost_usd"), t.total_usd)
    assert near(named(wb, "capex_usd"), t.capex_usd)
    assert near(named(wb, "npv_usd"), t.npv_usd)
    assert near(named(wb, "residual_value_usd"), t.residual_value_usd)
    assert near(named(wb, "book_value_usd"), t.book_value_usd)
    assert near(summary_value(wb, RENTALS), t.rental_usd)
    # the finance view (issue 14): each plan year's present value and P&L cost, as the JSON
    # says (tests/test_excel_finance_recalc checks the hand-built server plans the same way)
    pnl = wb["P&L"]
    for k, y in enumerate(plan.years):
        row = [pnl.cell(5 + k, c).value for c in range(1, 14)]
        assert row[0] == y.year
        assert near(row[9], y.pv_usd) and near(row[12], y.pnl_cost_usd), (y.year, row)
    h, rows, _ = cash_flow(wb)
    for row, m in zip(rows, plan.cash_flow, strict=True):
        for col, want in (("Capex USD", m.capex_usd), ("Rentals USD", m.rental_usd)):
            assert near(row[h[col] - 1], want), (m.month, col, row[h[col] - 1], want)
    ren = wb["Rentals"]
    for r, x in enumerate(plan.rentals, start=5):
        assert near(ren.cell(r, 8).value, x.usd_per_gpu_hour), (r, x)
        assert ren.cell(r, 10).value == "Assumptions: offer price x rent path"
    pur = wb["Purchases"]
    for r, p in enumerate(plan.purchases, start=5):
        assert near(pur.cell(r, 5).value, p.gpu_usd) and near(pur.cell(r, 6).value, p.chassis_usd)
        assert pur.cell(r, 15).value.strftime("%Y-%m") == p.order_month
        assert pur.cell(r, 17).value.strftime("%Y-%m") == p.paid_month
        assert pur.cell(r, 2).value.strftime("%Y-%m") == p.month


def test_stored_values_equal_libreoffice(books):
    """The values the writer stores (planner.reports.formula_eval, EDATE included) are
    LibreOffice's."""
    _, paths, lo = books
    stored, written = load_workbook(paths["plan"], data_only=True), load_workbook(paths["plan"])
    n = 0
    for ws in written:
        for row in ws.iter_rows():
            for c in row:
                if c.data_type != "f":
                    continue
                n += 1
                got = stored[ws.title][c.coordinate].value
                want = lo["plan"][ws.title][c.coordinate].value
                if hasattr(want, "toordinal"):
                    assert got == want, (ws.title, c.coordinate, got, want)
                elif isinstance(want, (int, float)):
                    assert near(got, want), (ws.title, c.coordinate, c.value, got, want)
    assert n > 100


def test_a_rent_change_moves_every_rental_by_its_factor(books):
    plan, _, lo = books
    old = market(plan, EDIT_GPU, "rent_change_per_year")
    moved = 0.0
    for x in plan.rentals:
        if x.gpu == EDIT_GPU and x.kind in ("on_demand", "spot"):
            t = index(plan, x.month)
            moved += x.usd * (((1 + NEW_RENT) / (1 + old)) ** (t / 12) - 1)
    assert moved < -1000  # the edit is felt
    wb, t = lo["rent"], plan.totals
    assert near(summary_value(wb, RENTALS), t.rental_usd + moved)
    assert near(named(wb, "total_cost_usd"), t.total_usd + moved)
    _, _, total = cash_flow(wb)
    assert near(total[5], t.total_usd + moved)
    # month by month: each month's rentals scaled by that month's factor
    h, rows, _ = cash_flow(wb)
    for row, m in zip(rows, plan.cash_flow, strict=True):
        k = index(plan, m.month)
        want = sum(
            x.usd * (((1 + NEW_RENT) / (1 + old)) ** (k / 12) if x.gpu == EDIT_GPU else 1)
            for x in plan.rentals
            if x.month == m.month
        )
        assert near(row[h["Rentals USD"] - 1], want), m.month
    assert named(wb, "npv_usd") < t.npv_usd


def test_buy_change_lead_and_capex_at_move_the_capex(books):
    """Buy change and lead edited, capex paid on delivery: each purchase's price is read at
    the new order month and its capex lands in its in-service month."""
    plan, _, lo = books
    wb = lo["buy"]
    h, rows, _ = cash_flow(wb)
    want: dict[str, float] = {}
    for p in plan.purchases:
        old_f = (1 + market(plan, p.gpu, "buy_change_per_year")) ** (
            index(plan, p.order_month) / 12
        )
        order = max(0, index(plan, p.month) - NEW_LEAD)
        new_f = (1 + NEW_BUY) ** (order / 12)
        want[p.month] = want.get(p.month, 0.0) + p.total_usd * new_f / old_f
    for row, m in zip(rows, plan.cash_flow, strict=True):
        assert near(row[h["Capex USD"] - 1], want.get(m.month, 0.0)), m.month
    assert near(named(wb, "capex_usd"), sum(want.values()))
    pur = wb["Purchases"]
    for r, p in enumerate(plan.purchases, start=5):
        assert pur.cell(r, 13).value == NEW_LEAD
        assert pur.cell(r, 17).value.strftime("%Y-%m") == p.month  # paid on delivery
    moved = sum(want.values()) - plan.totals.capex_usd
    assert near(named(wb, "total_cost_usd"), plan.totals.total_usd + moved)


# ---------------------------------------------------------------- fast: no LibreOffice
def _with_paths(rent: float, buy: float, lead: int) -> Plan:
    """The hand-built plan (conftest_excel) with price paths on both GPU types: rentals
    repriced at their month (reserved: at the reservation's start), l40s ordered ``lead``
    months before service at the order month's price; totals left as they were."""
    plan = make_plan()
    months = plan.months
    f = lambda c, t: (1 + c) ** (t / 12)  # noqa: E731
    start = {r.offer: months.index(r.start_month) for r in plan.reservations}
    rentals = []
    for x in plan.rentals:
        t = start[x.offer] if x.kind == "reserved" else months.index(x.month)
        rate = x.usd_per_gpu_hour * f(rent, t)
        rentals.append(x.model_copy(update={"usd_per_gpu_hour": rate, "usd": x.gpu_hours * rate}))
    purchases = []
    for p in plan.purchases:
        t = months.index(p.month)
        lag = lead if p.gpu == "l40s" else 0
        k = f(buy, t - lag)
        gpu, box = p.gpu_usd * k, p.chassis_usd * k
        total = p.nodes * box + p.count * gpu
        purchases.append(
            p.model_copy(
                update={
                    "gpu_usd": gpu,
                    "chassis_usd": box,
                    "total_usd": total,
                    "unit_usd": total / p.count,
                    "ordered": months[t - lag],
                    "capex_month": months[t - lag],
                }
            )
        )
    rows = [
        Assumption(group=f"gpu:{g}", key=key, value=v, unit=u, source="problem file: market")
        for g in ("h100-sxm", "l40s")
        for key, v, u in (
            ("rent_change_per_year", rent, "per year"),
            ("buy_change_per_year", buy, "per year"),
            ("lead_months", lead if g == "l40s" else 0, "months"),
        )
    ]
    rows.append(Assumption(group="finance", key="capex_at", value="order"))
    return plan.model_copy(
        update={
            "rentals": rentals,
            "purchases": purchases,
            "assumptions": plan.assumptions + rows,
        }
    )


def test_hand_built_plan_with_paths_prices_every_row_live(tmp_path):
    """Reserved rows at their start month's price, l40s at its order month's, capex in the
    order month: the stored values (what the writer computed) say the plan's figures."""
    plan = _with_paths(-0.2, -0.1, 0)
    path = tmp_path / "paths.xlsx"
    write_workbook(plan, path)
    wb, wf = load_workbook(path, data_only=True), load_workbook(path)
    ren = wb["Rentals"]
    for r, x in enumerate(plan.rentals, start=5):
        assert wf["Rentals"].cell(r, 8).value.startswith("=Assumptions!"), x
        assert near(ren.cell(r, 8).value, x.usd_per_gpu_hour), (x, ren.cell(r, 8).value)
    assert near(summary_value(wb, RENTALS), sum(x.usd for x in plan.rentals))
    h, rows, _ = cash_flow(wb)
    for row, m in zip(rows, plan.months, strict=True):
        want = sum(p.total_usd for p in plan.purchases if p.paid_month == m)
        assert near(row[h["Capex USD"] - 1], want), m
    pur = wb["Purchases"]
    for r, p in enumerate(plan.purchases, start=5):
        assert wf["Purchases"].cell(r, 5).value.endswith(f"^(N{r}/12)"), p
        assert near(pur.cell(r, 5).value, p.gpu_usd) and near(pur.cell(r, 6).value, p.chassis_usd)
        assert pur.cell(r, 15).value.strftime("%Y-%m") == p.order_month
    assert any(p.gpu_usd != 7_500.0 for p in plan.purchases if p.gpu == "l40s")


def _cells(path: Path) -> dict[str, dict[str, object]]:
    """Every cell but the Assumptions sheet's, a reference to Assumptions named by its
    group/key (rows the report adds after the plan's move down with more plan rows)."""
    wb = load_workbook(path)
    a = wb["Assumptions"]
    name = {r: f"{a.cell(r, 1).value}/{a.cell(r, 2).value}" for r in range(5, a.max_row + 1)}

    def named_refs(v: object) -> object:
        if not isinstance(v, str) or not v.startswith("="):
            return v
        return re.sub(r"Assumptions!\$C\$(\d+)", lambda m: name[int(m[1])], v)

    return {
        ws.title: {c.coordinate: named_refs(c.value) for row in ws.iter_rows() for c in row}
        for ws in wb
        if ws.title != "Assumptions"
    }


def test_plans_without_paths_keep_their_workbook(tmp_path):
    """Zero changes and no lead (market rows appended), or a plan from before price paths
    (no rows, no ``ordered``): every sheet but Assumptions is the workbook of before."""
    old = make_plan()
    zero = _with_paths(0.0, 0.0, 0)
    zero = zero.model_copy(
        update={
            "purchases": [
                p.model_copy(update={"ordered": "", "capex_month": ""}) for p in zero.purchases
            ]
        }
    )
    assert not has_paths(old) and not has_paths(zero) and market_line(zero) is None
    write_workbook(old, tmp_path / "old.xlsx")
    write_workbook(zero, tmp_path / "zero.xlsx")
    a, b = _cells(tmp_path / "old.xlsx"), _cells(tmp_path / "zero.xlsx")
    for sheet in a:
        diff = {k: (v, b[sheet].get(k)) for k, v in a[sheet].items() if b[sheet].get(k) != v}
        assert not diff, (sheet, list(diff.items())[:5])


def test_summary_and_terminal_say_order_service_and_paths():
    plan = _with_paths(-0.2, -0.1, 1)
    line = market_line(plan)
    assert line == (
        "Price paths and lead times: h100-sxm: rents -20 %/year, purchases -10 %/year, no lead "
        "time; l40s: rents -20 %/year, purchases -10 %/year, lead 1 month "
        "(from the problem's market:)."
    )
    (l40s,) = [s for s in buy_sentences(plan) if "l40s" in s]
    assert "ordered in 2027-01, in service 2027-02," in l40s
    console = Console(width=200, record=True, emoji=False)
    print_summary(plan, console)
    out = console.export_text()
    assert "ordered" in out and "in service" in out and line in " ".join(out.split())
    (row,) = [x for x in out.splitlines() if "l40s" in x and "$" in x and "2027" in x]
    assert row.split()[:3] == ["2027-01", "2027-02", "l40s"], row
