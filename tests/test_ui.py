"""``planner ui`` (issue 54): the page's data, its safety rules, and the page itself in a real
browser (Debian's Chromium, driven by Playwright; `.ci/run` installs it).

Without Chromium the browser tests FAIL on purpose, as the LibreOffice tests do: a skipped
check would let a broken page ship. ``PLANNER_CHROMIUM`` names another Chromium binary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from planner.analysis.sweep import changed_inputs
from planner.base.errors import InputError
from planner.inputs.keys import load_base
from planner.reports.plan_facts import decision_sentences
from planner.ui import safety, views
from tests.solved import REFERENCE, ROOT, solved

SHOTS = ROOT / "outputs" / "ui-screenshots"  # the docs' screenshots (docs/guides/web-ui.md)
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-background-networking",  # no network here: its lookups only slow the start
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# ------------------------------------------------------------------ the page's data


def test_plan_view_says_what_the_plan_and_workbook_say():
    _, plan = solved(REFERENCE)
    v = views.plan_view(plan)
    assert v["decision"] == decision_sentences(plan)
    assert ("Total cash", views.usd(plan.totals.total_usd)) in v["costs"]
    assert v["npv"] == plan.totals.npv_usd
    assert [p["gpu"] for p in v["purchases"]] == [p.gpu for p in plan.purchases]
    # rental rows add up to the plan's rental cost, to the dollar of rounding per row
    cost = sum(float(r["cost"].strip("$").replace(",", "")) for r in v["rentals"])
    assert abs(cost - sum(r.usd for r in plan.rentals)) <= len(v["rentals"])
    # each row says how its offer is paid and its price's date, as the Rentals sheet does
    assert all(r["terms"].startswith("on demand, billed by the hour; published price of")
               for r in v["rentals"])  # fmt: skip
    assert all(w["meets"] for w in v["workloads"])


def test_fleet_chart_stacks_owned_and_rented_gpus_per_month():
    _, plan = solved(REFERENCE)
    fig = views.fleet_figure(plan)
    by_name = {t["name"]: t for t in fig["data"]}
    for f in plan.fleet:
        i = plan.months.index(f.month)
        if f.owned:
            assert by_name[f"{f.gpu} owned"]["y"][i] == f.owned
        if f.rented_gpu_hours:
            got = by_name[f"{f.gpu} rented (average)"]["y"][i]
            assert got == pytest.approx(f.rented_gpu_hours / plan.hours_per_month)
    assert all(len(t["x"]) == len(plan.months) == len(t["y"]) for t in fig["data"])


def test_comparing_a_plan_with_itself_changes_nothing():
    _, plan = solved(REFERENCE)
    diff = views.compare_view(plan, plan)
    assert diff["same_purchases"] and not diff["purchases"] and not diff["rentals"]
    assert all(r["change"] in ("$0", "-") for r in diff["cost"])


def test_comparing_names_what_changed():
    _, plan = solved(REFERENCE)
    other = plan.model_copy(deep=True)
    other.purchases = []
    other.totals.npv_usd = plan.totals.npv_usd + 1000
    diff = views.compare_view(plan, other)
    assert not diff["same_purchases"]
    bought = sum(p.count for p in plan.purchases)
    assert {"what": plan.purchases[0].gpu, "base": f"{bought}", "new": "0",
            "change": f"-{bought}"} in diff["purchases"]  # fmt: skip
    assert diff["cost"][0]["change"].startswith("$1,000 (+0.1")


def test_a_two_stage_plan_shows_its_scenarios_and_risk_once():
    from tests.test_problems import TWO_STAGE_S

    _, plan = solved(str(ROOT / "problems" / "uncertain_demand.yaml"), two_stage_s=TWO_STAGE_S)
    v = views.plan_view(plan)
    assert [s["name"] for s in v["scenarios"]] == [s.name for s in plan.scenarios]
    assert len(plan.scenarios) >= 2
    risk = [s for s in v["decision"] if s.startswith("Expected present value")]
    assert len(risk) == 1  # in the decision, not repeated below the scenario table


# ------------------------------------------------------------------ safety


def test_paths_outside_the_working_folder_are_refused(tmp_path):
    (tmp_path / "problems").mkdir()
    (tmp_path / "problems" / "a.yaml").write_text("name: a\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text("name: b\n")
    (tmp_path / "link.yaml").symlink_to(outside)
    assert safety.read_problem_file(tmp_path, "problems/a.yaml") == ("name: a\n", "problems/a.yaml")
    for bad in ("../" + outside.name, str(outside), "link.yaml", "problems/../../x.yaml"):
        with pytest.raises(safety.OutsideFolderError, match="outside the working folder"):
            safety.read_problem_file(tmp_path, bad)
    with pytest.raises(InputError, match="not a problem file"):
        safety.read_problem_file(tmp_path, "problems")
    assert safety.problem_files(tmp_path) == ["problems/a.yaml", "link.yaml"]


def test_uploads_over_the_limit_are_refused():
    safety.check_upload(safety.MAX_UPLOAD_BYTES)
    with pytest.raises(InputError, match="may be at most"):
        safety.check_upload(safety.MAX_UPLOAD_BYTES + 1)


# ------------------------------------------------------------------ what-if changes


def test_set_changes_the_values_a_whatif_row_changes():
    base = load_base(REFERENCE)
    inputs = changed_inputs(base, ["power_price=0.16", "growth=0.05", "capex_budget=1M"])
    p = inputs.problem
    assert p.site.power_usd_per_kwh == 0.16 and p.budget.capex_usd == 1e6
    assert [w.traffic.growth_per_month for w in p.workloads.serve] == [0.05]
    assert "[power_price=0.16, growth=0.05, capex_budget=1M]" in inputs.source_path
    with pytest.raises(InputError, match="one value per key"):
        changed_inputs(base, ["power_price=0.1,0.2"])
    with pytest.raises(InputError, match="power_usd_per_kwh"):
        changed_inputs(base, ["power_price=abc"])


# ------------------------------------------------------------------ in a browser


def _chromium() -> str:
    exe = os.environ.get("PLANNER_CHROMIUM") or shutil.which("chromium")
    if not exe:
        pytest.fail(
            "Chromium is required for the web page's tests: Debian/Ubuntu `apt-get install "
            "chromium` (.ci/run does), or set PLANNER_CHROMIUM to a Chromium binary"
        )
    return exe


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = [sys.executable, "-m", "planner"]
    return subprocess.run([*exe, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _start(folder: Path) -> tuple[subprocess.Popen, str]:
    """``planner ui`` started as a user starts it, serving ``folder``; its address."""
    from planner.ui.app import free_port

    port = free_port("127.0.0.1")
    cmd = [sys.executable, "-m", "planner", "ui", "--port", str(port), "--folder", str(folder)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    url = f"http://127.0.0.1:{port}/"
    assert url in line, line
    for _ in range(100):  # uvicorn binds just after the line is printed
        try:
            urllib.request.urlopen(url + "problem", timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    return proc, url


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server opened on the reference, as `planner ui` with no argument opens it."""
    folder = tmp_path_factory.mktemp("ui")
    (folder / "problems").mkdir()
    shutil.copy(REFERENCE, folder / "problems" / REFERENCE.name)
    proc, url = _start(folder)
    yield url, folder
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def bare_server(tmp_path_factory):
    """A server with no problem open (its folder has none): nothing solves until asked."""
    folder = tmp_path_factory.mktemp("ui-bare")
    proc, url = _start(folder)
    yield url, folder
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        yield b
        b.close()


