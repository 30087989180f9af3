"""Serving at the scale of today: workers of G GPUs in tp, ep or dep mode up to the scale-up
domain (and across servers), aggregated or disaggregated prefill/decode deployments, multi-token
prediction.

Public API (what the plans and the frontier build on)::

    Worker(gpus, mode, count=1)              # mode: tp | ep | dep
    Deployment(decode, prefill=None, mtp=False)
    estimate_deployment(model, gpu, deployment, precision, prompt, output, batch, calib=None)
    deployment_capacity(model, gpu, deployment, precision, prompt, output, slo_ttft_ms,
                        slo_tpot_ms, calib=None)
    candidate_deployments(model, gpu, precision, prompt, output, *, disaggregated=None, mtp=None)

``batch`` is the concurrent requests of the whole deployment. The results are the
:class:`~planner.physics.serve.ServeEstimate` and :class:`~planner.physics.serve.ReplicaCapacity`
of one replica, with ``gpus`` = the deployment's total and ``layout`` = its label.
"""

from __future__ import annotations

import functools

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.serving.aggregated import aggregated_capacity, estimate_aggregated
from planner.physics.serving.candidates import MAX_CANDIDATES, candidate_deployments
from planner.physics.serving.deployment import MODES, Deployment, Worker, parse_worker
from planner.physics.serving.disaggregated import (
    disaggregated_capacity,
    estimate_disaggregated,
    kv_transfer_s,
)
from planner.physics.serving.replica import ReplicaCapacity, ServeEstimate
from planner.physics.serving.worker import (
    WorkerPhysics,
    acceptance_assumed,
    accepted_tokens,
    allowed_gpus,
    draft_acceptance,
    gpus_error,
    scaleup_domain,
    with_draft_acceptance,
)


def estimate_deployment(
    model: ModelArch,
    gpu: GpuSpec,
    deployment: Deployment,
    precision: str,
    prompt: int,
    output: int,
    batch: int,
    calib: Calibration | None = None,
) -> ServeEstimate:
    """Throughput (output tokens/s of the whole deployment), TTFT, TPOT and memory per GPU of
    ``deployment`` holding ``batch`` concurrent requests in all.

    >>> from planner.physics.train import _toy_gpu, _toy_model
    >>> e = estimate_deployment(_toy_model(), _toy_gpu(), Deployment(Worker(1, "tp")),
    ...                         "fp16", 512, 256, 32)
    >>> e.fits, e.gpus, e.layout
    (True, 1, '1x1:tp')
    """
    calib = calib or default_calibration()
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if deployment.disaggregated:
        return estimate_disaggregated(model, gpu, deployment, precision, prompt, output, batch,
                                      calib)  # fmt: skip
    return estimate_aggregated(model, gpu, deployment, precision, prompt, output, batch, calib)


def deployment_capacity(
    model: ModelArch,
    gpu: GpuSpec,
    deployment: Deployment,
    precision: str,
    prompt: int,
    output: int,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    calib: Calibration | None = None,
) -> ReplicaCapacity:
    """Highest Poisson request rate of the whole deployment with p95 TTFT (prefill queueing and
    KV transfer included) and p95 TPOT within the SLO; ``feasible=False`` with the reason when
    none is. ``gpus`` is the deployment's total, ``layout`` its label, ``batch`` its concurrent
    requests at that rate."""
    calib = calib or default_calibration()
    return _capacity(model, gpu, deployment, precision, prompt, output, float(slo_ttft_ms),
                     float(slo_tpot_ms), calib)  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _capacity(model, gpu, deployment, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib):
    """:func:`deployment_capacity`, cached (a plan asks for the same deployment many times)."""
    args = (model, gpu, deployment, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib)
    if deployment.disaggregated:
        return disaggregated_capacity(*args)
    return aggregated_capacity(*args)


__all__ = [
    "MAX_CANDIDATES",
    "MODES",
    "Deployment",
    "ReplicaCapacity",
    "ServeEstimate",
    "Worker",
    "WorkerPhysics",
    "acceptance_assumed",
    "accepted_tokens",
    "draft_acceptance",
    "with_draft_acceptance",
    "allowed_gpus",
    "candidate_deployments",
    "deployment_capacity",
    "estimate_deployment",
    "gpus_error",
    "kv_transfer_s",
    "parse_worker",
    "scaleup_domain",
]
