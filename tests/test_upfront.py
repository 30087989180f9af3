"""Reservations paid up front (issue 53): all or part of a term paid at signing, in the cash
flow and the present value; the verifier bills the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import cli
from planner.physics.demand import HOURS_PER_MONTH


def _problem(upfront: float) -> dict:
    """A flat llama-2-7b service for 12 months: an A100 reservation of 12 months at $1/h
    (up front as given) or on demand at $3/h."""
    base = {"provider": "quote", "gpu": "a100-sxm-80gb", "gpus_per_instance": 1,
            "source": "test quote", "as_of": "2026-11"}  # fmt: skip
    return {
        "name": "upfront",
        "horizon": {"start": "2027-01", "months": 12},
        "budget": {"capex_usd": 0},
        "site": {"power_usd_per_kwh": 0.1},
        "gpus": ["a100-sxm-80gb"],
        "finance": {"discount_rate": 0.10},
        "market": {"rent_change_per_year": 0.0},
        "offers": {"files": [], "extra": [
            {**base, "id": "od", "kind": "on_demand", "usd_per_gpu_hour": 3.0},
            {**base, "id": "res", "kind": "reserved", "usd_per_gpu_hour": 1.0, "term_months": 12,
             "upfront_share": upfront},
        ]},
        "workloads": {"serve": [{
            "name": "chat", "model": "llama-2-7b", "start": "2027-01",
            "traffic": {"daily_active_users": 20, "requests_per_user_per_day": 86400,
                        "utilization": 1.0},
            "tokens": {"prompt": 500, "output": 200},
            "slo": {"p95_ttft_ms": 2000, "p95_tpot_ms": 100, "max_load": 1.0},
        }]},
    }  # fmt: skip


def _solve(tmp_path: Path, upfront: float) -> dict:
    path, out = tmp_path / f"u{upfront}.yaml", tmp_path / f"u{upfront}.json"
    path.write_text(yaml.safe_dump(_problem(upfront), sort_keys=False))
    r = CliRunner().invoke(cli, ["solve", str(path), "--no-excel", "--json", str(out)])
    assert r.exit_code == 0, r.output  # solved and verified
    return json.loads(out.read_text())


def test_upfront_moves_the_cash_to_signing_and_raises_its_present_value(tmp_path):
    monthly, upfront, half = (_solve(tmp_path, u) for u in (0.0, 1.0, 0.5))
    gpus = monthly["reservations"][0]["gpus"]
    assert gpus >= 1 and [p["reservations"][0]["gpus"] for p in (upfront, half)] == [gpus] * 2
    term = gpus * 12 * HOURS_PER_MONTH * 1.0  # the term's price, whatever the timing
    for plan in (monthly, upfront, half):
        assert plan["totals"]["total_usd"] == pytest.approx(monthly["totals"]["total_usd"])
        assert sum(c["rental_usd"] for c in plan["cash_flow"]) == pytest.approx(term)
    first = [p["cash_flow"][0]["rental_usd"] for p in (monthly, upfront, half)]
    assert first == pytest.approx([term / 12, term, term / 2 + term / 24])
    assert upfront["cash_flow"][1]["rental_usd"] == pytest.approx(0.0)
    # paid earlier, discounted less: 10 %/year over the months it moved
    assert monthly["objective_usd"] < half["objective_usd"] < upfront["objective_usd"]
    saved = sum(term / 12 * (1 - 1.1 ** (-t / 12)) for t in range(12))
    assert upfront["objective_usd"] - monthly["objective_usd"] == pytest.approx(saved, rel=1e-6)


def test_upfront_is_for_reservations(tmp_path):
    doc = _problem(0.0)
    doc["offers"]["extra"][0]["upfront_share"] = 0.5
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(cli, ["solve", str(path), "--no-excel"])
    assert r.exit_code == 2 and "upfront_share" in r.output, r.output
