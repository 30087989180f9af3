"""The check families: each judges one part of the plan against the recomputed figures.

Every family is a function ``(VerifyContext) -> Findings``; it reads the context and never
calls another family. Messages are what users see (and what tests match on): keep them stable.

This module holds the first family, :func:`check_shape`, and :data:`FAMILIES`, the order of the
report; the others live by area and are re-exported here: :mod:`planner.verify.fleet`
(purchases, caps), :mod:`planner.verify.workloads` (serving, training, workload results),
:mod:`planner.verify.money` (rentals, money) and :mod:`planner.verify.existing`.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.physics.demand import HOURS_PER_MONTH

from .context import VerifyContext
from .existing import check_existing
from .findings import Checker, Findings, close
from .fleet import _check_purchase as _check_purchase  # tests call it on a hand-made purchase
from .fleet import check_caps, check_purchases
from .money import check_money, check_rentals
from .workloads import check_serving, check_training, check_workloads

H = HOURS_PER_MONTH

# ---------------------------------------------------------------- shape


def check_shape(ctx: VerifyContext) -> Findings:
    """Shape: the plan is a solution (status optimal or feasible) for the problem's horizon,
    with the planner's hours per month and load slices.

    On another horizon nothing else is checked, here or by :func:`planner.verify.verify_report`.
    """
    chk = Checker("shape", ctx.months)
    plan, months = ctx.plan, ctx.months
    chk.check(
        plan.status in ("optimal", "feasible"),
        f"plan status is {plan.status!r}, not optimal or feasible",
    )
    if not chk.check(
        ctx.horizon_matches,
        f"plan months {plan.months[:1]}..{plan.months[-1:]} differ from the problem's horizon "
        f"{months[0]}..{months[-1]}",
    ):
        return chk.findings()
    chk.check(
        close(plan.hours_per_month, H, abs_=1e-9),
        f"plan hours_per_month {plan.hours_per_month} != {H}",
    )
    chk.check(
        [(s.name, round(s.hours_per_month, 6)) for s in plan.slices]
        == [(s.name, round(s.hours_per_month, 6)) for s in ctx.slices],
        "plan slices differ from the planner's load slices",
    )
    return chk.findings()


Family = Callable[[VerifyContext], Findings]

# the order of the report: the plan's shape first, then what it buys and runs, then money
FAMILIES: tuple[Family, ...] = (
    check_shape,
    check_purchases,
    check_serving,
    check_training,
    check_caps,
    check_rentals,
    check_money,
    check_existing,
    check_workloads,
)
