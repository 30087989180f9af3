"""Capacity from measurements where a profile applies, else the physics: serving replicas per
request bucket, training throughput per GPU count.

Shared by :mod:`planner.optimize.candidates` (what the model may use) and :mod:`planner.verify` (what a
plan claims is checked against the same numbers). Pure functions of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from planner.inputs.catalog import GpuSpec
from planner.inputs.problem import Inputs, RequestBucket, ServeWorkload, TrainJob
from planner.inputs.profiles import Measured, serve_rate, train_rate
from planner.physics.calibration.values import Calibration
from planner.physics.serve import TP_SIZES, ReplicaCapacity, replica_capacity
from planner.physics.train import TrainEstimate

if TYPE_CHECKING:
    from planner.physics.serving import Deployment


@dataclass(frozen=True)
class BucketCapacity:
    """One replica configuration's capacity for one request bucket."""

    bucket: str
    capacity: ReplicaCapacity  # rate_rps 0 and feasible False: cannot serve the bucket
    measured: Measured | None = None  # where the rate came from when it was measured

    @property
    def rate(self) -> float:
        return self.capacity.rate_rps if self.capacity.feasible else 0.0


# A workload listing several precisions serves each GPU at the first of these it supports.
PRECISION_RANK = ("fp4", "fp8", "int4", "int8", "bf16", "fp16")


def supports(gpu: GpuSpec, precision: str) -> bool:
    """The GPU has the tensor cores the precision computes on (fp8, fp4); others run anywhere.

    >>> from types import SimpleNamespace as NS
    >>> h100 = NS(fp8_dense_tflops=989.0, fp4_dense_tflops=None)
    >>> supports(h100, "fp8"), supports(h100, "fp4"), supports(h100, "bf16")
    (True, False, True)
    """
    if precision == "fp8":
        return gpu.fp8_dense_tflops is not None
    if precision == "fp4":
        return gpu.fp4_dense_tflops is not None
    return True


def serve_precision(w: ServeWorkload, gpu: GpuSpec) -> str:
    """The precision ``w`` is served at on ``gpu``: its one precision, or of a list the best
    the GPU supports (:data:`PRECISION_RANK`); none supported: the best listed (the physics
    then says why the GPU cannot serve it).

    >>> from types import SimpleNamespace as NS
    >>> w = NS(precisions=lambda: ("fp8", "fp4"))
    >>> h100 = NS(fp8_dense_tflops=989.0, fp4_dense_tflops=None)
    >>> b200 = NS(fp8_dense_tflops=4500.0, fp4_dense_tflops=9000.0)
    >>> serve_precision(w, h100), serve_precision(w, b200)
    ('fp8', 'fp4')
    """
    given = w.precisions()
    if len(given) == 1:
        return given[0]
    ranked = [p for p in PRECISION_RANK if p in given]
    return next((p for p in ranked if supports(gpu, p)), ranked[0])


def _measured_capacity(
    w: ServeWorkload, tp: int, b: RequestBucket, m: Measured, precision: str
) -> ReplicaCapacity:
    """A measured rate as a ReplicaCapacity: latencies are known only to be within the SLO."""
    return ReplicaCapacity(
        feasible=True,
        reason=None,
        gpus=tp,
        precision=precision,
        batch=0,
        rate_rps=m.rate,
        p95_ttft_ms=w.slo.p95_ttft_ms,
        p95_tpot_ms=w.slo.p95_tpot_ms,
        tokens_per_s=m.rate * b.shape()[1],
    )


def workload_calibration(w: ServeWorkload, calib: Calibration | None) -> Calibration | None:
    """``calib`` (None: the default) with what ``w`` itself says of its serving: the measured
    speculative acceptance (``speculative``) and its sessions' prefix reuse (``sessions``);
    unchanged (None stays None) for a workload that says neither. The planner's candidates
    and the verifier both go through here."""
    if w.speculative is None and w.sessions is None:
        return calib
    from planner.physics.calibration.values import default_calibration
    from planner.physics.serving import with_draft_acceptance
    from planner.physics.serving.prefix import prefix_reuse, with_prefix

    calib = calib or default_calibration()
    calib = with_draft_acceptance(calib, w.speculative.measured() if w.speculative else None)
    return with_prefix(calib, prefix_reuse(w))


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
    prec = serve_precision(w, inputs.gpus[gpu_id])
    # a profile measures fresh prompts: it says nothing of sessions' cached prefixes and
    # idle KV, so a sessions workload is sized by the physics
    m = (
        serve_rate(
            inputs.profiles, w.model, gpu_id, tp, prec, b.prompt_range(), b.output_range(), slo
        )
        if w.sessions is None
        else None
    )
    if m == "outside_slo":
        why = "measured, but no measured run is within the SLO"
        return BucketCapacity(b.name, ReplicaCapacity(False, why, tp, prec, 0, 0.0, 0.0, 0.0, 0.0))
    if isinstance(m, Measured):
        return BucketCapacity(b.name, _measured_capacity(w, tp, b, m, prec), m)
    if w.measured_only:
        why = "not measured (measured_only: no modeled capacity)"
        return BucketCapacity(b.name, ReplicaCapacity(False, why, tp, prec, 0, 0.0, 0.0, 0.0, 0.0))
    prompt, output = b.shape()
    cap = replica_capacity(
        inputs.models[w.model],
        inputs.gpus[gpu_id],
        tp,
        prec,
        prompt,
        output,
        *slo,
        workload_calibration(w, calib),
    )
    return BucketCapacity(b.name, cap)


