"""Hugging Face ``config.json`` -> a model catalog entry (:class:`ModelArch` fields).

Read from disk, never downloaded. One reader per family of ``model_type``: dense Llama-likes
(llama, mistral, qwen2, qwen3), Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3 and Kimi K2 (MLA + MoE),
dots.llm1 (DeepSeek's MoE, multi-head attention),
gpt-oss (MoE + alternating sliding window) and Llama 4 (its ``text_config``: MoE on every
``interleave_moe_layer_step``-th layer, chunked attention on three layers of four), and the
models of late 2026: GLM-4.5/4.6 (``glm4_moe``: DeepSeek's MoE with grouped-query attention),
Qwen3-Next (``qwen3_next``: Gated DeltaNet linear attention on three layers of four), Gemma 3
(``gemma3``: five sliding-window layers to one global, in ``text_config``), MiniMax-M2
(``minimax_m2``), Kimi Linear (``kimi_linear``: KDA linear attention between MLA layers) and
DeepSeek-V3.2 (``deepseek_v32``: MLA with a top-k sparse-attention indexer).
``params`` and ``active_params`` of the entry are recomputed from the shape
(:func:`planner.inputs.model_arch.count_params`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.base.errors import InputError
from planner.base.files import read_json
from planner.inputs.model_arch import MAX_LAYERS, ModelArch, count_params

Config = dict[str, Any]


class _Reader:
    """Field access that names the file, the model_type and the missing or bad field."""

    def __init__(self, cfg: Config, path: Path, model_type: str) -> None:
        self.cfg, self.path, self.model_type = cfg, path, model_type

    def int(self, *names: str, default: int | None = None) -> int:
        """The first of ``names`` present, as a positive integer (``default`` if none is)."""
        for name in names:
            value = self.cfg.get(name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(
                        f"{self.path}: {self.model_type}: field {name!r} is {_short(value)}; "
                        "expected a non-negative integer"
                    )
                return value
        if default is not None:
            return default
        raise InputError(
            f"{self.path}: model_type {self.model_type!r} needs field {names[0]!r}, "
            "which is missing"
        )

    def get(self, name: str, default: Any = None) -> Any:
        return self.cfg.get(name, default)


def _layers(r: _Reader) -> int:
    """``num_hidden_layers``, refused above the catalog's limit before anything is built per
    layer (1e9 layers would otherwise take minutes and gigabytes before the entry is checked)."""
    layers = r.int("num_hidden_layers")
    if not 0 < layers <= MAX_LAYERS:
        raise InputError(
            f"{r.path}: {r.model_type}: field 'num_hidden_layers' is {layers:,}; "
            f"expected 1 to {MAX_LAYERS:,}"
        )
    return layers


def _base(r: _Reader) -> Config:
    """Fields every family shares (Llama names)."""
    heads = r.int("num_attention_heads")
    hidden = r.int("hidden_size")
    out: Config = {
        "layers": _layers(r),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": r.int("num_key_value_heads", default=heads),
        "head_dim": r.int("head_dim", default=hidden // max(1, heads)),
        "intermediate": r.int("intermediate_size"),
        "vocab": r.int("vocab_size"),
        "max_context": r.int("max_position_embeddings"),
    }
    if r.get("tie_word_embeddings", False) is True:
        out["tied_embeddings"] = True
    return out


def _sliding(r: _Reader, out: Config) -> Config:
    """Mistral/Qwen-style ``sliding_window`` (every layer when set and in use)."""
    window = r.get("sliding_window")
    used = r.get("use_sliding_window", True) is not False
    if isinstance(window, int) and 0 < window < out["max_context"] and used:
        out["sliding_window"] = window
    return out


def _dense(r: _Reader) -> Config:
    return _sliding(r, _base(r))


def _mixtral(r: _Reader) -> Config:
    out = _sliding(r, _base(r))
    out["moe"] = {
        "experts": r.int("num_local_experts"),
        "experts_per_token": r.int("num_experts_per_tok"),
        "expert_intermediate": out["intermediate"],
    }
    return out


def _layer_indices(r: _Reader, name: str) -> set[int]:
    """A list of layer indices (Qwen's ``mlp_only_layers``); absent or null: none."""
    value = r.get(name)
    if value is None:
        return set()
    ok = isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    )
    if not ok:
        raise InputError(
            f"{r.path}: {r.model_type}: field {name!r} is {_short(value)}; "
            "expected a list of layer indices (non-negative integers), e.g. [0, 1]"
        )
    return set(value)


