"""Stage 5, per workload: each training job's and serving workload's result in the Plan.

For a training job: GPUs, layout, realized-hours quantiles, wall hours (owned and rented)
against its window, where it runs, cost and USD per 1M trained tokens. For a serving
workload: the replica types used, peak GPUs, p95 latencies against the SLO, whether the
demand (or every bucket of a request mix) is covered, cost and USD per 1M tokens served.
Costs come from the :class:`~planner.plan.accounting.CostShares`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner.base import tolerances as tol
from planner.base.tolerances import RPS, at_least, at_most
from planner.inputs.problem import ServeWorkload, TrainJob
from planner.optimize.candidates import ServeCandidate
from planner.plan.accounting import CostShares
from planner.plan.data import WorkloadResult
from planner.plan.readout import EPS, ReadContext, Serving, Training


def _train_result(
    ctx: ReadContext, job: TrainJob, key: str, training: Training, costs: CostShares
) -> WorkloadResult:
    """One training job's result: GPUs, layout, wall hours (owned and rented) against the
    window's hours, cost (USD) and USD per 1M trained tokens."""
    c = ctx.m.train_cand(job.name, key)
    est = c.estimate
    predicted = {"wall_hours": round(training.wall[job.name], 6)}
    target = {"wall_hours": ctx.cands.window_hours[job.name]}
    cost = costs.cost(job.name)
    owned_h = sum(
        a.wall_hours for a in training.allocations if a.workload == job.name and a.source == "owned"
    )
    return WorkloadResult(
        name=job.name,
        kind="train",
        model=job.model,
        gpu=[c.gpu],
        gpus=c.gpus,
        config={
            "method": job.method,
            # expert parallelism (MoE) and the pipeline schedule only when used: plans
            # without them keep their layout keys
            "layout": {
                k: v
                for k, v in est.layout.__dict__.items()
                if (k, v) != ("ep", 1) and not (k == "schedule" and est.layout.pp == 1)
            }
            if est.layout
            else None,
            "mfu": est.mfu,
            "memory_per_gpu_gb": est.memory_per_gpu_gb,
            "hours_to_finish": c.wall_hours,
            "gpu_hours": est.gpu_hours,
            # Realized hours (planner/physics/realized.py): the plan provisions the quantile.
            "stack": job.stack,
            "confidence": job.confidence,
            "steady_wall_hours": est.steady_wall_hours,
            "wall_hours_median": est.wall_hours,
            "wall_hours_p10": est.wall_hours_p10,
            "wall_hours_p90": est.wall_hours_p90,
            "wall_hours_planned": c.wall_hours,
            "gpu_hours_median": est.gpu_hours,
            "gpu_hours_p10": est.gpu_hours_p10,
            "gpu_hours_p90": est.gpu_hours_p90,
            "gpu_hours_planned": c.wall_hours * c.gpus,
            "owned_wall_hours": owned_h,
            "rented_wall_hours": training.wall[job.name] - owned_h,
            **_train_place(ctx, training, job),
        },
        cost_usd=cost,
        cost_share=0.0,
        meets_target=at_most(predicted["wall_hours"], target["wall_hours"], tol.HOURS),
        predicted=predicted,
        target=target,
        slack={"wall_hours": target["wall_hours"] - predicted["wall_hours"]},
        tokens=job.tokens,
        usd_per_1m_tokens=cost / job.tokens * 1e6,
    )


def _train_place(ctx: ReadContext, training: Training, job: TrainJob) -> dict[str, Any]:
    """Where the run lives: providers (``owned`` for the team's GPUs) and offers with their
    fabric, as the plan uses them, and the job's rules for both."""
    places, offers = set(), {}
    for a in training.allocations:
        if a.workload != job.name or a.wall_hours <= EPS:
            continue
        if a.source == "owned":
            places.add("owned")
            continue
        o = ctx.cands.offers[a.source]
        places.add(o.provider)
        offers[o.id] = {
            "provider": o.provider,
            "fabric": o.fabric,
            "gbps_per_gpu": o.fabric_gbps_per_gpu,
        }
        if o.cluster:  # a capacity block or cluster product: booked for the run, up front
            offers[o.id]["block"] = o.instance_type or o.id
    return {
        "providers": sorted(places),
        "offers": offers,
        "providers_rule": job.providers,
        "ethernet_allowed": job.ethernet,
    }


def _served_rps(serving: Serving) -> dict[tuple[str, str, str], float]:
    """Requests/s served per (workload, month label, slice name), owned and rented."""
    served: dict[tuple[str, str, str], float] = {}
    for a in serving.allocations:
        k = (a.workload, a.month, a.slice)
        served[k] = served.get(k, 0) + a.replicas * a.rate_rps_per_replica
    return served


def _mix_covered(ctx: ReadContext, w: ServeWorkload, serving: Serving) -> bool:
    """A mix: every bucket of every active (month, slice) gets its share of the demand over
    ``max_load`` in capacity."""
    given: defaultdict[tuple[str, str, str], float] = defaultdict(float)
    for a in serving.allocations:
        if a.workload == w.name:
            for b, v in a.bucket_capacity_rps.items():
                given[(a.month, a.slice, b)] += v
    for t in ctx.cands.active[w.name]:
        for s, sl in enumerate(ctx.slices):
            for b in w.buckets():
                need = b.share * ctx.cands.demand[(w.name, t, s)] / w.slo.max_load
                if not at_least(given[(ctx.months[t], sl.name, b.name)], need, RPS):
                    return False
    return True


