"""The constants of serving at scale (all-to-all, data-parallel attention, KV transfer, MTP,
prefill chunking), read from ``catalogs/calibration.yaml`` (``serve``), with the fitted
defaults below when a calibration file does not state them (a user's own file written before
these existed keeps working).
"""

from __future__ import annotations

from planner.physics.calibration.values import Calibration

# name -> default (the value fitted in catalogs/calibration.yaml; see catalogs/NOTES.md)
DEFAULTS: dict[str, float] = {
    # share of the per-direction scale-up bandwidth an all-to-all (DeepEP / NCCL) achieves
    "a2a_eff": 0.8,
    # fixed time of one dispatch or combine (kernel, synchronisation), microseconds
    "a2a_latency_us": 150.0,
    # extra fixed time when the all-to-all crosses the scale-out fabric (RDMA), microseconds
    "a2a_scaleout_latency_us": 100.0,
    # share of the all-to-all hidden behind compute (two-batch overlap), decode and prefill
    "a2a_overlap": 0.7,
    # spread of the busiest attention rank: n/G + this x sqrt(n/G x 2 ln G) sequences
    "dp_imbalance": 0.5,
    # share of the fabric bandwidth the prefill->decode KV transfer achieves (NIXL, Mooncake)
    "kv_transfer_eff": 0.5,
    # fixed time of one request's KV transfer, milliseconds
    "kv_transfer_ms": 2.0,
    # prompt tokens a prefill iteration takes per attention rank (chunked prefill)
    "prefill_chunk_tokens": 8192.0,
    # probability the MTP head's draft token i is accepted given the previous ones were
    "mtp_acceptance": 0.95,
    # each further draft token's acceptance is this times the previous one's
    "mtp_acceptance_decay": 0.7,
    # most draft tokens an engine runs per step (SGLang/TRT-LLM: 1-3)
    "mtp_max_draft": 3.0,
    # decode and prefill compute efficiency of a worker beyond today's replicas (wide EP, DP
    # attention, multi-node), relative to decode_compute_eff / prefill_compute_eff
    "wide_compute_eff": 0.55,
    "wide_prefill_eff": 1.0,
    # a mixture of experts' prefill (every replica): grouped expert GEMMs below a dense GEMM
    "moe_prefill_eff": 0.5,
    # cost of one draft step relative to one transformer layer of the main model
    "mtp_draft_layers": 2.0,
}


def const(calib: Calibration, name: str) -> float:
    """The calibrated value of ``name`` (``calib.serve.<name>``), else its default.

    >>> from planner.physics.calibration.values import default_calibration
    >>> 0 < const(default_calibration(), "a2a_eff") <= 1
    True
    """
    v = getattr(calib.serve, name, None)
    if v is None:
        return DEFAULTS[name]
    return float(v.value)
