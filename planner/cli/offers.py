"""``planner offers``: import rental offers from SkyPilot price catalogs.

Regenerate the default offers file with::

    planner offers import-aggregate catalogs/sources/gpu_rental_offers.csv \\
        -o catalogs/offers.yaml
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from planner.base.errors import OutputError
from planner.base.files import same_file
from planner.inputs.importers.offers import (
    ImportResult,
    parse_providers,
    read_aggregate_csv,
    read_skypilot_catalog,
    write_offers_yaml,
)


def _summary(result: ImportResult, out: Path) -> None:
    console = Console(soft_wrap=True, emoji=False)
    table = Table(title=f"{len(result.offers)} offers -> {out}")
    for col in ("provider", "on-demand", "spot", "GPUs", "marketplace"):
        table.add_column(col, justify="left" if col in ("provider", "GPUs") else "right")
    gpus_by_provider: dict[str, set[str]] = {}
    for o in result.offers:
        gpus_by_provider.setdefault(o.provider, set()).add(o.gpu)
    for provider, kinds in result.offers_per_provider().items():
        market = any(o.marketplace for o in result.offers if o.provider == provider)
        table.add_row(
            provider, str(kinds.get("on_demand", 0)), str(kinds.get("spot", 0)),
            ", ".join(sorted(gpus_by_provider[provider])), "yes" if market else "",
        )  # fmt: skip
    console.print(table)
    console.print(f"rows read: {result.rows_read}; prices: {result.price_stat} across regions"
                  + (f"; region {result.region}" if result.region else ""))  # fmt: skip
    if result.unknown:
        console.print("[yellow]unknown accelerators (not imported):[/yellow] "
                      + ", ".join(f"{k} x{v}" for k, v in sorted(result.unknown.items())))  # fmt: skip
    if result.skipped:
        console.print(
            "skipped rows: " + ", ".join(f"{k}: {v}" for k, v in sorted(result.skipped.items()))
        )
    if result.assumptions:
        console.print(
            "assumptions: " + "; ".join(f"{k} ({v})" for k, v in sorted(result.assumptions.items()))
        )


def _invocation(args: list[str]) -> str:
    return "planner offers " + " ".join(shlex.quote(a) for a in args)


@click.group("offers")
def offers() -> None:
    """Import GPU rental offers (SkyPilot price catalogs) into the planner's offers format."""


@offers.command("import-skypilot")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--providers", help="Comma-separated providers to read (default: every <provider>/vms.csv)."
)
@click.option("--region", help="Read this region only (default: summarise across regions).")
@click.option("--price", type=click.Choice(["min", "median"]), default="median", show_default=True,
              help="How per-region prices are summarised.")  # fmt: skip
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("offers-skypilot.yaml"),
              show_default=True, help="Offers file to write.")  # fmt: skip
def import_skypilot(
    path: Path, providers: str | None, region: str | None, price: str, output: Path
) -> None:
    """Import a SkyPilot catalog version folder PATH (e.g. ~/.sky/catalogs/v8) holding <provider>/vms.csv."""
    result = read_skypilot_catalog(
        path, providers=parse_providers(providers), region=region, price=price
    )  # type: ignore[arg-type]
    args = ["import-skypilot", str(path)]
    if providers:
        args += ["--providers", providers]
    if region:
        args += ["--region", region]
    args += ["--price", price, "-o", str(output)]
    result.generator = _invocation(args)
    out = write_offers_yaml(result, output)
    _summary(result, out)


@offers.command("import-aggregate")
@click.argument("csv_path", metavar="CSV", type=click.Path(path_type=Path))
@click.option("--price", type=click.Choice(["min", "median"]), default="median", show_default=True,
              help="On-demand price: median or minimum across regions (spot is always the minimum).")  # fmt: skip
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="Offers file to write."
)
def import_aggregate(csv_path: Path, price: str, output: Path) -> None:
    """Import the aggregate rental-price CSV (format of catalogs/sources/gpu_rental_offers.csv)."""
    if same_file(csv_path, output):
        raise OutputError(f"cannot write {output}: it is the CSV being imported")
    result = read_aggregate_csv(csv_path, price=price)  # type: ignore[arg-type]
    result.generator = _invocation(
        ["import-aggregate", str(csv_path), "--price", price, "-o", str(output)]
    )
    out = write_offers_yaml(result, output)
    _summary(result, out)
