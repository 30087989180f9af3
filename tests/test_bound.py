"""The separable lower bound (planner.optimize.bound): never above the exact optimum with whole
replicas on seeded small problems, above the LP relaxation where whole replicas and spares
are what a plan costs, and not computed where it does not apply."""

from __future__ import annotations

import pulp
import pytest

from benchmarks.generate import generate, load_inputs
from planner.optimize.bound import cell_bound, separable_bound
from planner.optimize.candidates import build_candidates
from planner.optimize.model import build_model
from planner.optimize.solve import _BulkHiGHS


def _model(data: dict):
    inputs = load_inputs(data)
    return build_model(inputs, build_candidates(inputs))


def _exact(m) -> float:
    """The model's optimum with every rented replica whole, proven by HiGHS (gap 0)."""
    for v in m.q.values():
        v.cat = pulp.LpInteger
    m.prob.solve(_BulkHiGHS(msg=False, gapRel=0.0, timeLimit=120))
    assert m.prob.solverModel.getInfo().mip_gap < 1e-6
    return pulp.value(m.prob.objective)


@pytest.mark.parametrize("seed", range(6))
def test_the_bound_never_exceeds_the_exact_optimum(seed):
    m = _model(generate(3, 3, 4, seed))
    bound = separable_bound(m)
    assert bound is not None
    assert bound <= _exact(m) * (1 + 1e-9) + 1e-6


@pytest.mark.parametrize("seed", range(3))
def test_renting_only_the_bound_is_above_the_lp_and_below_the_exact_optimum(seed):
    """With nothing to buy, whole replicas and the spare of the largest type are what the
    LP relaxation misses: the bound sees them. (Three workloads on six drawn GPU types over two
    months: on HOPPER_ERA over four months the gap-0 proof alone took 2-5 s a seed.)"""
    data = generate(3, 6, 2, seed)
    data["budget"]["capex_usd"] = 1.0
    m = _model(data)
    bound = separable_bound(m)
    m.prob.solve(_BulkHiGHS(msg=False, mip=False))
    lp = pulp.value(m.prob.objective)
    assert bound is not None and bound > lp * (1 + 1e-3)
    assert bound <= _exact(m) * (1 + 1e-9) + 1e-6


def test_cell_bound_is_the_linear_optimum_of_a_cell():
    """Against a brute-force grid of the two-type cell LP (x on a fine grid)."""
    import numpy as np

    mu, price = np.array([0.7, 2.5, 4.0]), np.array([1.0, 2.9, 5.0])
    for need, count in [(0.3, 2.0), (5.0, 2.0), (9.3, 3.0), (1.0, 5.0)]:
        got = cell_bound(mu, price, need, count)
        best = min(
            price[i] * a + price[j] * b
            for i in range(3)
            for j in range(3)
            for a in np.arange(0, 15, 0.01)
            for b in [max((need - mu[i] * a) / mu[j], count - a, 0.0)]
        )
        assert got <= best + 1e-9
        assert got >= best - 0.05  # the grid's step


def test_no_bound_with_an_existing_fleet():
    from pathlib import Path

    from planner.inputs.problem import load_problem

    inputs = load_problem(Path(__file__).parent.parent / "problems" / "brownfield.yaml")
    m = build_model(inputs, build_candidates(inputs))
    assert separable_bound(m) is None
