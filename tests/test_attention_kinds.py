"""Attention kinds of late 2026 (issue 52): hybrid linear attention (Qwen3-Next, Kimi Linear),
sparse attention with a top-k indexer (DeepSeek-V3.2) and Gemma 3's local/global pattern,
each against the same shape with full attention on every layer, at long context."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.inputs.catalog import load_gpus, load_models
from planner.inputs.model_arch import ModelArch
from planner.physics.calibration.values import default_calibration
from planner.physics.moe import (
    attn_flops_per_token,
    kv_bytes_per_token,
    kv_read_bytes_per_token,
    linear_state_bytes,
    prefill_attn_flops,
    train_attn_flops_per_token,
)
from planner.physics.serve import decode_step_s

CAL = default_calibration()
MODELS = load_models()
GPUS = load_gpus()
CTX = 128_000


def _full(m: ModelArch) -> ModelArch:
    """The same shape with every layer attending in full (no linear, sparse or window)."""
    return m.model_copy(
        update={"linear_attention": None, "sparse_attention": None, "sliding_window": None}
    )


def _kv_seq(m: ModelArch, ctx: float = CTX, precision: str = "fp8") -> float:
    return ctx * kv_bytes_per_token(m, precision, ctx)


def test_hybrid_linear_holds_the_kv_of_its_full_layers_only():
    # Qwen3-Next: 12 full of 48 layers, a fixed 37.7 MiB state in the other 36
    q3n = MODELS["qwen3-next-80b-a3b"]
    ratio = _kv_seq(_full(q3n)) / _kv_seq(q3n)
    assert 3.5 < ratio < 48 / 12  # the layer ratio, less the state
    # the state does not grow: from 32k to 128k the cache grows by the full layers' KV alone
    grown = _kv_seq(q3n, 128_000) - _kv_seq(q3n, 32_000)
    assert grown == pytest.approx(96_000 * 12 * 2 * 2 * 256, rel=1e-9)
    assert linear_state_bytes(q3n) == pytest.approx(36 * (32 * 128 * 128 + 8192 * 3) * 2)
    # Kimi Linear: "up to 75 % less KV cache" (7 MLA layers of 27)
    kimi = MODELS["kimi-linear-48b-a3b"]
    saved = 1 - _kv_seq(kimi, 1_000_000) / _kv_seq(_full(kimi), 1_000_000)
    assert 0.70 < saved < 0.76


def test_sparse_attention_stores_every_token_but_reads_top_k():
    v32 = MODELS["deepseek-v3.2"]
    dense = _full(v32)
    # the cache holds every token's latent plus the indexer's key: more, not less
    stored = _kv_seq(v32) / _kv_seq(dense)
    assert 1.1 < stored < 1.3
    # a decode step reads 2,048 latents and every indexer key: ~5x fewer bytes at 128k
    read = kv_read_bytes_per_token(dense, "fp8", CTX) / kv_read_bytes_per_token(v32, "fp8", CTX)
    assert 4.0 < read < 5.5
    # below top_k sparse attention is full attention (plus the indexer)
    assert kv_read_bytes_per_token(v32, "fp8", 1000) == pytest.approx(
        kv_bytes_per_token(v32, "fp8", 1000)
    )
    assert attn_flops_per_token(v32, CTX) < attn_flops_per_token(dense, CTX) / 10
    # prefill keeps the indexer's quadratic scan (a fifth of MLA's per pair): ~4x fewer
    # attention FLOPs at 128k (DeepSeek's chart: prefill ~3.5x cheaper per token, GEMMs included)
    assert 3 < prefill_attn_flops(dense, CTX) / prefill_attn_flops(v32, CTX) < 5
    assert train_attn_flops_per_token(v32, 4096) < train_attn_flops_per_token(dense, 4096)


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "deepseek-v3.2", "kimi-linear-48b-a3b"])
def test_decode_at_128k_is_faster_than_full_attention(name):
    """At a batch where attention dominates the step, decode time per token falls with the
    KV read (the weights read are the same for both shapes)."""
    m = MODELS[name]
    gpu = GPUS["b200"]
    fast = decode_step_s(m, gpu, 8, "fp8", 32, CTX, CAL)
    slow = decode_step_s(_full(m), gpu, 8, "fp8", 32, CTX, CAL)
    assert slow / fast > 2.0
    # and the gain vanishes at short context, where the weights dominate
    short = decode_step_s(_full(m), gpu, 8, "fp8", 32, 1000, CAL)
    assert short / decode_step_s(m, gpu, 8, "fp8", 32, 1000, CAL) < 1.15


def test_gemma3_kv_matches_llama_cpp_measurement():
    """Gemma 3 27B at a 64k context, fp16 KV (llama.cpp's reported cache: 6.4 GiB with the
    sliding window, 31.7 GiB with every layer full; its window layers keep a little more than
    the window): within 20 %."""
    g = MODELS["gemma-3-27b"]
    gib = 2**30
    assert _kv_seq(g, 65536, "fp16") / gib == pytest.approx(6.4, rel=0.2)
    assert _kv_seq(_full(g), 65536, "fp16") / gib == pytest.approx(31.7, rel=0.05)


def test_estimate_serve_states_the_attention_and_its_kv_per_sequence():
    args = ["estimate", "serve", "--model", "qwen3-next-80b-a3b", "--gpu", "b200", "--gpus", "4",
            "--precision", "fp8", "--prompt", "120000", "--output", "8000", "--batch", "8"]  # fmt: skip
    r = CliRunner().invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    att = json.loads(r.output)["attention"]
    assert att["kind"] == "hybrid-linear" and "Gated DeltaNet on 36 layers" in att["description"]
    assert att["kv_cache_gb_per_sequence"] == pytest.approx(
        _kv_seq(MODELS["qwen3-next-80b-a3b"], 128_000) / 1e9
    )
    table = CliRunner().invoke(cli, args)
    assert "KV cache per sequence" in table.output and "hybrid" in table.output
