"""Recalculate the workbook with LibreOffice and check the live formulas against the Plan.

openpyxl writes formulas without cached values; LibreOffice (headless) computes them when it
converts xlsx -> xlsx, and openpyxl (``data_only=True``) reads the results back. One soffice
run converts four workbooks: three hand-built ones (the plan as written, the plan with a unit
price and the power price edited in the Assumptions sheet, and a plan without purchases or
rentals) and the workbook of a real solve (the reference, problems/2m_budget.yaml, the shared
solve of tests/solved.py, with its buy margins) to check the formulas against the solver's
own figures. A second run prints that same workbook to PDF (soffice converts to one format
per run).

CI must install LibreOffice Calc (Debian: ``libreoffice-calc-nogui``); without ``soffice``
this test FAILS on purpose: a skipped check would let broken formulas ship.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from openpyxl import load_workbook

from planner.reports.excel import write_workbook
from tests.conftest_excel import SITE, make_plan

EVIL = '=HYPERLINK("http://x","y")'
REL = 1e-4  # 0.01 %
ERRORS = ("#REF!", "#NAME?", "#VALUE!", "#DIV/0!", "#N/A", "#NUM!", "#NULL!", "Err:")
PRICE_DELTA = 1_000.0  # USD added to the h100-sxm card price
NEW_KWH = 0.15  # the power price after the edit (was SITE["power_usd_per_kwh"])


def soffice() -> str:
    exe = shutil.which("soffice") or shutil.which("libreoffice")
    if exe is None:
        pytest.fail(
            "LibreOffice is required to recalculate the Excel report: `soffice` is not on PATH. "
            "Install it (Debian/Ubuntu: apt-get install -y --no-install-recommends libreoffice-calc-nogui)."
        )
    return exe


def assumption_row(ws, group: str, key: str) -> int:
    for r in range(5, ws.max_row + 1):
        if ws.cell(r, 1).value == group and ws.cell(r, 2).value == key:
            return r
    raise AssertionError(f"no assumption {group}/{key}")


def recalc(files: list[Path], outdir: Path) -> list[Path]:
    profile = Path(f"/tmp/lo_profile_{os.getpid()}")
    cmd = [
        soffice(),
        f"-env:UserInstallation=file://{profile}",
        "--headless",
        "--norestore",
        "--convert-to",
        "xlsx",
        "--outdir",
        str(outdir),
        *map(str, files),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    outs = [outdir / f.name for f in files]
    missing = [o for o in outs if not o.exists()]
    assert proc.returncode == 0 and not missing, (
        f"soffice failed (exit {proc.returncode}); missing {missing}\n{proc.stdout}\n{proc.stderr}"
    )
    return outs


REFERENCE = Path(__file__).resolve().parents[1] / "problems" / "2m_budget.yaml"


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The hand-built workbooks and the reference's, recalculated in ONE soffice run (each run
    starts LibreOffice afresh: ~3 s of CPU before the first file)."""
    from planner.analysis.explain import buy_margins
    from tests.solved import solved

    soffice()  # fail before the solve if LibreOffice is missing
    d = tmp_path_factory.mktemp("recalc")
    plan = make_plan(serve_name=EVIL)
    empty = make_plan(empty=True)
    a, b, c = d / "plan.xlsx", d / "edited.xlsx", d / "empty.xlsx"
    write_workbook(plan, a)
    write_workbook(empty, c)
    # finance edits two inputs in ONE place each: a card price and the power price
    wb = load_workbook(a)
    ws = wb["Assumptions"]
    r = assumption_row(ws, "gpu:h100-sxm", "purchase_usd")
    ws.cell(r, 3).value = ws.cell(r, 3).value + PRICE_DELTA
    r = assumption_row(ws, "site", "power_usd_per_kwh")
    ws.cell(r, 3).value = NEW_KWH
    wb.save(b)
    # the plan test_problems and eight other modules read (tests/solved.py shares it between
    # workers), written as `planner solve` writes it: its buy margins bounded to 10 % of the
    # default 60 s limit
    inputs, ref = solved(REFERENCE)
    r = d / "2m_budget.xlsx"
    write_workbook(ref, r, margins=buy_margins(inputs, ref, time_limit=6.0))
    outdir = d / "out"
    outdir.mkdir()
    ra, rb, rc, rr = recalc([a, b, c, r], outdir)
    return {
        "reference": (ref, r, load_workbook(rr, data_only=True)),
        "plan": plan,
        "empty": empty,
        "a": load_workbook(ra, data_only=True),
        "b": load_workbook(rb, data_only=True),
        "c": load_workbook(rc, data_only=True),
        "a_formulas": load_workbook(ra),
        "a_stored": load_workbook(a, data_only=True),  # the values the writer stored
        "a_written": load_workbook(a),
    }


