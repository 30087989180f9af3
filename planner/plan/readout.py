"""Stage 5, first step: read the solved model's variable values into plain records.

Purchases (whole servers and their cards), serving and training allocations and rentals, each
read by its own reader from a solved :class:`~planner.optimize.model.PlannerModel`. Values
several readers need (month labels, slices) are derived once in a :class:`ReadContext`;
GPU-hours the allocation readers accumulate go into one :class:`Usage`, so each sum is added
up in the same order as before and the Plan is reproducible to the bit. The existing fleet,
reservations and the fleet's power are read in :mod:`planner.plan.fleet`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pulp

from planner.base import tolerances as tol
from planner.inputs.catalog import GpuSpec
from planner.inputs.problem import Inputs, Problem
from planner.optimize.candidates import (
    Candidates,
    ServeCandidate,
    progress_per_wall_hour,
    rental_gpus,
)
from planner.optimize.model import PlannerModel
from planner.optimize.model.core import buy_factor, capex_month, rent_factor
from planner.physics.demand import LoadSlice
from planner.plan.data import Purchase, Rental, ServeAllocation, ServeLayout, TrainAllocation

EPS = tol.INTEGRALITY


def var_value(x: Any) -> float:
    """A variable's (or expression's) value in the solution; 0 when it has none."""
    val = pulp.value(x)
    return float(val) if val is not None else 0.0


def var_int(x: Any) -> int:
    """A variable's value rounded to a whole number (servers, cards, replicas)."""
    return int(round(var_value(x)))


# ------------------------------------------------------------------ shared state of the readers


@dataclass(frozen=True)
class ReadContext:
    """What every reader needs, derived once from the solved model."""

    m: PlannerModel
    months: list[str]  # month labels (YYYY-MM); a month's index t is its position
    month_idx: dict[str, int]  # month label -> t
    slices: list[LoadSlice]  # the day's load slices, hours per month each

    @property
    def inputs(self) -> Inputs:
        return self.m.inputs

    @property
    def cands(self) -> Candidates:
        return self.m.cands

    @property
    def problem(self) -> Problem:
        return self.m.inputs.problem


def read_context(m: PlannerModel) -> ReadContext:
    months = m.cands.months
    return ReadContext(
        m=m,
        months=months,
        month_idx={label: t for t, label in enumerate(months)},
        slices=m.cands.slices,
    )


def _hours() -> defaultdict[Any, float]:
    return defaultdict(float)


@dataclass
class Usage:
    """GPU-hours added up by the allocation readers, serving first, then training.

    Shared (not summed per reader and merged) because float addition is not associative: the
    Plan's figures depend on the order of the additions, which is kept.
    """

    # (gpu, t) -> owned GPU-hours in use
    busy: defaultdict[tuple[str, int], float] = field(default_factory=_hours)
    # (workload, gpu) -> owned GPU-hours the workload used
    owned_hours: defaultdict[tuple[str, str], float] = field(default_factory=_hours)
    # (offer, workload, t) -> rented GPU-hours, on-demand and spot only
    rent_hours: defaultdict[tuple[str, str, int], float] = field(default_factory=_hours)


# ------------------------------------------------------------------ purchases


@dataclass
class Purchases:
    purchases: list[Purchase]
    owned: dict[tuple[str, int], int]  # (gpu, t) -> GPUs owned in month t (bought up to t)
    bought: dict[tuple[str, int], int]  # (gpu, t) -> GPUs bought in month t
    servers: dict[tuple[str, int], int]  # (gpu, t) -> servers owned in month t


def read_purchases(ctx: ReadContext) -> Purchases:
    """Purchases section: whole servers and the cards in them per GPU type and month (a full
    server comes with its cards; a partial one is filled card by card)."""
    out = Purchases([], {}, {}, {})
    for g, gpu in ctx.inputs.gpus.items():
        total = servers_total = 0
        for t in range(len(ctx.months)):
            servers = var_int(ctx.m.buy[(g, t)])
            count = var_int(ctx.m.cards[(g, t)])
            total += count
            servers_total += servers
            out.owned[(g, t)] = total
            out.bought[(g, t)] = count
            out.servers[(g, t)] = servers_total
            if servers or count:
                order, paid = capex_month(ctx.m, g, t)
                p = _purchase(ctx.months[t], gpu, servers, count, buy_factor(ctx.m, g, order))
                out.purchases.append(
                    p.model_copy(
                        update={
                            "ordered": ctx.months[order],
                            "in_service": ctx.months[t],
                            "capex_month": ctx.months[paid],
                        }
                    )
                )
    return out