def _short(value: Any) -> str:
    """``repr`` cut to a line: a hostile field may be megabytes long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _qwen_moe(r: _Reader) -> Config:
    out = _base(r)
    layers = out["layers"]
    step = max(1, r.int("decoder_sparse_step", default=1))
    dense_only = _layer_indices(r, "mlp_only_layers")
    moe_layers = [i for i in range(layers) if (i + 1) % step == 0 and i not in dense_only]
    out["moe"] = {
        "experts": r.int("num_experts"),
        "experts_per_token": r.int("num_experts_per_tok"),
        "expert_intermediate": r.int("moe_intermediate_size"),
        "shared_intermediate": r.int("shared_expert_intermediate_size", default=0),
        "dense_layers": layers - len(moe_layers),
    }
    return out


def _deepseek_moe(r: _Reader, out: Config) -> Config:
    """DeepSeek's MoE fields: routed and shared experts, the first k layers dense (Kimi
    Linear's names for them, ``num_experts`` and ``num_shared_experts``, read alike)."""
    inter = r.int("moe_intermediate_size")
    layers = out["layers"]
    first = min(layers, r.int("first_k_dense_replace", default=0))
    freq = max(1, r.int("moe_layer_freq", default=1))
    n_moe = sum(1 for i in range(first, layers) if i % freq == 0)
    out["moe"] = {
        "experts": r.int("n_routed_experts", "num_experts"),
        "experts_per_token": r.int("num_experts_per_tok", "num_experts_per_token"),
        "expert_intermediate": inter,
        "shared_intermediate": inter * r.int("n_shared_experts", "num_shared_experts", default=0),
        "dense_layers": layers - n_moe,
    }
    return out


def _deepseek(r: _Reader) -> Config:
    out = _deepseek_moe(r, _base(r))
    out["mla"] = {
        "kv_lora_rank": r.int("kv_lora_rank"),
        "q_lora_rank": r.int("q_lora_rank", default=0),
        "qk_nope_head_dim": r.int("qk_nope_head_dim"),
        "qk_rope_head_dim": r.int("qk_rope_head_dim"),
        "v_head_dim": r.int("v_head_dim"),
    }
    # MLA heads are not grouped (one latent serves every head); a head's query/key is
    # nope + rope wide (192 in DeepSeek-V3), not hidden / heads
    out["kv_heads"] = out["heads"]
    out["head_dim"] = out["mla"]["qk_nope_head_dim"] + out["mla"]["qk_rope_head_dim"]
    nextn = r.int("num_nextn_predict_layers", default=0)
    if nextn > 0:  # multi-token-prediction modules (DeepSeek-V3/R1: 1), a speculative draft
        out["num_nextn_predict_layers"] = nextn
    return out


def _deepseek_v32(r: _Reader) -> Config:
    """DeepSeek-V3.2: V3's shape plus the DSA indexer (``index_topk`` tokens per query)."""
    out = _deepseek(r)
    out["sparse_attention"] = {
        "top_k": r.int("index_topk"),
        "index_heads": r.int("index_n_heads"),
        "index_head_dim": r.int("index_head_dim"),
    }
    return out


def _glm4_moe(r: _Reader) -> Config:
    """GLM-4.5/4.6: DeepSeek's MoE fields (first k layers dense, one shared expert) with
    grouped-query attention of ``head_dim`` 128; ``num_nextn_predict_layers`` MTP layers."""
    out = _deepseek_moe(r, _base(r))
    nextn = r.int("num_nextn_predict_layers", default=0)
    if nextn > 0:
        out["num_nextn_predict_layers"] = nextn
    return out


def _linear_layers(r: _Reader, layers: int, interval: int) -> int:
    """Layers of linear attention: ``layer_types`` counted where given (``linear_attention``),
    else every ``interval``-th layer full and the rest linear (Qwen3-Next's
    ``full_attention_interval``)."""
    types = r.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return sum(1 for t in types if t == "linear_attention")
    if interval < 1:
        raise InputError(
            f"{r.path}: {r.model_type}: field 'full_attention_interval' is {interval}; "
            "expected a positive integer (every k-th layer full)"
        )
    return layers - layers // interval


def _qwen3_next(r: _Reader) -> Config:
    """Qwen3-Next: Qwen3's MoE (shared expert, every layer) and Gated DeltaNet linear attention
    on every layer but each ``full_attention_interval``-th. (The full layers' output gate,
    ~0.1 % of the weights, is left out.)"""
    out = _qwen_moe(r)
    layers = out["layers"]
    out["linear_attention"] = {
        "kind": "gated_deltanet",
        "layers": _linear_layers(r, layers, r.int("full_attention_interval", default=4)),
        "key_heads": r.int("linear_num_key_heads"),
        "value_heads": r.int("linear_num_value_heads"),
        "key_head_dim": r.int("linear_key_head_dim"),
        "value_head_dim": r.int("linear_value_head_dim"),
        "conv_kernel": r.int("linear_conv_kernel_dim", default=4),
    }
    return out


# Gemma3TextConfig's defaults (transformers), which the published config.json files leave out
_GEMMA3_DEFAULTS: Config = {
    "vocab_size": 262_208,
    "max_position_embeddings": 131_072,
    "tie_word_embeddings": True,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}


