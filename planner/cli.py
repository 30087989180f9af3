"""Command-line interface. Thin: parse, load, call the library, print.

Exit codes: 0 solved, 1 unexpected failure, 2 bad input, 3 infeasible.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console

from planner import __version__
from planner.errors import InfeasibleError, PlannerError

err_console = Console(stderr=True, soft_wrap=True)


class PlannerGroup(click.Group):
    """Turns every PlannerError into a clean message and its exit code (no traceback)."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except InfeasibleError as exc:
            err_console.print(str(exc), style="bold red", highlight=False, markup=False)
            for line in exc.diagnosis:
                err_console.print(f"  - {line}", highlight=False, markup=False)
            sys.exit(exc.exit_code)
        except PlannerError as exc:
            err_console.print("[red]error:[/red] ", end="")
            err_console.print(str(exc), highlight=False, markup=False)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug: say so plainly; PLANNER_DEBUG=1 shows the traceback
            if os.environ.get("PLANNER_DEBUG"):
                raise
            err_console.print(
                f"[red]internal error:[/red] {type(exc).__name__}: {exc}\n"
                "  (a bug in the planner; rerun with PLANNER_DEBUG=1 for the traceback and report it)",
                highlight=False,
            )
            sys.exit(1)


@click.group(cls=PlannerGroup)
@click.version_option(__version__, prog_name="planner")
def cli() -> None:
    """GPU procurement planner: which GPUs to buy and rent, and when."""


@cli.command()
@click.argument("problem", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="workbook path (default outputs/<stem>.xlsx)",
)
@click.option("--json", "json_path", help="write the plan as JSON to PATH, or '-' for stdout")
@click.option("--solver", type=click.Choice(["cbc", "highs"]), default="cbc", show_default=True)
@click.option(
    "--time-limit",
    type=float,
    default=None,
    help="solver time limit in seconds (default: the problem's solver.time_limit_s, 60)",
)
@click.option(
    "--gap", type=float, default=None, help="relative optimality gap to stop at (default 0.001)"
)
@click.option("--no-excel", is_flag=True, help="do not write the workbook")
def solve(
    problem: Path,
    output: Path | None,
    json_path: str | None,
    solver: str,
    time_limit: float | None,
    gap: float | None,
    no_excel: bool,
) -> None:
    """Solve PROBLEM (a YAML file) and write the plan as Excel (and JSON)."""
    from planner.api import plan_problem
    from planner.plan import write_json
    from planner.problem import load_problem
    from planner.reports.terminal import print_summary

    inputs = load_problem(problem)
    plan = plan_problem(inputs, solver=solver, time_limit=time_limit, gap=gap)
    from planner.verify import verify_plan

    problems = verify_plan(inputs, plan)
    if problems:
        raise PlannerError("the plan failed independent verification:\n  " + "\n  ".join(problems))
    # Files first, then the summary: a closed pipe (`| head`) must not lose the workbook.
    written = []
    if not no_excel:
        from planner.reports.excel import write_workbook

        xlsx = output or Path("outputs") / f"{problem.stem}.xlsx"
        write_workbook(plan, xlsx)
        written.append(f"workbook: {xlsx}")
    if json_path and json_path != "-":
        write_json(plan, json_path)
        written.append(f"json: {json_path}")
    out = Console(stderr=json_path == "-")
    print_summary(plan, out)
    for line in written:
        out.print(line, highlight=False)
    if json_path == "-":
        click.echo(plan.to_json())


def _register() -> None:
    """Sub-commands that live in their own modules."""
    import importlib

    for module, attr in (
        ("planner.cli_estimate", "estimate"),
        ("planner.cli_report", "report"),
        ("planner.cli_offers", "offers"),
        ("planner.cli_catalog", "catalog"),
        ("planner.cli_whatif", "whatif"),
        ("planner.cli_whatif", "breakeven"),
        ("planner.cli_verify", "verify"),
        ("planner.cli_verify", "explain"),
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        cli.add_command(getattr(mod, attr))


_register()


def main() -> None:
    cli(prog_name="planner")
