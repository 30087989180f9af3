"""Training memory per GPU: model states sharded by TP x PP, ZeRO and expert parallelism;
activations by the Korthikanti et al. (2022) accounting, with MoE layers' routed experts.

GB = 1e9 bytes.
"""

from __future__ import annotations

import math
from typing import Any

from planner.inputs.catalog import ModelArch
from planner.physics.calibration.values import Calibration
from planner.physics.moe import expert_params
from planner.physics.training.links import in_flight_micro_batches

GB = 1e9

# Korthikanti et al. 2022 (arXiv:2205.05198) Table 2, bytes per token per layer in units of h
# with flash-attention: attention block and norms 15 h (11 + 4), MLP block 19 h.
ATTN_BYTES_H = 15.0
DENSE_MLP_BYTES_H = 19.0


def moe_mlp_activation_bytes(model: ModelArch) -> float:
    """Activation bytes one token keeps in one MoE layer's MLP block (BF16), no recomputation.

    Each of the ``k`` routed copies keeps its permuted input (2 h), the gate and up projections
    and their product (3 x 2 I_e) and its output until the weighted combine (2 h); the shared
    expert keeps 2 h + 6 I_s; the router logits are negligible. DeepSeek-V3: 49.4 h per token
    against the dense block's 19 h.

    >>> from planner.inputs.catalog import load_models
    >>> m = load_models()["deepseek-v3"]
    >>> round(moe_mlp_activation_bytes(m) / m.hidden, 1)
    49.4
    """
    assert model.moe is not None
    h, mo = model.hidden, model.moe
    routed = mo.experts_per_token * (4.0 * h + 6.0 * mo.expert_intermediate)
    shared = 2.0 * h + 6.0 * mo.shared_intermediate if mo.shared_intermediate else 0.0
    return routed + shared


def stage_activation_bytes(
    model: ModelArch, stage_layers: int, tokens: float, tp: int, recompute: bool
) -> float:
    """Activation bytes of one micro-batch of ``tokens`` on a stage of ``stage_layers`` layers
    (per GPU, sequence parallel over ``tp``). Full recomputation keeps only each layer's input.
    A MoE stage has the model's share of MoE layers, each at :func:`moe_mlp_activation_bytes`.

    >>> from planner.physics.train import _toy_model
    >>> stage_activation_bytes(_toy_model(), 2, 4096, 1, False) == 2 * 34 * 4096 * 4096
    True
    """
    h = model.hidden
    if recompute:
        return stage_layers * 2.0 * tokens * h / tp
    dense = (ATTN_BYTES_H + DENSE_MLP_BYTES_H) * h
    if model.moe is None or model.moe_layers == 0:
        return stage_layers * dense * tokens / tp
    moe_share = model.moe_layers / model.layers
    moe = ATTN_BYTES_H * h + moe_mlp_activation_bytes(model)
    per_layer = (1 - moe_share) * dense + moe_share * moe
    return stage_layers * per_layer * tokens / tp


def max_layer_activation_bytes(model: ModelArch, tokens: float, tp: int) -> float:
    """The working set of the largest layer while it is recomputed (its full activations)."""
    mlp = DENSE_MLP_BYTES_H * model.hidden
    if model.moe is not None and model.moe_layers:
        mlp = max(mlp, moe_mlp_activation_bytes(model))
    return (ATTN_BYTES_H * model.hidden + mlp) * tokens / tp


def activation_bytes_per_layer(
    seq_len: int, micro_batch: int, hidden: int, tp: int, recompute: bool
) -> float:
    """Activation bytes kept per layer per micro-batch on one GPU (Korthikanti et al. 2022).

    Without recomputation ``s b h (34 + 5 a s / h) / t`` with tensor + sequence parallelism; with
    flash-attention (assumed: standard since 2023) the ``5 a s / h`` score term is not stored, leaving
    ``34 s b h / t``. Full recomputation keeps only the layer input, ``2 s b h / t``.

    >>> activation_bytes_per_layer(4096, 1, 4096, 1, False) / 1e9
    0.570425344
    >>> activation_bytes_per_layer(4096, 1, 4096, 1, True) / 1e9
    0.033554432
    """
    per = 2.0 if recompute else 34.0
    return per * seq_len * micro_batch * hidden / tp


