"""From benchmark throughput to the GPU-hours a real training run consumes.

Benchmark tables (llm-foundry, NeMo, Megatron) measure a tuned job's steady state for minutes;
a real run of weeks also loses time to failures and restarts, checkpoint stalls, evaluation,
data stalls and stragglers, and runs its steady state below the benchmark (a fixed global batch
at scale, long context, less tuned stacks). So::

    realized GPU-hours = steady-state GPU-hours / (production x goodput(GPUs))

* ``goodput`` (Young 1974, Daly 2006): a job on ``N`` GPUs fails at ``lambda = rate x N`` per
  hour (exponential). It checkpoints every ``tau`` hours of work (a stall of ``C`` hours each),
  and a failure costs ``R`` hours of recovery plus the work since the last checkpoint. Daly's
  complete model (failures may also strike during a checkpoint or a recovery) takes
  ``E = exp(lambda R) (exp(lambda (tau + C)) - 1) / lambda`` wall hours per ``tau`` of work, so
  ``goodput = tau / E`` at the ``tau`` that maximizes it. For ``lambda (C + R) << 1`` the loss is
  Young-Daly's first order ``sqrt(2 C lambda) + R lambda`` at ``tau = sqrt(2 C / lambda)``; that
  expansion grows without bound (linearly in N) and overstates the loss once the mean time between
  failures nears ``R`` and ``tau`` (a typical stack on 16k GPUs: 0.56 against 0.43 exact).
* ``production``: everything else, as one factor per *stack profile* (``mature``, ``typical``,
  ``first-run``), fitted on published full runs (:mod:`planner.physics.calibration.training`).
* The run-to-run scatter is log-normal with the fitted ``log_sd``: the P-th percentile of the
  hours is the median x ``exp(z_P x log_sd)``.

Every function here is pure; the figures live in ``catalogs/calibration.yaml`` (``realized``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

STACKS = ("mature", "typical", "first-run")
DEFAULT_STACK = "typical"
DEFAULT_CONFIDENCE = 0.8
# A job that keeps less than this never finishes: a floor that keeps its hours finite, not a
# prediction (Daly's model only tends to 0).
MIN_GOODPUT = 1e-3


@dataclass(frozen=True)
class StackProfile:
    """One published operating regime of a training stack (units in the field names)."""

    production: float  # steady state of a long run / benchmark steady state, 0-1
    failure_rate_per_gpu_hour: float  # unexpected job interruptions per GPU-hour
    checkpoint_s: float  # training stalled per checkpoint, seconds
    recovery_h: float  # detect, restart, reload after a failure, hours


def _efficiency(lam: float, c_hours: float, r_hours: float) -> float:
    """Daly's complete model at the optimal checkpoint interval: the share of wall time that
    advances work, ``max over tau of lambda tau exp(-lambda R) / (exp(lambda (tau + C)) - 1)``.

    The optimum solves ``exp(lambda (tau + C)) (1 - lambda tau) = 1``: with ``x = lambda tau``
    in (0, 1), ``x + lambda C + ln(1 - x) = 0`` (one root, found by bisection).

    >>> round(_efficiency(0.0, 0.1, 1.0), 6), round(_efficiency(0.5, 0.0, 0.2), 4)  # exp(-0.1)
    (1.0, 0.9048)
    """
    if lam <= 0.0:
        return 1.0
    if lam * (c_hours + r_hours) > 700.0:  # exp() would overflow; the efficiency is ~0
        return 0.0
    lc = lam * c_hours
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if mid < 1.0 and mid + lc + math.log1p(-mid) > 0.0:
            lo = mid
        else:
            hi = mid
    x = 0.5 * (lo + hi)
    work = 1.0 if x + lc == 0.0 else x / math.expm1(x + lc)  # x / (e^(x+lc) - 1) -> 1 as x -> 0
    return work * math.exp(-lam * r_hours)


def failure_loss(gpus: int, profile: StackProfile) -> float:
    """Share of wall time lost to failures, ``1 - goodput`` (Daly's complete model at the optimal
    checkpoint interval, lambda = rate x N); ``sqrt(2 C lambda) + R lambda`` to first order.

    Units: C in hours (``checkpoint_s / 3600``), lambda per hour, R in hours; result in [0, 1).

    >>> p = StackProfile(1.0, 2e-5, 10.0, 0.1)
    >>> round(failure_loss(16384, p), 3)   # Llama 3 scale: ~7 % lost, ">90 % effective time"
    0.073
    >>> failure_loss(8, p) < 0.002
    True
    >>> round(failure_loss(16384, StackProfile(1.0, 4e-5, 150.0, 0.5)), 2)  # first order 0.56
    0.43
    """
    return 1.0 - goodput(gpus, profile)


def goodput(gpus: int, profile: StackProfile) -> float:
    """Share of wall time that advances training (at least :data:`MIN_GOODPUT`).

    >>> round(goodput(992, StackProfile(1.0, 8e-5, 300.0, 2.0)), 3)   # OPT-175B-like regime
    0.759
    >>> goodput(10**7, StackProfile(1.0, 8e-5, 300.0, 2.0)) == MIN_GOODPUT
    True
    """
    lam = profile.failure_rate_per_gpu_hour * gpus
    eff = _efficiency(lam, profile.checkpoint_s / 3600.0, profile.recovery_h)
    return max(MIN_GOODPUT, eff)


def realized_factor(gpus: int, profile: StackProfile) -> float:
    """Realized / steady-state throughput: ``production x goodput``; hours scale by 1/this.

    >>> round(realized_factor(96, StackProfile(0.73, 4e-5, 150.0, 0.5)), 3)
    0.716
    """
    return profile.production * goodput(gpus, profile)


def quantile_factor(q: float, log_sd: float) -> float:
    """The ``q``-quantile of a log-normal with median 1 and log standard deviation ``log_sd``.

    >>> round(quantile_factor(0.5, 0.3), 6), round(quantile_factor(0.9, 0.3), 3)
    (1.0, 1.469)
    >>> round(quantile_factor(0.1, 0.3) * quantile_factor(0.9, 0.3), 6)   # symmetric in log
    1.0
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    return math.exp(NormalDist().inv_cdf(q) * log_sd)


