"""Plans a team can execute (issue 15): fabrics, capacity caps, one provider per run, serving
headroom and redundancy, whole rented replicas; the verifier checks each rule."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from pydantic import ValidationError

from planner.base.errors import InfeasibleError, InputError
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.physics.demand import HOURS_PER_MONTH as H
from planner.plan.extract import extract_plan
from planner.verify import verify_plan
from tests.factories import candidates, gpu, offer, problem, serve_workload, train_job

EXPENSIVE = 1e7  # a purchase price (the catalog maximum) that keeps the optimum renting


def solve(inputs, cands):
    m = build_model(inputs, cands)
    res = solve_model(m, time_limit=30, gap=1e-7)
    return m, res


def fabric_offer(oid: str, price: float, fabric: str | None, **kw) -> dict:
    extra = {} if fabric in (None, "none") else {"fabric_gbps_per_gpu": 400.0}
    return offer(oid, "g1", price, gpus_per_instance=8, fabric=fabric, **extra, **kw)


# ---------------------------------------------------------------- fabrics


@pytest.mark.parametrize("fabric", ["infiniband", "roce", "efa", "tcpx"])
def test_multi_node_job_runs_on_a_training_fabric(fabric):
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[fabric_offer("cloud-g1", 2.0, fabric)],
        train=[train_job()],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 16, 100.0)]}))
    assert res.status == "optimal"
    assert res.objective == pytest.approx(16 * 100.0 * 2.0)


@pytest.mark.parametrize("fabric", [None, "none", "ethernet"])
def test_multi_node_job_is_refused_without_a_fabric(fabric):
    """16 GPUs on 8-GPU instances with no training fabric: nothing can carry the job."""
    inputs = problem(
        months=1,
        capex=1000,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[fabric_offer("cloud-g1", 2.0, fabric)],
        train=[train_job()],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 16, 100.0)]}))
    assert res.status == "infeasible"


def test_a_job_inside_one_instance_needs_no_fabric():
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[fabric_offer("cloud-g1", 2.0, "none")],
        train=[train_job()],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 8, 100.0)]}))
    assert res.objective == pytest.approx(8 * 100.0 * 2.0)


@pytest.mark.parametrize("fabric", [None, "ethernet"])
def test_ethernet_is_an_opt_in(fabric):
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[fabric_offer("cloud-g1", 2.0, fabric)],
        train=[train_job(ethernet=True)],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 16, 100.0)]}))
    assert res.status == "optimal"


def test_slow_fabric_costs_more_hours_in_the_physics():
    """The same 64-GPU job predicts more wall hours over Ethernet than over InfiniBand."""
    from planner.inputs.catalog import load_gpus, load_models
    from planner.optimize.candidates import fabric_gbs
    from planner.physics.calibration.values import default_calibration
    from planner.physics.train import estimate_train, with_inter_node_gbs

    cal = default_calibration()
    h100, model = load_gpus()["h100-sxm"], load_models()["llama-2-13b"]
    ib = fabric_gbs(_o("infiniband", 400.0), False, cal)
    eth = fabric_gbs(_o(None, None), True, cal)
    hours = [
        estimate_train(model, h100, 64, 1e11, "full", with_inter_node_gbs(cal, g)).wall_hours
        for g in (ib, eth)
    ]
    # the layout search hides much of a slow fabric (pipeline stages keep the traffic inside
    # the servers, DualPipe overlaps it): 3 % slower on the 12.5 Gb/s Ethernet, not 5 %
    assert hours[1] > hours[0] * 1.01


def _o(fabric, gbps):
    from types import SimpleNamespace

    from planner.inputs.catalog import MULTI_NODE_FABRICS

    return SimpleNamespace(
        fabric=fabric, fabric_gbps_per_gpu=gbps, multi_node=fabric in MULTI_NODE_FABRICS
    )


# ---------------------------------------------------------------- providers


def test_plan_says_where_each_run_lives():
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[fabric_offer("a-g1", 2.0, "infiniband"), fabric_offer("b-g1", 2.5, "efa")],
        train=[train_job()],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 16, 100.0)]}))
    plan = extract_plan(m, res)
    w = next(w for w in plan.workloads if w.name == "job")
    assert w.config["providers"] == ["a"]
    assert w.config["offers"]["a-g1"]["fabric"] == "infiniband"


# ---------------------------------------------------------------- capacity caps


@pytest.mark.parametrize("seed", range(8))
def test_caps_shared_by_training_and_serving_match_brute_force(seed):
    """A cheap capped offer and a dear uncapped one; a service and (sometimes) a training run
    want the cheap one. Brute force: the run's block (k GPUs for its month) goes on the capped
    or the uncapped offer; the service fills what is left of the cap, whole replicas."""
    rnd = random.Random(seed)
    cap = rnd.choice([8, 16, 24])
    k = rnd.choice([8, 16])
    rps = rnd.uniform(2.0, 20.0)
    cheap, dear = 1.0, rnd.uniform(1.2, 3.0)
    with_job = rnd.random() < 0.7
    offers = [
        offer(
            "a-g1",
            "g1",
            cheap,
            gpus_per_instance=8,
            max_gpus=cap,
            fabric="infiniband",
            fabric_gbps_per_gpu=400.0,
        ),
        offer(
            "a-g1-big",
            "g1",
            dear,
            gpus_per_instance=8,
            fabric="infiniband",
            fabric_gbps_per_gpu=400.0,
        ),
    ]
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=offers,
        serve=[serve_workload(rps=rps)],
        train=[train_job()] if with_job else None,
    )
    cands = candidates(
        inputs,
        serve={"chat": [("g1", 1, 1.0)]},
        train={"job": [("g1", k, 100.0)]} if with_job else None,
    )
    m, res = solve(inputs, cands)
    need = max(1, math.ceil(rps - 1e-9))
    best = math.inf
    for job_on_cap in ([True, False] if with_job and k <= cap else [False]) if with_job else [None]:
        left = cap - (k if job_on_cap else 0)
        train_cost = 0.0 if job_on_cap is None else k * 100.0 * (cheap if job_on_cap else dear)
        for on_cap in range(0, min(left, need) + 1):
            best = min(best, train_cost + (on_cap * cheap + (need - on_cap) * dear) * H)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(best, rel=1e-6)
    plan = extract_plan(m, res)
    for month in {a.month for a in plan.serve_allocations}:
        for sl in {a.slice for a in plan.serve_allocations}:
            on_cap = sum(
                a.replicas
                for a in plan.serve_allocations
                if a.source == "a-g1" and (a.month, a.slice) == (month, sl)
            )
            block = k if any(a.source == "a-g1" for a in plan.train_allocations) else 0
            assert on_cap + block <= cap


# ---------------------------------------------------------------- headroom and redundancy


@pytest.mark.parametrize(
    "rps,max_load,redundancy,replicas",
    [(2.5, 1.0, 0, 3), (2.5, 1.0, 1, 4), (2.5, 0.8, 0, 4), (2.5, 0.8, 1, 5), (0.2, 1.0, 2, 3)],
)
def test_headroom_and_spare_replicas_hand_computed(rps, max_load, redundancy, replicas):
    """One replica type of 1 req/s: replicas = max(1 + R, ceil(D / max_load) + R)."""
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[offer("cloud-g1", "g1", 2.0)],
        serve=[serve_workload(rps=rps, max_load=max_load, redundancy=redundancy)],
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    assert res.objective == pytest.approx(replicas * 2.0 * H)


@pytest.mark.parametrize("seed", range(6))
def test_a_service_loses_its_fastest_replica_and_still_meets_its_p95(seed):
    """Mixed replica types: in every slice, the capacity left after the R fastest replicas go
    down, at max_load, covers the demand; and R = 0 is never dearer."""
    rnd = random.Random(100 + seed)
    rates = (1.0, rnd.uniform(2.0, 6.0))
    R = rnd.choice([1, 2])
    w = serve_workload(rps=rnd.uniform(1.0, 15.0), util=0.5, max_load=0.8, redundancy=R)
    inputs = problem(
        months=2,
        gpus=[gpu("g1", price=EXPENSIVE), gpu("g2", price=EXPENSIVE)],
        offers=[offer("c-g1", "g1", 1.0), offer("c-g2", "g2", rnd.uniform(1.5, 5.0))],
        serve=[w],
    )
    cands = candidates(inputs, serve={"chat": [("g1", 1, rates[0]), ("g2", 1, rates[1])]})
    m, res = solve(inputs, cands)
    plan = extract_plan(m, res)
    cells: dict = {}
    for a in plan.serve_allocations:
        assert a.replicas == round(a.replicas)
        cells.setdefault((a.month, a.slice), []).extend(
            [a.rate_rps_per_replica] * round(a.replicas)
        )
    for (month, sl), reps in cells.items():
        demand = next(
            a.demand_rps for a in plan.serve_allocations if (a.month, a.slice) == (month, sl)
        )
        left = sum(sorted(reps)[: len(reps) - R])
        assert left * 0.8 >= demand - 1e-6
    inputs0 = problem(
        months=2,
        gpus=[gpu("g1", price=EXPENSIVE), gpu("g2", price=EXPENSIVE)],
        offers=[
            offer("c-g1", "g1", 1.0),
            offer("c-g2", "g2", inputs.offers["c-g2"].usd_per_gpu_hour),
        ],
        serve=[{**w, "redundancy": 0}],
    )
    _, res0 = solve(
        inputs0, candidates(inputs0, serve={"chat": [("g1", 1, rates[0]), ("g2", 1, rates[1])]})
    )
    assert res0.objective <= res.objective + 1e-6


def test_rented_replicas_are_whole_in_every_slice():
    inputs = problem(
        months=2,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[offer("cloud-g1", "g1", 2.0)],
        serve=[serve_workload(rps=2.3, util=0.4)],
    )
    m, res = solve(inputs, candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}))
    plan = extract_plan(m, res)
    assert plan.serve_allocations
    assert all(a.replicas == round(a.replicas) for a in plan.serve_allocations)


def test_repair_makes_relaxed_rentals_whole():
    """Above the exact size the rentals are continuous and repaired to whole numbers, never
    below the demand; the repair's cost is reported."""
    from planner.optimize import model as model_mod

    inputs = problem(
        months=3,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[offer("cloud-g1", "g1", 2.0), offer("other-g1", "g1", 2.5, gpus_per_instance=2)],
        serve=[serve_workload(rps=3.3, util=0.4)],
    )
    cands = candidates(inputs, serve={"chat": [("g1", 1, 1.0), ("g1", 2, 2.1)]})
    old = model_mod.EXACT_RENTAL_CELLS
    model_mod.EXACT_RENTAL_CELLS = 0
    try:
        m, res = solve(inputs, cands)
    finally:
        model_mod.EXACT_RENTAL_CELLS = old
    assert any(v.cat == "Continuous" for v in m.q.values())
    plan = extract_plan(m, res)
    assert all(a.replicas == round(a.replicas) for a in plan.serve_allocations)
    m2, exact = solve(inputs, cands)
    assert exact.objective <= res.objective + 1e-6  # the repair never beats the exact model


