"""``planner verify PROBLEM PLAN.json`` and ``planner explain PROBLEM``.

``verify`` recomputes, from the problem and the saved plan alone, every constraint and total
(:mod:`planner.verify`): exit 0 with one OK line and the recomputed total, exit 4 with the
list of violations. ``explain`` prints, for an infeasible problem, the diagnosis (exit 3)
and, for a feasible one, which limits bind, what relaxing each is worth (re-solves) and the
LP duals of the constraints with the integer decisions fixed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from planner.base.clock import command_start
from planner.base.errors import ExitCode
from planner.cli.options import SOLVERS, gap_option, time_limit_option
from planner.cli.solve import print_warnings


@click.command()
@click.argument("problem", type=click.Path(path_type=Path))
@click.argument("plan_json", metavar="PLAN.json", type=click.Path(path_type=Path))
@click.option(
    "--max-lines", type=int, default=50, show_default=True, help="violations to print at most"
)
def verify(problem: Path, plan_json: Path, max_lines: int) -> None:
    """Check a saved plan against PROBLEM: every constraint and total, recomputed."""
    from planner.inputs.problem import load_problem
    from planner.plan.data import Plan
    from planner.verify import verify_report

    inputs = load_problem(problem)
    print_warnings(inputs.warnings)
    plan = Plan.from_json_file(plan_json)
    rep = verify_report(inputs, plan)
    if plan.problem_sha256 and inputs.source_sha256 and plan.problem_sha256 != inputs.source_sha256:
        click.echo(
            f"note: {plan_json} was made from a different version of {problem} "
            "(sha256 differs); checking it against the file as it is now",
            err=True,
        )
    if rep.errors:
        click.echo(
            f"FAILED: {plan_json} violates {len(rep.errors)} check(s) of {problem}:", err=True
        )
        for line in rep.errors[:max_lines]:
            click.echo(f"  - {line}", err=True)
        if len(rep.errors) > max_lines:
            click.echo(f"  ... and {len(rep.errors) - max_lines} more", err=True)
        sys.exit(int(ExitCode.VERIFY_FAILED))
    for line in rep.warnings:
        click.echo(f"warning: {line}", err=True)
    click.echo(
        f"OK: {plan_json} meets every constraint of {problem} ({rep.checks} checks); "
        f"recomputed total ${rep.total_usd:,.2f} (capex ${rep.capex_usd:,.2f}, power ${rep.power_usd:,.2f}, "
        f"hosting ${rep.hosting_usd:,.2f}, rental ${rep.rental_usd:,.2f}"
        + (
            f", contracts ${rep.committed_usd:,.2f}, sold -${rep.sale_proceeds_usd:,.2f}"
            if rep.committed_usd or rep.sale_proceeds_usd
            else ""
        )
        + "); present value "
        f"${rep.npv_usd:,.2f} after ${rep.residual_usd:,.2f} resale value"
    )


@click.command()
@click.argument("problem", type=click.Path(path_type=Path))
@click.option("--solver", type=SOLVERS, default="auto", show_default=True)
@time_limit_option(
    "seconds for the whole command (default: the problem's solver.time_limit_s): the plan's "
    "solve gets what `planner solve` gives it at this limit (the same plan), the re-solves "
    "share what is left but a tenth kept for the shadow prices; a re-solve left less than "
    "2 s says so"
)
@gap_option("relative optimality gap (default: the problem's)")
@click.option(
    "--no-resolve", is_flag=True, help="skip the re-solves (limits +10 %, each GPU type removed)"
)
@click.option("--top", type=int, default=15, show_default=True, help="LP duals to list")
def explain(
    problem: Path,
    solver: str,
    time_limit: float | None,
    gap: float | None,
    no_resolve: bool,
    top: int,
) -> None:
    """Why PROBLEM is infeasible, or which constraints bind in its optimal plan and their worth."""
    started = command_start()  # the console script's entry: imports count too
    from planner.analysis.explain import explain_plan
    from planner.inputs.problem import load_problem

    inputs = load_problem(problem)
    print_warnings(inputs.warnings)
    if inputs.scenarios:
        # limits and duals belong to one model: the base forecast's, said so
        first = inputs.scenarios[0]
        click.echo(
            f"explains scenario '{first.name}' (the first forecast) alone; `planner solve` "
            "plans one purchase for every scenario, and its Scenarios sheet says what each "
            "forecast's own purchases would cost"
        )
        inputs = first.inputs
    ex = explain_plan(
        inputs,
        solver=solver,
        time_limit=time_limit,
        gap=gap,
        resolve=not no_resolve,
        top=top,
        progress=lambda line: click.echo(f"... {line}", err=True),
        started=started,
    )
    gap_text = f", gap {ex.gap:.2%}" if ex.gap is not None else ""
    click.echo(f"{inputs.problem.name}: {ex.status}{gap_text}, total ${ex.total_usd:,.0f}")
    click.echo(f"limits {ex.where}:")
    for line in ex.limits:
        click.echo(f"  {line}")
    if ex.binding:
        click.echo(f"constraints holding with equality {ex.where}, by family:")
        for line in ex.binding:
            click.echo(f"  {line}")
    if ex.whatif:
        click.echo("what relaxing or removing each is worth (re-solved):")
        for line in ex.whatif:
            click.echo(f"  {line}")
    if ex.duals:
        click.echo(
            "shadow prices (LP duals with purchases, replica counts and job choices fixed; "
            "one constraint per distinct value):"
        )
        for line in ex.duals:
            click.echo(f"  {line}")
