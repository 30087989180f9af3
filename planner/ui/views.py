"""A plan as the data the web page shows: pure functions of :class:`~planner.plan.data.Plan`.

Every sentence comes from :mod:`planner.reports.plan_facts` (the workbook's page 1 says the
same); every figure is the plan's own (``planner solve --json`` has the same numbers). Charts
are Plotly figure specifications (plain dicts the page hands to ``Plotly.newPlot``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner.plan.data import Plan
from planner.reports.plan_facts import decision_sentences, offer_terms_of
from planner.reports.terminal import target_lines


def usd(x: float | None) -> str:
    """Dollars, whole, with thousands separators; a dash for nothing.

    >>> usd(670742.6), usd(-14160.2), usd(None)
    ('$670,743', '-$14,160', '-')
    """
    if x is None:
        return "-"
    return f"-${-x:,.0f}" if x < 0 else f"${x:,.0f}"


def status_line(plan: Plan) -> str:
    """``optimal, gap 0.098 %, solved in 7.0 s (highs)``: how sure the plan is.

    The gap is measured against the solver's proven lower bound of the planning model."""
    gap = "gap unknown" if plan.gap is None else f"gap {plan.gap:.3%} to the proven bound"
    return f"{plan.status}, {gap}, solved in {plan.solve_seconds:.1f} s ({plan.solver})"


def cost_rows(plan: Plan) -> list[tuple[str, str]]:
    """The cost breakdown: each part of the cash total, the total, the present value."""
    t = plan.totals
    rows = [
        ("Purchases (capex)", usd(t.capex_usd)),
        ("Power", usd(t.power_usd)),
        ("Hosting", usd(t.hosting_usd)),
        ("Rentals", usd(t.rental_usd)),
    ]
    if t.reserved_usd:
        rows.append(("  of which reserved commitments", usd(t.reserved_usd)))
    if t.committed_usd:
        rows.append(("Contracts signed before the plan", usd(t.committed_usd)))
    if t.sale_proceeds_usd:
        rows.append(("GPUs sold", usd(-t.sale_proceeds_usd)))
    rows.append(("Total cash", usd(t.total_usd)))
    if t.npv_usd is not None:
        rows.append((f"Present value at {plan.discount_rate:.1%} a year", usd(t.npv_usd)))
    if t.residual_value_usd:
        rows.append(
            ("Resale value at the horizon end (in the present value)", usd(t.residual_value_usd))
        )
    if t.capex_budget_usd is not None:
        rows.append(("Capex budget", usd(t.capex_budget_usd)))
    if t.total_budget_usd is not None:
        rows.append(("Total budget", usd(t.total_budget_usd)))
    return rows


def purchase_rows(plan: Plan) -> list[dict[str, str]]:
    """One row per purchase: order and service months, GPU, cards, servers, price."""
    return [
        {
            "ordered": p.order_month,
            "in_service": p.month,
            "gpu": p.gpu,
            "gpus": f"{p.count:,}",
            "servers": f"{p.nodes:,}",
            "unit": usd(p.unit_usd),
            "total": usd(p.total_usd),
        }
        for p in plan.purchases
    ]


def rental_rows(plan: Plan) -> list[dict[str, str]]:
    """One row per (workload, offer): months rented, GPU-hours, cost, and how the offer is paid
    and its price's date (the workbook's words); dearest first."""
    agg: dict[tuple[str, str], dict[str, Any]] = {}
    for r in plan.rentals:
        row = agg.setdefault(
            (r.workload, r.offer),
            {"provider": r.provider, "gpu": r.gpu, "kind": r.kind, "hours": 0.0, "usd": 0.0,
             "months": []},
        )  # fmt: skip
        row["hours"] += r.gpu_hours
        row["usd"] += r.usd
        row["months"].append(r.month)
    out = []
    for (workload, offer), row in sorted(agg.items(), key=lambda kv: -kv[1]["usd"]):
        months = sorted(set(row["months"]))
        span = months[0] if len(months) == 1 else f"{months[0]} to {months[-1]}"
        out.append(
            {
                "workload": workload,
                "provider": row["provider"],
                "offer": offer,
                "gpu": row["gpu"],
                "kind": row["kind"].replace("_", "-"),
                "months": span,
                "gpu_hours": f"{row['hours']:,.0f}",
                "cost": usd(row["usd"]),
                "terms": offer_terms_of(plan, offer),
            }
        )
    return out


def workload_rows(plan: Plan) -> list[dict[str, Any]]:
    """Each workload's predicted figures against its targets, and whether it meets them."""
    return [
        {
            "name": w.name,
            "kind": w.kind,
            "gpus": ", ".join(w.gpu),
            "peak_gpus": w.gpus,
            "checks": target_lines(w),
            "meets": w.meets_target,
            "cost": usd(w.cost_usd),
            "share": f"{w.cost_share:.0%}",
        }
        for w in plan.workloads
    ]


def fleet_figure(plan: Plan) -> dict[str, Any]:
    """GPUs per type per month, stacked: owned, reserved or committed, and rented (the
    month's rented GPU-hours over its hours: the average number of GPUs rented)."""
    series: dict[str, dict[str, float]] = defaultdict(dict)
    for f in plan.fleet:
        series[f"{f.gpu} owned"][f.month] = f.owned
        series[f"{f.gpu} reserved"][f.month] = f.reserved
        series[f"{f.gpu} rented (average)"][f.month] = f.rented_gpu_hours / plan.hours_per_month
    data = [
        {"type": "bar", "name": name, "x": plan.months, "y": [by.get(m, 0.0) for m in plan.months]}
        for name, by in sorted(series.items())
        if any(v > 1e-9 for v in by.values())
    ]
    layout = {
        "barmode": "stack",
        "title": {"text": "GPUs in the plan, per month", "y": 0.98},
        "xaxis": {"title": {"text": "month"}, "type": "category"},
        "yaxis": {"title": {"text": "GPUs"}},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "margin": {"t": 70, "r": 10},
    }
    return {"data": data, "layout": layout}


