"""LibreOffice recalculates the finance view (issue 14) to the plan JSON's figures.

One soffice run converts three workbooks: the solved server plan (resale on the curve), the
same with the discount rate and a chassis price edited on Assumptions, and the server plan
under straight-line resale. Present value, total, resale and book value must come out within
a cent (or 1e-6 relative) of the JSON; after the edit they must move as the economics say.
The reference problem's workbook, written from its plan JSON, gets the same checks in
tests/test_excel_market.py (test_untouched_workbook_recalculates_to_the_plan), which
recalculates that very workbook.
"""

from __future__ import annotations

import pytest
from openpyxl import load_workbook

from planner.plan.data import Plan
from planner.reports.excel import write_workbook
from tests.conftest_excel import server_plan
from tests.test_excel_recalc import assert_no_errors, assumption_row, named, recalc, soffice

NEW_RATE = 0.25  # the discount rate after the edit (the plan's is 10 %)
CHASSIS_DELTA = 5_000.0  # USD added to the partial-fill server's chassis price


def near(got, want) -> bool:
    """Within a cent or 1e-6 relative."""
    return isinstance(got, (int, float)) and abs(got - want) <= max(0.01, 1e-6 * abs(want))


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    soffice()  # fail before the solves if LibreOffice is missing
    d = tmp_path_factory.mktemp("finance_recalc")
    plans = {"curve": server_plan("curve"), "straight_line": server_plan("straight_line")}
    paths = {k: d / f"{k}.xlsx" for k in plans}
    for k, plan in plans.items():
        write_workbook(plan, paths[k])
    paths["edited"] = d / "edited.xlsx"
    wb = load_workbook(paths["curve"])
    ws = wb["Assumptions"]
    ws.cell(assumption_row(ws, "finance", "discount_rate"), 3).value = NEW_RATE
    r = assumption_row(ws, "gpu:pc", "chassis_usd")
    ws.cell(r, 3).value = ws.cell(r, 3).value + CHASSIS_DELTA
    wb.save(paths["edited"])
    outs = recalc(list(paths.values()), d / "out")
    lo = {k: load_workbook(o, data_only=True) for k, o in zip(paths, outs, strict=True)}
    return plans, paths, lo


@pytest.mark.parametrize("which", ["curve", "straight_line", "edited"])
def test_no_error_values(books, which):
    assert_no_errors(books[2][which], which)


@pytest.mark.parametrize("which", ["curve", "straight_line"])
def test_libreoffice_totals_equal_the_json(books, which):
    plans, _, lo = books
    plan, wb = plans[which], lo[which]
    t = plan.totals
    for name, want in (
        ("npv_usd", t.npv_usd),
        ("total_cost_usd", t.total_usd),
        ("capex_usd", t.capex_usd),
        ("residual_value_usd", t.residual_value_usd),
        ("book_value_usd", t.book_value_usd),
    ):
        assert near(named(wb, name), want), (which, name, named(wb, name), want)
    pnl = wb["P&L"]
    for k, y in enumerate(plan.years):
        row = [pnl.cell(5 + k, c).value for c in range(1, 14)]
        assert row[0] == y.year
        assert near(row[9], y.pv_usd) and near(row[12], y.pnl_cost_usd), (which, y.year, row)


@pytest.mark.parametrize("which", ["curve", "straight_line"])
def test_stored_values_equal_libreoffice(books, which):
    """Every finance formula's stored value is LibreOffice's (the evaluator knows ``^``)."""
    _, paths, lo = books
    written, stored = load_workbook(paths[which]), load_workbook(paths[which], data_only=True)
    n = 0
    for ws in written:
        for row in ws.iter_rows():
            for c in row:
                if c.data_type != "f":
                    continue
                n += 1
                got, want = (
                    stored[ws.title][c.coordinate].value,
                    lo[which][ws.title][c.coordinate].value,
                )
                where = f"{ws.title}!{c.coordinate} {c.value}"
                if isinstance(want, (int, float)) and not isinstance(want, bool):
                    assert abs(got - want) <= 1e-9 * max(abs(want), 1.0), (where, got, want)
                else:
                    assert got == want, (where, got, want)
    assert n > 200


def edited_figures(plan: Plan) -> dict[str, float]:
    """Total, capex, NPV and book value after the edit, from the plan's months: the chassis
    delta is paid with each partial-fill server (in its month, depreciated with it); resale
    under the curve is the cards' alone, so it stays; every month is discounted at NEW_RATE."""
    T, months = len(plan.months), plan.months
    extra = [0.0] * T
    book = plan.totals.book_value_usd
    for p in plan.purchases:
        if p.gpu == "pc" and p.nodes:
            t = months.index(p.month)
            extra[t] += p.nodes * CHASSIS_DELTA
            life = plan.depreciation[0].years
            book += p.nodes * CHASSIS_DELTA * max(0.0, 1 - (T - t) / (12 * life))
    npv = sum(
        (m.total_usd + extra[t]) * (1 + NEW_RATE) ** (-t / 12) for t, m in enumerate(plan.cash_flow)
    )
    npv -= plan.totals.residual_value_usd * (1 + NEW_RATE) ** (-T / 12)
    return {
        "total_cost_usd": plan.totals.total_usd + sum(extra),
        "capex_usd": plan.totals.capex_usd + sum(extra),
        "npv_usd": npv,
        "residual_value_usd": plan.totals.residual_value_usd,
        "book_value_usd": book,
    }


def test_edited_rate_and_chassis_move_npv_consistently(books):
    plans, _, lo = books
    plan, before, after = plans["curve"], lo["curve"], lo["edited"]
    want = edited_figures(plan)
    assert want["capex_usd"] > plan.totals.capex_usd  # the edit touches a bought server
    for name, value in want.items():
        assert near(named(after, name), value), (name, named(after, name), value)
    # the edit moved the present value (a workbook whose NPV ignores the inputs would not)
    assert abs(named(after, "npv_usd") - named(before, "npv_usd")) > 1_000
    # the P&L's years still add up to the Summary's present value
    pnl = after["P&L"]
    pv = sum(pnl.cell(5 + k, 10).value for k in range(len(plan.years)))
    assert near(pv, named(after, "npv_usd"))
