"""Tiny problems whose optimum is computed by hand (coefficients injected, physics bypassed)."""

from __future__ import annotations

import math

import pytest

from planner.base.errors import InfeasibleError
from planner.optimize.candidates import check_candidates
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.plan.extract import extract_plan
from tests.factories import candidates, gpu, offer, problem, serve_workload, train_job

H = 730.0


def solve(inputs, cands, solver="cbc"):
    m = build_model(inputs, cands)
    res = solve_model(m, solver=solver, time_limit=30, gap=1e-7)
    return m, res


@pytest.mark.parametrize(
    "price,rate,months", [(10_000.0, 2.0, 3), (1_000.0, 2.0, 3), (5_000.0, 0.5, 6)]
)
@pytest.mark.parametrize("demand", [2.5, 3.0, 0.4])
def test_buy_or_rent_constant_demand(price, rate, months, demand):
    """Constant demand D (utilization 1): buy b GPUs at month 0 and rent the rest.

    Replicas are whole, owned or rented, with at least one up: R = max(ceil(D), 1) and
    cost(b) = b * price + max(0, R - b) * rate * H * months; the optimum is min over b.
    """
    inputs = problem(
        months=months,
        gpus=[gpu(price=price)],
        offers=[offer("cloud-g1", "g1", rate)],
        serve=[serve_workload(rps=demand, util=1.0)],
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    expected = min(
        b * price + max(0, max(math.ceil(demand), 1) - b) * rate * H * months
        for b in range(0, math.ceil(demand) + 1)
    )
    assert res.status == "optimal"
    assert res.objective == pytest.approx(expected, rel=1e-6)
    plan = extract_plan(m, res)
    assert plan.totals.total_usd == pytest.approx(expected, rel=1e-6)


def test_capex_budget_limits_purchases():
    # Owning is much cheaper, but the budget buys only 1 GPU; 2 more are rented.
    inputs = problem(
        months=12,
        capex=15_000,
        gpus=[gpu(price=10_000)],
        offers=[offer("cloud-g1", "g1", 2.0)],
        serve=[serve_workload(rps=3.0)],
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    plan = extract_plan(m, res)
    assert sum(p.count for p in plan.purchases) == 1
    assert res.objective == pytest.approx(10_000 + 2 * 2.0 * H * 12, rel=1e-6)


def test_node_units_and_licence():
    # g8 sells in nodes of 8; the consumer card is cheaper but not licensed for the datacenter.
    cheap = gpu("geforce", price=100, consumer=True)
    node = gpu("g8", price=1_000, node=8)
    inputs = problem(months=12, gpus=[cheap, node], serve=[serve_workload(rps=3.0)])
    c = candidates(inputs, serve={"chat": [("geforce", 1, 1.0), ("g8", 1, 1.0)]})
    m, res = solve(inputs, c)
    plan = extract_plan(m, res)
    assert [(p.gpu, p.count) for p in plan.purchases] == [("g8", 8)]
    assert res.objective == pytest.approx(8_000)
    # When the site allows consumer cards, 3 of them do.
    inputs2 = problem(
        months=12, gpus=[cheap, node], consumer_ok=True, serve=[serve_workload(rps=3.0)]
    )
    m2, res2 = solve(
        inputs2, candidates(inputs2, serve={"chat": [("geforce", 1, 1.0), ("g8", 1, 1.0)]})
    )
    assert res2.objective == pytest.approx(300)


def test_power_and_hosting_costs():
    # 1 owned GPU busy all the time: power = (idle+host) W x H + (tdp-idle) W x H, x PUE x price.
    g = gpu(price=1_000, tdp=500, idle=100, host=200)
    inputs = problem(
        months=2, gpus=[g], power_price=0.1, pue=1.5, hosting=50, serve=[serve_workload(rps=1.0)]
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    watts = 300 + 400  # idle+host always, plus tdp-idle while busy (busy all hours)
    expected = 1_000 + 2 * (watts * H / 1000 * 1.5 * 0.1) + 2 * 50
    assert res.objective == pytest.approx(expected, rel=1e-6)
    plan = extract_plan(m, res)
    assert plan.totals.power_usd == pytest.approx(2 * watts * H / 1000 * 0.15, rel=1e-6)
    assert plan.totals.hosting_usd == pytest.approx(100)


def test_training_rent_vs_own():
    # A 100-hour job on 8 GPUs: renting costs 8*100*rate; owning costs 8*price.
    for price, rate in ((1_000.0, 2.0), (100.0, 2.0)):
        inputs = problem(
            months=1,
            gpus=[gpu(price=price)],
            offers=[offer("cloud-g1", "g1", rate, gpus_per_instance=8)],
            train=[train_job()],
        )
        m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 8, 100.0)]}))
        assert res.objective == pytest.approx(min(8 * 100 * rate, 8 * price), rel=1e-6)