def scenario_rows(plan: Plan) -> list[dict[str, str]]:
    """A two-stage plan's scenarios: probability and cost under the plan's purchases."""
    return [
        {
            "name": s.name,
            "probability": f"{s.probability:.0%}",
            "cost": usd(s.cost_usd),
            "own": usd(s.own_usd),
            "regret": usd(s.regret_usd),
        }
        for s in plan.scenarios
    ]


def plan_view(plan: Plan) -> dict[str, Any]:
    """Everything the plan page shows of one plan."""
    return {
        "name": plan.problem_name,
        "source": plan.problem_file,
        "status": status_line(plan),
        "decision": decision_sentences(plan),
        "costs": cost_rows(plan),
        "purchases": purchase_rows(plan),
        "rentals": rental_rows(plan),
        "workloads": workload_rows(plan),
        "binding": list(plan.binding),
        "scenarios": scenario_rows(plan),
        "fleet": fleet_figure(plan),
        "npv": plan.totals.npv_usd,
        "total": plan.totals.total_usd,
        "gap": plan.gap,
    }


def bought(plan: Plan) -> dict[str, int]:
    """GPUs bought per type over the horizon."""
    out: dict[str, int] = defaultdict(int)
    for p in plan.purchases:
        out[p.gpu] += p.count
    return dict(out)


def rented_hours(plan: Plan) -> dict[str, float]:
    """GPU-hours rented per GPU type and kind (``h100-sxm on-demand``)."""
    out: dict[str, float] = defaultdict(float)
    for r in plan.rentals:
        out[f"{r.gpu} {r.kind.replace('_', '-')}"] += r.gpu_hours
    return dict(out)


def _delta_rows(base: dict[str, float], new: dict[str, float], fmt: str) -> list[dict[str, str]]:
    rows = []
    for key in sorted(set(base) | set(new)):
        b, n = base.get(key, 0), new.get(key, 0)
        if abs(n - b) > 1e-6 * max(1.0, abs(b)):
            rows.append({"what": key, "base": fmt.format(b), "new": fmt.format(n),
                         "change": ("+" if n > b else "") + fmt.format(n - b)})  # fmt: skip
    return rows


def compare_view(base: Plan, new: Plan) -> dict[str, Any]:
    """What changed from ``base`` to ``new``: present value and cash, purchases per GPU
    type, rented GPU-hours per type and kind, and each plan's gap."""
    b, n = base.totals, new.totals
    cost = []
    for label, x, y in (
        ("Present value", b.npv_usd, n.npv_usd),
        ("Total cash", b.total_usd, n.total_usd),
        ("Purchases (capex)", b.capex_usd, n.capex_usd),
        ("Rentals", b.rental_usd, n.rental_usd),
        ("Power", b.power_usd, n.power_usd),
    ):
        change = None if x is None or y is None else y - x
        pct = "" if not change or not x else f" ({change / abs(x):+.1%})"
        cost.append({"what": label, "base": usd(x), "new": usd(y),
                     "change": "-" if change is None else usd(change) + pct})  # fmt: skip
    return {
        "cost": cost,
        "purchases": _delta_rows(bought(base), bought(new), "{:,.0f}"),
        "rentals": _delta_rows(rented_hours(base), rented_hours(new), "{:,.0f}"),
        "gaps": (status_line(base), status_line(new)),
        "same_purchases": bought(base) == bought(new)
        and [(p.gpu, p.month, p.count) for p in base.purchases]
        == [(p.gpu, p.month, p.count) for p in new.purchases],
    }


def frontier_figure(fronts: dict[str, Any], title: str) -> dict[str, Any]:
    """Output tokens/s per GPU against tokens/s per user, one line per GPU type, each point's
    layout and cost per million output tokens (owned; rented where an offer holds it) on hover.
    ``fronts``: :func:`planner.analysis.frontier.frontiers`' result."""
    data = []
    for gid, f in fronts.items():
        if not f.serves:
            continue
        text = [
            f"{p.layout}, batch {p.batch}<br>owned ${p.owned_usd_per_mtok:,.3f}/M tokens"
            + (
                f"<br>rented ${p.rental_usd_per_mtok:,.3f}/M tokens ({p.rental_offer})"
                if p.rental_usd_per_mtok is not None
                else ""
            )
            for p in f.points
        ]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{gid} ({f.precision})",
                "x": [p.tokens_per_s_per_user for p in f.points],
                "y": [p.tokens_per_s_per_gpu for p in f.points],
                "text": text,
                "hovertemplate": "%{x:.1f} tok/s/user, %{y:,.0f} tok/s/GPU<br>%{text}<extra>"
                + gid
                + "</extra>",
            }
        )
    layout = {
        "title": {"text": title, "y": 0.98},
        "xaxis": {"title": {"text": "output tokens/s per user"}},
        "yaxis": {"title": {"text": "output tokens/s per GPU"}},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "margin": {"t": 80, "r": 10},
    }
    return {"data": data, "layout": layout}
