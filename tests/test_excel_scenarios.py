"""The report of a two-stage plan (issue 28): the Scenarios sheet, page 1's risk sentences
and the terminal's scenario table.

The small fixture (tests/fixtures/scenarios/small.yaml) is solved once per process
(tests/solved.py); variants for the other risk measures are the same plan with its risk
terms and figures recomputed by the planner's own functions (no solve). Values are checked
with the in-repo evaluator (the one that stores every formula's value) and, once per
module, with LibreOffice.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from openpyxl import load_workbook
from rich.console import Console

from planner.optimize.stochastic import Risk, cvar, risk_value
from planner.plan.data import Plan, RiskTerms
from planner.reports.excel import SHEETS, build_workbook, write_workbook
from planner.reports.formula_eval import XlError, evaluate_all
from planner.reports.plan_facts import decision_sentences
from planner.reports.terminal import print_summary
from tests.conftest_excel import make_plan
from tests.solved import solved
from tests.test_excel_recalc import recalc

FIXTURE = Path(__file__).parent / "fixtures" / "scenarios" / "small.yaml"
SHEET = "Scenarios"
FIRST = 5  # the first scenario row


@pytest.fixture(scope="module")
def plan() -> Plan:
    return solved(FIXTURE)[1]


@pytest.fixture(scope="module")
def book(plan):
    """The plan's workbook and its evaluated values, built once for the tests that only read
    them (a test that edits a workbook builds its own)."""
    wb = build_workbook(plan)
    return wb, evaluate_all(wb)


def variant(plan: Plan, measure: str, alpha: float = 0.7, weight: float = 0.5) -> Plan:
    """``plan`` minimising another measure: its figures recomputed as the planner does."""
    risk = Risk(measure, alpha, weight)
    sc = plan.scenarios
    probs = [s.probability for s in sc]
    costs = [s.cost_usd for s in sc]
    value = risk_value(costs, probs, risk)
    base = [s.base_usd or 0.0 for s in sc]
    figures = {
        "cvar_usd": cvar(costs, probs, alpha) if measure == "cvar" else None,
        "risk_usd": value,
        "vss_usd": risk_value(base, probs, risk) - value,
        "evpi_usd": value - risk_value([s.own_usd for s in sc], probs, risk),
    }
    totals = plan.totals.model_copy(update=figures)
    terms = RiskTerms(measure=measure, alpha=alpha, weight=weight)
    return plan.model_copy(update={"risk": terms, "totals": totals})


def row_of(ws, label: str) -> int:
    for r in range(1, ws.max_row + 1):
        if ws.cell(r, 1).value == label:
            return r
    raise AssertionError(f"no {label!r} on {ws.title}")


def live(wb, values: dict, label: str):
    """The live figure (column D) of the line ``label`` below the scenario table."""
    return values[SHEET][f"D{row_of(wb[SHEET], label)}"]


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-6)


def test_one_row_per_scenario_with_formulas(plan, book):
    wb, _ = book
    assert wb.sheetnames[1] == SHEET  # beside page 1
    ws = wb[SHEET]
    names = [ws.cell(FIRST + i, 1).value for i in range(len(plan.scenarios))]
    assert names == [s.name for s in plan.scenarios] == ["base", "slow", "viral"]
    assert ws.cell(FIRST + len(names), 1).value.startswith("Expected")
    for i, s in enumerate(plan.scenarios):
        r = FIRST + i
        assert ws.cell(r, 2).value == s.probability
        assert ws.cell(r, 2).fill.fgColor.rgb.endswith("FFF2CC")  # a yellow input
        assert ws.cell(r, 6).value == f"=D{r}-E{r}"  # the regret is a formula
    for label in (
        "Expected cost under this plan",
        "Worst case under this plan",
        "VSS: value of planning for every scenario",
        "EVPI: value of knowing the future",
    ):
        assert str(ws.cell(row_of(ws, label), 4).value).startswith("=")
    expected = ws.cell(FIRST + len(names), 4).value
    assert expected == "=$B$5*$D$5+$B$6*$D$6+$B$7*$D$7"  # SUMPRODUCT written out
    assert {"expected_usd", "vss_usd", "evpi_usd", "worst_usd"} <= set(wb.defined_names)


def test_live_figures_equal_the_plans(plan, book):
    wb, values = book
    t = plan.totals
    assert live(wb, values, "Expected cost under this plan") == approx(t.expected_usd)
    assert live(wb, values, "Worst case under this plan") == approx(t.worst_usd)
    assert live(wb, values, "VSS: value of planning for every scenario") == approx(t.vss_usd)
    assert live(wb, values, "EVPI: value of knowing the future") == approx(t.evpi_usd)
    for i, s in enumerate(plan.scenarios):
        assert values[SHEET][f"F{FIRST + i}"] == approx(s.regret_usd)
    check = values[SHEET][f"C{FIRST + len(plan.scenarios)}"]
    assert check.startswith("OK")


def test_a_changed_probability_moves_the_expected_cost(plan):
    wb = build_workbook(plan)
    ws = wb[SHEET]
    ws["B5"], ws["B6"], ws["B7"] = 0.2, 0.3, 0.5
    values = evaluate_all(wb)
    c = [s.cost_usd for s in plan.scenarios]
    own = [s.own_usd for s in plan.scenarios]
    want = 0.2 * c[0] + 0.3 * c[1] + 0.5 * c[2]
    assert live(wb, values, "Expected cost under this plan") == approx(want)
    evpi = want - (0.2 * own[0] + 0.3 * own[1] + 0.5 * own[2])
    assert live(wb, values, "EVPI: value of knowing the future") == approx(evpi)
    ws["B5"] = 0.6  # now they sum to 140 %
    values = evaluate_all(wb)
    assert values[SHEET][f"C{FIRST + 3}"].startswith("NO")


def test_libreoffice_agrees_and_follows_a_changed_probability(plan, tmp_path):
    """One soffice run: the workbook as written and with its probabilities edited."""
    a, b = tmp_path / "plan.xlsx", tmp_path / "edited.xlsx"
    write_workbook(variant(plan, "cvar"), a)
    wb = load_workbook(a)
    # the formulas as written (the edit below changes inputs only: B5:B7 hold numbers)
    formulas = [list(row) for row in wb[SHEET].iter_rows()]
    assert not any(str(wb[SHEET][c].value).startswith("=") for c in ("B5", "B6", "B7"))
    wb[SHEET]["B5"], wb[SHEET]["B6"], wb[SHEET]["B7"] = 0.2, 0.3, 0.5
    wb.save(b)
    out = tmp_path / "out"
    out.mkdir()
    ra, rb = (load_workbook(p, data_only=True) for p in recalc([a, b], out))
    stored = load_workbook(a, data_only=True)
    ws, got = stored[SHEET], ra[SHEET]
    compared = 0
    for row in formulas:
        for cell in row:
            if isinstance(cell.value, str) and cell.value.startswith("="):
                want = ws[cell.coordinate].value
                have = got[cell.coordinate].value
                assert have == (approx(want) if isinstance(want, float) else want), cell.coordinate
                compared += 1
    assert compared > 30
    c = [s.cost_usd for s in plan.scenarios]
    edited = rb[SHEET]
    assert edited[f"D{row_of(edited, 'Expected cost under this plan')}"].value == pytest.approx(
        0.2 * c[0] + 0.3 * c[1] + 0.5 * c[2], rel=1e-9
    )


@pytest.mark.parametrize("measure", ["cvar", "worst_case"])
def test_other_measures_are_live_too(plan, measure):
    p = variant(plan, measure)
    wb = build_workbook(p)
    values = evaluate_all(wb)
    t = p.totals
    assert live(wb, values, "This plan in the risk measure") == approx(t.risk_usd)
    assert live(wb, values, "VSS: value of planning for every scenario") == approx(t.vss_usd)
    assert live(wb, values, "EVPI: value of knowing the future") == approx(t.evpi_usd)
    if measure == "cvar":
        assert live(wb, values, "CVaR under this plan") == approx(t.cvar_usd)
        ws = wb[SHEET]
        ws[f"D{row_of(ws, 'CVaR level alpha')}"] = 0.8  # the worst 20 %: all in 'viral'
        values = evaluate_all(wb)
        assert live(wb, values, "CVaR under this plan") == approx(plan.scenarios[2].cost_usd)


def test_base_purchases_that_cannot_meet_a_scenario_leave_vss_open(plan):
    sc = list(plan.scenarios)
    sc[2] = sc[2].model_copy(update={"base_usd": None, "base_plan": None})
    p = plan.model_copy(
        update={"scenarios": sc, "totals": plan.totals.model_copy(update={"vss_usd": None})}
    )
    wb = build_workbook(p)
    values = evaluate_all(wb)
    assert not [v for v in values[SHEET].values() if isinstance(v, XlError)]
    ws = wb[SHEET]
    assert ws.cell(row_of(ws, "VSS: value of planning for every scenario"), 4).value == "n/a"
    assert "vss_usd" not in wb.defined_names
    assert any("'viral'" in line and "no VSS" in line for line in decision_sentences(p))


def summary_texts(wb) -> set[str]:
    return {c.value for row in wb["Summary"].iter_rows() for c in row if isinstance(c.value, str)}


def test_page_one_states_the_decision_and_its_risk(plan, book):
    texts = summary_texts(book[0])
    lines = decision_sentences(plan)
    assert set(lines) <= texts
    page = " ".join(lines)
    assert "8x a100-pcie-80gb" in page and "same in every scenario" in page
    assert f"Expected present value ${plan.totals.expected_usd:,.0f}" in page
    for s in plan.scenarios:
        assert f"${s.cost_usd:,.0f} in '{s.name}'" in page
    assert "would cost the same: its purchases are this plan's (VSS $0)" in page
    assert "(EVPI)" in page and f"${plan.totals.evpi_usd:,.0f}" in page


def test_an_ordinary_plan_gets_no_scenarios(plan):
    ordinary = make_plan()
    wb = build_workbook(ordinary)
    assert wb.sheetnames == list(SHEETS)
    assert not any("scenario" in t.lower() for t in summary_texts(wb))
    c = Console(width=80, record=True, emoji=False)
    print_summary(ordinary, c)
    assert "Scenarios" not in c.export_text()


@pytest.mark.parametrize("measure", ["expected", "cvar"])
def test_the_terminal_table_fits_80_columns(plan, measure):
    p = plan if measure == "expected" else variant(plan, measure)
    long = p.scenarios[1].model_copy(update={"name": "a slow year " + "x" * 80})
    p = p.model_copy(update={"scenarios": [p.scenarios[0], long, p.scenarios[2]]})
    c = Console(width=80, record=True, emoji=False)
    print_summary(p, c)
    text = c.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Scenarios (present value)" in text and "viral" in text
    for head in ("expected:", "worst:", "VSS:", "EVPI:"):
        assert any(line.startswith(head) for line in text.splitlines()), head