def _purchase(month: str, gpu: GpuSpec, servers: int, count: int, price: float) -> Purchase:
    """One month's purchase of a GPU type; ``price`` is its order month's factor on the GPU's
    price path (card and server alike)."""
    chassis_usd, gpu_usd = gpu.chassis_usd * price, gpu.purchase_usd.value * price
    chassis = servers * chassis_usd
    total = chassis + count * gpu_usd
    return Purchase(
        gpu=gpu.id,
        month=month,
        count=count,
        nodes=servers,
        server=gpu.server or f"{gpu.id} node",
        slots=gpu.slots,
        chassis_usd=chassis_usd,
        unit_usd=total / count if count else total,
        gpu_usd=gpu_usd,
        overhead_usd=chassis / count if count else chassis,
        total_usd=total,
    )


# ------------------------------------------------------------------ serving allocations


@dataclass
class Serving:
    allocations: list[ServeAllocation]
    used: defaultdict[str, set[str]]  # workload -> keys of the candidates with any replica
    peak_gpus: defaultdict[str, float]  # workload -> most GPUs in use in one (month, slice)


def _bucket_fields(
    ctx: ReadContext, w: str, c: ServeCandidate, t: int, s: int, replicas: float, of_type: float
) -> dict:
    """A mix's per-bucket rates and the capacity these replicas give each bucket: the type's
    pooled capacity (owned and rented replicas of one type share it; ``of_type`` replicas of
    it in the cell) split in proportion to replicas."""
    if not c.mixed:
        return {}
    rates = {b.bucket: b.rate for b in c.buckets}
    part = replicas / of_type if of_type else 0.0
    given = {}
    for b in rates:
        v = ctx.m.alloc.get((w, b, c.key, t, s))
        given[b] = max(var_value(v), 0.0) * part if v is not None else 0.0
    return {"bucket_rates_rps": rates, "bucket_capacity_rps": given}


def _replicas_per_type(ctx: ReadContext) -> defaultdict[tuple[str, str, int, int], int]:
    """Whole replicas per (workload, replica type, month, slice), owned and rented."""
    out: defaultdict[tuple[str, str, int, int], int] = defaultdict(int)
    for (w, key, t, s), x in ctx.m.n.items():
        out[(w, key, t, s)] += var_int(x)
    for (w, key, _oid, t, s), x in ctx.m.q.items():
        out[(w, key, t, s)] += var_int(x)
    return out


def _serve_allocation(
    ctx: ReadContext,
    w: str,
    c: ServeCandidate,
    t: int,
    s: int,
    source: str,
    replicas: float,
    of_type: float = 0.0,
) -> ServeAllocation:
    return ServeAllocation(
        **_bucket_fields(ctx, w, c, t, s, replicas, of_type),
        workload=w,
        month=ctx.months[t],
        slice=ctx.slices[s].name,
        gpu=c.gpu,
        gpus_per_replica=c.tp,
        rate_rps_per_replica=c.rate_rps,
        layout=ServeLayout(**c.layout),
        source=source,
        replicas=replicas,
        demand_rps=ctx.cands.demand[(w, t, s)],
    )


def read_serving(ctx: ReadContext, usage: Usage) -> Serving:
    """Serving allocations: whole replicas per (workload, month, slice) on owned GPUs (``n``)
    and offers (``q``, made whole by the solve's repair step). Adds owned busy GPU-hours and rented (not reserved) GPU-hours
    to ``usage``."""
    out = Serving([], defaultdict(set), defaultdict(float))
    gpus_in_use: defaultdict[tuple[str, int, int], float] = defaultdict(float)
    per_type = _replicas_per_type(ctx) if ctx.m.alloc else defaultdict(int)
    for (w, key, t, s), n in ctx.m.n.items():
        c = ctx.m.serve_cand(w, key)
        val = var_int(n)
        if val:
            out.allocations.append(
                _serve_allocation(ctx, w, c, t, s, "owned", val, per_type[(w, key, t, s)])
            )
            gh = val * c.tp * ctx.slices[s].hours_per_month
            usage.busy[(c.gpu, t)] += gh
            usage.owned_hours[(w, c.gpu)] += gh
            out.used[w].add(key)
            gpus_in_use[(w, t, s)] += val * c.tp
    for (w, key, oid, t, s), q in ctx.m.q.items():
        c = ctx.m.serve_cand(w, key)
        val = var_int(q)
        if val:
            out.allocations.append(
                _serve_allocation(ctx, w, c, t, s, oid, val, per_type[(w, key, t, s)])
            )
            # Reserved capacity is paid per reservation, whatever runs on it.
            if ctx.cands.offers[oid].kind != "reserved":
                usage.rent_hours[(oid, w, t)] += val * c.tp * ctx.slices[s].hours_per_month
            out.used[w].add(key)
            gpus_in_use[(w, t, s)] += val * c.tp
    for (w, _t, _s), g in gpus_in_use.items():
        out.peak_gpus[w] = max(out.peak_gpus[w], g)
    return out


