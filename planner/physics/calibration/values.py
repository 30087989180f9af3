"""Calibration values: every efficiency factor of the performance model, with its source.

The factors live in ``catalogs/calibration.yaml``; :func:`load_calibration` validates that file
(unknown keys are errors) and :func:`default_calibration` loads the shipped one once.

The physics (``train``, ``serve``) reads its factors from here. This module imports no other
physics module, so the physics never depends on the code that fits and checks these values
(:mod:`planner.physics.calibration.serving`).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from planner.base.yamlio import load_yaml, validate
from planner.inputs.catalog import CATALOG_DIR, GpuSpec, Sourced, Strict
from planner.inputs.model_arch import DraftAcceptance
from planner.physics.realized import STACKS, StackProfile


class FamilyFactor(Sourced):
    """A factor that depends on the GPU family; ``match`` lists id/name fragments of the family."""

    family: str
    match: tuple[str, ...] = Field(min_length=1)


class TrainCalibration(Strict):
    mfu_family: tuple[FamilyFactor, ...] = Field(min_length=1)
    mfu_default: Sourced
    mfu_size_half_hidden: Sourced
    gemm_half_tokens: Sourced
    recompute_factor: Sourced
    # FP8 training (absent: physics.training.compute.FP8_DEFAULTS): the share of a BF16 step's
    # compute time in linear GEMMs, the FP8 GEMMs' asymptotic fraction of the FP8 peak, and the
    # cast/scale overhead as a share of the FP8 GEMM time.
    fp8_gemm_time_share: Sourced | None = None
    fp8_gemm_eff: Sourced | None = None
    fp8_scaling_overhead: Sourced | None = None
    qlora_speed_factor: Sourced
    lora_param_fraction: Sourced
    qlora_bytes_per_param: Sourced
    global_batch_tokens: Sourced
    finetune_global_batch_tokens: Sourced
    dp_overlap: Sourced
    framework_overhead_gb: Sourced
    usable_memory_fraction: Sourced
    # Mixture-of-experts training (absent: 1 and 0, the dense physics): the MFU of a MoE run
    # relative to a dense one of its active size (all-to-all, expert imbalance, permutation)
    # and the extra log-scatter of that factor (widens the P10-P90 band of MoE jobs).
    moe_mfu_factor: Sourced | None = None
    moe_log_sd: Sourced | None = None


class ServeCalibration(Strict):
    prefill_compute_eff: Sourced
    decode_compute_eff: Sourced
    weight_bw_eff: Sourced
    kv_bw_eff: Sourced
    int4_bw_factor: Sourced
    fp8_compute_factor: Sourced
    int4_bytes_per_param: Sourced
    fp4_bytes_per_param: Sourced | None = None  # absent: serve.FP4_BYTES_PER_PARAM (NVFP4)
    # Mixture-of-experts decode (absent: 1 and 0, the dense physics): the share of weight_bw
    # that streaming routed experts achieves (small grouped GEMMs), and a fixed time per MoE
    # layer per forward (routing, top-k, token permutation, the grouped-GEMM launches).
    moe_expert_bw_eff: Sourced | None = None
    moe_layer_overhead_us: Sourced | None = None
    # Expert parallelism inside a replica (attention tensor-parallel, whole experts per GPU):
    # the share of weight_bw streaming whole experts achieves (absent: moe_expert_bw_eff).
    moe_ep_bw_eff: Sourced | None = None
    layer_overhead_us: Sourced
    overhead_gb: Sourced
    activation_gb_per_1k_tokens: Sourced
    usable_memory_fraction: Sourced
    # Serving at scale (planner/physics/serving; absent: the defaults of
    # planner.physics.serving.constants.DEFAULTS): the MoE all-to-all, data-parallel attention,
    # the prefill->decode KV transfer, prefill chunking and multi-token prediction.
    a2a_eff: Sourced | None = None
    a2a_latency_us: Sourced | None = None
    a2a_scaleout_latency_us: Sourced | None = None
    a2a_overlap: Sourced | None = None
    dp_imbalance: Sourced | None = None
    kv_transfer_eff: Sourced | None = None
    kv_transfer_ms: Sourced | None = None
    prefill_chunk_tokens: Sourced | None = None
    mtp_acceptance: Sourced | None = None
    mtp_acceptance_decay: Sourced | None = None
    mtp_max_draft: Sourced | None = None
    mtp_draft_layers: Sourced | None = None
    wide_compute_eff: Sourced | None = None
    wide_prefill_eff: Sourced | None = None
    moe_prefill_eff: Sourced | None = None
    # each GPU generation's serving software efficiency where one vendor figure does not fit
    # (AMD CDNA 3 vs CDNA 4); absent: the vendor's (catalogs/vendors.yaml)
    # (a mapping gpu id -> figure in the file; kept as sorted pairs so the calibration hashes)
    serve_efficiency_by_gpu: tuple[tuple[str, Sourced], ...] | None = None

    @field_validator("serve_efficiency_by_gpu", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        return tuple(sorted(v.items())) if isinstance(v, dict) else v


class LinkCalibration(Strict):
    pcie_x16_gbs_gen3: Sourced
    nvlink_eff: Sourced
    pcie_eff: Sourced
    no_p2p_factor: Sourced
    nvlink_latency_us: Sourced
    pcie_latency_us: Sourced
    no_p2p_latency_us: Sourced
    inter_node_gbs_sxm: Sourced
    inter_node_gbs_pcie: Sourced
    inter_node_gbs_consumer: Sourced
    inter_node_latency_us: Sourced
    ethernet_gbps_per_gpu: Sourced
    pcie_node_gpus: Sourced


class _Bounded(Sourced):
    """A sourced figure whose physical range is checked (set ``_lo`` / ``_hi`` per subclass)."""

    _lo: float = 0.0
    _hi: float = math.inf

    @model_validator(mode="after")
    def _in_bounds(self) -> _Bounded:
        if not self._lo <= self.value <= self._hi:
            raise ValueError(f"value {self.value:g} is outside {self._lo:g} to {self._hi:g}")
        return self


class _Share(_Bounded):
    _lo, _hi = 0.05, 1.0  # a stack below 5 % of its benchmark would never ship a model


class _Rate(_Bounded):
    _lo, _hi = 0.0, 1e-2  # one failure per 100 GPU-hours is far beyond any published cluster


class _Seconds(_Bounded):
    _lo, _hi = 0.0, 3600.0


class _Hours(_Bounded):
    _lo, _hi = 0.0, 48.0


class _LogSd(_Bounded):
    _lo, _hi = 0.0, 2.0


class StackCalibration(Strict):
    """One stack profile (see :class:`planner.physics.realized.StackProfile`)."""

    production: _Share
    failure_rate_per_gpu_hour: _Rate
    checkpoint_s: _Seconds
    recovery_h: _Hours

    def profile(self) -> StackProfile:
        return StackProfile(
            self.production.value,
            self.failure_rate_per_gpu_hour.value,
            self.checkpoint_s.value,
            self.recovery_h.value,
        )


class StackCalibrations(Strict):
    """The three stack profiles (fields, not a dict: calibrations are hashable cache keys)."""

    model_config = ConfigDict(populate_by_name=True)

    mature: StackCalibration
    typical: StackCalibration
    first_run: StackCalibration = Field(alias="first-run")

    def profile(self, stack: str) -> StackProfile:
        """The profile named ``stack`` (one of ``planner.physics.realized.STACKS``)."""
        if stack not in STACKS:
            raise ValueError(f"stack must be one of {STACKS}, got {stack!r}")
        return getattr(self, stack.replace("-", "_")).profile()


class ProviderRate(_Rate):
    """A provider's spot preemption rate per instance-hour."""

    provider: str