# ---------------------------------------------------------------- the verifier


def _solved(**kw):
    inputs = problem(
        months=1,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[fabric_offer("a-g1", 2.0, "infiniband"), fabric_offer("b-g1", 2.5, "none")],
        serve=[serve_workload(rps=2.5, redundancy=1)],
        train=[train_job()],
    )
    cands = candidates(inputs, serve={"chat": [("g1", 1, 1.0)]}, train={"job": [("g1", 16, 100.0)]})
    m, res = solve(inputs, cands)
    return inputs, extract_plan(m, res)


def _tampered(plan, section, fn):
    rows = [fn(a) for a in getattr(plan, section)]
    return plan.model_copy(update={section: rows})


def test_verify_rejects_fractional_rented_replicas():
    inputs, plan = _solved()
    bad = _tampered(
        plan, "serve_allocations", lambda a: a.model_copy(update={"replicas": a.replicas + 0.5})
    )
    errs = verify_plan(inputs, bad)
    assert any("not a whole number" in f for f in errs), errs


def test_verify_rejects_a_run_on_a_fabric_that_cannot_carry_it():
    inputs, plan = _solved()
    bad = _tampered(
        plan,
        "train_allocations",
        lambda a: a.model_copy(update={"source": "b-g1"}) if a.source == "a-g1" else a,
    )
    errs = verify_plan(inputs, bad)
    assert any("not made for multi-node training" in f for f in errs), errs


