"""The serve_count cut (issue 51): whole replicas implied by the largest type in use.

It must lose no whole plan (brute force over small cells; the same optimum with and without
it) and must bind where it should (a row per cell, its coefficients the K_j of each choice).
"""

from __future__ import annotations

import itertools
import math
import random

import pulp
import pytest

import planner.optimize.model.serving as serving
from planner.inputs.problem import load_problem_text
from planner.optimize.candidates import build_candidates
from planner.optimize.model import build_model
from planner.optimize.model.serving import replicas_needed
from planner.optimize.solve import solve_model
from tests.factories import assistant_yaml


def fewest_replicas(need: float, rates: list[float], largest: int, R: int) -> int:
    """Brute force: the fewest whole replicas of types no faster than ``rates[largest]``, the
    largest in use, that carry ``need`` with ``R`` of the largest down."""
    allowed = [mu for mu in rates if mu <= rates[largest]]
    cap = math.ceil(need / min(allowed)) + R + 1
    best = math.inf
    for xs in itertools.product(range(cap + 1), repeat=len(allowed)):
        if sum(mu * x for mu, x in zip(allowed, xs, strict=True)) >= need + R * rates[largest]:
            best = min(best, sum(xs))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_no_whole_cell_needs_fewer_replicas_than_the_cut_says(seed):
    rng = random.Random(seed)
    rates = sorted(round(rng.uniform(0.5, 6.0), 2) for _ in range(3))
    need, R = round(rng.uniform(0.1, 14.0), 3), rng.choice([0, 1, 2])
    for j in range(len(rates)):
        assert fewest_replicas(need, rates, j, R) >= replicas_needed(need, rates[j], R)
    # with the largest type alone the bound is met exactly: the cut is tight
    assert fewest_replicas(need, rates[-1:], 0, R) == replicas_needed(need, rates[-1], R)


def test_a_need_met_exactly_in_floating_point_is_not_rounded_up():
    # 3 replicas of 0.1 req/s carry 0.30000000000000004 req/s: the cut must not ask for 4
    assert replicas_needed(0.1 + 0.1 + 0.1, 0.1, 0) == 3


# 50x the factory's users: several replicas a cell, so the slowest type needs more than the floor
PROBLEM = assistant_yaml(gpus=("l4", "a100-pcie-80gb", "l40s"), months=2).replace(
    "daily_active_users: 2000", "daily_active_users: 100000"
)


def _model():
    inputs = load_problem_text(PROBLEM, "count.yaml")
    return build_model(inputs, build_candidates(inputs))


def test_each_cell_of_a_spare_with_several_rates_gets_its_row():
    m = _model()
    rows = [c for name, c in m.prob.constraints.items() if name.startswith("serve_count_")]
    assert rows, "no serve_count row on a service with a spare and three or more rates"
    for c in rows:
        flags = [v for v in c if v.name.startswith("on_")]
        # each flag's coefficient is K_(i-1) - K_i >= 0: a faster largest type needs fewer
        assert flags and all(c[v] >= 0 for v in flags)


def _lp(m) -> float:
    """The LP relaxation's optimum (every integer relaxed, in place)."""
    for v in m.prob.variables():
        v.cat = pulp.LpContinuous
    m.prob.solve(pulp.HiGHS(msg=False))
    return pulp.value(m.prob.objective)


def test_the_cut_lifts_the_lp_and_keeps_the_optimum(monkeypatch):
    with_cut = _model()
    lp_with = _lp(_model())
    res = solve_model(with_cut, time_limit=60, gap=0.0)
    monkeypatch.setattr(serving, "_add_count_row", lambda *a, **k: None)
    without = _model()
    assert not any(n.startswith("serve_count_") for n in without.prob.constraints)
    lp_without = _lp(_model())
    ref = solve_model(without, time_limit=60, gap=0.0)
    assert res.status == ref.status == "optimal"
    # the same optimum (no whole plan lost), from an LP that sees more of it (measured: +5 %)
    assert pulp.value(with_cut.prob.objective) == pytest.approx(
        pulp.value(without.prob.objective), rel=1e-7
    )
    assert lp_with > lp_without * 1.01


def test_rentals_left_to_whole_copies_of_a_smaller_replica_keep_the_optimum(monkeypatch):
    """On this problem two A100 PCIe TP1 replicas carry more than one TP2 at the same price per
    GPU, so the TP2 rentals are left out (serve_options.copies_beat); the exact optimum with
    every pair kept is the same."""
    import planner.optimize.serve_options as options

    pruned = _model()
    assert not any(
        name.startswith("q_assistant_a100_pcie_80gb_tp2")
        for name in (v.name for v in pruned.q.values())
    )
    res = solve_model(pruned, time_limit=60, gap=0.0)
    monkeypatch.setattr(options, "_copies_of_smaller", lambda pairs: pairs)
    full = _model()
    assert any(
        name.startswith("q_assistant_a100_pcie_80gb_tp2")
        for name in (v.name for v in full.q.values())
    )
    ref = solve_model(full, time_limit=60, gap=0.0)
    assert res.status == ref.status == "optimal"
    assert pulp.value(pruned.prob.objective) == pytest.approx(
        pulp.value(full.prob.objective), rel=1e-7
    )