def _page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


def _usd(page, selector: str) -> float:
    return float(page.get_attribute(selector, "data-usd"))


def test_the_page_shows_the_reference_plan_and_a_whatif_beside_it(server, browser):
    url, folder = server
    # the CLI's plan of the same what-if, solved while the page solves its own
    cli_json = folder / "whatif.json"
    change = ["--set", "power_price=0.3"]
    cli = subprocess.Popen(
        [sys.executable, "-m", "planner", "solve", "problems/2m_budget.yaml", *change,
         "--json", str(cli_json), "--no-excel"],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    page, errors = _page(browser)
    page.goto(url)
    page.wait_for_selector("#plan-title", timeout=120_000)
    _, plan = solved(REFERENCE)
    # the decision and totals equal `planner solve problems/2m_budget.yaml --json`'s
    assert _usd(page, "#base-npv") == pytest.approx(plan.totals.npv_usd, rel=1e-9)
    assert _usd(page, "#base-total") == pytest.approx(plan.totals.total_usd, rel=1e-9)
    sentences = page.locator("#base-plan .sentences li").all_inner_texts()
    assert sentences == decision_sentences(plan)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "plan.png"), full_page=True)
    # the downloads are the plan
    job = page.get_attribute("#dl-json", "href")
    with urllib.request.urlopen(url.rstrip("/") + job) as r:
        assert json.loads(r.read())["totals"]["npv_usd"] == _usd(page, "#base-npv")
    # a what-if: power at $0.30/kWh
    page.fill("#wi-power_price", "0.3")
    page.click("#wi-run")
    page.wait_for_selector("#diff", timeout=120_000)
    new_npv = _usd(page, "#new-npv")
    assert page.locator("#col-base").is_visible() and page.locator("#col-new").is_visible()
    assert new_npv != pytest.approx(_usd(page, "#base-npv"), rel=1e-4)
    assert "power_price=0.3" in page.inner_text("#diff")
    page.screenshot(path=str(SHOTS / "whatif.png"), full_page=False)
    assert cli.wait(timeout=300) == 0, cli.stderr.read()
    cli_plan = json.loads(cli_json.read_text())
    assert new_npv == pytest.approx(cli_plan["totals"]["npv_usd"], rel=1e-9)
    assert errors == []


