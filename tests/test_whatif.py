"""What-if analysis: value parsing, path resolution, grid runs, monotonicity, failing rows, CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from planner.analysis.whatif import (
    WhatIf,
    base_from_text,
    grid,
    load_base,
    make_varies,
    parse_bounds,
    parse_range,
    parse_values,
    parse_vary,
    resolve_key,
    run_whatif,
    set_at,
)
from planner.base.errors import InputError
from planner.cli import cli

# One serving workload on a 7B model, 12 months, two GPU types, inline rental offers.
# Rentals at $2.5 / $4.0 per GPU-hour make buying pay at high utilization.
SMALL = """
name: small chat
horizon: {start: 2027-01, months: 12}
budget: {capex_usd: 1000000}
site: {power_usd_per_kwh: 0.12, pue: 1.3, hosting_usd_per_gpu_month: 60}
gpus: [a100-pcie-80gb, h100-sxm]
offers:
  files: []
  extra:
    - {id: cloud-a100-od, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 2.5, source: test, as_of: "2026-11"}
    - {id: cloud-h100-od, provider: cloud, gpu: h100-sxm, kind: on_demand,
       usd_per_gpu_hour: 4.0, source: test, as_of: "2026-11"}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 200000, requests_per_user_per_day: 20, utilization: 0.5}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
solver: {gap: 0}
"""

# One GPU type and ~75 GPUs of demand: rental replicas are whole GPUs per load slice, so the
# rented share can only be compared across utilizations when one replica is a small step.
ONE_TYPE = """
name: one gpu type
horizon: {start: 2027-01, months: 12}
budget: {capex_usd: 10000000}
site: {power_usd_per_kwh: 0.12, pue: 1.3, hosting_usd_per_gpu_month: 60}
gpus: [a100-pcie-80gb]
offers:
  files: []
  extra:
    - {id: cloud-a100-od, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 2.5, source: test, as_of: "2026-11"}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 2000000, requests_per_user_per_day: 20, utilization: 0.5}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
solver: {gap: 0}
"""

TWO_SERVE = """
name: two services
horizon: {start: 2027-01, months: 6}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.1}
workloads:
  train:
    - {name: ft, model: llama-2-7b, tokens: 1e9, window: {start: 2027-01, deadline: 2027-02}}
  serve:
    - {name: chat, model: llama-2-7b, start: 2027-01,
       traffic: {daily_active_users: 1000, requests_per_user_per_day: 5, utilization: 0.4},
       tokens: {prompt: 100, output: 100}, slo: {p95_ttft_ms: 1000, p95_tpot_ms: 100}}
    - {name: search, model: llama-2-7b, start: 2027-02,
       traffic: {daily_active_users: 1000, requests_per_user_per_day: 5},
       tokens: {prompt: 100, output: 100}, slo: {p95_ttft_ms: 1000, p95_tpot_ms: 100}}
"""


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    p = tmp_path / "small.yaml"
    p.write_text(SMALL)
    return p


@pytest.fixture()
def one(tmp_path: Path) -> Path:
    """ONE_TYPE's file: for tests of how scenarios are run and reported, not of what they
    choose between GPU types; it solves in about a quarter of SMALL's time."""
    p = tmp_path / "one.yaml"
    p.write_text(ONE_TYPE)
    return p


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory) -> WhatIf:
    """The 2x2 sweep of the small problem with its A100s only, with its base plan: run once,
    read by the tests of its rows, workbook and table (each ran its own ~9 s sweep). With the
    H100 too every row still bought A100s only (so one 'buy' column either way), but each of
    its nine solves took ~1.6 s of CPU at gap 0 instead of ~0.1 s."""
    p = tmp_path_factory.mktemp("grid") / "small.yaml"
    text = SMALL.replace("gpus: [a100-pcie-80gb, h100-sxm]", "gpus: [a100-pcie-80gb]")
    assert text != SMALL
    p.write_text(text)
    return run_whatif(p, ["utilization=0.3,0.9", "power_price=0.05,0.5"], workers=2)


# ------------------------------------------------------------------ values


def test_range_inclusive_stop_on_a_float_grid():
    v = parse_range("0.2:0.9:0.1")
    assert v == [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]  # exact: decimal arithmetic
    assert len(v) == 8 and v[-1] == 0.9
    assert parse_range("0.06:0.30:0.06") == [0.06, 0.12, 0.18, 0.24, 0.3]
    assert parse_range("0.1:1.0:0.1")[-1] == 1.0 and len(parse_range("0.1:1.0:0.1")) == 10
    assert len(parse_range("0:1:0.001")) == 1001


