"""Queueing of a continuous-batching replica: Poisson/Erlang tails and the steady state.

Pure arithmetic on times already computed by the serving physics (:mod:`planner.physics.serve`):
a one-prompt prefill ``s1``, the fixed part of a prefill iteration ``f`` and the decode step as a
function of the running batch. From them it finds the operating point (running batch, prompts
per prefill, prefill share of GPU time) and the pieces of the p95 TTFT and TPOT:
:func:`planner.physics.serve.loaded_latency` puts them together and documents the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


def poisson_quantile(mean: float, q: float = 0.95) -> float:
    """Smallest k with P(Poisson(mean) <= k) >= q (normal approximation above mean 200).

    >>> poisson_quantile(0.0), poisson_quantile(1.0), poisson_quantile(10.0)
    (0.0, 3.0, 15.0)
    """
    if mean <= 0:
        return 0.0
    if mean > 200:
        return mean + 1.6449 * math.sqrt(mean)
    p = math.exp(-mean)
    cdf, k = p, 0
    while cdf < q:
        k += 1
        p *= mean / k
        cdf += p
    return float(k)


# Up to this many servers the Erlang-B recursion runs from k = 1, as it always has (a batch of a
# few hundred to a few thousand slots). A tiny model's batch cap can be millions of slots, and
# a recursion over every slot, called for each rate a capacity search tries, took a minute.
EXACT_SERVERS = 4096
# Beyond it the recursion starts this many standard deviations (sqrt(offered)) below the
# offered load, where Erlang B is 1 - k/offered to O(1/offered); each step to the mode shrinks
# the starting error by k/offered, exp(-8**2/2) ~ 1e-14 in all.
_START_SDS = 8.0
# ... and stops once B is below this share of 1 - rho: Erlang C is then below it too (B falls
# with every server past the offered load), no wait to speak of.
_NEGLIGIBLE = 1e-16


def erlang_c(servers: int, offered: float) -> float:
    """Erlang-C probability of waiting in M/M/c with ``offered`` = lambda x service time (Erlangs).

    Computed by the Erlang-B recursion (stable for thousands of servers); above
    :data:`EXACT_SERVERS` over O(sqrt(offered)) servers only (:func:`_erlang_b_window`), so
    a batch of millions of slots costs milliseconds, not seconds.

    >>> round(erlang_c(1, 0.5), 3), round(erlang_c(10, 5.0), 4)
    (0.5, 0.0361)
    >>> round(erlang_c(2_000_000, 1_998_000.0), 4), erlang_c(2_000_000, 1000.0)
    (0.1012, 0.0)
    """
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    rho = offered / servers
    if servers <= EXACT_SERVERS:
        b = 1.0
        for k in range(1, servers + 1):
            b = offered * b / (k + offered * b)
    else:
        b = _erlang_b_window(servers, offered, 1 - rho)
    return b / (1 - rho + rho * b)


def _erlang_b_window(servers: int, offered: float, idle: float) -> float:
    """Erlang B for many servers, from :data:`_START_SDS` standard deviations below the offered
    load (the fluid value 1 - k/offered there) up to ``servers``, or 0 once it is negligible
    against ``idle`` = 1 - rho. At most ~17 sqrt(offered) steps.

    >>> b = 1.0
    >>> for k in range(1, 20_001):
    ...     b = 19_900.0 * b / (k + 19_900.0 * b)
    >>> abs(_erlang_b_window(20_000, 19_900.0, 0.005) / b - 1) < 1e-9
    True
    """
    k0 = max(0, math.floor(offered - _START_SDS * math.sqrt(offered)))
    b = 1.0 - k0 / offered if k0 else 1.0
    for k in range(k0 + 1, servers + 1):
        b = offered * b / (k + offered * b)
        if k > offered and b < _NEGLIGIBLE * idle:
            return 0.0
    return b


@dataclass(frozen=True)
class LoadedLatency:
    """Analytical steady state of a replica at one arrival rate (seconds)."""

    stable: bool
    p95_ttft_s: float
    p95_tpot_s: float
    mean_tpot_s: float
    running: float
    prefill_share: float


def _residual_tail(
    y: float, lengths: list[float], weights: list[float], lam: float, s1: float
) -> float:
    """P(U X + s1 A > y) for an arrival in an iteration of length X (a mixture over X).

    U ~ Uniform(0, 1) is the residual share of the current iteration and A ~ Poisson(lam X) the
    other requests that arrive during it and are prefilled in the same iteration.
    """
    out = 0.0
    for x, w in zip(lengths, weights, strict=True):
        if w <= 0:
            continue
        if x <= 0:
            out += w * (1.0 if y < 0 else 0.0)
            continue
        mu = lam * x
        a, p = _poisson_start(mu)
        cdf = tail = 0.0
        while True:
            rest = y - s1 * a
            if rest < 0:
                tail += 1.0 - cdf  # P(A >= a): the co-admitted prompts alone exceed y
                break
            tail += p * max(0.0, 1.0 - rest / x)
            cdf += p
            a += 1
            p *= mu / a
            if 1.0 - cdf < 1e-7:
                break
        out += w * tail
    return out


def _poisson_start(mu: float) -> tuple[int, float]:
    """(a0, P(A = a0)) for A ~ Poisson(mu): where a sum over A's values may start, 10 standard
    deviations below the mean (all below holds under 1e-20; a0 = 0 up to mu = 100).

    Starting at 0 costs O(mu) steps and, past mu ~ 745, exp(-mu) underflows to 0 and the sum
    with it: a tiny model's replica admits thousands of prompts per iteration.

    >>> _poisson_start(4.0) == (0, math.exp(-4.0)), _poisson_start(10_000.0)[0]
    (True, 9000)
    """
    a0 = max(0, math.floor(mu - 10 * math.sqrt(mu)))
    if a0 == 0:
        return 0, math.exp(-mu)
    return a0, math.exp(a0 * math.log(mu) - mu - math.lgamma(a0 + 1))


@dataclass(frozen=True)
class _SteadyState:
    """Operating point of the continuous-batching fixed point (seconds, requests)."""

    n: float  # mean running batch
    k: float  # mean prompts per prefill iteration
    t_d: float  # decode step at the running batch
    rho_p: float  # share of GPU time spent prefilling
    p_len: float  # mean prefill iteration

    @property
    def tpot(self) -> float:
        """Mean time per output token: decodes advance only outside prefills."""
        return self.t_d / (1 - self.rho_p)


def _prompts_per_prefill(lam: float, t_d: float, p_len: float) -> float:
    """Mean prompts per prefill: arrivals during the previous iteration given at least one.

    The previous iteration is a decode step or a prefill (a two-state Markov chain), so the mean
    mixes ``E[Poisson(lam X) | >= 1]`` over both, weighted by how often each leads to a prefill.
    """
    p_dp = -math.expm1(-lam * t_d)
    p_pp = -math.expm1(-lam * p_len)
    stay = math.exp(-lam * p_len)
    pi_p = p_dp / (p_dp + stay) if p_dp + stay > 0 else 1.0
    k_from_d = lam * t_d / p_dp if p_dp > 1e-12 else 1.0
    k_from_p = lam * p_len / p_pp if p_pp > 1e-12 else 1.0
    from_d, from_p = (1 - pi_p) * p_dp, pi_p * p_pp
    return (from_d * k_from_d + from_p * k_from_p) / (from_d + from_p) if from_d + from_p else 1.0


def _steady_state(
    lam: float, d: int, f: float, s1: float, batch: int, step: Callable[[float], float]
) -> _SteadyState | None:
    """Fixed point of the running batch ``n = lam d TPOT`` (None: unstable or out of slots)."""
    if lam * s1 >= 1:
        return None
    n = 0.0
    p_len = f + s1
    k = 1.0
    t_d = rho_p = 0.0
    for _ in range(100):
        t_d = step(max(n, 1.0))
        k = _prompts_per_prefill(lam, t_d, p_len)
        p_len = f + k * s1
        rho_p = lam * (s1 + f / k)
        if rho_p >= 0.999:
            return None
        new_n = lam * d * t_d / (1 - rho_p)
        if new_n > 4 * batch + 10:
            return None
        done = abs(new_n - n) < 1e-4 * max(1.0, n)
        n = new_n
        if done:
            break
    if n >= batch:
        return None
    return _SteadyState(n, k, t_d, rho_p, p_len)


def _p95_tpot(
    st: _SteadyState, lam: float, d: int, batch: int, step: Callable[[float], float]
) -> tuple[float, float] | None:
    """(p95 TPOT, mean request life) in seconds; None when the slots cannot cover the 95% point
    of the running batch (the slot-saturation regime where TTFT explodes)."""
    if d <= 0:
        return 0.0, 0.0
    life = d * st.tpot
    # feedback: one more running request lengthens every life by g requests' worth
    slope = step(max(st.n, 1.0) + 1) - st.t_d
    g = min(0.9, lam * d * slope / (1 - st.rho_p))
    n95 = st.n + 1.6449 * math.sqrt(st.n) / (1 - g)
    if n95 > batch:
        return None
    t95 = step(max(n95, 1.0))
    life95 = d * t95 / (1 - st.rho_p)
    r_p = st.rho_p / st.p_len  # prefill iterations per second
    return (d * t95 + poisson_quantile(r_p * life95) * st.p_len) / d, life


def _arrival_iterations(st: _SteadyState, f: float, s1: float) -> tuple[list[float], list[float]]:
    """(lengths, weights) of the iteration a request arrives in, length-biased: a decode step,
    idle, or a prefill of 1, 2, ... prompts (prompts per prefill ~ 1 + Poisson(k - 1))."""
    idle = max(0.0, (1 - st.rho_p) * math.exp(-st.n))
    lengths, weights = [st.t_d, 0.0], [max(0.0, 1 - st.rho_p - idle), idle]
    km1 = max(st.k - 1.0, 0.0)
    pk, mass, j = math.exp(-km1), 0.0, 0
    parts = []
    while mass < 0.999 and j < 60:
        parts.append((f + (1 + j) * s1, pk))
        mass += pk
        j += 1
        pk *= km1 / j
    sum_len = sum(x * w for x, w in parts)
    norm = st.rho_p / sum_len if sum_len > 0 else 0.0
    for x, w in parts:
        lengths.append(x)
        weights.append(norm * x * w)
    return lengths, weights


def _slot_wait_s(batch: int, lam: float, life: float, d: int) -> float:
    """Erlang-C p95 wait for a batch slot (M/M/c, c = batch, service = life); 0 below 5% waiting."""
    if d <= 0:
        return 0.0
    c = erlang_c(batch, lam * life)
    return math.log(c / 0.05) / (batch / life - lam) if c > 0.05 else 0.0


def _p95_residual_s(
    st: _SteadyState, lengths: list[float], weights: list[float], lam: float, s1: float
) -> float:
    """95% point of the residual iteration plus co-admitted prompts, by bisection."""
    span = 2 * (st.p_len + st.t_d)
    lo, hi = 0.0, span + s1 * (poisson_quantile(lam * span, 0.999) + 1)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if _residual_tail(mid, lengths, weights, lam, s1) > 0.05:
            lo = mid
        else:
            hi = mid
    return hi