def _gemma3(r: _Reader) -> Config:
    """Gemma 3: grouped-query attention, five sliding-window layers (``sliding_window``) to one
    global (``layer_types`` counted where given, else ``sliding_window_pattern``), tied
    embeddings; fields the file leaves out take Gemma3TextConfig's defaults."""
    g = _Reader({**_GEMMA3_DEFAULTS, **r.cfg}, r.path, r.model_type)
    out = _base(g)
    types = g.get("layer_types")
    if isinstance(types, list) and types:
        full = sum(1 for t in types if t == "full_attention")
        every = len(types) // full if full else 0
    else:
        every = g.int("sliding_window_pattern", "_sliding_window_pattern", default=6)
    out["sliding_window"] = g.int("sliding_window")
    out["full_attention_every"] = every
    return out


def _minimax_m2(r: _Reader) -> Config:
    """MiniMax-M2: full grouped-query attention on every layer (``attn_type_list`` all 1) and
    a MoE of ``num_local_experts`` experts of ``intermediate_size`` on every layer. Its
    ``use_mtp`` modules are not in the published weights, so no draft is read."""
    out = _base(r)
    kinds = r.get("attn_type_list")
    if isinstance(kinds, list) and any(k != 1 for k in kinds):
        raise InputError(
            f"{r.path}: {r.model_type}: field 'attn_type_list' has linear (lightning) attention "
            "layers (0); only full-attention layers (1) are modelled for minimax_m2"
        )
    out["moe"] = {
        "experts": r.int("num_local_experts"),
        "experts_per_token": r.int("num_experts_per_tok"),
        "expert_intermediate": out["intermediate"],
        "shared_intermediate": r.int("shared_intermediate_size", default=0),
    }
    return out


def _kimi_linear(r: _Reader) -> Config:
    """Kimi Linear: DeepSeek's MLA and MoE (:func:`_deepseek`, Kimi's field names read alike)
    with KDA linear attention on the layers ``linear_attn_config.kda_layers`` lists (MLA on the
    rest, ``full_attn_layers``); its context is ``model_max_length``."""
    cfg = dict(r.cfg)
    cfg.setdefault("max_position_embeddings", cfg.get("model_max_length"))
    out = _deepseek(_Reader(cfg, r.path, r.model_type))
    lin = r.get("linear_attn_config")
    if not isinstance(lin, dict):
        raise InputError(
            f"{r.path}: model_type {r.model_type!r} needs field 'linear_attn_config' (an object "
            "with kda_layers, num_heads, head_dim), which is missing"
        )
    sub = _Reader(lin, r.path, f"{r.model_type}.linear_attn_config")
    kda = _layer_indices(sub, "kda_layers")
    heads, dim = sub.int("num_heads"), sub.int("head_dim")
    out["linear_attention"] = {
        "kind": "kda",
        "layers": len(kda),
        "key_heads": heads,
        "value_heads": heads,
        "key_head_dim": dim,
        "value_head_dim": dim,
        "conv_kernel": sub.int("short_conv_kernel_size", default=4),
    }
    return out


def _dots1(r: _Reader) -> Config:
    """rednote dots.llm1: DeepSeek's MoE with ordinary (multi-head) attention."""
    return _deepseek_moe(r, _base(r))


def _gpt_oss(r: _Reader) -> Config:
    out = _base(r)
    out["moe"] = {
        "experts": r.int("num_local_experts"),
        "experts_per_token": r.int("num_experts_per_tok", "experts_per_token"),
        "expert_intermediate": out["intermediate"],
    }
    types = r.get("layer_types")
    window = r.int("sliding_window")
    if isinstance(types, list) and types:
        full = sum(1 for t in types if t == "full_attention")
        # the pattern is regular (sliding, full, ...): keep it as "every k-th layer full"
        every = len(types) // full if full else 0
    else:
        every = 2  # gpt-oss alternates sliding and full layers (model card)
    out["sliding_window"] = window
    out["full_attention_every"] = every
    return out


def _llama4(r: _Reader) -> Config:
    out = _base(r)
    layers = out["layers"]
    step = max(1, r.int("interleave_moe_layer_step", default=1))
    n_moe = len(range(step - 1, layers, step))
    expert = out["intermediate"]
    out["intermediate"] = r.int("intermediate_size_mlp", default=expert)
    out["moe"] = {
        "experts": r.int("num_local_experts"),
        "experts_per_token": r.int("num_experts_per_tok"),
        "expert_intermediate": expert,
        "shared_intermediate": expert,  # one shared expert of the routed experts' size
        "dense_layers": layers - n_moe,
    }
    chunk = r.get("attention_chunk_size")
    if isinstance(chunk, int) and 0 < chunk < out["max_context"]:
        # chunked local attention on the RoPE layers, global (NoPE) on every 4th layer
        out["sliding_window"] = chunk
        out["full_attention_every"] = r.int("no_rope_layer_interval", default=4)
    return out


