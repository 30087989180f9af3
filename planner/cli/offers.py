"""``planner offers``: list the rental offers the planner would use (``list``), and import
rental offers from SkyPilot price catalogs.

Regenerate the default offers file with::

    planner offers import-aggregate catalogs/sources/gpu_rental_offers.csv \\
        -o catalogs/offers.yaml
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from planner.base.errors import InputError, OutputError
from planner.base.files import same_file
from planner.cli.options import wide_option
from planner.inputs.catalog import CATALOG_DIR, Offer, load_gpus, load_offers
from planner.inputs.catalog_dir import SHIPPED_OFFER_FILES
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
    """List the rental offers the planner would use; import SkyPilot price catalogs."""


# ----------------------------------------------------------------------------- offers list

#: ``--kind`` values: the offer kinds, with "on-demand" for on_demand.
KINDS = ("on_demand", "spot", "reserved")

#: The fields of one row of ``offers list`` (``--json`` is a list of these objects).
ROW_FIELDS = ("id", "provider", "gpu", "kind", "usd_per_gpu_hour", "price_steps", "term_months",
              "upfront_share", "max_gpus", "gpus_per_instance", "cluster", "region",
              "marketplace", "estimate", "source", "as_of", "file")  # fmt: skip

_KIND_ORDER = {"on_demand": 0, "reserved": 1, "spot": 2}


def is_estimate(o: Offer) -> bool:
    """Whether ``o``'s price is an estimate (:attr:`planner.inputs.catalog.Offer.estimated`)."""
    return o.estimated


def parse_kind(kind: str | None) -> str | None:
    """``--kind`` as an offer kind (``on-demand`` -> ``on_demand``), or an InputError saying
    which kinds there are.

    >>> parse_kind("On-Demand"), parse_kind(None)
    ('on_demand', None)
    """
    if kind is None:
        return None
    k = kind.strip().lower().replace("-", "_")
    if k not in KINDS:
        raise InputError(
            f"--kind {kind!r} is not an offer kind; allowed: on-demand (on_demand), spot, reserved"
        )
    return k


def check_gpu(gpu: str | None, known: list[str]) -> None:
    """``--gpu`` must be a GPU id of the catalog; the error lists them."""
    if gpu is not None and gpu not in known:
        from planner.base.yamlio import did_you_mean

        hint = did_you_mean(gpu, known)
        hint = "" if hint.startswith("known") else f" ({hint})"
        raise InputError(f"--gpu {gpu!r} is not a GPU id{hint}; allowed: {', '.join(known)}")


def offer_row(o: Offer, file: str | None) -> dict[str, Any]:
    """One row of ``offers list``: what a buyer compares quotes by."""
    return {
        "id": o.id,
        "provider": o.provider,
        "gpu": o.gpu,
        "kind": o.kind,
        "usd_per_gpu_hour": o.usd_per_gpu_hour,
        # dated price changes: [{month, usd_per_gpu_hour, source}]; the table shows the latest
        "price_steps": [st.model_dump() for st in o.price_steps],
        "term_months": o.term_months,
        "upfront_share": o.upfront_share,
        "max_gpus": o.max_gpus,
        "gpus_per_instance": o.gpus_per_instance,
        # a capacity block or cluster product: multi-node training capacity, booked by the block
        "cluster": o.cluster,
        "region": o.region,
        "marketplace": o.marketplace,
        "estimate": is_estimate(o),
        "source": o.source,
        "as_of": o.as_of,
        "file": file,
    }


def _sort_key(row: dict[str, Any]) -> tuple:
    return (row["gpu"], _KIND_ORDER.get(row["kind"], 9), row["usd_per_gpu_hour"], row["id"])


def catalog_rows(
    files: tuple[str, ...] = SHIPPED_OFFER_FILES, marketplaces: bool = False
) -> list[dict[str, Any]]:
    """The offers of ``files`` (names in catalogs/, or paths), a later file's id winning as in a
    problem, marketplaces only when asked for (a problem's default leaves them out)."""
    gpus = load_gpus()
    merged: dict[str, tuple[Offer, str]] = {}
    for name in files:
        path = Path(name)
        if not path.is_file() and (CATALOG_DIR / name).is_file():
            path = CATALOG_DIR / name
        if not path.is_file():
            raise InputError(f"offers file {name!r} not found (looked in . and {CATALOG_DIR})")
        for oid, o in load_offers(path, gpus).items():
            merged[oid] = (o, path.name)
    rows = [offer_row(o, f) for o, f in merged.values() if marketplaces or not o.marketplace]
    return sorted(rows, key=_sort_key)


