"""Performance physics: pure functions from (model, GPU, workload) to time, memory and latency.

Core API used by the optimizer::

    estimate_train(model, gpu, gpus, tokens, method="full", calib=None, seq_len=4096)
    estimate_serve(model, gpu, gpus, precision, prompt, output, batch=None, calib=None)
    replica_capacity(model, gpu, gpus, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib=None)

Every efficiency factor comes from ``catalogs/calibration.yaml`` (:func:`default_calibration`),
fitted to NVIDIA runs; a GPU's vendor software efficiency relative to NVIDIA's comes from
``catalogs/vendors.yaml`` (:mod:`planner.physics.vendor`).
"""

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Calibration": "calibration.values",
    "default_calibration": "calibration.values",
    "load_calibration": "calibration.values",
    "PRECISIONS": "serve",
    "ReplicaCapacity": "serve",
    "ServeEstimate": "serve",
    "estimate_serve": "serve",
    "replica_capacity": "serve",
    "METHODS": "train",
    "TrainEstimate": "train",
    "TrainLayout": "train",
    "estimate_train": "train",
}
__all__ = [
    "METHODS",
    "PRECISIONS",
    "Calibration",
    "ReplicaCapacity",
    "ServeEstimate",
    "TrainEstimate",
    "TrainLayout",
    "default_calibration",
    "estimate_serve",
    "estimate_train",
    "load_calibration",
    "replica_capacity",
]


def __getattr__(name: str) -> Any:
    """Lazy re-exports (PEP 562), so ``python -m planner.physics.calibration.serving`` runs cleanly."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"planner.physics.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'planner.physics' has no attribute {name!r}")


if TYPE_CHECKING:  # pragma: no cover
    from planner.physics.calibration.values import (
        Calibration,
        default_calibration,
        load_calibration,
    )
    from planner.physics.serve import (
        PRECISIONS,
        ReplicaCapacity,
        ServeEstimate,
        estimate_serve,
        replica_capacity,
    )
    from planner.physics.train import METHODS, TrainEstimate, TrainLayout, estimate_train