FAMILIES: dict[str, Callable[[_Reader], Config]] = {
    "llama": _dense,
    "mistral": _dense,
    "qwen2": _dense,
    "qwen3": _dense,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "deepseek_v32": _deepseek_v32,
    "glm4_moe": _glm4_moe,
    "qwen3_next": _qwen3_next,
    "gemma3": _gemma3,
    "gemma3_text": _gemma3,
    "minimax_m2": _minimax_m2,
    "kimi_linear": _kimi_linear,
    "kimi_k2": _deepseek,
    "dots1": _dots1,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
    "llama4_text": _llama4,
}


def _text_config(cfg: Config) -> Config:
    """The language model's config: multimodal wrappers (Llama 4) keep it in ``text_config``."""
    inner = cfg.get("text_config")
    if isinstance(inner, dict) and "num_hidden_layers" not in cfg:
        return inner
    return cfg


def model_entry(
    cfg: Config, model_id: str, path: Path, source: str | None = None, as_of: str = ""
) -> Config:
    """The catalog entry (a dict in ``catalogs/models.yaml`` form) for one config.json.

    An unknown ``model_type`` or a missing field is an InputError naming both.
    """
    outer_type = _type_name(cfg)
    inner = _text_config(cfg)
    model_type = (_type_name(inner) or outer_type) if inner is not cfg else outer_type
    if model_type not in FAMILIES and outer_type in FAMILIES:
        model_type = outer_type
    if model_type not in FAMILIES:
        given = repr(model_type) if model_type is not None else _short(cfg.get("model_type"))
        raise InputError(
            f"{path}: unknown model_type {given} (a name, as a string); known: "
            + ", ".join(sorted(FAMILIES))
        )
    shape = FAMILIES[model_type](_Reader(inner, path, model_type))
    released = _released_precision(cfg)
    if released is not None:
        shape["released_precision"] = released
    entry: Config = {
        "id": model_id,
        "name": model_id,
        "params": 1e9,  # replaced below by the count from the shape
        **shape,
        "source": source or f"config.json ({path.name}, model_type {model_type})",
        "as_of": as_of or "unknown",
    }
    counts = count_params(_validated(entry, path, model_type))
    entry["params"] = int(counts.total)
    if entry.get("moe") is not None:
        # active right after params, as in catalogs/models.yaml
        head = {k: entry[k] for k in ("id", "name", "params")}
        entry = {**head, "active_params": int(counts.active), **entry}
    # again with the counts: a shape can compute to a model too small or too large to plan
    _validated(entry, path, model_type)
    return entry


def _released_precision(cfg: Config) -> str | None:
    """The precision the checkpoint is published in: ``quantization_config.quant_method``
    fp8 -> fp8, mxfp4/nvfp4 -> fp4; else None (16-bit)."""
    q = cfg.get("quantization_config")
    method = q.get("quant_method") if isinstance(q, dict) else None
    if not isinstance(method, str):
        return None
    method = method.lower()
    if method == "fp8":
        return "fp8"
    if method in ("mxfp4", "nvfp4", "modelopt_fp4"):
        return "fp4"
    return None


def _type_name(cfg: Config) -> str | None:
    """``model_type`` when it is a string (a list or a number is no known family)."""
    value = cfg.get("model_type")
    return value if isinstance(value, str) else None


# catalog field -> the config.json field it is read from (Llama names)
_HF_NAMES = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "kv_heads": "num_key_value_heads",
    "head_dim": "head_dim",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "max_context": "max_position_embeddings",
}


def _validated(entry: Config, path: Path, model_type: str) -> ModelArch:
    """``entry`` as a ModelArch, or an InputError naming the file, the family and the field."""
    try:
        return ModelArch.model_validate(entry)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "shape"
        msg = first["msg"].removeprefix("Value error, ")
        if where in _HF_NAMES:
            where = f"{where} ({_HF_NAMES[where]})"  # the config.json field to look at
        if where in ("params", "active_params"):
            msg = (
                f"the shape computes to {entry[where]:,} parameters; a model has more than "
                "1,000,000 and at most 100 trillion (check hidden_size, num_hidden_layers, "
                "intermediate_size, vocab_size and the expert fields)"
            )
        raise InputError(f"{path}: {model_type}: {where}: {msg}") from None


def read_hf_config(path: str | Path) -> Config:
    """The config.json at ``path`` as a dict (not JSON or not an object: an InputError)."""
    p = Path(path)
    doc = read_json(p, "Hugging Face config.json")
    if not isinstance(doc, dict):
        raise InputError(f"{p}: expected a JSON object (a Hugging Face config.json)")
    return doc
