"""The layout search skips timing layouts that cannot beat the best found
(:func:`planner.physics.training.layout.throughput_ceiling`): it must return exactly what the
exhaustive search returns, and the ceiling must hold for every layout it is used on."""

from __future__ import annotations

import random

from planner.inputs.catalog import load_gpus, load_models
from planner.physics.calibration.values import default_calibration
from planner.physics.training.layout import (
    TrainLayout,
    _best_layout,
    _job_constants,
    _layouts,
    evaluate_layout,
    throughput_ceiling,
)

CAL = default_calibration()
GPUS = load_gpus()
MODELS = load_models()


def _sample(n: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        model = MODELS[rng.choice(sorted(MODELS))]
        gpu = GPUS[rng.choice(sorted(GPUS))]
        precision = "fp8" if gpu.fp8_dense_tflops and rng.random() < 0.5 else "bf16"
        out.append(
            (
                model, gpu, rng.choice([1, 8, 16, 64, 256]), rng.choice(["full", "lora", "qlora"]),
                rng.choice([2048, 4096, 8192]), rng.choice([2**21, 4e6, 16e6]), precision,
                rng.choice([None, None, 2]),
            )
        )  # fmt: skip
    return out


def test_pruned_search_returns_what_the_exhaustive_search_returns():
    for model, gpu, k, method, seq, gbs, precision, max_dp in _sample(60, seed=51):
        _best_layout.cache_clear()
        pruned = _best_layout(model, gpu, k, method, seq, gbs, precision, CAL, max_dp, True)
        _best_layout.cache_clear()
        full = _best_layout(model, gpu, k, method, seq, gbs, precision, CAL, max_dp, False)
        assert pruned == full, (gpu.id, k, method, seq, precision, max_dp)
    _best_layout.cache_clear()


def test_no_layout_is_faster_than_its_ceiling():
    for model, gpu, k, method, seq, gbs, precision, _ in _sample(40, seed=7):
        job = _job_constants(model, gpu, method, seq, precision, CAL)
        for tp, pp, dp in _layouts(model, gpu, k, CAL):
            for mbs, recompute in ((1, True), (4, False)):
                lay = TrainLayout(tp, pp, dp, 3 if dp > 1 else 0, recompute, mbs)
                ev = evaluate_layout(model, gpu, k, lay, method, seq, gbs, precision, CAL, job)
                assert ev.tokens_per_s_per_gpu <= throughput_ceiling(job, mbs, recompute) * (
                    1 + 1e-9
                )
