"""Request mixes and measured profiles (issue 18): the model, the plan, the verifier, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import cli
from planner.inputs.problem import load_problem
from planner.plan.make import plan_problem
from planner.verify import verify_plan

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"
HOURS = 730.0


def _problem(requests: list[dict], rps: float = 20.0, **serve: object) -> dict:
    """One month renting an L4 ($1/h) and an A100 ($3/h) for a llama-2-7b service."""
    offer = {"provider": "quote", "kind": "on_demand", "gpus_per_instance": 1,
             "source": "test quote", "as_of": "2026-11"}  # fmt: skip
    return {
        "name": "mix",
        "horizon": {"start": "2027-01", "months": 1},
        "budget": {"capex_usd": 0},
        "site": {"power_usd_per_kwh": 0.1},
        "gpus": ["l4", "a100-sxm-80gb"],
        "offers": {
            "files": [],
            "extra": [
                {**offer, "id": "q-l4", "gpu": "l4", "usd_per_gpu_hour": 1.0},
                {**offer, "id": "q-a100", "gpu": "a100-sxm-80gb", "usd_per_gpu_hour": 3.0},
            ],
        },
        "profiles": ["p.yaml"],
        "workloads": {
            "serve": [
                {
                    "name": "chat",
                    "model": "llama-2-7b",
                    "start": "2027-01",
                    "traffic": {
                        "daily_active_users": rps,
                        "requests_per_user_per_day": 86400,
                        "utilization": 1.0,
                    },  # fmt: skip
                    "requests": requests,
                    "slo": {"p95_ttft_ms": 1000, "p95_tpot_ms": 100, "max_load": 1.0},
                    "redundancy": 0,
                    "measured_only": True,
                    **serve,
                }
            ]
        },
        "finance": {"discount_rate": 0, "residual": "none"},
    }


def _profile(gpu: str, prompt: int, output: int, rps: float) -> dict:
    return {"model": "llama-2-7b", "gpu": gpu, "tp": 1, "precision": "fp16", "prompt": prompt,
            "output": output, "max_rps": rps, "source": "test bench", "as_of": "2026-11"}  # fmt: skip


# L4: 10 req/s of short requests, 0.5 of long ones; A100: 10 and 5.
PROFILES = {
    "serve": [
        _profile("l4", 256, 128, 10.0),
        _profile("l4", 4000, 512, 0.5),
        _profile("a100-sxm-80gb", 256, 128, 10.0),
        _profile("a100-sxm-80gb", 4000, 512, 5.0),
    ]
}
TWO = [
    {"name": "short", "prompt": [1, 256], "output": [1, 128], "share": 0.5},
    {"name": "long", "prompt": [257, 4000], "output": [129, 512], "share": 0.5},
]


def _write(tmp_path: Path, problem: dict, profiles: dict = PROFILES) -> Path:
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(profiles, sort_keys=False))
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(problem, sort_keys=False))
    return path


def _solve(path: Path):
    inputs = load_problem(path)
    return inputs, plan_problem(inputs, solver="cbc", time_limit=60)


def test_two_buckets_go_to_two_gpu_types_at_the_hand_computed_optimum(tmp_path):
    """20 req/s, half short, half long. All on L4: 1 + 20 = 21 L4 ($21/h); all on A100:
    1 + 2 = 3 A100 ($9/h); short on one L4 and long on two A100: $7/h, the optimum (two
    A100 serve the long half exactly; any short load moved onto them needs a third)."""
    inputs, plan = _solve(_write(tmp_path, _problem(TWO)))
    assert plan.totals.total_usd == pytest.approx(7.0 * HOURS, rel=1e-9)
    given: dict[tuple[str, str], float] = {}
    for al in plan.serve_allocations:
        assert al.replicas == round(al.replicas)
        for b, v in al.bucket_capacity_rps.items():
            given[(al.gpu, b)] = given.get((al.gpu, b), 0.0) + v
    per_slice = len({al.slice for al in plan.serve_allocations})
    assert given.get(("l4", "long"), 0.0) == pytest.approx(0.0, abs=1e-6)
    assert given[("a100-sxm-80gb", "long")] == pytest.approx(10.0 * per_slice, rel=1e-6)
    assert given[("l4", "short")] == pytest.approx(10.0 * per_slice, rel=1e-6)
    assert verify_plan(inputs, plan) == []


def test_a_mix_never_costs_more_than_the_best_single_type(tmp_path):
    """Metamorphic: taking a GPU type away can only make the mix dearer (here $7 -> $9/h)."""
    _, both = _solve(_write(tmp_path, _problem(TWO)))
    only = _problem(TWO)
    only["gpus"] = ["a100-sxm-80gb"]
    only["offers"]["extra"] = only["offers"]["extra"][1:]
    _, one = _solve(_write(tmp_path, only))
    assert one.totals.total_usd == pytest.approx(9.0 * HOURS, rel=1e-9)
    assert both.totals.total_usd < one.totals.total_usd


def test_each_replica_type_keeps_its_own_spare(tmp_path):
    """Redundancy 1 with buckets routed by type: one spare per type in use ($7 + $1 + $3)."""
    inputs, plan = _solve(_write(tmp_path, _problem(TWO, redundancy=1)))
    assert plan.totals.total_usd == pytest.approx(11.0 * HOURS, rel=1e-9)
    assert verify_plan(inputs, plan) == []


def test_the_verifier_catches_tampered_bucket_numbers(tmp_path):
    inputs, plan = _solve(_write(tmp_path, _problem(TWO)))
    rows = plan.serve_allocations

    def tamper(change) -> list[str]:
        bad = plan.model_copy(deep=True)
        change(bad.serve_allocations)
        return verify_plan(inputs, bad)

    l4 = next(i for i, al in enumerate(rows) if al.gpu == "l4")
    a100 = next(i for i, al in enumerate(rows) if al.gpu == "a100-sxm-80gb")

    def rate(als):  # a measured rate claimed higher than measured
        als[l4].bucket_rates_rps["long"] = 5.0

    def short(als):  # a bucket given less than its share of the demand
        als[l4].bucket_capacity_rps["short"] *= 0.5

    def crowded(als):  # more load on a type than its replicas carry
        als[a100].bucket_capacity_rps["short"] = 5.0

    assert any("bucket long" in f and "measured" in f for f in tamper(rate))
    assert any("bucket short" in f and "share" in f for f in tamper(short))
    assert any("need" in f and "replicas" in f for f in tamper(crowded))


def test_measured_profile_from_vllm_overrides_the_physics(tmp_path):
    """A vLLM result imported as a profile: the plan's rate is the measured one, and the JSON
    and the workbook's Assumptions say it was measured and where it came from."""
    out = tmp_path / "p.yaml"
    res = CliRunner().invoke(
        cli,
        ["profile", "import-vllm", str(FIXTURES / "vllm-2qps.json"), "--model", "llama-3-8b",
         "--gpu", "l4", "-o", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    measured = yaml.safe_load(out.read_text())["serve"][0]
    problem = _problem([], rps=5.0, measured_only=False)
    problem["gpus"], problem["offers"]["extra"] = ["l4"], problem["offers"]["extra"][:1]
    w = problem["workloads"]["serve"][0]
    del w["requests"]
    w.update(
        model="llama-3-8b", tokens={"prompt": measured["prompt"], "output": measured["output"]}
    )
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(problem, sort_keys=False))
    xlsx, js = tmp_path / "plan.xlsx", tmp_path / "plan.json"
    res = CliRunner().invoke(cli, ["solve", str(path), "-o", str(xlsx), "--json", str(js)])
    assert res.exit_code == 0, res.output
    plan = json.loads(js.read_text())
    rate = measured["points"][0]["rps"]
    l4 = [
        al for al in plan["serve_allocations"] if al["gpu"] == "l4" and al["gpus_per_replica"] == 1
    ]
    assert l4 and all(al["rate_rps_per_replica"] == pytest.approx(rate) for al in l4)
    notes = [a for a in plan["assumptions"] if a["group"] == "serve:chat" and "l4_tp1" in a["key"]]
    assert (
        notes
        and notes[0]["source"].startswith("measured")
        and notes[0]["value"] == pytest.approx(rate)
    )
    from openpyxl import load_workbook

    cells = [
        str(c.value)
        for row in load_workbook(xlsx)["Assumptions"].iter_rows()
        for c in row
        if c.value is not None
    ]
    assert any("measured" in c and "vllm-2qps.json" in c for c in cells)


@pytest.mark.parametrize(
    ("requests", "profiles", "where", "says"),
    [
        ([{**TWO[0], "share": 0.6}, TWO[1]], PROFILES, "workloads.serve[0]", "sum to 1.1"),
        ([TWO[0], {**TWO[1], "prompt": [200, 4000], "output": [100, 512]}], PROFILES,
         "workloads.serve[0]", "overlap"),
        ([{**TWO[0], "prompt": [300, 256]}, TWO[1]], PROFILES, "requests[0].prompt",
         "empty token range"),
        (TWO, {"serve": [{**PROFILES["serve"][0], "gpu": "l4x"}]}, "serve[0].gpu", "unknown gpu"),
        (TWO, {"serve": [{**PROFILES["serve"][0], "model": "gpt-9"}]}, "serve[0].model",
         "unknown model"),
        (TWO, {"serve": [{**PROFILES["serve"][0], "max_rps": 0}]}, "serve[0].max_rps",
         "greater than 0"),
        (TWO, {"serve": [{**PROFILES["serve"][0], "max_rps": -3}]}, "serve[0].max_rps",
         "greater than 0"),
    ],
)  # fmt: skip
def test_bad_mix_or_profile_exits_2_naming_file_line_and_field(
    tmp_path, requests, profiles, where, says
):
    path = _write(tmp_path, _problem(requests), profiles)
    res = CliRunner().invoke(cli, ["solve", str(path), "-o", str(tmp_path / "x.xlsx")])
    assert res.exit_code == 2, res.output
    assert where in res.output and says in res.output, res.output
    assert ".yaml:" in res.output  # file:line
    assert not (tmp_path / "x.xlsx").exists()


def _train_problem() -> dict:
    return {
        "name": "train",
        "horizon": {"start": "2027-01", "months": 3},
        "budget": {"capex_usd": 0},
        "site": {"power_usd_per_kwh": 0.1},
        "gpus": ["h100-sxm"],
        "offers": {
            "files": [],
            "extra": [
                {
                    "id": "q-h100",
                    "provider": "quote",
                    "gpu": "h100-sxm",
                    "kind": "on_demand",
                    "usd_per_gpu_hour": 2.0,
                    "gpus_per_instance": 8,
                    "source": "test quote",
                    "as_of": "2026-11",
                },
            ],
        },  # fmt: skip
        "workloads": {
            "train": [
                {
                    "name": "ft",
                    "model": "llama-3-8b",
                    "tokens": 2e10,
                    "window": {"start": "2027-01", "deadline": "2027-03"},
                },
            ]
        },  # fmt: skip
        "finance": {"discount_rate": 0, "residual": "none"},
    }


def test_a_measured_training_throughput_replaces_the_modeled_one(tmp_path):
    """Measured at half the modeled tokens/s on 8 H100: that candidate's planned hours double
    (the realized-hours model stays on top), the plan says so, and verify agrees."""
    from planner.optimize.candidates import build_candidates

    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_train_problem(), sort_keys=False))
    modeled = {c.gpus: c for c in build_candidates(load_problem(path)).train["ft"]}
    tps = modeled[8].estimate.tokens_per_s_per_gpu
    prof = {"train": [{"model": "llama-3-8b", "gpu": "h100-sxm", "gpus": 8,
                       "tokens_per_s_per_gpu": tps / 2, "source": "our run", "as_of": "2026-10"}]}  # fmt: skip
    problem = _train_problem()
    problem["profiles"] = ["p.yaml"]
    path = _write(tmp_path, problem, prof)
    inputs = load_problem(path)
    measured = {c.gpus: c for c in build_candidates(inputs).train["ft"]}
    assert measured[8].measured is not None and modeled[8].measured is None
    assert measured[8].estimate.wall_hours == pytest.approx(2 * modeled[8].estimate.wall_hours)
    assert measured[4].wall_hours == modeled[4].wall_hours  # other counts keep the physics
    plan = plan_problem(inputs, solver="cbc", time_limit=60)
    assert verify_plan(inputs, plan) == []
    # 8-GPU instances either way: 8 GPUs at the measured speed still beat 4 at the modeled one
    assert {al.gpus for al in plan.train_allocations} == {8}
    hours = sum(al.wall_hours for al in plan.train_allocations)
    assert hours == pytest.approx(measured[8].wall_hours, rel=1e-6)
    notes = [a for a in plan.assumptions if a.group == "train:ft"]
    assert notes and notes[0].value == pytest.approx(tps / 2) and "our run" in notes[0].source


