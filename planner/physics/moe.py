"""Physics of the models of today: mixture-of-experts weights, KV cache by attention kind.

Pure functions of a :class:`~planner.inputs.model_arch.ModelArch`, used by the serving and
training physics. For a dense model without MLA or sliding window every function returns
exactly what the dense formulas did (``params``, ``2 x layers x kv_heads x head_dim``), so dense
estimates and plans are unchanged.

* **Weights read per forward** (:func:`weight_params_read`): a MoE decode step reads the
  attention, dense and shared weights plus the *distinct* experts its tokens are routed to.
  With uniform routing of ``k`` of ``E`` experts per token, ``B`` tokens touch
  ``E (1 - (1 - k/E)^B)`` experts per MoE layer (:func:`experts_touched`).
* **Compute per token** (:func:`compute_params`): ``2 x`` the active parameters.
* **KV cache** (:func:`kv_bytes_per_token`): GQA/MHA ``2 x kv_heads x head_dim`` per layer; MLA
  one latent of ``kv_lora_rank + qk_rope_head_dim``; a sliding-window layer holds at most its
  window, so its share per token falls as the context grows past the window; a linear-attention
  layer (Qwen3-Next, Kimi Linear) holds a fixed state per sequence whatever the context
  (:func:`linear_state_bytes`); a sparse-attention model (DeepSeek-V3.2) stores every token's
  latent plus its indexer key (:func:`index_bytes_per_token`) but a decode step reads only the
  ``top_k`` chosen tokens' latents (:func:`kv_read_bytes_per_token`).
* **Attention FLOPs** at a context (:func:`attn_flops_per_token`, :func:`prefill_attn_flops`,
  :func:`train_attn_flops_per_token`): full layers grow with the context, window layers stop
  at the window, sparse layers at ``top_k`` (plus the indexer's scan of every token), linear
  layers cost the same per token at any context (:func:`linear_token_flops`).
"""

from __future__ import annotations

import math

from planner.inputs.model_arch import ModelArch, count_params

# Bytes of one KV-cache element: 16-bit, except with FP8 (and FP4 weights, served with an
# FP8 cache: vLLM/TRT-LLM kv_cache_dtype fp8 beside NVFP4/MXFP4 weights).
KV_ELEMENT_BYTES = {"fp8": 1.0, "fp4": 1.0}
# Bytes of one element of a linear-attention layer's recurrent and convolution state: kept in
# the model's 16-bit dtype (vLLM's mamba_ssm_cache_dtype "auto"), not quantised with the KV
# cache; a float32 state (an engine option) doubles it.
STATE_ELEMENT_BYTES = 2.0
# DeepSeek-V3.2's indexer caches its keys in FP8 with one float32 scale per 128 elements
# (vLLM's indexer k-cache: head_dim + head_dim / 128 x 4 bytes per token and layer).
INDEX_SCALE_BLOCK, INDEX_SCALE_BYTES = 128, 4.0
# Chunk length of the chunked (parallel) form of a linear-attention layer in prefill and
# training (flash-linear-attention's Gated DeltaNet and KDA kernels: 64).
LINEAR_CHUNK = 64


def experts_touched(experts: int, per_token: int, tokens: float) -> float:
    """Expected distinct experts that ``tokens`` tokens route to in one MoE layer (uniform
    routing, each token picks ``per_token`` of ``experts``): ``E (1 - (1 - k/E)^B)``.

    >>> experts_touched(256, 8, 1), round(experts_touched(256, 8, 64), 1)
    (8.0, 222.4)
    >>> experts_touched(8, 2, 0)
    0.0
    """
    if tokens <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


def _idle_expert_params(model: ModelArch, touched: float) -> float:
    """Routed-expert parameters a forward does not use: ``moe_layers x (E - touched) x expert``
    (scaled to the published total so that a dense model's count is its ``params``)."""
    if model.moe is None:
        return 0.0
    c = count_params(model)
    return model.moe_layers * (model.moe.experts - touched) * c.expert * model.params / c.total