def deployment_bucket_capacity(
    inputs: Inputs,
    w: ServeWorkload,
    b: RequestBucket,
    gpu_id: str,
    dep: Deployment,
    calib: Calibration | None = None,
) -> BucketCapacity:
    """Req/s one deployment ``dep`` of ``gpu_id`` (rack-wide workers, disaggregated prefill
    and decode, MTP) sustains for bucket ``b`` within ``w``'s SLO:
    :func:`planner.physics.serving.deployment_capacity` at the bucket's planned shape. No
    profile measures a deployment: under ``measured_only`` it cannot serve. A workload's
    ``speculative`` acceptance replaces the model's and the calibration's.
    """
    from planner.physics.serving import deployment_capacity

    prec = serve_precision(w, inputs.gpus[gpu_id])
    if w.measured_only:
        why = "not measured (measured_only: no modeled capacity)"
        cap = ReplicaCapacity(False, why, dep.total_gpus, prec, 0, 0.0, 0.0, 0.0, 0.0)
        return BucketCapacity(b.name, cap)
    calib = workload_calibration(w, calib)
    prompt, output = b.shape()
    cap = _deployment_capacity_cached(
        deployment_capacity,
        inputs.models[w.model],
        inputs.gpus[gpu_id],
        dep,
        prec,
        prompt,
        output,
        w.slo.p95_ttft_ms,
        w.slo.p95_tpot_ms,
        calib,
    )
    return BucketCapacity(b.name, cap)


def _deployment_capacity_cached(fn, model, gpu, dep, prec, prompt, output, ttft, tpot, calib):
    """``fn(...)`` once per distinct argument set in this process (the candidates and the
    verifier ask for the same deployments)."""
    try:
        key = (model, gpu, dep, prec, prompt, output, ttft, tpot, calib)
        hash(key)
    except TypeError:
        return fn(model, gpu, dep, prec, prompt, output, ttft, tpot, calib)
    if key not in _DEP_CACHE:
        if len(_DEP_CACHE) > 4096:
            _DEP_CACHE.clear()
        _DEP_CACHE[key] = fn(model, gpu, dep, prec, prompt, output, ttft, tpot, calib)
    return _DEP_CACHE[key]


_DEP_CACHE: dict = {}


# ----------------------------------------------------------------- layouts in a plan


def plain_replica(dep: Deployment) -> bool:
    """A deployment the planner has always had: one aggregated tensor- or expert-parallel
    worker of 1, 2, 4 or 8 GPUs without MTP. Its capacity is :func:`bucket_capacity`'s
    (measured profiles apply; tp or ep, the faster); every other deployment's is
    :func:`deployment_bucket_capacity`'s."""
    d = dep.decode
    return (
        dep.prefill is None
        and not dep.mtp
        and d.count == 1
        and d.mode in ("tp", "ep")
        and d.gpus in TP_SIZES
    )


def layout_dict(dep: Deployment) -> dict:
    """A deployment as a plan row's ``layout``: its label, decode (the one worker kind of an
    aggregated deployment) and prefill workers (count, GPUs, mode; null: aggregated), MTP.

    >>> from types import SimpleNamespace as NS
    >>> w = NS(count=1, gpus=8, mode="ep")
    >>> d = NS(decode=w, prefill=None, mtp=False, label=lambda: "1x8:ep")
    >>> layout_dict(d)
    {'label': '1x8:ep', 'prefill': None, 'decode': {'count': 1, 'gpus': 8, 'mode': 'ep'}, 'mtp': False}
    """

    def worker(x) -> dict | None:
        return None if x is None else {"count": x.count, "gpus": x.gpus, "mode": x.mode}

    return {
        "label": dep.label(),
        "prefill": worker(dep.prefill),
        "decode": worker(dep.decode),
        "mtp": bool(dep.mtp),
    }


def layout_deployment(layout: dict) -> Deployment:
    """A plan row's ``layout`` back as a Deployment (ValueError: not a layout)."""
    from planner.physics.serving import Deployment, Worker

    def worker(x: object) -> Worker:
        if not isinstance(x, dict) or set(x) - {"count", "gpus", "mode"}:
            raise ValueError(f"a worker is {{count, gpus, mode}}, got {x!r}")
        count, gpus, mode = x.get("count", 1), x.get("gpus"), x.get("mode")
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (count, gpus))
        if not ints or not 1 <= count <= 4096 or not 1 <= gpus <= 4096:
            raise ValueError(f"worker count and gpus are whole numbers >= 1, got {x!r}")
        if mode not in ("tp", "ep", "dep"):
            raise ValueError(f"worker mode is tp, ep or dep, got {mode!r}")
        return Worker(gpus=gpus, mode=mode, count=count)

    if not isinstance(layout, dict) or "decode" not in layout:
        raise ValueError(f"a layout has decode, prefill and mtp, got {layout!r}")
    pre = layout.get("prefill")
    mtp = layout.get("mtp", False)
    if not isinstance(mtp, bool):
        raise ValueError(f"layout mtp is true or false, got {mtp!r}")
    return Deployment(
        decode=worker(layout["decode"]), prefill=None if pre is None else worker(pre), mtp=mtp
    )


def replica_deployment(tp: int, mode: str) -> Deployment:
    """A plain replica of ``tp`` GPUs in ``mode`` (tp or ep) as a Deployment."""
    from planner.physics.serving import Deployment, Worker

    return Deployment(decode=Worker(gpus=tp, mode=mode))


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
