"""The serving workload's part of the problem file's schema: traffic, request shapes and
mixes, the p95 SLO, and :class:`ServeWorkload` (its model, precisions, GPUs, deployments).

Split from :mod:`planner.inputs.schema` (which re-exports every name).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from planner.base.units import CaseInsensitive
from planner.base.yamlio import LocatedError
from planner.inputs.catalog import Strict
from planner.inputs.model_arch import DraftAcceptance
from planner.inputs.months import parse_month
from planner.inputs.slo_units import check_floor

Month = str
NAME_MAX = 100  # workload and model names: labels in tables and workbook sheets


def _month(v: Any) -> str:
    parse_month(v)
    return str(v)


class Traffic(Strict):
    daily_active_users: float = Field(gt=0, le=1e10, description="at most 10 billion people")
    requests_per_user_per_day: float = Field(gt=0, le=100_000, description="about one a second")
    utilization: float = Field(0.5, ge=0.1, le=1.0, description="mean load / peak load over a day")
    growth_per_month: float = Field(
        0.0, ge=-0.5, le=2.0, description="users' monthly growth, compounded"
    )

    @model_validator(mode="after")
    def _some_requests(self) -> Traffic:
        daily = self.daily_active_users * self.requests_per_user_per_day
        if daily < 1:
            raise LocatedError(
                [
                    (
                        ("daily_active_users",),
                        f"{self.daily_active_users:g} users x {self.requests_per_user_per_day:g} "
                        f"requests per user per day is {daily:.3g} requests a day; a service "
                        "gets at least one request a day in all",
                    )
                ]
            )
        return self


class TokenShape(Strict):
    prompt: int = Field(gt=0, le=1_000_000, description="prompt tokens per request")
    output: int = Field(gt=0, le=1_000_000, description="output tokens per request")


TokenSize = int | tuple[int, int]


class RequestBucket(Strict):
    """A share of a service's requests whose sizes lie in token ranges.

    ``prompt`` and ``output`` are a representative size or an inclusive ``[lo, hi]`` range; a
    range is planned at its upper end (every request of the bucket is at most that long, so
    its p95 latencies are not understated) unless a measured profile inside the range applies.
    """

    name: str = Field(min_length=1, max_length=NAME_MAX, description="unique in the mix")
    prompt: TokenSize = Field(description="tokens: a size or [low, high], planned at its upper end")
    output: TokenSize = Field(description="tokens: a size or [low, high], planned at its upper end")
    share: float = Field(gt=0, le=1, description="share of the service's requests")

    @field_validator("prompt", "output", mode="after")
    @classmethod
    def _range(cls, v: TokenSize) -> TokenSize:
        lo, hi = (v, v) if isinstance(v, int) else v
        if lo < 1 or hi > 1_000_000:
            raise ValueError(f"token sizes must be within 1..1,000,000 (got {lo}..{hi})")
        if lo > hi:
            raise ValueError(f"empty token range [{lo}, {hi}]: the low end is above the high end")
        return v

    def prompt_range(self) -> tuple[int, int]:
        return (self.prompt, self.prompt) if isinstance(self.prompt, int) else self.prompt

    def output_range(self) -> tuple[int, int]:
        return (self.output, self.output) if isinstance(self.output, int) else self.output

    def shape(self) -> tuple[int, int]:
        """The (prompt, output) tokens planned for: the upper end of each range."""
        return self.prompt_range()[1], self.output_range()[1]


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Ranges share more than an end point (buckets may touch: [1, 256] and [256, 512]); a
    single size overlaps any range that contains it.

    >>> _overlap((1, 256), (256, 512)), _overlap((1, 300), (256, 512)), _overlap((5, 5), (1, 5))
    (False, True, True)
    """
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    if lo > hi:
        return False
    return lo < hi or a[0] == a[1] or b[0] == b[1]


SHARE_TOLERANCE = 1e-6