class SpotCalibration(Strict):
    """Spot preemptions as failures with a known rate (:func:`realized.spot_overhead`)."""

    preemptions_per_instance_hour: _Rate  # where a provider publishes nothing
    providers: tuple[ProviderRate, ...] = ()
    reacquire_h: _Hours  # waiting for spot capacity to come back after a preemption

    def rate(self, provider: str) -> float:
        """The provider's published rate, else the default."""
        for p in self.providers:
            if p.provider == provider:
                return p.value
        return self.preemptions_per_instance_hour.value


class RealizedCalibration(Strict):
    """Benchmark steady state -> the hours real runs consume (:mod:`planner.physics.realized`)."""

    log_sd: _LogSd
    stacks: StackCalibrations
    spot: SpotCalibration


class PrefixReuse(Strict):
    """How a service's prompts reuse cached KV (set per workload on a copy of the calibration,
    as ``moe_layout``, by :func:`planner.physics.serving.prefix.with_prefix`): the share of
    each prompt already cached, the idle sessions whose KV is held per active sequence, and
    an optional offload tier (host memory or local SSD) that holds the idle sessions' KV."""

    cached_share: float = Field(ge=0.0, lt=1.0)
    idle_per_active: float = Field(0.0, ge=0.0, le=10_000.0)
    offload_gb_per_gpu: float = Field(0.0, ge=0.0, le=1e6)
    offload_gbs_per_gpu: float = Field(0.0, ge=0.0, le=1e4)
    source: str = ""