def routed_params_read(model: ModelArch, tokens: float) -> float:
    """Routed-expert parameters one forward over ``tokens`` tokens reads (0 for a dense model):
    ``moe_layers x experts_touched x expert`` (scaled to the published total)."""
    if model.moe is None:
        return 0.0
    c = count_params(model)
    touched = experts_touched(model.moe.experts, model.moe.experts_per_token, tokens)
    return model.moe_layers * touched * c.expert * model.params / c.total


def ep_max_local_experts(experts: int, per_token: int, tokens: float, ep: int) -> float:
    """Expected distinct experts the busiest of ``ep`` GPUs reads when each holds
    ``experts / ep`` whole experts (expert parallelism): each expert is touched with
    probability ``q = 1 - (1 - k/E)^B``; a GPU's count is Binomial(E/ep, q), and the expected
    maximum of ``ep`` of them is about ``mean + sd x sqrt(2 ln ep)``, at most E/ep.

    >>> round(ep_max_local_experts(256, 8, 1, 8), 2)  # batch 1: 8 experts, ~3 on one GPU
    3.01
    >>> ep_max_local_experts(256, 8, 10_000, 8)  # every expert touched: 32 per GPU
    32.0
    """
    if tokens <= 0:
        return 0.0
    local = experts / ep
    q = 1.0 - (1.0 - per_token / experts) ** tokens
    mean = local * q
    spread = math.sqrt(local * q * (1.0 - q) * 2.0 * math.log(ep)) if ep > 1 else 0.0
    return min(local, mean + spread)


def ep_routed_params_read(model: ModelArch, tokens: float, ep: int) -> float:
    """Routed-expert parameters the busiest GPU of an ``ep``-way expert-parallel replica reads
    in one forward over ``tokens`` tokens (scaled to the published total); 0 if dense."""
    if model.moe is None:
        return 0.0
    c = count_params(model)
    m = model.moe
    busiest = ep_max_local_experts(m.experts, m.experts_per_token, tokens, ep)
    return model.moe_layers * busiest * c.expert * model.params / c.total


def expert_params(model: ModelArch) -> float:
    """Every routed expert of every MoE layer (scaled to the published total); 0 if dense.

    >>> from planner.physics.train import _toy_model
    >>> expert_params(_toy_model())
    0.0
    """
    return routed_params_read(model, math.inf) if model.moe is not None else 0.0


def weight_params_read(model: ModelArch, tokens: float) -> float:
    """Parameters whose weights one forward over ``tokens`` tokens streams from memory.

    Dense: ``params``. MoE: ``params`` less the experts no token is routed to.

    >>> from planner.physics.train import llama_like
    >>> weight_params_read(llama_like("d", 7e9, 32, 4096, 32, 32, 11008, 32000), 1)
    7000000000.0
    """
    if model.moe is None:
        return model.params
    return model.params - _idle_expert_params(
        model, experts_touched(model.moe.experts, model.moe.experts_per_token, tokens)
    )


def compute_params(model: ModelArch) -> float:
    """Parameters each token multiplies through (FLOPs/token = 2 x this + attention): ``params``
    for a dense model, ``params`` less the ``E - k`` unused experts per MoE layer for a MoE."""
    if model.moe is None:
        return model.params
    return model.params - _idle_expert_params(model, model.moe.experts_per_token)


def kv_elements_per_token_layer(model: ModelArch) -> int:
    """KV-cache elements one token stores in one layer: MLA ``kv_lora_rank + qk_rope_head_dim``
    (one latent shared by every head), else ``2 x kv_heads x head_dim`` (K and V).

    >>> from planner.physics.train import llama_like
    >>> kv_elements_per_token_layer(llama_like("m", 70e9, 80, 8192, 64, 8, 28672, 32000))
    2048
    """
    if model.mla is not None:
        return model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    return 2 * model.kv_heads * model.head_dim