def test_range_stop_off_the_grid_is_excluded_and_ints_stay_ints():
    assert parse_range("0.1:0.95:0.1")[-1] == 0.9
    assert parse_range("1:10:3") == [1, 4, 7, 10]
    assert all(isinstance(x, int) for x in parse_range("1:10:3"))
    assert parse_range("1.0:3:1") == [1.0, 2.0, 3.0]
    assert parse_range("0.5:0.5:0.1") == [0.5]
    assert parse_range("0.3:0.1:-0.1") == [0.3, 0.2, 0.1]
    assert parse_range("1e-3:3e-3:1e-3") == [0.001, 0.002, 0.003]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0.2:0.9:0", "step is 0"),
        ("0.9:0.2:0.1", "never reaches its stop"),
        ("0.2:0.9:-0.1", "never reaches its stop"),
        ("a:0.9:0.1", "start 'a' is not a number"),
        ("0.2:x:0.1", "stop 'x' is not a number"),
        ("0.2:0.9", "start:stop:step"),
        ("0.2:0.9:0.1:4", "start:stop:step"),
        ("0:1:1e-9", "the limit is"),
        ("0:inf:1", "not a finite number"),
    ],
)
def test_bad_ranges(text, words):
    with pytest.raises(InputError, match=words):
        parse_values(text, "--vary x")


def test_comma_lists():
    assert parse_values("0.08,0.12, 0.2") == [0.08, 0.12, 0.2]
    assert parse_values("1e-3,2") == [0.001, 2]
    assert parse_values("fp8,int8") == ["fp8", "int8"]
    assert parse_values("true,false") == [True, False]
    assert parse_values("0.5") == [0.5]
    for bad, words in [
        ("1,,2", "empty value"),
        ("1,", "empty value"),
        ("", "no values"),
        ("nan,1", "not a finite"),
        ("1,inf", "not a finite"),
        ("1,1.0", "repeated"),
    ]:
        with pytest.raises(InputError, match=words):
            parse_values(bad, "--vary k")


def test_parse_vary_and_bounds():
    assert parse_vary("power_price=0.1,0.2") == ("power_price", [0.1, 0.2])
    assert parse_vary(" site.pue = 1.2:1.4:0.1 ") == ("site.pue", [1.2, 1.3, 1.4])
    for bad in ("power_price", "=0.1", "power_price="):
        with pytest.raises(InputError):
            parse_vary(bad)
    assert parse_bounds("utilization=0.1:1.0") == ("utilization", 0.1, 1.0)
    for bad, words in [
        ("utilization=1:0.1", "LO must be below HI"),
        ("utilization=0.1", "LO:HI"),
        ("utilization=0.1:0.5:0.1", "LO:HI"),
        ("u=a:1", "not a number"),
    ]:
        with pytest.raises(InputError, match=words):
            parse_bounds(bad)


# ------------------------------------------------------------------ paths