def test_the_frontier_page_charts_deepseek_on_three_gpus(bare_server, browser):
    url, _ = bare_server
    page, errors = _page(browser)
    page.goto(url + "frontier")
    page.wait_for_selector("#frontier-chart[data-traces]", timeout=120_000)
    assert page.get_attribute("#frontier-chart", "data-traces") == "3"
    names = page.evaluate("document.getElementById('frontier-chart').data.map(t => t.name)")
    assert sorted(n.split()[0] for n in names) == ["b200", "gb200", "mi355x"]
    page.screenshot(path=str(SHOTS / "frontier.png"))
    assert errors == []


BROKEN = """\
name: broken
horizon: {start: 2027-01, months: 12}
site: {power_usd_per_kwh: 0.12}
budget: {capex_usd: lots}
workloads:
  serve: []
"""


def test_a_broken_problem_shows_the_clis_error_with_its_line(bare_server, browser):
    url, folder = bare_server
    (folder / "pasted.yaml").write_text(BROKEN)
    cli = _cli("solve", "pasted.yaml", "--no-excel", cwd=folder)
    assert cli.returncode == 2
    page, errors = _page(browser)
    page.goto(url + "problem")
    page.fill("#problem-text", BROKEN)
    page.click("#plan-it")
    page.wait_for_selector("#problem-error:not([hidden])", timeout=30_000)
    shown = page.inner_text("#problem-error pre")
    assert "pasted.yaml:4: budget.capex_usd" in shown
    assert shown.split() == cli.stderr.split()  # the CLI's message, word for word
    page.screenshot(path=str(SHOTS / "problem.png"))
    assert errors == []


def test_the_page_refuses_big_uploads_and_paths_outside_its_folder(bare_server, browser):
    url, _ = bare_server
    page, _ = _page(browser)
    page.goto(url)
    assert "No problem is open" in page.inner_text("main")
    page.goto(url + "problem")
    post = """async (body) => { const r = await fetch('/api/problem', {method: 'POST',
        headers: {'content-type': 'application/json'}, body: JSON.stringify(body)});
        return [r.status, await r.json()]; }"""
    status, body = page.evaluate(post, {"text": "x" * (safety.MAX_UPLOAD_BYTES + 2000)})
    assert status == 413 and "may be at most" in body["error"][0]
    for path in ("../../etc/passwd", "/etc/hostname"):
        status, body = page.evaluate(post, {"path": path})
        assert status == 403 and "outside the working folder" in body["error"][0], body
    status, _ = page.evaluate(post, {"path": "problems/nope.yaml"})
    assert status == 400