# Serving headroom defaults (sources: catalogs/NOTES.md, "Serving headroom").
DEFAULT_MAX_LOAD = 0.8
DEFAULT_REDUNDANCY = 1


class Slo(Strict):
    p95_ttft_ms: float = Field(gt=0, le=3_600_000, description="at most an hour")
    p95_tpot_ms: float = Field(gt=0, le=60_000, description="at most a minute per token")
    max_load: float = Field(
        DEFAULT_MAX_LOAD,
        gt=0,
        le=1,
        description="share of the fleet's SLO capacity used at peak (the rest is headroom)",
    )

    @field_validator("p95_ttft_ms", "p95_tpot_ms", mode="after")
    @classmethod
    def _not_seconds(cls, v: float, info: Any) -> float:
        # 0.04 is 40 ms written in seconds: below what any hardware reaches, say so
        return check_floor(info.field_name, v)


ServePrecision = Annotated[Literal["fp16", "bf16", "fp8", "int8", "int4", "fp4"], CaseInsensitive]
Toggle = Literal["auto", True, False]


class KvOffload(Strict):
    """A tier below HBM that holds the KV of idle sessions (LMCache, Dynamo's KV block manager,
    SGLang HiCache): its capacity and read bandwidth per GPU."""

    tier: Literal["host", "ssd"] = Field(description="host memory or local SSD")
    gb_per_gpu: float = Field(gt=0, le=100_000, description="GB of KV it holds per GPU")
    gbs_per_gpu: float = Field(
        gt=0, le=10_000, description="GB/s one GPU reloads from it (PCIe 5 x16: ~50; NVMe: ~5-10)"
    )


class Sessions(Strict):
    """Multi-turn (agentic) sessions: each turn's prompt is the session so far plus
    ``tokens_per_turn`` new tokens (a user message, a tool result), so all but the new tokens
    are a prefix the server already holds, if it kept the session's KV through
    ``think_time_s`` (the user or tool between turns). ``tokens.prompt`` is the first turn's
    prompt, ``tokens.output`` each turn's output. Or give the measured ``hit_rate`` of the
    prefix cache alone (a share of prompt tokens served from cache)."""

    turns: int = Field(1, ge=1, le=10_000, description="turns per session")
    tokens_per_turn: int = Field(
        0, ge=0, le=1_000_000, description="new prompt tokens each turn after the first"
    )
    think_time_s: float = Field(
        0.0, ge=0, le=86_400, description="seconds between a turn's answer and the next prompt"
    )
    hit_rate: float | None = Field(
        None, ge=0, lt=1, description="measured prefix-cache hit rate (share of prompt tokens)"
    )
    kv_offload: KvOffload | None = None

    @model_validator(mode="after")
    def _some_reuse(self) -> Sessions:
        if self.hit_rate is None and self.turns > 1 and self.tokens_per_turn < 1:
            raise ValueError("sessions of several turns need tokens_per_turn (at least 1)")
        return self


class Speculative(Strict):
    """Speculative decoding as measured for this service's text: the acceptance length (mean
    tokens per verification step, the verified token included) at a draft length, or a curve
    of them at drafts 1, 2, ... (the engine picks the best). Random or off-domain text accepts
    far less than code or chat: InferenceX pins one measured length per model and draft."""

    draft_tokens: int | None = Field(
        None, ge=1, le=16, description="the draft length the acceptance was measured at"
    )
    acceptance_length: float | list[float] = Field(
        description="AL at draft_tokens, or a list: AL at drafts 1, 2, ... (each 1 to draft + 1)"
    )
    source: str = Field(
        "the problem file", min_length=1, max_length=2000, description="where the figure comes from"
    )

    @model_validator(mode="after")
    def _shape(self) -> Speculative:
        scalar = not isinstance(self.acceptance_length, list)
        if scalar and self.draft_tokens is None:
            raise ValueError(
                "an acceptance_length of one number needs draft_tokens (the draft it was "
                "measured at); or give a list: the lengths at drafts 1, 2, ..."
            )
        if not scalar and self.draft_tokens is not None:
            raise ValueError(
                "give draft_tokens with one acceptance_length, or a list of lengths at drafts "
                "1, 2, ... without draft_tokens"
            )
        self.measured()  # the bounds of each length
        return self

    def measured(self) -> DraftAcceptance:
        """The acceptance as the physics takes it."""
        al = self.acceptance_length
        lengths = al if isinstance(al, list) else [al]
        return DraftAcceptance(lengths=lengths, draft=self.draft_tokens, source=self.source)