def problem_rows(problem: Path) -> list[dict[str, Any]]:
    """The offers a problem's plan may use: its files, providers, marketplaces, discounts,
    overrides and contracts applied (:class:`~planner.inputs.problem.Inputs`)."""
    from planner.inputs.problem import load_problem

    inputs = load_problem(problem)
    files: dict[str, str] = {}
    for f in inputs.offer_files:
        for oid in load_offers(f):
            files[oid] = Path(f).name
    rows = [offer_row(o, files.get(oid, "problem file")) for oid, o in inputs.offers.items()]
    return sorted(rows, key=_sort_key)


def _term_cell(row: dict[str, Any]) -> str:
    """``36 mo`` or, paid ahead, ``12 mo, 50 % upfront``; empty without a term.

    >>> _term_cell({"term_months": 12, "upfront_share": 0.5}), _term_cell({"term_months": None})
    ('12 mo, 50 % upfront', '')
    """
    if not row.get("term_months"):
        return ""
    share = row.get("upfront_share") or 0.0
    return f"{row['term_months']} mo" + (
        f", {share:.0%} upfront".replace("%", " %") if share else ""
    )


def _price_cell(row: dict[str, Any]) -> str:
    """``5.1910`` or, for a price with dated steps, the latest: ``5.1910 from 2026-07``.

    >>> _price_cell({"usd_per_gpu_hour": 3.9, "price_steps": []})
    '3.9000'
    >>> _price_cell({"usd_per_gpu_hour": 3.9, "price_steps": [{"month": "2026-07",
    ...              "usd_per_gpu_hour": 5.191}]})
    '5.1910 from 2026-07'
    """
    steps = row.get("price_steps") or []
    if not steps:
        return f"{row['usd_per_gpu_hour']:.4f}"
    last = steps[-1]
    return f"{last['usd_per_gpu_hour']:.4f} from {last['month']}"


def _show(rows: list[dict[str, Any]], title: str, wide: bool) -> None:
    """The rows as a table that fits the terminal: the source (shortened unless ``wide``) and
    the less important columns go first."""
    from planner.reports.terminal import Col, fit_table, show_table

    console = Console(soft_wrap=True, emoji=False, highlight=False)
    cols = [Col("id"), Col("provider", drop=3), Col("gpu"), Col("kind"), Col("$/GPU-h", True),
            Col("term", True), Col("max GPUs", True), Col("unit", True, 6), Col("as of", drop=7),
            Col("source", drop=8)]  # fmt: skip
    cells = []
    for r in rows:
        flags = [
            f for f, on in (("marketplace", r["marketplace"]), ("estimate", r["estimate"])) if on
        ]
        src = r["source"] if wide or len(r["source"]) <= 60 else r["source"][:59] + "…"
        cells.append([
            r["id"], r["provider"], r["gpu"],
            r["kind"].replace("_", "-") + (f" ({', '.join(flags)})" if flags else ""),
            _price_cell(r),
            _term_cell(r),
            str(r["max_gpus"]) if r["max_gpus"] else "no cap",
            str(r["gpus_per_instance"]), r["as_of"], src,
        ])  # fmt: skip
    show_table(console, fit_table(console, title, cols, cells, wide), wide)
    console.print("sources in full and the flags as fields: --json")


@offers.command("list")
@click.option("--gpu", help="Only this GPU type (an id of catalogs/gpus.yaml).")
@click.option("--kind", help="Only this kind: on-demand, spot or reserved.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON list.")
@click.option("--problem", type=click.Path(path_type=Path),
              help="The offers this problem's plan may use (its offers files, providers, "
                   "marketplaces, discounts and overrides); default: every shipped offers file.")  # fmt: skip
