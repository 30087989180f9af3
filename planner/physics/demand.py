"""Demand coefficients: load slices from utilization and request rates per month.

Pure functions; the model builder turns their output into right-hand sides.
"""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_MONTH = 730.0  # 8760 h / 12; every monthly figure uses it
SECONDS_PER_DAY = 86_400.0

# A day is cut into four blocks (hours/day): the 2 busiest hours at the peak, then 6, 8
# and 8 hours at load x, x^2, x^3 of the peak. x is chosen so that the day's mean load
# over its peak equals the user's utilization. The shape is a convex, monotone daily curve
# like the diurnal traffic of consumer chat services; 0.083 (2/24) is the lowest utilization
# this shape can represent, and validation requires >= 0.1.
SLICE_NAMES = ("peak", "high", "mid", "low")
SLICE_HOURS_PER_DAY = (2.0, 6.0, 8.0, 8.0)
SLICE_POWERS = (0, 1, 2, 3)


@dataclass(frozen=True)
class LoadSlice:
    name: str
    hours_per_month: float
    load: float  # relative to the day's peak


def _mean_load(x: float) -> float:
    return sum(h * x**p for h, p in zip(SLICE_HOURS_PER_DAY, SLICE_POWERS, strict=True)) / 24.0


def load_slices(utilization: float) -> list[LoadSlice]:
    """Load slices whose hour-weighted mean load equals ``utilization`` (mean/peak).

    Hours per month sum to 730; the peak slice has load 1.

    >>> s = load_slices(0.5)
    >>> [x.name for x in s], round(sum(x.hours_per_month for x in s), 6)
    (['peak', 'high', 'mid', 'low'], 730.0)
    >>> round(sum(x.hours_per_month * x.load for x in s) / 730.0, 6)
    0.5
    >>> [round(x.load, 3) for x in load_slices(1.0)]
    [1.0, 1.0, 1.0, 1.0]
    """
    lo_u = SLICE_HOURS_PER_DAY[0] / 24.0
    if not lo_u < utilization <= 1.0:
        raise ValueError(f"utilization must be in ({lo_u:.3f}, 1], got {utilization}")
    lo, hi = 0.0, 1.0
    for _ in range(200):  # bisection: _mean_load is increasing in x
        mid = (lo + hi) / 2
        if _mean_load(mid) < utilization:
            lo = mid
        else:
            hi = mid
    x = (lo + hi) / 2
    scale = HOURS_PER_MONTH / 24.0
    return [
        LoadSlice(n, h * scale, x**p)
        for n, h, p in zip(SLICE_NAMES, SLICE_HOURS_PER_DAY, SLICE_POWERS, strict=True)
    ]


FLAT = LoadSlice("flat", HOURS_PER_MONTH, 1.0)


def problem_slices(utilizations: list[float]) -> list[LoadSlice]:
    """The load slices a problem is planned in (hours only; loads per workload come from
    :func:`workload_slices`): one flat slice of the whole month when every serving workload
    has a constant load (utilization 1: the four day blocks would be identical copies of the
    same month), else the four day blocks.

    >>> [s.name for s in problem_slices([1.0, 1.0])], [s.name for s in problem_slices([1.0, 0.5])]
    (['flat'], ['peak', 'high', 'mid', 'low'])
    >>> [s.name for s in problem_slices([])]  # no service: the day blocks, as always
    ['peak', 'high', 'mid', 'low']
    """
    if utilizations and all(u >= 1.0 for u in utilizations):
        return [FLAT]
    return load_slices(1.0)


def workload_slices(utilization: float, flat: bool) -> list[LoadSlice]:
    """A serving workload's slices: :func:`load_slices` at its utilization, or the flat one."""
    return [FLAT] if flat else load_slices(utilization)


def mean_request_rate(daily_active_users: float, requests_per_user_per_day: float) -> float:
    """Mean request rate in requests/s: DAU x requests per user per day / 86 400 s.

    >>> round(mean_request_rate(50_000, 20), 3)
    11.574
    """
    return daily_active_users * requests_per_user_per_day / SECONDS_PER_DAY


def peak_request_rate(mean_rps: float, utilization: float, growth: float, months: int) -> float:
    """Peak-hour request rate (req/s) ``months`` after start: mean x (1+growth)^months / utilization.

    >>> round(peak_request_rate(10.0, 0.5, 0.03, 12), 3)
    28.515
    """
    return mean_rps * (1.0 + growth) ** months / utilization
