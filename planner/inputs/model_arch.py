"""Model architectures: the shape of a transformer the physics needs (catalogs/models.yaml).

Besides the dense shape (layers, hidden, heads, MLP size, vocabulary) a model may have

* an explicit ``head_dim`` (Qwen3, gpt-oss, Llama 4: not ``hidden / heads``; absent, it is
  ``hidden // heads`` as for every Llama 2/3, Mistral and MPT);
* ``moe``: routed experts, experts per token, a shared expert and how many layers keep a dense
  MLP (DeepSeek's first 3, Llama 4 Maverick's every other layer);
* ``mla``: multi-head latent attention (DeepSeek-V2/V3, Kimi K2) with its latent ranks; the KV
  cache holds one ``kv_lora_rank + qk_rope_head_dim`` latent per token and layer;
* ``sliding_window`` with ``full_attention_every``: windowed layers keep at most the window
  (Mistral, gpt-oss, Gemma 3's five local layers to one global);
* ``linear_attention``: layers of linear (recurrent) attention, Gated DeltaNet (Qwen3-Next) or
  Kimi Delta Attention (Kimi Linear), holding a fixed state per sequence instead of a KV cache
  that grows with the context; the other layers attend in full;
* ``sparse_attention``: a top-k indexer (DeepSeek-V3.2's DSA) picks ``top_k`` cached tokens per
  query; the cache still holds every token (plus the indexer's own keys), but attention reads
  and multiplies only the ``top_k`` chosen.

:func:`count_params` recomputes total and active parameters from the shape; the catalog loader
checks them against the published ``params`` / ``active_params`` (:func:`check_published_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from planner.base.yamlio import LocatedError
from planner.inputs.strict import Strict

# A published count and the one recomputed from the shape differ by biases, norms, attention
# sinks and vision towers the planner does not model: a few per mille. Beyond 2 % a field of the
# shape (or the published figure) is wrong.
PARAMS_TOLERANCE = 0.02

# The deepest published transformer has well under 200 layers; 1000 leaves room and keeps
# every per-layer loop (importers, physics) small.
MAX_LAYERS = 1000


class MoeSpec(Strict):
    """Mixture-of-experts MLP: ``experts`` routed experts of inner size ``expert_intermediate``,
    ``experts_per_token`` of them per token, plus an always-on shared expert."""

    experts: int = Field(ge=2, le=100_000, description="routed experts per MoE layer")
    experts_per_token: int = Field(ge=1, le=1_000)
    expert_intermediate: int = Field(gt=0, le=1_000_000, description="inner size of one expert")
    shared_intermediate: int = Field(
        0, ge=0, le=10_000_000, description="inner size of the shared expert(s) together; 0: none"
    )
    dense_layers: int = Field(
        0, ge=0, le=1000, description="layers with a dense MLP of size `intermediate` instead"
    )

    @model_validator(mode="after")
    def _k_le_e(self) -> MoeSpec:
        if self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token {self.experts_per_token} > experts {self.experts}")
        return self


class MlaSpec(Strict):
    """Multi-head latent attention (DeepSeek-V2/V3): queries through a ``q_lora_rank`` latent
    (0: a full projection), keys and values through one ``kv_lora_rank`` latent per token."""

    kv_lora_rank: int = Field(gt=0, le=100_000)
    q_lora_rank: int = Field(0, ge=0, le=100_000)
    qk_nope_head_dim: int = Field(gt=0, le=10_000)
    qk_rope_head_dim: int = Field(ge=0, le=10_000)
    v_head_dim: int = Field(gt=0, le=10_000)


class LinearAttnSpec(Strict):
    """Linear-attention layers (config.json ``linear_*`` / ``kda`` fields): ``layers`` of the
    model's layers keep a recurrent state of ``value_heads x key_head_dim x value_head_dim``
    per sequence (plus a short convolution's last ``conv_kernel - 1`` inputs) in place of a
    KV cache; the rest are full-attention layers."""

    kind: Literal["gated_deltanet", "kda"] = Field(
        description="gated_deltanet: Qwen3-Next (fused qkvz projection); kda: Kimi Delta "
        "Attention (separate q/k/v, low-rank gates)"
    )
    layers: int = Field(gt=0, le=MAX_LAYERS, description="how many layers are linear attention")
    key_heads: int = Field(gt=0, le=10_000)
    value_heads: int = Field(gt=0, le=10_000)
    key_head_dim: int = Field(gt=0, le=100_000)
    value_head_dim: int = Field(gt=0, le=100_000)
    conv_kernel: int = Field(4, ge=1, le=64, description="short causal convolution's width")


class SparseAttnSpec(Strict):
    """Sparse attention with a top-k indexer (DeepSeek-V3.2 DSA, config.json ``index_*``): per
    query a light indexer of ``index_heads x index_head_dim`` scores every cached token and
    the attention reads only the ``top_k`` best; the indexer caches one ``index_head_dim`` key
    per token and layer."""

    top_k: int = Field(gt=0, le=100_000_000, description="tokens each query attends to")
    index_heads: int = Field(gt=0, le=10_000)
    index_head_dim: int = Field(gt=0, le=100_000)


class DraftAcceptance(Strict):
    """Speculative decoding's measured acceptance: the mean tokens one verification step emits
    (the acceptance length, AL, the bonus token included) at draft lengths 1, 2, ... (``draft``
    None: the engine picks the best length), or at the one length ``draft`` (one entry)."""

    lengths: tuple[float, ...] = Field(min_length=1, max_length=16)
    draft: int | None = Field(None, ge=1, le=16, description="the one draft length measured")
    source: str = Field(min_length=1, max_length=2000)
    as_of: str | None = None

    @model_validator(mode="after")
    def _bounds(self) -> DraftAcceptance:
        if self.draft is not None and len(self.lengths) != 1:
            raise ValueError("with draft, give one acceptance length (the one at that draft)")
        for i, al in enumerate(self.lengths):
            d = self.draft or i + 1
            if not 1.0 <= al <= d + 1:
                raise ValueError(
                    f"acceptance length {al:g} at draft {d}: it is between 1 (no draft token "
                    f"accepted) and {d + 1} (all {d} accepted, plus the verified token)"
                )
        return self

    def at(self, draft: int) -> float:
        """AL at ``draft`` tokens: the measured one, the last measured beyond them."""
        if self.draft is not None:
            return self.lengths[0]
        return self.lengths[min(draft, len(self.lengths)) - 1]

    def drafts(self) -> list[int]:
        """The draft lengths this acceptance describes."""
        return [self.draft] if self.draft is not None else list(range(1, len(self.lengths) + 1))

    def describe(self) -> str:
        """``AL 1.92 / 2.58 / 2.82 at draft 1 / 2 / 3``."""
        ds = self.drafts()
        als = " / ".join(f"{a:.3g}" for a in self.lengths)
        return f"AL {als} at draft {' / '.join(str(d) for d in ds)}"


class ModelArch(Strict):
    id: str
    name: str
    # Bounds: a million parameters to 100 trillion; shapes of any published transformer.
    params: float = Field(gt=1e6, le=1e14, description="total parameters (published)")
    active_params: float | None = Field(
        None, gt=1e6, le=1e14, description="parameters used per token (published; MoE)"
    )
    layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden: int = Field(gt=0, le=1_000_000)
    heads: int = Field(gt=0, le=10_000)
    kv_heads: int = Field(gt=0, le=10_000)
    head_dim: int = Field(gt=0, le=100_000, description="per-head size; default hidden // heads")
    intermediate: int = Field(gt=0, le=10_000_000, description="dense MLP inner size")
    vocab: int = Field(gt=0, le=10_000_000)
    max_context: int = Field(gt=0, le=100_000_000)
    mlp: Literal["gated", "plain"] = Field(
        "gated", description="gated: SwiGLU, 3 matrices (Llama); plain: 2 matrices (MPT, GPT)"
    )
    tied_embeddings: bool = False
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    sliding_window: int | None = Field(None, gt=0, le=100_000_000)
    full_attention_every: int = Field(
        0, ge=0, le=1000, description="with sliding_window: every k-th layer full; 0: none"
    )
    linear_attention: LinearAttnSpec | None = None
    sparse_attention: SparseAttnSpec | None = None
    num_nextn_predict_layers: int = Field(
        0,
        ge=0,
        le=16,
        description="multi-token-prediction modules (config.json num_nextn_predict_layers; "
        "DeepSeek-V3/R1: 1), usable as a speculative draft",
    )
    draft_acceptance: DraftAcceptance | None = Field(
        None,
        description="speculative decoding's measured acceptance lengths with this model's "
        "draft (MTP or EAGLE); absent: the calibration's fitted curve",
    )
    released_precision: Literal["bf16", "fp16", "fp8", "fp4"] | None = Field(
        None,
        description="precision the checkpoint is published in (DeepSeek-V3/R1: fp8, gpt-oss: "
        "fp4); None: 16-bit",
    )
    source: str
    as_of: str

    @model_validator(mode="before")
    @classmethod
    def _default_head_dim(cls, data: Any) -> Any:
        # Llama 2/3, Mistral and MPT have hidden == heads x head_dim; their entries omit it.
        if isinstance(data, dict) and data.get("head_dim") is None:
            h, n = data.get("hidden"), data.get("heads")
            if isinstance(h, int) and isinstance(n, int) and n > 0:
                data = {**data, "head_dim": max(1, h // n)}
        return data

    @model_validator(mode="after")
    def _shape(self) -> ModelArch:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.moe is not None and self.moe.dense_layers > self.layers:
            raise ValueError(f"moe.dense_layers {self.moe.dense_layers} > layers {self.layers}")
        lin = self.linear_attention
        if lin is not None and lin.layers >= self.layers:
            raise ValueError(
                f"linear_attention.layers {lin.layers} must be fewer than layers {self.layers} "
                "(a hybrid keeps some full-attention layers)"
            )
        if lin is not None and self.sliding_window is not None:
            raise ValueError("linear_attention and sliding_window together are not modelled")
        if self.sparse_attention is not None and (lin is not None or self.sliding_window):
            raise ValueError(
                "sparse_attention with linear_attention or sliding_window is not modelled"
            )
        return self

    # ------------------------------------------------------------------ derived shape

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is routed experts (0 for a dense model)."""
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def window_layers(self) -> int:
        """Layers with a sliding window (0 without one)."""
        if self.sliding_window is None:
            return 0
        every = self.full_attention_every
        return self.layers - (self.layers // every if every else 0)

    @property
    def linear_layers(self) -> int:
        """Layers of linear attention (0 without)."""
        return 0 if self.linear_attention is None else self.linear_attention.layers

    @property
    def full_layers(self) -> int:
        """Layers that attend to every cached token (or to ``top_k`` of them when sparse)."""
        return self.layers - self.window_layers - self.linear_layers

    @property
    def attention_kind(self) -> str:
        """One word for the attention: full, sliding-window, hybrid-linear or sparse."""
        if self.linear_attention is not None:
            return "hybrid-linear"
        if self.sparse_attention is not None:
            return "sparse"
        if self.sliding_window is not None:
            return "sliding-window"
        return "full"

    @property
    def computed_params(self) -> float:
        """Total parameters recomputed from the shape (:func:`count_params`)."""
        return count_params(self).total

    @property
    def computed_active_params(self) -> float:
        """Parameters a token uses, recomputed from the shape (embeddings included)."""
        return count_params(self).active


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by part, whole model. ``routed`` is every routed expert of every MoE layer;
    ``expert`` one routed expert of one layer."""

    embed_in: float
    embed_out: float
    attention: float
    dense_mlp: float
    shared: float
    router: float
    routed: float
    expert: float
    norms: float
    active_routed: float

    @property
    def total(self) -> float:
        return (
            self.embed_in
            + self.embed_out
            + self.attention
            + self.dense_mlp
            + self.shared
            + self.router
            + self.routed
            + self.norms
        )

    @property
    def active(self) -> float:
        """Everything but the experts a token is not routed to (Mixtral/Qwen/DeepSeek count)."""
        return self.total - self.routed + self.active_routed

    @property
    def always_read(self) -> float:
        """Weights every forward reads whatever the routing: all but the routed experts and
        the input embedding table (a token reads one row of it)."""
        return self.total - self.routed - self.embed_in


def attention_params(m: ModelArch) -> float:
    """Attention weights of one layer (no biases).

    GQA/MHA: ``hidden x head_dim x (2 heads + 2 kv_heads)`` (q, k, v, o). MLA: q through its
    latent (or full), the kv down-projection to ``kv_lora_rank + rope``, the up-projection to
    ``heads x (nope + v)`` and the output ``heads x v x hidden``, plus the two latent norms.

    >>> from planner.physics.train import llama_like
    >>> attention_params(llama_like("x", 7e9, 32, 4096, 32, 32, 11008, 32000)) == 4 * 4096**2
    True
    """
    h, n = m.hidden, m.heads
    if m.mla is None:
        return float(h * m.head_dim * (2 * n + 2 * m.kv_heads))
    a = m.mla
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * n * qk if a.q_lora_rank else h * n * qk
    kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
    kv += a.kv_lora_rank * n * (a.qk_nope_head_dim + a.v_head_dim)
    return float(q + kv + n * a.v_head_dim * h)


def linear_attention_params(m: ModelArch) -> float:
    """Weights of one linear-attention layer (0 without), from the tensor shapes of the
    published checkpoints (H hidden, kh/vh key/value heads of dk/dv, kernel w):

    * Gated DeltaNet (Qwen3-Next): ``in_proj_qkvz H x (2 kh dk + 2 vh dv)``, ``in_proj_ba
      H x 2 vh``, ``conv1d (2 kh dk + vh dv) x w``, ``A_log`` and ``dt_bias`` (vh each), the
      output norm ``dv`` and ``out_proj vh dv x H``;
    * KDA (Kimi Linear, kh = vh): ``q/k/v_proj 3 H vh dv``, three short convolutions ``3 vh dv
      w``, the low-rank gates ``f`` and ``g`` (``H dv + dv vh dv`` each), ``b_proj H vh``,
      ``A_log`` vh, ``dt_bias`` vh dv, the norm ``dv`` and ``o_proj vh dv x H``.

    >>> from planner.physics.train import llama_like
    >>> m = llama_like("x", 8e10, 48, 2048, 16, 2, 5120, 151936)
    >>> lin = LinearAttnSpec(kind="gated_deltanet", layers=36, key_heads=16, value_heads=32,
    ...                      key_head_dim=128, value_head_dim=128)
    >>> linear_attention_params(m.model_copy(update={"linear_attention": lin}))  # Qwen3-Next
    33718464.0
    """
    a, h = m.linear_attention, m.hidden
    if a is None:
        return 0.0
    k, v = a.key_heads * a.key_head_dim, a.value_heads * a.value_head_dim
    if a.kind == "gated_deltanet":
        proj = h * (2 * k + 2 * v) + h * 2 * a.value_heads
        conv = (2 * k + v) * a.conv_kernel
        return float(proj + conv + 2 * a.value_heads + a.value_head_dim + v * h)
    gates = 2 * (h * a.value_head_dim + a.value_head_dim * v)
    small = a.value_heads + v + a.value_head_dim  # A_log, dt_bias, norm
    return float(3 * h * v + 3 * v * a.conv_kernel + gates + h * a.value_heads + small + v * h)


def indexer_params(m: ModelArch) -> float:
    """Weights of one layer's top-k indexer (0 without; DeepSeek-V3.2): the query projection
    from the q latent ``q_lora_rank x heads_i d_i`` (from ``hidden`` without one), the key
    ``hidden x d_i`` with its LayerNorm ``2 d_i`` and the head weights ``hidden x heads_i``.

    >>> from planner.physics.train import llama_like
    >>> m = llama_like("x", 6.7e11, 61, 7168, 128, 128, 18432, 129280)
    >>> mla = MlaSpec(kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128,
    ...               qk_rope_head_dim=64, v_head_dim=128)
    >>> dsa = SparseAttnSpec(top_k=2048, index_heads=64, index_head_dim=128)
    >>> indexer_params(m.model_copy(update={"mla": mla, "sparse_attention": dsa}))
    13959424.0
    """
    a = m.sparse_attention
    if a is None:
        return 0.0
    q_in = m.mla.q_lora_rank if m.mla is not None and m.mla.q_lora_rank else m.hidden
    d = a.index_head_dim
    return float(q_in * a.index_heads * d + m.hidden * d + 2 * d + m.hidden * a.index_heads)


def mlp_params(m: ModelArch, inner: int) -> float:
    """One MLP of inner size ``inner``: ``3 hidden inner`` gated (SwiGLU), ``2`` plain.

    >>> from planner.physics.train import llama_like
    >>> mlp_params(llama_like("x", 7e9, 32, 4096, 32, 32, 11008, 32000), 11008) / 1e6
    135.266304
    """
    return float((3 if m.mlp == "gated" else 2) * m.hidden * inner)


# count_params by model object: a frozen model's counts never change, and the serving physics
# asks for them ~100 times per deployment estimate (the Frontier sheet of agentic_2026 made
# 306,041 calls, a quarter of its 3.5 s). Keyed by identity, the model kept beside its counts
# so that a reused id() never answers for another model.
_COUNTS: dict[int, tuple[ModelArch, ParamCounts]] = {}


def count_params(m: ModelArch) -> ParamCounts:
    """Parameters by part recomputed from the shape (weights and norms; biases, attention
    sinks and vision towers left out: a few per mille).

    >>> from planner.physics.train import llama_like
    >>> c = count_params(llama_like("l2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 32000))
    >>> int(c.total), c.active == c.total  # HF Llama-2-7b: 6,738,415,616
    (6738415616, True)
    >>> count_params(llama_like("x", 7e9, 32, 4096, 32, 32, 11008, 32000)) == c
    True
    """
    hit = _COUNTS.get(id(m))
    if hit is not None and hit[0] is m:
        return hit[1]
    counts = _count_params(m)
    if len(_COUNTS) >= 1024:  # models made on the fly (sweeps, imports): keep it small
        _COUNTS.clear()
    _COUNTS[id(m)] = (m, counts)
    return counts


def _count_params(m: ModelArch) -> ParamCounts:
    """:func:`count_params`, computed."""
    moe = m.moe
    dense_layers = m.layers if moe is None else moe.dense_layers
    expert = 0.0 if moe is None else mlp_params(m, moe.expert_intermediate)
    shared = 0.0 if moe is None else mlp_params(m, moe.shared_intermediate)
    n_moe = m.moe_layers
    emb = float(m.vocab * m.hidden)
    return ParamCounts(
        embed_in=emb,
        embed_out=0.0 if m.tied_embeddings else emb,
        attention=(m.layers - m.linear_layers) * attention_params(m)
        + m.linear_layers * linear_attention_params(m)
        + m.layers * indexer_params(m),
        dense_mlp=dense_layers * mlp_params(m, m.intermediate),
        shared=n_moe * shared,
        router=0.0 if moe is None else n_moe * m.hidden * moe.experts,
        routed=0.0 if moe is None else n_moe * moe.experts * expert,
        expert=expert,
        norms=float((2 * m.layers + 1) * m.hidden),
        active_routed=0.0 if moe is None else n_moe * moe.experts_per_token * expert,
    )


def _off(computed: float, published: float) -> float:
    return abs(computed - published) / published


def count_mismatch(m: ModelArch, tol: float = PARAMS_TOLERANCE) -> list[tuple[str, str]]:
    """(field, message) for each published count more than ``tol`` from the recomputed one.

    Active counts follow three conventions: with the input embedding table (Mixtral, Qwen,
    DeepSeek), without it (gpt-oss counts only the unembedding) or without either table
    (GLM-4.5: 32B active of a shape whose embeddings add 1.6B); any is accepted.
    """
    c = count_params(m)
    out = []
    if _off(c.total, m.params) > tol:
        out.append(
            (
                "params",
                f"{m.id}: published params {m.params:,.0f} but the shape gives "
                f"{c.total:,.0f} ({(c.total / m.params - 1):+.1%}; more than "
                f"{tol:.0%} apart: check layers, hidden, intermediate, moe, mla, vocab)",
            )
        )
    if m.active_params is not None:
        ways = (c.active, c.active - c.embed_in, c.active - c.embed_in - c.embed_out)
        if min(_off(a, m.active_params) for a in ways) > tol:
            out.append(
                (
                    "active_params",
                    f"{m.id}: published active_params {m.active_params:,.0f} but the shape "
                    f"gives {c.active:,.0f} ({c.active - c.embed_in:,.0f} without the input "
                    f"embedding), more than {tol:.0%} apart",
                )
            )
    return out


def check_published_counts(models: list[ModelArch]) -> None:
    """Raise a LocatedError (``models[i].params``) for every published count that the shape
    does not reproduce within :data:`PARAMS_TOLERANCE`."""
    items = [
        (("models", i, field), msg)
        for i, m in enumerate(models)
        for field, msg in count_mismatch(m)
    ]
    if items:
        raise LocatedError(items)
