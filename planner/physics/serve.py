"""Serving physics: memory, prefill and decode step times, continuous batching and p95 latency
of today's replica (1-8 GPUs of one server, tp or ep).

The code lives in :mod:`planner.physics.serving.replica` (memory, step times, the estimate) and
:mod:`planner.physics.serving.replica_capacity` (loaded latency, the capacity within an SLO);
workers beyond one server, data-parallel attention, disaggregated deployments and MTP in
:mod:`planner.physics.serving`. Every name this module had is re-exported here, as are the
queueing tails of :mod:`planner.physics.serve_queueing`.
"""

from __future__ import annotations

from planner.physics.serve_queueing import (
    LoadedLatency as LoadedLatency,
)
from planner.physics.serve_queueing import (
    _arrival_iterations as _arrival_iterations,
)
from planner.physics.serve_queueing import (
    _p95_residual_s as _p95_residual_s,
)
from planner.physics.serve_queueing import (
    _p95_tpot as _p95_tpot,
)
from planner.physics.serve_queueing import (
    _residual_tail as _residual_tail,
)
from planner.physics.serve_queueing import (
    _slot_wait_s as _slot_wait_s,
)
from planner.physics.serve_queueing import (
    _steady_state as _steady_state,
)
from planner.physics.serving.replica import (
    FP4_BYTES_PER_PARAM as FP4_BYTES_PER_PARAM,
)
from planner.physics.serving.replica import (
    GIB as GIB,
)
from planner.physics.serving.replica import (
    PRECISIONS as PRECISIONS,
)
from planner.physics.serving.replica import (
    TP_SIZES as TP_SIZES,
)
from planner.physics.serving.replica import (
    ReplicaCapacity as ReplicaCapacity,
)
from planner.physics.serving.replica import (
    ServeEstimate as ServeEstimate,
)
from planner.physics.serving.replica import (
    _cannot_serve as _cannot_serve,
)
from planner.physics.serving.replica import (
    _check as _check,
)
from planner.physics.serving.replica import (
    _decode_coeffs as _decode_coeffs,
)
from planner.physics.serving.replica import (
    _layout as _layout,
)
from planner.physics.serving.replica import (
    decode_step_s as decode_step_s,
)
from planner.physics.serving.replica import (
    ep_possible as ep_possible,
)
from planner.physics.serving.replica import (
    erlang_c as erlang_c,
)
from planner.physics.serving.replica import (
    estimate_serve as estimate_serve,
)
from planner.physics.serving.replica import (
    kv_bytes_per_token as kv_bytes_per_token,
)
from planner.physics.serving.replica import (
    layer_overhead_s as layer_overhead_s,
)
from planner.physics.serving.replica import (
    max_batch as max_batch,
)
from planner.physics.serving.replica import (
    memory_cap_gb as memory_cap_gb,
)
from planner.physics.serving.replica import (
    moe_factors as moe_factors,
)
from planner.physics.serving.replica import (
    peak_flops as peak_flops,
)
from planner.physics.serving.replica import (
    poisson_quantile as poisson_quantile,
)
from planner.physics.serving.replica import (
    prefill_compute_s as prefill_compute_s,
)
from planner.physics.serving.replica import (
    prefill_iter_s as prefill_iter_s,
)
from planner.physics.serving.replica import (
    serve_memory_gb as serve_memory_gb,
)
from planner.physics.serving.replica import (
    tp_comm_s as tp_comm_s,
)
from planner.physics.serving.replica import (
    weight_bw as weight_bw,
)
from planner.physics.serving.replica import (
    weight_bytes_per_param as weight_bytes_per_param,
)
from planner.physics.serving.replica import (
    weight_read_s as weight_read_s,
)
from planner.physics.serving.replica import (
    with_layout as with_layout,
)
from planner.physics.serving.replica_capacity import (
    _UNSTABLE as _UNSTABLE,
)
from planner.physics.serving.replica_capacity import (
    _best_rate as _best_rate,
)
from planner.physics.serving.replica_capacity import (
    _capacity as _capacity,
)
from planner.physics.serving.replica_capacity import (
    _decode_step_fn as _decode_step_fn,
)
from planner.physics.serving.replica_capacity import (
    _loaded as _loaded,
)
from planner.physics.serving.replica_capacity import (
    _SloQuery as _SloQuery,
)
from planner.physics.serving.replica_capacity import (
    _smallest_cap as _smallest_cap,
)
from planner.physics.serving.replica_capacity import (
    _unreachable_reason as _unreachable_reason,
)
from planner.physics.serving.replica_capacity import (
    loaded_latency as loaded_latency,
)
from planner.physics.serving.replica_capacity import (
    replica_capacity as replica_capacity,
)