class Calibration(Strict):
    train: TrainCalibration
    realized: RealizedCalibration
    serve: ServeCalibration
    links: LinkCalibration
    # The layout a MoE replica is evaluated in: "tp" (experts sliced across the GPUs) or "ep"
    # (whole experts per GPU). Not a calibrated figure: serve.with_layout sets it on a copy so
    # every step function sees the layout without one more argument.
    moe_layout: str = Field("tp", pattern="^(tp|ep)$")
    # A workload's measured speculative acceptance (its speculative: field or estimate serve
    # --acceptance), set on a copy by planner.physics.serving.with_draft_acceptance, as
    # moe_layout; absent: the model's catalog figure, else serve.mtp_acceptance's curve.
    draft_acceptance: DraftAcceptance | None = None
    # a workload's prefix-cache reuse (sessions or a hit rate); absent: every prompt is fresh
    prefix: PrefixReuse | None = None


CALIBRATION_PATH = CATALOG_DIR / "calibration.yaml"


def load_calibration(path: str | Path = CALIBRATION_PATH) -> Calibration:
    """Load and validate a calibration file (InputError with file:line on any problem)."""
    return validate(Calibration, load_yaml(path), "calibration file")


@functools.cache
def default_calibration() -> Calibration:
    """The shipped ``catalogs/calibration.yaml``, loaded once."""
    return load_calibration(CALIBRATION_PATH)


def _norm(text: str) -> str:
    """Lower-case alphanumerics only: ``'RTX 4090'`` -> ``'rtx4090'``.

    >>> _norm("NVIDIA GeForce RTX-4090")
    'nvidiageforcertx4090'
    """
    return re.sub(r"[^a-z0-9]", "", text.lower())


def gpu_family(gpu: GpuSpec, calib: Calibration) -> FamilyFactor | None:
    """The calibration family whose ``match`` fragment occurs in the GPU id or name (None: none).

    >>> from planner.physics.train import _toy_gpu
    >>> gpu_family(_toy_gpu(), default_calibration()).family
    'hopper'
    """
    return _family(gpu.id, gpu.name, calib.train.mfu_family)


@functools.lru_cache(maxsize=1024)
def _family(gid: str, name: str, families: tuple[FamilyFactor, ...]) -> FamilyFactor | None:
    key = _norm(gid) + " " + _norm(name)
    for fam in families:
        if any(_norm(m) in key for m in fam.match):
            return fam
    return None