def _toggle(v: Any) -> Any:
    """``auto``, ``true`` or ``false`` (YAML booleans, or the words in any case).

    >>> _toggle("AUTO"), _toggle("false"), _toggle(True)
    ('auto', False, True)
    """
    if isinstance(v, str):
        low = v.strip().lower()
        return {"auto": "auto", "true": True, "false": False}.get(low, v)
    if isinstance(v, int | float) and not isinstance(v, bool):
        # pydantic would take 1 for true (1 == True): a toggle is written auto, true or false
        raise ValueError(f"expected auto, true or false, got {v!r}")
    return v


class ServeWorkload(Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX, description="unique among workloads")
    model: str = Field(max_length=NAME_MAX, description="model id (catalogs/models.yaml)")
    # a list holds at least one precision: an empty one has no precision to serve at
    precision: ServePrecision | Annotated[list[ServePrecision], Field(min_length=1)] = Field(
        "fp16",
        description="the precision the model is served at; a list: the precisions allowed, "
        "each GPU using the best one it supports (fp4, then fp8, int4, int8, bf16, fp16)",
    )
    start: Month = Field(description="the first month of service, YYYY-MM")
    end: Month | None = Field(
        None, description="the last month of service; none: the horizon's end"
    )
    traffic: Traffic = Field(description="users, requests, daily shape and growth")
    tokens: TokenShape | None = Field(None, description="one request shape (or requests)")
    requests: list[RequestBucket] | None = Field(
        None, min_length=1, max_length=200, description="a mix of request sizes (buckets)"
    )
    slo: Slo = Field(description="p95 latency targets and headroom")
    redundancy: int = Field(
        DEFAULT_REDUNDANCY,
        ge=0,
        le=100,
        description="spare replicas: the SLO holds at peak with this many replicas down",
    )
    measured_only: bool = Field(
        False,
        description="plan only replica configurations a profile measured (no modeled capacity)",
    )
    gpus: list[str] | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="the GPU types this workload may run on (of the problem's gpus); none: all",
    )
    disaggregated: Annotated[Toggle, BeforeValidator(_toggle)] = Field(
        "auto",
        description="prefill and decode on separate worker pools: auto (the planner chooses), "
        "true (only disaggregated deployments) or false (aggregated replicas only)",
    )
    mtp: Annotated[Toggle, BeforeValidator(_toggle)] = Field(
        "auto",
        description="multi-token prediction (the model's MTP head as a speculative draft): "
        "auto (the planner chooses where the model has MTP layers), true (only with MTP) or false",
    )

    sessions: Sessions | None = Field(
        None,
        description="multi-turn sessions whose prompts reuse cached KV (prefill is priced on "
        "the new tokens; idle sessions hold KV in HBM or an offload tier); absent: every "
        "prompt is prefilled in full",
    )
    speculative: Speculative | None = Field(
        None,
        description="speculative decoding's measured acceptance for this service (with mtp not "
        "false); absent: the model's catalog figure, else the calibration's fitted curve",
    )

    _v = field_validator("start", "end")(classmethod(lambda cls, v: v if v is None else _month(v)))

    def precisions(self) -> tuple[str, ...]:
        """The precisions allowed, as given (one precision: a tuple of one)."""
        p = self.precision
        return (p,) if isinstance(p, str) else tuple(dict.fromkeys(p))

    @model_validator(mode="after")
    def _sessions_one_shape(self) -> ServeWorkload:
        s = self.sessions
        if s is None:
            return self
        if self.requests is not None:
            raise ValueError(
                "sessions: describe one request shape (tokens: {prompt, output}), not a mix"
            )
        assert self.tokens is not None
        last = self.tokens.prompt + (s.turns - 1) * (s.tokens_per_turn + self.tokens.output)
        if last > 1_000_000:
            raise ValueError(
                f"sessions: the last turn's prompt would be {last:,} tokens (first prompt + "
                "(turns - 1) x (tokens_per_turn + output)); at most 1,000,000"
            )
        return self

    @model_validator(mode="after")
    def _speculative_needs_mtp(self) -> ServeWorkload:
        if self.speculative is not None and self.mtp is False:
            raise ValueError(
                "speculative: gives an acceptance for speculative decoding, but mtp is false; "
                "set mtp: auto or true, or remove speculative"
            )
        return self

    @model_validator(mode="after")
    def _mix(self) -> ServeWorkload:
        if (self.tokens is None) == (self.requests is None):
            raise ValueError(
                "give tokens: {prompt, output} (one request shape) or requests: [buckets with "
                "prompt, output and share], one of them"
            )
        if self.requests is None:
            return self
        total = sum(b.share for b in self.requests)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(
                f"request shares sum to {total:.6g}; they must sum to 1 "
                f"({', '.join(f'{b.name}: {b.share:g}' for b in self.requests)})"
            )
        names = [b.name for b in self.requests]
        for i, a in enumerate(self.requests):
            if a.name in names[:i]:
                raise ValueError(f"request bucket name {a.name!r} is used twice")
            for b in self.requests[:i]:
                if _overlap(a.prompt_range(), b.prompt_range()) and _overlap(
                    a.output_range(), b.output_range()
                ):
                    raise ValueError(
                        f"request buckets {b.name!r} and {a.name!r} overlap (prompt "
                        f"{list(b.prompt_range())} and {list(a.prompt_range())}, output "
                        f"{list(b.output_range())} and {list(a.output_range())}): a request "
                        "must fall in one bucket"
                    )
        return self

    def buckets(self) -> list[RequestBucket]:
        """The request mix; a single ``tokens`` shape is one bucket named ``all``."""
        if self.requests is not None:
            return list(self.requests)
        assert self.tokens is not None  # the validator guarantees one of them
        prompt: TokenSize = self.tokens.prompt
        s = self.sessions
        if s is not None and s.turns > 1:  # the turns' prompts, planned at the last (longest)
            prompt = (prompt, prompt + (s.turns - 1) * (s.tokens_per_turn + self.tokens.output))
        return [RequestBucket(name="all", prompt=prompt, output=self.tokens.output, share=1.0)]


def serve_gpu_errors(workloads: list[ServeWorkload], allowed: list[str]) -> list[tuple[tuple, str]]:
    """(field path, text) for each serving workload's ``gpus`` entry that is not an allowed
    GPU type of the problem, or is listed twice.

    >>> from types import SimpleNamespace as NS
    >>> serve_gpu_errors([NS(gpus=["b200", "h100", "b200"])], ["b200", "gb200"])[0][1]
    "unknown or not allowed gpu 'h100'; allowed: b200, gb200"
    """
    out = []
    for i, w in enumerate(workloads):
        for j, g in enumerate(w.gpus or []):
            loc = ("workloads", "serve", i, "gpus", j)
            if g not in allowed:
                out.append(
                    (
                        loc,
                        f"unknown or not allowed gpu {g!r}; allowed: {', '.join(sorted(allowed))}",
                    )
                )
            elif g in w.gpus[:j]:
                out.append((loc, f"gpu {g!r} is listed twice (also gpus[{w.gpus.index(g)}])"))
    return out
