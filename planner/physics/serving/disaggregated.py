"""Disaggregated deployments: P prefill workers and D decode workers, the KV cache of each
prompt sent from the prefill worker to a decode worker over the fabric (NVIDIA Dynamo, SGLang PD,
llm-d, AMD MoRI).

* **Prefill pool**: each worker prefills ``prefill_chunk_tokens`` per attention rank per
  iteration; under Poisson arrivals (rate / P per worker) it is a batching server whose p95
  TTFT comes from the continuous-batching model of :mod:`planner.physics.serve` with no decode
  (:func:`planner.physics.serving.aggregated.worker_loaded` at one output token).
* **KV transfer**: ``prompt x kv_bytes_per_token`` per request at the fabric's per-GPU bandwidth
  x ``kv_transfer_eff`` (NVLink when the whole deployment sits in one scale-up domain, e.g. an
  NVL72 rack; else the scale-out NIC of one GPU), plus ``kv_transfer_ms``; it adds to TTFT.
* **Decode pool**: each worker runs the decode steps of its running batch ``n`` (Little:
  ``n = rate / D x (output-1) x TPOT``), no prefill stalls; TPOT = step(n) / a (MTP).
  p95 TPOT at the 95 % point of the batch, ``n + 1.645 sqrt(n)``, which must fit the KV cache.

At a fixed concurrency C (a closed loop, as benchmarks run), the rate is
``C / (TTFT + (output-1) TPOT)``, capped by the prefill pool's throughput (the excess waits
for prefill, so TTFT grows).
"""

from __future__ import annotations

import math

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration
from planner.physics.moe import kv_bytes_per_token
from planner.physics.serving.aggregated import bisect_rate, cannot, no_capacity, worker_loaded
from planner.physics.serving.constants import const
from planner.physics.serving.deployment import Deployment
from planner.physics.serving.replica import ReplicaCapacity, ServeEstimate
from planner.physics.serving.worker import WorkerPhysics, scaleup_domain
from planner.physics.train import GB, inter_node_link


def kv_transfer_s(
    model: ModelArch, gpu: GpuSpec, dep: Deployment, precision: str, prompt: int, calib: Calibration
) -> float:
    """Time to move one prompt's KV cache from its prefill worker to its decode worker (s).

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> from planner.physics.serving.deployment import Worker
    >>> d = Deployment(Worker(1, "tp"), Worker(1, "tp"))
    >>> 0.002 < kv_transfer_s(_toy_model(), _toy_gpu(), d, "fp16", 1024, default_calibration())
    True
    """
    nbytes = prompt * kv_bytes_per_token(model, precision, prompt)
    if dep.total_gpus <= scaleup_domain(gpu, calib) and gpu.interconnect.nvlink_gbs > 0:
        bw = gpu.interconnect.nvlink_gbs / 2
    else:
        bw = inter_node_link(gpu, calib)[0]
        assert dep.prefill is not None
        if dep.prefill.mode == "tp" and model.mla is None:  # K/V heads split over the ranks
            bw *= min(dep.prefill.gpus, dep.decode.gpus, model.kv_heads)
    return const(calib, "kv_transfer_ms") * 1e-3 + nbytes / (
        bw * GB * const(calib, "kv_transfer_eff")
    )


def _pools(model, gpu, dep, precision, calib):
    assert dep.prefill is not None
    pw = WorkerPhysics(model, gpu, dep.prefill, precision, calib, dep.mtp)
    dw = WorkerPhysics(model, gpu, dep.decode, precision, calib, dep.mtp, dep.mtp_draft)
    return pw, dw


def _check(pw: WorkerPhysics, dw: WorkerPhysics, prompt: int, output: int) -> str | None:
    for name, w in (("prefill", pw), ("decode", dw)):
        why = w.check(prompt, output)
        if why is not None:
            return f"{name} worker {w.worker.label()}: {why}"
    return None