def test_verify_rejects_a_service_without_its_spare_replica():
    inputs, plan = _solved()
    bad = _tampered(
        plan, "serve_allocations", lambda a: a.model_copy(update={"replicas": a.replicas - 1})
    )
    errs = verify_plan(inputs, bad)
    assert any("fastest replica" in f or "redundancy" in f for f in errs), errs


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"fabric": "myrinet"}, "fabric"),
        ({"fabric": "infiniband"}, "fabric_gbps_per_gpu"),
        ({"fabric_gbps_per_gpu": 100.0}, "name the fabric"),
        ({"max_gpus": 4}, "below gpus_per_instance"),
        ({"cluster": True}, "cluster product needs"),
    ],
)
def test_bad_offer_fields_are_input_errors(patch, needle):
    with pytest.raises((InputError, ValidationError)) as e:
        problem(offers=[{**offer("c-g1", "g1", 1.0, gpus_per_instance=8), **patch}])
    assert needle in str(e.value)


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"slo": {"p95_ttft_ms": 1000, "p95_tpot_ms": 100, "max_load": 0}}, "max_load"),
        ({"slo": {"p95_ttft_ms": 1000, "p95_tpot_ms": 100, "max_load": 1.5}}, "max_load"),
        ({"redundancy": -1}, "redundancy"),
    ],
)
def test_bad_serving_headroom_is_an_input_error(patch, needle):
    with pytest.raises((InputError, ValidationError)) as e:
        problem(serve=[{**serve_workload(), **patch}])
    assert needle in str(e.value)