def linear_state_bytes(model: ModelArch) -> float:
    """Bytes of one sequence's linear-attention state, whole model (0 without linear layers):
    ``layers_lin x (vh dk dv + conv_dim (w - 1)) x 2 B``, the recurrent state of every value
    head and the short convolution's last ``w - 1`` inputs (``conv_dim`` = ``2 kh dk + vh dv``
    for Gated DeltaNet, ``3 vh dv`` for KDA's q/k/v convolutions).

    >>> from planner.inputs.model_arch import LinearAttnSpec
    >>> from planner.physics.train import llama_like
    >>> lin = LinearAttnSpec(kind="gated_deltanet", layers=36, key_heads=16, value_heads=32,
    ...                      key_head_dim=128, value_head_dim=128)
    >>> m = llama_like("q3n", 8e10, 48, 2048, 16, 2, 5120, 151936)
    >>> linear_state_bytes(m.model_copy(update={"linear_attention": lin})) / 2**20  # MiB
    37.6875
    """
    a = model.linear_attention
    if a is None:
        return 0.0
    k, v = a.key_heads * a.key_head_dim, a.value_heads * a.value_head_dim
    conv_dim = 2 * k + v if a.kind == "gated_deltanet" else 3 * v
    per_layer = a.value_heads * a.key_head_dim * a.value_head_dim + conv_dim * (a.conv_kernel - 1)
    return float(a.layers * per_layer * STATE_ELEMENT_BYTES)


def index_bytes_per_token(model: ModelArch) -> float:
    """Bytes the top-k indexer caches per token, whole model (0 without one): ``layers x (d_i
    + ceil(d_i / 128) x 4)``, an FP8 key with its float32 scales in every layer.

    >>> from planner.inputs.model_arch import SparseAttnSpec
    >>> from planner.physics.train import llama_like
    >>> m = llama_like("v32", 6.7e11, 61, 7168, 128, 128, 18432, 129280)
    >>> dsa = SparseAttnSpec(top_k=2048, index_heads=64, index_head_dim=128)
    >>> index_bytes_per_token(m.model_copy(update={"sparse_attention": dsa}))
    8052.0
    """
    a = model.sparse_attention
    if a is None:
        return 0.0
    scales = math.ceil(a.index_head_dim / INDEX_SCALE_BLOCK) * INDEX_SCALE_BYTES
    return float(model.layers * (a.index_head_dim + scales))


def kv_bytes_per_token(model: ModelArch, precision: str, context: float | None = None) -> float:
    """Mean KV-cache bytes per token, whole model, of a sequence of ``context`` tokens (B).

    ``elements x bytes x (full layers + window layers x min(1, window / context))``: a
    sliding-window layer keeps only the last ``window`` tokens. ``context=None``: as if every
    layer were full (an upper bound). Elements are 2 B, 1 B with fp8 or fp4.

    >>> from planner.physics.train import _toy_model
    >>> kv_bytes_per_token(_toy_model(), "fp16")  # Llama-2-7B: 0.5 MiB per token
    524288.0
    """
    b = KV_ELEMENT_BYTES.get(precision, 2.0)
    per_layer = kv_elements_per_token_layer(model) * b
    if model.linear_attention is not None or model.sparse_attention is not None:
        state = linear_state_bytes(model) / max(context, 1.0) if context is not None else 0.0
        return model.full_layers * per_layer + index_bytes_per_token(model) + state
    windowed = model.window_layers
    if windowed == 0 or context is None or model.sliding_window is None:
        return float(model.layers * per_layer)
    share = min(1.0, model.sliding_window / max(context, 1.0))
    return (model.layers - windowed) * per_layer + windowed * per_layer * share


def kv_read_bytes_per_token(model: ModelArch, precision: str, context: float) -> float:
    """Mean bytes one decode step reads per cached token of a ``context``-token sequence (B):
    what it stores (:func:`kv_bytes_per_token`), except that sparse layers read the latents of
    only ``min(context, top_k)`` tokens, beside every token's indexer key.

    >>> from planner.physics.train import _toy_model
    >>> kv_read_bytes_per_token(_toy_model(), "fp16", 4096) == kv_bytes_per_token(_toy_model(), "fp16", 4096)
    True
    """
    a = model.sparse_attention
    if a is None:
        return kv_bytes_per_token(model, precision, context)
    per_layer = kv_elements_per_token_layer(model) * KV_ELEMENT_BYTES.get(precision, 2.0)
    share = min(1.0, a.top_k / max(context, 1.0))
    return model.full_layers * per_layer * share + index_bytes_per_token(model)


