"""Serving physics: memory, step times, feasibility, and the queueing model against a simulation."""

from __future__ import annotations

import math
import random

import pytest

from planner.physics.calibration.values import default_calibration
from planner.physics.serve import (
    decode_step_s,
    estimate_serve,
    kv_bytes_per_token,
    loaded_latency,
    max_batch,
    prefill_iter_s,
    replica_capacity,
)
from planner.physics.train import llama_like, make_gpu

CAL = default_calibration()
H100 = make_gpu("h100-sxm", "H100 SXM", 80, 3350, 989.4, 1978.9, 900, 5, True, "sxm")
A100 = make_gpu("a100-sxm-80gb", "A100 SXM 80GB", 80, 2039, 312, None, 600, 4, True, "sxm")
RTX4090 = make_gpu(
    "rtx-4090", "RTX 4090", 24, 1008, 165.2, None, 0, 4, False, "pcie", consumer=True
)
L7 = llama_like("llama-2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 32000)
L70 = llama_like("llama-2-70b", 68.98e9, 80, 8192, 64, 8, 28672, 32000)


def test_kv_cache_is_gqa_aware():
    # Llama-2-70B: 80 layers x 8 kv heads x 128 x 2 (K,V) x 2 B = 320 KiB/token, not 2.5 MiB
    assert kv_bytes_per_token(L70, "fp16") == 2 * 80 * 8 * 128 * 2
    assert kv_bytes_per_token(L7, "fp16") == 2 * 32 * 32 * 128 * 2
    assert kv_bytes_per_token(L7, "fp8") == kv_bytes_per_token(L7, "fp16") / 2
    assert kv_bytes_per_token(L7, "int4") == kv_bytes_per_token(L7, "fp16")  # weight-only


def test_70b_needs_several_gpus_and_reason_names_memory():
    e = estimate_serve(L70, RTX4090, 2, "fp16", 512, 128)
    assert not e.fits and "weights" in e.reason and "2x24" in e.reason
    e = estimate_serve(L70, H100, 1, "bf16", 512, 128)
    assert not e.fits and "138.0 GB" in e.reason
    assert estimate_serve(L70, H100, 2, "bf16", 512, 128).fits
    assert estimate_serve(L70, H100, 1, "fp8", 512, 128).fits


def test_fp8_needs_fp8_tensor_cores_and_tp_rules():
    e = estimate_serve(L7, A100, 1, "fp8", 512, 128)
    assert not e.fits and "FP8" in e.reason
    e = estimate_serve(L7, H100, 3, "bf16", 512, 128)
    assert not e.fits and "1, 2, 4 or 8" in e.reason
    e = estimate_serve(L7, H100, 1, "fp4", 512, 128)  # a precision, but no FP4 tensor cores
    assert not e.fits and "FP4" in e.reason
    with pytest.raises(ValueError):
        estimate_serve(L7, H100, 1, "fp6", 512, 128)


def test_batch_default_is_largest_that_fits_and_too_big_is_infeasible():
    e = estimate_serve(L7, H100, 1, "fp16", 1024, 1024)
    top = max_batch(L7, H100, 1, "fp16", 1024, 1024, CAL)
    assert e.fits and e.batch == top
    # 80 GB of HBM are 80 GiB (memory_cap_gb)
    assert e.memory_per_gpu_gb <= 80 * 2**30 / 1e9 * CAL.serve.usable_memory_fraction.value + 1e-9
    big = estimate_serve(L7, H100, 1, "fp16", 1024, 1024, batch=top + 1)
    assert not big.fits and f"at most batch {top}" in big.reason


def test_decode_is_bandwidth_bound_at_batch_1_and_throughput_grows_with_batch():
    t1 = decode_step_s(L7, H100, 1, "fp16", 1, 512, CAL)
    # weights 13.5 GB at ~2.7 TB/s => ~5 ms plus overhead
    assert 0.004 < t1 < 0.009
    tps = [estimate_serve(L7, H100, 1, "fp16", 512, 256, batch=b).tokens_per_s for b in (1, 8, 64)]
    assert tps[0] < tps[1] < tps[2]
    # int4 weights are ~3.5x smaller: batch-1 decode is much faster
    assert decode_step_s(L7, H100, 1, "int4", 1, 512, CAL) < 0.6 * t1


def test_tensor_parallel_over_pcie_without_p2p_costs_more_than_nvlink():
    # per-token all-reduce cost as a share of the decode step
    def tp_penalty(gpu):
        one = decode_step_s(L7, gpu, 1, "fp16", 32, 1024, CAL)
        four = decode_step_s(L7, gpu, 4, "fp16", 32, 1024, CAL)
        return four / (one / 4)

    assert tp_penalty(RTX4090) > tp_penalty(H100)


def test_replica_capacity_meets_slo_and_monotone_in_slo():
    r = replica_capacity(L7, H100, 1, "fp16", 1024, 256, 1000, 100)
    assert r.feasible and r.rate_rps > 0
    assert r.p95_ttft_ms <= 1000 + 1e-6 and r.p95_tpot_ms <= 100 + 1e-6
    tight = replica_capacity(L7, H100, 1, "fp16", 1024, 256, 1000, 30)
    assert tight.rate_rps < r.rate_rps
    assert r.tokens_per_s == pytest.approx(r.rate_rps * 256)
    impossible = replica_capacity(L7, H100, 1, "fp16", 1024, 256, 1000, 1)
    assert not impossible.feasible and "SLO" in impossible.reason
    no_mem = replica_capacity(L70, RTX4090, 1, "fp16", 1024, 256, 1000, 100)
    assert not no_mem.feasible and "weights" in no_mem.reason


# ---------------------------------------------------------------- discrete-event simulation


def simulate(model, gpu, tp, precision, prompt, output, batch, rate, n_requests, seed):
    """Continuous batching under Poisson arrivals, the scheduler the analytical model assumes.

    At each iteration boundary: if requests wait and slots are free, one prefill iteration admits
    them all (their first tokens); otherwise one decode step for every running request (step time
    from the running count and their mean context); idle until the next arrival when empty.
    Returns (p95 TTFT s, p95 TPOT s) over the requests after a 10% warm-up; TPOT per request is
    (last token - first token) / (output - 1), as serving benchmarks report it.
    """
    rng = random.Random(seed)
    arrivals = []
    t = 0.0
    for _ in range(n_requests):
        t += rng.expovariate(rate)
        arrivals.append(t)
    d = output - 1
    now, nxt = 0.0, 0
    waiting: list[int] = []
    running: list[list] = []  # [request id, first-token time, tokens done]
    ttft = [0.0] * n_requests
    tpot = [0.0] * n_requests
    done = 0
    while done < n_requests:
        while nxt < n_requests and arrivals[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        free = batch - len(running)
        if waiting and free > 0:
            admit, waiting = waiting[:free], waiting[free:]
            now += prefill_iter_s(model, gpu, tp, precision, len(admit), prompt, CAL)
            for i in admit:
                ttft[i] = now - arrivals[i]
                if d == 0:
                    done += 1
                else:
                    running.append([i, now, 0])
        elif running:
            ctx = prompt + sum(r[2] for r in running) / len(running)
            now += decode_step_s(model, gpu, tp, precision, len(running), ctx, CAL)
            still = []
            for r in running:
                r[2] += 1
                if r[2] >= d:
                    tpot[r[0]] = (now - r[1]) / d
                    done += 1
                else:
                    still.append(r)
            running = still
        else:
            now = arrivals[nxt]
    warm = n_requests // 10

    def q95(xs):
        xs = sorted(xs[warm:])
        return xs[int(0.95 * (len(xs) - 1))]

    return q95(ttft), q95(tpot)


def max_stable_rate(model, gpu, tp, prec, prompt, output, batch):
    lo, hi = 1e-3, 1000.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if loaded_latency(model, gpu, tp, prec, prompt, output, batch, mid, CAL).stable:
            lo = mid
        else:
            hi = mid
    return lo


@pytest.mark.parametrize(
    "model,gpu,tp,prec,prompt,output,load",
    [
        (L7, H100, 1, "fp16", 1024, 128, 0.5),
        (L7, H100, 1, "fp16", 256, 256, 0.8),
        (L7, RTX4090, 2, "fp16", 512, 128, 0.8),
        (L70, H100, 4, "bf16", 2048, 256, 0.5),
    ],
)
def test_analytical_p95_matches_simulation(model, gpu, tp, prec, prompt, output, load):
    """At 50-80% of the model's highest stable rate, the analytical p95 TTFT is within 15% and
    the p95 TPOT within 20% of a seeded 2,500-request simulation of the same scheduler.
    (Measured while writing: within 5% / 12%; nearer saturation (90%) the model is optimistic by
    up to ~20% for both on Llama-2-70B, reported to the lead.)"""
    batch = min(max_batch(model, gpu, tp, prec, prompt, output, CAL), 256)
    rate = load * max_stable_rate(model, gpu, tp, prec, prompt, output, batch)
    ana = loaded_latency(model, gpu, tp, prec, prompt, output, batch, rate, CAL)
    sim_ttft, sim_tpot = simulate(model, gpu, tp, prec, prompt, output, batch, rate, 2500, 7)
    print(
        f"\n{model.id} {gpu.id} tp{tp} {prompt}/{output} at {rate:.2f} req/s: p95 TTFT ana "
        f"{ana.p95_ttft_s * 1e3:.1f} sim {sim_ttft * 1e3:.1f} ms; p95 TPOT ana "
        f"{ana.p95_tpot_s * 1e3:.2f} sim {sim_tpot * 1e3:.2f} ms"
    )
    assert math.isfinite(ana.p95_ttft_s)
    assert ana.p95_ttft_s == pytest.approx(sim_ttft, rel=0.15)
    assert ana.p95_tpot_s == pytest.approx(sim_tpot, rel=0.20)


def test_capacity_rate_is_confirmed_by_simulation():
    """At the rate replica_capacity reports, the simulated p95s stay near the SLO."""
    r = replica_capacity(L7, H100, 1, "fp16", 1024, 128, 200, 25)
    assert r.feasible
    sim_ttft, sim_tpot = simulate(L7, H100, 1, "fp16", 1024, 128, r.batch, r.rate_rps, 2500, 3)
    assert sim_ttft <= 200 * 1.15e-3 and sim_tpot <= 25 * 1.2e-3