@dataclass(frozen=True)
class HoursBand:
    """Realized wall hours of one job: the median and the quantiles a plan may provision."""

    steady_wall_hours: float  # benchmark steady state, no losses
    median: float
    log_sd: float

    def at(self, q: float) -> float:
        """Wall hours at quantile ``q`` (the deadline holds with probability q).

        >>> HoursBand(10.0, 20.0, 0.0).at(0.8)
        20.0
        """
        return self.median * quantile_factor(q, self.log_sd)

    @property
    def p10(self) -> float:
        return self.at(0.1)

    @property
    def p90(self) -> float:
        return self.at(0.9)


def hours_band(
    steady_wall_hours: float, gpus: int, profile: StackProfile, log_sd: float
) -> HoursBand:
    """The band of realized wall hours for a job whose steady state takes ``steady_wall_hours``.

    >>> b = hours_band(100.0, 8, StackProfile(0.5, 0.0, 0.0, 0.0), 0.3)
    >>> b.median, round(b.p90 / b.p10, 2)
    (200.0, 2.16)
    """
    return HoursBand(steady_wall_hours, steady_wall_hours / realized_factor(gpus, profile), log_sd)


def spot_overhead(instances: int, preemptions_per_instance_hour: float, profile: StackProfile,
                  reacquire_h: float) -> float:  # fmt: skip
    """Extra wall hours per hour of progress on spot: a preemption is a failure with a known
    rate (``lambda = rate x instances``; any instance lost stops the job) whose recovery also
    waits for capacity (``R + reacquire``), so the overhead is ``1 / goodput - 1`` with the same
    model as failures (``sqrt(2 C lambda) + (R + reacquire) lambda`` to first order).

    >>> p = StackProfile(0.73, 4e-5, 150.0, 0.5)
    >>> round(spot_overhead(12, 2.7e-4, p, 1.0), 3)   # 96 GPUs on 8-GPU spot instances
    0.022
    >>> spot_overhead(1, 0.0, p, 1.0)
    0.0
    """
    lam = preemptions_per_instance_hour * instances
    eff = _efficiency(lam, profile.checkpoint_s / 3600.0, profile.recovery_h + reacquire_h)
    return 1.0 / max(MIN_GOODPUT, eff) - 1.0