def linear_token_flops(model: ModelArch, chunked: bool) -> float:
    """FLOPs of one token through every linear-attention layer (0 without), at any context:
    ``6 vh dk dv`` per layer recurrently (read the state against the key, update it, read it
    with the query), plus in the chunked form of prefill and training the attention within a
    chunk, ``2 vh C (dk + dv)`` (C = :data:`LINEAR_CHUNK`).

    >>> from planner.inputs.model_arch import LinearAttnSpec
    >>> from planner.physics.train import llama_like
    >>> lin = LinearAttnSpec(kind="kda", layers=1, key_heads=2, value_heads=2,
    ...                      key_head_dim=4, value_head_dim=4)
    >>> m = llama_like("x", 1e8, 4, 64, 2, 2, 128, 1000).model_copy(update={"linear_attention": lin})
    >>> linear_token_flops(m, False), linear_token_flops(m, True)
    (192.0, 2240.0)
    """
    a = model.linear_attention
    if a is None:
        return 0.0
    per = 6.0 * a.value_heads * a.key_head_dim * a.value_head_dim
    if chunked:
        per += 2.0 * a.value_heads * LINEAR_CHUNK * (a.key_head_dim + a.value_head_dim)
    return a.layers * per


def _index_flops(model: ModelArch) -> float:
    """Indexer FLOPs of one query against one cached token, whole model: ``2 heads_i d_i``
    per layer (the scores; the ReLU and head weights are small)."""
    a = model.sparse_attention
    return 0.0 if a is None else 2.0 * a.index_heads * a.index_head_dim * model.layers


def kv_share_per_gpu(model: ModelArch, tp: int) -> float:
    """Share of the KV cache one GPU of a ``tp``-wide replica holds.

    GQA/MHA: ``ceil(kv_heads / tp) / kv_heads`` (heads replicated below one per GPU). MLA: 1,
    every tensor-parallel rank keeps the whole latent (vLLM/SGLang without DP attention).

    >>> from planner.physics.train import llama_like
    >>> m = llama_like("m", 70e9, 80, 8192, 64, 8, 28672, 32000)
    >>> kv_share_per_gpu(m, 8), kv_share_per_gpu(m, 16)
    (0.125, 0.125)
    """
    if model.mla is not None:
        return 1.0
    return math.ceil(model.kv_heads / tp) / model.kv_heads


def _attn_widths(model: ModelArch, absorbed: bool) -> tuple[int, int]:
    """(query-key width, value width) of one head. MLA absorbed (decode): scores and values
    over the latent; MLA naive (prefill): nope + rope and v_head_dim."""
    if model.mla is None:
        return model.head_dim, model.head_dim
    a = model.mla
    if absorbed:
        return a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
    return a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim


def attn_flops_per_token(model: ModelArch, context: float) -> float:
    """Attention FLOPs of one decoded token over ``context`` cached tokens, whole model.

    ``2 x heads x (qk + v) x context`` per full layer (QK^T and AV), the context capped at the
    window on sliding-window layers. Dense Llama: ``4 x layers x hidden x context``.

    >>> from planner.physics.train import _toy_model
    >>> attn_flops_per_token(_toy_model(), 100) == 4 * 32 * 4096 * 100
    True
    """
    qk, v = _attn_widths(model, absorbed=True)
    per = 2 * model.heads * (qk + v)
    windowed = model.window_layers
    if model.linear_attention is not None or model.sparse_attention is not None:
        top = model.sparse_attention.top_k if model.sparse_attention else math.inf
        full = model.full_layers * per * min(context, top) + _index_flops(model) * context
        return full + linear_token_flops(model, chunked=False)
    full = (model.layers - windowed) * per * context
    if windowed and model.sliding_window is not None:
        full += windowed * per * min(context, float(model.sliding_window))
    return full


