"""Serving at scale (planner/physics/serving): workers, disaggregation, MTP, the CLI."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.inputs.catalog import load_gpus, load_models
from planner.physics.calibration.values import default_calibration
from planner.physics.serve import estimate_serve, replica_capacity
from planner.physics.serving import (
    Deployment,
    Worker,
    WorkerPhysics,
    accepted_tokens,
    candidate_deployments,
    deployment_capacity,
    estimate_deployment,
    gpus_error,
    parse_worker,
)
from planner.physics.serving.constants import const

CAL = default_calibration()
MODELS = load_models()
GPUS = load_gpus()
R1 = MODELS["deepseek-r1"]
B200, GB200, H100 = GPUS["b200"], GPUS["gb200"], GPUS["h100-sxm"]


def test_labels_round_trip_and_bad_specs_say_what_is_allowed():
    d = Deployment(Worker(32, "dep"), Worker(4, "dep", 4), mtp=True)
    assert d.label() == "4x4:dep+1x32:dep mtp" and d.total_gpus == 48 and d.disaggregated
    assert Deployment.from_label(d.label()) == d
    assert Deployment.from_label("1x8:tp") == Deployment(Worker(8, "tp"))
    assert Deployment(Worker(8, "tp"), mtp=True, mtp_draft=3).label() == "1x8:tp mtp3"
    assert d.to_dict()["prefill"] == {"count": 4, "gpus": 4, "mode": "dep"}
    with pytest.raises(ValueError, match="tp\\|ep\\|dep"):
        parse_worker("4x4")
    with pytest.raises(ValueError, match="mode must be one of"):
        parse_worker("4x4:xx")


def test_which_worker_sizes_can_be_built():
    assert gpus_error(B200, 8, CAL) is None and gpus_error(B200, 16, CAL) is None
    assert gpus_error(B200, 12, CAL) is None  # 8 + 4 over the fabric
    assert "cannot be built" in gpus_error(B200, 3, CAL)
    assert gpus_error(GB200, 72, CAL) is None and gpus_error(GB200, 36, CAL) is None
    assert "cannot be built" in gpus_error(GPUS["rtx-4090"], 16, CAL)


def test_todays_replicas_are_todays_physics_exactly():
    for g, mode in ((8, "tp"), (8, "ep"), (4, "tp")):
        old = estimate_serve(R1, B200, g, "fp4", 1024, 1024, 64, CAL.model_copy(
            update={"moe_layout": mode}))  # fmt: skip
        new = estimate_deployment(R1, B200, Deployment(Worker(g, mode)), "fp4", 1024, 1024, 64)
        assert new.tokens_per_s == pytest.approx(old.tokens_per_s, rel=1e-12)
        assert new.tpot_ms == pytest.approx(old.tpot_ms, rel=1e-12)
        assert new.layout == f"1x{g}:{mode}" and new.gpus == g
    old = replica_capacity(R1, B200, 8, "fp4", 1024, 1024, 2000, 50, CAL, layout="ep")
    new = deployment_capacity(R1, B200, Deployment(Worker(8, "ep", 3)), "fp4", 1024, 1024,
                              2000, 50)  # fmt: skip
    assert new.rate_rps == pytest.approx(3 * old.rate_rps) and new.gpus == 24


def test_all_to_all_by_hand():
    """Dispatch (FP8) + combine (BF16) of 64 tokens per GPU, 8 experts each, over 31 peers of 32
    on NVLink 5 (900 GB/s per direction x a2a_eff) plus two fixed latencies."""
    wp = WorkerPhysics(R1, GB200, Worker(32, "dep"), "fp4", CAL)
    nbytes = 64 * 8 * 7168 * 3 * 31 / 32
    want = 2 * const(CAL, "a2a_latency_us") * 1e-6 + nbytes / (900e9 * const(CAL, "a2a_eff"))
    assert wp.a2a_s(64) == pytest.approx(want)
    # across HGX servers the peers outside the server are reached at the NIC's 50 GB/s
    wide = WorkerPhysics(R1, B200, Worker(16, "dep"), "fp4", CAL)
    assert wide.a2a_s(64) > WorkerPhysics(R1, B200, Worker(8, "dep"), "fp4", CAL).a2a_s(64)


def test_mtp_acceptance_by_hand():
    assert accepted_tokens(0, 0.9, 0.7) == 1.0
    assert accepted_tokens(1, 0.9, 0.7) == pytest.approx(1.9)
    assert accepted_tokens(2, 0.9, 0.7) == pytest.approx(1.9 + 0.9 * 0.63)


def test_data_parallel_attention_imbalance():
    wp = WorkerPhysics(R1, GB200, Worker(32, "dep"), "fp4", CAL)
    assert wp.ranks_busiest(0) == 0 and wp.ranks_busiest(1) == 1
    busy = wp.ranks_busiest(32 * 16)
    assert 16 < busy < 16 * 2
    assert WorkerPhysics(R1, GB200, Worker(8, "ep"), "fp4", CAL).ranks_busiest(100) == 100
    # an ep worker beyond a server: tensor-parallel attention per 8 GPUs, data-parallel across
    ep32 = WorkerPhysics(R1, GB200, Worker(32, "ep"), "fp4", CAL)
    assert (ep32.attn_group, ep32.ranks) == (8, 4) and 25 < ep32.ranks_busiest(100) < 100


@pytest.mark.parametrize("gpu", ["gb200", "b200"])
def test_more_gpus_never_less_throughput_at_fixed_batch_per_gpu(gpu):
    g_ = GPUS[gpu]
    for mode in ("tp", "ep", "dep"):  # across servers too (tp: pipeline stages between them)
        last = 0.0
        for size in (8, 16, 32, 64):
            d = Deployment(Worker(size, mode))
            e = estimate_deployment(R1, g_, d, "fp4", 1024, 1024, 16 * size)
            assert e.fits and e.tokens_per_s >= last * 0.999, (mode, size)
            last = e.tokens_per_s
    g = GPUS[gpu]
    last = 0.0
    for size in (8, 16, 32, 72) if gpu == "gb200" else (8, 16, 32):
        e = estimate_deployment(R1, g, Deployment(Worker(size, "dep")), "fp4", 1024, 1024,
                                32 * size)  # fmt: skip
        assert e.fits and e.tokens_per_s >= last
        last = e.tokens_per_s
    for w in (1, 2, 4):  # more workers of one size: proportional
        e = estimate_deployment(R1, g, Deployment(Worker(8, "dep", w)), "fp4", 1024, 1024,
                                256 * w)  # fmt: skip
        assert e.tokens_per_s >= last * 0 and e.gpus == 8 * w


@pytest.mark.parametrize("label", ["1x8:tp", "1x8:ep", "1x8:dep", "1x32:dep", "1x4:dep+1x16:dep"])
def test_mtp_never_slower_at_batch_1(label):
    gpu = GB200 if "32" in label else B200
    off = estimate_deployment(R1, gpu, Deployment.from_label(label), "fp4", 1024, 1024, 1)
    on = estimate_deployment(R1, gpu, Deployment.from_label(label + " mtp"), "fp4", 1024, 1024, 1)
    assert on.fits and on.tpot_ms < off.tpot_ms and on.tokens_per_s > off.tokens_per_s
    # ~1.5-3x at batch 1 (TensorRT-LLM B200 min latency: 9 ms -> 3.5 ms with 3 drafts)
    assert 1.4 < off.tpot_ms / on.tpot_ms < 3.0


def test_a_model_without_mtp_layers_drafts_with_a_one_layer_head():
    llama = MODELS["llama-3-70b"]
    off = estimate_deployment(llama, H100, Deployment(Worker(8, "tp")), "fp8", 512, 256, 1)
    on = estimate_deployment(llama, H100, Deployment(Worker(8, "tp"), mtp=True), "fp8", 512, 256, 1)
    assert on.fits and on.tpot_ms < off.tpot_ms
    # plans only try MTP where the model has the layers
    assert candidate_deployments(llama, H100, "fp8", 512, 256, mtp=True) == []


def _per_gpu_at_tpot(gpu, dep, tpot_ms):
    """Highest output tokens/s per GPU of ``dep`` with TPOT within ``tpot_ms`` (over C)."""
    lo, hi, best = 1, 1, 0.0
    while hi < 100_000:
        e = estimate_deployment(R1, gpu, dep, "fp4", 1024, 1024, hi)
        if not e.fits or e.tpot_ms > tpot_ms:
            break
        best, lo, hi = e.tokens_per_s / e.gpus, hi, hi * 2
    while hi - lo > max(1, lo // 50):
        mid = (lo + hi) // 2
        e = estimate_deployment(R1, gpu, dep, "fp4", 1024, 1024, mid)
        if e.fits and e.tpot_ms <= tpot_ms:
            best, lo = max(best, e.tokens_per_s / e.gpus), mid
        else:
            hi = mid
    return best


def test_disaggregated_nvl72_beats_aggregated_b200_per_gpu_at_the_same_interactivity():
    """InferenceX DeepSeek-R1 FP4 1k/1k: disaggregated GB200 NVL72 well above aggregated B200
    per GPU at the same tokens/s per user (here 50: TPOT 20 ms)."""
    b200 = max(_per_gpu_at_tpot(B200, Deployment(Worker(8, m)), 20) for m in ("tp", "ep", "dep"))
    gb200 = max(
        _per_gpu_at_tpot(GB200, d, 20)
        for d in candidate_deployments(R1, GB200, "fp4", 1024, 1024, disaggregated=True, mtp=False)
    )
    assert gb200 > 1.3 * b200 > 0


def test_deepseek_r1_fp8_fits_four_b200():
    e = estimate_serve(R1, B200, 4, "fp8", 1024, 1024)
    assert e.fits and e.batch >= 16
    d = estimate_deployment(R1, B200, Deployment(Worker(4, "tp")), "fp8", 1024, 1024, 16)
    assert d.fits


def test_amd_generations_have_their_own_serving_factor():
    from planner.physics.vendor import serve_efficiency

    mi300, mi355 = serve_efficiency(GPUS["mi300x"]), serve_efficiency(GPUS["mi355x"])
    assert mi300 < 0.81 < mi355
    # a problem file's override still wins
    own = GPUS["mi300x"].model_copy(update={"serve_efficiency": GPUS["mi300x"].serve_efficiency
                                            .model_copy(update={"value": 0.5})})  # fmt: skip
    assert serve_efficiency(own) == 0.5


def test_disaggregated_capacity_within_slo_and_prefill_sized():
    d = Deployment(Worker(32, "dep"), Worker(4, "dep", 4))
    c = deployment_capacity(R1, GB200, d, "fp4", 1024, 1024, 2000, 30)
    assert c.feasible and c.gpus == 48 and c.layout == d.label()
    assert c.p95_ttft_ms <= 2000 + 1e-6 and c.p95_tpot_ms <= 30 + 1e-6
    more = deployment_capacity(R1, GB200, Deployment(Worker(32, "dep"), Worker(4, "dep", 8)),
                               "fp4", 1024, 1024, 2000, 30)  # fmt: skip
    assert more.rate_rps >= c.rate_rps
    tight = deployment_capacity(R1, GB200, d, "fp4", 1024, 1024, 1, 30)
    assert not tight.feasible and "TTFT" in tight.reason


def test_candidates_are_bounded_and_span_the_layouts():
    for gpu in (B200, GB200, H100):
        prec = "fp8" if gpu is H100 else "fp4"
        cands = candidate_deployments(R1, gpu, prec, 1024, 1024)
        assert 0 < len(cands) <= 16
        assert any(not c.disaggregated for c in cands) and any(c.disaggregated for c in cands)
        assert any(c.mtp for c in cands)
        for c in cands:
            assert estimate_deployment(R1, gpu, c, prec, 1024, 1024, 8).fits, c.label()
    gb = candidate_deployments(R1, GB200, "fp4", 1024, 1024, mtp=False)
    assert any(c.decode.gpus >= 32 for c in gb)
    assert all(not c.disaggregated for c in candidate_deployments(
        R1, GB200, "fp4", 1024, 1024, disaggregated=False))  # fmt: skip


def _serve(*args):
    return CliRunner().invoke(cli, ["estimate", "serve", "--model", "deepseek-r1", *args])


def test_cli_disaggregated_and_wide_workers():
    r = _serve("--gpu", "gb200", "--precision", "fp4", "--prompt", "1024", "--output", "1024",
               "--batch", "1024", "--prefill", "4x4:dep", "--decode", "1x32:dep", "--mtp",
               "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["gpus"] == 48 and d["layout"] == "4x4:dep+1x32:dep mtp"
    assert d["tokens_per_s"] > 0 and d["tpot_ms"] > 0 and d["ttft_ms"] > 0
    r = _serve("--gpu", "gb200", "--precision", "fp4", "--prompt", "1024", "--output", "1024",
               "--batch", "512", "--gpus", "72", "--layout", "dep", "--json")  # fmt: skip
    assert r.exit_code == 0 and json.loads(r.output)["gpus"] == 72


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--prefill", "4x3:dep", "--decode", "1x32:dep"], "multiple of 4"),
        (["--prefill", "4x4:zz", "--decode", "1x32:dep"], "mode must be one of"),
        (["--prefill", "4x4:dep"], "needs --decode"),
        (["--decode", "1x1000:dep"], "cannot be built"),
        (["--gpus", "8", "--decode", "1x8:dep"], "not both"),
    ],
)
def test_cli_bad_specs_exit_2_with_what_is_allowed(args, says):
    r = _serve("--gpu", "gb200", "--precision", "fp4", "--prompt", "1024", "--output", "1024",
               "--batch", "64", *args)  # fmt: skip
    assert r.exit_code == 2 and says in r.output, r.output


def test_cli_too_large_suggests_the_released_precision():
    r = _serve("--gpu", "b200", "--gpus", "4", "--precision", "bf16", "--prompt", "1024",
               "--output", "1024", "--json")  # fmt: skip
    assert r.exit_code == 3
    assert "released in fp8; try --precision fp8" in json.loads(r.output)["reason"]
    assert "--gpus N" in CliRunner().invoke(cli, ["estimate", "serve", "--help"]).output
    assert "multiple of 4" in CliRunner().invoke(cli, ["estimate", "serve", "--help"]).output


def test_workers_memory_dep_splits_the_kv_cache():
    ep = WorkerPhysics(R1, GB200, Worker(8, "ep"), "fp4", CAL)
    dep = WorkerPhysics(R1, GB200, Worker(8, "dep"), "fp4", CAL)
    assert dep.max_batch(1024, 1024) > 4 * ep.max_batch(1024, 1024)
    assert math.isclose(dep.memory_gb(80, 2048, 1024)["kv_cache"] * 8,
                        ep.memory_gb(80, 2048, 1024)["kv_cache"])  # fmt: skip


def test_import_hf_reads_mtp_layers_and_the_released_precision():
    from pathlib import Path

    from planner.inputs.importers.hf_config import model_entry

    fx = Path(__file__).parent / "fixtures" / "hf"
    ds = model_entry(json.loads((fx / "deepseek-v3.json").read_text()), "ds", fx / "x.json")
    assert ds["num_nextn_predict_layers"] == 1 and ds["released_precision"] == "fp8"
    k2 = model_entry(json.loads((fx / "kimi-k2.json").read_text()), "k2", fx / "x.json")
    assert "num_nextn_predict_layers" not in k2 and k2["released_precision"] == "fp8"
    oss = model_entry(json.loads((fx / "gpt-oss-120b.json").read_text()), "o", fx / "x.json")
    assert oss["released_precision"] == "fp4"
    assert R1.num_nextn_predict_layers == 1 and R1.released_precision == "fp8"


def test_kv_transfer_by_hand():
    """DeepSeek-R1 FP8, 1,024 prompt tokens: 61 layers x 576 latent x 1 B per token = 35.98 MB;
    inside one NVL72 rack over NVLink (900 GB/s per direction x kv_transfer_eff), else one
    GPU's 50 GB/s NIC; plus the fixed kv_transfer_ms."""
    from planner.physics.serving import kv_transfer_s

    nbytes = 1024 * 61 * 576
    fixed = const(CAL, "kv_transfer_ms") * 1e-3
    eff = const(CAL, "kv_transfer_eff")
    rack = Deployment(Worker(32, "dep"), Worker(4, "dep", 4))
    assert kv_transfer_s(R1, GB200, rack, "fp8", 1024, CAL) == pytest.approx(
        fixed + nbytes / (900e9 * eff)
    )
    hgx = Deployment(Worker(16, "dep"), Worker(8, "dep", 2))
    assert kv_transfer_s(R1, B200, hgx, "fp8", 1024, CAL) == pytest.approx(
        fixed + nbytes / (50e9 * eff)
    )


