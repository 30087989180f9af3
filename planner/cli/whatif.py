"""``planner whatif`` and ``planner breakeven``: thin wrappers around :mod:`planner.analysis.whatif`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from planner.base.errors import ExitCode, InputError
from planner.cli.options import SOLVERS, gap_option, time_limit_option, wide_option
from planner.inputs.keys import MAX_WORKERS
from planner.reports.terminal import Col, fit_table, show_table


def _money(x: float | None) -> str:
    return "" if x is None else f"${x:,.0f}"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.0%}"


def _gap(r) -> str:
    """A row's gap to its bound: 0.1%, or '-' where no bound was proven ('' without a plan)."""
    if not r.ok:
        return ""
    return "-" if r.gap is None else f"{r.gap:.1%}"


def _val(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _progress(console: Console, total: int, label: str):
    prog = Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    task = prog.add_task(label, total=total, last="")

    def step(r) -> None:
        params = ", ".join(f"{k}={_val(v)}" for k, v in r.params.items()) or "base problem"
        what = r.status if r.kept == "own" else f"{r.kept} purchases re-planned: {r.status}"
        prog.update(task, advance=1, last=f"{params}: {what}")

    def more(n: int) -> None:  # re-plans after the scenarios' own solves
        if total is not None:
            prog.update(task, total=(prog.tasks[0].total or 0) + n)

    step.more = more  # type: ignore[attr-defined]
    return prog, step


def summary_table(
    results, keys: list[str], console: Console, wide: bool = False, title: str = "What-if"
) -> Table:
    """One row per scenario; in a narrow terminal the per-GPU and secondary columns go first."""
    gpus = sorted({g for r in results for g in r.bought})
    cols = [Col(escape(k.rsplit(".", 1)[-1]), True) for k in keys]
    # a two-stage problem (scenarios:): its expected present value is what each row decides
    expected = any((r.totals or {}).get("expected_usd") is not None for r in results)
    cols += [Col("status"), Col("gap", True), Col("total", True), Col("PV", True, 2)]
    cols += [Col("E[PV]", True)] if expected else []
    cols += [Col("capex", True, 3), Col("rental", True, 4)]
    cols += [Col(f"buy {escape(g)}", True, 6) for g in gpus]
    cols += [Col("rented", True, 5), Col("$/1M tok", True, 2)]
    rows = []
    for r in results:
        tot = r.totals or {}
        row = [escape(_val(r.params.get(k, ""))) for k in keys]
        row += [r.status if r.ok else f"[red]{r.status}[/red]", _gap(r)]
        row += [_money(tot.get(k)) for k in ("total_usd", "npv_usd")]
        row += [_money(tot.get("expected_usd"))] if expected else []
        row += [_money(tot.get(k)) for k in ("capex_usd", "rental_usd")]
        row += [str(r.bought.get(g, 0)) if r.ok else "" for g in gpus]
        tok = "" if r.usd_per_1m_tokens is None else f"{r.usd_per_1m_tokens:.3f}"
        rows.append([*row, _pct(r.rented_share), tok])
    return fit_table(console, title, cols, rows, wide)


@click.command()
@click.argument("problem", type=click.Path(path_type=Path))
@click.option(
    "--vary",
    "varies",
    multiple=True,
    metavar="KEY=VALUES",
    help="a dotted path (or alias utilization / power_price / discount_rate / colo_price) "
    "and a comma list or "
    "start:stop:step range; several --vary make a grid. "
    "Default: utilization=0.2:0.9:0.1 x power_price=0.06:0.30:0.06",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="workbook path (default outputs/<stem>-whatif.xlsx)",
)
@click.option("--json", "json_path", help="write the scenarios as JSON to PATH, or '-' for stdout")
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=None,
    help=f"parallel solves, 1-{MAX_WORKERS} (default: the number of CPUs)",
)
@click.option("--solver", type=SOLVERS, default="auto", show_default=True)
@time_limit_option(
    "time limit per scenario in seconds (default: the problem's); then the base problem's "
    "purchases and a neighbour's are re-planned in each scenario in a quarter of it each"
)
@gap_option("relative optimality gap (default: the problem's)")
@click.option(
    "--scheduler",
    default=None,
    metavar="tcp://HOST:PORT",
    help="run the scenarios on this Dask distributed scheduler (pip install 'gpu-planner[cluster]')",
)
@click.option("--no-excel", is_flag=True, help="do not write the workbook")
@wide_option
def whatif(
    problem: Path,
    varies: tuple[str, ...],
    output: Path | None,
    json_path: str | None,
    workers: int | None,
    solver: str,
    time_limit: float | None,
    gap: float | None,
    scheduler: str | None,
    no_excel: bool,
    wide: bool,
) -> None:
    """Re-plan PROBLEM over a grid of changed inputs (what-if analysis)."""
    from planner.analysis import whatif as wi

    if scheduler and not scheduler.strip():
        raise InputError("--scheduler: empty address")
    base = wi.load_base(problem)
    vs = wi.make_varies(base, list(varies) if varies else wi.default_varies(base))
    n = len(wi.grid(vs))
    console = Console(stderr=json_path == "-", emoji=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)  # logs and pipes: do not squeeze the table
    where = (
        f"Dask scheduler {scheduler}"
        if scheduler
        else f"{workers or min(os.cpu_count() or 1, MAX_WORKERS)} worker process(es)"
    )
    console.print(
        f"what-if: {n} scenarios ({' x '.join(f'{v.key} [{len(v.values)}]' for v in vs)}) "
        f"+ the base problem on {where}",
        highlight=False,
    )
    prog, step = _progress(console, n + 1, "solving")
    with prog:
        res = wi.run_whatif(
            base,
            vs,  # made and checked above
            solver=solver,
            time_limit=time_limit,
            gap=gap,
            workers=workers,
            scheduler=scheduler,
            progress=step,
            more=step.more,
        )
    show_table(console, summary_table(res.results, [v.key for v in vs], console, wide), wide)
    bad = _print_outcome(console, res, n)
    if not no_excel:
        _write_workbook(console, res, output or Path("outputs") / f"{problem.stem}-whatif.xlsx")
    if json_path == "-":
        click.echo(json.dumps(res.to_json(), indent=2))
    elif json_path:
        wi.write_results_json(res.results, json_path)
        console.print(f"json: {json_path}")
    _exit_if_failed(len(bad), len(res.results), console)


