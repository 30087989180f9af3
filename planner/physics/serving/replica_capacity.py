"""Loaded latency and capacity of today's replica (split from :mod:`planner.physics.serve`,
which re-exports every name): p95 TTFT and TPOT under Poisson arrivals and the highest rate within
an SLO. The queueing arithmetic lives in :mod:`planner.physics.serve_queueing`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.serve_queueing import (
    LoadedLatency,
    _arrival_iterations,
    _p95_residual_s,
    _p95_tpot,
    _residual_tail,
    _slot_wait_s,
    _steady_state,
)

# re-exported: the queueing tails were public names of this module before the split
from planner.physics.serve_queueing import erlang_c as erlang_c
from planner.physics.serve_queueing import poisson_quantile as poisson_quantile
from planner.physics.serve_weights import (
    FP4_BYTES_PER_PARAM as FP4_BYTES_PER_PARAM,
)
from planner.physics.serve_weights import PRECISIONS as PRECISIONS
from planner.physics.serve_weights import moe_factors as moe_factors
from planner.physics.serve_weights import weight_bw as weight_bw
from planner.physics.serve_weights import weight_bytes_per_param as weight_bytes_per_param
from planner.physics.serve_weights import weight_read_s as weight_read_s
from planner.physics.serve_weights import with_layout as with_layout
from planner.physics.serving.replica import (
    ReplicaCapacity,
    _check,
    _decode_coeffs,
    _layout,
    ep_possible,
    estimate_serve,
    max_batch,
    prefill_iter_s,
)
from planner.physics.vendor import serve_efficiency

# ----------------------------------------------------------------------------- loaded latency


def loaded_latency(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int,
    rate: float,
    calib: Calibration,
) -> LoadedLatency:
    """p95 TTFT and TPOT of a continuous-batching replica under Poisson arrivals (rate req/s).

    The engine alternates *prefill iterations* (every waiting request at once: ``P = F + k S1``,
    F = one weight read + overheads, S1 = one prompt's compute) and *decode steps* ``t_d(n)``.
    Model (checked against a discrete-event simulation in ``tests/test_physics_serve.py``):

    * Prompts per prefill k: the arrivals during the previous iteration given at least one,
      ``k = E[Poisson(lam X) | >= 1]`` with X the decode step (or the previous prefill, with the
      probability of a prefill following a prefill, a two-state Markov chain).
    * Work conservation: the GPU spends ``rho_p = lam (S1 + F / k)`` of its time prefilling; decodes
      advance only in the rest, so ``TPOT = t_d(n) / (1 - rho_p)``, and Little's law gives the
      running batch ``n = lam (output-1) TPOT`` (fixed point). ``rho_p >= 1``, no fixed point or
      ``n >= batch`` (slots exhausted) is unstable; so is a 95% point of the running batch
      (below) above the slot count, which keeps the rate out of the slot-saturation regime where
      the simulation shows TTFT exploding.
    * p95 TPOT: over a request's life ``T = (output-1) TPOT`` both the batch it decodes with and
      the number of prefills that stall it are Poisson with means ``n`` and ``r_P T`` (r_P =
      prefill iterations per second); taken at their 95% points together (they are positively
      correlated: both count the same arrivals), ``(d t_d(n95) + stalls95 P) / d``.
    * p95 TTFT: ``F + S1 + q`` where q is the 95% point of ``U X + S1 A``: the residual of the
      iteration the request arrives in (length-biased mixture: prefills of k = 1, 2, ... prompts,
      decode steps, idle) plus the prompts prefilled with it (A ~ Poisson(lam X)); plus, when
      slots are short, the Erlang-C (M/M/c, c = batch slots, service = T) p95 slot wait
      ``ln(C / 0.05) / (c / T - lam)`` for C > 5%.
    """
    return _loaded(model, gpu, gpus, precision, prompt, output, batch, rate, calib)[0]


_UNSTABLE = LoadedLatency(False, math.inf, math.inf, math.inf, math.inf, 1.0)


def _decode_step_fn(
    model: ModelArch, gpu: GpuSpec, tp: int, precision: str, context: float, calib: Calibration
) -> Callable[[float], float]:
    """``decode_step_s(..., n, context, ...)`` as a function of the running batch n alone.

    The fixed point evaluates it hundreds of times per rate, so the coefficients are computed once.
    """
    cw, ckv, cfl, ccomm, cfix = _decode_coeffs(model, gpu, tp, precision, context, calib)
    eff = serve_efficiency(gpu)  # the vendor's: every step takes 1/eff as long (NVIDIA 1)
    if model.moe is not None:
        # the weights read grow with the batch (more experts touched): not a constant

        def moe_step(nn: float) -> float:
            w = weight_read_s(model, gpu, tp, precision, nn, calib)
            return (max(w + ckv * nn, cfl * nn) + ccomm * nn + cfix) / eff

        return moe_step

    def step(nn: float) -> float:
        return (max(cw + ckv * nn, cfl * nn) + ccomm * nn + cfix) / eff

    return step


def _loaded(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int,
    rate: float,
    calib: Calibration,
    ttft_slo_s: float | None = None,
) -> tuple[LoadedLatency, bool]:
    """:func:`loaded_latency`; with ``ttft_slo_s`` the TTFT tail is only tested against it
    (one tail evaluation instead of a bisection; ``p95_ttft_s`` is then the SLO or inf) and the
    flag says whether p95 TTFT <= SLO."""
    d = output - 1
    f = prefill_iter_s(model, gpu, gpus, precision, 0, prompt, calib)
    s1 = prefill_iter_s(model, gpu, gpus, precision, 1, prompt, calib) - f  # incl. TP all-reduces
    step = _decode_step_fn(model, gpu, gpus, precision, prompt + d / 2, calib)
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
        ttft = ttft_slo_s if good else math.inf
        return LoadedLatency(True, ttft, p95_tpot, st.tpot, st.n, st.rho_p), good
    ttft = f + s1 + _p95_residual_s(st, lengths, weights, rate, s1) + slot_wait
    return LoadedLatency(True, ttft, p95_tpot, st.tpot, st.n, st.rho_p), True


@dataclass(frozen=True)
class _SloQuery:
    """One replica shape and its SLO: what the rate search evaluates again and again."""

    model: ModelArch
    gpu: GpuSpec
    gpus: int
    precision: str
    prompt: int
    output: int
    calib: Calibration
    slo_ttft_ms: float
    slo_tpot_ms: float

    def loaded(
        self, batch: int, rate: float, ttft_slo_s: float | None = None
    ) -> tuple[LoadedLatency, bool]:
        """:func:`_loaded` for this replica at one batch cap and rate."""
        return _loaded(
            self.model,
            self.gpu,
            self.gpus,
            self.precision,
            self.prompt,
            self.output,
            batch,
            rate,
            self.calib,
            ttft_slo_s,
        )

    def within_slo(self, batch: int, rate: float) -> LoadedLatency | None:
        """The loaded latency if both p95s meet the SLO at this batch cap and rate, else None."""
        r, ttft_ok = self.loaded(batch, rate, self.slo_ttft_ms / 1e3)
        return r if r.stable and ttft_ok and r.p95_tpot_s <= self.slo_tpot_ms / 1e3 else None


def _best_rate(q: _SloQuery, batch: int) -> tuple[float, LoadedLatency | None]:
    """Highest rate within the SLO at this batch cap, by bisection (latency grows with load)."""
    tiny = 1e-6
    first = q.within_slo(batch, tiny)
    if first is None:
        return 0.0, None
    est = estimate_serve(q.model, q.gpu, q.gpus, q.precision, q.prompt, q.output, batch, q.calib)
    lo, hi, at = tiny, est.tokens_per_s / q.output + tiny, first
    for _ in range(8):  # the static-batch throughput is a guess, not a bound: widen it
        r = q.within_slo(batch, hi)
        if r is None:
            break
        lo, at, hi = hi, r, hi * 2
    for _ in range(22):
        mid = 0.5 * (lo + hi)
        r = q.within_slo(batch, mid)
        if r is None:
            hi = mid
        else:
            lo, at = mid, r
    return lo, at


def _unreachable_reason(q: _SloQuery, top: int) -> str:
    """Why no rate at all meets the SLO with ``top`` slots."""
    r0 = q.loaded(top, 1e-6)[0]
    if not r0.stable:
        return (
            f"no stable operating point with at most {top} concurrent requests "
            "(too little memory left for the KV cache)"
        )
    return (
        f"unloaded p95 TTFT {r0.p95_ttft_s * 1e3:.0f} ms / TPOT "
        f"{r0.p95_tpot_s * 1e3:.1f} ms exceed the SLO ({q.slo_ttft_ms:g} / "
        f"{q.slo_tpot_ms:g} ms) even at batch {top}"
    )


def _smallest_cap(q: _SloQuery, top: int, rate: float) -> int:
    """Smallest power-of-two batch cap below ``top`` that sustains ``rate`` (else ``top``).

    A larger cap never lowers capacity here, so the smallest one that still reaches the rate
    commits the least KV memory for the same capacity (one evaluation per candidate).
    """
    b = 1
    while b < top:
        if q.within_slo(b, rate) is not None:
            return b
        b *= 2
    return top


@functools.lru_cache(maxsize=4096)
def _capacity(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    calib: Calibration,
) -> ReplicaCapacity:
    def no(why: str, b: int = 0) -> ReplicaCapacity:
        return ReplicaCapacity(False, why, gpus, precision, b, 0.0, math.inf, math.inf, 0.0)

    reason = _check(model, gpu, gpus, precision, prompt, output, calib)
    if reason is not None:
        return no(reason)
    top = max_batch(model, gpu, gpus, precision, prompt, output, calib)
    q = _SloQuery(model, gpu, gpus, precision, prompt, output, calib, slo_ttft_ms, slo_tpot_ms)
    rate, at = _best_rate(q, top)
    if at is None:
        return no(_unreachable_reason(q, top), top)
    if rate < 1e-3:
        return no(
            f"sustains only {rate:.2g} req/s within the SLO (batch {top}: too little "
            f"memory left for KV cache)",
            top,
        )
    batch = _smallest_cap(q, top, rate)
    at = q.loaded(batch, rate)[0]
    return ReplicaCapacity(
        feasible=True,
        reason=None,
        gpus=gpus,
        precision=precision,
        batch=batch,
        rate_rps=rate,
        p95_ttft_ms=at.p95_ttft_s * 1e3,
        p95_tpot_ms=at.p95_tpot_s * 1e3,
        tokens_per_s=rate * output,
        layout=_layout(model, gpus, calib),
    )


def replica_capacity(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    calib: Calibration | None = None,
    layout: str | None = None,
) -> ReplicaCapacity:
    """Highest Poisson request rate one replica sustains with p95 TTFT and p95 TPOT within the SLO.

    Bisection on the rate (monotone: every latency grows with load) using :func:`loaded_latency`,
    first at the largest batch cap that fits, then the smallest power-of-two cap that reaches 99%
    of that rate (less KV memory committed for the same capacity). Infeasible replicas (memory,
    FP8 support, SLO unreachable even unloaded) return ``feasible=False`` with the reason.
    A mixture of experts on several GPUs is also tried with expert parallelism (whole experts
    per GPU) and the higher rate kept (``layout`` names it; ``layout="tp"`` or ``"ep"`` forces
    one).

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> r = replica_capacity(_toy_model(), _toy_gpu(), 1, "fp16", 512, 256, 500, 50)
    >>> r.feasible, r.p95_ttft_ms <= 500, r.p95_tpot_ms <= 50
    (True, True, True)
    """
    calib = calib or default_calibration()
    args = (model, gpu, gpus, precision, prompt, output, float(slo_ttft_ms), float(slo_tpot_ms))
    if layout is not None:
        return _capacity(*args, with_layout(calib, layout))
    tp = _capacity(*args, calib)
    if not ep_possible(model, gpus):
        return tp
    # a MoE replica is also tried with whole experts per GPU; the higher rate wins
    ep = _capacity(*args, with_layout(calib, "ep"))
    return ep if ep.feasible and (not tp.feasible or ep.rate_rps > tp.rate_rps) else tp