def test_training_spot_share_and_overhead():
    # Spot at a quarter of the price with 25 % overhead, at most half of the job on spot.
    inputs = problem(
        months=1,
        gpus=[gpu(price=1e7)],
        offers=[offer("cloud-g1-od", "g1", 4.0), offer("cloud-g1-spot", "g1", 1.0, kind="spot")],
        train=[train_job(spot={"allowed": True, "max_share": 0.5, "overhead": 0.25})],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 1, 100.0)]}))
    # 50 h of progress on-demand (50 x 4) + 50 h of progress on spot = 62.5 h billed x 1.
    assert res.objective == pytest.approx(50 * 4.0 + 62.5 * 1.0, rel=1e-6)


@pytest.mark.parametrize("providers,expected", [("single", 100 * 3.0), ("split", 50 * 3.0 + 62.5)])
def test_one_provider_per_run(providers, expected):
    """Spot on another provider: a run that stays with one provider cannot mix them (it runs
    on the cheaper on-demand offer alone: 100 h x 3.0 < 50 h x 4 + 62.5 h x 1.0 is false
    for 'split', which takes the mix: 50 x 3.0 + 62.5 x 1.0)."""
    inputs = problem(
        months=1,
        gpus=[gpu(price=1e7)],
        offers=[offer("a-g1-od", "g1", 3.0), offer("b-g1-spot", "g1", 1.0, kind="spot")],
        train=[
            train_job(
                spot={"allowed": True, "max_share": 0.5, "overhead": 0.25}, providers=providers
            )
        ],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 1, 100.0)]}))
    assert res.objective == pytest.approx(expected, rel=1e-6)
    plan = extract_plan(m, res)
    places = {a.source.split("-")[0] for a in plan.train_allocations}
    assert len(places) == (1 if providers == "single" else 2)


def test_training_deadline_makes_owned_gpus_needed_early():
    # Job needs 1000 h on 2 GPUs in month 2 only; buying in month 2 is as good as month 1.
    inputs = problem(
        months=3, gpus=[gpu(price=500)], train=[train_job(start="2027-02", deadline="2027-03")]
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 2, 1000.0)]}))
    plan = extract_plan(m, res)
    assert res.objective == pytest.approx(1_000)
    assert sum(a.wall_hours for a in plan.train_allocations) == pytest.approx(1000)
    assert all(a.month in ("2027-02", "2027-03") for a in plan.train_allocations)


def test_reserved_capacity_paid_for_whole_term():
    # Reserved at 1.0/GPU-h for 2 months vs on-demand 3.0: reserving 1 GPU costs 1460.
    inputs = problem(
        months=2,
        gpus=[gpu(price=1e7)],
        offers=[
            offer("od-g1", "g1", 3.0),
            offer("res-g1", "g1", 1.0, kind="reserved", term_months=2),
        ],
        serve=[serve_workload(rps=1.0)],
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    assert res.objective == pytest.approx(2 * H * 1.0, rel=1e-6)
    plan = extract_plan(m, res)
    assert [(r.offer, r.gpus) for r in plan.reservations] == [("res-g1", 1)]


def test_power_cap_forces_renting():
    g = gpu(price=100, tdp=1000, idle=0, host=0)
    inputs = problem(
        months=12,
        gpus=[g],
        power_cap=2.5,
        offers=[offer("cloud-g1", "g1", 1.0)],
        serve=[serve_workload(rps=4.0)],
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    plan = extract_plan(m, res)
    assert sum(p.count for p in plan.purchases) == 2  # 2 x 1 kW <= 2.5 kW
    assert plan.totals.rental_usd == pytest.approx(2 * 1.0 * H * 12, rel=1e-6)


def test_infeasible_budget_status():
    inputs = problem(months=1, capex=100, gpus=[gpu(price=1000)], serve=[serve_workload(rps=1.0)])
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    assert res.status == "infeasible"
    assert res.objective is None


def test_no_candidate_is_infeasible_with_reason():
    inputs = problem(months=1, serve=[serve_workload()])
    c = candidates(inputs, serve={"chat": []})
    with pytest.raises(InfeasibleError) as exc:
        check_candidates(inputs, c)
    assert "chat" in str(exc.value)


def test_highs_agrees_with_cbc():
    inputs = problem(
        months=6,
        gpus=[gpu(price=3000), gpu("g2", price=5000)],
        offers=[offer("cloud-g1", "g1", 1.1), offer("cloud-g2", "g2", 1.5)],
        serve=[serve_workload(rps=3.3, util=0.4)],
    )
    c = candidates(inputs, serve={"chat": [("g1", 1, 1.0), ("g2", 1, 1.7)]})
    _, a = solve(inputs, c, "cbc")
    _, b = solve(inputs, c, "highs")
    assert a.status == b.status == "optimal"
    assert a.objective == pytest.approx(b.objective, rel=1e-5)


def test_multi_gpu_training_cannot_rent_single_gpu_instances():
    # Eight 1-GPU VMs are not an 8-GPU node: only the 8-GPU offer is eligible, dearer or not.
    inputs = problem(
        months=1,
        gpus=[gpu(price=1e7)],
        offers=[offer("one-g1", "g1", 1.0), offer("eight-g1", "g1", 3.0, gpus_per_instance=8)],
        train=[train_job()],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 8, 100.0)]}))
    assert res.objective == pytest.approx(8 * 100 * 3.0)
    assert {k[2] for k in m.r} == {"eight-g1"}