@click.option(
    "--file",
    "files",
    multiple=True,
    help="Offers file(s) to list instead of the shipped ones (a later file's id wins).",
)
@click.option(
    "--marketplaces",
    is_flag=True,
    help="Include marketplace/reseller offers (a problem leaves them out by default).",
)
@wide_option
def list_offers(
    gpu: str | None,
    kind: str | None,
    as_json: bool,
    problem: Path | None,
    files: tuple[str, ...],
    marketplaces: bool,
    wide: bool,
) -> None:
    """The rental offers the planner would use, one row each: id, provider, gpu, kind,
    usd_per_gpu_hour, term_months, max_gpus, source, as_of (and the rental unit, whether the
    offer is a marketplace's or an estimate, and its file).

    Without --problem: every shipped offers file (catalogs/offers.yaml, offers-manual.yaml,
    offers-market.yaml, offers-committed.yaml), estimates included and flagged, marketplaces
    left out unless --marketplaces. A problem with no `offers:` reads the same files without
    the estimates (`offers: {estimates: true}` brings them in)."""
    k = parse_kind(kind)
    check_gpu(gpu, sorted(load_gpus()))
    if problem is not None:
        if files or marketplaces:
            raise InputError("--problem takes its offers files and marketplaces from the problem "
                             "file; drop --file/--marketplaces")  # fmt: skip
        rows = problem_rows(problem)
        title = f"offers {problem} may use"
    else:
        rows = catalog_rows(tuple(files) or SHIPPED_OFFER_FILES, marketplaces)
        title = "offers of " + ", ".join(files or SHIPPED_OFFER_FILES)
        if not marketplaces:
            title += " (marketplaces left out)"
    rows = [r for r in rows if (gpu is None or r["gpu"] == gpu) and (k is None or r["kind"] == k)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(
            f"{title}: none" + (f" for {gpu}" if gpu else "") + (f" of kind {kind}" if k else "")
        )
        return
    _show(rows, f"{title}: {len(rows)}", wide)


def stale_rows(rows: list[dict[str, Any]], today: str, max_age: int) -> list[dict[str, Any]]:
    """The rows whose ``as_of`` is more than ``max_age`` months before ``today`` (or names no
    month), each with its ``age_months`` (None: no month), oldest first.

    >>> rows = [{"id": "a", "as_of": "2024-12"}, {"id": "b", "as_of": "2026-07"},
    ...         {"id": "c", "as_of": "unknown"}]
    >>> [(r["id"], r["age_months"]) for r in stale_rows(rows, "2026-11", 6)]
    [('c', None), ('a', 23)]
    """
    from planner.inputs.months import as_of_month, month_index

    out = []
    for r in rows:
        month = as_of_month(r["as_of"])
        age = None if month is None else month_index(month, today)
        if age is None or age > max_age:
            out.append({**r, "age_months": age})
    # no month first (nothing says how old it is), then the oldest
    return sorted(out, key=lambda r: (0, 0) if r["age_months"] is None else (1, -r["age_months"]))


@offers.command("check")
@click.option("--max-age-months", type=click.IntRange(0, 600), default=6, show_default=True,
              help="Flag offers whose price is older than this many months.")  # fmt: skip
@click.option("--today", metavar="YYYY-MM", default=None,
              help="The month to measure ages from (default: this month).")  # fmt: skip
@click.option("--file", "files", multiple=True,
              help="Offers file(s) to check instead of the shipped ones.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the stale rows as a JSON list.")
@wide_option
def check_offers(
    max_age_months: int, today: str | None, files: tuple[str, ...], as_json: bool, wide: bool
) -> None:
    """Offers whose price is older than --max-age-months (or whose as_of names no month),
    oldest first: the prices to read again before a plan relies on them."""
    from planner.inputs.months import parse_month, this_month

    today = today or this_month()
    try:
        parse_month(today)
    except ValueError as exc:
        raise InputError(f"--today: {exc}") from None
    rows = catalog_rows(files or SHIPPED_OFFER_FILES, marketplaces=True)
    stale = stale_rows(rows, today, max_age_months)
    if as_json:
        click.echo(json.dumps(stale, indent=2))
        return
    if stale:
        _show(stale, f"{len(stale)} of {len(rows)} offers priced more than {max_age_months} "
              f"months before {today}", wide)  # fmt: skip
    click.echo(
        f"{len(stale)} of {len(rows)} offers are older than {max_age_months} months "
        f"(as of {today}); refresh them from their sources before relying on a plan"
        if stale
        else f"all {len(rows)} offers were priced within {max_age_months} months of {today}"
    )


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