@pytest.fixture(scope="module")
def books(converted):
    return converted


def close(got, want) -> bool:
    return isinstance(got, (int, float)) and abs(got - want) <= REL * max(abs(want), 1.0)


def named(wb, name: str):
    ((sheet, coord),) = list(wb.defined_names[name].destinations)
    return wb[sheet][coord.replace("$", "")].value


def cash_flow(wb) -> tuple[dict[str, int], list[list], list]:
    ws = wb["Cash flow"]
    h = {c.value: c.column for c in ws[4] if c.value}
    rows, total = [], None
    for r in range(5, ws.max_row + 1):
        row = [ws.cell(r, c).value for c in range(1, ws.max_column + 1)]
        if row[0] == "Total":
            total = row
            break
        rows.append(row)
    return h, rows, total


def summary_value(wb, label: str):
    ws = wb["Summary"]
    for r in range(1, ws.max_row + 1):
        if ws.cell(r, 1).value == label:
            return ws.cell(r, 2).value
    raise AssertionError(f"no {label!r} on Summary")


def assert_no_errors(wb, which: str) -> None:
    bad = [
        f"{ws.title}!{c.coordinate}={c.value}"
        for ws in wb
        for row in ws.iter_rows()
        for c in row
        if (c.data_type == "e") or (isinstance(c.value, str) and c.value.startswith(ERRORS))
    ]
    assert not bad, f"{which}: error values after recalculation: {bad[:20]}"


@pytest.mark.parametrize("which", ["a", "b", "c"])
def test_no_error_values(books, which):
    assert_no_errors(books[which], which)


def test_totals_match_plan(books):
    wb, plan = books["a"], books["plan"]
    t = plan.totals
    assert close(named(wb, "total_cost_usd"), t.total_usd), (
        named(wb, "total_cost_usd"),
        t.total_usd,
    )
    assert close(named(wb, "capex_usd"), t.capex_usd)
    assert close(summary_value(wb, "Power"), t.power_usd)
    assert close(summary_value(wb, "Hosting"), t.hosting_usd)
    assert close(summary_value(wb, "Rentals (on-demand, spot, reserved)"), t.rental_usd)
    assert close(summary_value(wb, "  of which reserved commitments"), t.reserved_usd)
    assert close(
        summary_value(wb, "Capex headroom (budget - capex)"), t.capex_budget_usd - t.capex_usd
    )


def test_every_month_matches_plan(books):
    wb, plan = books["a"], books["plan"]
    h, rows, total = cash_flow(wb)
    assert len(rows) == len(plan.months)
    cum_capex = 0.0
    for row, m in zip(rows, plan.cash_flow, strict=True):
        assert row[0].strftime("%Y-%m") == m.month
        for col, want in (
            ("Capex USD", m.capex_usd),
            ("Power USD", m.power_usd),
            ("Hosting USD", m.hosting_usd),
            ("Rentals USD", m.rental_usd),
            ("Total USD", m.total_usd),
            ("Running total USD", m.cumulative_usd),
        ):
            assert close(row[h[col] - 1], want), (m.month, col, row[h[col] - 1], want)
        cum_capex += m.capex_usd
        assert close(
            row[h["Capex budget headroom USD"] - 1], plan.totals.capex_budget_usd - cum_capex
        )
        assert abs(row[h["Workbook - solver USD"] - 1]) <= REL * max(m.total_usd, 1.0)
    assert close(total[h["Total USD"] - 1], plan.totals.total_usd)