def test_an_error_on_line_100_says_line_100(tmp_path):
    """rich turns ':100:' into an emoji unless told not to; file:line must survive printing."""
    text = "#\n" * 99 + yaml.safe_dump(_problem(TWO), sort_keys=False).replace(
        "name: mix", "name: mix\nbogus_key: 1", 1
    )
    path = tmp_path / "mix.yaml"
    path.write_text(text)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(PROFILES))
    res = CliRunner().invoke(cli, ["solve", str(path), "-o", str(tmp_path / "x.xlsx")])
    assert res.exit_code == 2 and "mix.yaml:101:" in res.output, res.output


def test_a_melange_config_plans_on_its_measured_numbers(tmp_path):
    """import-melange, then solve: every replica rate in the plan is the config's profiled
    throughput, said to be measured in the JSON and the Assumptions sheet; verify agrees."""
    problem = tmp_path / "mel.yaml"
    res = CliRunner().invoke(
        cli, ["profile", "import-melange", str(FIXTURES / "melange-3gpu.json"), "-o", str(problem)]
    )
    assert res.exit_code == 0, res.output
    profiled = {
        (e["gpu"], e["prompt"], e["output"]): e["max_rps"]
        for e in yaml.safe_load((tmp_path / "mel.profiles.yaml").read_text())["serve"]
    }
    xlsx, js = tmp_path / "mel.xlsx", tmp_path / "mel.json"
    res = CliRunner().invoke(cli, ["solve", str(problem), "-o", str(xlsx), "--json", str(js)])
    assert res.exit_code == 0, res.output
    plan = json.loads(js.read_text())
    shapes = {
        r["name"]: (r["prompt"], r["output"]) for r in plan["workloads"][0]["config"]["requests"]
    }
    used = 0
    for al in plan["serve_allocations"]:
        for b, v in al["bucket_capacity_rps"].items():
            if v > 1e-9:
                used += 1
                assert al["bucket_rates_rps"][b] == pytest.approx(profiled[(al["gpu"], *shapes[b])])
    assert used >= 2
    notes = [a for a in plan["assumptions"] if a["group"] == "serve:melange"]
    rates = [a for a in notes if "_tp" in a["key"]]
    assert rates and all(a["source"].startswith("measured") for a in rates)
    res = CliRunner().invoke(cli, ["verify", str(problem), str(js)])
    assert res.exit_code == 0, res.output
