"""Provider caps (issue 53): what one provider delivers of one GPU type at once, all its
offers together; the model keeps to it, the verifier checks it independently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import cli


def _problem(caps: list[dict] | None = None, users: float = 40.0) -> dict:
    """A llama-2-7b chat service for one month on L4s from two providers, one cheaper."""
    offer = {"kind": "on_demand", "gpu": "a100-sxm-80gb", "gpus_per_instance": 1, "source": "test quote",
             "as_of": "2026-11"}  # fmt: skip
    offers: dict = {
        "files": [],
        "extra": [
            {**offer, "id": "cheap-l4", "provider": "cheap", "usd_per_gpu_hour": 1.0},
            {**offer, "id": "cheap-l4-b", "provider": "cheap", "usd_per_gpu_hour": 1.1},
            {**offer, "id": "dear-l4", "provider": "dear", "usd_per_gpu_hour": 2.0},
        ],
    }
    if caps is not None:
        offers["provider_caps"] = caps
    return {
        "name": "caps",
        "horizon": {"start": "2027-01", "months": 1},
        "budget": {"capex_usd": 0},
        "site": {"power_usd_per_kwh": 0.1},
        "gpus": ["a100-sxm-80gb"],
        "offers": offers,
        "workloads": {"serve": [{
            "name": "chat", "model": "llama-2-7b", "start": "2027-01",
            "traffic": {"daily_active_users": users, "requests_per_user_per_day": 86400,
                        "utilization": 1.0},
            "tokens": {"prompt": 500, "output": 200},
            "slo": {"p95_ttft_ms": 2000, "p95_tpot_ms": 100, "max_load": 1.0},
        }]},
    }  # fmt: skip


def _solve(tmp_path: Path, doc: dict, name: str = "p") -> tuple[int, str, dict | None]:
    path, out = tmp_path / f"{name}.yaml", tmp_path / f"{name}.json"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = CliRunner().invoke(cli, ["solve", str(path), "--no-excel", "--json", str(out)])
    return r.exit_code, r.output, json.loads(out.read_text()) if out.exists() else None


def _peak_gpus(plan: dict, provider: str) -> float:
    per: dict[tuple[str, str], float] = {}
    offers = {"cheap-l4": "cheap", "cheap-l4-b": "cheap", "dear-l4": "dear"}
    for a in plan["serve_allocations"]:
        if offers.get(a["source"]) == provider:
            key = (a["month"], a["slice"])
            per[key] = per.get(key, 0.0) + a["replicas"] * a["gpus_per_replica"]
    return max(per.values(), default=0.0)


def test_a_cap_moves_the_excess_to_the_next_provider(tmp_path):
    code, out, free = _solve(tmp_path, _problem(), "free")
    assert code == 0, out
    need = _peak_gpus(free, "cheap")
    assert need >= 4 and _peak_gpus(free, "dear") == 0  # all on the cheaper provider
    cap = int(need) - 2
    code, out, capped = _solve(
        tmp_path,
        _problem([{"provider": "cheap", "gpu": "a100-sxm-80gb", "max_gpus": cap}]),
        "capped",
    )
    assert code == 0, out  # solved and verified
    assert _peak_gpus(capped, "cheap") <= cap  # both of cheap's offers together
    assert _peak_gpus(capped, "dear") >= 2
    assert capped["objective_usd"] > free["objective_usd"]
    # the verifier checks the cap on its own: the uncapped plan breaks it
    path, plan = tmp_path / "check.yaml", tmp_path / "free.json"
    path.write_text(
        yaml.safe_dump(_problem([{"provider": "cheap", "gpu": "a100-sxm-80gb", "max_gpus": cap}]))
    )
    r = CliRunner().invoke(cli, ["verify", str(path), str(plan)])
    assert r.exit_code == 4 and "provider cap" in r.output


def test_caps_below_the_demand_are_infeasible(tmp_path):
    caps = [{"provider": p, "gpu": "a100-sxm-80gb", "max_gpus": 1} for p in ("cheap", "dear")]
    code, out, _ = _solve(tmp_path, _problem(caps))
    assert code == 3 and "offers.provider_caps leave the workloads short" in out, out
    assert "cheap a100-sxm-80gb: cap 1, the plan without caps rents up to" in out


@pytest.mark.parametrize(
    ("cap", "words"),
    [
        ({"provider": "cheap", "gpu": "h100-sxm", "max_gpus": 4}, "provider_caps[0].gpu"),
        ({"provider": "chep", "gpu": "a100-sxm-80gb", "max_gpus": 4}, "did you mean 'cheap'"),
        (
            {"provider": "cheap", "gpu": "a100-sxm-80gb", "max_gpus": -1},
            "provider_caps[0].max_gpus",
        ),
    ],
)
def test_bad_caps_are_named(tmp_path, cap, words):
    code, out, _ = _solve(tmp_path, _problem([cap]))
    assert code == 2 and words in out, out


def test_a_cap_given_twice_is_an_error(tmp_path):
    cap = {"provider": "cheap", "gpu": "a100-sxm-80gb", "max_gpus": 4}
    code, out, _ = _solve(tmp_path, _problem([cap, cap]))
    assert code == 2 and "capped twice" in out, out
