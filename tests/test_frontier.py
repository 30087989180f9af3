"""``planner estimate frontier`` and :mod:`planner.analysis.frontier`: every point reported is
on the Pareto frontier, sorted, priced at $/GPU-hour / (3600 x tokens/s per GPU) x 1e6 (owned
from the catalog's economics, rented at the cheapest default offer); the JSON shape; bad inputs
exit 2; a GPU that cannot serve is said, not fatal."""

from __future__ import annotations

import json
import math
import sys
import time

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.analysis.frontier import (
    BATCHES,
    Operating,
    OwnedTerms,
    cheapest_rental,
    frontiers,
    owned_rate,
    pareto,
    pick_precision,
    supported_precisions,
)
from planner.cli import cli
from planner.inputs.catalog import CATALOG_DIR, Offer, load_gpus, load_models, load_offers
from planner.inputs.finance import load_finance_defaults
from planner.physics.demand import HOURS_PER_MONTH

POINT_KEYS = {
    "layout", "batch", "gpus", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "tpot_ms",
    "ttft_ms", "owned_usd_per_gpu_hour", "owned_usd_per_mtok", "rental_usd_per_gpu_hour",
    "rental_usd_per_mtok", "rental_offer", "mtp", "disaggregated", "worker_gpus",
}  # fmt: skip
DONE_WHEN = ["--model", "deepseek-r1", "--gpu", "b200,gb200,mi355x", "--precision", "fp4",
             "--prompt", "1024", "--output", "1024"]  # fmt: skip


def run(*args: str):
    return CliRunner().invoke(cli, ["estimate", "frontier", *args])


def dominated(p: dict, others: list[dict]) -> bool:
    x, y = p["tokens_per_s_per_user"], p["tokens_per_s_per_gpu"]
    return any(
        q is not p
        and q["tokens_per_s_per_user"] >= x
        and q["tokens_per_s_per_gpu"] >= y
        and (q["tokens_per_s_per_user"] > x or q["tokens_per_s_per_gpu"] > y)
        for q in others
    )


@pytest.fixture(scope="module")
def done_when() -> dict:
    # CPU seconds of this process (the command runs in it, on one thread): a busy machine
    # (the other test worker, anything else) stretches the wall clock, not this
    t = time.process_time()
    r = run(*DONE_WHEN, "--json")
    seconds = time.process_time() - t
    assert r.exit_code == 0, r.output + r.stderr
    return {"json": json.loads(r.stdout), "seconds": seconds}


# ----------------------------------------------------------------------------- the frontier


def test_the_json_is_gpu_to_points(done_when):
    out = done_when["json"]
    assert list(out) == ["b200", "gb200", "mi355x"]
    for gid, points in out.items():
        assert points, f"{gid} has no frontier"
        for p in points:
            assert set(p) == POINT_KEYS
            assert isinstance(p["layout"], str) and p["layout"]
            assert p["gpus"] >= 1 and p["batch"] >= 1
            assert p["tokens_per_s_per_user"] == pytest.approx(1000 / p["tpot_ms"])


def test_every_point_is_on_the_frontier_and_sorted(done_when):
    for gid, points in done_when["json"].items():
        assert not [p for p in points if dominated(p, points)], gid
        xs = [p["tokens_per_s_per_user"] for p in points]
        ys = [p["tokens_per_s_per_gpu"] for p in points]
        assert xs == sorted(xs) and len(set(xs)) == len(xs), gid
        assert ys == sorted(ys, reverse=True), gid


def test_costs_are_the_hourly_rate_over_the_tokens(done_when):
    for points in done_when["json"].values():
        for p in points:
            per_hour = 3600 * p["tokens_per_s_per_gpu"]
            owned = p["owned_usd_per_gpu_hour"] / per_hour * 1e6
            assert p["owned_usd_per_mtok"] == pytest.approx(owned, rel=1e-12)
            if p["rental_usd_per_gpu_hour"] is None:
                assert p["rental_usd_per_mtok"] is None and p["rental_offer"] is None
            else:
                rent = p["rental_usd_per_gpu_hour"] / per_hour * 1e6
                assert p["rental_usd_per_mtok"] == pytest.approx(rent, rel=1e-12)


