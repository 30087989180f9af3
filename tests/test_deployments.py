"""Plans use deployments (issue 44 item 6): rack-wide workers, disaggregated prefill and decode
pools and MTP as serving candidates; a workload's ``gpus``, ``disaggregated``, ``mtp`` and
precision list; each serving row's layout in the plan, recomputed by the verifier."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from planner.base.errors import InputError
from planner.inputs.problem import load_problem, load_problem_text
from planner.optimize.candidates import build_candidates, rentable_on
from planner.plan.data import Plan, load_plan, write_json
from planner.verify import verify_plan

ROOT = Path(__file__).resolve().parent.parent
R1 = ROOT / "problems" / "deepseek_r1_at_scale.yaml"


def _solved():
    from tests.solved import solved

    return solved(str(R1))


def _off_text() -> str:
    text = R1.read_text()
    assert "disaggregated: auto" in text and "mtp: auto" in text
    return text.replace("disaggregated: auto", "disaggregated: false").replace(
        "mtp: auto", "mtp: false"
    )


def test_r1_at_scale_auto_costs_at_least_10_percent_less_than_both_off():
    """The issue's target: DeepSeek-R1 FP4, 10 million requests a day, 1k/1k, p95 TPOT 30 ms on
    B200 or GB200: with disaggregated and mtp on auto the plan costs >= 10 % less than with
    both off (never more: auto's candidates include every one of off's), and it names its
    prefill and decode pools."""
    from planner.plan.make import plan_problem

    inputs, auto = _solved()
    off_inputs = load_problem_text(_off_text(), "off.yaml", base_dir=R1.parent)
    off = plan_problem(off_inputs)
    assert verify_plan(off_inputs, off) == []
    assert auto.objective_usd <= 0.9 * off.objective_usd, (auto.objective_usd, off.objective_usd)
    pools = [a.layout for a in auto.serve_allocations if a.replicas > 0]
    assert pools and all(lay is not None for lay in pools)
    disagg = [lay for lay in pools if lay.prefill is not None]
    assert disagg, [lay.label for lay in pools]
    lay = disagg[0]
    assert (
        lay.decode.gpus >= 1 and lay.prefill.count >= 1 and lay.prefill.mode in ("tp", "ep", "dep")
    )
    # the off plan has neither pools nor MTP
    assert all(
        a.layout.prefill is None and not a.layout.mtp for a in off.serve_allocations if a.layout
    )
    # the workbook's page 1 names them in words
    from planner.reports.plan_facts import headroom_sentences

    text = " ".join(headroom_sentences(auto))
    assert "prefill pool of" in text and "decode pool of" in text


def test_auto_candidates_include_every_off_candidate():
    inputs = load_problem(str(R1))
    off = load_problem_text(_off_text(), "off.yaml", base_dir=R1.parent)
    keys_auto = {c.key for cl in build_candidates(inputs).serve.values() for c in cl}
    keys_off = {c.key for cl in build_candidates(off).serve.values() for c in cl}
    assert keys_off <= keys_auto
    assert any("_mtp" in k for k in keys_auto) and not any("_mtp" in k for k in keys_off)


def test_the_verifier_recomputes_the_layout():
    inputs, plan = _solved()
    assert verify_plan(inputs, plan) == []
    i = next(i for i, a in enumerate(plan.serve_allocations) if a.layout and a.layout.prefill)
    bad = copy.deepcopy(plan)
    lay = bad.serve_allocations[i].layout
    lay.prefill.count += 1  # more prefill workers than the rate was computed for
    lay.label = lay.label.replace(f"{lay.prefill.count - 1}x", f"{lay.prefill.count}x", 1)
    found = verify_plan(inputs, bad)
    assert found and any("GPUs" in f or "req/s" in f for f in found), found
    bad = copy.deepcopy(plan)
    bad.serve_allocations[i].layout.label = "1x1:tp"
    assert any("label" in f for f in verify_plan(inputs, bad))


def test_layout_round_trips_through_json(tmp_path):
    _, plan = _solved()
    write_json(plan, tmp_path / "p.json")
    again = load_plan(tmp_path / "p.json")
    assert again == plan
    assert isinstance(again, Plan) and any(a.layout.prefill for a in again.serve_allocations)


BASE = """
name: t
horizon: {start: 2027-01, months: 2}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.1}
gpus: [h100-sxm, b200]
workloads:
  serve:
    - name: s
      model: deepseek-r1
      start: 2027-01
      traffic: {daily_active_users: 1000000, requests_per_user_per_day: 10}
      tokens: {prompt: 1000, output: 1000}
      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 30}
