"""Reading and validating SkyPilot price catalogs and the aggregate CSV, for the offers importer.

Finds a catalog folder's ``<provider>/vms.csv`` files, reads CSVs with their columns found by
name, parses numbers (a bad cell is an InputError naming file, line and column), groups a
provider's rows by instance type (GCP host and accelerator rows joined, zones of a region at
their minimum) and dates each source (git commit, ``SOURCE.md``, else the file date). What it
reads and skips is counted in an :class:`ImportResult`; :mod:`planner.inputs.importers.offers`
turns the groups and rows into offers and writes them.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from planner.base.errors import InputError
from planner.inputs.catalog import Offer
from planner.inputs.importers.accelerators import gcp_host_accelerator, normalize_accelerator

SKYPILOT_REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
AGGREGATE_REQUIRED = (
    "provider", "instance_type", "accelerator_raw", "accelerator", "form_factor",
    "gpus_per_instance", "usd_per_instance_hour_min", "usd_per_instance_hour_median",
    "usd_per_gpu_hour_min", "spot_usd_per_gpu_hour_min", "catalog_path", "catalog_commit",
)  # fmt: skip


@dataclass
class ImportResult:
    """Offers read from a price catalog plus everything that was not turned into an offer."""

    offers: list[Offer] = field(default_factory=list)
    #: accelerator name -> number of (provider, instance type) skipped because it is not mapped
    unknown: Counter = field(default_factory=Counter)
    #: reason -> number of CSV rows skipped (no price, fractional GPU count, ...)
    skipped: Counter = field(default_factory=Counter)
    #: mapping assumption -> number of offers it was applied to
    assumptions: Counter = field(default_factory=Counter)
    providers: list[str] = field(default_factory=list)
    source_path: str = ""
    #: ``<catalog file> @ <commit or date>`` for every file read
    sources: list[str] = field(default_factory=list)
    as_of: str = ""
    as_of_note: str | None = None
    price_stat: str = "median"
    region: str | None = None
    rows_read: int = 0
    generator: str | None = None

    def offers_per_provider(self) -> dict[str, Counter]:
        """provider -> Counter of offer kinds."""
        out: dict[str, Counter] = defaultdict(Counter)
        for o in self.offers:
            out[o.provider][o.kind] += 1
        return dict(sorted(out.items()))

    def cheapest(self, kind: str = "on_demand") -> dict[str, Offer]:
        """gpu id -> cheapest offer of ``kind`` per GPU-hour."""
        best: dict[str, Offer] = {}
        for o in self.offers:
            if o.kind == kind and (
                o.gpu not in best or o.usd_per_gpu_hour < best[o.gpu].usd_per_gpu_hour
            ):
                best[o.gpu] = o
        return dict(sorted(best.items()))


def display_path(path: Path) -> str:
    """Path relative to the working directory when below it, else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _mtime_date(path: Path) -> str:
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date().isoformat()


def _git_commit(path: Path) -> tuple[str, str] | None:
    """(commit, date) of the last commit touching ``path`` if it is in a git checkout."""
    if not any((d / ".git").exists() for d in [path.parent, *path.parent.parents]):
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(path.parent), "log", "-1", "--format=%H %cs", "--", path.name],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.stdout.split()
    return (parts[0], parts[1]) if out.returncode == 0 and len(parts) == 2 else None


def _read_csv(path: Path, required: Iterable[str]) -> tuple[list[dict[str, str]], list[str]]:
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a CSV file")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            columns = [c.strip() for c in (reader.fieldnames or [])]
            rows = [
                {
                    (k or "").strip(): (v or "").strip() if isinstance(v, str) else ""
                    for k, v in r.items()
                }
                for r in reader
            ]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read CSV: {exc}") from None
    if not columns:
        raise InputError(f"{path}: empty file, expected a CSV header")
    for col in required:
        if col not in columns:
            raise InputError(f"{path}: missing column {col!r} (columns: {', '.join(columns)})")
    return rows, columns


