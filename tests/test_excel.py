"""The Excel report, read back with openpyxl: layout, live formulas, safety, atomic write."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from openpyxl import load_workbook
from openpyxl.workbook.workbook import Workbook

from planner.base.errors import InputError, OutputError
from planner.cli.report import report
from planner.plan.data import Assumption, write_json
from planner.reports.excel import SHEETS, write_workbook
from tests.conftest_excel import make_plan

EVIL = '=HYPERLINK("http://x","y")'


@pytest.fixture
def plan():
    return make_plan()


@pytest.fixture
def book(plan, tmp_path):
    path = tmp_path / "plan.xlsx"
    write_workbook(plan, path)
    return load_workbook(path)


def headers(ws, row: int = 4) -> dict[str, int]:
    return {c.value: c.column for c in ws[row] if c.value is not None}


def total_row(ws) -> int:
    return next(c.row for c in ws["A"] if c.value == "Total")


def defined_cell(wb, name: str):
    ((sheet, coord),) = list(wb.defined_names[name].destinations)
    return wb[sheet][coord.replace("$", "")]


def test_sheets_in_order(book):
    assert book.sheetnames[:9] == [
        "Summary",
        "Purchases",
        "Rentals",
        "Workloads",
        "Allocation",
        "Cash flow",
        "P&L",
        "Fleet",
        "Assumptions",
    ]
    assert tuple(book.sheetnames) == SHEETS


def test_defined_names_point_at_summary_formulas(book):
    for name in ("total_cost_usd", "capex_usd"):
        cell = defined_cell(book, name)
        assert cell.parent.title == "Summary"
        assert cell.data_type == "f", f"{name} must be a formula, got {cell.value!r}"
    assert defined_cell(book, "total_cost_usd").value.startswith("='Cash flow'!")
    assert defined_cell(book, "capex_usd").value.startswith("='Cash flow'!")


def test_totals_are_formulas_not_numbers(book, plan):
    cf = book["Cash flow"]
    h = headers(cf)
    tr = total_row(cf)
    assert tr == 5 + len(plan.months)
    for name in ("Capex USD", "Power USD", "Hosting USD", "Rentals USD", "Total USD"):
        assert cf.cell(tr, h[name]).data_type == "f"
    for r in range(5, tr):
        assert isinstance(cf.cell(r, 1).value, dt.datetime)  # months are real dates for SUMIFS
        for name in ("Capex USD", "Power USD", "Hosting USD", "Rentals USD"):
            assert cf.cell(r, h[name]).value.startswith("=SUMIFS(")
        assert cf.cell(r, h["Capex budget headroom USD"]).value.startswith("=Assumptions!$C$")

    pur = book["Purchases"]
    for r in range(5, 5 + len(plan.purchases)):
        assert pur[f"E{r}"].value.startswith("=Assumptions!$C$")  # card price
        assert pur[f"F{r}"].value.startswith("=Assumptions!$C$")  # chassis price per server
        assert pur[f"H{r}"].value == f"=C{r}*F{r}+D{r}*E{r}"  # servers x chassis + cards x card

    ren = book["Rentals"]
    for r in range(5, 5 + len(plan.rentals)):
        assert ren[f"H{r}"].value.startswith("=Assumptions!$C$")
        assert ren[f"I{r}"].value == f"=G{r}*H{r}"

    fl = book["Fleet"]
    h = headers(fl)
    for r in range(5, 5 + len(plan.fleet)):
        power = fl.cell(r, h["Power USD"]).value
        # pue, kWh, H, host W per server (x servers), idle x2, tdp
        assert power.startswith("=") and power.count("Assumptions!") == 7
        assert f"E{r}*Assumptions!" in power
        # owned x USD per GPU-month + IT kW x USD per kW-month
        hosting = fl.cell(r, h["Hosting USD"]).value
        assert re.fullmatch(rf"=D{r}\*Assumptions!\$C\$\d+\+K{r}\*Assumptions!\$C\$\d+", hosting)


def test_formulas_reference_the_right_assumptions(book):
    """Each Assumptions cell a formula uses holds the figure its group/key says."""
    a = book["Assumptions"]
    where = {(a.cell(r, 1).value, a.cell(r, 2).value): r for r in range(5, a.max_row + 1)}
    pur = book["Purchases"]
    r = where[("gpu:h100-sxm", "purchase_usd")]
    assert pur["E5"].value == f"=Assumptions!$C${r}"
    r = where[("offer:lambda-h100-od", "usd_per_gpu_hour")]
    assert book["Rentals"]["H5"].value == f"=Assumptions!$C${r}"
    r = where[("gpu:h100-sxm", "chassis_usd")]
    assert pur["F5"].value == f"=Assumptions!$C${r}"
    power = book["Fleet"]["M5"].value
    for key in (
        ("site", "pue"),
        ("site", "power_usd_per_kwh"),
        ("gpu:h100-sxm", "tdp_w"),
        ("gpu:h100-sxm", "idle_w"),
        ("gpu:h100-sxm", "host_w"),
    ):
        assert f"Assumptions!$C${where[key]}" in power, key
    assert f"Assumptions!$C${where[('site', 'colo_usd_per_kw_month')]}" in book["Fleet"]["N5"].value
    # the per-GPU server figures are derived from the server: an edited chassis shows in them
    r = where[("gpu:h100-sxm", "server_overhead_usd_per_gpu")]
    chassis, slots = where[("gpu:h100-sxm", "chassis_usd")], where[("gpu:h100-sxm", "server_slots")]
    assert a.cell(r, 3).value == f"=$C${chassis}/$C${slots}"


def test_assumptions_sheet_lists_everything(book, plan, tmp_path):
    path = tmp_path / "values.xlsx"
    write_workbook(plan, path)
    a = load_workbook(path, data_only=True)["Assumptions"]  # derived rows are formulas
    assert [c.value for c in a[4]][:6] == ["Group", "Key", "Value", "Unit", "Source", "As of"]
    rows = {
        (a.cell(r, 1).value, a.cell(r, 2).value): [a.cell(r, c).value for c in range(3, 7)]
        for r in range(5, a.max_row + 1)
    }
    for x in plan.assumptions:
        assert (x.group, x.key) in rows
        value, unit, source, as_of = rows[(x.group, x.key)]
        assert (unit or "", source or "", as_of or "") == (x.unit, x.source, x.as_of)
        if isinstance(x.value, (int, float)) and not isinstance(x.value, bool):
            assert value == pytest.approx(x.value)
    assert rows[("plan", "status")][0] == "optimal"
    assert rows[("plan", "gap")][0] == pytest.approx(plan.gap)
    assert rows[("plan", "planner_version")][0] == plan.planner_version
    assert rows[("plan", "problem_sha256")][0] == plan.problem_sha256


def test_malicious_text_stays_text(tmp_path):
    plan = make_plan(serve_name=EVIL, provider="=cmd|' /C calc'!A0")
    plan = plan.model_copy(
        update={
            "assumptions": [
                *plan.assumptions,
                Assumption(group="site", key="note", value="@SUM(1,2)", source=EVIL),
            ]
        }
    )
    path = tmp_path / "evil.xlsx"
    write_workbook(plan, path)
    wb = load_workbook(path)
    hits = []
    for ws in wb:
        for row in ws.iter_rows():
            for c in row:
                if c.value in (EVIL, "=cmd|' /C calc'!A0", "@SUM(1,2)"):
                    hits.append(c)
                if c.data_type == "f":
                    assert "HYPERLINK" not in c.value and "cmd|" not in c.value, c.coordinate
    sheets = {c.parent.title for c in hits}
    assert {"Rentals", "Workloads", "Assumptions"} <= sheets
    assert all(c.data_type == "s" for c in hits)
    assert all(c.quotePrefix for c in hits if c.value.startswith(("=", "@")))


def test_empty_plan_is_valid_with_zero_rows(tmp_path):
    plan = make_plan(empty=True)
    path = tmp_path / "empty.xlsx"
    write_workbook(plan, path)
    wb = load_workbook(path)
    assert wb["Purchases"]["A5"].value == "(no purchases)"
    assert wb["Rentals"]["A5"].value == "(no rentals)"
    assert wb["Fleet"]["A5"].value == "(no fleet)"
    cf = wb["Cash flow"]
    assert cf["B5"].value == "=SUMIFS(Purchases!$H$5:$H$5,Purchases!$B$5:$B$5,$A5)"
    assert defined_cell(wb, "total_cost_usd").data_type == "f"
    for ws in wb:
        for t in ws.tables.values():
            first, last = t.ref.split(":")
            assert int(re.sub(r"\D", "", last)) > int(re.sub(r"\D", "", first)), t.ref


def test_tables_print_setup_and_freeze(book):
    names = {t for ws in book for t in ws.tables}
    assert {
        "tblPurchases",
        "tblRentals",
        "tblFleet",
        "tblCashFlow",
        "tblAssumptions",
        "tblWorkloads",
    } <= names
    for ws in book:
        assert ws.page_setup.orientation == "landscape"
        assert ws.sheet_properties.pageSetUpPr.fitToPage
        assert ws.page_setup.fitToWidth == 1
    for name in ("Purchases", "Rentals", "Fleet", "Cash flow", "Assumptions"):
        assert book[name].freeze_panes is not None
        assert book[name].print_title_rows == "$4:$4"
    assert book["Summary"]["A1"].font.name == "Arial"
    assert "$" in book["Cash flow"]["B5"].number_format
    assert book["Cash flow"]["A5"].number_format == "yyyy-mm"


def test_charts_present(tmp_path, plan):
    from planner.reports.excel import build_workbook

    wb = build_workbook(plan)
    charts = wb["Charts"]._charts
    titles = [c.title.tx.rich.p[0].r[0].t for c in charts]
    assert any("spend" in t for t in titles)
    # serving and training each on a chart of their own, when the plan has them
    kinds = {w.kind for w in plan.workloads}
    assert any("Serving" in t for t in titles) == ("serve" in kinds)
    assert any("Training" in t for t in titles) == ("train" in kinds)
    assert len(charts) == 2 + len(kinds)


def test_workloads_sheet(book, plan):
    ws = book["Workloads"]
    h = headers(ws)
    names = [ws.cell(r, 1).value for r in range(5, 5 + len(plan.workloads))]
    assert names == [w.name for w in plan.workloads]
    serve_row = 5 + [w.kind for w in plan.workloads].index("serve")
    assert ws.cell(serve_row, h["USD per 1M tokens"]).data_type == "f"
    keys = {(ws.cell(r, 1).value, ws.cell(r, 3).value) for r in range(1, ws.max_row + 1)}
    assert ("chat-api", "p95_ttft_ms") in keys and ("pretrain-7b", "finish_month_index") in keys


def test_missing_assumptions_fall_back_and_warn(tmp_path, plan):
    bare = plan.model_copy(update={"assumptions": []})
    path = tmp_path / "bare.xlsx"
    write_workbook(bare, path)
    wb = load_workbook(path)
    a = wb["Assumptions"]
    rows = {
        (a.cell(r, 1).value, a.cell(r, 2).value): a.cell(r, 3).value
        for r in range(5, a.max_row + 1)
    }
    assert rows[("plan", "hours_per_month")] == 730
    assert rows[("gpu:h100-sxm", "purchase_usd")] == 25_000  # derived from the purchase row
    assert rows[("budget", "capex_usd")] == plan.totals.capex_budget_usd  # from plan.totals
    assert wb["Purchases"]["E5"].value.startswith("=Assumptions!")
    summary_text = " ".join(
        str(c.value) for row in wb["Summary"].iter_rows() for c in row if c.value
    )
    assert "inputs missing" in summary_text and "site / pue" in summary_text


def test_price_differing_from_assumptions_is_kept(tmp_path, plan):
    p0 = plan.purchases[0]
    odd = p0.model_copy(
        update={"gpu_usd": 30_000.0, "unit_usd": 36_250.0, "total_usd": 8 * 36_250.0}
    )
    path = tmp_path / "odd.xlsx"
    write_workbook(plan.model_copy(update={"purchases": [odd, *plan.purchases[1:]]}), path)
    ws = load_workbook(path)["Purchases"]
    assert ws["E5"].value == 30_000  # the solver's figure, not the catalog's
    assert "differs" in ws["K5"].value


def test_atomic_write_keeps_old_file_when_save_fails(tmp_path, plan, monkeypatch):
    path = tmp_path / "plan.xlsx"
    write_workbook(plan, path)
    before = path.read_bytes()

    def broken_save(self, filename):
        filename.write(b"PK\x03\x04 half a zip")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Workbook, "save", broken_save)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_workbook(plan, path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["plan.xlsx"]


def test_atomic_write_keeps_old_file_when_rename_fails(tmp_path, plan, monkeypatch):
    path = tmp_path / "plan.xlsx"
    write_workbook(plan, path)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("planner.base.files.os.replace", broken_replace)
    with pytest.raises(OutputError, match="No space left"):
        write_workbook(make_plan(serve_name="other"), path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["plan.xlsx"]  # no temp file left behind


def test_written_file_has_ordinary_permissions(tmp_path, plan):
    path = tmp_path / "plan.xlsx"
    umask = os.umask(0o022)
    os.umask(umask)
    write_workbook(plan, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    path.chmod(0o640)
    write_workbook(plan, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # a rewrite keeps the file's mode


def test_cli_report_rebuilds_from_json(tmp_path, plan):
    src = tmp_path / "p.json"
    write_json(plan, src)
    result = CliRunner().invoke(report, [str(src)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "p.xlsx"
    assert out.exists() and str(out) in result.output
    assert load_workbook(out).sheetnames[0] == "Summary"
    other = tmp_path / "sub" / "book.xlsx"
    result = CliRunner().invoke(report, [str(src), "-o", str(other)])
    assert result.exit_code == 0, result.output
    assert other.exists()


@pytest.mark.parametrize("content", [None, "{not json", '{"planner_version": "0.1.0"}', "[]"])
def test_cli_report_bad_file_is_input_error(tmp_path, content):
    src = tmp_path / "bad.json"
    if content is not None:
        src.write_text(content)
    result = CliRunner().invoke(report, [str(src)])
    assert isinstance(result.exception, InputError), result.output
    assert str(src) in str(result.exception)
    assert not (tmp_path / "bad.xlsx").exists()


def test_cli_report_rejects_directory_and_non_xlsx(tmp_path, plan):
    result = CliRunner().invoke(report, [str(tmp_path)])
    assert isinstance(result.exception, InputError)
    src = tmp_path / "p.json"
    write_json(plan, src)
    result = CliRunner().invoke(report, [str(src), "-o", str(tmp_path / "p.json")])
    assert isinstance(result.exception, InputError)
    assert Path(src).read_text().startswith("{")