def train_memory_gb(
    model: ModelArch,
    layout: Any,  # a layout.TrainLayout (not imported: layout imports this module)
    method: str,
    seq_len: int,
    micro_batches: int,
    calib: Calibration,
) -> dict[str, float]:
    """Memory per GPU by kind (GB): weights, gradients, optimizer, activations, overhead.

    Full mixed-precision AdamW = 16 B/param: BF16 weights 2 + BF16 grads 2 + FP32 master 4 + Adam
    m, v 8. Model states are split by tp*pp; ZeRO-1 shards the optimizer (12 B), ZeRO-2 also the
    gradients, ZeRO-3/FSDP also the weights across dp. LoRA: frozen BF16 base (2 B/param) plus
    adapters (``lora_param_fraction`` of params) with full 16 B/param states; QLoRA base at
    ``qlora_bytes_per_param``. Activations: stage layers x micro-batches in flight (1F1B keeps up
    to ``pp`` on the first stage), plus one layer's full working set when recomputing, plus the
    FP32 logits and their gradient (``8 s b V / t``).

    >>> from planner.physics.calibration.values import default_calibration
    >>> from planner.physics.train import TrainLayout, _toy_model
    >>> lay = TrainLayout(tp=1, pp=1, dp=8, zero_stage=3, recompute=False, micro_batch=1)
    >>> mem = train_memory_gb(_toy_model(), lay, "full", 2048, 4, default_calibration())
    >>> round(mem["optimizer"], 2), round(mem["weights"], 2)  # 12 B and 2 B per param / 8
    (10.11, 1.69)
    """
    t = calib.train
    n = model.params
    shard = layout.tp * layout.pp
    dp = layout.dp
    z = layout.zero_stage
    if method == "full":
        base_b, train_n = 2.0, n
    else:
        base_b = 2.0 if method == "lora" else t.qlora_bytes_per_param.value
        train_n = n * t.lora_param_fraction.value
    weights = n * base_b / shard / (dp if z >= 3 else 1)
    if method != "full":
        weights += train_n * 2.0 / shard
    grads = train_n * 2.0 / shard / (dp if z >= 2 else 1)
    optim = train_n * 12.0 / shard / (dp if z >= 1 else 1)
    if layout.ep > 1 and method == "full":
        # expert parallelism keeps 1/ep of the experts per GPU; ZeRO over the whole
        # data-parallel group already shards them dp ways (dp/ep replicas x ep), so it
        # changes only what ZeRO leaves unsharded
        local = n - expert_params(model) * (1 - 1 / layout.ep)
        weights = (n / dp if z >= 3 else local) * base_b / shard
        grads = (n / dp if z >= 2 else local) * 2.0 / shard
        optim = (n / dp if z >= 1 else local) * 12.0 / shard
    if layout.schedule == "dualpipe" and layout.pp > 1:
        # two copies of the stage's parameters (both directions of the pipeline)
        weights, grads = 2 * weights, 2 * grads
    stage_layers = math.ceil(model.layers / layout.pp)
    in_flight = in_flight_micro_batches(layout.schedule, layout.pp, micro_batches, stage_layers)
    tokens = seq_len * layout.micro_batch
    per_layer = stage_activation_bytes(model, stage_layers, tokens, layout.tp, layout.recompute)
    act = in_flight * per_layer
    if layout.recompute:
        act += max_layer_activation_bytes(model, tokens, layout.tp)
    act += 8.0 * seq_len * layout.micro_batch * model.vocab / layout.tp
    return {
        "weights": weights / GB,
        "gradients": grads / GB,
        "optimizer": optim / GB,
        "activations": act / GB,
        "overhead": t.framework_overhead_gb.value,
    }
