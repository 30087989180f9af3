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

Accelerator names are mapped to GPU catalog ids by :func:`normalize_accelerator`; the rules
are in :mod:`planner.inputs.importers.accelerators`. Reading and validating the CSVs is in
:mod:`planner.inputs.importers.skypilot_read`; this module turns what they read into offers
and writes the offers file.

Prices: per (provider, instance type) the rental unit is the GPUs per instance; the per-GPU-
hour price is the instance price divided by it. Zones of one region count once (their
minimum); across regions the ``min`` or the ``median`` (default) is taken, for on-demand and
spot alike, or only ``region`` is read.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.base.files import atomic_write_bytes, refuse_overwriting_inputs
from planner.inputs.catalog import Offer, OfferFile
from planner.inputs.importers.accelerators import (
    DEFAULT_GPU_IDS,
    gcp_host_accelerator,
    known_gpu_ids,
    normalize_accelerator,
)
from planner.inputs.importers.skypilot_read import (
    AGGREGATE_REQUIRED,
    MAX_INSTANCE_TYPES,
    ImportResult,
    _aggregate_as_of,
    _catalog_files,
    _catalog_source,
    _gpu_count,
    _Group,
    _num,
    _positive,
    _read_csv,
    _read_provider,
    display_path,
)

PriceStat = Literal["min", "median"]

#: Providers that are marketplaces or resellers (prices vary by host, availability not assured).
MARKETPLACES = frozenset({"vast", "shadeform", "primeintellect"})

#: On-demand availability of today's accelerators: the most GPUs one customer rents at once
#: from one on-demand offer without a sales contract (``max_gpus``). An assumption, stated in
#: catalogs/NOTES.md ("On-demand as it is"): self-serve on-demand capacity is a few nodes
#: (Lambda sells 1-8 GPU on-demand instances, multi-node 1-Click Clusters only as weekly
#: reservations, docs.lambda.ai/public-cloud/billing; AWS Capacity Blocks, the way to get many
#: p5en/p6-b200 nodes at once, are reserved, docs.aws.amazon.com capacity-blocks-how); larger
#: fleets of these GPUs are sold on commitments (catalogs/offers-market.yaml).
ON_DEMAND_CAP_GPUS = 64
ON_DEMAND_CAPPED = frozenset(
    {"h200-sxm", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x"}
)
ON_DEMAND_CAP_NOTE = (
    f"max_gpus {ON_DEMAND_CAP_GPUS} on every on-demand offer of "
    + ", ".join(sorted(ON_DEMAND_CAPPED))
    + " (assumption: self-serve on-demand capacity of one provider is a few nodes; "
    "catalogs/NOTES.md, 'On-demand as it is')"
)


def on_demand_cap(gpu: str, kind: str, gpus_per_instance: int) -> int | None:
    """The availability cap of an imported offer: today's accelerators on demand are capped at
    :data:`ON_DEMAND_CAP_GPUS` (at least one instance); spot and older GPUs are not.

    >>> on_demand_cap("b200", "on_demand", 8), on_demand_cap("b200", "spot", 8)
    (64, None)
    >>> on_demand_cap("h100-sxm", "on_demand", 8) is None
    True
    """
    if kind != "on_demand" or gpu not in ON_DEMAND_CAPPED:
        return None
    return max(ON_DEMAND_CAP_GPUS, gpus_per_instance)


# --------------------------------------------------------------------------- drafts to offers


def _stat(values: list[float], how: str) -> float:
    return min(values) if how == "min" else statistics.median(values)


def _slug(text: str) -> str:
    """Lowercase id part: ``lambdalabs_H100-sxm5x8`` -> ``lambdalabs-h100-sxm5x8``.

    >>> _slug("H100_NVLINK_80GB::8")
    'h100-nvlink-80gb-8'
    """
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9.]+", "-", text.lower())).strip("-.")


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
    where: str = "",
) -> dict:
    """An offer before ids are assigned; ``_base`` is the stem its id is made from, ``_where``
    the file and line it was read from."""
    return {
        "_base": _slug(f"{provider}-{instance_type}"),
        "_where": where,
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
        cap = on_demand_cap(data["gpu"], data["kind"], data["gpus_per_instance"])
        if cap is not None:
            data["max_gpus"] = cap
            result.assumptions[ON_DEMAND_CAP_NOTE] += 1
        try:
            result.offers.append(Offer.model_validate(data))
        except ValidationError as exc:  # a price or a GPU count beyond any real offer
            why = "; ".join(
                f"{'.'.join(map(str, e['loc']))} {e.get('input')!r}: "
                f"{e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise InputError(
                f"{d.get('_where') or where}: instance type {data['instance_type']!r} "
                f"({data['kind']}): {why}"
            ) from None
    result.offers.sort(key=lambda o: (o.provider, o.gpu, o.kind, o.usd_per_gpu_hour, o.id))


# --------------------------------------------------------------------------- SkyPilot catalogs


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
                    where=g.where,
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
            where=f"{csv_path}:{line}",
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
    rows = _read_csv(p, AGGREGATE_REQUIRED)
    ids = frozenset(gpu_ids) if gpu_ids is not None else known_gpu_ids()
    as_of, note = _aggregate_as_of(p)
    result = ImportResult(price_stat=price, source_path=display_path(p), as_of=as_of)
    result.as_of_note = note
    result.inputs.append(p)
    drafts: list[dict] = []
    for line, row in rows:
        result.rows_read += 1
        if result.rows_read > MAX_INSTANCE_TYPES:
            raise InputError(
                f"{p}:{line}: more than {MAX_INSTANCE_TYPES:,} rows (one per provider and "
                "instance type; SkyPilot's whole catalog lists ~400); not a price summary"
            )
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


#: libyaml's emitter (the same text as PyYAML's, ~10x faster) when PyYAML was built with it
_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_offers_yaml(result: ImportResult) -> str:
    header = (
        "# GPU rental offers generated by planner.inputs.importers.offers; do not edit by hand.\n"
        "# Schema: planner/inputs/catalog.py (OfferFile, Offer). Prices are USD per GPU-hour.\n"
    )
    if result.generator:
        header += f"# Regenerate: {result.generator}\n"
    body = yaml.dump(
        offers_document(result), Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=200
    )
    return header + body


def write_offers_yaml(result: ImportResult, out_path: str | Path) -> Path:
    """Write ``result`` as an offers file, atomically; an import with no usable offer is an
    InputError that says why, and writes nothing."""
    out = Path(out_path)
    refuse_overwriting_inputs(out, result.inputs)
    if not result.offers:
        raise InputError(f"nothing to import: {nothing_usable(result)}; no file written")
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
