"""Stage 5: read a solved model into a :class:`~planner.plan.data.Plan` (pure data).

Everything monetary is recomputed here from variable values and catalog coefficients with
the same formulas as the objective, so the Plan's totals can be checked against the
solver's objective (they must agree to rounding).

The Plan is read one section at a time, each by its own reader: purchases; serving and
training allocations; rentals (:mod:`planner.plan.readout`); reservations, the existing fleet,
fleet and power (:mod:`planner.plan.fleet`); cash flow, finance views and cost shares
(:mod:`planner.plan.accounting`); per-workload results (:mod:`planner.plan.workloads`);
assumptions (:mod:`planner.plan.assumptions`). :func:`extract_plan` composes them, in an order
that keeps every sum added up as before, so the Plan is reproducible to the bit.
"""

from __future__ import annotations

import dataclasses

from planner import __version__
from planner.optimize.model import PlannerModel
from planner.optimize.solve import SolveResult
from planner.physics.demand import HOURS_PER_MONTH
from planner.plan.accounting import cash_flow, cost_shares, finance_views
from planner.plan.assumptions import GPU_FIELDS, HEADROOM_SOURCE, gpu_assumptions, read_assumptions
from planner.plan.data import Dropped, Plan, Slice
from planner.plan.fleet import read_existing, read_fleet, read_reservations
from planner.plan.readout import (
    EPS,
    Usage,
    read_context,
    read_purchases,
    read_rentals,
    read_serving,
    read_training,
)
from planner.plan.workloads import read_workloads

# Names this module exported before it was split, still importable from here.
__all__ = ["EPS", "GPU_FIELDS", "HEADROOM_SOURCE", "extract_plan", "gpu_assumptions"]


def extract_plan(m: PlannerModel, result: SolveResult) -> Plan:
    """Read the solved model ``m`` into a Plan, section by section."""
    ctx = read_context(m)
    usage = Usage()
    buys = read_purchases(ctx)
    serving = read_serving(ctx, usage)
    training = read_training(ctx, usage)
    reserved = read_reservations(ctx)
    # Reserved rows after the others: the commitment is paid whether used or not.
    rentals = read_rentals(ctx, usage.rent_hours) + reserved.rentals
    existing = read_existing(ctx)
    fleet = read_fleet(ctx, buys, usage.busy, rentals, reserved.active, existing)
    cash, totals = cash_flow(
        ctx.months,
        ctx.problem.budget,
        buys.purchases,
        rentals,
        reserved.reservations,
        power_usd=fleet.power_usd,
        hosting_usd=fleet.hosting_usd,
        committed_usd=existing.committed_usd,
        sales_usd=existing.sales_usd,
    )
    years, deps, totals = finance_views(
        ctx.months,
        ctx.inputs.gpus,
        ctx.inputs.finance,
        buys.purchases,
        cash,
        totals,
        existing.residual_usd,
    )
    costs = cost_shares(
        list(ctx.inputs.gpus),
        ctx.cands.offers,
        ctx.slices,
        serving.allocations,
        reserved.reservations,
        rentals,
        owned_hours=usage.owned_hours,
        fixed_by_gpu=fleet.fixed_by_gpu,
        power_by_gpu=fleet.power_by_gpu,
    )
    p, inputs = ctx.problem, ctx.inputs
    return Plan(
        planner_version=__version__,
        problem_name=p.name,
        problem_file=inputs.source_path,
        problem_sha256=inputs.source_sha256,
        status=result.status,  # type: ignore[arg-type]
        objective_usd=result.objective,
        gap=result.gap,
        solve_seconds=result.seconds,
        solver=result.solver,
        message=result.message,
        repair_usd=result.repair_usd,
        repair_bound_usd=result.repair_bound_usd,
        horizon_start=p.horizon.start,
        months=ctx.months,
        hours_per_month=HOURS_PER_MONTH,
        slices=[
            Slice(name=s.name, hours_per_month=s.hours_per_month, load=s.load) for s in ctx.slices
        ],
        totals=totals,
        purchases=buys.purchases,
        sales=existing.sales,
        existing=existing.entries,
        commitments=existing.commitments,
        rentals=rentals,
        reservations=reserved.reservations,
        fleet=fleet.fleet,
        cash_flow=cash,
        years=years,
        depreciation=deps,
        discount_rate=ctx.inputs.finance.discount_rate,
        residual_mode=ctx.inputs.finance.residual,
        workloads=read_workloads(ctx, training, serving, costs, totals.total_usd),
        serve_allocations=serving.allocations,
        train_allocations=training.allocations,
        dropped=[Dropped(**dataclasses.asdict(d)) for d in ctx.cands.dropped],
        assumptions=read_assumptions(ctx, result, rentals),
    )
