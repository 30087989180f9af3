"""The benchmark generator is seeded and writes valid problems (no timing assertions here)."""

from __future__ import annotations

import pytest
import yaml

from benchmarks.generate import generate, load_inputs, to_yaml
from benchmarks.run import FULL, QUICK, parse_size
from planner.inputs.catalog import load_gpus, load_models
from planner.inputs.problem import Problem, load_problem_text


def test_same_seed_same_problem_and_different_seed_differs():
    assert generate(10, 4, 12, seed=3) == generate(10, 4, 12, seed=3)
    assert generate(10, 4, 12, seed=3) != generate(10, 4, 12, seed=4)


@pytest.mark.parametrize(
    "workloads,gpus,months", [(1, 4, 12), (10, "all", 36), (50, 4, 36), (200, "all", 12)]
)
def test_generated_problem_is_valid_and_resolves(workloads, gpus, months):
    data = generate(workloads, gpus, months, seed=0)
    p = Problem.model_validate(data)
    assert len(p.workloads.train) + len(p.workloads.serve) == workloads
    assert p.horizon.months == months
    assert p.offers.files == ["offers.yaml"]
    catalog = load_gpus()
    if gpus == "all":
        assert p.gpus is None
    else:
        assert len(p.gpus) == gpus and set(p.gpus) <= set(catalog)
    inputs = load_inputs(data)
    assert inputs.offers, "the default offers file should give rentals"
    models = load_models()
    for w in p.workloads.serve:
        assert w.tokens.prompt + w.tokens.output <= models[w.model].max_context


def test_yaml_round_trip_loads_as_a_problem_file():
    data = generate(5, 4, 12, seed=1)
    text = to_yaml(data)
    assert yaml.safe_load(text) == data
    inputs = load_problem_text(text, "bench.yaml")
    assert inputs.problem.name == data["name"]


def test_ladder_sizes_parse():
    assert parse_size("50xallx36") == (50, "all", 36)
    assert parse_size("10x4x12") == (10, "4", 12)
    assert len(FULL) == 16 and set(QUICK) <= set(FULL)