def test_aliases_and_named_list_items():
    b = base_from_text(TWO_SERVE)
    assert resolve_key(b.data, "utilization") == [
        ("workloads", "serve", 0, "traffic", "utilization"),
        ("workloads", "serve", 1, "traffic", "utilization"),  # absent in the file: added
    ]
    assert resolve_key(b.data, "power_price") == [("site", "power_usd_per_kwh")]
    assert resolve_key(b.data, "workloads.serve.search.traffic.daily_active_users") == [
        ("workloads", "serve", 1, "traffic", "daily_active_users")
    ]
    assert resolve_key(b.data, "workloads.train.ft.tokens") == [("workloads", "train", 0, "tokens")]
    assert resolve_key(b.data, "workloads.serve.0.tokens.output") == [
        ("workloads", "serve", 0, "tokens", "output")
    ]
    # keys the schema allows but the file leaves to their default
    assert resolve_key(b.data, "site.pue") == [("site", "pue")]
    assert resolve_key(b.data, "offers.marketplaces") == [("offers", "marketplaces")]
    assert resolve_key(b.data, "overrides.gpus.h100-sxm.purchase_usd") == [
        ("overrides", "gpus", "h100-sxm", "purchase_usd")
    ]
    s = base_from_text(SMALL)
    assert resolve_key(s.data, "offers.extra.cloud-a100-od.usd_per_gpu_hour") == [
        ("offers", "extra", 0, "usd_per_gpu_hour")
    ]


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (
            "workloads.serve.chatt.traffic.utilization",
            r"--vary workloads.serve.chatt.traffic.utilization: no item named 'chatt' in workloads.serve; did you mean 'chat'",
        ),
        (
            "site.power_usd_per_kwhh",
            r"no key 'power_usd_per_kwhh' in site; did you mean 'power_usd_per_kwh'",
        ),
        ("sit.pue", r"no key 'sit' in the top level; did you mean 'site'"),
        (
            "workloads.serve.chat.traffic",
            r"is a mapping, not a single value; vary one of its values \(daily_active_users",
        ),
        (
            "budget.capex_usd.low",
            r"budget.capex_usd is a value \(0\), not a mapping or list, so it has no 'low'",
        ),
        (
            "workloads.serve.7.start",
            r"no item named '7' in workloads.serve; did you mean|known: chat, search",
        ),
        ("site..pue", "empty part"),
        (
            "workloads.serve.chat.traffic.utilisation",
            r"no key 'utilisation' in workloads.serve\[0\].traffic; did you mean 'utilization'",
        ),
    ],
)
def test_bad_paths_name_the_part_and_what_exists(key, words):
    b = base_from_text(TWO_SERVE)
    with pytest.raises(InputError, match=words):
        resolve_key(b.data, key)


def test_utilization_alias_needs_a_serving_workload():
    text = TWO_SERVE.split("  serve:")[0]
    b = base_from_text(text)
    with pytest.raises(InputError, match="no serving workloads"):
        resolve_key(b.data, "utilization")


def test_grid_is_a_cartesian_product_and_keys_must_not_clash():
    b = base_from_text(TWO_SERVE)
    vs = make_varies(b, ["utilization=0.2:0.4:0.1", "power_price=0.1,0.2"])
    g = grid(vs)
    assert len(g) == 6
    assert g[0] == {"utilization": 0.2, "power_price": 0.1}
    assert g[1] == {"utilization": 0.2, "power_price": 0.2}
    with pytest.raises(InputError, match="given twice"):
        make_varies(b, ["power_price=0.1", "power_price=0.2"])
    with pytest.raises(InputError, match="both set site.power_usd_per_kwh"):
        make_varies(b, ["power_price=0.1", "site.power_usd_per_kwh=0.2"])
    data = {"a": {}}
    set_at(data, ("a", "b", "c"), 1)
    assert data == {"a": {"b": {"c": 1}}}


# ------------------------------------------------------------------ runs


def test_grid_run_json_and_workbook(small_grid: WhatIf, tmp_path: Path):
    res = small_grid
    assert [r.params for r in res.results] == [
        {"utilization": 0.3, "power_price": 0.05},
        {"utilization": 0.3, "power_price": 0.5},
        {"utilization": 0.9, "power_price": 0.05},
        {"utilization": 0.9, "power_price": 0.5},
    ]
    assert all(r.status == "optimal" for r in res.results), [r.message for r in res.results]
    assert res.base_result is not None and res.base_result.plan is not None
    for row in res.to_json():
        assert set(row) == {
            "params",
            "status",
            "message",
            "totals",
            "purchases",
            "owned_gpu_hours",
            "rented_gpu_hours",
            "rented_share",
            "usd_per_1m_tokens",
            "objective_usd",
            "gap",
            "bound",
            "base_plan_usd",
            "kept",
        }
        t = row["totals"]
        assert t["total_usd"] == pytest.approx(
            t["capex_usd"] + t["power_usd"] + t["hosting_usd"] + t["rental_usd"]
        )
        assert 0.0 <= row["rented_share"] <= 1.0
        assert row["usd_per_1m_tokens"] > 0
        assert set(row["owned_gpu_hours"]) == set(row["rented_gpu_hours"])
        assert sum(p["count"] for p in row["purchases"]) >= 0
    json.dumps(res.to_json())  # plain data
    # buying pays at high utilization with $2.5/GPU-h rentals: at least as many GPUs bought
    # (both may fill the same 8-slot server), less rented
    low, high = res.results[0], res.results[2]
    assert sum(high.bought.values()) >= sum(low.bought.values()) > 0
    assert high.rented_share < low.rented_share

    from planner.reports.whatif_excel import write_whatif_workbook

    out = tmp_path / "out" / "w.xlsx"
    assert write_whatif_workbook(res, out) is None
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames[:2] == ["What-if", "What-if charts"]
    assert "Summary" in wb.sheetnames  # the base plan's sheets
    ws = wb["What-if"]
    table = ws.tables["WhatIfScenarios"]
    assert table.ref.startswith("A4:") and table.ref.endswith("8")
    head = [c.value for c in ws[4]]
    assert head[:4] == ["#", "utilization", "power_price", "status"]
    assert (
        "total (USD)" in head and "rented share" in head and "USD per 1M tokens (serving)" in head
    )
    assert any(h.startswith("bought ") for h in head if h)
    assert ws.cell(5, head.index("total (USD)") + 1).value == pytest.approx(
        res.results[0].totals["total_usd"]
    )
    charts = wb["What-if charts"]._charts
    assert len(charts) == 4  # (cost, mix) x (utilization, power_price)
    assert all(len(c.series) == 2 for c in charts)  # one series per value of the other parameter
    assert not list(out.parent.glob(".*.tmp"))
    # prints landscape, every column on the page width, header repeated on each page
    for sheet in wb.worksheets:
        assert sheet.page_setup.orientation == "landscape", sheet.title
        assert sheet.page_setup.fitToWidth == 1 and sheet.sheet_properties.pageSetUpPr.fitToPage
    assert ws.print_title_rows == "$4:$4"
    # the base plan's formulas carry their values
    vals = openpyxl.load_workbook(out, data_only=True)
    ((sheet_name, coord),) = list(vals.defined_names["total_cost_usd"].destinations)
    assert isinstance(vals[sheet_name][coord.replace("$", "")].value, float)


