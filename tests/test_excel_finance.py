"""The workbook's finance view (issue 14), read with pandas from the stored values: present
value, resale and book value on Summary, the P&L per plan year and the depreciation schedule
per purchase equal the plan's; servers, host watts and colocation by the kW in the detail
sheets; page 1 names servers and the present value. LibreOffice: test_excel_finance_recalc.py.
"""

from __future__ import annotations

import pandas as pd
import pytest

from planner.reports.excel import write_workbook
from planner.reports.plan_facts import decision_sentences
from tests.conftest_excel import make_plan, server_plan

REL = 1e-9


def close(got, want, abs_tol: float = 1e-6) -> bool:
    return isinstance(got, (int, float)) and abs(got - want) <= REL * max(abs(want), 1.0) + abs_tol


@pytest.fixture(scope="module", params=["curve", "straight_line"])
def solved(request, tmp_path_factory):
    plan = server_plan(request.param)
    path = tmp_path_factory.mktemp("finance") / f"{request.param}.xlsx"
    write_workbook(plan, path)
    return plan, path


def labelled(df: pd.DataFrame, label: str, col: int = 1):
    rows = df.index[df[0] == label]
    assert len(rows) == 1, f"{label!r} {len(rows)} times"
    return df.iloc[rows[0], col]


def test_the_plan_has_what_the_workbook_must_show(solved):
    """The fixture is worth testing with: partial and full servers, cards added to a server
    bought earlier, resale value, two plan years."""
    plan, _ = solved
    fills = {(p.gpu, p.count == p.nodes * p.slots) for p in plan.purchases if p.nodes}
    assert ("pc", False) in fills and ("hx", True) in fills
    assert any(p.nodes == 0 and p.count > 0 for p in plan.purchases)
    assert plan.totals.residual_value_usd > 0 and len(plan.years) == 2
    assert plan.totals.npv_usd is not None and plan.totals.npv_usd < plan.totals.total_usd


def test_summary_reads_npv_resale_and_book_value(solved):
    plan, path = solved
    t = plan.totals
    df = pd.read_excel(path, "Summary", header=None)
    assert close(labelled(df, "Total cost"), t.total_usd)
    assert close(labelled(df, "Present value (NPV) of the cash, net of resale"), t.npv_usd)
    assert close(labelled(df, "Resale value at the horizon end"), t.residual_value_usd)
    assert close(labelled(df, "Book value at the horizon end"), t.book_value_usd)
    assert close(labelled(df, "Discount rate (per year)"), plan.discount_rate)