def prefill_attn_flops(model: ModelArch, prompt: int) -> float:
    """Causal attention FLOPs of one ``prompt``-token prefill, whole model.

    Full layer: ``2 x heads x (qk + v) x p^2 / 2``; window layer: token i attends to
    ``min(i, w)`` tokens, ``p (w - w^2 / 2p)`` in all for ``p > w``. Dense Llama:
    ``2 x layers x hidden x p^2``.

    >>> from planner.physics.train import _toy_model
    >>> prefill_attn_flops(_toy_model(), 2048) == 2 * 32 * 4096 * 2048**2
    True
    """
    qk, v = _attn_widths(model, absorbed=False)
    per = model.heads * (qk + v)
    windowed = model.window_layers
    if model.linear_attention is not None or model.sparse_attention is not None:
        return _prefill_attn_flops_new(model, per, prompt)
    out = (model.layers - windowed) * per * prompt**2
    w = model.sliding_window
    if windowed and w is not None:
        pairs = prompt**2 / 2 if prompt <= w else prompt * (w - w * w / (2 * prompt))
        out += windowed * 2 * per * pairs
    return float(out)


def _prefill_attn_flops_new(model: ModelArch, per: float, prompt: int) -> float:
    """:func:`prefill_attn_flops` of a hybrid-linear or sparse model: full layers over the
    causal pairs (at most ``top_k`` keys per query when sparse: ``k^2/2 + (p - k) k`` pairs for
    ``p > k``), the indexer over every causal pair, linear layers ``p`` chunked tokens."""
    a = model.sparse_attention
    p = float(prompt)
    k = p if a is None else min(p, float(a.top_k))
    pairs = k * k / 2 + (p - k) * k  # p^2 / 2 when every key is attended
    out = model.full_layers * 2 * per * pairs + _index_flops(model) * p * p / 2
    return out + p * linear_token_flops(model, chunked=True)


def train_attn_flops_per_token(model: ModelArch, seq_len: int) -> float:
    """Attention FLOPs per trained token, forward + backward, whole model (no causal halving,
    as in PaLM's and llm-foundry's MFU): ``3 x 2 x heads x (qk + v) x s`` per full layer, the
    window on sliding-window layers; MLA with its naive widths (nope + rope, v_head_dim).
    Dense Llama: ``12 x layers x hidden x s``.

    >>> from planner.physics.train import _toy_model
    >>> train_attn_flops_per_token(_toy_model(), 2048) == 12 * 32 * 4096 * 2048
    True
    """
    qk, v = _attn_widths(model, absorbed=False)
    per = 6 * model.heads * (qk + v)
    windowed = model.window_layers
    if model.linear_attention is not None or model.sparse_attention is not None:
        top = model.sparse_attention.top_k if model.sparse_attention else math.inf
        out = model.full_layers * per * min(seq_len, top) + 3 * _index_flops(model) * seq_len
        return out + 3 * linear_token_flops(model, chunked=True)
    out = float((model.layers - windowed) * per * seq_len)
    if windowed and model.sliding_window is not None:
        out += windowed * per * min(seq_len, model.sliding_window)
    return out


def attention_description(model: ModelArch) -> str:
    """The model's attention in words, for tables and workbooks.

    >>> from planner.physics.train import _toy_model
    >>> attention_description(_toy_model())
    'full attention on 32 layers'
    """
    if model.linear_attention is not None:
        a = model.linear_attention
        kind = "Gated DeltaNet" if a.kind == "gated_deltanet" else "Kimi Delta Attention"
        return f"hybrid: {kind} on {a.layers} layers, full attention on {model.full_layers}"
    if model.sparse_attention is not None:
        return (
            f"sparse: top-{model.sparse_attention.top_k:,} tokens per query (indexer) on "
            f"{model.layers} layers"
        )
    if model.sliding_window is not None:
        return (
            f"sliding window of {model.sliding_window:,} on {model.window_layers} layers, "
            f"full attention on {model.full_layers}"
        )
    return f"full attention on {model.layers} layers"


def attention_facts(model: ModelArch, precision: str, context: float) -> dict[str, object]:
    """What one sequence of ``context`` tokens costs the attention, whole model: its kind, the
    KV cache (and linear state) it holds, what a decode step reads of it and its attention
    FLOPs per decoded token (GB, GB, GFLOP)."""
    return {
        "kind": model.attention_kind,
        "description": attention_description(model),
        "context": context,
        "kv_cache_gb_per_sequence": context * kv_bytes_per_token(model, precision, context) / 1e9,
        "kv_read_gb_per_step_per_sequence": context
        * kv_read_bytes_per_token(model, precision, context)
        / 1e9,
        "attention_gflop_per_token": attn_flops_per_token(model, context) / 1e9,
    }