def _demand_covered(
    ctx: ReadContext, w: ServeWorkload, served: dict[tuple[str, str, str], float]
) -> bool:
    """Whether every active (month, slice) of ``w`` is served at its demand (req/s)."""
    covered = True
    for t in ctx.cands.active[w.name]:
        for s in range(len(ctx.slices)):
            have = served.get((w.name, ctx.months[t], ctx.slices[s].name), 0.0)
            if have + 1e-6 < ctx.cands.demand[(w.name, t, s)] * (1 - 1e-7):
                covered = False
    return covered


def _serve_tokens(ctx: ReadContext, w: ServeWorkload) -> float:
    """Tokens (prompt + output) ``w`` serves over the horizon at its demand."""
    return sum(
        ctx.cands.demand[(w.name, t, s)] * ctx.slices[s].hours_per_month * 3600.0
        for t in ctx.cands.active[w.name]
        for s in range(len(ctx.slices))
    ) * sum(b.share * sum(b.shape()) for b in w.buckets())


def _replica_buckets(c: ServeCandidate) -> dict:
    """Per-bucket rates of a replica type, and which were measured (with their source)."""
    if not c.buckets:
        return {}
    return {
        "bucket_rates_rps": {b.bucket: b.rate for b in c.buckets},
        "measured": {
            b.bucket: f"{b.measured.note}: {b.measured.source} ({b.measured.as_of})"
            for b in c.buckets
            if b.measured is not None
        },
    }


def _replica_layout(w: ServeWorkload, c: ServeCandidate) -> dict:
    """A deployment's layout label (prefill and decode workers, MTP), and the precision a
    GPU serves at where the workload lists several (a plain replica of 1-8 GPUs on one
    precision: nothing, as before layouts)."""
    out: dict = {}
    if c.deployment is not None:
        out["layout"] = c.layout["label"]
    if len(w.precisions()) > 1:
        out["precision"] = c.capacity.precision
    return out


def _request_mix(w: ServeWorkload) -> dict:
    """The mix as planned: each bucket's share and the shape its capacity is planned at."""
    if w.requests is None:
        return {}
    return {
        "requests": [
            {"name": b.name, "share": b.share, "prompt": b.shape()[0], "output": b.shape()[1]}
            for b in w.requests
        ]
    }


def _serve_result(
    ctx: ReadContext,
    w: ServeWorkload,
    serving: Serving,
    served: dict[tuple[str, str, str], float],
    costs: CostShares,
) -> WorkloadResult:
    """One serving workload's result: replica configurations used, peak GPUs, p95 latencies
    (ms) of the slowest configuration against the SLO, demand coverage, cost (USD) and USD per
    1M tokens served."""
    cl = [ctx.m.serve_cand(w.name, k) for k in sorted(serving.used.get(w.name, set()))]
    ttft = max((c.capacity.p95_ttft_ms for c in cl), default=float("inf"))
    tpot = max((c.capacity.p95_tpot_ms for c in cl), default=float("inf"))
    mixed = any(c.mixed for c in cl)
    covered = _mix_covered(ctx, w, serving) if mixed else _demand_covered(ctx, w, served)
    tokens = _serve_tokens(ctx, w)
    cost = costs.cost(w.name)
    predicted = {"p95_ttft_ms": ttft, "p95_tpot_ms": tpot}
    target = {"p95_ttft_ms": w.slo.p95_ttft_ms, "p95_tpot_ms": w.slo.p95_tpot_ms}
    replicas = [
        {
            "gpu": c.gpu,
            "gpus_per_replica": c.tp,
            "batch": c.capacity.batch,
            "rate_rps_per_replica": c.rate_rps,
            "tokens_per_s": c.capacity.tokens_per_s,
            **_replica_buckets(c),
            **_replica_layout(w, c),
        }
        for c in cl
    ]
    return WorkloadResult(
        name=w.name,
        kind="serve",
        model=w.model,
        gpu=sorted({c.gpu for c in cl}),
        gpus=int(round(serving.peak_gpus[w.name] + 0.4999)),
        config={
            "precision": w.precision,
            "replicas": replicas,
            "demand_covered": covered,
            "max_load": w.slo.max_load,
            "redundancy": w.redundancy,
            **_request_mix(w),
        },
        cost_usd=cost,
        cost_share=0.0,
        meets_target=covered and ttft <= w.slo.p95_ttft_ms and tpot <= w.slo.p95_tpot_ms,
        predicted=predicted,
        target=target,
        slack={k: target[k] - predicted[k] for k in target},
        tokens=tokens,
        usd_per_1m_tokens=cost / tokens * 1e6 if tokens else None,
    )


def read_workloads(
    ctx: ReadContext,
    training: Training,
    serving: Serving,
    costs: CostShares,
    total_usd: float,
) -> list[WorkloadResult]:
    """Workloads section: training jobs (those with a chosen candidate), then serving
    workloads, each with its share of the plan's total cost."""
    results = [
        _train_result(ctx, job, training.choice[job.name], training, costs)
        for job in ctx.problem.workloads.train
        if job.name in training.choice
    ]
    served = _served_rps(serving)
    results += [_serve_result(ctx, w, serving, served, costs) for w in ctx.problem.workloads.serve]
    for r in results:
        r.cost_share = r.cost_usd / total_usd if total_usd else 0.0
    return results
