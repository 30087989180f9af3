"""The Mélange head-to-head (benchmarks/melange.py): the generator, the ILP against brute force,
and the planner's cost against the ILP's on small seeded instances."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest

from benchmarks.melange import (
    EDGES,
    generate_config,
    melange_ilp,
    off_menu,
    parse_size,
    planner_solve,
    slices,
)

SMALL = ["2gpu-2x2-s1", "3gpu-3x3-s2", "4gpu-4x4-s1"]


def brute_force(config: dict) -> float:
    """Cheapest $/h over every slice-to-GPU-type assignment and every GPU count vector (counts
    up to what the assignment could need); the reference for :func:`melange_ilp`."""
    gpus = list(config["gpu_info"])
    cost = {g: config["gpu_info"][g]["cost"] for g in gpus}
    items = slices(config)
    best = math.inf
    for pick in itertools.product(gpus, repeat=len(items)):
        load = dict.fromkeys(gpus, 0.0)
        for g, (i, j, rps) in zip(pick, items, strict=True):
            tput = config["gpu_info"][g]["tputs"][i][j]
            load[g] = math.inf if tput == 0 else load[g] + rps / tput
        if math.inf in load.values():
            continue
        top = [math.ceil(load[g]) + 1 for g in gpus]
        for counts in itertools.product(*(range(t + 1) for t in top)):
            if all(n >= load[g] - 1e-9 for g, n in zip(gpus, counts, strict=True)):
                best = min(best, sum(cost[g] * n for g, n in zip(gpus, counts, strict=True)))
    return best


def tiny(dist: list[list[float]], rate: float, a: list, b: list, slice_factor: int = 1) -> dict:
    """A hand-made config: two GPU types ``a`` (cheap) and ``b`` (fast), a 1 x 2 grid."""
    return {
        "gpu_info": {
            "a10g": {"cost": 1.01, "tputs": [a]},
            "a100-sxm-80gb": {"cost": 3.67, "tputs": [b]},
        },
        "workload_distribution": dist,
        "total_request_rate": rate,
        "slice_factor": slice_factor,
    }


@pytest.mark.parametrize(
    "config",
    [
        # short bucket cheap on a10g, long one only on the a100: 3 a10g + 1 a100 (or 2 a100)
        tiny([[0.5, 0.5]], 10.0, [2.0, 0.0], [20.0, 6.0]),
        # everything fits one a100 (7.33 a10g would cost more)
        tiny([[0.7, 0.3]], 10.0, [2.5, 1.1], [30.0, 11.0]),
        # split: 2 slices each side, slice factor 2
        tiny([[0.4, 0.6]], 7.3, [1.6, 0.9], [14.0, 4.4], slice_factor=2),
    ],
)
def test_ilp_matches_brute_force_on_tiny_instances(config):
    got = melange_ilp(config, time_limit=30)
    assert got.status == "optimal"
    assert got.usd_per_h == pytest.approx(brute_force(config), rel=1e-9)


def test_ilp_matches_brute_force_on_generated_instances():
    for seed in range(4):
        config = generate_config(parse_size("2gpu-2x2-s1"), seed)
        got = melange_ilp(config, time_limit=30)
        assert got.status == "optimal"
        assert got.usd_per_h == pytest.approx(brute_force(config), rel=1e-9), seed


def test_ilp_never_uses_a_gpu_on_a_bucket_it_cannot_serve():
    # only the a100 serves the long bucket; all its load must land there
    config = tiny([[0.0, 1.0]], 12.0, [5.0, 0.0], [20.0, 6.0])
    got = melange_ilp(config, time_limit=30)
    assert got.counts == {"a100-sxm-80gb": 2}


def test_generator_is_seeded_and_in_melange_format():
    size = parse_size("6gpu-5x7-s4")
    a, b = generate_config(size, 1), generate_config(size, 1)
    assert a == b
    assert generate_config(size, 2) != a
    assert len(a["gpu_info"]) == 6
    for info in a["gpu_info"].values():
        assert 0.5 <= info["cost"] <= 10
        assert len(info["tputs"]) == 5 and all(len(r) == 7 for r in info["tputs"])
        assert all(t >= 0 for r in info["tputs"] for t in r)
    dist = a["workload_distribution"]
    assert sum(map(sum, dist)) == pytest.approx(1.0, abs=1e-12)
    assert 1 <= a["total_request_rate"] <= 50 and a["slice_factor"] == 4
    # Mélange's runner (a dataclass of these fields) takes no other key
    assert set(a) == {"gpu_info", "workload_distribution", "total_request_rate", "slice_factor"}
    assert EDGES[:6] == (25, 100, 250, 500, 1000, 2000)  # Mélange's profiling sizes


def test_throughput_falls_with_bucket_size_and_some_gpus_cannot_serve_the_largest():
    config = generate_config(parse_size("12gpu-10x10-s8"), 0)
    zeros = 0
    for info in config["gpu_info"].values():
        t = info["tputs"]
        assert t[0][0] > t[-1][-1]
        zeros += t[-1][-1] == 0
    assert 0 < zeros < len(config["gpu_info"])  # someone serves every bucket
    # every bucket with load has a GPU type that serves it
    for i, j, _ in slices(config):
        assert any(info["tputs"][i][j] > 0 for info in config["gpu_info"].values())


@pytest.mark.parametrize("label,seed", [(s, 0) for s in SMALL] + [("4gpu-4x4-s1", 1)])
def test_planner_costs_at_most_melange(label, seed):
    config = generate_config(parse_size(label), seed)
    mel = melange_ilp(config, time_limit=60)
    plan = planner_solve(config, f"melange-{label}-{seed}", time_limit=60)
    assert mel.usd_per_h is not None and plan.usd_per_h is not None
    assert plan.usd_per_h <= mel.usd_per_h * (1 + 1e-6)
    assert plan.off_menu == []  # the same choices: profiled (GPU, bucket) pairs, 1-GPU replicas
    # both buy whole GPUs at the config's prices: a real plan costs something
    assert plan.usd_per_h >= min(i["cost"] for i in config["gpu_info"].values()) - 1e-9


def test_off_menu_flags_choices_melange_does_not_have():
    config = tiny([[0.5, 0.5]], 10.0, [2.0, 0.0], [20.0, 6.0])
    problem = {
        "gpus": ["a10g", "a100-sxm-80gb"],
        "workloads": {
            "serve": [
                {
                    "requests": [
                        {"name": "short", "prompt": [1, 25], "output": [1, 25]},
                        {"name": "long", "prompt": [1, 25], "output": [26, 100]},
                    ]
                }
            ]
        },
    }

    def alloc(gpu: str, tp: int, rates: dict, caps: dict) -> SimpleNamespace:
        return SimpleNamespace(
            gpu=gpu, gpus_per_replica=tp, bucket_rates_rps=rates, bucket_capacity_rps=caps
        )

    ok = alloc("a10g", 1, {"short": 2.0, "long": 0.0}, {"short": 5.0, "long": 0.0})
    assert off_menu(config, problem, SimpleNamespace(serve_allocations=[ok])) == []
    bad = [
        alloc("a10g", 1, {"long": 0.7}, {"long": 5.0}),  # Mélange: a10g cannot serve "long"
        alloc("a100-sxm-80gb", 2, {"short": 45.0}, {"short": 5.0}),  # a 2-GPU replica
        alloc("a100-sxm-80gb", 1, {"short": 25.0}, {"short": 5.0}),  # not the profiled rate
    ]
    assert len(off_menu(config, problem, SimpleNamespace(serve_allocations=bad))) == 3
