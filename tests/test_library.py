"""The library face: ``planner.solve``, ``planner.read_plan`` and ``Plan.frames()``.

The frames are checked on the saved full plans of tests/fixtures/nominal (no solve): every
table has one row per entry and a column per field, and the tables add up to the plan's own
totals. A tiny problem (one GPU type, two months, one service) solved twice checks
``planner.solve`` end to end, with a mapping and with a path giving the same plan."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import planner
from planner.base.errors import InputError
from planner.plan.data import TABLES, Plan

NOMINAL = [
    p
    for p in sorted((Path(__file__).parent / "fixtures" / "nominal").glob("*.json"))
    if '"planner_version"' in p.read_text()
]
# Small enough to solve in about a second (problems/inference_startup.yaml took ~3 s a solve and
# checks nothing more here); it still names the offers catalog, which a mapping must find too.
TINY = """
name: tiny
horizon: {start: 2027-01, months: 2}
budget: {capex_usd: 100000}
site: {power_usd_per_kwh: 0.12, pue: 1.3, hosting_usd_per_gpu_month: 60}
gpus: [a100-pcie-80gb]
offers: {files: [offers.yaml]}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 500, requests_per_user_per_day: 10, utilization: 0.5}
      tokens: {prompt: 200, output: 100}
      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 100}
"""


@pytest.mark.parametrize("path", NOMINAL, ids=lambda p: p.stem)
def test_frames_have_a_row_per_entry_and_a_column_per_field(path):
    plan = planner.read_plan(path)
    frames = plan.frames()
    assert list(frames) == list(TABLES)
    for name, df in frames.items():
        rows = getattr(plan, name)
        assert len(df) == len(rows), name
        item = type(rows[0]) if rows else Plan.model_fields[name].annotation.__args__[0]
        flat = {c.split(".")[0] for c in df.columns}
        dict_fields = {
            f
            for f, i in item.model_fields.items()
            if i.annotation is not None and str(i.annotation).startswith("dict")
        }
        # a scenario's plans are plans of their own (each has its frames), not columns
        nested = {"plan", "own_plan", "base_plan"} if name == "scenarios" else set()
        assert set(item.model_fields) - dict_fields - nested <= flat, name


@pytest.mark.parametrize("path", NOMINAL, ids=lambda p: p.stem)
def test_frames_add_up_to_the_plan_totals(path):
    plan = planner.read_plan(path)
    f = plan.frames()
    t = plan.totals
    for column, total in (
        ("capex_usd", t.capex_usd),
        ("power_usd", t.power_usd),
        ("hosting_usd", t.hosting_usd),
        ("rental_usd", t.rental_usd),
    ):
        assert f["cash_flow"][column].sum() == pytest.approx(total, rel=1e-9, abs=1e-6), column
    assert f["purchases"]["total_usd"].sum() == pytest.approx(t.capex_usd, rel=1e-9, abs=1e-6)
    assert f["rentals"]["usd"].sum() == pytest.approx(t.rental_usd, rel=1e-6, abs=1e-3)
    shares = f["workloads"]["cost_share"]
    assert shares.between(0, 1).all() and shares.sum() <= 1 + 1e-9


def test_an_empty_table_keeps_its_columns():
    plan = planner.read_plan(NOMINAL[0])
    empty = plan.model_copy(update={"purchases": []})
    df = empty.frames()["purchases"]
    assert df.empty and {"gpu", "month", "count", "total_usd"} <= set(df.columns)


def test_read_plan_names_a_bad_file(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text('{"totals": 1}')
    with pytest.raises(InputError, match="plan.json"):
        planner.read_plan(bad)


def test_solve_takes_a_path_or_a_mapping_and_returns_a_verified_plan(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    by_path = planner.solve(path, time_limit=30)
    by_dict = planner.solve(yaml.safe_load(TINY), time_limit=30)
    assert isinstance(by_path, planner.Plan)
    assert by_path.status == by_dict.status == "optimal"
    assert by_dict.totals.total_usd == pytest.approx(by_path.totals.total_usd, rel=1e-6)


def test_solve_refuses_what_is_not_a_problem():
    with pytest.raises(InputError, match="not int"):
        planner.solve(3)  # type: ignore[arg-type]
