"""Reading and validating SkyPilot price catalogs and the aggregate CSV, for the offers importer.

Finds a catalog folder's ``<provider>/vms.csv`` files, reads CSVs with their columns found by
name, parses numbers (a bad cell is an InputError naming file, line and column), groups a
provider's rows by instance type (GCP host and accelerator rows joined, zones of a region at
their minimum) and dates each source (git commit, ``SOURCE.md``, else the file date). What it
reads and skips is counted in an :class:`ImportResult`; :mod:`planner.inputs.importers.offers`
turns the groups and rows into offers and writes them.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from planner.base.errors import InputError
from planner.base.files import MAX_DIGITS, CsvRows, read_bytes, read_csv
from planner.inputs.catalog import Offer
from planner.inputs.importers.accelerators import gcp_host_accelerator, normalize_accelerator

SKYPILOT_REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
AGGREGATE_REQUIRED = (
    "provider", "instance_type", "accelerator_raw", "accelerator", "form_factor",
    "gpus_per_instance", "usd_per_instance_hour_min", "usd_per_instance_hour_median",
    "usd_per_gpu_hour_min", "spot_usd_per_gpu_hour_min", "catalog_path", "catalog_commit",
)  # fmt: skip
#: GPU instance types one import may list (every provider together). SkyPilot's whole public
#: catalog lists ~390 (catalogs/sources/gpu_rental_offers.csv, at most 120 for one provider).
MAX_INSTANCE_TYPES = 5_000
#: (instance type, region) price cells one import may hold: ~40 regions for each of the
#: instance types above is ~16,000; zones of a region are one cell.
MAX_PRICE_CELLS = 200_000


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
    #: every file read (an import never writes onto one of them)
    inputs: list[Path] = field(default_factory=list)

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


def _read_csv(path: Path, required: Iterable[str]) -> CsvRows:
    """The rows of a CSV file, streamed (a bounded regular file, no duplicated column)."""
    rows = read_csv(path, "CSV file")
    rows.require(required)
    return rows


def _num(text: str, path: Path, line: int, column: str) -> float | None:
    """Parse a number; empty or NaN -> None; garbage -> InputError naming file, line, column."""
    if text is None or text.strip() == "" or text.strip().lower() in ("nan", "none", "null"):
        return None
    if len(text) > MAX_DIGITS:
        raise InputError(
            f"{path}:{line}: column {column!r}: a number of {len(text):,} characters; "
            f"at most {MAX_DIGITS}"
        )
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
    where: str = ""  # file:line of its first priced row, for messages
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


@dataclass
class _Cell:
    """The rows of one (instance type, accelerator, count) in one region, read as they come:
    per pattern of listed prices (``pattern`` = 2 x has on-demand + has spot) the number of
    rows and the first one's line and ``GpuInfo``; the lowest price and spot price."""

    rows: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    first: list[tuple[int, str] | None] = field(default_factory=lambda: [None] * 4)
    od: float | None = None
    spot: float | None = None

    def add(self, line: int, info: str, od: float | None, spot: float | None) -> None:
        k = 2 * (od is not None) + (spot is not None)
        self.rows[k] += 1
        if self.first[k] is None:
            self.first[k] = (line, info)
        if od is not None:
            self.od = od if self.od is None else min(self.od, od)
        if spot is not None:
            self.spot = spot if self.spot is None else min(self.spot, spot)


@dataclass
class _Hosts:
    """GPU VM rows, deduplicated as they are read: instance type -> (accelerator, count) ->
    region -> :class:`_Cell`. Joined with the accelerator rows once the file is read."""

    path: Path
    cells: dict[str, dict[tuple[str, int], dict[str, _Cell]]] = field(default_factory=dict)
    n_cells: int = 0

    def add(
        self, row: dict[str, str], line: int, accelerator: tuple[str, int], prices: tuple
    ) -> None:
        itype, region = row["InstanceType"], row["Region"]
        by_acc = self.cells.get(itype)
        if by_acc is None:
            if len(self.cells) >= MAX_INSTANCE_TYPES:
                raise InputError(
                    f"{self.path}:{line}: more than {MAX_INSTANCE_TYPES:,} GPU instance types "
                    f"(SkyPilot's whole catalog lists ~400); not a price catalog"
                )
            by_acc = self.cells[itype] = {}
        by_region = by_acc.setdefault(accelerator, {})
        cell = by_region.get(region)
        if cell is None:
            self.n_cells += 1
            if self.n_cells > MAX_PRICE_CELLS:
                raise InputError(
                    f"{self.path}:{line}: more than {MAX_PRICE_CELLS:,} (instance type, region) "
                    "prices; not a price catalog"
                )
            cell = by_region[region] = _Cell()
        cell.add(line, row.get("GpuInfo", ""), *prices)


def _row_host_prices(
    row: dict[str, str], line: int, csv_path: Path, has_spot: bool
) -> tuple[float | None, float | None]:
    """A GPU VM row's own price and spot price (zero or negative ones dropped)."""
    price = _positive(_num(row["Price"], csv_path, line, "Price"))
    spot = _num(row.get("SpotPrice", ""), csv_path, line, "SpotPrice") if has_spot else None
    return price, _positive(spot)