def _write_workbook(console: Console, res, xlsx: Path) -> None:
    """The what-if workbook, and a warning line where it could not hold everything."""
    from planner.reports.whatif_excel import write_whatif_workbook

    warning = write_whatif_workbook(res, xlsx)
    if warning:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    console.print(f"workbook: {xlsx}")


def _print_outcome(console: Console, res, n: int) -> list:
    """The failed scenarios (the first 10) and the summary line; returns the failed rows."""
    from planner.analysis.sweep import summary_line

    bad = [r for r in res.results if not r.ok]
    for r in bad[:10]:
        params = ", ".join(f"{k}={_val(v)}" for k, v in r.params.items())
        console.print(
            f"[yellow]{params}: {r.status}:[/yellow] {r.message.splitlines()[0] if r.message else ''}",
            highlight=False,
        )
    if len(bad) > 10:
        console.print(f"... and {len(bad) - 10} more failed scenarios (see the workbook / JSON)")
    console.print(
        f"{n} scenarios ({n - len(bad)} solved) + base in {res.seconds:.1f} s wall time; "
        f"{summary_line(res.results)}",
        highlight=False,
    )
    return bad


def _exit_if_failed(failed: int, total: int, console: Console) -> None:
    """Exit 5 once every result is written, when some scenario did not solve."""
    if failed:
        console.print(
            f"[yellow]{failed} of {total} solves failed[/yellow] (exit code 5; "
            "every result is in the outputs)",
            highlight=False,
        )
        sys.exit(int(ExitCode.SWEEP_INCOMPLETE))


def _side_by_side(be) -> Table:
    a, b = be.below, be.above
    if be.changed:
        ta, tb = f"below: {be.bracket[0]:.6g}", f"above: {be.bracket[1]:.6g}"
    else:
        ta, tb = f"at {be.lo:g}", f"at {be.hi:g}"
    t = Table(
        title=f"Break-even on {be.key}" if be.changed else f"{be.key}: the plan does not change"
    )
    t.add_column("")
    t.add_column(ta, justify="right")
    t.add_column(tb, justify="right")
    t.add_row("status", a.status, b.status)
    t.add_row("gap", _gap(a), _gap(b))
    gpus = sorted(set(a.bought) | set(b.bought) | set(a.rented_gpu_hours) | set(b.rented_gpu_hours))
    for g in gpus:
        t.add_row(
            f"buy {g}",
            str(a.bought.get(g, 0)) if a.ok else "",
            str(b.bought.get(g, 0)) if b.ok else "",
        )
    for g in gpus:

        def rent(r, g=g) -> str:
            if not r.ok:
                return ""
            kinds = r.rented_by.get(g, {})
            if not kinds:
                return "-"
            return ", ".join(f"{h:,.0f} h {k.replace('_', '-')}" for k, h in kinds.items())

        t.add_row(f"rent {g}", rent(a), rent(b))
    for g in gpus:
        t.add_row(
            f"owned busy {g}",
            f"{a.owned_gpu_hours.get(g, 0):,.0f} h" if a.ok else "",
            f"{b.owned_gpu_hours.get(g, 0):,.0f} h" if b.ok else "",
        )
    for k in ("capex_usd", "power_usd", "hosting_usd", "rental_usd", "total_usd"):
        t.add_row(
            k.removesuffix("_usd"), _money((a.totals or {}).get(k)), _money((b.totals or {}).get(k))
        )
    t.add_row("rented share (GPU-h)", _pct(a.rented_share), _pct(b.rented_share))
    t.add_row(
        "$/1M tokens (serving)",
        "" if a.usd_per_1m_tokens is None else f"{a.usd_per_1m_tokens:.4f}",
        "" if b.usd_per_1m_tokens is None else f"{b.usd_per_1m_tokens:.4f}",
    )
    return t