def test_the_hourly_rates_come_from_the_catalogs(done_when):
    gpus = load_gpus()
    offers = list(load_offers(CATALOG_DIR / "offers.yaml", gpus).values())
    fin = load_finance_defaults()
    for gid, points in done_when["json"].items():
        g = gpus[gid]
        # card + server/rack share over the life; TDP + host share at $0.12 x PUE 1.3; colo
        capex = g.unit_capex_usd / (fin.depreciation_years.value * 12 * HOURS_PER_MONTH)
        kw = (g.tdp_w.value + g.host_w_per_gpu.value) / 1000
        power = kw * 0.12 * 1.3
        hosting = kw * fin.colo_usd_per_kw_month.value / HOURS_PER_MONTH
        assert points[0]["owned_usd_per_gpu_hour"] == pytest.approx(capex + power + hosting)
        for p in points:
            usable = [
                o.usd_per_gpu_hour
                for o in offers
                if o.gpu == gid and o.kind in ("on_demand", "reserved") and not o.marketplace
                and not o.cluster
                and (p["worker_gpus"] <= o.gpus_per_instance or o.multi_node)
            ]  # fmt: skip
            assert p["rental_usd_per_gpu_hour"] == (min(usable) if usable else None)


def test_three_gpus_in_reasonable_time(done_when):
    assert done_when["seconds"] < 30  # CPU seconds; 5.5 s measured (2026-11-28)


def test_the_frontier_spans_interactivity_and_throughput(done_when):
    for gid, points in done_when["json"].items():
        ys = [p["tokens_per_s_per_gpu"] for p in points]
        assert max(ys) > 10 * min(ys), gid  # from batch 1 to the memory-bound end


# ----------------------------------------------------------------------------- pieces


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 72),
            st.floats(0.1, 1e5, allow_nan=False),
            st.floats(1, 500, allow_nan=False),
        ),
        max_size=40,
    )
)
def test_pareto_keeps_exactly_the_undominated(raw):
    ops = [Operating(f"d{i}", n, 1, tps * n, tpot, 1.0) for i, (n, tps, tpot) in enumerate(raw)]
    front = pareto(ops)
    as_dicts = [
        {"tokens_per_s_per_user": p.per_user, "tokens_per_s_per_gpu": p.per_gpu} for p in ops
    ]
    undominated = {
        (d["tokens_per_s_per_user"], d["tokens_per_s_per_gpu"])
        for d in as_dicts
        if not dominated(d, as_dicts)
    }
    assert {(p.per_user, p.per_gpu) for p in front} == undominated
    assert [p.per_user for p in front] == sorted(p.per_user for p in front)


def test_batches_are_bounded_and_rising():
    assert list(BATCHES) == sorted(set(BATCHES)) and BATCHES[0] == 1 and BATCHES[-1] <= 65536


def test_owned_rate_reuses_the_economics():
    g = load_gpus()["h100-sxm"]
    terms = OwnedTerms(0.10, 1.5, 40.0, 200.0, 4.0)
    r = owned_rate(g, terms)
    H = HOURS_PER_MONTH
    assert r.capex == pytest.approx(g.unit_capex_usd / (4 * 12 * H))
    assert r.power == pytest.approx((g.tdp_w.value + g.host_w_per_gpu.value) * 0.10 * 1.5 / 1000)
    kw = (g.tdp_w.value + g.host_w_per_gpu.value) / 1000
    assert r.hosting == pytest.approx((40.0 + 200.0 * kw) / H)
    assert r.total == pytest.approx(r.capex + r.power + r.hosting)


def _offer(oid: str, price: float, **kw) -> Offer:
    base = {"provider": "p", "gpu": "g", "kind": "on_demand", "source": "test", "as_of": "2026"}
    return Offer(id=oid, usd_per_gpu_hour=price, **{**base, **kw})


def test_the_cheapest_rental_is_what_a_plan_uses_by_default():
    offers = [
        _offer("spot", 0.5, kind="spot"),
        _offer("market", 0.6, marketplace=True),
        _offer("other-gpu", 0.7, gpu="h"),
        _offer("reserved", 1.5, kind="reserved", term_months=12),
        _offer("od", 2.0),
    ]
    assert cheapest_rental("g", offers).offer == "reserved"
    assert cheapest_rental("g", offers, marketplaces=True).offer == "market"
    assert cheapest_rental("g", offers[:3]) is None
    # a worker wider than an instance needs offers joined by a multi-node fabric
    assert cheapest_rental("g", offers, worker_gpus=16) is None
    ib = _offer("ib", 3.0, gpus_per_instance=8, fabric="infiniband", fabric_gbps_per_gpu=400)
    assert cheapest_rental("g", [*offers, ib], worker_gpus=16).offer == "ib"
    assert cheapest_rental("g", [*offers, ib], worker_gpus=1).offer == "reserved"


