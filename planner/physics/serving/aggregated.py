"""Aggregated deployments: W workers that each prefill and decode their own requests
(continuous batching, vLLM/SGLang style), the physics of :mod:`planner.physics.serve` per worker
with the worker's mode, size and MTP (:class:`~planner.physics.serving.worker.WorkerPhysics`).

Requests are spread evenly: each worker holds ``C / W`` of the deployment's C concurrent requests
and serves ``rate / W`` of its Poisson arrivals; the deployment's tokens/s and capacity are W times
one worker's. A worker of today's shape (tp/ep, 1-8 GPUs of one server, no MTP) gives exactly the
figures of :func:`planner.physics.serve.estimate_serve` and :func:`~planner.physics.serve.replica_capacity`.
"""

from __future__ import annotations

import math

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration
from planner.physics.serve_queueing import (
    LoadedLatency,
    _arrival_iterations,
    _p95_residual_s,
    _p95_tpot,
    _residual_tail,
    _slot_wait_s,
    _steady_state,
)
from planner.physics.serving.deployment import Deployment
from planner.physics.serving.replica import ReplicaCapacity, ServeEstimate
from planner.physics.serving.replica_capacity import replica_capacity
from planner.physics.serving.worker import WorkerPhysics

_UNSTABLE = LoadedLatency(False, math.inf, math.inf, math.inf, math.inf, 1.0)


def cannot(dep: Deployment, precision: str, batch: int, reason: str, mem=None) -> ServeEstimate:
    """An infeasible estimate of a deployment (the memory it would need when known)."""
    mem = mem or {}
    return ServeEstimate(
        False, reason, dep.total_gpus, precision, batch, 0.0, math.inf, math.inf,
        sum(mem.values()), mem, dep.label(),
    )  # fmt: skip


def no_capacity(dep: Deployment, precision: str, why: str, batch: int = 0) -> ReplicaCapacity:
    return ReplicaCapacity(
        False, why, dep.total_gpus, precision, batch, 0.0, math.inf, math.inf, 0.0, dep.label()
    )


def estimate_aggregated(
    model: ModelArch,
    gpu: GpuSpec,
    dep: Deployment,
    precision: str,
    prompt: int,
    output: int,
    batch: int,
    calib: Calibration,
) -> ServeEstimate:
    """Steady state of W workers holding ``batch`` concurrent requests in all (C/W each).

    Per worker as :func:`planner.physics.serve.estimate_serve`: a request spends its share of a
    prefill iteration of n prompts and ``(output-1) / a`` decode steps, ``a`` the tokens an MTP
    step emits (1 without MTP; the draft length that maximises tokens/s at n):
    ``tokens/s = W n output / (prefill(n) + (output-1)/a x step(n))``.
    """
    wk = dep.decode
    wp = WorkerPhysics(model, gpu, wk, precision, calib, dep.mtp, dep.mtp_draft)
    reason = wp.check(prompt, output)
    if reason is not None:
        return cannot(dep, precision, batch, reason)
    n = batch / wk.count
    top = wp.max_batch(prompt, output)
    running = min(n, top)  # beyond the KV cache's slots, requests wait for one (closed loop)
    d = output - 1
    ctx = prompt + d / 2
    _, acc, step = wp.best_draft(running, ctx)
    t_pre = wp.prefill_iter_s(running, prompt)
    total = t_pre + d / acc * step
    tokens_per_s = wk.count * running * output / total
    ttft = wp.prefill_iter_s(1, prompt)
    if n > running:  # the waiting requests: each waits (n - running) / rate per worker
        ttft += (n - running) * total / running
    mem = wp.memory_gb(math.ceil(running), prompt + output, prompt)
    return ServeEstimate(
        fits=True,
        reason=None,
        gpus=dep.total_gpus,
        precision=precision,
        batch=batch,
        tokens_per_s=tokens_per_s,
        ttft_ms=ttft * 1e3,
        tpot_ms=(total / d if d > 0 else 0.0) * 1e3,
        memory_per_gpu_gb=sum(mem.values()),
        memory=mem,
        layout=dep.label(),
    )


# ----------------------------------------------------------------------------- capacity


