"""``planner catalog``: print the GPU comparison table (:mod:`planner.analysis.compare`).

``--sources`` lists where every figure comes from; in a narrow terminal the least important
columns are hidden (``--wide`` shows all).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from planner.analysis.compare import DEFAULT_PROVIDERS, build_rows, columns_for, sort_rows
from planner.cli.options import wide_option
from planner.inputs.catalog import CATALOG_DIR, GpuSpec, Offer, load_gpus, load_offers
from planner.inputs.importers.offers import display_path
from planner.reports.terminal import Col, fit_table, show_table

_LEFT = ("id", "class", "rent_provider")
# Columns hidden in a narrow terminal, higher first (per-provider columns, 9, go first);
# 0 = always shown.
_DROP = {"id": 0, "memory_gb": 0, "purchase_usd": 0, "rent_min": 0, "rent_provider": 3,
         "bf16_tflops": 4, "bandwidth_gbs": 5, "class": 6, "bw_per_k": 7, "tflops_per_k": 7,
         "purchase_low": 8, "purchase_high": 8}  # fmt: skip


# --sources labels of the figures spec_extras adds (not table columns)
_EXTRA_LABELS = {"fp8_tflops": "FP8 TF", "fp4_tflops": "FP4 TF", "tdp_w": "TDP W",
                 "idle_w": "idle W", "link_gbs": "scale-up link", "cooling": "cooling"}  # fmt: skip


def _sourced(fig: Any) -> str | None:
    return f"{fig.source} ({fig.as_of})" if fig is not None else None


def spec_extras(g: GpuSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """The figures ``--json`` adds beside the table's columns (lower precisions, power, the
    scale-up domain, the purchase unit and its cooling), and their sources."""
    fp8, fp4 = g.fp8_dense_tflops, g.fp4_dense_tflops
    row: dict[str, Any] = {
        "vendor": g.vendor,
        "fp8_tflops": fp8.value if fp8 else None,
        "fp4_tflops": fp4.value if fp4 else None,
        "tdp_w": g.tdp_w.value,
        "idle_w": g.idle_w.value,
        "link": g.interconnect.link,
        "link_gbs": g.interconnect.nvlink_gbs,
        "scale_up_gpus": g.scale_up_gpus,
        "server": g.server,
        "unit_gpus": g.node_gpus,
        "cooling": g.server_spec.cooling if g.server_spec else "air",
    }
    src = {
        "fp8_tflops": _sourced(fp8),
        "fp4_tflops": _sourced(fp4),
        "tdp_w": _sourced(g.tdp_w),
        "idle_w": _sourced(g.idle_w),
        "link_gbs": f"{g.interconnect.source} ({g.interconnect.as_of})",
        "cooling": g.server_spec.cooling_source if g.server_spec else None,
    }
    return row, {k: v for k, v in src.items() if v}


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("purchase_usd", "purchase_low", "purchase_high"):
        return f"{value:,.0f}"
    if key in ("bw_per_k", "tflops_per_k"):
        return f"{value:.1f}"
    if isinstance(value, float):
        return (
            f"{value:.2f}"
            if key not in ("memory_gb", "bandwidth_gbs", "bf16_tflops")
            else f"{value:g}"
        )
    return str(value)


@click.command("catalog")
@click.option("--sort", "sort_spec", metavar="COLUMN",
              help="Sort by a column key (e.g. rent_min, bw_per_k, tflops_per_k, memory_gb); prefix - for descending.")  # fmt: skip
@click.option("--offers", "offer_files", multiple=True, type=click.Path(path_type=Path),
              help="Offers file(s) for the rental columns (default: catalogs/offers.yaml).")  # fmt: skip
@click.option("--gpus", "gpus_file", type=click.Path(path_type=Path), default=None,
              help="GPU catalog (default: catalogs/gpus.yaml).")  # fmt: skip
@click.option("--providers", default=DEFAULT_PROVIDERS, show_default=True,
              help="Providers that get their own cheapest-rental column ('' for none).")  # fmt: skip
@click.option(
    "--no-marketplaces",
    is_flag=True,
    help="Ignore marketplace/reseller offers (vast, shadeform, ...).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--sources", "show_sources", is_flag=True, help="List the source of every figure.")
@wide_option
def catalog(
    sort_spec: str | None,
    offer_files: tuple[Path, ...],
    gpus_file: Path | None,
    providers: str,
    no_marketplaces: bool,
    as_json: bool,
    show_sources: bool,
    wide: bool,
) -> None:
    """Compare the catalog GPUs: specs, purchase price, cheapest rental, value per $1k."""
    gpus = load_gpus(gpus_file) if gpus_file else load_gpus()
    files = list(offer_files)
    if not files and (CATALOG_DIR / "offers.yaml").exists():
        files = [CATALOG_DIR / "offers.yaml"]
    offers: list[Offer] = []
    for f in files:
        offers.extend(load_offers(f, gpus).values())
    if no_marketplaces:
        offers = [o for o in offers if not o.marketplace]
    provider_cols = [p.strip().lower() for p in providers.split(",") if p.strip()]
    columns = columns_for(provider_cols)
    rows, sources = build_rows(gpus, offers, provider_cols)
    rows = sort_rows(rows, sort_spec, columns)
    if as_json:
        out = []
        for r in rows:
            extra, extra_src = spec_extras(gpus[r["id"]])
            row = {**r, **extra}
            out.append(
                dict(row, sources={**sources[r["id"]], **extra_src}) if show_sources else row
            )
        click.echo(json.dumps(out, indent=2))
        return
    console = Console(soft_wrap=False)
    if not console.is_terminal:
        console = Console(width=220)
    title = "GPU catalog" + (
        f" (offers: {', '.join(display_path(f) for f in files)})" if files else " (no offers file)"
    )
    cols = [
        Col(header, key not in _LEFT, _DROP.get(key, 9)) for key, (header, _) in columns.items()
    ]
    cells = [[_fmt(k, r.get(k)) for k in columns] for r in rows]
    show_table(console, fit_table(console, title, cols, cells, wide), wide)
    console.print("buy $ = purchase price per GPU (card only, no server); rent = on-demand, USD per GPU-hour"
                  + ("; marketplaces excluded" if no_marketplaces else "; includes marketplaces"))  # fmt: skip
    if show_sources:
        for r in rows:
            console.print(f"[bold]{r['id']}[/bold]")
            for key, text in sources[r["id"]].items():
                console.print(f"  {columns[key][0]}: {text}", highlight=False)
            for key, text in spec_extras(gpus[r["id"]])[1].items():
                console.print(f"  {_EXTRA_LABELS[key]}: {text}", highlight=False)