def test_precisions_by_gpu():
    gpus = load_gpus()
    assert supported_precisions(gpus["b200"])[0] == "fp4"
    assert "fp4" not in supported_precisions(gpus["h100-sxm"])
    assert "fp4" in supported_precisions(gpus["mi355x"])
    assert pick_precision(gpus["h100-sxm"], ["fp4", "fp8"]) == "fp8"
    assert pick_precision(gpus["a100-sxm-80gb"], ["fp4", "fp8"]) is None


# A dense model eight RTX 4090s cannot hold (fp8 weights ~406 GB) whose B200 frontier takes
# ~0.02 s to compute, where DeepSeek-R1's (MoE: expert-parallel, disaggregated and MTP layouts)
# takes ~1.7 s per GPU type; the frontier with the "done when" model is checked above.
BIG = "llama-3.1-405b"


def test_a_gpu_that_cannot_serve_says_why():
    gpus = load_gpus()
    model = load_models()[BIG]
    fr = frontiers(model, [gpus["rtx-4090"], gpus["b200"]], ["fp8"], 1024, 1024, OwnedTerms())
    assert not fr["rtx-4090"].serves and fr["rtx-4090"].reasons
    assert "GB" in fr["rtx-4090"].reasons[-1]
    assert fr["b200"].serves


# ----------------------------------------------------------------------------- the command


def test_a_gpu_that_cannot_serve_is_reported_not_fatal():
    r = run("--model", BIG, "--gpu", "b200,rtx-4090", "--precision", "fp8", "--prompt",
            "1024", "--output", "1024", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rtx-4090"] == [] and out["b200"]
    assert f"rtx-4090: cannot serve {BIG} at fp8" in r.stderr
    table = run("--model", BIG, "--gpu", "b200,rtx-4090", "--precision", "fp8", "--prompt",
                "1024", "--output", "1024")  # fmt: skip
    assert table.exit_code == 0 and "rtx-4090: cannot serve" in table.stdout


def test_no_gpu_that_can_serve_exits_3():
    r = run("--model", "deepseek-r1", "--gpu", "rtx-4090", "--precision", "fp8", "--prompt", "1024",
            "--output", "1024")  # fmt: skip
    assert r.exit_code == 3, r.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model", "deepseek-r2", "--gpu", "b200"], "unknown model 'deepseek-r2'"),
        (["--model", "deepseek-r1", "--gpu", "b200,b2000"], "unknown gpu 'b2000'"),
        (["--model", "deepseek-r1", "--gpu", "b200", "--precision", "fp3"], "fp16, bf16"),
        (["--model", "deepseek-r1", "--gpu", "b200,h100-sxm", "--precision", "fp4"],
         "h100-sxm supports none of them (it serves at fp8"),
    ],
)  # fmt: skip
def test_bad_inputs_exit_2_saying_what_is_allowed(args, said):
    r = run(*args, "--prompt", "1024", "--output", "1024")
    assert r.exit_code == 2, r.output
    assert said in r.output + r.stderr


def test_chart_without_matplotlib_exits_2_with_the_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = run(*DONE_WHEN, "--chart", str(tmp_path / "f.png"))
    assert r.exit_code == 2, r.output
    assert "pip install 'gpu-planner[plot]'" in r.output + r.stderr
    assert not (tmp_path / "f.png").exists()