def worker_loaded(
    wp: WorkerPhysics,
    prompt: int,
    output: int,
    batch: int,
    rate: float,
    ttft_slo_s: float | None = None,
) -> tuple[LoadedLatency, bool]:
    """:func:`planner.physics.serve.loaded_latency` of one worker (its step functions, MTP
    steps counted per emitted token); with ``ttft_slo_s`` only tests the TTFT tail against it."""
    d = output - 1
    f = wp.prefill_iter_s(0, prompt)
    s1 = wp.prefill_iter_s(1, prompt) - f
    ctx = prompt + d / 2

    def step(nn: float) -> float:
        if d <= 0:  # a prefill-only worker: between prefills it polls for arrivals
            return 1e-4
        _, acc, st = wp.best_draft(nn, ctx)
        return st / acc

    st = _steady_state(rate, d, f, s1, batch, step)
    tpot = None if st is None else _p95_tpot(st, rate, d, batch, step)
    if st is None or tpot is None:
        return _UNSTABLE, False
    p95_tpot, life = tpot
    lengths, weights = _arrival_iterations(st, f, s1)
    slot_wait = _slot_wait_s(batch, rate, life, d)
    if ttft_slo_s is not None:
        y = ttft_slo_s - f - s1 - slot_wait
        good = y >= 0 and _residual_tail(y, lengths, weights, rate, s1) <= 0.05
        return LoadedLatency(True, ttft_slo_s if good else math.inf, p95_tpot, st.tpot, st.n,
                             st.rho_p), good  # fmt: skip
    ttft = f + s1 + _p95_residual_s(st, lengths, weights, rate, s1) + slot_wait
    return LoadedLatency(True, ttft, p95_tpot, st.tpot, st.n, st.rho_p), True


def bisect_rate(ok, hi: float, steps: int = 24) -> float:
    """Largest rate with ``ok(rate)`` true (monotone), starting from ``hi`` as a guess."""
    tiny = 1e-6
    if not ok(tiny):
        return 0.0
    lo = tiny
    hi = max(hi, 2 * tiny)
    for _ in range(30):
        if not ok(hi):
            break
        lo, hi = hi, hi * 2
    else:
        return lo
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def aggregated_capacity(
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
    """W x the highest Poisson rate one worker sustains within the p95 SLOs."""
    wk = dep.decode
    wp = WorkerPhysics(model, gpu, wk, precision, calib, dep.mtp, dep.mtp_draft)
    reason = wp.check(prompt, output)
    if reason is not None:
        return no_capacity(dep, precision, reason)
    if wp.is_legacy and not dep.mtp:
        one = replica_capacity(
            model, gpu, wk.gpus, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib,
            layout="ep" if wp.mode == "ep" else "tp",
        )  # fmt: skip
    else:
        one = _worker_capacity(wp, prompt, output, slo_ttft_ms, slo_tpot_ms)
    if not one.feasible:
        return no_capacity(dep, precision, one.reason or "infeasible", one.batch * wk.count)
    w = wk.count
    return ReplicaCapacity(
        True, None, dep.total_gpus, precision, one.batch * w, one.rate_rps * w,
        one.p95_ttft_ms, one.p95_tpot_ms, one.tokens_per_s * w, dep.label(),
    )  # fmt: skip


def _worker_capacity(
    wp: WorkerPhysics, prompt: int, output: int, slo_ttft_ms: float, slo_tpot_ms: float
) -> ReplicaCapacity:
    top = wp.max_batch(prompt, output)
    p = wp.precision

    def within(batch: int, rate: float) -> LoadedLatency | None:
        r, ok = worker_loaded(wp, prompt, output, batch, rate, slo_ttft_ms / 1e3)
        return r if r.stable and ok and r.p95_tpot_s <= slo_tpot_ms / 1e3 else None

    n_guess = max(1.0, top / 2)
    ctx = prompt + (output - 1) / 2
    _, acc, st = wp.best_draft(n_guess, ctx)
    guess = n_guess * acc / st / output
    rate = bisect_rate(lambda r: within(top, r) is not None, guess)
    if rate < 1e-3:
        r0 = worker_loaded(wp, prompt, output, top, 1e-6)[0]
        why = (
            f"unloaded p95 TTFT {r0.p95_ttft_s * 1e3:.0f} ms / TPOT {r0.p95_tpot_s * 1e3:.1f} ms "
            f"exceed the SLO ({slo_ttft_ms:g} / {slo_tpot_ms:g} ms) even at batch {top}"
            if r0.stable
            else f"no stable operating point with at most {top} concurrent requests"
        )
        return ReplicaCapacity(False, why, wp.g, p, top, 0.0, math.inf, math.inf, 0.0)
    b = 1
    while b < top and within(b, rate) is None:
        b *= 2
    batch = min(b, top)
    at = worker_loaded(wp, prompt, output, batch, rate)[0]
    return ReplicaCapacity(
        True, None, wp.g, p, batch, rate, at.p95_ttft_s * 1e3, at.p95_tpot_s * 1e3, rate * output
    )