def test_total_cost_never_falls_when_power_price_rises(tmp_path: Path):
    # the one-type problem: owned or rented is still priced against the kWh, and its eight
    # solves take a quarter of the two-type problem's time (9 s against 36 s, loaded machine)
    p = tmp_path / "one.yaml"
    p.write_text(ONE_TYPE)
    res = run_whatif(
        p, ["utilization=0.3,0.8", "power_price=0:0.6:0.2"], workers=2, with_base=False
    )
    assert all(r.ok for r in res.results)
    for u in (0.3, 0.8):
        costs = [r.totals["npv_usd"] for r in res.results if r.params["utilization"] == u]
        assert len(costs) == 4
        # every plan's present value (what is minimized) is non-decreasing in the power price,
        # so the optimum's is too (gap 0). Its cash total need not be: a dearer kWh can make a
        # plan rent more, which costs more cash but less present value (rent is paid later).
        assert all(b >= a - 1e-6 * a for a, b in zip(costs, costs[1:], strict=False)), costs


def test_rented_share_never_rises_with_utilization_at_fixed_mean_load(tmp_path: Path):
    p = tmp_path / "one.yaml"
    p.write_text(ONE_TYPE)
    res = run_whatif(
        p, ["utilization=0.2:1.0:0.2", "power_price=0.05,0.5"], workers=2, with_base=False
    )
    assert all(r.ok for r in res.results)
    for price in (0.05, 0.5):
        rows = [r for r in res.results if r.params["power_price"] == price]
        shares = [r.rented_share for r in rows]
        # the mean load is fixed (DAU x requests); a flatter day (higher utilization) never
        # needs more rented capacity: allow one whole rented GPU-month of rounding per month
        months, hours = 12, 730.0
        total = sum(rows[0].owned_gpu_hours.values()) + sum(rows[0].rented_gpu_hours.values())
        slack = months * hours / total
        assert all(b <= a + slack for a, b in zip(shares, shares[1:], strict=False)), shares
        assert shares[-1] < shares[0]
        bought = [sum(r.bought.values()) for r in rows]
        assert bought[-1] >= bought[0]


def test_a_failing_scenario_is_a_row_not_an_abort(one: Path):
    # the one-type problem: one row is solved, and SMALL's two types made that ~1.6 s of CPU
    res = run_whatif(
        one,
        [("gpus.0", ["a100-pcie-80gb", "h100-sxn"]), ("budget.total_usd", [1000, 10_000_000])],
        workers=2,
        with_base=False,
    )
    by = {(r.params["gpus.0"], r.params["budget.total_usd"]): r for r in res.results}
    assert len(by) == 4
    bad = by[("h100-sxn", 1000)]
    assert bad.status == "invalid" and bad.totals is None
    assert "gpus[0]" in bad.message and "h100-sxn" in bad.message
    assert by[("h100-sxn", 10_000_000)].status == "invalid"
    assert by[("a100-pcie-80gb", 1000)].status == "infeasible"
    assert by[("a100-pcie-80gb", 10_000_000)].status == "optimal"
    rows = res.to_json()
    assert rows[-1]["totals"] is None and rows[-1]["rented_share"] is None


