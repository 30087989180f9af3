"""Training physics: memory accounting, layouts, scaling losses and infeasibility reasons."""

from __future__ import annotations

import time

import pytest

from planner.physics.calibration.values import default_calibration
from planner.physics.realized import goodput
from planner.physics.train import (
    TrainLayout,
    activation_bytes_per_layer,
    estimate_train,
    evaluate_layout,
    flops_per_token,
    llama_like,
    make_gpu,
    train_memory_gb,
)

CAL = default_calibration()
H100 = make_gpu("h100-sxm", "H100 SXM", 80, 3350, 989.4, 1978.9, 900, 5, True, "sxm")
A100 = make_gpu("a100-sxm-80gb", "A100 SXM 80GB", 80, 2039, 312, None, 600, 4, True, "sxm")
RTX4090 = make_gpu(
    "rtx-4090", "RTX 4090", 24, 1008, 165.2, None, 0, 4, False, "pcie", consumer=True
)
L7 = llama_like("llama-2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 32000)
L70 = llama_like("llama-2-70b", 68.98e9, 80, 8192, 64, 8, 28672, 32000)


def test_full_training_states_are_16_bytes_per_param_and_zero_shards_them():
    lay = TrainLayout(tp=1, pp=1, dp=1, zero_stage=0, recompute=True, micro_batch=1)
    mem = train_memory_gb(L7, lay, "full", 4096, 1, CAL)
    states = mem["weights"] + mem["gradients"] + mem["optimizer"]
    assert states == pytest.approx(16 * 6.74e9 / 1e9)
    z3 = train_memory_gb(L7, TrainLayout(1, 1, 8, 3, True, 1), "full", 4096, 1, CAL)
    assert z3["weights"] + z3["gradients"] + z3["optimizer"] == pytest.approx(states / 8)
    z1 = train_memory_gb(L7, TrainLayout(1, 1, 8, 1, True, 1), "full", 4096, 1, CAL)
    assert z1["optimizer"] == pytest.approx(mem["optimizer"] / 8)
    assert z1["gradients"] == pytest.approx(mem["gradients"])


def test_activations_follow_korthikanti_and_recompute_saves_memory():
    # 34 s b h bytes per layer with flash-attention, 2 s b h with full recomputation, / tp
    assert activation_bytes_per_layer(4096, 1, 4096, 1, False) == 34 * 4096 * 4096
    assert activation_bytes_per_layer(4096, 2, 4096, 4, True) == 2 * 4096 * 2 * 4096 / 4
    a = train_memory_gb(L7, TrainLayout(1, 1, 1, 0, False, 1), "full", 4096, 1, CAL)
    b = train_memory_gb(L7, TrainLayout(1, 1, 1, 0, True, 1), "full", 4096, 1, CAL)
    assert b["activations"] < a["activations"] / 5


def test_lora_and_qlora_memory():
    lay = TrainLayout(1, 1, 1, 0, True, 1)
    full = train_memory_gb(L7, lay, "full", 4096, 1, CAL)
    lora = train_memory_gb(L7, lay, "lora", 4096, 1, CAL)
    qlora = train_memory_gb(L7, lay, "qlora", 4096, 1, CAL)
    assert lora["weights"] == pytest.approx(2 * 6.74 + 2 * 0.0674, rel=1e-6)
    assert lora["optimizer"] == pytest.approx(12 * 0.0674, rel=1e-6)
    assert qlora["weights"] < 0.3 * lora["weights"]
    assert sum(qlora.values()) < sum(lora.values()) < sum(full.values())


def test_flops_convention():
    assert flops_per_token(L7, 4096) / flops_per_token(L7, 4096, "lora") > 1.3


def test_small_model_fits_one_gpu_and_hours_are_consistent():
    e = estimate_train(L7, H100, 8, 1e11)
    assert e.fits and e.reason is None and e.layout is not None
    assert e.gpu_hours == pytest.approx(e.wall_hours * 8)
    steady = 1e11 / (e.tokens_per_s_per_gpu * 8) / 3600
    assert e.steady_wall_hours == pytest.approx(steady)
    # Realized: the typical stack's production x goodput on 8 GPUs, and a band around it.
    prof = CAL.realized.stacks.profile("typical")
    assert e.wall_hours == pytest.approx(steady / (prof.production * goodput(8, prof)))
    assert e.wall_hours_p10 < e.wall_hours < e.wall_hours_p90
    assert e.wall_hours_at(0.8) > e.wall_hours
    assert estimate_train(L7, H100, 8, 1e11, stack="first-run").wall_hours > e.wall_hours
    assert (
        estimate_train(L7, H100, 8, 1e11, stack="mature").steady_wall_hours == e.steady_wall_hours
    )
    assert 0.25 < e.mfu < 0.6
    assert e.memory_per_gpu_gb <= 80 * CAL.train.usable_memory_fraction.value
    assert set(e.memory) >= {"weights", "gradients", "optimizer", "activations"}


def test_70b_full_training_infeasible_on_one_node_with_reason():
    e = estimate_train(L70, H100, 8, 1e9)
    assert not e.fits and e.layout is None
    assert "GB per GPU" in e.reason and "80 GB" in e.reason
    assert e.wall_hours == float("inf")
    assert estimate_train(L70, H100, 16, 1e9).fits


def test_qlora_70b_fits_on_4090s_but_full_does_not():
    assert estimate_train(L70, RTX4090, 4, 1e8, method="qlora").fits
    assert not estimate_train(L70, RTX4090, 4, 1e8, method="full").fits
    assert estimate_train(L7, RTX4090, 1, 1e8, method="qlora").fits


def test_tensor_parallel_over_pcie_without_p2p_loses_badly():
    """TP=4 over PCIe without P2P (4090) keeps far less of its TP=1 speed than over NVLink."""

    def keep(gpu):
        one = evaluate_layout(
            L7, gpu, 4, TrainLayout(1, 1, 4, 3, True, 1), "qlora", 2048, 131072, "bf16", CAL
        )
        tp4 = evaluate_layout(
            L7, gpu, 4, TrainLayout(4, 1, 1, 0, True, 1), "qlora", 2048, 131072, "bf16", CAL
        )
        return tp4.tokens_per_s_per_gpu / one.tokens_per_s_per_gpu

    assert keep(H100) > 0.75
    assert keep(RTX4090) < 0.5


def test_more_gpus_scale_sublinearly_across_nodes():
    e8 = estimate_train(L7, H100, 8, 1e10)
    e64 = estimate_train(L7, H100, 64, 1e10)
    assert e64.wall_hours < e8.wall_hours
    assert e64.tokens_per_s_per_gpu <= e8.tokens_per_s_per_gpu * 1.0001


def test_fp8_training_needs_fp8_and_is_faster():
    assert not estimate_train(L7, A100, 8, 1e9, precision="fp8").fits
    assert (
        estimate_train(L7, H100, 8, 1e9, precision="fp8").wall_hours
        < estimate_train(L7, H100, 8, 1e9).wall_hours
    )


def test_max_dp_bounds_the_data_parallel_replicas():
    """A run of one sequence feeds one replica: 8 H100s take a 7B model as TP/PP 8, not DP 8,
    and 24 (no power-of-two TP x PP) have no layout at all, said before any memory figure."""
    free = estimate_train(L7, H100, 8, 1e9)
    one = estimate_train(L7, H100, 8, 1e9, max_dp=1)
    assert free.layout.dp > 1 and one.fits and one.layout.dp == 1
    assert one.layout.tp * one.layout.pp == 8
    none = estimate_train(L7, H100, 24, 1e9, max_dp=1)
    assert not none.fits and "no layout of at most 1 data-parallel replica " in none.reason
    with pytest.raises(ValueError):
        estimate_train(L7, H100, 8, 1e9, max_dp=0)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        estimate_train(L7, H100, 8, 1e9, method="dpo")
    with pytest.raises(ValueError):
        estimate_train(L7, H100, 0, 1e9)


def test_fast_enough_for_the_optimizer():
    gpus = [H100, A100, RTX4090]
    models = [L7, L70]
    t0 = time.perf_counter()
    for g in gpus:
        for m in models:
            for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
                for method in ("full", "lora"):
                    estimate_train(m, g, n, 1e10, method=method, seq_len=4000 + n)  # no cache
    assert time.perf_counter() - t0 < 10
