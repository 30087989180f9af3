"""``planner report PLAN.json -o PLAN.xlsx``: rebuild the Excel workbook from a saved plan.

No solve: the plan JSON written by ``planner solve --json`` holds everything the report needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from pydantic import ValidationError

from planner.errors import InputError, PlannerError
from planner.plan import Plan


def default_output(plan_path: Path) -> Path:
    """The workbook path for a plan: the JSON path with ``.xlsx``.

    >>> default_output(Path("outputs/2m_budget.json")).as_posix()
    'outputs/2m_budget.xlsx'
    """
    return plan_path.with_suffix(".xlsx")


def load_plan(src: Path) -> Plan:
    """Read a plan JSON; every problem with the file is an InputError with a short message."""
    try:
        text = src.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{src}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{src}: cannot read the plan: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"{src}: not JSON ({exc}); expected a plan written by `planner solve --json`"
        ) from None
    if not isinstance(data, dict) or "totals" not in data or "planner_version" not in data:
        raise InputError(
            f"{src}: not a plan JSON written by `planner solve --json` (no totals/planner_version)"
        )
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        shown = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in errs[:5]
        )
        more = f" (and {len(errs) - 5} more)" if len(errs) > 5 else ""
        raise InputError(f"{src}: not a valid plan JSON: {shown}{more}") from None


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
    try:
        write_workbook(plan, out)
    except OSError as exc:
        raise PlannerError(f"{out}: cannot write the workbook: {exc.strerror or exc}") from None
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
