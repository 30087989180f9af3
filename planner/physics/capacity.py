"""Capacity from measurements where a profile applies, else the physics: serving replicas per
request bucket, training throughput per GPU count.

Shared by :mod:`planner.optimize.candidates` (what the model may use) and :mod:`planner.verify` (what a
plan claims is checked against the same numbers). Pure functions of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.inputs.problem import Inputs, RequestBucket, ServeWorkload, TrainJob
from planner.inputs.profiles import Measured, serve_rate, train_rate
from planner.physics.calibration_values import Calibration
from planner.physics.serve import ReplicaCapacity, replica_capacity
from planner.physics.train import TrainEstimate


@dataclass(frozen=True)
class BucketCapacity:
    """One replica configuration's capacity for one request bucket."""

    bucket: str
    capacity: ReplicaCapacity  # rate_rps 0 and feasible False: cannot serve the bucket
    measured: Measured | None = None  # where the rate came from when it was measured

    @property
    def rate(self) -> float:
        return self.capacity.rate_rps if self.capacity.feasible else 0.0


def _measured_capacity(w: ServeWorkload, tp: int, b: RequestBucket, m: Measured) -> ReplicaCapacity:
    """A measured rate as a ReplicaCapacity: latencies are known only to be within the SLO."""
    return ReplicaCapacity(
        feasible=True,
        reason=None,
        gpus=tp,
        precision=w.precision,
        batch=0,
        rate_rps=m.rate,
        p95_ttft_ms=w.slo.p95_ttft_ms,
        p95_tpot_ms=w.slo.p95_tpot_ms,
        tokens_per_s=m.rate * b.shape()[1],
    )


def bucket_capacity(
    inputs: Inputs,
    w: ServeWorkload,
    b: RequestBucket,
    gpu_id: str,
    tp: int,
    calib: Calibration | None = None,
) -> BucketCapacity:
    """Req/s one replica of ``tp`` x ``gpu_id`` sustains for bucket ``b`` within ``w``'s SLO.

    A profile measured for (model, GPU, tp, precision) at a shape inside the bucket's ranges
    wins over the physics; a profile measured but never within the SLO means the replica
    cannot serve the bucket. Otherwise :func:`planner.physics.serve.replica_capacity` at the
    bucket's planned shape (the upper end of its ranges).
    """
    slo = (w.slo.p95_ttft_ms, w.slo.p95_tpot_ms)
    m = serve_rate(
        inputs.profiles, w.model, gpu_id, tp, w.precision, b.prompt_range(), b.output_range(), slo
    )
    if m == "outside_slo":
        why = "measured, but no measured run is within the SLO"
        return BucketCapacity(
            b.name, ReplicaCapacity(False, why, tp, w.precision, 0, 0.0, 0.0, 0.0, 0.0)
        )
    if isinstance(m, Measured):
        return BucketCapacity(b.name, _measured_capacity(w, tp, b, m), m)
    if w.measured_only:
        why = "not measured (measured_only: no modeled capacity)"
        return BucketCapacity(
            b.name, ReplicaCapacity(False, why, tp, w.precision, 0, 0.0, 0.0, 0.0, 0.0)
        )
    prompt, output = b.shape()
    cap = replica_capacity(
        inputs.models[w.model], inputs.gpus[gpu_id], tp, w.precision, prompt, output, *slo, calib
    )
    return BucketCapacity(b.name, cap)


def mix_rate(shares: list[float], rates: list[float]) -> float:
    """Req/s of the bucket mix one replica serves if it takes every bucket it can: the covered
    share over the replica-seconds per request, ``sum_b f_b / sum_b (f_b / mu_b)`` over the
    buckets with ``mu_b > 0`` (0 when it serves none). A heuristic figure (sorting, starts,
    the report's one rate per replica); the model and the verifier use the per-bucket rates.

    >>> mix_rate([0.5, 0.5], [2.0, 1.0]), mix_rate([0.5, 0.5], [2.0, 0.0]), mix_rate([1.0], [0.0])
    (1.3333333333333333, 2.0, 0.0)
    """
    served = [(f, mu) for f, mu in zip(shares, rates, strict=True) if mu > 0]
    if not served:
        return 0.0
    return sum(f for f, _ in served) / sum(f / mu for f, mu in served)


def replica_of_mix(caps: list[BucketCapacity], shares: list[float]) -> ReplicaCapacity:
    """One ReplicaCapacity for a replica type serving a mix: the mix rate, and the worst p95
    latencies over the buckets it serves (each bucket meets the SLO; the report shows the
    slowest). One bucket: its capacity as is.
    """
    if len(caps) == 1:
        return caps[0].capacity
    served = [c for c in caps if c.rate > 0]
    if not served:
        return caps[0].capacity
    worst = max(served, key=lambda c: (c.capacity.p95_tpot_ms, c.capacity.p95_ttft_ms))
    rate = mix_rate(shares, [c.rate for c in caps])
    # tokens/s at the mix rate: output tokens per request averaged over the buckets served
    out = sum(
        f * c.capacity.tokens_per_s / c.rate
        for c, f in zip(caps, shares, strict=True)
        if c.rate > 0
    )
    covered = sum(f for c, f in zip(caps, shares, strict=True) if c.rate > 0)
    return replace(worst.capacity, rate_rps=rate, tokens_per_s=rate * out / covered)


def train_measurement(inputs: Inputs, job: TrainJob, gpu_id: str, gpus: int) -> Measured | None:
    """A profile's tokens/s per GPU for ``job``'s model on ``gpus`` x ``gpu_id`` (bf16)."""
    return train_rate(inputs.profiles, job.model, gpu_id, "bf16", gpus)


def measured_factor(est: TrainEstimate, m: Measured | None) -> float:
    """How much longer than modeled a run takes at the measured throughput: modeled tokens/s
    per GPU over measured (1 without a measurement).

    >>> from types import SimpleNamespace as NS
    >>> measured_factor(NS(fits=True, tokens_per_s_per_gpu=4000.0), NS(rate=3200.0))
    1.25
    """
    if m is None or not est.fits or est.tokens_per_s_per_gpu <= 0:
        return 1.0
    return est.tokens_per_s_per_gpu / m.rate


def scale_train(est: TrainEstimate, factor: float) -> TrainEstimate:
    """``est`` with every hour multiplied by ``factor`` and its throughput and MFU divided by
    it: a measured steady-state throughput replaces the modeled one, the realized-hours model
    (failures, restarts, scatter) stays on top of it."""
    if factor == 1.0 or not est.fits:
        return est
    return replace(
        est,
        wall_hours=est.wall_hours * factor,
        gpu_hours=est.gpu_hours * factor,
        steady_wall_hours=est.steady_wall_hours * factor,
        wall_hours_p10=est.wall_hours_p10 * factor,
        wall_hours_p90=est.wall_hours_p90 * factor,
        gpu_hours_p10=est.gpu_hours_p10 * factor,
        gpu_hours_p90=est.gpu_hours_p90 * factor,
        tokens_per_s_per_gpu=est.tokens_per_s_per_gpu / factor,
        mfu=est.mfu / factor,
    )