def _num(text: str, path: Path, line: int, column: str) -> float | None:
    """Parse a number; empty or NaN -> None; garbage -> InputError naming file, line, column."""
    if text is None or text.strip() == "" or text.strip().lower() in ("nan", "none", "null"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{path}:{line}: column {column!r}: not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _gpu_count(n: float | None) -> int | None:
    """``n`` as a number of GPUs per instance; None when missing, fractional or below 1."""
    if n is None or n != int(n) or n < 1:
        return None
    return int(n)


def _positive(price: float | None) -> float | None:
    """A price, or None when missing, zero or negative (catalogs write 0 for "not sold")."""
    return price if price is not None and price > 0 else None


# --------------------------------------------------------------------------- SkyPilot catalogs


@dataclass
class _Group:
    gpu_name: str
    count: int
    gpu_info: str = ""
    od: dict[str, float] = field(default_factory=dict)  # region -> min price over its zones
    spot: dict[str, float] = field(default_factory=dict)

    def add(self, region: str, od: float | None, spot: float | None) -> None:
        if od is not None:
            self.od[region] = min(od, self.od.get(region, od))
        if spot is not None:
            self.spot[region] = min(spot, self.spot.get(region, spot))


def _count(text: str, path: Path, line: int) -> float | None:
    return _num(text, path, line, "AcceleratorCount")


@dataclass
class _AcceleratorRows:
    """GCP-style accelerator-only rows (empty ``InstanceType``), priced apart from their hosts."""

    #: (name, count, region) -> [price, spot], each the minimum over the region's zones
    prices: dict[tuple[str, int, str], list[float | None]] = field(default_factory=dict)
    #: (name, count) -> number of rows
    rows: Counter = field(default_factory=Counter)

    def add(
        self, name: str, count: int, region: str, price: float | None, spot: float | None
    ) -> None:
        """Count one row and keep the lower prices of its region."""
        self.rows[(name, count)] += 1
        cur = self.prices.setdefault((name, count, region), [None, None])
        for i, value in enumerate((price, spot)):
            if value is not None:
                cur[i] = value if cur[i] is None else min(cur[i], value)


def _row_prices(
    row: dict[str, str], csv_path: Path, line: int, has_spot: bool, result: ImportResult
) -> tuple[float | None, float | None]:
    """Price and spot price of a row; zero or negative ones are counted and dropped."""
    price = _num(row["Price"], csv_path, line, "Price")
    spot = _num(row.get("SpotPrice", ""), csv_path, line, "SpotPrice") if has_spot else None
    if spot is not None and spot <= 0:
        result.skipped["zero or negative SpotPrice (spot ignored)"] += 1
        spot = None
    if price is not None and price <= 0:
        result.skipped["zero or negative Price"] += 1
        price = None
    return price, spot


def _row_accelerator(
    row: dict[str, str],
    line: int,
    csv_path: Path,
    has_spot: bool,
    accelerators: _AcceleratorRows,
    result: ImportResult,
) -> tuple[str, int] | None:
    """Accelerator name and count of a GPU VM row; None for any other row.

    Accelerator-only rows are added to ``accelerators``; rows that are skipped are counted.
    """
    itype, acc = row["InstanceType"], row["AcceleratorName"]
    price, spot = _row_prices(row, csv_path, line, has_spot, result)
    n = _gpu_count(_count(row["AcceleratorCount"], csv_path, line))
    if not itype and acc:  # accelerator-only row (GCP): priced separately from its host
        if n is None:
            result.skipped["fractional or missing AcceleratorCount"] += 1
            return None
        accelerators.add(acc, n, row["Region"], price, spot)
        return None
    if not itype:
        result.skipped["no InstanceType"] += 1
        return None
    if not acc:  # a GCP host VM: its GPUs are implied by the instance family
        host = gcp_host_accelerator(itype)
        if host is None:
            result.skipped["no accelerator (CPU instance)"] += 1
        return host
    if n is None:
        result.skipped["fractional or missing AcceleratorCount"] += 1
        return None
    return acc, n


def _host_prices(
    row: dict[str, str],
    line: int,
    csv_path: Path,
    has_spot: bool,
    accelerator: tuple[str, int],
    accelerators: _AcceleratorRows,
    result: ImportResult,
) -> tuple[float | None, float | None] | None:
    """(price, spot) of a GPU VM row, with its accelerator's when listed apart; None = skip."""
    price = _positive(_num(row["Price"], csv_path, line, "Price"))
    spot = _num(row.get("SpotPrice", ""), csv_path, line, "SpotPrice") if has_spot else None
    spot = _positive(spot)
    # split listing (GCP): the host VM's price lacks its accelerator's in the same region
    if accelerator in accelerators.rows:
        extra = accelerators.prices.get((*accelerator, row["Region"]))
        if extra is None:
            result.skipped["host VM without accelerator price in its region"] += 1
            return None
        price = price + extra[0] if price is not None and extra[0] is not None else None
        spot = spot + extra[1] if spot is not None and extra[1] is not None else None
    if price is None and spot is None:
        result.skipped["no Price"] += 1
        return None
    if price is None:
        result.skipped["no Price (spot only)"] += 1
    return price, spot


def _add_to_group(
    groups: dict[str, _Group],
    row: dict[str, str],
    accelerator: tuple[str, int],
    prices: tuple[float | None, float | None],
    result: ImportResult,
) -> None:
    """Add a row's prices to its instance type's group; an instance type keeps one accelerator."""
    acc, n = accelerator
    g = groups.get(row["InstanceType"])
    if g is None:
        g = groups[row["InstanceType"]] = _Group(acc, n, row.get("GpuInfo", ""))
    elif (g.gpu_name, g.count) != (acc, n):
        result.skipped["instance type listed with another accelerator (ignored)"] += 1
        return
    g.add(row["Region"], *prices)


def _report_unmatched(
    accelerators: _AcceleratorRows, used: set[tuple[str, int]], result: ImportResult
) -> None:
    """Accelerator-only rows no host VM used: unknown accelerators, else skipped rows."""
    for (acc, n), rows_ in sorted(accelerators.rows.items()):
        if (acc, n) in used:
            continue
        gpu, label = normalize_accelerator(acc, n)
        if gpu is None:  # e.g. GCP T4/V100 (attached to N1 hosts) and TPUs: not in the catalog
            result.unknown[label] += 1
        else:
            result.skipped["accelerator rows without a matching host VM"] += rows_


def _read_provider(
    provider: str, csv_path: Path, region: str | None, result: ImportResult
) -> dict[str, _Group]:
    """Rows of one ``vms.csv`` grouped by instance type (GCP host + accelerator rows joined)."""
    rows, columns = _read_csv(csv_path, SKYPILOT_REQUIRED)
    has_spot = "SpotPrice" in columns
    accelerators = _AcceleratorRows()
    # all accelerator rows must be read before a host VM's price can be completed
    hosts: list[tuple[int, dict[str, str], tuple[str, int]]] = []
    for line, row in enumerate(rows, start=2):
        result.rows_read += 1
        if region is not None and row["Region"] != region:
            result.skipped[f"other region than {region}"] += 1
            continue
        accelerator = _row_accelerator(row, line, csv_path, has_spot, accelerators, result)
        if accelerator is not None:
            hosts.append((line, row, accelerator))
    groups: dict[str, _Group] = {}
    used: set[tuple[str, int]] = set()
    for line, row, accelerator in hosts:
        used.add(accelerator)
        prices = _host_prices(row, line, csv_path, has_spot, accelerator, accelerators, result)
        if prices is not None:
            _add_to_group(groups, row, accelerator, prices, result)
    _report_unmatched(accelerators, used, result)
    return groups


def _provider_dirs(root: Path) -> dict[str, Path]:
    if root.is_file():
        return {root.parent.name: root}
    return {d.name: d / "vms.csv" for d in sorted(root.iterdir()) if (d / "vms.csv").is_file()}


def _catalog_files(root: Path, providers: Iterable[str] | None) -> list[tuple[str, Path]]:
    """(provider, its ``vms.csv``) to read, in the order asked (default: every one found)."""
    if not root.exists():
        raise InputError(
            f"{root}: not found (expected a SkyPilot catalog folder such as ~/.sky/catalogs/v8)"
        )
    found = _provider_dirs(root)
    if not found:
        raise InputError(f"{root}: no <provider>/vms.csv files in this folder")
    wanted = [p.strip().lower() for p in providers if p.strip()] if providers else sorted(found)
    missing = [p for p in wanted if p not in found]
    if missing:
        raise InputError(
            f"{root}: no vms.csv for provider(s) {', '.join(missing)}; found: {', '.join(sorted(found))}"
        )
    return [(p, found[p]) for p in wanted]


def _catalog_source(csv_path: Path, provider: str, version: str) -> tuple[str, str]:
    """``(source, as_of)`` of one ``vms.csv``: its git commit when in a checkout, else its file date."""
    rel = (
        f"catalogs/{version}/{provider}/vms.csv"
        if version.startswith("v")
        else display_path(csv_path)
    )
    commit = _git_commit(csv_path)
    if commit:
        return f"skypilot-catalog {rel} @ {commit[0]}", commit[1]
    as_of = _mtime_date(csv_path)
    return f"skypilot-catalog {rel} (local copy, file date {as_of})", as_of


# --------------------------------------------------------------------------- aggregate CSV


def _source_md_date(csv_path: Path) -> tuple[str | None, str | None]:
    """First YYYY-MM-DD in the SOURCE.md beside the CSV, and the clause it is in."""
    md = csv_path.parent / "SOURCE.md"
    if not md.is_file():
        return None, None
    text = " ".join(md.read_text(encoding="utf-8", errors="replace").split())
    m = re.search(r"[^.;()]*\d{4}-\d{2}-\d{2}[^.;()]*", text)
    if not m:
        return None, None
    date = re.search(r"\d{4}-\d{2}-\d{2}", m.group(0))
    return date.group(0), m.group(0).strip()


def _aggregate_as_of(csv_path: Path) -> tuple[str, str]:
    """``(as_of, note)``: the date in the SOURCE.md beside the CSV, else the CSV's file date."""
    md_date, md_sentence = _source_md_date(csv_path)
    as_of = md_date or _mtime_date(csv_path)
    note = (
        f"SOURCE.md: '{md_sentence}'. Commit dates are not recorded there, so every offer carries "
        f"{md_date} (a lower bound for the v9 rows)."
        if md_date
        else f"no date in SOURCE.md: CSV file date {as_of}"
    )
    return as_of, note
