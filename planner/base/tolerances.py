"""The tolerances shared by the model's solvers, the repair step, the plan and the verifier.

A solver returns a plan that meets every row to within its feasibility tolerance (HiGHS and
CBC: about 1e-7 on a scaled row, which on a 4,380-hour training window is ~1e-4 h), and an
integer within its integrality tolerance (1e-6 by default in both). The plan and the verifier
judge that plan with the tolerances below, defined once, so a plan that fills its window or
its demand exactly is never rejected by one stage and accepted by another. The solvers are
given the same figures (:data:`SOLVER_FEASIBILITY`, :data:`INTEGRALITY`), which are tighter
than what is checked: any slack left is the verifier's margin, not the solver's.
"""

from __future__ import annotations

import math

REL = 1e-6  # relative, on hours, money and demand alike
HOURS = 1e-3  # absolute, hours (3.6 s of a GPU)
USD = 0.5  # absolute, dollars, on sums of many terms
RPS = 1e-6  # absolute, requests per second
INTEGRALITY = 1e-6  # a count within this of a whole number is that whole number
SOLVER_FEASIBILITY = 1e-7  # HiGHS primal_feasibility_tolerance (its default, stated)


def slack(limit: float, abs_: float) -> float:
    """What a quantity may exceed ``limit`` by: ``abs_ + REL |limit|``.

    >>> round(slack(4380.0, HOURS), 6)
    0.00538
    >>> slack(0.0, HOURS)
    0.001
    """
    return abs_ + REL * abs(limit)


def at_most(x: float, limit: float, abs_: float) -> bool:
    """``x <= limit`` within the shared tolerance (False for NaN).

    >>> at_most(4380.0001, 4380.0, HOURS), at_most(4380.01, 4380.0, HOURS)
    (True, False)
    """
    return x <= limit + slack(limit, abs_) if math.isfinite(x) else False


def at_least(x: float, floor: float, abs_: float) -> bool:
    """``x >= floor`` within the shared tolerance (False for NaN).

    >>> at_least(9.999999, 10.0, RPS), at_least(9.99, 10.0, RPS)
    (True, False)
    """
    return x >= floor - slack(floor, abs_) if math.isfinite(x) else False


def whole(x: float) -> bool:
    """Whether ``x`` is a whole number within :data:`INTEGRALITY`.

    >>> whole(2.0000004), whole(2.1)
    (True, False)
    """
    return abs(x - round(x)) <= INTEGRALITY
