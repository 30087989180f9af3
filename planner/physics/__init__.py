"""Performance physics: pure functions from (model, GPU, workload) to time, memory and latency.

Core API used by the optimizer::

    estimate_train(model, gpu, gpus, tokens, method="full", calib=None, seq_len=4096)
    estimate_serve(model, gpu, gpus, precision, prompt, output, batch=None, calib=None)
    replica_capacity(model, gpu, gpus, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib=None)

Every efficiency factor comes from ``catalogs/calibration.yaml`` (:func:`default_calibration`).
"""

from planner.physics.calibration import Calibration, default_calibration, load_calibration
from planner.physics.serve import (
    PRECISIONS,
    ReplicaCapacity,
    ServeEstimate,
    estimate_serve,
    replica_capacity,
)
from planner.physics.train import METHODS, TrainEstimate, TrainLayout, estimate_train

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