"""


def _with(extra: str) -> str:
    return BASE + "".join(f"      {line}\n" for line in extra.splitlines())


def test_unknown_gpu_in_workload_gpus_names_field_and_allowed():
    with pytest.raises(InputError) as e:
        load_problem_text(_with("precision: fp8\ngpus: [b200, h100-sxn]"), "t.yaml")
    msg = str(e.value)
    assert "workloads.serve[0].gpus[1]" in msg and "h100-sxn" in msg
    assert "allowed: b200, h100-sxm" in msg


def test_unknown_precision_in_a_list_names_allowed():
    with pytest.raises(InputError) as e:
        load_problem_text(_with("precision: [fp8, fp3]"), "t.yaml")
    msg = str(e.value)
    assert "precision" in msg and "fp3" in msg and "'fp4'" in msg


def test_bad_toggle_names_allowed():
    with pytest.raises(InputError) as e:
        load_problem_text(_with("precision: fp8\nmtp: sometimes"), "t.yaml")
    assert "mtp" in str(e.value) and "auto" in str(e.value)


def test_each_gpu_serves_at_the_best_listed_precision_it_supports():
    inputs = load_problem_text(
        _with("precision: [fp8, fp4]\ndisaggregated: false\nmtp: false"), "t.yaml"
    )
    cands = build_candidates(inputs).serve["s"]
    prec = {c.gpu: c.capacity.precision for c in cands}
    assert prec == {"h100-sxm": "fp8", "b200": "fp4"}


def _small(extra: str) -> str:
    """BASE with 20,000 users a day: below AT_SCALE_GPUS, where auto plans plain replicas."""
    return _with(extra).replace("daily_active_users: 1000000", "daily_active_users: 20000")


def test_workload_gpus_restrict_and_toggles_select_the_kinds():
    # a service not at scale (its candidates in ~0.1 s; at 1M users a day `mtp: true` took
    # ~7 s): auto would plan plain replicas there, so every deployment is the toggle's doing
    inputs = load_problem_text(
        _small("precision: fp4\ngpus: [b200]\ndisaggregated: true"), "t.yaml"
    )
    cands = build_candidates(inputs).serve["s"]
    assert cands and {c.gpu for c in cands} == {"b200"}
    assert all(c.deployment is not None and c.deployment.disaggregated for c in cands)
    inputs = load_problem_text(_small("precision: fp4\ngpus: [b200]\nmtp: true"), "t.yaml")
    cands = build_candidates(inputs).serve["s"]
    assert cands and all(c.deployment is not None and c.deployment.mtp for c in cands)


def test_a_dense_model_on_auto_keeps_its_plain_replicas():
    text = _with("precision: fp8").replace("deepseek-r1", "llama-3.3-70b")
    cands = build_candidates(load_problem_text(text, "t.yaml")).serve["s"]
    assert cands and all(c.deployment is None for c in cands)


def test_workers_wider_than_a_server_rent_only_across_a_multi_node_fabric():
    from types import SimpleNamespace as NS

    hgx = NS(gpus_per_instance=8, multi_node=False)
    ib = NS(gpus_per_instance=8, multi_node=True)
    assert rentable_on((4, 8), hgx) and not rentable_on((16,), hgx) and rentable_on((16,), ib)


def test_a_service_not_at_scale_keeps_its_plain_replicas_on_auto():
    """Below AT_SCALE_GPUS of plain replicas at peak, auto plans plain replicas (true asks)."""
    small = _small("precision: fp4")
    cands = build_candidates(load_problem_text(small, "t.yaml")).serve["s"]
    assert cands and all(c.deployment is None for c in cands)
    asked = small.replace("precision: fp4", "precision: fp4\n      disaggregated: true")
    cands = build_candidates(load_problem_text(asked, "t.yaml")).serve["s"]
    assert cands and all(c.deployment is not None for c in cands)


def test_the_workbook_shows_the_layout(tmp_path):
    import openpyxl

    from planner.reports.excel.workbook import write_workbook

    _, plan = _solved()
    write_workbook(plan, tmp_path / "r1.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r1.xlsx")
    text = {
        ws.title: " ".join(str(v) for row in ws.iter_rows(values_only=True) for v in row if v)
        for ws in (wb["Summary"], wb["Workloads"])
    }
    assert "a prefill pool of" in text["Summary"] and "a decode pool of" in text["Summary"]
    labels = {a.layout.label for a in plan.serve_allocations if a.layout and a.layout.prefill}
    assert any(f"layout={label}" in text["Workloads"] for label in labels)
