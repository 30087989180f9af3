"""Prefix reuse: multi-turn (agentic) sessions whose prompts are mostly KV the server holds.

A turn's prompt is the session so far plus a few new tokens; the server prefills only the new
tokens, attending over the cached prefix (:func:`prefill_flops`), provided it kept the
session's KV through the pause between turns. Those idle sessions' KV stays in HBM beside the
active batch (:func:`idle_kv_share`), or in an offload tier, host memory or local SSD (LMCache,
Dynamo's KV block manager, SGLang HiCache), from which the next turn reloads it before its
first token (:func:`reload_s`); the tier's capacity bounds the sessions a GPU can keep
(:func:`offload_batch_cap`). A workload's :class:`~planner.physics.calibration.values.PrefixReuse`
travels on a copy of the calibration (:func:`with_prefix`), as the MoE layout does.

Measured anchors (issue 52): TensorRT-LLM's agent traces reach a 96.5 % hit rate for a
SWE-bench coding agent and 24-48 % for research agents; Mooncake's (Kimi) traces 40 % (chat)
and 59 % (tool use) cacheable; SGLang HiCache on a coding agent lifted the hit rate from 40 to
80 % and cut TTFT by 56 %; on GB200 the coding agent's hit rate fell from 0.97 to 0.73 at high
concurrency without host offload and came back to ~0.97 with 64-128 GiB of it.
"""

from __future__ import annotations

import math

from planner.inputs.catalog import ModelArch
from planner.inputs.schema_serve import ServeWorkload
from planner.physics.calibration.values import Calibration, PrefixReuse
from planner.physics.moe import compute_params, kv_bytes_per_token, prefill_attn_flops


def session_prompts(w: ServeWorkload) -> tuple[int, int]:
    """(first, last) turn's prompt tokens: ``prompt + (turns - 1) (new + output)``.

    The session's turns lie between them, as a request bucket's range, and are planned at the
    upper end (the last turn has the longest context, the slowest decode and the most KV)."""
    assert w.tokens is not None  # sessions come with one request shape (schema)
    first = w.tokens.prompt
    s = w.sessions
    if s is None or s.turns == 1:
        return first, first
    return first, first + (s.turns - 1) * (s.tokens_per_turn + w.tokens.output)


def session_hit_rate(w: ServeWorkload) -> float:
    """Share of all prompt tokens of a session served from cache (the measured ``hit_rate``
    where given): every turn after the first prefills only its new tokens.

    ``1 - (first + (turns - 1) new) / sum of the turns' prompts``."""
    s = w.sessions
    if s is None:
        return 0.0
    if s.hit_rate is not None:
        return s.hit_rate
    first, last = session_prompts(w)
    total = s.turns * (first + last) / 2  # the prompts grow linearly
    return 1.0 - (first + (s.turns - 1) * s.tokens_per_turn) / total


def prefix_reuse(w: ServeWorkload) -> PrefixReuse | None:
    """The reuse at the planned (last) turn of ``w``'s sessions (None without sessions).

    Cached share ``1 - new / last``, or the measured hit rate; idle sessions held per active
    sequence ``think / (output x TPOT target)`` (Little's law: a session decodes for its turn,
    then waits ``think``; the planned replica decodes near its TPOT target)."""
    s = w.sessions
    if s is None:
        return None
    assert w.tokens is not None
    first, last = session_prompts(w)
    cached = (
        s.hit_rate
        if s.hit_rate is not None
        else (1.0 - s.tokens_per_turn / last if s.turns > 1 else 0.0)
    )
    turn_s = w.tokens.output * w.slo.p95_tpot_ms / 1000.0
    idle = s.think_time_s / turn_s if s.turns > 1 and turn_s > 0 else 0.0
    off = s.kv_offload
    return PrefixReuse(
        cached_share=min(cached, 0.999),
        idle_per_active=idle,
        offload_gb_per_gpu=off.gb_per_gpu if off else 0.0,
        offload_gbs_per_gpu=off.gbs_per_gpu if off else 0.0,
        source=f"sessions of {s.turns} turns, {s.tokens_per_turn} new tokens a turn, "
        f"{s.think_time_s:g} s between turns" + (f", KV offload to {off.tier}" if off else ""),
    )


def with_prefix(calib: Calibration, reuse: PrefixReuse | None) -> Calibration:
    """``calib`` carrying a workload's prefix reuse (None: unchanged)."""
    return calib if reuse is None else calib.model_copy(update={"prefix": reuse})


def new_tokens(prompt: float, calib: Calibration) -> float:
    """Prompt tokens a request prefills: all of them, less the cached share.

    >>> from planner.physics.calibration.values import default_calibration
    >>> c = default_calibration()
    >>> new_tokens(1000, c), round(new_tokens(1000, with_prefix(c, PrefixReuse(cached_share=0.9))))
    (1000, 100)
    """
    p = calib.prefix
    return prompt if p is None else prompt * (1.0 - p.cached_share)


def prefill_flops(model: ModelArch, prompt: int, calib: Calibration) -> float:
    """FLOPs of one prompt's prefill: ``2 N new + attn(prompt) - attn(prompt - new)`` (the new
    tokens multiply the weights and attend over the whole prompt, the cached prefix included;
    without reuse ``2 N p + attn(p)``)."""
    new = new_tokens(prompt, calib)
    attn = prefill_attn_flops(model, prompt)
    if new < prompt:
        attn -= prefill_attn_flops(model, max(0, math.floor(prompt - new)))
    return 2.0 * compute_params(model) * new + attn


def idle_kv_share(calib: Calibration) -> float:
    """KV of idle sessions HBM holds per active sequence's KV: ``idle_per_active`` without an
    offload tier, 0 with one (the tier holds them)."""
    p = calib.prefix
    if p is None or p.offload_gb_per_gpu > 0:
        return 0.0
    return p.idle_per_active


def offload_batch_cap(kv_gb_per_sequence_per_gpu: float, calib: Calibration) -> float:
    """Most active sequences per GPU whose idle sessions the offload tier holds:
    ``tier GB / (idle_per_active x KV GB per sequence)`` (inf without a tier or idle sessions)."""
    p = calib.prefix
    if p is None or p.offload_gb_per_gpu <= 0 or p.idle_per_active <= 0:
        return math.inf
    return p.offload_gb_per_gpu / (p.idle_per_active * max(kv_gb_per_sequence_per_gpu, 1e-12))


def reload_s(
    model: ModelArch, precision: str, prompt: int, share_per_gpu: float, calib: Calibration
) -> float:
    """Seconds one GPU spends reloading a returning session's cached prefix from the offload
    tier: ``cached x KV bytes per token x its share / tier GB/s`` (0 without a tier)."""
    p = calib.prefix
    if p is None or p.offload_gbs_per_gpu <= 0 or p.cached_share <= 0:
        return 0.0
    cached = prompt * p.cached_share
    nbytes = cached * kv_bytes_per_token(model, precision, cached) * share_per_gpu
    return nbytes / (p.offload_gbs_per_gpu * 1e9)
