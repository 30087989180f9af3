"""Model architectures: the shape of a transformer the physics needs (catalogs/models.yaml).

Besides the dense shape (layers, hidden, heads, MLP size, vocabulary) a model may have

* an explicit ``head_dim`` (Qwen3, gpt-oss, Llama 4: not ``hidden / heads``; absent, it is
  ``hidden // heads`` as for every Llama 2/3, Mistral and MPT);
* ``moe``: routed experts, experts per token, a shared expert and how many layers keep a dense
  MLP (DeepSeek's first 3, Llama 4 Maverick's every other layer);
* ``mla``: multi-head latent attention (DeepSeek-V2/V3, Kimi K2) with its latent ranks; the KV
  cache holds one ``kv_lora_rank + qk_rope_head_dim`` latent per token and layer;
* ``sliding_window`` with ``full_attention_every``: windowed layers keep at most the window.

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
    num_nextn_predict_layers: int = Field(
        0,
        ge=0,
        le=16,
        description="multi-token-prediction modules (config.json num_nextn_predict_layers; "
        "DeepSeek-V3/R1: 1), usable as a speculative draft",
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


def mlp_params(m: ModelArch, inner: int) -> float:
    """One MLP of inner size ``inner``: ``3 hidden inner`` gated (SwiGLU), ``2`` plain.

    >>> from planner.physics.train import llama_like
    >>> mlp_params(llama_like("x", 7e9, 32, 4096, 32, 32, 11008, 32000), 11008) / 1e6
    135.266304
    """
    return float((3 if m.mlp == "gated" else 2) * m.hidden * inner)


def count_params(m: ModelArch) -> ParamCounts:
    """Parameters by part recomputed from the shape (weights and norms; biases, attention
    sinks and vision towers left out: a few per mille).

    >>> from planner.physics.train import llama_like
    >>> c = count_params(llama_like("l2-7b", 6.74e9, 32, 4096, 32, 32, 11008, 32000))
    >>> int(c.total), c.active == c.total  # HF Llama-2-7b: 6,738,415,616
    (6738415616, True)
    """
    moe = m.moe
    dense_layers = m.layers if moe is None else moe.dense_layers
    expert = 0.0 if moe is None else mlp_params(m, moe.expert_intermediate)
    shared = 0.0 if moe is None else mlp_params(m, moe.shared_intermediate)
    n_moe = m.moe_layers
    emb = float(m.vocab * m.hidden)
    return ParamCounts(
        embed_in=emb,
        embed_out=0.0 if m.tied_embeddings else emb,
        attention=m.layers * attention_params(m),
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

    Active counts follow two conventions: with the input embedding table (Mixtral, Qwen,
    DeepSeek) or without it (gpt-oss counts only the unembedding); either is accepted.
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
        ways = (c.active, c.active - c.embed_in)
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
