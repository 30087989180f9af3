"""Short terminal summary of a Plan (rich), readable in an 80-column terminal.

Tables are built from :class:`Col` lists; when a table is wider than the terminal, the least
important columns are dropped (the caption says which) and ``wide=True`` (``--wide``) keeps
them all. Cells are never cut with an ellipsis: what stays is shown whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from planner.plan.data import Plan, WorkloadResult
from planner.reports.plan_facts import market_line, measure_text, rate_span

# Short labels for the predicted-vs-target keys of a workload result.
_TARGET_LABELS = {"wall_hours": "wall h", "p95_ttft_ms": "TTFT ms", "p95_tpot_ms": "TPOT ms"}


def usd(x: float | None) -> str:
    """Dollars rounded to the dollar, ``-`` for none.

    >>> usd(1234.5), usd(None)
    ('$1,234', '-')
    """
    return "-" if x is None else f"${x:,.0f}"


@dataclass(frozen=True)
class Col:
    """A table column: header, alignment, and ``drop`` order (0 = never dropped, higher first)."""

    header: str
    right: bool = False
    drop: int = 0


def _table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]], fold: bool) -> Table:
    t = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title_justify="left",
        collapse_padding=True,
    )
    for c in cols:
        t.add_column(
            c.header,
            justify="right" if c.right else "left",
            no_wrap=not fold,
            overflow="fold",
        )
    for row in rows:
        t.add_row(*row)
    return t


def _natural_width(console: Console, table: Table) -> int:
    """The width the table takes with no column folded (measured on an unbounded line)."""
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def fit_table(
    console: Console,
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    wide: bool = False,
) -> Table:
    """The table at its natural width if it fits (or ``wide``); else without the least
    important columns, and folded (never cut) only if even the essential ones do not fit."""
    keep = list(range(len(cols)))
    dropped: list[str] = []
    order = sorted((c.drop, -i) for i, c in enumerate(cols) if c.drop > 0)
    while True:
        t = _table(title, [cols[i] for i in keep], [[r[i] for i in keep] for r in rows], False)
        if wide or _natural_width(console, t) <= console.width or not order:
            break
        _, neg_i = order.pop()
        keep.remove(-neg_i)
        dropped.append(cols[-neg_i].header)
    if not wide and _natural_width(console, t) > console.width:
        t = _table(title, [cols[i] for i in keep], [[r[i] for i in keep] for r in rows], True)
    if dropped:
        t.caption = f"hidden to fit: {', '.join(reversed(dropped))} (--wide shows all)"
    return t


def _header_line(plan: Plan) -> str:
    gap = "-" if plan.gap is None else f"{plan.gap:.3%}"
    return (
        f"[bold]{escape(plan.problem_name)}[/bold]\nstatus [bold]{plan.status}[/bold], gap {gap}, "
        f"solve {plan.solve_seconds:.1f} s ({plan.solver})"
    )


def cost_table(plan: Plan, console: Console, wide: bool) -> Table:
    t = plan.totals
    cols = [Col("capex", True), Col("power", True, 2), Col("hosting", True, 1)]
    cols += [Col("rental", True)]
    row = [usd(t.capex_usd), usd(t.power_usd), usd(t.hosting_usd), usd(t.rental_usd)]
    if t.committed_usd or t.sale_proceeds_usd:  # a plan from where the team stands
        cols += [Col("contracts", True, 2), Col("sold", True, 2)]
        row += [usd(t.committed_usd), "-" + usd(t.sale_proceeds_usd)]
    cols += [Col("total", True), Col("capex budget", True, 3)]
    row += [f"[bold]{usd(t.total_usd)}[/bold]", usd(t.capex_budget_usd)]
    return fit_table(console, "Cost over the horizon", cols, [row], wide)


def buy_table(plan: Plan, console: Console, wide: bool) -> Table:
    """What to buy; with lead times, the order month beside the in-service month."""
    lead = any(p.order_month != p.month for p in plan.purchases)
    cols = [Col("ordered"), Col("in service")] if lead else [Col("month")]
    cols += [Col("gpu"), Col("count", True), Col("unit (GPU + server)", True, 1)]
    cols.append(Col("total", True))
    rows = [
        [*([p.order_month] if lead else []), p.month, escape(p.gpu), str(p.count)]
        + [usd(p.unit_usd), usd(p.total_usd)]
        for p in plan.purchases
    ]
    return fit_table(console, "Buy", cols, rows, wide)


def rent_rows(plan: Plan) -> list[list[str]]:
    """One row per (provider, offer, workload): the rate shown is the offer's rate as charged
    (so rate x GPU-hours = cost), never a blend of offers or workloads; on a price path, the
    first month's rate and the last's (``2.9103..2.7411``)."""
    agg: dict[tuple[str, str, str], list[float]] = {}
    about: dict[str, tuple[str, str, float]] = {}
    rates: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in plan.rentals:
        key = (r.provider, r.offer, r.workload or "-")
        a = agg.setdefault(key, [0.0, 0.0])
        a[0] += r.gpu_hours
        a[1] += r.usd
        about[r.offer] = (r.gpu, r.kind, r.usd_per_gpu_hour)
        rates.setdefault(key, {}).setdefault(r.month, r.usd_per_gpu_hour)
    rows = []
    for (prov, offer, w), (h, u) in sorted(agg.items(), key=lambda kv: (kv[0][2], -kv[1][1])):
        gpu, kind, rate = about[offer]
        rows.append(
            [
                escape(w),
                escape(prov),
                escape(offer),
                escape(gpu),
                kind.replace("_", "-"),
                rate_span(rates[(prov, offer, w)], rate, "..").replace("$", ""),
                f"{h:,.0f}",
                usd(u),
            ]
        )
    return rows


def rent_table(plan: Plan, console: Console, wide: bool) -> Table:
    cols = [Col("workload"), Col("provider"), Col("offer", drop=3), Col("gpu"), Col("kind", drop=1)]
    cols += [Col("$/GPU-h", True), Col("GPU-hours", True, 2), Col("cost", True)]
    return fit_table(console, "Rent", cols, rent_rows(plan), wide)


def target_lines(w: WorkloadResult) -> list[str]:
    """Predicted against target, one per key (``TTFT ms 158 / 1,000``)."""
    return [
        f"{_TARGET_LABELS.get(k, k)} {_short(w.predicted[k])} / {_short(w.target.get(k))}"
        for k in w.predicted
    ]


def target_text(w: WorkloadResult) -> str:
    """:func:`target_lines`, one line per key."""
    return "\n".join(target_lines(w))


def _short(x: float | None) -> str:
    """A figure to three significant digits at most below 1,000, whole above.

    >>> _short(1298.9), _short(60.0), _short(57.25), _short(None)
    ('1,299', '60', '57.2', '-')
    """
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 or x == int(x) else f"{x:.3g}"


def workload_rows(w: WorkloadResult) -> list[list[str]]:
    """A workload's rows: the first with its figures and first GPU type, then one row per
    further GPU type with only its name (so no GPU sits beside another's latency line)."""
    first = [
        escape(w.name),
        w.kind,
        escape(w.gpu[0]) if w.gpu else "",
        str(w.gpus),
        target_text(w),
        "[green]yes[/green]" if w.meets_target else "[red]NO[/red]",
        usd(w.cost_usd),
        f"{w.cost_share:.0%}",
    ]
    return [first] + [["", "", escape(g), "", "", "", "", ""] for g in w.gpu[1:]]


def workload_table(plan: Plan, console: Console, wide: bool) -> Table:
    cols = [Col("workload"), Col("kind", drop=2), Col("gpu"), Col("GPUs", True, 3)]
    cols += [Col("predicted / target"), Col("met"), Col("cost", True), Col("share", True, 1)]
    rows = [row for w in plan.workloads for row in workload_rows(w)]
    return fit_table(console, "Workloads", cols, rows, wide)


def show_table(console: Console, table: Table, wide: bool) -> None:
    """Print a table; ``wide`` prints it at its natural width, letting the terminal wrap lines
    rather than rich squeezing (and cutting) cells."""
    if not wide:
        console.print(table)
        return
    width = console.width
    console.width = max(width, _natural_width(console, table))
    try:
        console.print(table)
    finally:
        console.width = width


def print_summary(plan: Plan, console: Console | None = None, wide: bool = False) -> None:
    """The plan in four tables: cost, what to buy, what to rent, and each workload's result;
    a two-stage plan's tables are its first scenario's, followed by every scenario's cost."""
    c = console or Console(emoji=False)
    c.print(_header_line(plan))
    if plan.scenarios:
        c.print(escape(shown_scenario_line(plan)), highlight=False)
    tables = [cost_table(plan, c, wide)]
    if plan.purchases:
        tables.append(buy_table(plan, c, wide))
    if plan.rentals:
        tables.append(rent_table(plan, c, wide))
    tables.append(workload_table(plan, c, wide))
    for t in tables:
        show_table(c, t, wide)
    if plan.totals.npv_usd is not None:
        c.print(finance_line(plan), highlight=False)
    market = market_line(plan)
    if market:
        c.print(escape(market), highlight=False)
    if plan.scenarios:
        show_table(c, scenario_table(plan, c, wide), wide)
        for line in scenario_lines(plan):
            c.print(line, highlight=False)


def finance_line(plan: Plan) -> str:
    """What the optimizer minimized: the present value, and the resale value counted in it."""
    t = plan.totals
    resale = (
        f"less {usd(t.residual_value_usd)} resale value of owned hardware at the horizon end "
        f"({plan.residual_mode.replace('_', ' ')})"
        if t.residual_value_usd
        else f"no resale value counted (residual: {plan.residual_mode.replace('_', ' ')})"
    )
    return (
        f"present value at {plan.discount_rate:.1%}/year: [bold]{usd(t.npv_usd)}[/bold] "
        f"(cash {usd(t.total_usd)}; {resale})"
    )


# ------------------------------------------------------------------ two-stage plans


def shown_scenario_line(plan: Plan) -> str:
    """Which scenario the tables show: the decision is shared, the rentals are its own."""
    first = plan.scenarios[0]
    return (
        f"two-stage plan over {len(plan.scenarios)} scenarios, minimising "
        f"{measure_text(plan).removeprefix('the ')}; the purchases hold in every scenario, the "
        f"tables below show scenario '{first.name}' ({first.probability * 100:.3g}%)"
    )


def scenario_table(plan: Plan, console: Console, wide: bool) -> Table:
    """Each scenario's present value under this plan, under its own best plan, and the
    regret between them."""
    cols = [Col("scenario"), Col("probability", True), Col("cost", True)]
    cols += [Col("own best", True, 1), Col("regret", True)]
    rows = [
        [escape(s.name), f"{s.probability:.1%}", usd(s.cost_usd), usd(s.own_usd)]
        + [usd(s.regret_usd)]
        for s in plan.scenarios
    ]
    return fit_table(console, "Scenarios (present value)", cols, rows, wide)


def scenario_lines(plan: Plan) -> list[str]:
    """Expected, worst, VSS and EVPI, one line each (rich markup, names escaped)."""
    t = plan.totals
    worst = max(plan.scenarios, key=lambda s: s.cost_usd)
    measure = "expected" if plan.risk is None else plan.risk.measure
    how = "in expectation" if measure == "expected" else "in the risk measure"
    lines = [
        f"expected: [bold]{usd(t.expected_usd)}[/bold]",
        f"worst: {usd(t.worst_usd)} (scenario '{escape(worst.name)}')",
    ]
    if measure != "expected":
        lines.append(f"risk measure ({escape(measure_text(plan))}): {usd(t.risk_usd)}")
    base = escape(plan.scenarios[0].name)
    if t.vss_usd is None:
        lines.append("VSS: - (the base forecast's purchases cannot meet every scenario)")
    else:
        lines.append(
            f"VSS: {usd(t.vss_usd)} (what planning for '{base}' alone would cost more, {how})"
        )
    lines.append(f"EVPI: {usd(t.evpi_usd)} (what knowing the future would save, {how})")
    return lines