def pnl_tables(path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-year table and the depreciation schedule of the P&L sheet."""
    raw = pd.read_excel(path, "P&L", header=None)
    first_total = raw.index[raw[0] == "Total"][0]
    years = pd.read_excel(path, "P&L", header=3, nrows=first_total - 4)
    head = raw.index[raw[0] == "GPU"][0]
    sched = pd.read_excel(path, "P&L", header=head)
    return years, sched[sched["GPU"] != "Total"].dropna(subset=["GPU"])


def test_pnl_per_year_equals_the_plan(solved):
    plan, path = solved
    years, _ = pnl_tables(path)
    assert len(years) == len(plan.years)
    cols = {
        "Capex USD": "capex_usd",
        "Power USD": "power_usd",
        "Hosting USD": "hosting_usd",
        "Rentals USD": "rental_usd",
        "Resale at horizon end USD (inflow)": "residual_usd",
        "Cash USD": "cash_usd",
        "Present value USD": "pv_usd",
        "Depreciation USD": "depreciation_usd",
        "Gain on sale USD": "gain_on_sale_usd",
        "P&L cost USD": "pnl_cost_usd",
    }
    for (_, row), y in zip(years.iterrows(), plan.years, strict=True):
        assert row["Plan year"] == y.year
        assert row["First month"].strftime("%Y-%m") == y.first_month
        assert row["Last month"].strftime("%Y-%m") == y.last_month
        for col, field in cols.items():
            # the plan rounds each purchase's yearly depreciation to 1e-6 USD
            assert close(row[col], getattr(y, field), 1e-4), (y.year, col, row[col])
    assert close(years["Present value USD"].sum(), plan.totals.npv_usd)


def test_depreciation_schedule_equals_the_plan(solved):
    plan, path = solved
    _, sched = pnl_tables(path)
    assert len(sched) == len(plan.depreciation)
    for (_, row), d in zip(sched.iterrows(), plan.depreciation, strict=True):
        assert row["GPU"] == d.gpu and row["Month"].strftime("%Y-%m") == d.month
        assert close(row["Capex USD"], d.capex_usd)
        assert close(row["Book value at horizon end USD"], d.book_value_end_usd)
        assert close(row["Resale value USD"], d.residual_value_usd)
        for y, want in enumerate(d.by_year_usd, start=1):
            assert close(row[f"Depreciation year {y} USD"], want, 1e-5), (d.month, y)
        assert "curve gpu:" in row["Resale share source"]  # a formula, not the plan's figure


def test_purchases_fleet_and_cash_flow_equal_the_plan(solved):
    plan, path = solved
    pur = pd.read_excel(path, "Purchases", header=3, nrows=len(plan.purchases))
    for (_, row), p in zip(pur.iterrows(), plan.purchases, strict=True):
        assert (row["Servers"], row["GPUs"]) == (p.nodes, p.count)
        assert close(row["Chassis USD / server"], p.chassis_usd)
        assert close(row["Extended cost USD"], p.total_usd)
    fl = pd.read_excel(path, "Fleet", header=3, nrows=len(plan.fleet))
    for (_, row), f in zip(fl.iterrows(), plan.fleet, strict=True):
        assert row["Servers"] == f.servers
        assert close(row["IT kW (GPUs + hosts)"], f.it_kw)
    cf = pd.read_excel(path, "Cash flow", header=3, nrows=len(plan.months))
    for t, ((_, row), m) in enumerate(zip(cf.iterrows(), plan.cash_flow, strict=True)):
        assert close(row["Discount factor"], (1 + plan.discount_rate) ** (-t / 12))
        assert close(row["Present value USD"], m.total_usd * row["Discount factor"])


def test_page_one_names_servers_and_the_present_value(solved):
    plan, path = solved
    texts = set(pd.read_excel(path, "Summary", header=None)[0].dropna().astype(str))
    assert set(decision_sentences(plan)) <= texts
    buys = [s for s in texts if s.startswith(("Buy ", "Add "))]
    for p in plan.purchases:
        said = [s for s in buys if p.gpu in s and p.month in s]
        assert len(said) == 1, (p, buys)
        if p.nodes:
            assert f"{p.nodes} server" in said[0] and p.server in said[0]
        else:  # cards into a server bought earlier: no server is bought
            assert said[0].startswith("Add ") and "server" in said[0]
    total = next(s for s in texts if s.startswith("Total over"))
    assert f"present value ${plan.totals.npv_usd:,.0f}" in total
    assert f"${plan.totals.residual_value_usd:,.0f} resale value" in total


@pytest.mark.parametrize("servers", [True, False])
def test_hand_built_plans_old_and_new_keep_their_totals(servers, tmp_path):
    """A plan written before server types (a server share per GPU, host watts per GPU, no
    finance figures) and one with them: the workbook's totals are the plan's."""
    plan = make_plan(servers=servers)
    path = tmp_path / "plan.xlsx"
    write_workbook(plan, path)
    df = pd.read_excel(path, "Summary", header=None)
    t = plan.totals
    for label, want in (
        ("Total cost", t.total_usd),
        ("Capex (purchases)", t.capex_usd),
        ("Power", t.power_usd),
        ("Hosting", t.hosting_usd),
    ):
        assert close(labelled(df, label), want), (label, labelled(df, label), want)
    # no discount rate in the plan: the present value is the cash total
    assert close(labelled(df, "Present value (NPV) of the cash, net of resale"), t.total_usd)
