"""The fleet-size ceiling of a serving workload: refuse traffic no fleet could serve.

The largest clusters built are ~100-200k GPUs; a serving peak that needs more than
:data:`planner.inputs.catalog.MAX_FLEET_GPUS` (a million) GPUs as planned, after the headroom
of ``slo.max_load`` and the ``redundancy`` spare replicas, is a typo in the traffic or the
headroom, and would swamp the solver. Called by :func:`planner.optimize.candidates.build_candidates`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from planner.base.errors import InputError
from planner.inputs.catalog import MAX_FLEET_GPUS
from planner.inputs.problem import DEFAULT_MAX_LOAD, ServeWorkload

# serving candidates (planner.optimize.candidates.ServeCandidate): rate_rps and tp are read
Cands = Sequence[Any]


def gpus_needed(peak_rps: float, cands: Cands) -> float:
    """GPUs the peak needs on the most efficient candidate: ``peak / max(rate / tp)``.

    >>> from types import SimpleNamespace as S
    >>> gpus_needed(100.0, [S(rate_rps=5.0, tp=1), S(rate_rps=20.0, tp=2)])
    10.0
    """
    best = max((c.rate_rps / c.tp for c in cands), default=0.0)
    return math.inf if best <= 0 else peak_rps / best


def fleet_gpus_needed(w: ServeWorkload, cands: Cands, peak_rps: float) -> float:
    """GPUs the workload's peak needs as planned: the capacity for ``peak / slo.max_load`` on
    the most efficient candidate, plus ``redundancy`` spare replicas of it.

    >>> from types import SimpleNamespace as S
    >>> w = S(slo=S(max_load=0.5), redundancy=1)
    >>> fleet_gpus_needed(w, [S(rate_rps=5.0, tp=1), S(rate_rps=20.0, tp=2)], 100.0)
    22.0
    """
    live = [c for c in cands if c.rate_rps > 0]
    if not live:
        return math.inf
    best = max(live, key=lambda c: c.rate_rps / c.tp)
    return gpus_needed(peak_rps / w.slo.max_load, [best]) + w.redundancy * best.tp


def check_fleet_size(w: ServeWorkload, cands: Cands, peak_rps: float, where: str) -> None:
    """Refuse traffic no fleet could serve (and whose numbers would swamp the solver): the
    ceiling holds after headroom (``slo.max_load``) and spare replicas (``redundancy``)."""
    if not cands:
        return  # no configuration at all: reported as infeasible with the reasons
    need = fleet_gpus_needed(w, cands, peak_rps)
    if need <= MAX_FLEET_GPUS:
        return
    bare = gpus_needed(peak_rps, cands)
    usual = w.model_copy(update={"slo": w.slo.model_copy(update={"max_load": DEFAULT_MAX_LOAD})})
    # the headroom is to blame when the default headroom would have fitted
    low = w.slo.max_load < DEFAULT_MAX_LOAD
    field = (
        "slo.max_load"
        if low and fleet_gpus_needed(usual, cands, peak_rps) <= MAX_FLEET_GPUS
        else "traffic"
    )
    raise InputError(
        f"{where}.{field}: serving workload {w.name!r}: its peak of {peak_rps:,.3g} requests/s "
        f"at slo.max_load {w.slo.max_load:g} with {w.redundancy} spare replica(s) would need "
        f"{need:,.3g} GPUs even on the most efficient configuration ({bare:,.3g} at full "
        f"load); the planner plans fleets of up to {MAX_FLEET_GPUS:,} GPUs. Check "
        f"traffic.daily_active_users ({w.traffic.daily_active_users:,.3g}), "
        f"requests_per_user_per_day ({w.traffic.requests_per_user_per_day:,.3g}), "
        f"growth_per_month ({w.traffic.growth_per_month:g}) and slo.max_load "
        f"({w.slo.max_load:g}: the share of capacity used at peak, typically 0.5-0.9)"
    )
