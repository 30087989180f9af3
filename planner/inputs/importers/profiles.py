"""Import measured serving profiles: vLLM benchmark results and Mélange inputs.

Two sources, both turned into the planner's own files (:mod:`planner.inputs.profiles`,
:mod:`planner.inputs.problem`):

* :func:`vllm_profile` reads the result JSON that vLLM's serving benchmark writes
  (``vllm bench serve --save-result``, formerly ``benchmarks/benchmark_serving.py``; both write
  the same keys, ``vllm/benchmarks/serve.py``). One result is one measured point: its
  ``request_throughput`` (completed requests per second of the run) and its p95 TTFT and TPOT,
  read from ``p95_ttft_ms`` / ``p95_tpot_ms`` (present only when the run was given
  ``--metric-percentiles 95``; the default is 99 only) or computed, as vLLM computes them, from
  the per-request lists saved with ``--save-detailed`` (``ttfts``, ``itls``, ``latencies``,
  ``output_lens``, ``errors``). The request shape is the mean prompt and output tokens per
  completed request (``total_input_tokens`` / ``completed``). ``--append-result`` writes one
  JSON object per line into one file: each line is a result.
* :func:`melange_problem` reads the input of the Mélange solver (Griggs et al. 2024,
  arXiv:2404.14527; ``melange/config/example.json`` of ``tyler-griggs/melange-release``)::

      {"gpu_info": {"A10G": {"cost": 1.01, "tputs": [[2, 1], [5, 2]]}, ...},
       "workload_distribution": [[0.2, 0.1], [0.5, 0.2]],
       "total_request_rate": 30.0, "slice_factor": 1}

  Rows of ``workload_distribution`` are input-length buckets, columns output-length buckets,
  cells the share of requests; ``tputs[i][j]`` is the GPU's profiled maximum req/s for that
  bucket at the service SLO; ``cost`` is $/GPU-hour. The file names neither the bucket
  boundaries nor the SLO: the boundaries default to Mélange's profiling sizes (README: "1-25,
  25-100, 100-250, ...", ``benchmark-launcher.sh``: 25 100 250 500 1000 2000 tokens, each the
  upper end of a bucket) and are read here as ``[1, 25], [26, 100], [101, 250], ...`` so that a
  profile measured at a bucket's upper end lies in that bucket only. ``slice_factor`` only
  splits Mélange's own bin packing and has no counterpart in a problem file.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.base.files import JSONSyntaxError, atomic_write_bytes, parse_json, read_json, read_text
from planner.inputs.catalog import CATALOG_DIR, load_gpus, load_offers
from planner.inputs.problem import Problem, parse_month
from planner.inputs.profiles import ProfileFile

SOURCE_MAX = 1000  # ServeProfile.source max_length
MAX_REQUEST_TOKENS = 1_000_000  # ServeProfile.prompt and .output
PERCENTILE_HINT = (
    "rerun vllm bench serve with --metric-percentiles 95 --percentile-metrics ttft,tpot "
    "(or --save-detailed to keep the per-request ttfts and itls)"
)
#: Mélange's profiled request sizes: the upper end of each bucket (README, benchmark-launcher.sh).
MELANGE_EDGES: tuple[int, ...] = (25, 100, 250, 500, 1000, 2000)
#: Normalized Mélange GPU names (lower case, letters and digits) -> catalog GPU ids.
MELANGE_GPUS: dict[str, str] = {
    "a10080gb": "a100-sxm-80gb", "a10080g": "a100-sxm-80gb", "a100sxm80gb": "a100-sxm-80gb",
    "a100sxm480gb": "a100-sxm-80gb", "a100": "a100-sxm-80gb",
    "a10g": "a10g", "a10g24gb": "a10g",
    "h100": "h100-sxm", "h10080gb": "h100-sxm", "h100sxm": "h100-sxm", "h100sxm5": "h100-sxm",
    "l4": "l4", "l424gb": "l4",
}  # fmt: skip
MAX_MELANGE_GPUS = 100  # GPU types in one Mélange config
#: The catalog GPUs a Mélange GPU of another name is modelled on (the nearest in hourly price).
MELANGE_LIKE = ("a100-sxm-80gb", "a10g", "h100-sxm", "l4")


# ----------------------------------------------------------------------------- shared helpers


def _num(value: Any) -> float | None:
    """A finite JSON number (not a bool), else None.

    >>> _num(2), _num(1.5), _num(True), _num("3"), _num(float("nan"))
    (2.0, 1.5, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation (numpy's default, as vLLM uses).

    >>> percentile([1, 2, 3, 4], 95)
    3.85
    >>> percentile([7], 95)
    7.0
    """
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def _clip(text: str, limit: int = SOURCE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def month_of_vllm_date(date: Any) -> str | None:
    """``YYYY-MM`` of a vLLM result ``date`` (``%Y%m%d-%H%M%S``), or None.

    >>> month_of_vllm_date("20250115-143022"), month_of_vllm_date("soon")
    ('2025-01', None)
    """
    m = re.fullmatch(r"(\d{4})(\d{2})\d{2}-\d{6}", str(date))
    if not m or not 1 <= int(m.group(2)) <= 12:
        return None
    return f"{m.group(1)}-{m.group(2)}"


def _validated_profiles(doc: dict, what: str) -> dict:
    """``doc`` checked against :class:`ProfileFile` (a bug here is an InputError naming it)."""
    try:
        ProfileFile.model_validate(doc)
    except ValidationError as exc:
        why = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise InputError(f"{what}: the imported profiles are not valid: {why}") from None
    return doc


# ----------------------------------------------------------------------------- vLLM results


def read_json_results(path: str | Path) -> list[tuple[str, dict]]:
    """The results in one vLLM result file: one JSON object, or one per line
    (``--append-result``); each named ``file`` or ``file#N``."""
    p = Path(path)
    text = read_text(p, "vLLM benchmark result (JSON)")
    try:
        docs = [parse_json(text, p)]
    except JSONSyntaxError as exc:
        numbered = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        try:
            docs = [parse_json(ln, f"{p}:{i}") for i, ln in numbered] if len(numbered) > 1 else []
        except JSONSyntaxError:
            docs = []
        if not docs:
            raise InputError(
                f"{exc}; expected the result JSON of vllm bench serve --save-result"
            ) from None
    if len(docs) == 1:
        return [(str(p), docs[0])]
    return [(f"{p}#{i + 1}", d) for i, d in enumerate(docs)]


def _require(result: dict, key: str, name: str, *, positive: bool = True) -> float:
    """A number of a vLLM result; a missing or bad one is an InputError naming the key."""
    if key not in result:
        raise InputError(f"{name}: missing key {key!r}; is this a vllm bench serve result JSON?")
    v = _num(result[key])
    if v is None or v < 0 or (positive and v == 0):
        want = "a number above 0" if positive else "a number >= 0"
        raise InputError(f"{name}: {key} is {result[key]!r}; expected {want}")
    return v


def _succeeded(result: dict, n: int) -> list[bool]:
    """Which requests succeeded: ``errors`` empty, else a positive output length."""
    errors = result.get("errors")
    if isinstance(errors, list) and len(errors) == n:
        return [not e for e in errors]
    lens = result.get("output_lens")
    if isinstance(lens, list) and len(lens) == n:
        return [(_num(x) or 0) > 0 for x in lens]
    return [True] * n


def _per_request(result: dict, key: str, name: str) -> list | None:
    """A per-request list saved with ``--save-detailed``, or None when absent."""
    v = result.get(key)
    if v is None:
        return None
    if not isinstance(v, list):
        raise InputError(f"{name}: {key} is not a list (per-request values expected)")
    return v


def _ttft_p95(result: dict, name: str) -> tuple[float, str]:
    """p95 TTFT in ms and how it was read."""
    if "p95_ttft_ms" in result:
        return _require(result, "p95_ttft_ms", name), "read"
    ttfts = _per_request(result, "ttfts", name)
    if not ttfts:
        have = sorted(k for k in result if re.fullmatch(r"p[0-9.]+_ttft_ms", k))
        raise InputError(
            f"{name}: no p95 TTFT: the file has no p95_ttft_ms"
            + (f" (only {', '.join(have)})" if have else "")
            + f" and no per-request ttfts; {PERCENTILE_HINT}"
        )
    ok = _succeeded(result, len(ttfts))
    xs = [_num(t) for t, good in zip(ttfts, ok, strict=True) if good]
    if not xs or any(x is None or x <= 0 for x in xs):
        raise InputError(f"{name}: ttfts holds no usable times (seconds > 0 expected)")
    return percentile(xs, 95) * 1000, "computed"


def _tpot_one(result: dict, i: int, n_out: float) -> float | None:
    """TPOT of request ``i`` in seconds, as vLLM computes it: (latency - ttft) / (output - 1),
    or the sum of its inter-token latencies over (output - 1)."""
    lat, ttft, itls = (result.get(k) for k in ("latencies", "ttfts", "itls"))
    if isinstance(lat, list) and isinstance(ttft, list) and len(lat) == len(ttft) > i:
        a, b = _num(lat[i]), _num(ttft[i])
        if a is not None and b is not None:
            return (a - b) / (n_out - 1)
    if isinstance(itls, list) and len(itls) > i and isinstance(itls[i], list):
        gaps = [_num(x) for x in itls[i]]
        if gaps and all(g is not None for g in gaps):
            return sum(gaps) / (n_out - 1)  # type: ignore[arg-type]
    return None


def _tpot_p95(result: dict, name: str) -> tuple[float, str]:
    """p95 TPOT in ms and how it was read."""
    if "p95_tpot_ms" in result:
        return _require(result, "p95_tpot_ms", name), "read"
    outs = _per_request(result, "output_lens", name)
    if not outs or _per_request(result, "itls", name) is None:
        raise InputError(
            f"{name}: no p95 TPOT: the file has no p95_tpot_ms and no per-request "
            f"output_lens and itls; {PERCENTILE_HINT}"
        )
    ok = _succeeded(result, len(outs))
    xs = []
    for i, (n, good) in enumerate(zip(outs, ok, strict=True)):
        n_out = _num(n)
        if good and n_out is not None and n_out > 1:
            t = _tpot_one(result, i, n_out)
            if t is not None and t > 0:
                xs.append(t)
    if not xs:
        raise InputError(
            f"{name}: no request produced more than one output token with timings; "
            "TPOT cannot be computed"
        )
    return percentile(xs, 95) * 1000, "computed"


def vllm_point(result: dict, name: str) -> dict:
    """One vLLM result as a measured point plus its shape and provenance.

    Returns ``{"shape": (prompt, output), "point": {rps, p95_ttft_ms, p95_tpot_ms}, ...}``.
    """
    if not isinstance(result, dict):
        raise InputError(f"{name}: expected a JSON object (a vllm bench serve result)")
    if result.get("ramp_up_strategy"):
        raise InputError(
            f"{name}: a ramp-up run (ramp_up_strategy {result['ramp_up_strategy']!r}) mixes "
            "request rates; import runs made at one fixed --request-rate"
        )
    completed = _require(result, "completed", name, positive=False)
    if completed == 0:
        raise InputError(f"{name}: completed is 0: every request failed (see its errors)")
    if completed != int(completed):
        raise InputError(f"{name}: completed is {completed:g}; expected a number of requests")
    rps = _require(result, "request_throughput", name)
    if "total_output_tokens" not in result and "total_input_tokens" in result:
        raise InputError(f"{name}: missing key 'total_output_tokens': not a generation run")
    prompt = _mean_tokens(result, "total_input_tokens", completed, name)
    output = _mean_tokens(result, "total_output_tokens", completed, name)
    ttft, ttft_how = _ttft_p95(result, name)
    tpot, tpot_how = _tpot_p95(result, name)
    return {
        "shape": (max(1, round(prompt)), max(1, round(output))),
        "point": {
            "rps": round(rps, 6),
            "p95_ttft_ms": round(ttft, 3),
            "p95_tpot_ms": round(tpot, 3),
        },
        "as_of": month_of_vllm_date(result.get("date")),
        "label": _run_label(result, name, _how(ttft_how, tpot_how)),
        "meta": {k: result.get(k) for k in ("backend", "model_id", "date")},
    }


def _mean_tokens(result: dict, key: str, completed: float, name: str) -> float:
    """Tokens per completed request, at most :data:`MAX_REQUEST_TOKENS`."""
    mean = _require(result, key, name) / completed
    if mean > MAX_REQUEST_TOKENS:
        raise InputError(
            f"{name}: {key} / completed is {mean:.3g} tokens per request; at most "
            f"{MAX_REQUEST_TOKENS:,} (a request shape in a profiles file)"
        )
    return mean


def _how(ttft: str, tpot: str) -> str:
    """How a run's p95 latencies were obtained, for the source text.

    >>> _how("read", "computed")
    'p95 TTFT from p95_ttft_ms, p95 TPOT computed from the per-request lists'
    """
    said = {"read": "from p95_{}_ms", "computed": "computed from the per-request lists"}
    return f"p95 TTFT {said[ttft].format('ttft')}, p95 TPOT {said[tpot].format('tpot')}"


def _run_label(result: dict, name: str, how: str) -> str:
    """``file (date, request_rate r, max_concurrency c, how p95 was read)``."""
    bits = [str(result["date"])] if result.get("date") else []
    if result.get("request_rate") is not None:
        bits.append(f"request_rate {result['request_rate']}")
    if result.get("max_concurrency") is not None:
        bits.append(f"max_concurrency {result['max_concurrency']}")
    bits.append(how)
    return f"{Path(name).name}" + (f" ({', '.join(bits)})" if bits else "")


def _vllm_source(runs: list[dict]) -> str:
    """One sentence naming the files, backend, model_id and dates of a group of runs."""

    def values(key: str) -> str:
        return ", ".join(sorted({str(r["meta"][key]) for r in runs if r["meta"].get(key)})) or "?"

    head = (
        f"vLLM serving benchmark (backend {values('backend')}, model_id {values('model_id')}); "
        "runs: "
    )
    labels = [r["label"] for r in runs]
    text = head + "; ".join(labels)
    k = len(labels)
    while len(text) > SOURCE_MAX and k > 1:
        k -= 1
        text = head + "; ".join(labels[:k]) + f"; and {len(labels) - k} more"
    return _clip(text)


def vllm_profile(
    results: list[tuple[str, dict]],
    *,
    model: str,
    gpu: str,
    tp: int,
    precision: str,
    source: str | None = None,
) -> dict:
    """vLLM serving-benchmark results -> a profiles-file dict ``{"serve": [...]}``.

    Each result is one point; results of the same request shape become one entry with
    several points (sorted by rate). ``source`` replaces the generated description.
    """
    if not results:
        raise InputError("no vLLM result files given")
    groups: dict[tuple[int, int], list[dict]] = {}
    for name, result in results:
        run = vllm_point(result, name)
        groups.setdefault(run["shape"], []).append(run)
    serve = []
    for (prompt, output), runs in sorted(groups.items()):
        months = [r["as_of"] for r in runs if r["as_of"]]
        serve.append(
            {
                "model": model, "gpu": gpu, "tp": tp, "precision": precision,
                "prompt": prompt, "output": output,
                "points": sorted((r["point"] for r in runs), key=lambda p: p["rps"]),
                "source": _clip(source) if source else _vllm_source(runs),
                "as_of": max(months) if months else dt.date.today().strftime("%Y-%m"),
            }
        )  # fmt: skip
    what = ", ".join(Path(n).name for n, _ in results[:3]) + (" ..." if len(results) > 3 else "")
    return _validated_profiles({"serve": serve}, what)


def _entry_key(e: dict) -> tuple:
    return tuple(e.get(k) for k in ("model", "gpu", "tp", "precision", "prompt", "output"))


def merge_profiles(existing: dict, new: dict) -> dict:
    """``new``'s entries added to ``existing``: a serve entry with the same model, GPU, tp,
    precision and shape that has points gets the new points (a point measured twice is kept
    once); anything else is appended. Train entries and other entries are kept."""
    out = {"serve": [dict(e) for e in existing.get("serve") or []]}
    if existing.get("train"):
        out["train"] = list(existing["train"])
    for e in new.get("serve", []):
        same = [o for o in out["serve"] if _entry_key(o) == _entry_key(e) and o.get("points")]
        if not same or not e.get("points"):
            out["serve"].append(e)
            continue
        o = same[0]
        o["points"] = sorted(
            {json.dumps(p, sort_keys=True): p for p in [*o["points"], *e["points"]]}.values(),
            key=lambda p: p["rps"],
        )
        o["source"] = _clip(f"{o['source']}; {e['source']}")
        o["as_of"] = max(str(o["as_of"]), str(e["as_of"]))
    return _validated_profiles(out, "merged profiles")


# ----------------------------------------------------------------------------- Mélange


def read_json_config(path: str | Path) -> dict:
    """A Mélange config file as a dict (not JSON, or not an object: an InputError)."""
    p = Path(path)
    doc = read_json(p, "Mélange config (JSON)")
    if not isinstance(doc, dict):
        raise InputError(f"melange config {p}: expected a JSON object with key 'gpu_info', ...")
    return doc


def _matrix(value: Any, where: str, what: str) -> list[list[float]]:
    """A non-empty rectangular matrix of finite numbers >= 0."""
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        raise InputError(f"{where}: expected a non-empty list of rows (lists of {what})")
    width = len(value[0])
    rows = []
    for i, row in enumerate(value):
        if len(row) != width or not row:
            raise InputError(f"{where}: row {i} has {len(row)} cells, row 0 has {width}")
        nums = [_num(x) for x in row]
        for j, x in enumerate(nums):
            if x is None:
                raise InputError(f"{where}[{i}][{j}] is {row[j]!r}; expected a number")
            if x < 0:
                raise InputError(f"{where}[{i}][{j}] is {x:g}; {what} cannot be negative")
        rows.append(nums)
    return rows  # type: ignore[return-value]


def _gpu_entries(config: dict, name: str) -> dict[str, dict]:
    """``gpu_info`` as {Mélange name: entry}; the solver's dict, or the README's list of
    ``{name, cost, tputs}``."""
    info = config["gpu_info"]
    if isinstance(info, list):
        out = {}
        for i, g in enumerate(info):
            if not isinstance(g, dict) or not isinstance(g.get("name"), str):
                raise InputError(f"melange config {name}: gpu_info[{i}]: missing key 'name'")
            out[g["name"]] = g
        info = out
    if not isinstance(info, dict) or not info:
        raise InputError(
            f"melange config {name}: gpu_info must map GPU names to {{cost, tputs}} (none given)"
        )
    if len(info) > MAX_MELANGE_GPUS:
        raise InputError(
            f"melange config {name}: gpu_info lists {len(info):,} GPU types; at most "
            f"{MAX_MELANGE_GPUS} (the GPU catalog has ~15, the Mélange paper used 4)"
        )
    return info


def _melange_gpus(config: dict, name: str, shape: tuple[int, int]) -> dict[str, tuple]:
    """{Mélange name: (cost, tputs)} with every shape and number checked."""
    out = {}
    for gname, g in _gpu_entries(config, name).items():
        where = f"melange config {name}: gpu_info.{gname}"
        if not isinstance(g, dict):
            raise InputError(f"{where}: expected an object with keys 'cost' and 'tputs'")
        for key in ("cost", "tputs"):
            if key not in g:
                raise InputError(f"{where}: missing key {key!r}")
        cost = _num(g["cost"])
        if cost is None or not 0 < cost <= 1000:
            raise InputError(f"{where}.cost is {g['cost']!r}; expected $/GPU-hour above 0")
        tputs = _matrix(g["tputs"], f"{where}.tputs", "throughputs (req/s)")
        if (len(tputs), len(tputs[0])) != shape:
            raise InputError(
                f"{where}.tputs has {len(tputs)} rows of {len(tputs[0])}, the distribution "
                f"has {shape[0]} rows of {shape[1]}"
            )
        out[gname] = (cost, tputs)
    return out


def _check_melange_keys(config: dict, name: str) -> None:
    if not isinstance(config, dict):
        raise InputError(f"melange config {name}: expected a JSON object")
    for key in ("gpu_info", "workload_distribution", "total_request_rate"):
        if key not in config:
            raise InputError(f"melange config {name}: missing key {key!r}")
    known = {"gpu_info", "workload_distribution", "total_request_rate", "slice_factor"}
    extra = sorted(set(config) - known)
    if extra:
        raise InputError(
            f"melange config {name}: unknown key {extra[0]!r} (Mélange reads "
            f"{', '.join(sorted(known))})"
        )


def bucket_ranges(edges: Sequence[int], n: int, axis: str, name: str) -> list[tuple[int, int]]:
    """The first ``n`` token ranges of upper ends ``edges``: ``[1, e0], [e0 + 1, e1], ...``.

    >>> bucket_ranges((25, 100, 250), 2, "input", "x")
    [(1, 25), (26, 100)]
    """
    if n > len(edges):
        raise InputError(
            f"melange config {name}: {n} {axis}-length buckets, but only {len(edges)} bucket "
            f"edges are known ({', '.join(map(str, edges))}); give the {axis} edges (the upper "
            f"end of each bucket)"
        )
    if any(b <= a for a, b in itertools.pairwise(edges)) or edges[0] < 1:
        raise InputError(f"{axis} bucket edges must increase from 1 or more: {list(edges)}")
    lows = [1, *(e + 1 for e in edges[: n - 1])]
    return list(zip(lows, edges[:n], strict=True))


def _slug(text: str) -> str:
    """A GPU id from a Mélange name.

    >>> _slug("TPU v5e (16GB)")
    'tpu-v5e-16gb'
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def catalog_gpu_for(name: str, catalog_ids: Iterable[str]) -> str | None:
    """The catalog id a Mélange GPU name stands for, or None.

    >>> catalog_gpu_for("A100-80GB", ["a100-sxm-80gb"]), catalog_gpu_for("L40S", ["l40s"])
    ('a100-sxm-80gb', 'l40s')
    >>> catalog_gpu_for("T4", ["l4"]) is None
    True
    """
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    ids = set(catalog_ids)
    if MELANGE_GPUS.get(key) in ids:
        return MELANGE_GPUS[key]
    by_key = {re.sub(r"[^a-z0-9]", "", i): i for i in ids}
    return by_key.get(key)


def reference_prices() -> dict[str, float]:
    """Median on-demand $/GPU-hour of :data:`MELANGE_LIKE` in the shipped offers files
    (non-marketplace offers), the yardstick a custom GPU's ``like`` is chosen by."""
    prices: dict[str, list[float]] = {}
    for f in ("offers.yaml", "offers-manual.yaml"):
        if (CATALOG_DIR / f).is_file():
            for o in load_offers(CATALOG_DIR / f).values():
                if o.gpu in MELANGE_LIKE and o.kind == "on_demand" and not o.marketplace:
                    prices.setdefault(o.gpu, []).append(o.usd_per_gpu_hour)
    return {g: statistics.median(v) for g, v in prices.items()}


def nearest_like(cost: float, prices: dict[str, float]) -> str:
    """The reference GPU nearest in hourly price to ``cost``.

    >>> nearest_like(1.5, {"l4": 1.3, "a10g": 2.0, "h100-sxm": 3.4})
    'l4'
    """
    return min(sorted(prices), key=lambda g: abs(prices[g] - cost))


def _gpu_ids(names: Iterable[str], costs: dict[str, float], name: str) -> tuple[dict, dict]:
    """({Mélange name: planner GPU id}, custom_gpus) for the config's GPUs."""
    catalog = load_gpus()
    ids: dict[str, str] = {}
    custom: dict[str, dict] = {}
    prices: dict[str, float] | None = None
    for g in names:
        cid = catalog_gpu_for(g, catalog)
        if cid is None:
            prices = prices if prices is not None else reference_prices()
            like = nearest_like(costs[g], prices)
            cid, k = _slug(g), 2
            while cid in catalog or cid in custom:
                cid, k = f"{_slug(g)}-{k}", k + 1
            custom[cid] = {
                "like": like,
                "name": g,
                "source": f"Mélange config {name}: {g} is not in the catalog; figures of "
                f"{like}, the nearest in hourly price (${prices[like]:.2f}/h median "
                f"on-demand in catalogs/offers*.yaml vs ${costs[g]:g}/h)",
            }
        if cid in ids.values():
            raise InputError(f"melange config {name}: gpu_info names {cid!r} twice ({g})")
        ids[g] = cid
    return ids, custom


def _buckets(dist: list[list[float]], ins: list, outs: list) -> list[dict]:
    """One request bucket per nonzero cell, shares normalised to sum to 1."""
    total = sum(map(sum, dist))
    out = []
    for i, (plo, phi) in enumerate(ins):
        for j, (olo, ohi) in enumerate(outs):
            if dist[i][j] > 0:
                out.append(
                    {
                        "name": f"p{plo}-{phi}_o{olo}-{ohi}",
                        "prompt": plo if plo == phi else [plo, phi],
                        "output": olo if olo == ohi else [olo, ohi],
                        "share": dist[i][j] / total,
                    }
                )
    return out


def _melange_profiles(
    gpus: dict[str, tuple], ids: dict[str, str], ins: list, outs: list, model: str, as_of: str,
    name: str,
) -> dict:  # fmt: skip
    """One serve entry per (GPU, bucket) with nonzero throughput, at the bucket's upper ends;
    the workload is ``measured_only``, so a GPU without an entry does not serve that bucket."""
    serve = []
    for g, (_, tputs) in gpus.items():
        for i, (_, phi) in enumerate(ins):
            for j, (_, ohi) in enumerate(outs):
                if tputs[i][j] > 0:
                    serve.append(
                        {
                            "model": model, "gpu": ids[g], "tp": 1, "precision": "fp16",
                            "prompt": phi, "output": ohi, "max_rps": tputs[i][j],
                            "source": f"Mélange config {name}: gpu_info.{g}.tputs[{i}][{j}] "
                            "(max req/s per GPU at the service SLO)",
                            "as_of": as_of,
                        }
                    )  # fmt: skip
    return _validated_profiles({"serve": serve}, f"melange config {name}")


def _check_servable(dist: list, gpus: dict[str, tuple], ins: list, outs: list, name: str) -> None:
    """Every bucket with requests needs a GPU with nonzero throughput for it."""
    for i, row in enumerate(dist):
        for j, share in enumerate(row):
            if share > 0 and not any(t[i][j] > 0 for _, t in gpus.values()):
                raise InputError(
                    f"melange config {name}: workload_distribution[{i}][{j}] (prompt "
                    f"{list(ins[i])}, output {list(outs[j])}) has requests but every GPU's "
                    f"tputs[{i}][{j}] is 0: no GPU can serve them"
                )


def melange_problem(
    config: dict,
    *,
    name: str,
    model: str = "llama-2-7b",
    profiles_file: str,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    start: str = "2027-01",
    as_of: str | None = None,
    input_edges: Sequence[int] = MELANGE_EDGES,
    output_edges: Sequence[int] | None = None,
) -> tuple[dict, dict]:
    """A Mélange config -> (problem dict, profiles dict): one month of renting at the
    config's constant request rate, its GPUs at its prices, its distribution as request
    buckets and its profiled throughputs as measured ``max_rps`` at the workload's SLO.

    ``name`` names the config in messages and sources (its file name); ``as_of`` dates the
    prices and profiles (default: this month); the edges are each bucket's upper end (the
    output edges default to the input edges).
    """
    _check_melange_keys(config, name)
    where = f"melange config {name}"
    dist = _matrix(config["workload_distribution"], f"{where}: workload_distribution", "shares")
    if sum(map(sum, dist)) <= 0:
        raise InputError(f"{where}: workload_distribution is all zeros: no requests")
    rate = _num(config["total_request_rate"])
    if rate is None or not 0 < rate <= 1e10:
        raise InputError(
            f"{where}: total_request_rate is {config['total_request_rate']!r}; expected req/s "
            "above 0"
        )
    gpus = _melange_gpus(config, name, (len(dist), len(dist[0])))
    ins = bucket_ranges(input_edges, len(dist), "input", name)
    outs = bucket_ranges(
        input_edges if output_edges is None else output_edges, len(dist[0]), "output", name
    )
    _check_servable(dist, gpus, ins, outs, name)
    as_of = _month_or_error(as_of, "as_of") if as_of else dt.date.today().strftime("%Y-%m")
    ids, custom = _gpu_ids(gpus, {g: c for g, (c, _) in gpus.items()}, name)
    problem = _melange_problem_dict(
        config, name, model, profiles_file, (slo_ttft_ms, slo_tpot_ms), start, as_of,
        gpus, ids, custom, _buckets(dist, ins, outs), rate,
    )  # fmt: skip
    try:
        Problem.model_validate(problem)
    except ValidationError as exc:
        why = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise InputError(f"{where}: the generated problem is not valid: {why}") from None
    return problem, _melange_profiles(gpus, ids, ins, outs, model, as_of, name)


def _month_or_error(text: str, what: str) -> str:
    """``text`` when it is a ``YYYY-MM`` month, else an InputError naming ``what``."""
    try:
        parse_month(text)
    except ValueError as exc:
        raise InputError(f"{what}: {exc}") from None
    return text


def _melange_problem_dict(
    config: dict, name: str, model: str, profiles_file: str, slo: tuple[float, float],
    start: str, as_of: str, gpus: dict, ids: dict, custom: dict, requests: list, rate: float,
) -> dict:  # fmt: skip
    """The problem file of a Mélange config (see :func:`melange_problem`)."""
    offers = [
        {
            "id": f"melange-{ids[g]}", "provider": "melange", "gpu": ids[g], "kind": "on_demand",
            "usd_per_gpu_hour": cost, "gpus_per_instance": 1,
            "source": f"Mélange config {name}: gpu_info.{g}.cost", "as_of": as_of,
        }
        for g, (cost, _) in gpus.items()
    ]  # fmt: skip
    problem: dict[str, Any] = {
        "name": f"Mélange config {name}"[:500],
        "horizon": {"start": start, "months": 1},
        "budget": {"capex_usd": 0},
        "site": {"power_usd_per_kwh": 0},
        "gpus": list(ids.values()),
    }
    if custom:
        problem["custom_gpus"] = custom
    problem["offers"] = {"files": [], "extra": offers}
    problem["workloads"] = {
        "serve": [
            {
                "name": "melange", "model": model, "precision": "fp16", "start": start,
                "traffic": {"daily_active_users": rate, "requests_per_user_per_day": 86400,
                            "utilization": 1.0},
                "requests": requests,
                "slo": {"p95_ttft_ms": slo[0], "p95_tpot_ms": slo[1], "max_load": 1.0},
                "redundancy": 0,
                "measured_only": True,
            }
        ]
    }  # fmt: skip
    problem["finance"] = {"discount_rate": 0, "residual": "none"}
    problem["profiles"] = [profiles_file]
    return problem


# ----------------------------------------------------------------------------- writing


def dump_yaml(doc: dict, header: str = "") -> str:
    """YAML text (``safe_dump``, keys in order) with an optional ``#`` comment header."""
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    lines = "".join(f"# {ln}\n" if ln else "#\n" for ln in header.splitlines())
    return lines + body


def write_yaml(path: str | Path, doc: dict, header: str = "") -> None:
    """Write ``doc`` as YAML atomically (never half a file)."""
    atomic_write_bytes(path, dump_yaml(doc, header).encode("utf-8"))
