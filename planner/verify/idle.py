"""Purchases that nothing uses: a warning, not a violation (the plan meets every constraint,
it only pays for GPUs it never runs, which a finished plan of the planner never does)."""

from __future__ import annotations

from collections import defaultdict

from .context import VerifyContext

# Busy GPU-hours over the horizon at or below which a GPU type bought counts as idle.
IDLE_HOURS = 1e-6


def idle_purchase_warnings(ctx: VerifyContext) -> list[str]:
    """One line per GPU type the plan buys whose owned GPUs (bought or existing) are busy for
    no hour of the horizon, by the busy hours recomputed from the plan's allocations."""
    bought: dict[str, int] = defaultdict(int)
    for (g, _t), n in ctx.bought.items():
        bought[g] += n
    busy: dict[str, float] = defaultdict(float)
    for (g, _t), h in ctx.busy.items():
        busy[g] += h
    return [
        f"{n} {g} GPU(s) bought and idle for the whole horizon (no owned GPU-hour used): "
        "dropping them would cost less"
        for g, n in sorted(bought.items())
        if n > 0 and busy[g] <= IDLE_HOURS
    ]
