"""Agentic sessions with cached prefixes (issue 52): prefill priced on the new tokens, idle
sessions' KV held in HBM or an offload tier, TTFT with the reload; the plan says so."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.cli import cli
from planner.inputs.problem import load_problem_text
from planner.physics.capacity import bucket_capacity
from planner.physics.serving.prefix import prefix_reuse, session_hit_rate, session_prompts

BASE = {
    "name": "coding agents",
    "horizon": {"start": "2027-01", "months": 3},
    "budget": {"capex_usd": 5e6},
    "site": {"power_usd_per_kwh": 0.10, "pue": 1.3, "power_cap_kw": 500},
    "gpus": ["h200-sxm"],
    "workloads": {
        "serve": [
            {
                "name": "agents",
                "model": "qwen3-30b-a3b",
                "precision": "fp8",
                "start": "2027-01",
                "traffic": {"daily_active_users": 2000, "requests_per_user_per_day": 200},
                "tokens": {"prompt": 8000, "output": 400},
                "slo": {"p95_ttft_ms": 3000, "p95_tpot_ms": 30},
            }
        ]
    },
}
SESSIONS = {"turns": 10, "tokens_per_turn": 2000}


def _inputs(sessions=None, prompt=8000):
    doc = json.loads(json.dumps(BASE))
    w = doc["workloads"]["serve"][0]
    w["tokens"]["prompt"] = prompt
    if sessions is not None:
        w["sessions"] = sessions
    return load_problem_text(yaml.safe_dump(doc))


def _capacity(inputs, tp=1):
    w = inputs.problem.workloads.serve[0]
    return bucket_capacity(inputs, w, w.buckets()[0], "h200-sxm", tp).capacity


def test_session_shape_and_hit_rate_by_hand():
    w = _inputs(SESSIONS).problem.workloads.serve[0]
    # turns' prompts 8,000 .. 8,000 + 9 x (2,000 + 400) = 29,600, planned at the last
    assert session_prompts(w) == (8000, 29600)
    assert w.buckets()[0].shape() == (29600, 400)
    # prefilled: 8,000 + 9 x 2,000 = 26,000 of 10 x (8,000 + 29,600) / 2 = 188,000 tokens
    assert session_hit_rate(w) == pytest.approx(1 - 26000 / 188000)
    reuse = prefix_reuse(w)
    assert reuse.cached_share == pytest.approx(1 - 2000 / 29600) and reuse.idle_per_active == 0


def test_cached_prefixes_serve_more_and_idle_sessions_less():
    fresh = _capacity(_inputs(prompt=29600))  # every turn prefilled in full
    cached = _capacity(_inputs(SESSIONS))
    assert cached.rate_rps > 1.5 * fresh.rate_rps
    # 60 s between turns: 5 idle sessions per active one (400 tokens at 30 ms a turn), in HBM
    idle = _capacity(_inputs({**SESSIONS, "think_time_s": 60}))
    assert idle.rate_rps < cached.rate_rps and idle.batch < cached.batch
    # the same sessions kept in host memory: the batch comes back, the reload costs TTFT
    off = {"tier": "host", "gb_per_gpu": 2000, "gbs_per_gpu": 50}
    host = _capacity(_inputs({**SESSIONS, "think_time_s": 60, "kv_offload": off}))
    assert host.batch > idle.batch and host.rate_rps > idle.rate_rps
    slow = {**off, "gbs_per_gpu": 0.5}  # a slow tier: the reload dominates the first token
    ssd = _capacity(_inputs({**SESSIONS, "think_time_s": 60, "kv_offload": slow}))
    assert ssd.p95_ttft_ms > host.p95_ttft_ms
    # a small tier bounds the sessions a GPU keeps
    small = _capacity(
        _inputs({**SESSIONS, "think_time_s": 60, "kv_offload": {**off, "gb_per_gpu": 5}})
    )
    assert small.batch < host.batch


def test_a_measured_hit_rate_alone():
    w = _inputs({"hit_rate": 0.5}).problem.workloads.serve[0]
    assert session_hit_rate(w) == 0.5 and w.buckets()[0].shape() == (8000, 400)
    assert _capacity(_inputs({"hit_rate": 0.5})).rate_rps > _capacity(_inputs()).rate_rps


@pytest.mark.parametrize(
    ("sessions", "words"),
    [
        ({"turns": 3}, "tokens_per_turn"),
        ({"turns": 1000, "tokens_per_turn": 5000}, "1,000,000"),
        ({"hit_rate": 1.0}, "hit_rate"),
        (
            {
                "turns": 2,
                "tokens_per_turn": 10,
                "kv_offload": {"tier": "tape", "gb_per_gpu": 1, "gbs_per_gpu": 1},
            },
            "tier",
        ),  # fmt: skip
    ],
)
def test_bad_sessions_are_input_errors(sessions, words):
    with pytest.raises(InputError, match=words):
        _inputs(sessions)


def test_the_plan_is_cheaper_than_fresh_prompts_and_says_why(tmp_path):
    def solve(doc):
        path, out = tmp_path / "p.yaml", tmp_path / "p.json"
        path.write_text(yaml.safe_dump(doc))
        r = CliRunner().invoke(cli, ["solve", str(path), "--no-excel", "--json", str(out)])
        assert r.exit_code == 0, r.output
        return json.loads(out.read_text())

    doc = json.loads(json.dumps(BASE))
    doc["workloads"]["serve"][0]["sessions"] = {**SESSIONS, "think_time_s": 20}
    with_cache = solve(doc)
    doc["workloads"]["serve"][0].pop("sessions")
    doc["workloads"]["serve"][0]["tokens"]["prompt"] = 29600
    fresh = solve(doc)
    assert with_cache["objective_usd"] < 0.7 * fresh["objective_usd"]  # measured: $52.8k / $135.7k
    said = [a for a in with_cache["assumptions"] if a["key"] == "sessions"]
    assert said and "86.2% of prompt tokens from cache" in said[0]["value"]


def test_estimate_serve_prices_prefill_on_the_uncached_share():
    def est(*extra):
        args = ["estimate", "serve", "--model", "qwen3-30b-a3b", "--gpu", "h200-sxm", "--gpus",
                "1", "--precision", "fp8", "--prompt", "30000", "--output", "400", "--json", *extra]  # fmt: skip
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        return json.loads(r.output)

    fresh, cached = est(), est("--cached-share", "0.9")
    assert cached["ttft_ms"] < fresh["ttft_ms"] / 3  # measured: 186 ms against 1,098
    assert cached["tokens_per_s"] > fresh["tokens_per_s"]


def test_estimate_frontier_takes_the_cached_share():
    def best(*extra):
        args = ["estimate", "frontier", "--model", "qwen3-30b-a3b", "--gpu", "h200-sxm",
                "--precision", "fp8", "--prompt", "8000", "--output", "400", "--json", *extra]  # fmt: skip
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        front = json.loads(r.output)["h200-sxm"]
        points = front["points"] if isinstance(front, dict) else front
        return max(p["tokens_per_s_per_gpu"] for p in points)

    assert best("--cached-share", "0.9") > 1.2 * best()
