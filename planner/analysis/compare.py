"""The GPU comparison table people otherwise build by hand (``planner catalog``).

One row per GPU of the catalog: class, memory, bandwidth, dense BF16 TFLOPS, purchase price
(default and range), the cheapest on-demand rental per GPU-hour (overall with its provider,
and per major provider), and the value ratios bandwidth and TFLOPS per $1k of purchase price;
with the source of every figure.
"""

from __future__ import annotations

from typing import Any

from planner.base.errors import InputError
from planner.inputs.catalog import GpuSpec, Offer
from planner.inputs.months import this_month

DEFAULT_PROVIDERS = "aws,gcp,lambda,runpod"

# column key -> (header, description)
BASE_COLUMNS: dict[str, tuple[str, str]] = {
    "id": ("id", "catalog id"),
    "class": ("class", "datacenter or consumer"),
    "memory_gb": ("mem GB", "memory, GB"),
    "bandwidth_gbs": ("BW GB/s", "memory bandwidth, GB/s"),
    "bf16_tflops": ("BF16 TF", "dense BF16 tensor TFLOPS"),
    "purchase_usd": ("buy $", "purchase price per GPU, default"),
    "purchase_low": ("buy low", "purchase price, low end of range"),
    "purchase_high": ("buy high", "purchase price, high end of range"),
    "rent_min": ("rent $/h", "cheapest on-demand rental, USD per GPU-hour"),
    "rent_provider": ("cheapest at", "provider of the cheapest on-demand rental"),
}
RATIO_COLUMNS: dict[str, tuple[str, str]] = {
    "bw_per_k": ("GB/s per $1k", "bandwidth per $1k of purchase price"),
    "tflops_per_k": ("TF per $1k", "dense BF16 TFLOPS per $1k of purchase price"),
}


def _cheapest(offers: list[Offer], gpu: str, now: str, provider: str | None = None) -> Offer | None:
    """The cheapest on-demand offer of ``gpu`` (of ``provider``) at month ``now``'s price (an
    offer with dated steps costs that month's)."""
    best = None
    for o in offers:
        if (
            o.gpu == gpu
            and o.kind == "on_demand"
            and (provider is None or o.provider == provider)
            and (best is None or o.price_in(now) < best.price_in(now))
        ):
            best = o
    return best


def build_rows(
    gpus: dict[str, GpuSpec], offers: list[Offer], providers: list[str]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """Table rows (column key -> value) and, per GPU id, the source of every figure."""
    rows, sources = [], {}
    now = this_month()  # the prices of today
    for gid, g in gpus.items():
        price = g.purchase_usd.value
        best = _cheapest(offers, gid, now)
        row: dict[str, Any] = {
            "id": gid,
            "class": g.klass,
            "memory_gb": g.memory_gb.value,
            "bandwidth_gbs": g.memory_bandwidth_gbs.value,
            "bf16_tflops": g.bf16_dense_tflops.value,
            "purchase_usd": price,
            "purchase_low": g.purchase_usd.low,
            "purchase_high": g.purchase_usd.high,
            "rent_min": best.price_in(now) if best else None,
            "rent_provider": best.provider if best else None,
        }
        src = {
            "memory_gb": f"{g.memory_gb.source} ({g.memory_gb.as_of})",
            "bandwidth_gbs": f"{g.memory_bandwidth_gbs.source} ({g.memory_bandwidth_gbs.as_of})",
            "bf16_tflops": f"{g.bf16_dense_tflops.source} ({g.bf16_dense_tflops.as_of})",
            "purchase_usd": f"{g.purchase_usd.source} ({g.purchase_usd.as_of})",
            "purchase_low": g.purchase_usd.low_source or g.purchase_usd.source,
            "purchase_high": g.purchase_usd.high_source or g.purchase_usd.source,
        }
        if best:
            src["rent_min"] = f"offer {best.id}: {best.source} ({best.as_of})"
        for p in providers:
            o = _cheapest(offers, gid, now, p)
            row[p] = o.price_in(now) if o else None
            if o:
                src[p] = f"offer {o.id}: {o.source} ({o.as_of})"
        row["bw_per_k"] = g.memory_bandwidth_gbs.value / (price / 1000) if price > 0 else None
        row["tflops_per_k"] = g.bf16_dense_tflops.value / (price / 1000) if price > 0 else None
        rows.append(row)
        sources[gid] = src
    return rows, sources


def columns_for(providers: list[str]) -> dict[str, tuple[str, str]]:
    cols = dict(BASE_COLUMNS)
    for p in providers:
        cols[p] = (f"{p} $/h", f"cheapest on-demand at {p}, USD per GPU-hour")
    cols.update(RATIO_COLUMNS)
    return cols


def sort_rows(
    rows: list[dict[str, Any]], spec: str | None, columns: dict[str, tuple[str, str]]
) -> list[dict]:
    """Sort by column key; a leading ``-`` sorts descending. Empty values go last.

    >>> sort_rows([{"a": 2}, {"a": None}, {"a": 1}], "a", {"a": ("a", "")})
    [{'a': 1}, {'a': 2}, {'a': None}]
    >>> sort_rows([{"a": 2}, {"a": None}, {"a": 1}], "-a", {"a": ("a", "")})
    [{'a': 2}, {'a': 1}, {'a': None}]
    """
    if not spec:
        return rows
    desc = spec.startswith("-")
    key = spec.lstrip("-+").lower().replace("-", "_")
    aliases = {header.lower(): k for k, (header, _) in columns.items()}
    key = key if key in columns else aliases.get(spec.lstrip("-+").lower(), key)
    if key not in columns:
        raise InputError(f"--sort: unknown column {spec!r}; columns: {', '.join(columns)}")
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    return sorted(present, key=lambda r: r[key], reverse=desc) + missing