def _join_cell(
    cell: _Cell, extra: list[float | None] | None, joined: bool, result: ImportResult
) -> tuple[int | None, int, float | None, float | None]:
    """A cell's rows joined with their region's accelerator prices (``joined``: the
    accelerator is listed apart, GCP): (first priced line, rows priced, price, spot price),
    the rows skipped counted in ``result`` as a row-by-row reader counts them."""
    if joined and extra is None:
        result.skipped["host VM without accelerator price in its region"] += sum(cell.rows)
        return None, 0, None, None
    acc_od, acc_spot = extra if joined else (0.0, 0.0)  # type: ignore[misc]
    first: int | None = None
    priced = 0
    for k, n in enumerate(cell.rows):
        if not n:
            continue
        has_od = bool(k & 2) and acc_od is not None
        has_spot = bool(k & 1) and acc_spot is not None
        if not has_od and not has_spot:
            result.skipped["no Price"] += n
            continue
        if not has_od:
            result.skipped["no Price (spot only)"] += n
        line = cell.first[k][0]  # type: ignore[index]
        first = line if first is None else min(first, line)
        priced += n
    od = cell.od + acc_od if cell.od is not None and acc_od is not None else None
    spot = cell.spot + acc_spot if cell.spot is not None and acc_spot is not None else None
    return first, priced, od, spot


def _first_info(cells: dict[str, _Cell], line: int) -> str:
    """The ``GpuInfo`` of the row at ``line``."""
    for cell in cells.values():
        for first in cell.first:
            if first is not None and first[0] == line:
                return first[1]
    return ""


def _join_hosts(
    hosts: _Hosts, accelerators: _AcceleratorRows, result: ImportResult
) -> dict[str, _Group]:
    """Host VM prices completed with their accelerator's (GCP), grouped by instance type; an
    instance type keeps the accelerator of its first priced row (later rows naming another
    accelerator are counted and ignored)."""
    groups: dict[str, _Group] = {}
    for itype, by_acc in hosts.cells.items():
        kept: list[tuple[int, tuple[str, int], dict[str, tuple]]] = []
        for accelerator, by_region in by_acc.items():
            joined = accelerator in accelerators.rows
            regions: dict[str, tuple] = {}
            first: int | None = None
            for region, cell in by_region.items():
                extra = accelerators.prices.get((*accelerator, region)) if joined else None
                line, priced, od, spot = _join_cell(cell, extra, joined, result)
                if line is not None:
                    regions[region] = (od, spot, priced)
                    first = line if first is None else min(first, line)
            if first is not None:
                kept.append((first, accelerator, regions))
        if not kept:
            continue
        kept.sort(key=lambda k: k[0])
        line, (acc, n), regions = kept[0]
        g = groups[itype] = _Group(
            acc, n, _first_info(by_acc[(acc, n)], line), f"{hosts.path}:{line}"
        )
        for region, (od, spot, _) in regions.items():
            g.add(region, od, spot)
        for _, _, other in kept[1:]:
            result.skipped["instance type listed with another accelerator (ignored)"] += sum(
                r[2] for r in other.values()
            )
    return groups


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
    """Rows of one ``vms.csv`` grouped by instance type (GCP host + accelerator rows joined).

    The rows are streamed and deduplicated as they are read (zones of a region are one
    cell), so memory follows the instance types and regions, not the rows.
    """
    rows = _read_csv(csv_path, SKYPILOT_REQUIRED)
    result.inputs.append(csv_path)
    has_spot = "SpotPrice" in rows.columns
    accelerators = _AcceleratorRows()
    hosts = _Hosts(csv_path)
    for line, row in rows:
        result.rows_read += 1
        if region is not None and row["Region"] != region:
            result.skipped[f"other region than {region}"] += 1
            continue
        accelerator = _row_accelerator(row, line, csv_path, has_spot, accelerators, result)
        if accelerator is not None:
            hosts.add(row, line, accelerator, _row_host_prices(row, line, csv_path, has_spot))
        if len(accelerators.prices) > MAX_PRICE_CELLS:
            raise InputError(
                f"{csv_path}:{line}: more than {MAX_PRICE_CELLS:,} (accelerator, region) "
                "prices; not a price catalog"
            )
    used = {acc for by_acc in hosts.cells.values() for acc in by_acc}
    groups = _join_hosts(hosts, accelerators, result)
    _report_unmatched(accelerators, used, result)
    return groups


def _provider_dirs(root: Path) -> dict[str, Path]:
    try:
        mode = root.stat().st_mode
    except OSError as exc:
        raise InputError(f"{root}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return {root.parent.name: root}
    if not stat.S_ISDIR(mode):
        raise InputError(
            f"{root}: not a folder or a regular file (a device, FIFO or socket); expected a "
            "SkyPilot catalog folder such as ~/.sky/catalogs/v8, or one <provider>/vms.csv"
        )
    try:
        folders = sorted(d for d in root.iterdir() if (d / "vms.csv").is_file())
    except OSError as exc:
        raise InputError(f"{root}: cannot read the folder: {exc.strerror or exc}") from None
    return {d.name: d / "vms.csv" for d in folders}


def _catalog_files(root: Path, providers: Iterable[str] | None) -> list[tuple[str, Path]]:
    """(provider, its ``vms.csv``) to read, in the order asked (default: every one found)."""
    if not os.path.lexists(root):
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


SOURCE_MD_MAX = 1024 * 1024  # a SOURCE.md is a page of prose (catalogs/sources': 2 KB)


def _source_md_date(csv_path: Path) -> tuple[str | None, str | None]:
    """First YYYY-MM-DD in the SOURCE.md beside the CSV, and the clause it is in."""
    md = csv_path.parent / "SOURCE.md"
    if not md.is_file():
        return None, None
    try:
        raw = read_bytes(md, "SOURCE.md", SOURCE_MD_MAX)
    except InputError:  # too big or not a file: no date from it (the CSV's date is used)
        return None, None
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    m = re.search(r"\d{4}-\d{2}-\d{2}", text)
    if not m:
        return None, None
    start = max(text.rfind(c, 0, m.start()) for c in ".;()") + 1
    ends = [i for i in (text.find(c, m.end()) for c in ".;()") if i >= 0]
    return m.group(0), text[start : min(ends, default=len(text))].strip()


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