def test_concurrency_beyond_the_kv_cache_waits_instead_of_refusing():
    d = Deployment(Worker(8, "ep"))
    top = WorkerPhysics(R1, B200, d.decode, "fp4", CAL).max_batch(1024, 1024)
    at = estimate_deployment(R1, B200, d, "fp4", 1024, 1024, top)
    over = estimate_deployment(R1, B200, d, "fp4", 1024, 1024, 3 * top)
    assert over.fits and over.tokens_per_s == pytest.approx(at.tokens_per_s)
    assert over.ttft_ms > 10 * at.ttft_ms


def test_dep_decode_step_by_hand():
    """GB200 1x8:dep, DeepSeek-R1 FP4, 64 sequences of 1,536 tokens, no MTP: the busiest of 8
    ranks holds 8 + 0.5 sqrt(8 x 2 ln 8) sequences; it reads the replicated non-expert weights,
    its whole experts touched, and its KV cache; the all-to-all of its tokens is 30 % exposed."""
    from planner.physics.moe import (
        attn_flops_per_token,
        compute_params,
        ep_routed_params_read,
        expert_params,
        kv_bytes_per_token,
    )

    s = CAL.serve
    wp = WorkerPhysics(R1, GB200, Worker(8, "dep"), "fp4", CAL)
    n, ctx = 64, 1536
    busy = 8 + const(CAL, "dp_imbalance") * math.sqrt(8 * 2 * math.log(8))
    assert wp.ranks_busiest(n) == pytest.approx(busy)
    ne = R1.params - expert_params(R1)
    wbw = 8000e9 * s.weight_bw_eff.value
    weights = (ne + ep_routed_params_read(R1, n, 8) / s.moe_ep_bw_eff.value) * 0.5625 / wbw
    kv = busy * ctx * kv_bytes_per_token(R1, "fp4", ctx) / (8000e9 * s.kv_bw_eff.value)
    fp4 = 10000e12 * s.fp8_compute_factor.value
    fp8 = 5000e12 * s.fp8_compute_factor.value
    eff = s.decode_compute_eff.value * const(CAL, "wide_compute_eff")
    flops = (
        busy * (2 * ne + attn_flops_per_token(R1, ctx) * fp4 / fp8)
        + n * 2 * (compute_params(R1) - ne) / 8
    )
    comm = R1.moe_layers * wp.a2a_s(busy) * (1 - const(CAL, "a2a_overlap"))
    fixed = R1.layers * s.layer_overhead_us.value * 1e-6 + R1.moe_layers * (
        s.moe_layer_overhead_us.value * 1e-6
    )
    want = max(weights + kv, flops / (fp4 * eff)) + comm + fixed
    assert wp.decode_step_s(n, ctx) == pytest.approx(want, rel=1e-9)


