"""Mixture-of-experts, MLA and sliding-window physics: weights read per batch, KV by attention
kind, fp4, and the serving estimate of the models of today."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.inputs.catalog import Sourced, load_gpus, load_models
from planner.physics.calibration.serving_moe import POINTS, predict
from planner.physics.calibration.values import default_calibration
from planner.physics.moe import (
    compute_params,
    experts_touched,
    kv_bytes_per_token,
    kv_share_per_gpu,
    weight_params_read,
)
from planner.physics.serve import decode_step_s, estimate_serve, weight_read_s
from planner.physics.train import llama_like

CAL = default_calibration()
MODELS = load_models()
GPUS = load_gpus()
R1, OSS, MIX = MODELS["deepseek-r1"], MODELS["gpt-oss-120b"], MODELS["mixtral-8x7b"]


def test_experts_touched_grows_from_k_to_all():
    seq = [experts_touched(256, 8, b) for b in (1, 2, 8, 64, 512, 4096)]
    assert seq[0] == pytest.approx(8) and seq == sorted(seq)
    assert 250 < seq[-1] <= 256 and experts_touched(256, 8, 0) == 0


def test_moe_reads_active_weights_at_batch_1_and_nearly_all_at_64():
    one, many = weight_params_read(R1, 1), weight_params_read(R1, 64)
    assert one == pytest.approx(compute_params(R1), rel=1e-9)  # batch 1 reads what it computes
    assert 0.9 * 37e9 < one < 1.1 * 37e9  # DeepSeek's 37B active
    assert many > 0.8 * R1.params and weight_params_read(R1, 1e6) == pytest.approx(R1.params)


def test_dense_model_is_unchanged():
    m = llama_like("l7", 6.74e9, 32, 4096, 32, 32, 11008, 32000)
    assert weight_params_read(m, 1) == compute_params(m) == m.params
    h100 = GPUS["h100-sxm"]
    assert weight_read_s(m, h100, 1, "bf16", 1, CAL) == weight_read_s(m, h100, 1, "bf16", 256, CAL)


def test_kv_by_attention_kind():
    # MLA: one 512 + 64 latent per layer, not 2 x 128 heads x 192
    assert kv_bytes_per_token(R1, "bf16") == 61 * (512 + 64) * 2
    assert kv_share_per_gpu(R1, 8) == 1.0  # the latent is on every tensor-parallel rank
    # gpt-oss: half the layers keep a 128-token window, so long contexts cost half as much
    full = kv_bytes_per_token(OSS, "bf16")
    assert kv_bytes_per_token(OSS, "bf16", 128) == full
    assert kv_bytes_per_token(OSS, "bf16", 131072) == pytest.approx(full / 2, rel=0.01)


def test_step_time_follows_experts_touched():
    h200 = GPUS["h200-sxm"]
    steps = [decode_step_s(R1, h200, 8, "fp8", b, 2000, CAL) for b in (1, 8, 64)]
    assert steps == sorted(steps)
    # a dense model of the same total size would not slow down 2x from batch 1 to 64 ...
    grow = steps[2] / steps[0]
    assert grow > 1.5
    # ... and the cost per token falls steeply with batch (MoE economics)
    assert steps[2] / 64 < steps[0] / 8


def test_deepseek_r1_fits_eight_h200_not_eight_h100():
    e = estimate_serve(R1, GPUS["h100-sxm"], 8, "fp8", 1000, 1000, 8, CAL)
    assert not e.fits and "671.0 GB" in e.reason
    e = estimate_serve(R1, GPUS["h200-sxm"], 8, "fp8", 1000, 1000, 8, CAL)
    assert e.fits and e.tokens_per_s > 0 and e.tpot_ms > 0


def test_fp4_only_where_the_gpu_has_fp4_tensor_cores():
    h100 = GPUS["h100-sxm"]
    e = estimate_serve(OSS, h100, 1, "fp4", 1000, 500, 8, CAL)
    assert not e.fits and "FP4" in e.reason
    fp4 = h100.model_copy(
        update={"fp4_dense_tflops": Sourced(value=3958.0, source="test", as_of="2026")}
    )
    e4 = estimate_serve(OSS, fp4, 1, "fp4", 1000, 500, 8, CAL)
    e8 = estimate_serve(OSS, fp4, 1, "fp8", 1000, 500, 8, CAL)
    assert e4.fits and e4.memory["weights"] < 0.6 * e8.memory["weights"]
    assert e4.tpot_ms < e8.tpot_ms  # fewer bytes to stream per step


def test_calibrated_points_within_30_percent():
    for p in POINTS[:1] + POINTS[4:5]:  # one DeepSeek-R1 and one Qwen3 point: fast
        assert abs(predict(p, CAL) / p.value - 1) < 0.3, p.id


def test_cli_serve_json_and_exit_3():
    args = ["estimate", "serve", "--model", "deepseek-r1", "--precision", "fp8", "--gpus", "8"]
    args += ["--prompt", "1000", "--output", "1000", "--json"]
    r = CliRunner().invoke(cli, [*args, "--gpu", "h100-sxm"])
    assert r.exit_code == 3
    out = {}
    for b in (1, 64):
        r = CliRunner().invoke(cli, [*args, "--gpu", "h200-sxm", "--batch", str(b)])
        assert r.exit_code == 0, r.output
        out[b] = json.loads(r.output)
    assert out[64]["tokens_per_s"] > 4 * out[1]["tokens_per_s"]
    assert out[64]["tpot_ms"] > out[1]["tpot_ms"]
    touched = [out[b]["moe"]["experts_touched_per_layer"] for b in (1, 64)]
    assert touched[0] == pytest.approx(8) and 200 < touched[1] < 256
    read = [out[b]["moe"]["weights_read_per_step_gb_per_gpu"] for b in (1, 64)]
    assert read[1] > 10 * read[0]


# ----------------------------------------------------------------------------- training


def test_training_flops_from_active_parameters():
    from planner.physics.train import flops_per_token

    f = flops_per_token(R1, 4096)
    assert 6 * 36e9 < f < 6 * 40e9 + 61 * 6 * 128 * 320 * 4096 * 1.01  # 37B active, not 671B
    assert flops_per_token(MIX, 4096) < 0.35 * flops_per_token(MODELS["llama-3-70b"], 4096) * (
        46.7 / 12.9
    )


def test_expert_parallelism_shards_expert_memory():
    from planner.physics.train import TrainLayout, train_memory_gb

    def mem(zero: int, ep: int) -> dict[str, float]:
        return train_memory_gb(MIX, TrainLayout(1, 1, 8, zero, True, 1, ep), "full", 4096, 4, CAL)

    # Mixtral is 96 % experts: without ZeRO, EP 8 keeps about 1/8 of every model state per GPU
    one, eight = mem(0, 1), mem(0, 8)
    for kind in ("weights", "gradients", "optimizer"):
        assert eight[kind] < 0.2 * one[kind]
    # ZeRO-2 already shards gradients and optimizer over the 8 data-parallel ranks
    one, eight = mem(2, 1), mem(2, 8)
    assert eight["weights"] < 0.2 * one["weights"]
    assert eight["gradients"] == pytest.approx(one["gradients"])


def test_moe_training_estimate_has_a_wider_band():
    from planner.physics.train import estimate_train

    h100 = GPUS["h100-sxm"]
    moe = estimate_train(MODELS["qwen3-30b-a3b"], h100, 64, 1e11, precision="fp8")
    dense = estimate_train(MODELS["llama-3-8b"], h100, 64, 1e11, precision="fp8")
    assert moe.fits and moe.gpu_hours_p10 < moe.gpu_hours < moe.gpu_hours_p90
    assert moe.gpu_hours_p90 / moe.gpu_hours_p10 > dense.gpu_hours_p90 / dense.gpu_hours_p10
    r = CliRunner().invoke(
        cli,
        ["estimate", "train", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--gpus", "2048",
         "--tokens", "14.8T", "--precision", "fp8", "--json"],
    )  # fmt: skip
    d = json.loads(r.output)
    assert r.exit_code == 0 and d["gpu_hours_p10"] < d["gpu_hours"] < d["gpu_hours_p90"]
    # the published 2.664M H800 GPU-hours lie inside the band
    assert d["gpu_hours_p10"] * 0.95 < 2.664e6 < d["gpu_hours_p90"]


def test_moe_training_factor_in_the_catalog_is_the_fit():
    from planner.physics.calibration.training_moe import leave_one_out

    full, sd, rows = leave_one_out(CAL)
    assert CAL.train.moe_mfu_factor.value == pytest.approx(full, abs=0.005)
    assert CAL.train.moe_log_sd.value == pytest.approx(sd, abs=0.005)
    # leaving a run out moves the factor the other way from what that run implies
    for r in rows:
        assert (r.implied - full) * (r.fitted_others - full) <= 1e-12


# ----------------------------------------------------------------------------- expert parallelism


def test_busiest_gpu_holds_more_than_its_share_until_every_expert_is_touched():
    from planner.physics.moe import ep_max_local_experts

    prev = 0.0
    for b in (1, 4, 16, 64, 256, 4096):
        busiest = ep_max_local_experts(256, 8, b, 8)
        mean = experts_touched(256, 8, b) / 8
        assert mean <= busiest <= 32 and busiest >= prev
        prev = busiest
    assert ep_max_local_experts(256, 8, 1, 8) > 2 * experts_touched(256, 8, 1) / 8
    assert ep_max_local_experts(256, 8, 4096, 8) == pytest.approx(32)


def test_expert_parallelism_wins_at_large_batch_and_capacity_names_it():
    from planner.physics.serve import replica_capacity, with_layout

    h200 = GPUS["h200-sxm"]
    ep = with_layout(CAL, "ep")
    small = [estimate_serve(R1, h200, 8, "fp8", 1000, 1000, 1, c).tpot_ms for c in (CAL, ep)]
    large = [estimate_serve(R1, h200, 8, "fp8", 1000, 1000, 256, c).tpot_ms for c in (CAL, ep)]
    assert small[1] > small[0]  # batch 1: the busiest GPU reads ~3 whole experts, not 1
    assert large[1] < large[0]  # every expert touched: whole experts stream faster
    cap = replica_capacity(R1, h200, 8, "fp8", 2000, 1500, 3000, 50, CAL)
    forced = replica_capacity(R1, h200, 8, "fp8", 2000, 1500, 3000, 50, CAL, layout="tp")
    assert cap.layout in ("tp", "ep") and cap.rate_rps >= forced.rate_rps
    dense = replica_capacity(MODELS["llama-3-70b"], h200, 2, "fp8", 2000, 500, 3000, 50, CAL)
    assert dense.layout == "tp"
    r = CliRunner().invoke(
        cli,
        ["estimate", "serve", "--model", "deepseek-r1", "--gpu", "h200-sxm", "--gpus", "8",
         "--precision", "fp8", "--prompt", "1000", "--output", "1000", "--batch", "256",
         "--json"],
    )  # fmt: skip
    assert r.exit_code == 0 and json.loads(r.output)["layout"] == "1x8:ep"
