"""``planner report PLAN.json -o PLAN.xlsx``: rebuild the Excel workbook from a saved plan.

No solve: the plan JSON written by ``planner solve --json`` holds everything the report needs.
"""

from __future__ import annotations

from pathlib import Path

import click

from planner.base.errors import InputError
from planner.plan.data import load_plan


def default_output(plan_path: Path) -> Path:
    """The workbook path for a plan: the JSON path with ``.xlsx``.

    >>> default_output(Path("outputs/2m_budget.json")).as_posix()
    'outputs/2m_budget.xlsx'
    """
    return plan_path.with_suffix(".xlsx")


def build_report(plan_path: str | Path, output: str | Path | None = None) -> Path:
    """Read ``plan_path`` (a plan JSON) and write its workbook; returns the workbook path."""
    from planner.reports.excel import write_workbook

    src = Path(plan_path)
    if src.is_dir():
        raise InputError(
            f"{src}: is a directory, expected a plan JSON written by `planner solve --json`"
        )
    plan = load_plan(src)
    out = Path(output) if output is not None else default_output(src)
    if out.suffix.lower() != ".xlsx":
        raise InputError(f"{out}: the workbook must have the .xlsx extension")
    if out.resolve() == src.resolve():
        raise InputError(f"{out}: would overwrite the plan itself; choose another output path")
    write_workbook(plan, out)
    return out


@click.command("report")
@click.argument("plan_json", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Workbook to write (default: the plan's path with .xlsx).",
)
def report(plan_json: Path, output: Path | None) -> None:
    """Rebuild the Excel workbook from a saved plan JSON (no solve)."""
    out = build_report(plan_json, output)
    click.echo(f"wrote {out}")