# ----------------------------------------------------------------------------- CLI sweep fixes
# (benchmarks/serving_cli_sweep.py: the external check's calls over a broad grid)


def _est(*args):
    r = CliRunner().invoke(cli, ["estimate", "serve", *args, "--prompt", "1024", "--output",
                                 "1024", "--json"])  # fmt: skip
    return r, (json.loads(r.stdout) if r.exit_code in (0, 3) else None)


def test_cli_one_server_replica_layout_is_a_label_like_every_deployment():
    r, d = _est("--model", "deepseek-r1", "--gpu", "h200-sxm", "--precision", "fp8",
                "--gpus", "8", "--layout", "tp", "--batch", "64")  # fmt: skip
    assert r.exit_code == 0 and d["layout"] == "1x8:tp" and d["gpus"] == 8


def test_cli_batch_beyond_kv_slots_waits_instead_of_refusing():
    """A closed loop of more requests than the KV cache holds runs (the rest wait for a slot):
    DeepSeek-R1 FP8 on 4 x B200 at 64 concurrent requests was refused ('at most batch 58')."""
    args = ("--model", "deepseek-r1", "--gpu", "b200", "--precision", "fp8", "--gpus", "4",
            "--layout", "tp")  # fmt: skip
    r, full = _est(*args)
    top = full["batch"]
    r, at_top = _est(*args, "--batch", str(top))
    r, over = _est(*args, "--batch", str(top + 6))
    assert r.exit_code == 0 and over["fits"] and over["layout"] == "1x4:tp"
    assert over["tokens_per_s"] == pytest.approx(at_top["tokens_per_s"], rel=1e-6)
    assert over["tpot_ms"] == pytest.approx(at_top["tpot_ms"], rel=1e-6)
    assert over["ttft_ms"] > at_top["ttft_ms"]  # the 6 waiting requests


def test_legacy_batch_refusal_names_the_usable_memory():
    e = estimate_serve(R1, B200, 4, "fp8", 1024, 1024, batch=10_000)
    assert not e.fits and "usable of 180 GB" in e.reason
    need = float(e.reason.split("needs ")[1].split(" GB")[0])
    cap = float(e.reason.split("> ")[1].split(" GB")[0])
    assert need > cap


def test_cli_fp4_on_a_gpu_without_fp4_cores_is_weight_only():
    """gpt-oss (MXFP4) on H100 runs in practice (dequantized GEMMs): estimated as int4, not
    refused."""
    r, d = _est("--model", "gpt-oss-120b", "--gpu", "h100-sxm", "--precision", "fp4",
                "--gpus", "1", "--batch", "64")  # fmt: skip
    assert r.exit_code == 0 and d["fits"] and d["precision"] == "int4"
    assert "weight-only" in r.stderr
