"""Short terminal summary of a Plan (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from planner.plan import Plan


def usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.0f}"


def print_summary(plan: Plan, console: Console | None = None) -> None:
    c = console or Console()
    gap = "-" if plan.gap is None else f"{plan.gap:.3%}"
    c.print(
        f"[bold]{plan.problem_name}[/bold]  status [bold]{plan.status}[/bold]  "
        f"gap {gap}  solve {plan.solve_seconds:.1f} s ({plan.solver})"
    )
    t = plan.totals
    tot = Table(title="Cost over the horizon", show_header=True)
    for col in ("capex", "power", "hosting", "rental", "total", "capex budget"):
        tot.add_column(col, justify="right")
    tot.add_row(
        usd(t.capex_usd),
        usd(t.power_usd),
        usd(t.hosting_usd),
        usd(t.rental_usd),
        f"[bold]{usd(t.total_usd)}[/bold]",
        usd(t.capex_budget_usd),
    )
    c.print(tot)
    if plan.purchases:
        pt = Table(title="Buy")
        for col in ("month", "gpu", "count", "unit (GPU + server)", "total"):
            pt.add_column(
                col, justify="right" if col in ("count", "unit (GPU + server)", "total") else "left"
            )
        for p in plan.purchases:
            pt.add_row(p.month, p.gpu, str(p.count), usd(p.unit_usd), usd(p.total_usd))
        c.print(pt)
    if plan.rentals:
        agg: dict[tuple[str, str, str], list[float]] = {}
        for r in plan.rentals:
            a = agg.setdefault((r.provider, r.gpu, r.kind), [0.0, 0.0, r.usd_per_gpu_hour])
            a[0] += r.gpu_hours
            a[1] += r.usd
        rt = Table(title="Rent")
        for col in ("provider", "gpu", "kind", "$/GPU-h", "GPU-hours", "cost"):
            rt.add_column(
                col, justify="right" if col in ("$/GPU-h", "GPU-hours", "cost") else "left"
            )
        for (prov, gpu, kind), (h, u, rate) in sorted(agg.items()):
            rt.add_row(prov, gpu, kind, f"{rate:.2f}", f"{h:,.0f}", usd(u))
        c.print(rt)
    wt = Table(title="Workloads")
    for col in ("workload", "kind", "gpu", "gpus", "predicted", "target", "met", "cost", "share"):
        wt.add_column(col)
    for w in plan.workloads:
        pred = ", ".join(f"{k} {v:,.1f}" for k, v in w.predicted.items())
        targ = ", ".join(f"{k} {v:,.1f}" for k, v in w.target.items())
        wt.add_row(
            w.name,
            w.kind,
            "+".join(w.gpu),
            str(w.gpus),
            pred,
            targ,
            "[green]yes[/green]" if w.meets_target else "[red]NO[/red]",
            usd(w.cost_usd),
            f"{w.cost_share:.0%}",
        )
    c.print(wt)
