"""The saved workbook carries each formula's value: pandas reads numbers equal to the plan.

No LibreOffice here: the values are the ones the writer computed and stored
(planner/reports/xlsx_cache.py); tests/test_excel_recalc.py checks them against LibreOffice.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from openpyxl import load_workbook

from planner.reports.excel import write_workbook
from planner.reports.fleet_facts import peak_gpus
from planner.reports.plan_facts import decision_sentences
from tests.conftest_excel import make_plan

REL = 1e-9
REFERENCE = Path(__file__).resolve().parents[1] / "problems" / "2m_budget.yaml"


def close(got, want) -> bool:
    return isinstance(got, (int, float)) and abs(got - want) <= REL * max(abs(want), 1.0) + 1e-6


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    plan = make_plan()
    path = tmp_path_factory.mktemp("values") / "plan.xlsx"
    write_workbook(plan, path)
    return plan, path


def labelled(df: pd.DataFrame, label: str, col: int = 1):
    rows = df.index[df[0] == label]
    assert len(rows) == 1, f"{label!r} on Summary {len(rows)} times"
    return df.iloc[rows[0], col]


def test_every_formula_has_a_stored_value(saved):
    _, path = saved
    formulas, values = load_workbook(path), load_workbook(path, data_only=True)
    empty = [
        f"{ws.title}!{c.coordinate}"
        for ws in formulas
        for row in ws.iter_rows()
        for c in row
        if c.data_type == "f" and values[ws.title][c.coordinate].value is None
    ]
    assert not empty, empty[:10]


def test_pandas_reads_summary_totals_equal_to_the_plan(saved):
    plan, path = saved
    t = plan.totals
    df = pd.read_excel(path, "Summary", header=None)
    for label, want in (
        ("Total cost", t.total_usd),
        ("Capex (purchases)", t.capex_usd),
        ("Power", t.power_usd),
        ("Hosting", t.hosting_usd),
        ("Rentals (on-demand, spot, reserved)", t.rental_usd),
        (
            "of which reserved commitments".rjust(len("of which reserved commitments") + 2),
            t.reserved_usd,
        ),
    ):
        assert close(labelled(df, label), want), (label, labelled(df, label), want)
    # per-year totals: the "Total" row of the year table is the plan's total; years sum to it
    year_total = labelled(df, "Total", 4)
    assert close(year_total, t.total_usd)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The reference problem solved (about a second): its workload costs are the solver's."""
    from tests.solved import solved

    _, plan = solved(REFERENCE)
    path = tmp_path_factory.mktemp("reference") / "2m_budget.xlsx"
    write_workbook(plan, path)
    return plan, path


@pytest.mark.parametrize("which", ["saved", "reference"])
def test_pandas_reads_months_and_workloads_equal_to_the_plan(which, request):
    plan, path = request.getfixturevalue(which)
    cf = pd.read_excel(path, "Cash flow", header=3)
    months = cf[cf["Month"] != "Total"]
    assert len(months) == len(plan.cash_flow)
    for (_, row), m in zip(months.iterrows(), plan.cash_flow, strict=True):
        assert row["Month"].strftime("%Y-%m") == m.month  # a real date, not text
        assert close(row["Total USD"], m.total_usd), (m.month, row["Total USD"], m.total_usd)
    summary = pd.read_excel(path, "Summary", header=None)
    assert close(labelled(summary, "Total cost"), plan.totals.total_usd)
    if which == "saved":
        return  # the hand-built plan's workload costs are not the solver's attribution
    wl = pd.read_excel(path, "Workloads", header=3, nrows=len(plan.workloads))
    for (_, row), w in zip(wl.iterrows(), plan.workloads, strict=True):
        assert row["Workload"] == w.name
        assert close(row["Cost USD"], w.cost_usd), (w.name, row["Cost USD"], w.cost_usd)
        assert close(row["Cost share"], w.cost_share)
        assert close(labelled(summary, w.name, 2), w.cost_usd)


def test_page_one_text_comes_from_the_plan(saved):
    plan, path = saved
    df = pd.read_excel(path, "Summary", header=None)
    texts = set(df[0].dropna().astype(str))
    assert set(decision_sentences(plan)) <= texts
    for p in plan.purchases:
        assert any(s.startswith("Buy ") and p.gpu in s and p.month in s for s in texts)
    for r in plan.rentals:
        if r.kind != "reserved":
            assert any(r.workload in s and r.offer in s for s in texts), (r.workload, r.offer)


def test_peak_gpus_are_peaks_not_averages(saved):
    plan, _ = saved
    peaks = {p.gpu: p for p in peak_gpus(plan)}
    hourly: dict[tuple[str, str], float] = {}
    for r in plan.rentals:  # a reservation's own rows are its commitment: reserved, not rented
        if r.kind != "reserved":
            hourly[(r.gpu, r.month)] = hourly.get((r.gpu, r.month), 0.0) + r.gpu_hours
    for f in plan.fleet:
        p = peaks[f.gpu]
        assert p.owned >= f.owned and p.reserved >= f.reserved
        # the monthly average of rented GPUs never exceeds the most rented at once
        assert p.rented + 1e-9 >= hourly.get((f.gpu, f.month), 0.0) / plan.hours_per_month
        assert p.total <= max(x.owned for x in plan.fleet if x.gpu == f.gpu) + p.reserved + p.rented
    for tr in plan.train_allocations:
        if tr.source != "owned":
            assert peaks[tr.gpu].rented >= tr.gpus


def test_charts_have_no_all_zero_series(saved):
    _, path = saved
    ws = load_workbook(path, data_only=True)["Charts"]
    header = next(r for r in range(1, ws.max_row + 1) if ws.cell(r, 1).value == "Month")
    for c in range(5, ws.max_column + 1):
        values = [ws.cell(r, c).value or 0 for r in range(header + 1, ws.max_row + 1)]
        assert any(v != 0 for v in values), ws.cell(header, c).value