def test_providers_rule_must_be_known():
    with pytest.raises((InputError, ValidationError)) as e:
        problem(train=[train_job(providers="many")])
    assert "providers" in str(e.value)


def test_all_combinations_of_spot_and_fabric_are_results_not_crashes():
    """A 16-GPU job with spot only on single-node offers: an explained infeasibility."""
    for fabric, allowed in itertools.product([None, "infiniband"], [False, True]):
        inputs = problem(
            months=1,
            capex=1000,
            gpus=[gpu(price=EXPENSIVE)],
            offers=[fabric_offer("s-g1", 1.0, fabric, kind="spot")],
            train=[train_job(spot={"allowed": allowed, "max_share": 1.0})],
        )
        m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 16, 100.0)]}))
        assert res.status == ("optimal" if fabric and allowed else "infeasible")


def test_infeasible_error_type_is_exported():
    assert issubclass(InfeasibleError, Exception)


# ---------------------------------------------------------------- explain: capacity

CAPPED = """
name: capped chat
horizon: {start: 2027-01, months: 2}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.12}
gpus: [l4]
offers:
  files: []
  extra:
    - {id: cheap-l4, provider: cheap, gpu: l4, kind: on_demand, usd_per_gpu_hour: 0.5,
       gpus_per_instance: 8, max_gpus: 8, source: test, as_of: 2026-11}
    - {id: dear-l4, provider: dear, gpu: l4, kind: on_demand, usd_per_gpu_hour: 0.9,
       gpus_per_instance: 8, source: test, as_of: 2026-11}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 40000, requests_per_user_per_day: 20, utilization: 0.5}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
"""


def test_explain_names_a_binding_cap_and_what_relaxing_it_saves():
    from planner.analysis.explain import explain_plan
    from planner.inputs.problem import load_problem_text

    ex = explain_plan(load_problem_text(CAPPED, "capped.yaml"))
    line = next(x for x in ex.whatif if x.startswith("cheap-l4 max_gpus 8 -> 16 (binding)"))
    assert "(-$" in line  # twice the cheap capacity saves money


def test_shipped_offers_get_fabrics_from_the_catalog_and_never_a_guess():
    from planner.inputs.catalog import CATALOG_DIR, load_offers

    offers = load_offers(CATALOG_DIR / "offers.yaml")
    p5 = [o for o in offers.values() if o.instance_type == "p5.48xlarge"]
    assert p5 and all(o.fabric == "efa" and o.fabric_gbps_per_gpu == 400 for o in p5)
    assert all("fabric:" in o.source for o in p5)  # the fabric's source travels with the offer
    cudo = [o for o in offers.values() if o.provider == "cudo"]
    assert cudo and all(o.fabric is None and not o.multi_node for o in cudo)


def test_cluster_products_are_training_only():
    from planner.inputs.catalog import CATALOG_DIR, load_offers
    from planner.optimize.candidates import serve_rental_pairs

    offers = load_offers(CATALOG_DIR / "offers-manual.yaml")
    blocks = [o for o in offers.values() if o.cluster]
    assert blocks and all(o.multi_node and o.min_term_days for o in blocks)
    from types import SimpleNamespace

    c = SimpleNamespace(gpu="h100-sxm", tp=8, rate_rps=10.0, key="h100-sxm_tp8")
    assert not any(o.cluster for _, o in serve_rental_pairs([c], offers.values(), True))


@pytest.mark.parametrize("hours,expected_offer", [(100.0, "b-g1"), (300.0, "a-block")])
def test_a_minimum_term_is_used_only_by_a_run_that_long(hours, expected_offer):
    """A cheap 16-GPU block with a 10-day (240 h) minimum term: a 100-hour run rents the dearer
    on-demand offer, a 300-hour run the block."""
    block = fabric_offer(
        "a-block", 1.0, "infiniband", cluster=True, min_gpus=16, max_gpus=64, min_term_days=10
    )
    inputs = problem(
        months=1,
        capex=1000,
        gpus=[gpu(price=EXPENSIVE)],
        offers=[block, fabric_offer("b-g1", 2.0, "infiniband")],
        train=[train_job()],
    )
    m, res = solve(inputs, candidates(inputs, train={"job": [("g1", 16, hours)]}))
    plan = extract_plan(m, res)
    assert {a.source for a in plan.train_allocations} == {expected_offer}
    price = 1.0 if expected_offer == "a-block" else 2.0
    assert res.objective == pytest.approx(16 * hours * price)
