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
  window, so its share per token falls as the context grows past the window.
"""

from __future__ import annotations

import math

from planner.inputs.model_arch import ModelArch, count_params

# Bytes of one KV-cache element: 16-bit, except with FP8 (and FP4 weights, served with an
# FP8 cache: vLLM/TRT-LLM kv_cache_dtype fp8 beside NVFP4/MXFP4 weights).
KV_ELEMENT_BYTES = {"fp8": 1.0, "fp4": 1.0}


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
    windowed = model.window_layers
    if windowed == 0 or context is None or model.sliding_window is None:
        return float(model.layers * per_layer)
    share = min(1.0, model.sliding_window / max(context, 1.0))
    return (model.layers - windowed) * per_layer + windowed * per_layer * share


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
    out = (model.layers - windowed) * per * prompt**2
    w = model.sliding_window
    if windowed and w is not None:
        pairs = prompt**2 / 2 if prompt <= w else prompt * (w - w * w / (2 * prompt))
        out += windowed * 2 * per * pairs
    return float(out)


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
    out = float((model.layers - windowed) * per * seq_len)
    if windowed and model.sliding_window is not None:
        out += windowed * per * min(seq_len, model.sliding_window)
    return out
