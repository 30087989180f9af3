"""Training physics: memory per GPU, FLOPs, multi-GPU efficiency and the fastest layout.

The code lives in :mod:`planner.physics.training` (one module per concern); this module keeps
the names the rest of the planner imports.

Conventions
-----------
* Model FLOPs per trained token (full training) = ``6 N + 12 L h s`` (PaLM appendix B and
  llm-foundry's MFU); LoRA/QLoRA ``4 N + 12 L h s``; a MoE counts its active parameters.
* MFU = model FLOPs per second / BF16 dense peak, FP8 runs included. Full activation
  recomputation does extra (hardware) FLOPs, so it lowers MFU by ``recompute_factor``.
* FP8: the linear GEMMs at a calibrated fraction of the FP8 peak plus their casts, the rest of
  the step in BF16 (:func:`planner.physics.training.compute.fp8_time_factor`).
* Pipelines: 1F1B, interleaved, zero-bubble and DualPipe schedules, each with its bubble and
  activation memory; DualPipe hides the expert all-to-alls under compute.
* Memory in GB (1e9 bytes) per GPU; bandwidths in GB/s; times in seconds.
"""

from __future__ import annotations

from planner.physics.training.builders import (
    H800_NVLINK_GBS,
    _toy_gpu,
    _toy_model,
    derive_model,
    h800_from,
    llama_like,
    make_gpu,
)
from planner.physics.training.compute import (
    attention_flops_per_token,
    base_mfu,
    flops_per_token,
    fp8_time_factor,
    gemm_factor,
    linear_flops_per_token,
    single_gpu_mfu,
    size_factor,
)
from planner.physics.training.estimate import (
    METHODS,
    TrainEstimate,
    _infeasible,
    _out_of_memory,
    estimate_train,
)
from planner.physics.training.layout import (
    LayoutEval,
    TrainLayout,
    _best_layout,
    _ep_sizes,
    _layouts,
    _micro_batches,
    evaluate_layout,
    has_layout,
)
from planner.physics.training.links import (
    GB,
    SCHEDULES,
    all_to_all_s,
    allreduce_s,
    bubble_slots,
    inter_node_link,
    intra_node_link,
    node_gpus,
    pipeline_efficiency,
    with_inter_node_gbs,
)
from planner.physics.training.memory import (
    activation_bytes_per_layer,
    moe_mlp_activation_bytes,
    stage_activation_bytes,
    train_memory_gb,
)

__all__ = [
    "GB", "H800_NVLINK_GBS", "METHODS", "SCHEDULES", "LayoutEval", "TrainEstimate", "TrainLayout",
    "_best_layout", "_ep_sizes", "_infeasible", "_layouts", "_micro_batches", "_out_of_memory",
    "_toy_gpu", "_toy_model", "activation_bytes_per_layer", "all_to_all_s", "allreduce_s",
    "attention_flops_per_token", "base_mfu", "bubble_slots", "derive_model", "estimate_train",
    "evaluate_layout", "flops_per_token", "fp8_time_factor", "gemm_factor", "h800_from",
    "has_layout", "inter_node_link", "intra_node_link", "linear_flops_per_token", "llama_like",
    "make_gpu", "moe_mlp_activation_bytes", "node_gpus", "pipeline_efficiency", "single_gpu_mfu",
    "size_factor", "stage_activation_bytes", "train_memory_gb", "with_inter_node_gbs",
]  # fmt: skip
