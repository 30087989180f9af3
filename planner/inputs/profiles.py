"""Measured profiles: numbers a team measured on its own model and GPUs, trusted over physics.

A profiles file (named by the problem's ``profiles:`` list, relative to the problem file)::

    serve:
      - model: llama-2-7b          # catalog model id
        gpu: a10g                  # catalog GPU id, or a custom GPU of the problem
        tp: 1                      # GPUs per replica
        precision: fp16
        prompt: 512                # the request shape measured, tokens
        output: 128
        max_rps: 3.2               # either: req/s per replica at the SLO below ...
        slo: {p95_ttft_ms: 500, p95_tpot_ms: 50}   # optional; unset: the workload's SLO
        points:                    # ... or measured runs at request rates
          - {rps: 2.0, p95_ttft_ms: 210.0, p95_tpot_ms: 31.5}
        source: vLLM benchmark_serving on our cluster, run 2026-11-20
        as_of: 2026-11
    train:
      - {model: llama-3-8b, gpu: h100-sxm, precision: bf16, gpus: 64,
         tokens_per_s_per_gpu: 3100, source: ..., as_of: 2026-11}

Pure data and pure lookups: :mod:`planner.inputs.problem` loads the files, :mod:`planner.optimize.candidates`
asks :func:`serve_rate` and :func:`train_rate` for a measurement before the physics.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from planner.base.errors import InputError
from planner.base.units import CaseInsensitive
from planner.base.yamlevents import load_plain_yaml, locate
from planner.base.yamlio import Loc, YamlDoc, require_mapping, validation_message
from planner.inputs.catalog import MAX_FLEET_GPUS, Strict

# fp4 too: a run measured at FP4 is trusted like any other (vLLM serves MXFP4 weights on cards
# without FP4 tensor cores, gpt-oss on H100 among them), where the physics alone refuses it
Precision = Annotated[Literal["fp16", "bf16", "fp8", "int8", "int4", "fp4"], CaseInsensitive]


class MeasuredSlo(Strict):
    p95_ttft_ms: float = Field(gt=0, le=3_600_000)
    p95_tpot_ms: float = Field(gt=0, le=60_000)


class MeasuredPoint(Strict):
    """One benchmark run: the request rate it sustained and its p95 latencies."""

    rps: float = Field(gt=0, le=1e6, description="requests/s completed per replica")
    p95_ttft_ms: float = Field(gt=0, le=3_600_000)
    p95_tpot_ms: float = Field(gt=0, le=60_000)


class ServeProfile(Strict):
    """Serving measurements of one (model, GPU, tensor-parallel size, precision, shape)."""

    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    tp: int = Field(1, ge=1, le=64)
    precision: Precision = "fp16"
    prompt: int = Field(gt=0, le=1_000_000)
    output: int = Field(gt=0, le=1_000_000)
    max_rps: float | None = Field(None, gt=0, le=1e6, description="req/s per replica at the SLO")
    slo: MeasuredSlo | None = None
    points: list[MeasuredPoint] = Field(default_factory=list)
    source: str = Field(min_length=1, max_length=1000)
    as_of: str = Field(min_length=1, max_length=40)

    @model_validator(mode="after")
    def _one_kind(self) -> ServeProfile:
        if (self.max_rps is None) == (not self.points):
            raise ValueError(
                "give max_rps (req/s per replica at the SLO) or points (measured runs), one of them"
            )
        if self.slo is not None and self.max_rps is None:
            raise ValueError("slo belongs with max_rps (points carry their own latencies)")
        return self


class TrainProfile(Strict):
    """Training throughput measured at a GPU count."""

    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    precision: Precision = "bf16"
    gpus: int = Field(ge=1, le=MAX_FLEET_GPUS)
    tokens_per_s_per_gpu: float = Field(gt=0, le=1e9)
    source: str = Field(min_length=1, max_length=1000)
    as_of: str = Field(min_length=1, max_length=40)


class ProfileFile(Strict):
    serve: list[ServeProfile] = Field(default_factory=list)
    train: list[TrainProfile] = Field(default_factory=list)


def load_profile_file(path: str | Path) -> tuple[ProfileFile, YamlDoc]:
    """A profiles file, validated, and its document (for the lines of later errors).

    Read by :func:`planner.base.yamlevents.load_plain_yaml`: a file of 100,000 entries
    (13 MB) loads in seconds (``python benchmarks/inputs_profiles.py``)."""
    doc = load_plain_yaml(path, "profiles file")
    require_mapping(doc, "profiles file", ProfileFile)
    try:
        return ProfileFile.model_validate(doc.data), doc
    except ValidationError as exc:
        locate(doc, error_locs(exc, doc.data))
        raise InputError(validation_message(exc, doc, "profiles file", ProfileFile)) from None


def error_locs(exc: ValidationError, data: Any, most: int = 1000) -> list[Loc]:
    """The data paths a validation error names (pydantic's type tags dropped), for
    :func:`planner.base.yamlevents.locate`."""
    out: list[Loc] = []
    for err in exc.errors()[:most]:
        loc: list[Any] = []
        cur = data
        for part in err["loc"]:
            try:
                cur = cur[part]
            except (KeyError, IndexError, TypeError):
                loc.append(part)  # a missing or unknown key: its parent's line
                break
            loc.append(part)
        out.append(tuple(loc))
        items = getattr(err.get("ctx", {}).get("error"), "items", None) or []
        out.extend(tuple(loc) + tuple(sub) for sub, _ in items)
    return out


@dataclass(frozen=True)
class Measured:
    """A capacity taken from a measurement, with where it came from (for the Assumptions)."""

    rate: float  # req/s per replica (serving) or tokens/s per GPU (training)
    source: str
    as_of: str
    file: str
    note: str  # how the number was read: "max_rps at the SLO", "best of 3 runs within the SLO"


@dataclass(frozen=True)
class Profiles:
    """Every profile entry of a problem, with the file each came from."""

    serve: tuple[tuple[ServeProfile, str], ...] = ()
    train: tuple[tuple[TrainProfile, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.serve or self.train)

    # Lookups go through indexes built once: with 100,000 entries a scan per (workload, GPU,
    # tensor-parallel size, bucket) made candidate generation quadratic.
    @functools.cached_property
    def serve_index(self) -> dict[tuple[str, str, int, str], list[tuple[ServeProfile, str]]]:
        """(model, gpu, tp, precision) -> the serving entries measured there, in file order."""
        out: dict[tuple[str, str, int, str], list[tuple[ServeProfile, str]]] = {}
        for p, f in self.serve:
            out.setdefault((p.model, p.gpu, p.tp, p.precision), []).append((p, f))
        return out

    @functools.cached_property
    def train_index(self) -> dict[tuple[str, str, str, int], list[tuple[TrainProfile, str]]]:
        """(model, gpu, precision, gpus) -> the training entries measured there."""
        out: dict[tuple[str, str, str, int], list[tuple[TrainProfile, str]]] = {}
        for p, f in self.train:
            out.setdefault((p.model, p.gpu, p.precision, p.gpus), []).append((p, f))
        return out

    def serve_tps(self, model: str, gpu: str, precision: str) -> set[int]:
        """Tensor-parallel sizes measured for a model on a GPU at a precision."""
        return {tp for (m, g, tp, pr) in self.serve_index if (m, g, pr) == (model, gpu, precision)}

    def train_counts(self, model: str, gpu: str) -> set[int]:
        """GPU counts a training profile measured for a model on a GPU (any precision)."""
        return {k for (m, g, _, k) in self.train_index if (m, g) == (model, gpu)}


def in_range(size: int, rng: tuple[int, int]) -> bool:
    """``lo <= size <= hi``.

    >>> in_range(256, (1, 256)), in_range(257, (1, 256))
    (True, False)
    """
    return rng[0] <= size <= rng[1]


def rate_within(p: ServeProfile, ttft_ms: float, tpot_ms: float) -> tuple[float, str] | None:
    """Req/s per replica that the measurement ``p`` supports within an SLO, or None.

    ``max_rps`` counts when it was measured at an SLO at least as strict as the one asked
    (or at no stated SLO: then it is read as measured at the workload's SLO); ``points``
    give the highest rate among runs whose p95 TTFT and TPOT are within the SLO.

    >>> pts = [MeasuredPoint(rps=1, p95_ttft_ms=90, p95_tpot_ms=20),
    ...        MeasuredPoint(rps=3, p95_ttft_ms=300, p95_tpot_ms=45)]
    >>> p = ServeProfile(model="m", gpu="g", prompt=100, output=50, points=pts, source="s",
    ...                  as_of="2026")
    >>> rate_within(p, 500, 50)[0], rate_within(p, 200, 50)[0], rate_within(p, 50, 50)
    (3.0, 1.0, None)
    """
    if p.max_rps is not None:
        if p.slo is not None and (p.slo.p95_ttft_ms > ttft_ms or p.slo.p95_tpot_ms > tpot_ms):
            return None
        at = "the workload's SLO" if p.slo is None else "a stricter SLO"
        return float(p.max_rps), f"max_rps measured at {at}"
    ok = [q.rps for q in p.points if q.p95_ttft_ms <= ttft_ms and q.p95_tpot_ms <= tpot_ms]
    if not ok:
        return None
    return float(max(ok)), f"best of {len(p.points)} measured runs within the SLO"


def serve_rate(
    profiles: Profiles,
    model: str,
    gpu: str,
    tp: int,
    precision: str,
    prompt: tuple[int, int],
    output: tuple[int, int],
    slo: tuple[float, float],
) -> Measured | None | Literal["outside_slo"]:
    """The measured req/s per replica for a request bucket, or None when nothing was measured.

    A measurement applies to a bucket when its shape lies in the bucket's token ranges
    (``(lo, hi)``; a single size is ``(n, n)``). Several apply: the largest shape (the most
    conservative, requests are at most that long), then the lowest rate. Measured but never
    within the SLO: ``"outside_slo"`` (the configuration cannot serve the bucket).
    """
    found = [
        (p, f)
        for p, f in profiles.serve_index.get((model, gpu, tp, precision), ())
        if in_range(p.prompt, prompt) and in_range(p.output, output)
    ]
    if not found:
        return None
    rated = []
    for p, f in found:
        r = rate_within(p, *slo)
        rated.append(((-(p.prompt + p.output), r[0] if r else 0.0), p, f, r))
    rated.sort(key=lambda x: x[0])
    _, p, f, r = rated[0]
    if r is None:
        return "outside_slo"
    return Measured(r[0], p.source, p.as_of, f, f"{r[1]} ({p.prompt}+{p.output} tokens)")


def train_rate(
    profiles: Profiles, model: str, gpu: str, precision: str, gpus: int
) -> Measured | None:
    """Measured tokens/s per GPU at exactly this GPU count (the lowest if measured twice)."""
    found = profiles.train_index.get((model, gpu, precision, gpus), [])
    if not found:
        return None
    p, f = min(found, key=lambda x: x[0].tokens_per_s_per_gpu)
    return Measured(p.tokens_per_s_per_gpu, p.source, p.as_of, f, f"measured at {gpus} GPUs")