def estimate_disaggregated(
    model: ModelArch,
    gpu: GpuSpec,
    dep: Deployment,
    precision: str,
    prompt: int,
    output: int,
    batch: int,
    calib: Calibration,
) -> ServeEstimate:
    """Steady state of the deployment holding ``batch`` concurrent requests (a closed loop)."""
    pw, dw = _pools(model, gpu, dep, precision, calib)
    why = _check(pw, dw, prompt, output)
    if why is not None:
        return cannot(dep, precision, batch, why)
    assert dep.prefill is not None
    p_count, d_count = dep.prefill.count, dep.decode.count
    top = dw.max_batch(prompt, output)  # beyond it, requests wait for a decode slot
    d = max(output - 1, 0)
    ctx = prompt + d / 2
    rate_p, _ = pw.prefill_rate(prompt)
    mu = p_count * rate_p  # prompts/s the prefill pool sustains
    kv = kv_transfer_s(model, gpu, dep, precision, prompt, calib)
    s1 = pw.prefill_iter_s(1, prompt)
    n = batch / d_count
    lam = ttft = tpot = 0.0
    for _ in range(60):
        _, acc, step = dw.best_draft(max(n, 1e-9), ctx)
        tpot = step / acc
        rho = min(lam / mu, 0.999) if mu > 0 else 0.999
        per = lam / p_count
        m = max(1.0, per * s1)
        it = pw.prefill_iter_s(m, prompt)
        ttft = it + rho / (2 * (1 - rho)) * it + kv
        new = batch / (ttft + d * tpot)
        if new > 0.98 * mu:
            new = 0.98 * mu
            ttft = batch / new - d * tpot
        if d > 0 and new * d * tpot > top * d_count:  # decode slots full: the rest wait
            new = top * d_count / (d * tpot)
            ttft = batch / new - d * tpot
        done = abs(new - lam) <= 1e-6 * max(new, 1e-9)
        lam = new
        n = min(batch, lam * d * tpot) / d_count
        if done:
            break
    mem = dw.memory_gb(math.ceil(min(n, top)), prompt + output, prompt)
    return ServeEstimate(
        fits=True,
        reason=None,
        gpus=dep.total_gpus,
        precision=precision,
        batch=batch,
        tokens_per_s=lam * output,
        ttft_ms=ttft * 1e3,
        tpot_ms=tpot * 1e3,
        memory_per_gpu_gb=sum(mem.values()),
        memory=mem,
        layout=dep.label(),
    )


def disaggregated_capacity(
    model: ModelArch,
    gpu: GpuSpec,
    dep: Deployment,
    precision: str,
    prompt: int,
    output: int,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    calib: Calibration,
) -> ReplicaCapacity:
    """Highest Poisson rate with p95 TTFT (prefill queueing + KV transfer) and p95 TPOT
    (decode batch at its 95 % point) within the SLO."""
    pw, dw = _pools(model, gpu, dep, precision, calib)
    why = _check(pw, dw, prompt, output)
    if why is not None:
        return no_capacity(dep, precision, why)
    assert dep.prefill is not None
    p_count, d_count = dep.prefill.count, dep.decode.count
    d = max(output - 1, 0)
    ctx = prompt + d / 2
    top = dw.max_batch(prompt, output)
    kv = kv_transfer_s(model, gpu, dep, precision, prompt, calib)
    p_top = max(1, pw.max_batch(prompt, 1))
    ttft_budget = slo_ttft_ms / 1e3 - kv

    def tpot_at(nn: float) -> float:
        _, acc, st = dw.best_draft(max(nn, 1.0), ctx)
        return st / acc

    def decode_ok(rate: float) -> tuple[bool, float, float]:
        per = rate / d_count
        n = 0.0
        for _ in range(80):
            new = per * d * tpot_at(n)
            if new > 4 * top + 10:
                return False, math.inf, n
            if abs(new - n) < 1e-4 * max(1.0, n):
                n = new
                break
            n = new
        n95 = n + 1.6449 * math.sqrt(n)
        if n95 > top:
            return False, math.inf, n
        t95 = tpot_at(n95)
        return t95 <= slo_tpot_ms / 1e3, t95, n

    def prefill_ok(rate: float) -> bool:
        if ttft_budget <= 0:
            return False
        r, ok = worker_loaded(pw, prompt, 1, p_top, rate / p_count, ttft_budget)
        return r.stable and ok

    rate_p, _ = pw.prefill_rate(prompt)
    guess = p_count * rate_p
    lam_p = bisect_rate(prefill_ok, guess)
    n_guess = max(1.0, top / 2)
    lam_d = bisect_rate(lambda r: decode_ok(r)[0], d_count * n_guess / max(d, 1) / tpot_at(n_guess))
    lam = min(lam_p, lam_d)
    if lam < 1e-3:
        if lam_p < 1e-3:
            r0 = worker_loaded(pw, prompt, 1, p_top, 1e-6)[0]
            why = (
                f"prefill worker {dep.prefill.label()}: unloaded p95 TTFT "
                f"{(r0.p95_ttft_s + kv) * 1e3:.0f} ms (KV transfer included) exceeds "
                f"{slo_ttft_ms:g} ms"
            )
        else:
            why = (
                f"decode worker {dep.decode.label()}: TPOT {tpot_at(1) * 1e3:.1f} ms at batch 1 "
                f"exceeds {slo_tpot_ms:g} ms"
                if tpot_at(1) > slo_tpot_ms / 1e3
                else f"decode worker {dep.decode.label()}: no stable operating point within "
                f"{top} concurrent requests"
            )
        return no_capacity(dep, precision, why, top * d_count)
    r_p = worker_loaded(pw, prompt, 1, p_top, lam / p_count)[0]
    _, t95, n = decode_ok(lam)
    return ReplicaCapacity(
        True, None, dep.total_gpus, precision,
        min(top, math.ceil(n + 1.6449 * math.sqrt(n))) * d_count, lam,
        (r_p.p95_ttft_s + kv) * 1e3, t95 * 1e3, lam * output, dep.label(),
    )  # fmt: skip
