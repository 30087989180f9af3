"""A serving row's layout, recomputed: which replica it is and what it serves per bucket.

A row of ``serve_allocations`` names its replica by GPU, GPUs per replica and ``layout``
(prefill and decode workers, modes, MTP). Its capacity is recomputed here from the problem and
the layout alone, never from the solver's candidates: a plain replica (no layout, or one tp
or ep worker of 1-8 GPUs without MTP) by :func:`planner.physics.capacity.bucket_capacity`
(profiles, then the physics; tp or ep, the faster, and the row's mode must be that one);
any other deployment by :func:`planner.physics.capacity.deployment_bucket_capacity`. A layout
that breaks the workload's ``disaggregated`` or ``mtp`` setting, whose GPUs do not add up to
``gpus_per_replica``, or whose label is not its own, cannot serve (reason given).
"""

from __future__ import annotations

from planner.inputs.problem import Inputs, ServeWorkload
from planner.physics.capacity import (
    BucketCapacity,
    bucket_capacity,
    deployment_bucket_capacity,
    layout_deployment,
)
from planner.physics.serve import TP_SIZES, ReplicaCapacity
from planner.plan.data import ServeAllocation, ServeLayout


def plain_layout(lay: ServeLayout | None) -> bool:
    """No layout, or one tp/ep worker of 1, 2, 4 or 8 GPUs, aggregated, without MTP."""
    if lay is None:
        return True
    d = lay.decode
    return (
        lay.prefill is None
        and not lay.mtp
        and d.count == 1
        and d.mode in ("tp", "ep")
        and d.gpus in TP_SIZES
    )


def layout_key(al: ServeAllocation) -> str:
    """Which replica type a row is, beside its GPU and GPUs per replica: '' for a plain
    replica, else its workers and MTP (the rows of one deployment share it)."""
    lay = al.layout
    if plain_layout(lay):
        return ""
    assert lay is not None  # plain_layout(None) is True

    def w(x) -> str:
        return "-" if x is None else f"{x.count}x{x.gpus}:{x.mode}"

    return f"{w(lay.prefill)}+{w(lay.decode)}{' mtp' if lay.mtp else ''}"


def layout_workers(al: ServeAllocation) -> tuple[int, ...]:
    """GPUs of each worker kind of the row's replica (no layout: one of gpus_per_replica)."""
    lay = al.layout
    if lay is None:
        return (al.gpus_per_replica,)
    return tuple(x.gpus for x in (lay.decode, lay.prefill) if x is not None)


def _refused(w: ServeWorkload, al: ServeAllocation, why: str) -> list[BucketCapacity]:
    cap = ReplicaCapacity(False, why, al.gpus_per_replica, "", 0, 0.0, 0.0, 0.0, 0.0)
    return [BucketCapacity(b.name, cap) for b in w.buckets()]


def _policy(w: ServeWorkload, lay: ServeLayout | None) -> str | None:
    """Why the layout breaks the workload's ``disaggregated`` or ``mtp`` (None: it does not)."""
    dis = lay is not None and lay.prefill is not None
    mtp = lay is not None and lay.mtp
    if w.disaggregated != "auto" and w.disaggregated != dis:
        return f"layout is {'' if dis else 'not '}disaggregated; the workload says disaggregated: {str(w.disaggregated).lower()}"
    if w.mtp != "auto" and w.mtp != mtp:
        return (
            f"layout has MTP {'on' if mtp else 'off'}; the workload says mtp: {str(w.mtp).lower()}"
        )
    return None


def serve_capacities(inputs: Inputs, w: ServeWorkload, al: ServeAllocation) -> list[BucketCapacity]:
    """The row's replica capacity per bucket of ``w`` (in the workload's order)."""
    lay = al.layout
    why = _policy(w, lay)
    if why is not None:
        return _refused(w, al, why)
    if plain_layout(lay):
        caps = [bucket_capacity(inputs, w, b, al.gpu, al.gpus_per_replica) for b in w.buckets()]
        if lay is None:
            return caps
        if lay.decode.gpus != al.gpus_per_replica:
            return _refused(
                w,
                al,
                f"layout {lay.label} has {lay.decode.gpus} GPUs, the row {al.gpus_per_replica}",
            )
        modes = {c.capacity.layout for c in caps if c.rate > 0 and c.measured is None}
        if modes and lay.decode.mode not in modes:
            return _refused(
                w,
                al,
                f"layout mode {lay.decode.mode}; the physics serves this replica in {'/'.join(sorted(modes))}",
            )
        return caps
    assert lay is not None  # plain_layout(None) is True
    try:
        dep = layout_deployment(lay.model_dump())
    except ValueError as exc:
        return _refused(w, al, f"layout {lay.label!r}: {exc}")
    if dep.total_gpus != al.gpus_per_replica:
        return _refused(
            w, al, f"layout {lay.label} has {dep.total_gpus} GPUs, the row {al.gpus_per_replica}"
        )
    if dep.label() != lay.label:
        return _refused(w, al, f"layout label {lay.label!r} is not its workers' ({dep.label()!r})")
    return [deployment_bucket_capacity(inputs, w, b, al.gpu, dep) for b in w.buckets()]