# ------------------------------------------------------------------ training allocations


@dataclass
class Training:
    allocations: list[TrainAllocation]
    choice: dict[str, str]  # job -> key of the chosen candidate (GPU type and count)
    wall: defaultdict[str, float]  # job -> wall hours run, owned and rented


def read_training(ctx: ReadContext, usage: Usage) -> Training:
    """Training allocations: each job's chosen candidate, its owned wall hours per (month,
    slice) (``z``), then its rented wall hours per month. Adds owned busy GPU-hours and rented
    GPU-hours to ``usage``."""
    m = ctx.m
    out = Training([], {}, defaultdict(float))
    for job, clist in ctx.cands.train.items():
        for c in clist:
            if var_value(m.y.get((job, c.key), 0)) > 0.5:
                out.choice[job] = c.key
    for (job, key, t, s), z in m.z.items():
        val = var_value(z)
        if val > EPS:
            c = m.train_cand(job, key)
            out.allocations.append(
                TrainAllocation(
                    workload=job,
                    month=ctx.months[t],
                    slice=ctx.slices[s].name,
                    gpu=c.gpu,
                    gpus=c.gpus,
                    source="owned",
                    wall_hours=val,
                    progress_hours=val,
                )
            )
            usage.busy[(c.gpu, t)] += val * c.gpus
            usage.owned_hours[(job, c.gpu)] += val * c.gpus
            out.wall[job] += val
    for job, key in out.choice.items():
        _place_rented_training(ctx, usage, out, job, key)
    return out


def _place_rented_training(
    ctx: ReadContext, usage: Usage, out: Training, job: str, key: str
) -> None:
    """Rented wall hours (``r``) of one job, per offer and month as the model placed them.
    Spot hours make less progress (restart overhead)."""
    m, cands, months = ctx.m, ctx.cands, ctx.months
    c = m.train_cand(job, key)
    job_spec = next(j for j in ctx.problem.workloads.train if j.name == job)
    for (jj, kk, oid, t), r in sorted(
        m.r.items(), key=lambda kv: (kv[0][3], cands.offers[kv[0][2]].kind, kv[0][2])
    ):
        take = var_value(r)
        if jj != job or kk != key or take <= EPS:
            continue
        o = cands.offers[oid]
        rate = progress_per_wall_hour(c, job_spec, o) or 0.0
        out.wall[job] += take
        out.allocations.append(
            TrainAllocation(
                workload=job,
                month=months[t],
                slice=None,
                gpu=c.gpu,
                gpus=c.gpus,
                source=oid,
                wall_hours=take,
                progress_hours=take * rate,
            )
        )
        usage.rent_hours[(oid, job, t)] += take * rental_gpus(c.gpus, o)


# ------------------------------------------------------------------ rentals and reservations


def read_rentals(ctx: ReadContext, rent_hours: dict[tuple[str, str, int], float]) -> list[Rental]:
    """Rentals section, on-demand and spot: GPU-hours and USD per (offer, workload, month),
    sorted by month, offer, workload."""
    out = []
    for (oid, w, t), gh in sorted(
        rent_hours.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])
    ):
        o = ctx.cands.offers[oid]
        # a contract's hours are paid in committed_usd, whatever is used: $0 at the margin;
        # other rentals cost their month's price on the GPU's path
        price = o.marginal_in(ctx.months[t]) * rent_factor(ctx.m, o.gpu, t)
        out.append(
            Rental(
                provider=o.provider,
                offer=oid,
                gpu=o.gpu,
                kind="committed" if o.committed else o.kind,
                month=ctx.months[t],
                workload=w,
                gpu_hours=gh,
                usd_per_gpu_hour=price,
                usd=gh * price,
            )
        )
    return out