@click.command()
@click.argument("problem", type=click.Path(path_type=Path))
@click.option(
    "--vary",
    "vary",
    required=True,
    multiple=True,
    metavar="KEY=LO:HI",
    help="the one input to search over, e.g. utilization=0.1:1.0",
)
@click.option(
    "--watch",
    default=None,
    metavar="WHAT",
    help="what counts as a change: default the set of GPU types bought (the commitments "
    "signed when KEY is a reserved offer's price, overrides.offers.<id>.usd_per_gpu_hour); "
    "gpu=<id> for the number of that type bought; commitments for the reserved offers signed",
)
@click.option(
    "--tol",
    type=float,
    default=None,
    help="bracket width to stop at (default (HI-LO)/200; at least (HI-LO) x 1e-9 and 1e-12)",
)
@click.option(
    "--scan",
    type=click.IntRange(min=2, max=200),
    default=5,
    show_default=True,
    help="evenly spaced values solved before bisecting",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=None,
    help=f"parallel solves of the scan, 1-{MAX_WORKERS} (default: the number of CPUs)",
)
@click.option("--solver", type=SOLVERS, default="auto", show_default=True)
@time_limit_option("solver time limit per solve in seconds")
@gap_option("relative optimality gap")
@click.option("--json", "json_path", help="write the result as JSON to PATH, or '-' for stdout")
def breakeven(
    problem: Path,
    vary: tuple[str, ...],
    watch: str | None,
    tol: float | None,
    scan: int,
    workers: int | None,
    solver: str,
    time_limit: float | None,
    gap: float | None,
    json_path: str | None,
) -> None:
    """Find the value of one input at which PROBLEM's plan changes (bisection on solves).

    At most SCAN + 30 solves, each within the time limit."""
    from planner.analysis import whatif as wi
    from planner.analysis.breakeven import resolve_tol

    if len(vary) > 1:
        raise InputError(
            f"--vary given {len(vary)} times ({', '.join(v[:40] for v in vary[:3])}"
            f"{', ...' if len(vary) > 3 else ''}): breakeven searches one key; "
            "use planner whatif for a grid of several"
        )
    console = Console(stderr=json_path == "-", emoji=False)
    base = wi.load_base(problem)
    key, lo, hi = wi.parse_bounds(vary[0])
    tol = resolve_tol(lo, hi, tol)
    locs = wi.resolve_key(base.data, key)  # a bad path or value fails before any solve
    wi.check_values(base, key, locs, [lo, hi])
    prog, step = _progress(console, None, "solving")
    with prog:
        be = wi.breakeven(
            base,
            (key, lo, hi),
            watch=watch,
            tol=tol,
            scan=scan,
            solver=solver,
            time_limit=time_limit,
            gap=gap,
            workers=workers or min(os.cpu_count() or 1, MAX_WORKERS),
            progress=step,
        )
    console.print(_side_by_side(be))
    for r in (be.below, be.above):
        if r.ok and r.status != "optimal":
            console.print(
                f"[yellow]note:[/yellow] {be.key}={_val(r.params.get(be.key))}: {r.status}: {r.message}",
                highlight=False,
            )
    if be.other_changes:
        console.print(
            "the plan also changes between "
            + "; ".join(f"{x:g} and {y:g}" for x, y in be.other_changes)
            + " (not bisected)",
            highlight=False,
        )
    console.print(f"[bold]{be.sentence}[/bold]  ({be.solves} solves)", highlight=False)
    if json_path == "-":
        click.echo(json.dumps(be.to_json(), indent=2))
    elif json_path:
        from planner.plan.data import atomic_write_bytes

        atomic_write_bytes(json_path, json.dumps(be.to_json(), indent=2).encode("utf-8"))
        console.print(f"json: {json_path}")
    _exit_if_failed(sum(not r.ok for r in (be.below, be.above)), 2, console)