def test_detail_rows_match_plan(books):
    wb, plan = books["a"], books["plan"]
    pur = wb["Purchases"]
    for r, p in enumerate(plan.purchases, start=5):
        assert close(pur[f"G{r}"].value, p.unit_usd) and close(pur[f"H{r}"].value, p.total_usd)
        assert (pur[f"C{r}"].value, pur[f"D{r}"].value) == (p.nodes, p.count)
    ren = wb["Rentals"]
    for r, x in enumerate(plan.rentals, start=5):
        assert close(ren[f"I{r}"].value, x.usd)
    fl = wb["Fleet"]
    for r, f in enumerate(plan.fleet, start=5):
        assert close(fl[f"J{r}"].value, f.owned_utilization)
        assert close(fl[f"K{r}"].value, f.it_kw)
    ws = wb["Workloads"]
    serve = next(i for i, w in enumerate(plan.workloads) if w.kind == "serve")
    # USD per 1M tokens follows the live cost (the hand-built plan's cost split is not the
    # solver's attribution: tests/test_excel_values.py checks that on a real solve)
    w = plan.workloads[serve]
    assert close(ws.cell(5 + serve, 11).value, ws.cell(5 + serve, 8).value / w.tokens * 1e6)


def test_edited_inputs_flow_into_every_total(books):
    plan = books["plan"]
    t = plan.totals
    qty = sum(p.count for p in plan.purchases if p.gpu == "h100-sxm")
    d_capex = qty * PRICE_DELTA
    d_power = t.power_usd * (NEW_KWH / SITE["power_usd_per_kwh"] - 1)
    wb = books["b"]
    assert close(named(wb, "capex_usd"), t.capex_usd + d_capex)
    assert close(summary_value(wb, "Power"), t.power_usd + d_power)
    assert close(named(wb, "total_cost_usd"), t.total_usd + d_capex + d_power)
    # the month of the purchase carries the capex change
    h, rows, _ = cash_flow(wb)
    month = next(p.month for p in plan.purchases if p.gpu == "h100-sxm")
    row = next(r for r in rows if r[0].strftime("%Y-%m") == month)
    want = next(m.capex_usd for m in plan.cash_flow if m.month == month) + d_capex
    assert close(row[h["Capex USD"] - 1], want)


def test_empty_plan_recalculates_to_zero(books):
    wb = books["c"]
    assert named(wb, "total_cost_usd") == 0
    assert named(wb, "capex_usd") == 0
    h, rows, total = cash_flow(wb)
    assert all(
        total[h[c] - 1] == 0
        for c in ("Capex USD", "Power USD", "Hosting USD", "Rentals USD", "Total USD")
    )
    assert total[h["Capex budget headroom USD"] - 1] == books["empty"].totals.capex_budget_usd


def test_malicious_name_survives_recalculation_as_text(books):
    wb = books["a_formulas"]
    cells = [c for ws in wb for row in ws.iter_rows() for c in row if c.value == EVIL]
    assert cells, "the workload name is missing"
    assert all(c.data_type == "s" for c in cells)
    assert all(books["a"][c.parent.title][c.coordinate].value == EVIL for c in cells)


@pytest.fixture(scope="module")
def real(converted):
    plan, _, wb = converted["reference"]
    return plan, wb


def test_real_plan_recalculates_to_the_solvers_figures(real):
    plan, wb = real
    assert_no_errors(wb, "real")
    t = plan.totals
    assert close(named(wb, "total_cost_usd"), t.total_usd), (
        named(wb, "total_cost_usd"),
        t.total_usd,
    )
    assert close(named(wb, "capex_usd"), t.capex_usd)
    for label, want in (
        ("Power", t.power_usd),
        ("Hosting", t.hosting_usd),
        ("Rentals (on-demand, spot, reserved)", t.rental_usd),
    ):
        assert close(summary_value(wb, label), want), (label, summary_value(wb, label), want)
    h, rows, _ = cash_flow(wb)
    assert len(rows) == len(plan.cash_flow)
    for row, m in zip(rows, plan.cash_flow, strict=True):
        for col, want in (
            ("Capex USD", m.capex_usd),
            ("Power USD", m.power_usd),
            ("Hosting USD", m.hosting_usd),
            ("Rentals USD", m.rental_usd),
            ("Total USD", m.total_usd),
        ):
            assert close(row[h[col] - 1], want), (m.month, col, row[h[col] - 1], want)