def test_chart_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "f.png"
    r = run("--model", "llama-2-7b", "--gpu", "h100-sxm,l4", "--precision", "fp8", "--prompt",
            "512", "--output", "256", "--disaggregated", "off", "--mtp", "off", "--chart",
            str(out), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    points = [p for ps in json.loads(r.stdout).values() for p in ps]
    assert points and not any(p["disaggregated"] or p["mtp"] for p in points)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_costs_are_finite_and_positive(done_when):
    for points in done_when["json"].values():
        for p in points:
            assert math.isfinite(p["owned_usd_per_mtok"]) and p["owned_usd_per_mtok"] > 0


# ----------------------------------------------------------------------------- the workbook

PROBLEM = """\
name: frontier sheet
horizon: {start: 2027-01, months: 4}
budget: {capex_usd: 2000000}
site: {power_usd_per_kwh: 0.10, pue: 1.2, hosting_usd_per_gpu_month: 50}
gpus: [l40s, h100-sxm]
workloads:
  serve:
    - name: chat-api
      model: llama-3-8b
      precision: fp8
      start: 2027-01
      traffic: {daily_active_users: 5000, requests_per_user_per_day: 5, utilization: 0.5}
      tokens: {prompt: 1000, output: 500}
      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 50}
"""


def _plan_beside(tmp_path):
    import hashlib

    from tests.conftest_excel import SERVE_NAME, make_plan

    path = tmp_path / "p.yaml"
    path.write_text(PROBLEM.replace("chat-api", SERVE_NAME))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return make_plan().model_copy(update={"problem_file": str(path), "problem_sha256": digest})


def test_the_workbook_charts_each_services_frontier(tmp_path):
    from openpyxl import load_workbook

    from planner.reports.excel import write_workbook

    plan = _plan_beside(tmp_path)
    out = tmp_path / "plan.xlsx"
    write_workbook(plan, out)
    ws = load_workbook(out, data_only=True)["Frontier"]
    head = [c.value for c in ws[4]]
    rows = [dict(zip(head, r, strict=True)) for r in ws.iter_rows(min_row=5, values_only=True)]
    rows = [r for r in rows if r["Service"]]
    assert {r["GPU"] for r in rows} == {"l40s", "h100-sxm"}  # the GPU types the plan serves with
    assert {r["Tokens in / out"] for r in rows} == {"1,000 / 500"}
    for gid in ("l40s", "h100-sxm"):
        pts = [
            {"tokens_per_s_per_user": r["Tokens/s per user"],
             "tokens_per_s_per_gpu": r["Output tokens/s per GPU"]}
            for r in rows if r["GPU"] == gid
        ]  # fmt: skip
        assert pts and not [p for p in pts if dominated(p, pts)]
    for r in rows:  # the stored values of the live formulas
        per_hour = 3600 * r["Output tokens/s per GPU"]
        assert r["Owned $ per M tokens"] == pytest.approx(r["Owned $/GPU-h"] / per_hour * 1e6)
        if r["Rented $/GPU-h"] != "-":
            want = r["Rented $/GPU-h"] / per_hour * 1e6
            assert r["Rented $ per M tokens"] == pytest.approx(want)
    formulas = load_workbook(out)["Frontier"]
    assert formulas["M5"].value == "=L5/(3600*I5)*1000000"


def test_the_frontier_chart_is_native_and_log_scale(tmp_path):
    from openpyxl.chart import ScatterChart

    from planner.reports.excel import build_workbook

    wb = build_workbook(_plan_beside(tmp_path))
    (chart,) = wb["Frontier"]._charts
    assert isinstance(chart, ScatterChart)
    assert chart.y_axis.scaling.logBase == 10
    assert len(chart.series) == 2  # one line per GPU type


def test_the_sheet_says_why_there_is_no_frontier(tmp_path):
    from planner.reports.excel import build_workbook
    from tests.conftest_excel import make_plan

    changed = make_plan()  # names problems/2m_budget.yaml with a sha256 it never had
    text = build_workbook(changed)["Frontier"]["A5"].value
    assert "has changed since this plan was made" in text
    gone = changed.model_copy(update={"problem_file": str(tmp_path / "nope.yaml")})
    assert "is not at hand" in build_workbook(gone)["Frontier"]["A5"].value
    no_serve = changed.model_copy(
        update={"workloads": [w for w in changed.workloads if w.kind != "serve"]}
    )
    assert build_workbook(no_serve)["Frontier"]["A5"].value == "(no serving workloads)"


def test_max_ttft_leaves_out_slow_first_tokens():
    gpus, model = load_gpus(), load_models()[BIG]  # TTFTs from ~80 to ~220 ms on B200
    args = (model, [gpus["b200"]], ["fp8"], 1024, 1024, OwnedTerms())
    every = frontiers(*args)["b200"]
    capped = frontiers(*args, max_ttft_ms=100)["b200"]
    assert capped.points and all(p.ttft_ms <= 100 for p in capped.points)
    assert max(p.ttft_ms for p in every.points) > 100  # the cap did something
    none = frontiers(*args, max_ttft_ms=1)["b200"]
    assert not none.serves and "no point has a TTFT within 1 ms" in none.reasons[-1]
