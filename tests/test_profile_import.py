"""Profile import (issue 18): vLLM serving-benchmark results and Mélange configs turned into
profiles files and problems, the errors for broken inputs, and the ``profile`` CLI group.

Fixtures (tests/fixtures/profiles/):

* ``vllm-2qps.json``: ``vllm bench serve --save-result --metric-percentiles 95,99``, no
  ``--save-detailed``: p95 keys present, per-request lists removed (``latencies`` and
  ``queue_times`` stay, as vllm/benchmarks/serve.py keeps them).
* ``vllm-4qps-detailed.json``: ``--save-result --save-detailed`` with the default percentiles
  (p99 only) and one failed request: p95 must be computed from the per-request lists.
* ``melange-3gpu.json``: the Mélange solver input (melange/config/example.json's shape) with a
  third GPU the catalog does not hold (T4) that cannot serve long outputs (throughput 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.cli import cli
from planner.inputs.importers.profiles import (
    catalog_gpu_for,
    melange_problem,
    merge_profiles,
    read_json_config,
    read_json_results,
    vllm_profile,
)
from planner.inputs.problem import Problem, load_problem
from planner.inputs.profiles import ProfileFile, serve_rate

FIX = Path(__file__).parent / "fixtures" / "profiles"
V2 = FIX / "vllm-2qps.json"
V4 = FIX / "vllm-4qps-detailed.json"
MEL3 = FIX / "melange-3gpu.json"
# melange/config/example.json of tyler-griggs/melange-release, verbatim.
EXAMPLE = {
    "gpu_info": {
        "A10G": {"cost": 1.01, "tputs": [[2, 1], [5, 2]]},
        "A100-80GB": {"cost": 3.67, "tputs": [[20, 20], [40, 20]]},
    },
    "workload_distribution": [[0.2, 0.1], [0.5, 0.2]],
    "total_request_rate": 30.0,
    "slice_factor": 1,
}
KW = {"model": "llama-3-8b", "gpu": "h100-sxm", "tp": 1, "precision": "fp16"}


def _load(p: Path) -> dict:
    return json.loads(p.read_text())


def _ok(d: dict) -> list[bool]:
    return [not e for e in d["errors"]]


# ----------------------------------------------------------------------------- vLLM


def test_vllm_two_rates_become_one_entry_with_two_points() -> None:
    prof = vllm_profile([(str(V2), _load(V2)), (str(V4), _load(V4))], **KW)
    pf = ProfileFile.model_validate(prof)
    assert len(pf.serve) == 1
    e = pf.serve[0]
    assert (e.prompt, e.output, e.model, e.gpu) == (512, 128, "llama-3-8b", "h100-sxm")
    assert [p.rps for p in e.points] == sorted(p.rps for p in e.points)
    by_rate = {round(p.rps, 6): p for p in e.points}
    d2, d4 = _load(V2), _load(V4)
    assert set(by_rate) == {round(d2["request_throughput"], 6), round(d4["request_throughput"], 6)}
    p2 = by_rate[round(d2["request_throughput"], 6)]
    assert p2.p95_ttft_ms == pytest.approx(d2["p95_ttft_ms"], abs=1e-3)
    assert p2.p95_tpot_ms == pytest.approx(d2["p95_tpot_ms"], abs=1e-3)
    assert e.as_of == "2025-01"
    for word in ("vllm-2qps.json", "vllm-4qps-detailed.json", "backend vllm",
                 "meta-llama/Meta-Llama-3-8B-Instruct", "20250114-103000"):  # fmt: skip
        assert word in e.source


def test_vllm_p95_computed_from_requests_excludes_failed_ones() -> None:
    d = _load(V4)
    assert "p95_ttft_ms" not in d and "p95_tpot_ms" not in d and not all(_ok(d))
    (p,) = vllm_profile([(str(V4), d)], **KW)["serve"][0]["points"]
    ok = _ok(d)
    ttfts = [t for t, good in zip(d["ttfts"], ok, strict=True) if good]
    assert p["p95_ttft_ms"] == pytest.approx(np.percentile(ttfts, 95) * 1000, abs=1e-3)
    with_failed = np.percentile(d["ttfts"], 95) * 1000  # the failed request's ttft is 0.0
    assert abs(p["p95_ttft_ms"] - with_failed) > 1e-3
    tpots = [
        (lat - t) / (n - 1)
        for lat, t, n, good in zip(d["latencies"], d["ttfts"], d["output_lens"], ok, strict=True)
        if good
    ]
    assert p["p95_tpot_ms"] == pytest.approx(np.percentile(tpots, 95) * 1000, abs=1e-3)
    assert p["rps"] == pytest.approx(d["request_throughput"], rel=1e-6)
    # The shape counts completed requests only (the failed one has no tokens).
    assert d["completed"] == 7 and d["total_input_tokens"] == 7 * 512


def test_vllm_tpot_from_itls_when_latencies_are_missing() -> None:
    d = _load(V4)
    full = vllm_profile([("a.json", d)], **KW)["serve"][0]["points"][0]
    del d["latencies"]
    from_itls = vllm_profile([("a.json", d)], **KW)["serve"][0]["points"][0]
    assert from_itls["p95_tpot_ms"] == pytest.approx(full["p95_tpot_ms"], rel=1e-4)


def test_vllm_different_shapes_are_different_entries() -> None:
    d2, d4 = _load(V2), _load(V4)
    d4["total_input_tokens"] = 7 * 2048
    prof = vllm_profile([("a.json", d2), ("b.json", d4)], **KW)
    assert sorted((e["prompt"], e["output"]) for e in prof["serve"]) == [(512, 128), (2048, 128)]
    assert all(len(e["points"]) == 1 for e in prof["serve"])


def test_vllm_missing_p95_says_how_to_produce_it() -> None:
    d = _load(V2)
    del d["p95_ttft_ms"], d["p95_tpot_ms"]
    with pytest.raises(InputError) as exc:
        vllm_profile([("runs/r.json", d)], **KW)
    msg = str(exc.value)
    assert "runs/r.json" in msg and "p95_ttft_ms" in msg and "p99_ttft_ms" in msg
    assert "--metric-percentiles 95" in msg and "--percentile-metrics ttft,tpot" in msg


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.pop("request_throughput"), ["missing key 'request_throughput'"]),
        (lambda d: d.update(completed=0), ["completed is 0"]),
        (lambda d: d.update(request_throughput="fast"), ["request_throughput is 'fast'"]),
        (lambda d: d.pop("total_output_tokens"), ["total_output_tokens"]),
        (lambda d: d.update(ramp_up_strategy="linear"), ["ramp-up", "--request-rate"]),
    ],
)
def test_vllm_broken_results_name_the_key_and_file(change, words) -> None:
    d = _load(V2)
    change(d)
    with pytest.raises(InputError) as exc:
        vllm_profile([("x/run7.json", d)], **KW)
    assert "x/run7.json" in str(exc.value)
    for w in words:
        assert w in str(exc.value)


def test_vllm_appended_results_are_one_per_line(tmp_path: Path) -> None:
    p = tmp_path / "appended.json"
    p.write_text(json.dumps(_load(V2)) + "\n" + json.dumps(_load(V4)))
    results = read_json_results(p)
    assert [n for n, _ in results] == [f"{p}#1", f"{p}#2"]
    assert len(vllm_profile(results, **KW)["serve"][0]["points"]) == 2


def test_vllm_not_json(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text("Serving Benchmark Result\nSuccessful requests: 8\n")
    with pytest.raises(InputError, match="not a JSON file"):
        read_json_results(p)


def test_merge_adds_points_and_keeps_other_entries() -> None:
    old = vllm_profile([("a.json", _load(V2))], **KW)
    old["train"] = [
        {"model": "llama-3-8b", "gpu": "h100-sxm", "gpus": 8, "tokens_per_s_per_gpu": 3000.0,
         "source": "s", "as_of": "2025-01"}
    ]  # fmt: skip
    new = vllm_profile([("b.json", _load(V4))], **KW)
    merged = merge_profiles(old, new)
    ProfileFile.model_validate(merged)
    assert len(merged["serve"]) == 1 and len(merged["serve"][0]["points"]) == 2
    assert merged["train"] == old["train"]
    again = merge_profiles(merged, new)  # the same run imported twice counts once
    assert len(again["serve"][0]["points"]) == 2


# ----------------------------------------------------------------------------- Mélange


def _write_melange(tmp_path: Path, config: dict, **kw) -> Path:
    problem, profiles = melange_problem(
        config, name="example.json", profiles_file="p.profiles.yaml", slo_ttft_ms=10_000,
        slo_tpot_ms=120, as_of="2025-01", **kw,
    )  # fmt: skip
    (tmp_path / "p.profiles.yaml").write_text(yaml.safe_dump(profiles, sort_keys=False))
    out = tmp_path / "p.yaml"
    out.write_text(yaml.safe_dump(problem, sort_keys=False))
    return out


def test_melange_example_loads_as_a_problem(tmp_path: Path) -> None:
    inputs = load_problem(_write_melange(tmp_path, EXAMPLE))
    p = inputs.problem
    assert list(inputs.gpus) == ["a10g", "a100-sxm-80gb"]
    assert {o.id: o.usd_per_gpu_hour for o in inputs.offers.values()} == {
        "melange-a10g": 1.01,
        "melange-a100-sxm-80gb": 3.67,
    }
    (w,) = p.workloads.serve
    assert w.traffic.daily_active_users * w.traffic.requests_per_user_per_day / 86400 == 30.0
    assert (w.slo.max_load, w.redundancy, p.budget.capex_usd, p.horizon.months) == (1.0, 0, 0, 1)
    shares = {(b.prompt_range(), b.output_range()): b.share for b in w.buckets()}
    assert shares == pytest.approx(
        {
            ((1, 25), (1, 25)): 0.2,
            ((1, 25), (26, 100)): 0.1,
            ((26, 100), (1, 25)): 0.5,
            ((26, 100), (26, 100)): 0.2,
        }  # fmt: skip
    )
    assert len(inputs.profiles.serve) == 8
    # The profile of each bucket is the one the planner finds for it, at the bucket's upper end.
    for b in w.buckets():
        m = serve_rate(inputs.profiles, "llama-2-7b", "a10g", 1, "fp16", b.prompt_range(),
                       b.output_range(), (10_000, 120))  # fmt: skip
        i, j = int(b.prompt_range()[1] == 100), int(b.output_range()[1] == 100)
        assert m.rate == EXAMPLE["gpu_info"]["A10G"]["tputs"][i][j]


def test_melange_custom_gpu_and_zero_throughput() -> None:
    problem, profiles = melange_problem(
        read_json_config(MEL3), name="melange-3gpu.json", profiles_file="x.profiles.yaml",
        slo_ttft_ms=2000, slo_tpot_ms=40, as_of="2025-01",
    )  # fmt: skip
    Problem.model_validate(problem)
    pf = ProfileFile.model_validate(profiles)
    assert problem["gpus"] == ["a10g", "a100-sxm-80gb", "t4"]
    assert problem["custom_gpus"]["t4"]["name"] == "T4"
    assert problem["custom_gpus"]["t4"]["like"] == "l4"  # $0.53/h: the L4 is nearest in price
    t4 = sorted((e.prompt, e.output, e.max_rps) for e in pf.serve if e.gpu == "t4")
    # no entry where the throughput is 0: measured_only, so the T4 does not serve those buckets
    assert t4 == [(25, 25, 1.5), (100, 25, 0.8)]
    assert len(pf.serve) == 10 and problem["workloads"]["serve"][0]["measured_only"] is True
    assert all(e.slo is None and e.tp == 1 and e.precision == "fp16" for e in pf.serve)
    assert problem["workloads"]["serve"][0]["slo"] == {
        "p95_ttft_ms": 2000, "p95_tpot_ms": 40, "max_load": 1.0
    }  # fmt: skip


def test_melange_custom_gpu_problem_loads(tmp_path: Path) -> None:
    inputs = load_problem(_write_melange(tmp_path, read_json_config(MEL3)))
    assert "t4" in inputs.gpus and len(inputs.profiles.serve) == 10


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("A100-80GB", "a100-sxm-80gb"), ("a100_80g", "a100-sxm-80gb"),
        ("A10G", "a10g"), ("H100", "h100-sxm"), ("H100-SXM", "h100-sxm"),
        ("l4", "l4"), ("L40S", "l40s"), ("RTX 4090", "rtx-4090"), ("T4", None),
        ("A10", None), ("V100", None),
    ],
)  # fmt: skip
def test_melange_gpu_names(name: str, want: str | None) -> None:
    from planner.inputs.catalog import load_gpus

    assert catalog_gpu_for(name, load_gpus()) == want


def _broken(**change) -> dict:
    d = json.loads(json.dumps(EXAMPLE))
    for k, v in change.items():
        if v is None:
            del d[k]
        else:
            d[k] = v
    return d


BROKEN = [
    (_broken(gpu_info=None), "missing key 'gpu_info'"),
    (_broken(workload_distribution=None), "missing key 'workload_distribution'"),
    (_broken(total_request_rate=None), "missing key 'total_request_rate'"),
    (_broken(gpu_info={"A10G": {"cost": 1.01, "tputs": [[2, 1], [5, 2], [1, 1]]}}),
     "gpu_info.A10G.tputs has 3 rows of 2, the distribution has 2 rows of 2"),
    (_broken(gpu_info={"A10G": {"cost": 1.01, "tputs": [[2, -1], [5, 2]]}}),
     "gpu_info.A10G.tputs[0][1] is -1; throughputs (req/s) cannot be negative"),
    (_broken(gpu_info={"A10G": {"tputs": [[2, 1], [5, 2]]}}), "gpu_info.A10G: missing key 'cost'"),
    (_broken(gpu_info={"A10G": {"cost": 0, "tputs": [[2, 1], [5, 2]]}}), "gpu_info.A10G.cost is 0"),
    (_broken(workload_distribution=[[0.5, -0.1], [0.4, 0.2]]),
     "workload_distribution[0][1] is -0.1"),
    (_broken(workload_distribution=[[0.5, 0.1], [0.4]]), "row 1 has 1 cells, row 0 has 2"),
    (_broken(total_request_rate=0), "total_request_rate is 0"),
    (_broken(gpu_info={"A10G": {"cost": 1.01, "tputs": [[2, 0], [5, 2]]}}),
     "workload_distribution[0][1] (prompt [1, 25], output [26, 100]) has requests but"),
    (_broken(slices=4), "unknown key 'slices'"),
]  # fmt: skip


@pytest.mark.parametrize(("config", "words"), BROKEN)
def test_melange_broken_configs(config: dict, words: str) -> None:
    with pytest.raises(InputError) as exc:
        melange_problem(config, name="x.json", profiles_file="p.yaml", slo_ttft_ms=1,
                        slo_tpot_ms=1)  # fmt: skip
    assert "melange config x.json" in str(exc.value)
    assert words in str(exc.value)


def test_melange_more_buckets_than_edges() -> None:
    big = {"A10G": {"cost": 1.0, "tputs": [[1.0] * 2] * 7}}
    config = _broken(gpu_info=big, workload_distribution=[[0.1, 0.1]] * 5 + [[0.0, 0.0]] * 2)
    with pytest.raises(InputError, match="7 input-length buckets, but only 6"):
        melange_problem(config, name="x.json", profiles_file="p.yaml", slo_ttft_ms=1,
                        slo_tpot_ms=1)  # fmt: skip
    edges = (10, 20, 30, 40, 50, 60, 70)
    problem, _ = melange_problem(config, name="x.json", profiles_file="p.yaml", slo_ttft_ms=1,
                                 slo_tpot_ms=1, input_edges=edges)  # fmt: skip
    assert problem["workloads"]["serve"][0]["requests"][-1]["prompt"] == [41, 50]


# ----------------------------------------------------------------------------- CLI


def _run(args: list[str]):
    return CliRunner().invoke(cli, args)


def test_cli_import_vllm_writes_then_merges(tmp_path: Path) -> None:
    out = tmp_path / "profiles.yaml"
    base = ["profile", "import-vllm", "--model", "llama-3-8b", "--gpu", "h100-sxm", "-o", str(out)]
    r = _run([*base[:2], str(V2), *base[2:]])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and "profiles: [profiles.yaml]" in r.output
    first = ProfileFile.model_validate(yaml.safe_load(out.read_text()))
    assert len(first.serve[0].points) == 1
    r = _run([*base[:2], str(V4), *base[2:]])
    assert r.exit_code == 0, r.output
    assert "merged into" in r.output
    merged = ProfileFile.model_validate(yaml.safe_load(out.read_text()))
    assert len(merged.serve) == 1 and len(merged.serve[0].points) == 2
    r = _run([*base[:2], str(V4), *base[2:], "--replace"])
    assert r.exit_code == 0, r.output
    assert len(yaml.safe_load(out.read_text())["serve"][0]["points"]) == 1


@pytest.mark.parametrize(
    ("option", "value", "hint"),
    [("--gpu", "h100-sxn", "did you mean 'h100-sxm'"), ("--model", "llama-3-8", "llama-3-8b")],
)
def test_cli_import_vllm_unknown_ids(tmp_path: Path, option: str, value: str, hint: str) -> None:
    args = {"--model": "llama-3-8b", "--gpu": "h100-sxm", option: value}
    out = tmp_path / "p.yaml"
    r = _run(["profile", "import-vllm", str(V2), *[x for kv in args.items() for x in kv],
              "-o", str(out)])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert value in r.output and hint in r.output and "Traceback" not in r.output
    assert not out.exists()


def test_cli_import_vllm_broken_file(tmp_path: Path) -> None:
    d = _load(V2)
    del d["p95_tpot_ms"]
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps(d))
    r = _run(["profile", "import-vllm", str(bad), "--model", "llama-3-8b", "--gpu", "h100-sxm",
              "-o", str(tmp_path / "o.yaml")])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "run.json" in r.output and "p95_tpot_ms" in r.output


def test_cli_import_melange_round_trip(tmp_path: Path) -> None:
    cfg = tmp_path / "example.json"
    cfg.write_text(json.dumps(EXAMPLE))
    out = tmp_path / "plans" / "mel.yaml"
    r = _run(["profile", "import-melange", str(cfg), "-o", str(out), "--slo-tpot-ms", "40",
              "--as-of", "2025-01"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert f"planner solve {out}" in r.output
    profiles = out.with_name("mel.profiles.yaml")
    assert profiles.is_file()
    assert yaml.safe_load(out.read_text())["profiles"] == ["mel.profiles.yaml"]
    inputs = load_problem(out)
    assert inputs.problem.workloads.serve[0].slo.p95_tpot_ms == 40
    assert len(inputs.profiles.serve) == 8


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not a JSON file"),
        (json.dumps(_broken(gpu_info=None)), "missing key 'gpu_info'"),
        (json.dumps(_broken(gpu_info={"A10G": {"cost": 1, "tputs": [[1, 1]]}})),
         "gpu_info.A10G.tputs has 1 rows"),
        (json.dumps(_broken(gpu_info={"A10G": {"cost": 1, "tputs": [[1, 1], [1, -2]]}})),
         "gpu_info.A10G.tputs[1][1] is -2"),
    ],
)  # fmt: skip
def test_cli_import_melange_broken(tmp_path: Path, text: str, words: str) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    out = tmp_path / "p.yaml"
    r = _run(["profile", "import-melange", str(cfg), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert "cfg.json" in r.output and words in r.output and "Traceback" not in r.output
    assert not out.exists() and not out.with_name("p.profiles.yaml").exists()


def test_cli_import_melange_unknown_model(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(EXAMPLE))
    r = _run(["profile", "import-melange", str(cfg), "-o", str(tmp_path / "p.yaml"),
              "--model", "llama2-7b"])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "did you mean 'llama-2-7b'" in r.output


def test_vllm_source_of_many_runs_fits_the_schema() -> None:
    d = _load(V2)
    runs = [(f"results/a-long-directory-name/run-{i:03d}-{'x' * 40}.json", d) for i in range(40)]
    (e,) = vllm_profile(runs, **KW)["serve"]
    assert len(e["source"]) <= 1000 and "more" in e["source"] and "run-000" in e["source"]
    assert len(e["points"]) == 40