def test_stored_values_equal_libreoffice(books):
    """Every formula's value stored at writing is the one LibreOffice computes."""
    stored, lo = books["a_stored"], books["a"]
    n = 0
    for ws in books["a_written"]:
        for row in ws.iter_rows():
            for c in row:
                if c.data_type != "f":
                    continue
                n += 1
                got, want = stored[ws.title][c.coordinate].value, lo[ws.title][c.coordinate].value
                where = f"{ws.title}!{c.coordinate} {c.value}"
                if isinstance(want, (int, float)) and not isinstance(want, bool):
                    assert close(got, want), (where, got, want)
                else:
                    assert got == want, (where, got, want)
    assert n > 100


def _sheet_totals(wb) -> dict[str, float]:
    """The grand total as each total sheet shows it."""
    s = wb["Summary"]
    labels = {s.cell(r, 1).value: r for r in range(1, s.max_row + 1)}
    year_total = s.cell(labels["Total"], 5).value
    per_workload = sum(
        s.cell(r, 3).value
        for r in range(labels["Workload"] + 1, labels["Not used by any workload"] + 1)
    )
    _, _, cf_total = cash_flow(wb)
    wl = wb["Workloads"]
    wl_total = next(
        wl.cell(r, 8).value for r in range(5, wl.max_row + 1) if wl.cell(r, 1).value == "Total"
    )
    solver = wb["Solver"]
    live = next(
        solver.cell(r, 2).value
        for r in range(1, solver.max_row + 1)
        if solver.cell(r, 1).value == "Total cost"
    )
    return {
        "Summary total": named(wb, "total_cost_usd"),
        "Summary per year": year_total,
        "Summary per workload": per_workload,
        "Cash flow": cf_total[5],
        "Solver (live)": live,
        "Charts": sum(
            (wb["Charts"].cell(r, c).value or 0)
            for r in range(45, wb["Charts"].max_row + 1)
            for c in (2, 3, 4)
        ),
        # the workload rows carry all cost but what no workload used
        "Workloads + unused": wl_total + s.cell(labels["Not used by any workload"], 3).value,
    }


def test_edited_inputs_move_every_total_sheet_consistently(books):
    """After an edit of two yellow inputs, every sheet's total moved by the same amount."""
    plan = books["plan"]
    t = plan.totals
    qty = sum(p.count for p in plan.purchases if p.gpu == "h100-sxm")
    want = t.total_usd + qty * PRICE_DELTA + t.power_usd * (NEW_KWH / SITE["power_usd_per_kwh"] - 1)
    before, after = _sheet_totals(books["a"]), _sheet_totals(books["b"])
    for name, got in after.items():
        assert close(got, want), (name, got, want, before[name])
    assert all(close(v, t.total_usd) for v in before.values()), before


def test_pdf_page_one_is_the_decision(converted, tmp_path):
    """LibreOffice prints the reference workbook; page 1 says the decision, the years, the risks."""
    exe = soffice()
    pdftotext = shutil.which("pdftotext")
    assert pdftotext, "pdftotext (poppler-utils) is required to read the PDF"
    plan, path, _ = converted["reference"]
    profile = tmp_path / "lo_profile"
    subprocess.run(
        [
            exe,
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--norestore",
            "--convert-to",
            # page 1 only (LibreOffice >= 7.4 reads the filter's options as JSON; an older one
            # prints every page, and pdftotext reads page 1 all the same): the 18-page
            # export cost ~1.3 s more CPU
            'pdf:calc_pdf_Export:{"PageRange":{"type":"string","value":"1"}}',
            "--outdir",
            str(tmp_path),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    text = subprocess.run(
        [pdftotext, "-f", "1", "-l", "1", "-layout", str(tmp_path / "2m_budget.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    flat = " ".join(text.split())
    assert "The decision" in flat and "Risks" in flat and "Cost per year" in flat
    for p in plan.purchases:
        assert "Buy " in flat and p.gpu in flat and p.month in flat
    for r in plan.rentals:
        assert r.workload in flat, r.workload
    for year in sorted({m[:4] for m in plan.months}):
        assert year in flat
    assert "Share of spend on spot" in flat and "Not modeled" in flat
    # the margins name each GPU type bought; a plan that buys nothing has none to name
    margin = "Buying vs the next-best plan: " + ("without" if plan.purchases else "")
    assert margin in flat
    # the cash total with its present value and resale value beside it
    t = plan.totals
    assert f"present value ${t.npv_usd:,.0f}" in flat, flat
    if plan.purchases:
        assert f"${t.residual_value_usd:,.0f} resale value" in flat
    assert "Optimality gap" not in flat  # the solver's details are on their own sheet