def test_a_value_the_schema_refuses_is_bad_input_before_any_solve(small: Path):
    """`--vary utilization=0.05` (below the schema's 0.1) and `=abc` are exit 2, naming the
    option, the field and what is allowed; nothing is solved."""
    for values, says in (([0.05, 0.5], "greater than or equal to 0.1"), (["abc"], "valid number")):
        with pytest.raises(InputError) as exc:
            run_whatif(small, [("utilization", values)], workers=1, with_base=False)
        msg = str(exc.value)
        assert (
            msg.startswith("--vary utilization=") and "traffic.utilization" in msg and says in msg
        )


def test_unknown_gpu_in_a_scenario_is_an_invalid_row(one: Path):
    # its one GPU type replaced: the A100 row solves in ~0.1 s (SMALL's gpus.1=h100-sxm took
    # ~1.6 s of CPU at gap 0); the suggestion comes from the whole catalog
    res = run_whatif(one, ["gpus.0=a100-pcie-80gb,h100-sxn"], workers=1, with_base=False)
    assert res.results[0].status == "optimal"
    assert res.results[1].status == "invalid"
    assert "did you mean 'h100-sxm'" in res.results[1].message


def test_offers_files_are_found_relative_to_the_problem(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    offers = tmp_path / "sub" / "my-offers.yaml"
    offers.write_text(
        "offers:\n"
        "  - {id: x-a100, provider: x, gpu: a100-pcie-80gb, kind: on_demand, usd_per_gpu_hour: 1.0,"
        " source: t, as_of: '2026'}\n"
    )
    text = SMALL.replace("  files: []", "  files: [my-offers.yaml]")
    p = tmp_path / "sub" / "p.yaml"
    p.write_text(text)
    b = load_base(p)
    assert Path(b.base_dir) == (tmp_path / "sub").resolve()
    res = run_whatif(b, ["power_price=0.1"], workers=1, with_base=False)
    r = res.results[0]
    assert r.status == "optimal", r.message
    assert r.rented_gpu_hours.get("a100-pcie-80gb", 0) > 0  # the $1.0 offer beats buying


# ------------------------------------------------------------------ CLI


def test_cli_whatif(one: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        cli,
        ["whatif", str(one), "--vary", "power_price=0.05,0.3", "--workers", "1", "--json", "-"],
    )
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout[r.stdout.index("[") :])
    assert [row["params"] for row in rows] == [{"power_price": 0.05}, {"power_price": 0.3}]
    assert (tmp_path / "outputs" / "one-whatif.xlsx").exists()


def test_cli_whatif_bad_path_exit_code_2(small: Path):
    r = CliRunner().invoke(cli, ["whatif", str(small), "--vary", "site.powr=1,2", "--no-excel"])
    assert r.exit_code == 2
    assert "no key 'powr' in site" in r.output
    r = CliRunner().invoke(
        cli, ["whatif", str(small), "--vary", "power_price=0.3:0.1:0.1", "--no-excel"]
    )
    assert r.exit_code == 2 and "never reaches its stop" in r.output


def test_default_grid_skips_utilization_without_serving():
    from planner.analysis.whatif import DEFAULT_VARIES, default_varies

    assert default_varies(base_from_text(TWO_SERVE)) == list(DEFAULT_VARIES)
    train_only = base_from_text(TWO_SERVE.split("  serve:")[0])
    assert default_varies(train_only) == [("power_price", "0.06:0.30:0.06")]
    vs = make_varies(base_from_text(TWO_SERVE), default_varies(base_from_text(TWO_SERVE)))
    assert [len(v.values) for v in vs] == [8, 5] and len(grid(vs)) == 40


def test_whatif_table_fits_80_columns(small_grid: WhatIf):
    from rich.console import Console

    from planner.cli.whatif import summary_table

    res = small_grid
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(summary_table(res.results, ["utilization", "power_price"], console))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    assert "status" in text and "total" in text
