"""The vendor software efficiency of catalogs/vendors.yaml in the physics (issue 37 item 3).

An AMD card's estimate is the physics of the same card labelled NVIDIA (the reference the
calibration is fitted to) times its vendor's figure; NVIDIA's results are unchanged; the figure
is overridable per GPU in a problem file and refused outside (0, 2]."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.cli.estimate import estimate
from planner.inputs.catalog import (
    GpuSpec,
    check_efficiency,
    load_gpus,
    load_models,
    load_vendors,
    with_vendors,
)
from planner.inputs.schema import GpuOverride
from planner.physics.calibration.values import default_calibration
from planner.physics.serve import _decode_step_fn, decode_step_s, estimate_serve, prefill_iter_s
from planner.physics.train import estimate_train, single_gpu_mfu
from planner.physics.vendor import describe, serve_efficiency, train_efficiency
from planner.plan.assumptions import vendor_assumptions

AMD = ("mi300x", "mi325x", "mi355x")
# serving: each AMD generation's own figure (catalogs/calibration.yaml serve.serve_efficiency_by_gpu:
# CDNA 3 vs CDNA 4); training: the vendor's
GEN = {"mi300x": 0.61, "mi325x": 0.61, "mi355x": 0.97}


@pytest.fixture(scope="module")
def gpus() -> dict[str, GpuSpec]:
    return load_gpus()


@pytest.fixture(scope="module")
def models():
    return load_models()


def as_nvidia(gpu: GpuSpec) -> GpuSpec:
    """The same card labelled NVIDIA: the physics the calibration is fitted to, factor 1."""
    return gpu.model_copy(
        update={"vendor": "nvidia", "train_efficiency": None, "serve_efficiency": None}
    )


def test_the_loader_puts_each_vendors_figure_on_its_gpus(gpus):
    vendors = load_vendors()
    for g in gpus.values():
        v = vendors[g.vendor]
        assert g.train_efficiency == v.train_efficiency
        assert g.serve_efficiency == v.serve_efficiency
    for gid in AMD:
        assert (train_efficiency(gpus[gid]), serve_efficiency(gpus[gid])) == (0.72, GEN[gid])
    nvidia = [g for g in gpus.values() if g.vendor == "nvidia"]
    assert nvidia and all(train_efficiency(g) == serve_efficiency(g) == 1.0 for g in nvidia)


def test_a_hand_made_amd_spec_takes_the_shipped_vendor_figure(gpus):
    bare = gpus["mi300x"].model_copy(
        update={"id": "mi300x-own", "train_efficiency": None, "serve_efficiency": None}
    )
    assert (train_efficiency(bare), serve_efficiency(bare)) == (0.72, 0.81)


@pytest.mark.parametrize("gid", AMD)
def test_serving_steps_and_rates_are_the_nvidia_physics_times_the_factor(gpus, models, gid):
    amd, c, m = gpus[gid], default_calibration(), models["llama-2-70b"]
    nv, eff = as_nvidia(amd), serve_efficiency(amd)
    for tp in (1, 8):
        assert decode_step_s(m, amd, tp, "fp8", 32, 700, c) == pytest.approx(
            decode_step_s(m, nv, tp, "fp8", 32, 700, c) / eff, rel=1e-12
        )
        assert prefill_iter_s(m, amd, tp, "fp8", 4, 2000, c) == pytest.approx(
            prefill_iter_s(m, nv, tp, "fp8", 4, 2000, c) / eff, rel=1e-12
        )
        # the fast path of the loaded-latency fixed point agrees with the step function
        assert _decode_step_fn(m, amd, tp, "fp8", 700, c)(32) == pytest.approx(
            decode_step_s(m, amd, tp, "fp8", 32, 700, c), rel=1e-9
        )
    a = estimate_serve(m, amd, 8, "fp8", 300, 290, 64, c)
    b = estimate_serve(m, nv, 8, "fp8", 300, 290, 64, c)
    assert a.fits and b.fits
    assert a.tokens_per_s == pytest.approx(b.tokens_per_s * eff, rel=1e-12)
    assert a.ttft_ms == pytest.approx(b.ttft_ms / eff, rel=1e-12)
    assert a.memory == b.memory  # memory is the silicon's, not the software's


def test_a_moe_replica_scales_too(gpus, models):
    amd, c, m = gpus["mi355x"], default_calibration(), models["deepseek-r1"]
    a = estimate_serve(m, amd, 8, "fp4", 2000, 1500, 16, c)
    b = estimate_serve(m, as_nvidia(amd), 8, "fp4", 2000, 1500, 16, c)
    assert a.fits and a.tokens_per_s == pytest.approx(b.tokens_per_s * GEN["mi355x"], rel=1e-12)
    step = _decode_step_fn(m, amd, 8, "fp4", 2750, c)
    assert step(16) == pytest.approx(decode_step_s(m, amd, 8, "fp4", 16, 2750, c), rel=1e-9)


def test_training_mfu_and_single_gpu_throughput_are_the_nvidia_physics_times_the_factor(
    gpus, models
):
    amd, c, m = gpus["mi300x"], default_calibration(), models["llama-2-7b"]
    nv = as_nvidia(amd)
    assert single_gpu_mfu(m, amd, 4096, 2, False, "full", c) == pytest.approx(
        single_gpu_mfu(m, nv, 4096, 2, False, "full", c) * 0.72, rel=1e-12
    )
    a = estimate_train(m, amd, 1, 1e9, "full", c, 4096)
    b = estimate_train(m, nv, 1, 1e9, "full", c, 4096)
    assert a.fits and a.layout == b.layout  # one GPU: no communication, only compute scales
    assert a.tokens_per_s_per_gpu == pytest.approx(b.tokens_per_s_per_gpu * 0.72, rel=1e-12)
    assert a.mfu == pytest.approx(b.mfu * 0.72, rel=1e-12)
    assert a.wall_hours == pytest.approx(b.wall_hours / 0.72, rel=1e-12)


def test_nvidia_results_are_unchanged_bit_for_bit(gpus, models):
    h100, c, m = gpus["h100-sxm"], default_calibration(), models["llama-2-70b"]
    bare = h100.model_copy(update={"train_efficiency": None, "serve_efficiency": None})
    assert estimate_serve(m, h100, 8, "fp8", 300, 290, 64, c) == estimate_serve(
        m, bare, 8, "fp8", 300, 290, 64, c
    )
    # x 1.0 and / 1.0 are exact in IEEE arithmetic: the step is the un-scaled sum itself
    assert decode_step_s(m, h100, 8, "fp8", 32, 700, c) == decode_step_s(
        m, bare, 8, "fp8", 32, 700, c
    )


@pytest.mark.parametrize("bad", [0.0, -0.5, 2.01, 10.0])
def test_a_factor_outside_0_to_2_is_refused(gpus, bad):
    with pytest.raises(ValueError, match=r"lies in \(0, 2\]"):
        check_efficiency(bad)
    with pytest.raises(ValidationError):
        GpuOverride(serve_efficiency=bad)
    with pytest.raises(ValidationError):
        GpuOverride(train_efficiency=bad)
    cat = gpus["mi300x"].serve_efficiency
    fig = cat.model_copy(
        update={"value": bad, "low": min(bad, cat.low), "high": max(bad, cat.high)}
    )
    with pytest.raises(ValidationError, match=r"lies in \(0, 2\]"):
        GpuSpec.model_validate(
            {**gpus["mi300x"].model_dump(by_alias=True), "serve_efficiency": fig.model_dump()}
        )


def test_the_bounds_themselves_are_accepted():
    assert check_efficiency(2.0) == 2.0
    assert GpuOverride(serve_efficiency=2.0, train_efficiency=1e-3).serve_efficiency == 2.0


def test_a_vendor_missing_from_the_vendor_file_is_an_error(gpus):
    with pytest.raises(InputError, match="not in the vendor catalog"):
        with_vendors({"mi300x": gpus["mi300x"]}, {"nvidia": load_vendors()["nvidia"]})


def test_a_problem_file_overrides_the_figure(tmp_path):
    from planner.inputs.problem import load_problem

    p = tmp_path / "p.yaml"
    p.write_text(
        "name: override\n"
        "horizon: {start: 2027-01, months: 3}\n"
        "budget: {capex_usd: 1000000}\n"
        "site: {power_usd_per_kwh: 0.1}\n"
        "gpus: [mi300x, h100-sxm]\n"
        "overrides:\n"
        "  gpus:\n"
        "    mi300x: {serve_efficiency: 0.95, source: 'our vLLM 0.9 run'}\n"
        "workloads:\n"
        "  serve:\n"
        "    - name: chat\n"
        "      model: llama-2-70b\n"
        "      start: 2027-01\n"
        "      traffic: {daily_active_users: 1000, requests_per_user_per_day: 10}\n"
        "      tokens: {prompt: 300, output: 200}\n"
        "      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 100}\n"
    )
    g = load_problem(p).gpus["mi300x"]
    assert serve_efficiency(g) == 0.95 and train_efficiency(g) == 0.72
    assert g.serve_efficiency.source == "our vLLM 0.9 run"
    assert "catalog default 0.81" in (g.serve_efficiency.note or "")
    p.write_text(p.read_text().replace("0.95", "2.5"))
    with pytest.raises(InputError, match="serve_efficiency"):
        load_problem(p)


def test_the_plan_assumptions_list_both_figures(gpus):
    rows = {a.key: a for a in vendor_assumptions(gpus["mi325x"])}
    assert (rows["train_efficiency"].value, rows["serve_efficiency"].value) == (0.72, 0.61)
    assert "InferenceX" in rows["serve_efficiency"].source
    assert "0.61-0.99" in rows["serve_efficiency"].source
    assert rows["serve_efficiency"].group == "gpu:mi325x"
    assert {a.value for a in vendor_assumptions(gpus["h100-sxm"])} == {1.0}


def test_describe_names_vendor_range_and_source(gpus):
    d = describe(gpus["mi355x"], "serve")
    assert (d["vendor"], d["value"], d["low"], d["high"]) == ("amd", 0.97, 0.68, 0.99)
    assert "InferenceX" in str(d["source"]) and d["as_of"]
    d = describe(gpus["mi355x"], "train")
    assert (d["vendor"], d["value"]) == ("amd", 0.72) and "MLPerf" in str(d["source"])


@pytest.mark.parametrize(
    ("args", "kind", "value"),
    [
        (["serve", "--model", "llama-2-7b", "--gpu", "mi300x", "--gpus", "1",
          "--precision", "fp16", "--prompt", "512", "--output", "128", "--batch", "8"],
         "serve", 0.61),
        (["train", "--model", "llama-2-7b", "--gpu", "mi300x", "--gpus", "1",
          "--tokens", "1e9"], "train", 0.72),
        (["serve", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "1",
          "--precision", "fp16", "--prompt", "512", "--output", "128", "--batch", "8"],
         "serve", 1.0),
    ],
)  # fmt: skip
def test_estimate_shows_the_factor_in_text_and_json(args, kind, value):
    runner = CliRunner()
    res = runner.invoke(estimate, [*args, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)["vendor_efficiency"]
    assert d["value"] == value and d["source"]
    res = runner.invoke(estimate, args)
    assert res.exit_code == 0, res.output
    assert "vendor software efficiency" in res.output and f"x {value:g}" in res.output
