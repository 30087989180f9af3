"""From benchmark throughput to the GPU-hours a real training run consumes.

Benchmark tables (llm-foundry, NeMo, Megatron) measure a tuned job's steady state for minutes;
a real run of weeks also loses time to failures and restarts, checkpoint stalls, evaluation,
data stalls and stragglers, and runs its steady state below the benchmark (a fixed global batch
at scale, long context, less tuned stacks). So::

    realized GPU-hours = steady-state GPU-hours / (production x goodput(GPUs))

* ``goodput = 1 - failure loss`` (Young 1974, Daly 2006): a job on ``N`` GPUs fails at
  ``lambda = rate x N`` per hour; checkpointing every ``sqrt(2 C / lambda)`` hours costs
  ``sqrt(2 C lambda)`` of the time (stalls plus the half interval re-done after a failure) and
  each failure ``R`` hours of recovery, so ``loss = sqrt(2 C lambda) + R lambda``.
* ``production``: everything else, as one factor per *stack profile* (``mature``, ``typical``,
  ``first-run``), fitted on published full runs (:mod:`planner.physics.calibrate_training`).
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
MAX_FAILURE_LOSS = 0.9  # beyond this a job never finishes; the formula is no longer meaningful


@dataclass(frozen=True)
class StackProfile:
    """One published operating regime of a training stack (units in the field names)."""

    production: float  # steady state of a long run / benchmark steady state, 0-1
    failure_rate_per_gpu_hour: float  # unexpected job interruptions per GPU-hour
    checkpoint_s: float  # training stalled per checkpoint, seconds
    recovery_h: float  # detect, restart, reload after a failure, hours


def failure_loss(gpus: int, profile: StackProfile) -> float:
    """Share of wall time lost to failures: ``sqrt(2 C lambda) + R lambda``, lambda = rate x N.

    Units: C in hours (``checkpoint_s / 3600``), lambda per hour, R in hours; result 0-0.9.

    >>> p = StackProfile(1.0, 2e-5, 10.0, 0.1)
    >>> round(failure_loss(16384, p), 3)   # Llama 3 scale: ~7 % lost, ">90 % effective time"
    0.075
    >>> failure_loss(8, p) < 0.002
    True
    """
    lam = profile.failure_rate_per_gpu_hour * gpus
    c_hours = profile.checkpoint_s / 3600.0
    loss = math.sqrt(2.0 * c_hours * lam) + profile.recovery_h * lam
    return min(MAX_FAILURE_LOSS, loss)


def goodput(gpus: int, profile: StackProfile) -> float:
    """Share of wall time that advances training, ``1 - failure_loss``.

    >>> round(goodput(992, StackProfile(1.0, 8e-5, 300.0, 2.0)), 3)   # OPT-175B-like regime
    0.726
    """
    return 1.0 - failure_loss(gpus, profile)


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
    rate (``lambda = rate x instances``; any instance lost stops the job), so the loss is
    ``sqrt(2 C lambda) + (R + reacquire) lambda`` (Young-Daly, as for failures) and the
    overhead ``loss / (1 - loss)``.

    >>> p = StackProfile(0.73, 4e-5, 150.0, 0.5)
    >>> round(spot_overhead(12, 2.7e-4, p, 1.0), 3)   # 96 GPUs on 8-GPU spot instances
    0.022
    >>> spot_overhead(1, 0.0, p, 1.0)
    0.0
    """
    lam = preemptions_per_instance_hour * instances
    loss = (
        math.sqrt(2.0 * profile.checkpoint_s / 3600.0 * lam)
        + (profile.recovery_h + reacquire_h) * lam
    )
    loss = min(MAX_FAILURE_LOSS, loss)
    return loss / (1.0 - loss)
