"""Stage 5, the accounting: the Plan's money views from the records the readers produced.

Cash flow per month and the horizon's totals, each purchase's depreciation, the plan years'
cash and P&L views with present value, and each workload's share of the cost. Pure functions
on plain data (month labels, catalog figures, Plan rows): no solver and no model, so the
same figures follow from the same rows, added up in the same order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from planner.inputs.catalog import GpuSpec, Offer
from planner.inputs.finance import FinanceTerms
from planner.inputs.problem import Budget
from planner.physics import economics
from planner.physics.demand import LoadSlice
from planner.plan.data import (
    Depreciation,
    MonthCost,
    Purchase,
    Rental,
    Reservation,
    ServeAllocation,
    Totals,
    YearCost,
)


def _month_index(months: list[str]) -> dict[str, int]:
    """Month label -> its index t in the horizon."""
    return {label: t for t, label in enumerate(months)}


# ------------------------------------------------------------------ cash flow


def cash_flow(
    months: list[str],
    budget: Budget,
    purchases: list[Purchase],
    rentals: list[Rental],
    reservations: list[Reservation],
    *,
    power_usd: list[float],
    hosting_usd: list[float],
    committed_usd: list[float],
    sales_usd: list[float],
) -> tuple[list[MonthCost], Totals]:
    """Cash flow section: USD per month by kind (capex when bought, power, hosting, rentals
    including reserved commitments) with the running total; and the horizon's totals. The
    per-month lists are the owned fleet's power and hosting, contracts and sales of existing
    GPUs (cash in)."""
    month_idx = _month_index(months)
    T = len(months)
    capex, rental = [0.0] * T, [0.0] * T
    for r in rentals:
        rental[month_idx[r.month]] += r.usd
    for pch in purchases:
        capex[month_idx[pch.paid_month]] += pch.total_usd  # paid at order or delivery
    cash: list[MonthCost] = []
    running = 0.0
    for t in range(T):
        committed, sales = committed_usd[t], sales_usd[t]
        tot = capex[t] + power_usd[t] + hosting_usd[t] + rental[t] + committed - sales
        running += tot
        cash.append(
            MonthCost(
                month=months[t],
                capex_usd=capex[t],
                power_usd=power_usd[t],
                hosting_usd=hosting_usd[t],
                rental_usd=rental[t],
                total_usd=tot,
                cumulative_usd=running,
                committed_usd=committed,
                sales_usd=sales,
            )
        )
    totals = Totals(
        capex_usd=sum(c.capex_usd for c in cash),
        power_usd=sum(c.power_usd for c in cash),
        hosting_usd=sum(c.hosting_usd for c in cash),
        rental_usd=sum(c.rental_usd for c in cash),
        committed_usd=sum(committed_usd),
        sale_proceeds_usd=sum(sales_usd),
        total_usd=running,
        reserved_usd=sum(r.usd for r in reservations),
        capex_budget_usd=budget.capex_usd,
        total_budget_usd=budget.total_usd,
    )
    return cash, totals


# ------------------------------------------------------------------ finance views


def _depreciation(p: Purchase, gpu: GpuSpec, t: int, T: int, fin: FinanceTerms) -> Depreciation:
    """One purchase (of ``gpu``, in month ``t`` of ``T``) straight-line depreciation per plan
    year, its book value and its residual (resale) value at the horizon end."""
    age = T - t
    card = economics.residual_share(gpu, age, fin.residual, fin.depreciation_years)
    chassis = economics.chassis_residual_share(age, fin.residual, fin.depreciation_years)
    return Depreciation(
        gpu=p.gpu,
        month=p.month,
        capex_usd=p.total_usd,
        years=fin.depreciation_years,
        by_year_usd=economics.depreciation_by_year(p.total_usd, t, fin.depreciation_years, T),
        book_value_end_usd=economics.book_value(p.total_usd, age, fin.depreciation_years),
        residual_value_usd=p.count * p.gpu_usd * card + p.nodes * p.chassis_usd * chassis,
    )


def _year_cost(
    labels: list[str],
    fin: FinanceTerms,
    y: int,
    cash: list[MonthCost],
    deps: list[Depreciation],
    existing: float,
) -> YearCost:
    """One plan year (``labels``: the horizon's month labels); ``existing`` is the existing
    GPUs' value at the horizon end (in the cash view's residual; their depreciation and gains
    stay outside the plan's P&L)."""
    T = len(labels)
    months = range(12 * y, min(T, 12 * y + 12))
    last = months[-1] == T - 1
    bought = sum(d.residual_value_usd for d in deps) if last else 0.0
    residual = bought + (existing if last else 0.0)
    book = sum(d.book_value_end_usd for d in deps) if last else 0.0
    gain = bought - book if last and fin.residual != "none" else 0.0
    dep = sum(d.by_year_usd[y] for d in deps)
    part = {k: sum(getattr(cash[t], k) for t in months) for k in _CASH_KINDS}
    committed = sum(cash[t].committed_usd for t in months)
    sales = sum(cash[t].sales_usd for t in months)
    pv = sum(cash[t].total_usd * economics.discount_factor(fin.discount_rate, t) for t in months)
    if last:
        pv -= residual * economics.discount_factor(fin.discount_rate, T)
    opex = part["power_usd"] + part["hosting_usd"] + part["rental_usd"] + committed
    return YearCost(
        year=y + 1,
        first_month=labels[months[0]],
        last_month=labels[months[-1]],
        **part,
        committed_usd=committed,
        sales_usd=sales,
        residual_usd=residual,
        cash_usd=sum(part.values()) + committed - sales - residual,
        pv_usd=pv,
        depreciation_usd=dep,
        gain_on_sale_usd=gain,
        pnl_cost_usd=dep + opex - gain,
    )


_CASH_KINDS = ("capex_usd", "power_usd", "hosting_usd", "rental_usd")


def finance_views(
    months: list[str],
    gpus: Mapping[str, GpuSpec],
    fin: FinanceTerms,
    purchases: list[Purchase],
    cash: list[MonthCost],
    totals: Totals,
    existing_residual: float = 0.0,
) -> tuple[list[YearCost], list[Depreciation], Totals]:
    """Per-year cash and P&L views, each purchase's depreciation, and the totals' present
    value, residual value and book value (:mod:`planner.physics.economics` conventions)."""
    month_idx, T = _month_index(months), len(months)
    deps = [_depreciation(p, gpus[p.gpu], month_idx[p.month], T, fin) for p in purchases]
    n_years = (len(months) + 11) // 12
    years = [_year_cost(months, fin, y, cash, deps, existing_residual) for y in range(n_years)]
    totals = totals.model_copy(
        update={
            "npv_usd": sum(y.pv_usd for y in years),
            "residual_value_usd": sum(d.residual_value_usd for d in deps) + existing_residual,
            "book_value_usd": sum(d.book_value_end_usd for d in deps),
        }
    )
    return years, deps, totals


# ------------------------------------------------------------------ each workload's share


@dataclass
class CostShares:
    """Each workload's cost (USD): its own rentals; owned costs (capex, idle power, hosting,
    busy power) shared among the workloads in proportion to the owned GPU-hours each used on
    that GPU type; reserved commitments shared in proportion to reserved GPU-hours used."""

    gpus: list[str]
    owned_hours: dict[tuple[str, str], float]  # (workload, gpu) -> owned GPU-hours
    busy_total: defaultdict[str, float]  # gpu -> owned GPU-hours of all workloads
    fixed_by_gpu: dict[str, float]
    power_by_gpu: dict[str, float]
    reserved_use: defaultdict[tuple[str, str], float]  # (workload, gpu) -> reserved GPU-hours
    reserved_use_total: defaultdict[str, float]  # gpu -> reserved GPU-hours of all workloads
    reserved_cost_by_gpu: defaultdict[str, float]  # gpu -> reserved commitments, USD
    rent_by_workload: defaultdict[str, float]  # workload -> rentals charged to it, USD

    def cost(self, w: str) -> float:
        cost = self.rent_by_workload[w]
        for g in self.gpus:
            h = self.owned_hours.get((w, g), 0.0)
            if h and self.busy_total[g]:
                cost += (
                    self.fixed_by_gpu[g] * h / self.busy_total[g]
                    + self.power_by_gpu[g] * h / self.busy_total[g]
                )
            rh = self.reserved_use.get((w, g), 0.0)
            if rh and self.reserved_use_total[g]:
                cost += self.reserved_cost_by_gpu[g] * rh / self.reserved_use_total[g]
        return cost


def cost_shares(
    gpus: list[str],
    offers: Mapping[str, Offer],
    slices: list[LoadSlice],
    serve_allocations: list[ServeAllocation],
    reservations: list[Reservation],
    rentals: list[Rental],
    *,
    owned_hours: dict[tuple[str, str], float],
    fixed_by_gpu: dict[str, float],
    power_by_gpu: dict[str, float],
) -> CostShares:
    """The shares of :class:`CostShares`, from owned and reserved GPU-hours per workload:
    ``owned_hours`` per (workload, GPU type) as the allocation readers added them up, the
    fleet's fixed and busy-power USD per GPU type."""
    out = CostShares(
        gpus=gpus,
        owned_hours=owned_hours,
        busy_total=defaultdict(float),
        fixed_by_gpu=fixed_by_gpu,
        power_by_gpu=power_by_gpu,
        reserved_use=defaultdict(float),
        reserved_use_total=defaultdict(float),
        reserved_cost_by_gpu=defaultdict(float),
        rent_by_workload=defaultdict(float),
    )
    for (_w, g), h in owned_hours.items():
        out.busy_total[g] += h
    for r in reservations:
        out.reserved_cost_by_gpu[r.gpu] += r.usd
    for a in serve_allocations:
        if a.source != "owned" and offers[a.source].kind == "reserved":
            sl = next(x for x in slices if x.name == a.slice)
            out.reserved_use[(a.workload, a.gpu)] += (
                a.replicas * a.gpus_per_replica * sl.hours_per_month
            )
    for (_w, g), h in out.reserved_use.items():
        out.reserved_use_total[g] += h
    for r in rentals:
        out.rent_by_workload[r.workload] += r.usd
    return out
