"""Import GPU rental offers from SkyPilot price catalogs into the planner's offers format.

Two inputs, one result (:class:`ImportResult`), one writer (:func:`write_offers_yaml`):

* :func:`read_skypilot_catalog` reads a SkyPilot catalog *version folder* (for example
  ``~/.sky/catalogs/v8/``, or a checkout of ``skypilot-org/skypilot-catalog``'s
  ``catalogs/v9/``) holding ``<provider>/vms.csv`` files. Columns are found by name (their
  order differs between providers). GCP lists host VMs and accelerators on separate rows
  (accelerator rows have an empty ``InstanceType``); a GPU VM's price there is the host price
  plus the accelerator price in the same region.
* :func:`read_aggregate_csv` reads the aggregate CSV in ``catalogs/sources/`` (one row per
  provider and instance type, already summarised across regions; see its ``SOURCE.md``).

The default offers file ``catalogs/offers.yaml`` is generated from the aggregate with::

    planner offers import-aggregate catalogs/sources/gpu_rental_offers.csv \\
        -o catalogs/offers.yaml

(``planner offers import-aggregate ...`` once the ``offers`` group is registered in the CLI).

Accelerator names are mapped to GPU catalog ids by :func:`normalize_accelerator`; the rules:

* Form factor comes from a hint in the accelerator name, the instance type or ``GpuInfo``:
  ``PCI``/``PCIe`` -> PCIe; ``NVL`` (not ``NVLINK``) -> the NVL PCIe variant (H100 NVL, H200
  NVL: not in the catalog, reported unknown); ``SXM``, ``NVLINK``, ``HGX``, ``DGX``, ``MEGA``
  -> SXM. Instance families known to be SXM boards count as a hint: AWS p4d/p4de/p5/p5e/p5en/
  p6, GCP a2-/a3-/a4-, OCI BM.GPU4/BM.GPU.A100/H100/H200/B200.
* Memory comes from the name (``A100-80GB``), the instance type (``80GB``, ``_80G``) or
  ``GpuInfo`` (``SizeInMiB`` >= 65536, or 70..100 when a provider writes GiB). An A100 with no
  memory hint is the 40 GB card.
* ``A100`` (40 GB) -> ``a100-sxm-40gb`` (the only 40 GB A100 in the catalog); with a PCIe hint it
  is reported unknown (``A100-40GB-PCIE``).
* ``A100-80GB`` -> ``a100-pcie-80gb`` with a PCIe hint, ``a100-sxm-80gb`` with an SXM hint.
  ``H100`` (also ``H100-SXM``, ``H100-MEGA``, ``H100-NVLINK``) -> ``h100-pcie`` / ``h100-sxm``
  the same way. With no hint: 8 or more GPUs per instance -> SXM (8-GPU boards are HGX
  boards), fewer -> PCIe. The no-hint cases are counted in ``ImportResult.assumptions``; PCIe
  is the conservative choice (lower bandwidth and FLOPS than the SXM part at the same price).
* ``H200`` -> ``h200-sxm``; ``B200`` -> ``b200``; ``L40S`` -> ``l40s``; ``L4`` -> ``l4``;
  ``A10G`` -> ``a10g``; ``RTX4090``/``RTX-4090``/``RTX 4090`` -> ``rtx-4090``; ``RTX3090`` ->
  ``rtx-3090``.
* Anything else (T4, V100, A10, A6000, L40, MI300X, TPUs, ...) is reported in
  ``ImportResult.unknown`` (name -> number of instance types skipped), never dropped silently;
  so is a mapped id that the GPU catalog does not hold.

Prices: per (provider, instance type) the rental unit is the GPUs per instance; the per-GPU-
hour price is the instance price divided by it. Zones of one region count once (their
minimum); across regions the ``min`` or the ``median`` (default) is taken, for on-demand and
spot alike, or only ``region`` is read.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import statistics
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.base.files import atomic_write_bytes
from planner.inputs.catalog import CATALOG_DIR, Offer, OfferFile

PriceStat = Literal["min", "median"]

#: GPU ids of the catalog when ``catalogs/gpus.yaml`` cannot be read.
DEFAULT_GPU_IDS = frozenset(
    {
        "h100-sxm", "h100-pcie", "h200-sxm", "a100-sxm-80gb", "a100-pcie-80gb", "a100-sxm-40gb",
        "rtx-4090", "rtx-3090", "l40s", "l4", "a10g", "b200",
    }
)  # fmt: skip

#: Providers that are marketplaces or resellers (prices vary by host, availability not assured).
MARKETPLACES = frozenset({"vast", "shadeform", "primeintellect"})

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


# --------------------------------------------------------------------------- normalization

_NVL_ONLY = re.compile(r"NVL(?!INK)")
_SXM_HINT = re.compile(r"SXM|NVLINK|HGX|DGX|MEGA")
_SXM_FAMILIES = re.compile(
    r"^(p4d|p4de|p5|p5e|p5en|p6-b\d+)\.|^a[234]-(high|mega|ultra|edge)gpu-|^BM\.GPU(4|\.A100|\.H100|\.H200|\.B200)",
    re.IGNORECASE,
)
_BASE = re.compile(
    r"(A100|H100|H200|B200|RTX4090|RTX3090|L40S|L4|A10G)((?:SXM\d?|PCIE|MEGA|NVLINK|NVL|\d+GB?)*)"
)
_MIB = re.compile(r"SIZEINMIB'?\"?\s*:\s*(\d+)")


def _form_factor(text: str, instance_type: str) -> str | None:
    """``pcie``, ``nvl``, ``sxm`` or None from the hint text (upper case) and instance type."""
    if _NVL_ONLY.search(text):  # H100 NVL / H200 NVL: PCIe cards, other memory and bandwidth
        return "nvl"
    if "PCI" in text:
        return "pcie"
    if _SXM_HINT.search(text) or _SXM_FAMILIES.search(instance_type or ""):
        return "sxm"
    return None


def _memory_80(text: str, key: str) -> bool:
    if re.search(r"80GB?|94GB?", key) or re.search(r"(?<!\d)80\s?GB?(?![A-Z0-9])|81920", text):
        return True
    for mib in _MIB.findall(text):
        n = int(mib)
        if n >= 65536 or 70 <= n <= 100:
            return True
    return False


def _tpu_family(name: str) -> str:
    m = re.match(r"(tpu-v\d+[a-z]*)", name, re.IGNORECASE)
    return m.group(1).lower() if m else name


#: Accelerators with one catalog id whatever the form-factor and memory hints.
_SIMPLE_IDS = {
    "B200": "b200",
    "RTX4090": "rtx-4090",
    "RTX3090": "rtx-3090",
    "L40S": "l40s",
    "L4": "l4",
    "A10G": "a10g",
}


def _unknown_label(raw: str) -> str:
    """The name an unmapped accelerator is reported under (TPUs by family, not by slice)."""
    return _tpu_family(raw) if raw.lower().startswith("tpu") else raw or "(empty)"


def _form_or_assumed(
    base: str, text: str, instance_type: str, count: int
) -> tuple[str, bool, str | None]:
    """``(form, hinted, assumption)``: the hinted form factor, else one assumed from the count.

    8 or more GPUs per instance are an HGX board (SXM); fewer are taken as PCIe, the
    conservative choice (less bandwidth and FLOPS than the SXM part at the same price).
    """
    form = _form_factor(text, instance_type)
    if form is not None:
        return form, True, None
    form = "sxm" if count >= 8 else "pcie"
    many = ">= 8" if count >= 8 else "< 8"
    return form, False, f"{base} without form-factor hint, {many} GPUs: assumed {form.upper()}"


def _a100_id(
    form: str, hinted: bool, assumed: str | None, memory_80: bool
) -> tuple[str | None, str | None]:
    """:func:`normalize_accelerator` for an A100 (40 GB unless a memory hint says 80)."""
    if memory_80:
        if form == "nvl":
            return None, "A100-80GB-NVL"
        return ("a100-pcie-80gb" if form == "pcie" else "a100-sxm-80gb"), assumed
    if hinted and form == "pcie":
        return None, "A100-40GB-PCIE"
    # only one 40 GB A100 in the catalog: no assumption needed when no hint is given
    return "a100-sxm-40gb", None


def normalize_accelerator(
    name: str, count: int = 1, instance_type: str = "", gpu_info: str = ""
) -> tuple[str | None, str | None]:
    """Map a SkyPilot accelerator to a GPU catalog id (module docstring has the rules).

    Returns ``(gpu_id, assumption)``; ``assumption`` names the no-hint rule when one was used.
    When the accelerator is not mapped, returns ``(None, label)`` with the name to report.

    >>> normalize_accelerator("A100-80GB", 8, "p4de.24xlarge")
    ('a100-sxm-80gb', None)
    >>> normalize_accelerator("A100", 1, "epyc-genoa-a100-pcie_1x4v8gb", "{'MemoryInfo': {'SizeInMiB': 81920}}")
    ('a100-pcie-80gb', None)
    >>> normalize_accelerator("H100", 8, "hyperstack_H100x8")
    ('h100-sxm', 'H100 without form-factor hint, >= 8 GPUs: assumed SXM')
    >>> normalize_accelerator("H100", 1, "gpu_1x_h100_pcie")
    ('h100-pcie', None)
    >>> normalize_accelerator("RTX-4090", 2)
    ('rtx-4090', None)
    >>> normalize_accelerator("H100", 1, "1x-H100_NVL-32-65536")
    (None, 'H100-NVL')
    >>> normalize_accelerator("T4", 1)
    (None, 'T4')
    """
    raw = (name or "").strip()
    m = _BASE.fullmatch(re.sub(r"[\s_\-]+", "", raw.upper()))
    if not m:
        return None, _unknown_label(raw)
    base, suffix = m.group(1), m.group(2)
    text = f"{raw} {instance_type} {gpu_info}".upper()
    form, hinted, assumed = _form_or_assumed(base, text, instance_type, count)
    if base == "A100":
        return _a100_id(form, hinted, assumed, _memory_80(text, suffix))
    if base == "H100":
        if form == "nvl":
            return None, "H100-NVL"
        return ("h100-pcie" if form == "pcie" else "h100-sxm"), assumed
    if base == "H200":
        if hinted and form in ("nvl", "pcie"):
            return None, "H200-NVL"
        return "h200-sxm", None
    if suffix and not re.fullmatch(r"\d+GB?", suffix):
        return None, raw
    return _SIMPLE_IDS[base], None


# --------------------------------------------------------------------------- helpers


def known_gpu_ids(gpus_path: str | Path | None = None) -> frozenset[str]:
    """Ids of the GPU catalog (``catalogs/gpus.yaml``), or :data:`DEFAULT_GPU_IDS` if absent."""
    from planner.inputs.catalog import load_gpus

    p = Path(gpus_path) if gpus_path else CATALOG_DIR / "gpus.yaml"
    if not p.exists():
        return DEFAULT_GPU_IDS
    return frozenset(load_gpus(p))


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


def _stat(values: list[float], how: str) -> float:
    return min(values) if how == "min" else statistics.median(values)


def _slug(text: str) -> str:
    """Lowercase id part: ``lambdalabs_H100-sxm5x8`` -> ``lambdalabs-h100-sxm5x8``.

    >>> _slug("H100_NVLINK_80GB::8")
    'h100-nvlink-80gb-8'
    """
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9.]+", "-", text.lower())).strip("-.")


def _gpu_count(n: float | None) -> int | None:
    """``n`` as a number of GPUs per instance; None when missing, fractional or below 1."""
    if n is None or n != int(n) or n < 1:
        return None
    return int(n)


def _positive(price: float | None) -> float | None:
    """A price, or None when missing, zero or negative (catalogs write 0 for "not sold")."""
    return price if price is not None and price > 0 else None


def _check_price_stat(price: str) -> None:
    """Only the two statistics the readers know how to take."""
    if price not in ("min", "median"):
        raise InputError(f"price must be 'min' or 'median', got {price!r}")


def _draft(
    *,
    provider: str,
    instance_type: str,
    gpu: str,
    kind: str,
    usd_per_gpu_hour: float,
    gpus_per_instance: int,
    region: str | None,
    source: str,
    as_of: str,
) -> dict:
    """An offer before ids are assigned; ``_base`` is the stem its id is made from."""
    return {
        "_base": _slug(f"{provider}-{instance_type}"),
        "provider": provider,
        "gpu": gpu,
        "kind": kind,
        "usd_per_gpu_hour": round(usd_per_gpu_hour, 6),
        "gpus_per_instance": gpus_per_instance,
        "marketplace": provider in MARKETPLACES,
        "region": region,
        "instance_type": instance_type,
        "source": source,
        "as_of": as_of,
    }


def _assign_ids(drafts: list[dict]) -> list[dict]:
    """Give every draft offer a unique id; the gpu id is added where an instance type repeats."""
    gpus: dict[str, set[str]] = defaultdict(set)
    for d in drafts:
        gpus[d["_base"]].add(d["gpu"])
    seen: Counter = Counter()
    for d in drafts:
        stem = d["_base"] if len(gpus[d["_base"]]) == 1 else f"{d['_base']}-{d['gpu']}"
        suffix = "od" if d["kind"] == "on_demand" else d["kind"]
        oid = f"{stem}-{suffix}"
        seen[oid] += 1
        d["id"] = oid if seen[oid] == 1 else f"{oid}-{seen[oid]}"
    return drafts


def _build_offers(drafts: list[dict], result: ImportResult, where: str) -> None:
    for d in _assign_ids(drafts):
        data = {k: v for k, v in d.items() if not k.startswith("_")}
        try:
            result.offers.append(Offer.model_validate(data))
        except ValidationError as exc:  # pragma: no cover - guarded by the checks above
            raise InputError(f"{where}: offer {data.get('id')!r} is invalid: {exc}") from None
    result.offers.sort(key=lambda o: (o.provider, o.gpu, o.kind, o.usd_per_gpu_hour, o.id))


# --------------------------------------------------------------------------- SkyPilot catalogs

# GCP host VM families and the accelerators attached to them (host rows carry no GPU columns).
_GCP_HOSTS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^a2-(?:high|mega)gpu-(\d+)g$"), "A100"),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), "A100-80GB"),
    (re.compile(r"^a3-(?:high|edge)gpu-(\d+)g(?:-.*)?$"), "H100"),
    (re.compile(r"^a3-megagpu-(\d+)g$"), "H100-MEGA"),
    (re.compile(r"^a3-ultragpu-(\d+)g$"), "H200"),
    (re.compile(r"^a4-highgpu-(\d+)g$"), "B200"),
]
_GCP_G2 = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}


def gcp_host_accelerator(instance_type: str) -> tuple[str, int] | None:
    """Accelerator name and count of a GCP GPU host VM, or None for other VMs.

    >>> gcp_host_accelerator("a3-highgpu-8g")
    ('H100', 8)
    >>> gcp_host_accelerator("g2-standard-24")
    ('L4', 2)
    >>> gcp_host_accelerator("n2-standard-8") is None
    True
    """
    for rx, acc in _GCP_HOSTS:
        m = rx.match(instance_type)
        if m:
            return acc, int(m.group(1))
    m = re.match(r"^g2-standard-(\d+)$", instance_type)
    if m and int(m.group(1)) in _GCP_G2:
        return "L4", _GCP_G2[int(m.group(1))]
    return None


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


def _group_drafts(
    provider: str,
    groups: dict[str, _Group],
    ids: frozenset[str],
    result: ImportResult,
    *,
    price: PriceStat,
    region: str | None,
    source: str,
    as_of: str,
) -> list[dict]:
    """Draft offers (on-demand and spot) of one provider's instance types.

    Accelerators that map to no catalog GPU are counted in ``result.unknown``.
    """
    drafts: list[dict] = []
    for itype, g in sorted(groups.items()):
        gpu, note = normalize_accelerator(g.gpu_name, g.count, itype, g.gpu_info)
        if gpu is None:  # note is the name to report
            result.unknown[note or g.gpu_name] += 1
            continue
        if gpu not in ids:
            result.unknown[f"{g.gpu_name} (maps to {gpu}, not in the GPU catalog)"] += 1
            continue
        for kind, prices in (("on_demand", g.od), ("spot", g.spot)):
            if not prices:
                continue
            drafts.append(
                _draft(
                    provider=provider,
                    instance_type=itype,
                    gpu=gpu,
                    kind=kind,
                    usd_per_gpu_hour=_stat(list(prices.values()), price) / g.count,
                    gpus_per_instance=g.count,
                    region=region,
                    source=source,
                    as_of=as_of,
                )
            )
        if (g.od or g.spot) and note:  # note is the no-hint assumption used
            result.assumptions[note] += 1
    return drafts


def read_skypilot_catalog(
    path: str | Path,
    providers: Iterable[str] | None = None,
    region: str | None = None,
    price: PriceStat = "median",
    gpu_ids: Iterable[str] | None = None,
) -> ImportResult:
    """Read ``<path>/<provider>/vms.csv`` files of a SkyPilot catalog version folder.

    ``path`` may also be one ``vms.csv`` (its folder name is the provider). ``providers``
    restricts the providers read; ``region`` reads one region only; ``price`` chooses how
    regions are summarised (``min`` or ``median``). ``gpu_ids`` are the ids offers may use
    (default: the GPU catalog's); accelerators mapped elsewhere are reported unknown.
    """
    _check_price_stat(price)
    root = Path(path).expanduser()
    files = _catalog_files(root, providers)
    ids = frozenset(gpu_ids) if gpu_ids is not None else known_gpu_ids()
    result = ImportResult(
        price_stat=price,
        region=region,
        source_path=display_path(root),
        providers=[p for p, _ in files],
    )
    drafts: list[dict] = []
    dates: list[str] = []
    version = root.parent.parent.name if root.is_file() else root.name
    for provider, csv_path in files:
        source, as_of = _catalog_source(csv_path, provider, version)
        result.sources.append(source)
        dates.append(as_of)
        groups = _read_provider(provider, csv_path, region, result)
        drafts += _group_drafts(
            provider, groups, ids, result, price=price, region=region, source=source, as_of=as_of
        )
    _build_offers(drafts, result, str(root))
    result.as_of = max(dates) if dates else ""
    return result


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


def _aggregate_gpu(
    row: dict[str, str], n: int, ids: frozenset[str], result: ImportResult
) -> tuple[str, str | None] | None:
    """``(gpu id, assumption)`` of an aggregate row; None (counted unknown) when not mapped."""
    # the aggregator's own form factor and accelerator columns are hints like SkyPilot's GpuInfo
    hint = f"{row['form_factor'] if row['form_factor'] != 'unknown' else ''} {row['accelerator']}"
    gpu, assumption = normalize_accelerator(row["accelerator_raw"], n, row["instance_type"], hint)
    if gpu is not None and gpu not in ids:
        result.unknown[f"{row['accelerator_raw']} (maps to {gpu}, not in the GPU catalog)"] += 1
        return None
    if gpu is None:
        result.unknown[assumption] += 1
        return None
    return gpu, assumption


def _aggregate_prices(
    row: dict[str, str], line: int, csv_path: Path, n: int, price: PriceStat, result: ImportResult
) -> tuple[float | None, float | None] | None:
    """On-demand and spot USD per GPU-hour of an aggregate row; None (counted) when it has neither."""
    if price == "median":
        column = "usd_per_instance_hour_median"
        inst = _num(row[column], csv_path, line, column)
        od = inst / n if inst is not None else None
    else:
        od = _num(row["usd_per_gpu_hour_min"], csv_path, line, "usd_per_gpu_hour_min")
    spot = _num(row["spot_usd_per_gpu_hour_min"], csv_path, line, "spot_usd_per_gpu_hour_min")
    od, spot = _positive(od), _positive(spot)
    if od is None and spot is None:
        result.skipped["no price"] += 1
        return None
    if od is None:
        result.skipped["no on-demand price (spot only)"] += 1
    return od, spot


def _aggregate_row_drafts(
    row: dict[str, str],
    line: int,
    csv_path: Path,
    price: PriceStat,
    ids: frozenset[str],
    as_of: str,
    result: ImportResult,
) -> list[dict]:
    """Draft offers of one aggregate row (none when skipped); records its provider and source."""
    n = _gpu_count(_num(row["gpus_per_instance"], csv_path, line, "gpus_per_instance"))
    if n is None:
        result.skipped["fractional or missing gpus_per_instance"] += 1
        return []
    mapped = _aggregate_gpu(row, n, ids, result)
    if mapped is None:
        return []
    prices = _aggregate_prices(row, line, csv_path, n, price, result)
    if prices is None:
        return []
    gpu, assumption = mapped
    provider = row["provider"].lower()
    source = f"skypilot-catalog {row['catalog_path']} @ {row['catalog_commit']}"
    if source not in result.sources:
        result.sources.append(source)
    if provider not in result.providers:
        result.providers.append(provider)
    if assumption:
        result.assumptions[assumption] += 1
    return [
        _draft(
            provider=provider,
            instance_type=row["instance_type"],
            gpu=gpu,
            kind=kind,
            usd_per_gpu_hour=value,
            gpus_per_instance=n,
            region=None,
            source=source,
            as_of=as_of,
        )
        for kind, value in zip(("on_demand", "spot"), prices, strict=True)
        if value is not None
    ]


def read_aggregate_csv(
    path: str | Path, price: PriceStat = "median", gpu_ids: Iterable[str] | None = None
) -> ImportResult:
    """Read the aggregate CSV (``catalogs/sources/gpu_rental_offers.csv`` format).

    On-demand per-GPU prices are ``usd_per_instance_hour_median / gpus_per_instance``
    (``price='median'``) or ``usd_per_gpu_hour_min``; the CSV holds only the minimum spot
    price, which is used for spot offers either way. ``as_of`` is the date in the
    ``SOURCE.md`` beside the CSV when there is one, else the CSV's file date.
    """
    _check_price_stat(price)
    p = Path(path)
    rows, _ = _read_csv(p, AGGREGATE_REQUIRED)
    ids = frozenset(gpu_ids) if gpu_ids is not None else known_gpu_ids()
    as_of, note = _aggregate_as_of(p)
    result = ImportResult(price_stat=price, source_path=display_path(p), as_of=as_of)
    result.as_of_note = note
    drafts: list[dict] = []
    for line, row in enumerate(rows, start=2):
        result.rows_read += 1
        drafts += _aggregate_row_drafts(row, line, p, price, ids, as_of, result)
    result.providers.sort()
    result.sources.sort()
    _build_offers(drafts, result, str(p))
    return result


# --------------------------------------------------------------------------- writer


def provenance(result: ImportResult) -> dict[str, str | int | float | list[str] | None]:
    """The ``provenance:`` mapping of an offers file written from ``result``."""
    per = result.offers_per_provider()
    return {
        "generated_by": "planner.inputs.importers.offers",
        "generator": result.generator,
        "source_path": result.source_path,
        "sources": list(result.sources),
        "imported_at": dt.datetime.now(dt.UTC)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z"),
        "as_of": result.as_of,
        "as_of_note": result.as_of_note,
        "price_statistic": result.price_stat,
        "region": result.region,
        "providers": list(result.providers),
        "rows_read": result.rows_read,
        "offers": len(result.offers),
        "offers_per_provider": [
            f"{p}: {sum(c.values())} ({', '.join(f'{k} {v}' for k, v in sorted(c.items()))})"
            for p, c in per.items()
        ],
        "unknown_accelerators": [f"{k}: {v}" for k, v in sorted(result.unknown.items())],
        "skipped_rows": [f"{k}: {v}" for k, v in sorted(result.skipped.items())],
        "assumptions": [f"{k}: {v}" for k, v in sorted(result.assumptions.items())],
        "marketplaces": sorted({o.provider for o in result.offers if o.marketplace}),
    }


_FIELDS = ("id", "provider", "gpu", "kind", "usd_per_gpu_hour", "gpus_per_instance", "max_gpus",
           "term_months", "marketplace", "region", "instance_type", "source", "as_of")  # fmt: skip


def offers_document(result: ImportResult) -> dict:
    """The offers file content (validated against :class:`~planner.inputs.catalog.OfferFile`)."""
    offers = []
    for o in result.offers:
        d = o.model_dump()
        offers.append(
            {k: d[k] for k in _FIELDS if not (k in ("max_gpus", "term_months") and d[k] is None)}
        )
    doc = {"provenance": provenance(result), "offers": offers}
    OfferFile.model_validate(doc)
    return doc


def dump_offers_yaml(result: ImportResult) -> str:
    header = (
        "# GPU rental offers generated by planner.inputs.importers.offers; do not edit by hand.\n"
        "# Schema: planner/inputs/catalog.py (OfferFile, Offer). Prices are USD per GPU-hour.\n"
    )
    if result.generator:
        header += f"# Regenerate: {result.generator}\n"
    body = yaml.safe_dump(offers_document(result), sort_keys=False, allow_unicode=True, width=200)
    return header + body


def write_offers_yaml(result: ImportResult, out_path: str | Path) -> Path:
    """Write ``result`` as an offers file, atomically; an import with no usable offer is an
    InputError that says why, and writes nothing."""
    if not result.offers:
        raise InputError(f"nothing to import: {nothing_usable(result)}; no file written")
    out = Path(out_path)
    atomic_write_bytes(out, dump_offers_yaml(result).encode("utf-8"))
    return out


def nothing_usable(result: ImportResult) -> str:
    """Why an import found no offer: rows read, unknown accelerators, skipped rows by reason.

    >>> nothing_usable(ImportResult(rows_read=3, skipped=Counter({"no price": 3})))
    '3 rows read; skipped: no price x3'
    """
    parts = [f"{result.rows_read} rows read"]
    if result.unknown:
        top = ", ".join(f"{k} x{v}" for k, v in result.unknown.most_common(5))
        parts.append(f"unknown accelerators: {top}")
    if result.skipped:
        parts.append("skipped: " + ", ".join(f"{k} x{v}" for k, v in result.skipped.most_common()))
    return "; ".join(parts)


def parse_providers(text: str | None) -> list[str] | None:
    """``"aws, lambda"`` -> ``['aws', 'lambda']``; empty -> None.

    >>> parse_providers("aws, Lambda")
    ['aws', 'lambda']
    """
    if not text:
        return None
    return [p.strip().lower() for p in text.split(",") if p.strip()]


__all__ = [
    "DEFAULT_GPU_IDS", "MARKETPLACES", "ImportResult", "dump_offers_yaml",
    "gcp_host_accelerator", "known_gpu_ids", "normalize_accelerator", "offers_document",
    "parse_providers", "provenance", "read_aggregate_csv", "read_skypilot_catalog",
    "write_offers_yaml",
]  # fmt: skip
