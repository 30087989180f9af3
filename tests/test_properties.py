"""Tests that could catch a wrong optimum.

1. Brute force: hypothesis draws tiny problems (1-2 GPU types, 1-3 months, one serving
   workload at utilization 1 or one training job, 0-2 offers, injected candidates) and the
   model's optimum must equal an exhaustive search written here without the model: every
   purchase schedule in a small range, each completed by hand at its cheapest (per month:
   owned replicas 0..owned, the rest in whole rented replicas, every count within the offers'
   caps tried; for training that may split, owned hours where they are cheaper than renting,
   the rest rented at the cheapest eligible offer; for a run kept in one place, all owned or
   all rented).
2. Metamorphic properties on real physics (small problems through ``load_problem_text``):
   a larger budget never costs more, more traffic never costs less, removing a GPU type never
   costs less, CBC and HiGHS agree within the gap, the same problem gives the same plan.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.base.errors import InfeasibleError
from planner.inputs.problem import load_problem_text
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.plan.make import plan_problem
from tests.factories import candidates, gpu, offer, problem, serve_workload, train_job

H = 730.0
SETTINGS = dict(
    deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def _solve(inputs, cands, solver="cbc"):
    m = build_model(inputs, cands)
    return solve_model(m, solver=solver, time_limit=30, gap=1e-9)


# ---------------------------------------------------------------- brute force, serving


@st.composite
def serving_case(draw):
    months = draw(st.integers(1, 3))
    n_gpus = draw(st.integers(1, 2))
    gpus, rates = [], {}
    for i in range(n_gpus):
        gid = f"g{i + 1}"
        idle = draw(st.sampled_from([0.0, 100.0]))
        gpus.append(
            dict(
                gid=gid,
                price=float(draw(st.integers(5, 60)) * 100),
                overhead=draw(st.sampled_from([0.0, 250.0])),
                node=draw(st.sampled_from([1, 1, 2])),
                tdp=idle + draw(st.sampled_from([0.0, 300.0, 600.0])),
                idle=idle,
                host=draw(st.sampled_from([0.0, 200.0])),
                consumer=draw(st.sampled_from([False, False, False, True])),
            )
        )
        rates[gid] = draw(st.sampled_from([0.5, 1.0, 1.7]))
    offers = []
    for j in range(draw(st.integers(0, 2))):
        offers.append(
            dict(
                oid=f"cloud{j}-o",
                gid=draw(st.sampled_from([g["gid"] for g in gpus])),
                price=draw(st.sampled_from([0.3, 0.8, 1.5, 3.0])),
                cap=draw(st.sampled_from([None, None, 1, 2])),
            )
        )
    # demand >= the largest rate, so a plan always runs >= 1 whole replica (serve floor slack)
    rps = max(rates.values()) + draw(st.integers(0, 25)) / 10
    growth = draw(st.sampled_from([0.0, 0.0, 0.5]))
    capex = draw(st.sampled_from([1e9, 1e9, float(draw(st.integers(0, 15)) * 1000)]))
    power_cap = draw(st.sampled_from([None, None, 0.5, 1.5]))
    site = dict(
        power_price=draw(st.sampled_from([0.0, 0.1, 0.4])),
        pue=draw(st.sampled_from([1.0, 1.5])),
        hosting=draw(st.sampled_from([0.0, 40.0])),
        consumer_ok=draw(st.booleans()),
    )
    return dict(
        months=months,
        gpus=gpus,
        rates=rates,
        offers=offers,
        rps=rps,
        growth=growth,
        capex=capex,
        power_cap=power_cap,
        site=site,
    )


def _build_serving(case):
    gpus = [
        gpu(
            g["gid"],
            price=g["price"],
            overhead=g["overhead"],
            node=g["node"],
            tdp=g["tdp"],
            idle=g["idle"],
            host=g["host"],
            consumer=g["consumer"],
        )
        for g in case["gpus"]
    ]
    offers = [
        offer(o["oid"], o["gid"], o["price"], **({"max_gpus": o["cap"]} if o["cap"] else {}))
        for o in case["offers"]
    ]
    w = serve_workload(rps=case["rps"], util=1.0)
    w["traffic"]["growth_per_month"] = case["growth"]
    s = case["site"]
    inputs = problem(
        months=case["months"],
        capex=case["capex"],
        power_price=s["power_price"],
        pue=s["pue"],
        hosting=s["hosting"],
        power_cap=case["power_cap"],
        consumer_ok=s["consumer_ok"],
        offers=offers,
        serve=[w],
        gpus=gpus,
    )
    cands = candidates(
        inputs, serve={"chat": [(g["gid"], 1, case["rates"][g["gid"]]) for g in case["gpus"]]}
    )
    return inputs, cands


def _brute_serving(case) -> float | None:
    """Cheapest plan by exhaustive search (None: no plan)."""
    s = case["site"]
    e = s["power_price"] * s["pue"] / 1000
    T = case["months"]
    g_ids = [g["gid"] for g in case["gpus"]]
    spec = {g["gid"]: g for g in case["gpus"]}
    rate = case["rates"]
    demand = [case["rps"] * (1 + case["growth"]) ** t for t in range(T)]
    # rental options: whole replicas (tp = 1) at the offer's price per hour, up to its cap
    rent = [(o["price"], rate[o["gid"]], o["cap"]) for o in case["offers"]]

    def rent_cost(left: float) -> float | None:
        """Cheapest whole rented replicas giving ``left`` req/s (None: the caps forbid it)."""
        if left <= 1e-9:
            return 0.0
        ranges = [
            range(0, min(cap if cap else 10**6, math.ceil(left / mu - 1e-9)) + 1)
            for _, mu, cap in rent
        ]
        best = None
        for counts in itertools.product(*ranges):
            if sum(c * mu for c, (_, mu, _) in zip(counts, rent, strict=True)) < left - 1e-9:
                continue
            cost = sum(c * p * H for c, (p, _, _) in zip(counts, rent, strict=True))
            best = cost if best is None else min(best, cost)
        return best

    def month_cost(t: int, own: tuple[int, ...]) -> float | None:
        best = None
        ranges = [range(0, own[i] + 1) for i in range(len(g_ids))]
        for ns in itertools.product(*ranges):
            have = sum(n * rate[g] for n, g in zip(ns, g_ids, strict=True))
            busy = sum(
                n * (spec[g]["tdp"] - spec[g]["idle"]) * e * H
                for n, g in zip(ns, g_ids, strict=True)
            )
            rented = rent_cost(demand[t] - have)
            if rented is None:
                continue
            cost = busy + rented
            best = cost if best is None else min(best, cost)
        return best

    max_nodes = {g: math.ceil(max(demand) / rate[g] / spec[g]["node"]) for g in g_ids}
    # per GPU type, every schedule of node purchases over the months; more in total than
    # enough for the peak never helps; a consumer card where the site forbids them, never
    schedules = [
        [
            b
            for b in itertools.product(range(max_nodes[g] + 1), repeat=T)
            if sum(b) <= max_nodes[g]
            and not (spec[g]["consumer"] and not s["consumer_ok"] and sum(b))
        ]
        for g in g_ids
    ]

    def per_type(g: str, b: tuple[int, ...]):
        """One type's schedule: its capex, its GPUs owned and their kW per month, and the
        horizon's cost of owning them (idle power, host power, hosting)."""
        node = spec[g]["node"]
        capex = sum(n * node * (spec[g]["price"] + spec[g]["overhead"]) for n in b)
        own = [node * sum(b[: t + 1]) for t in range(T)]
        kw = [o * (spec[g]["tdp"] + spec[g]["host"]) * s["pue"] / 1000 for o in own]
        fixed = sum(o * (H * (spec[g]["idle"] + spec[g]["host"]) * e + s["hosting"]) for o in own)
        return capex, own, kw, fixed

    options = [[per_type(g, b) for b in schedules[i]] for i, g in enumerate(g_ids)]
    cap = case["power_cap"]
    cache: dict = {}
    best = None
    for combo in itertools.product(*options):
        capex = sum(c[0] for c in combo)
        if capex > case["capex"] + 1e-6:
            continue
        if cap is not None and any(sum(c[2][t] for c in combo) > cap + 1e-9 for t in range(T)):
            continue
        total = capex + sum(c[3] for c in combo)
        for t in range(T):
            key = (t, tuple(c[1][t] for c in combo))
            if key not in cache:
                cache[key] = month_cost(t, key[1])
            if cache[key] is None:
                break
            total += cache[key]
        else:
            best = total if best is None else min(best, total)
    return best


@settings(max_examples=45, **SETTINGS)
@given(serving_case())
def test_serving_optimum_matches_brute_force(case):
    inputs, cands = _build_serving(case)
    expected = _brute_serving(case)
    res = _solve(inputs, cands)
    if expected is None:
        assert res.status == "infeasible", (res, case)
    else:
        assert res.status == "optimal", (res, case)
        assert res.objective == pytest.approx(expected, rel=1e-6, abs=1e-4), case


# ---------------------------------------------------------------- brute force, training


@st.composite
def training_case(draw):
    months = draw(st.integers(1, 3))
    a = draw(st.integers(0, months - 1))
    b = draw(st.integers(a, months - 1))
    window_h = (b - a + 1) * H
    n_gpus = draw(st.integers(1, 2))
    gpus, cands = [], []
    for i in range(n_gpus):
        gid = f"g{i + 1}"
        idle = draw(st.sampled_from([0.0, 100.0]))
        gpus.append(
            dict(
                gid=gid,
                price=float(draw(st.integers(2, 40)) * 100),
                node=draw(st.sampled_from([1, 2])),
                tdp=idle + draw(st.sampled_from([0.0, 400.0])),
                idle=idle,
                host=draw(st.sampled_from([0.0, 150.0])),
            )
        )
        k = draw(st.sampled_from([1, 2, 4]))
        hours = float(draw(st.integers(1, int(window_h) // 10)) * 10)
        cands.append((gid, k, hours))
    offers = []
    for j in range(draw(st.integers(0, 2))):
        offers.append(
            dict(
                oid=f"cloud{j}-o",
                gid=draw(st.sampled_from([g["gid"] for g in gpus])),
                price=draw(st.sampled_from([0.2, 0.7, 2.0])),
                unit=draw(st.sampled_from([1, 2, 8])),
                cap=draw(st.sampled_from([None, None, 2, 8])),
            )
        )
        if offers[-1]["cap"] is not None:  # a cap holds at least one instance (else bad input)
            offers[-1]["cap"] = max(offers[-1]["cap"], offers[-1]["unit"])
    return dict(
        months=months,
        window=(a, b),
        gpus=gpus,
        cands=cands,
        offers=offers,
        capex=draw(st.sampled_from([1e9, float(draw(st.integers(0, 8)) * 1000)])),
        power_price=draw(st.sampled_from([0.0, 0.2, 2.0])),
        hosting=draw(st.sampled_from([0.0, 30.0])),
        providers=draw(st.sampled_from(["single", "split"])),
    )


def _build_training(case):
    gpus = [
        gpu(
            g["gid"], price=g["price"], node=g["node"], tdp=g["tdp"], idle=g["idle"], host=g["host"]
        )
        for g in case["gpus"]
    ]
    offers = [
        offer(
            o["oid"],
            o["gid"],
            o["price"],
            gpus_per_instance=o["unit"],
            **({"max_gpus": o["cap"]} if o["cap"] else {}),
        )
        for o in case["offers"]
    ]
    a, b = case["window"]
    label = ["2027-01", "2027-02", "2027-03"]
    job = train_job(
        start=label[a], deadline=label[b], spot={"allowed": False}, providers=case["providers"]
    )
    inputs = problem(
        months=case["months"],
        capex=case["capex"],
        power_price=case["power_price"],
        hosting=case["hosting"],
        offers=offers,
        train=[job],
        gpus=gpus,
    )
    return inputs, candidates(inputs, train={"job": case["cands"]})


def _brute_training(case) -> float | None:
    e = case["power_price"] / 1000  # PUE 1
    T = case["months"]
    a, b = case["window"]
    spec = {g["gid"]: g for g in case["gpus"]}
    g_ids = list(spec)
    best = None
    max_nodes = {
        g: max(math.ceil(k / spec[g]["node"]) for gg, k, _ in case["cands"] if gg == g)
        if any(gg == g for gg, _, _ in case["cands"])
        else 0
        for g in g_ids
    }
    per_slot = [range(0, max_nodes[g] + 1) for g in g_ids for _ in range(T)]
    for buys in itertools.product(*per_slot):
        nodes = {g: buys[i * T : (i + 1) * T] for i, g in enumerate(g_ids)}
        if any(sum(nodes[g]) > max_nodes[g] for g in g_ids):
            continue
        capex = sum(n * spec[g]["node"] * spec[g]["price"] for g in g_ids for n in nodes[g])
        if capex > case["capex"] + 1e-6:
            continue
        own = {(g, t): spec[g]["node"] * sum(nodes[g][: t + 1]) for g in g_ids for t in range(T)}
        fixed = capex + sum(
            own[(g, t)] * (H * (spec[g]["idle"] + spec[g]["host"]) * e + case["hosting"])
            for g in g_ids
            for t in range(T)
        )
        job_best = None
        for g, k, hours in case["cands"]:
            owned_hours = H * sum(1 for t in range(a, b + 1) if own[(g, t)] >= k)
            own_rate = k * (spec[g]["tdp"] - spec[g]["idle"]) * e  # $ per wall hour on owned GPUs
            rent_rates = [
                o["price"] * math.ceil(k / o["unit"]) * o["unit"]
                for o in case["offers"]
                if o["gid"] == g
                and o["unit"] >= min(k, 8)
                and (o["cap"] is None or math.ceil(k / o["unit"]) * o["unit"] <= o["cap"])
            ]
            rent_rate = min(rent_rates, default=None)
            x = min(hours, owned_hours)
            options = []
            if owned_hours >= hours - 1e-9:
                options.append(hours * own_rate)  # all on owned GPUs
            if rent_rate is not None:
                options.append(hours * rent_rate)  # all rented
                if case["providers"] == "split":
                    options.append(x * own_rate + (hours - x) * rent_rate)
            if not options:
                continue
            cost = min(options)
            job_best = cost if job_best is None else min(job_best, cost)
        if job_best is None:
            continue
        total = fixed + job_best
        best = total if best is None else min(best, total)
    return best


@settings(max_examples=35, **SETTINGS)
@given(training_case())
def test_training_optimum_matches_brute_force(case):
    inputs, cands = _build_training(case)
    expected = _brute_training(case)
    res = _solve(inputs, cands)
    if expected is None:
        assert res.status == "infeasible", (res, case)
    else:
        assert res.status == "optimal", (res, case)
        assert res.objective == pytest.approx(expected, rel=1e-6, abs=1e-4), case


def test_brute_force_agrees_with_a_hand_computed_case():
    """The brute force itself, on a case computed by hand: buy 2 at $1,000 or rent at $1/h."""
    case = dict(
        months=2,
        gpus=[
            dict(
                gid="g1",
                price=1000.0,
                overhead=0.0,
                node=1,
                tdp=0.0,
                idle=0.0,
                host=0.0,
                consumer=False,
            )
        ],
        rates={"g1": 1.0},
        offers=[dict(oid="c-o", gid="g1", price=1.0, cap=None)],
        rps=2.5,
        growth=0.0,
        capex=1e9,
        power_cap=None,
        site=dict(power_price=0.0, pue=1.0, hosting=0.0, consumer_ok=False),
    )
    # b GPUs bought: b * 1000 + ceil(2.5 - b) whole replicas x 1.0 x 730 x 2; 3 GPUs: 3000
    expected = min(b * 1000 + max(0, math.ceil(2.5 - b)) * 1460 for b in range(4))
    assert _brute_serving(case) == pytest.approx(expected)
    inputs, cands = _build_serving(case)
    assert _solve(inputs, cands).objective == pytest.approx(expected)


# ---------------------------------------------------------------- metamorphic, real physics


def _text(dau=20000, capex=30000, gpus=("l4", "a100-pcie-80gb"), power_cap=None, train=True):
    cap = f", power_cap_kw: {power_cap}" if power_cap else ""
    job = (
        """
  train:
    - name: tune
      model: llama-2-7b
      tokens: 2e8
      method: lora
      window: {start: 2027-02, deadline: 2027-03}"""
        if train
        else ""
    )
    return f"""
name: metamorphic
horizon: {{start: 2027-01, months: 3}}
budget: {{capex_usd: {capex}}}
site: {{power_usd_per_kwh: 0.15, pue: 1.3, hosting_usd_per_gpu_month: 40{cap}}}
gpus: [{", ".join(gpus)}]
offers:
  files: []
  extra:
    - {{id: cloud-l4-8x, provider: cloud, gpu: l4, kind: on_demand, usd_per_gpu_hour: 0.85,
       gpus_per_instance: 8, source: test, as_of: 2026-11}}
    - {{id: cloud-a100-1x, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 1.6, source: test, as_of: 2026-11}}
    - {{id: cloud-a100-8x, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 1.9, gpus_per_instance: 8, max_gpus: 16, source: test, as_of: 2026-11}}
workloads:{job}
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {{daily_active_users: {dau}, requests_per_user_per_day: 20, utilization: 0.5,
                growth_per_month: 0.1}}
      tokens: {{prompt: 500, output: 250}}
      slo: {{p95_ttft_ms: 1000, p95_tpot_ms: 60}}
"""


GAP = 1e-6


def _cost(text, solver="cbc"):
    try:
        return plan_problem(
            load_problem_text(text, "m.yaml"), solver=solver, gap=GAP, diagnose=False
        ).totals.total_usd
    except InfeasibleError:
        return math.inf


def _le(a, b):
    """a <= b up to the solver gap."""
    return a <= b * (1 + 2 * GAP) + 1e-6


@settings(max_examples=6, **SETTINGS)
@given(
    st.integers(0, 60).map(lambda k: k * 1000),
    st.integers(1, 30).map(lambda k: k * 1000),
    st.sampled_from([5000, 20000, 60000]),
)
def test_larger_budget_never_costs_more(capex, more, dau):
    assert _le(_cost(_text(dau=dau, capex=capex + more)), _cost(_text(dau=dau, capex=capex)))


@settings(max_examples=6, **SETTINGS)
@given(
    st.sampled_from([2000, 10000, 30000, 80000]),
    st.sampled_from([1.2, 2.0]),
    st.sampled_from([0, 15000, 60000]),
)
def test_more_traffic_never_costs_less(dau, factor, capex):
    assert _le(_cost(_text(dau=dau, capex=capex)), _cost(_text(dau=int(dau * factor), capex=capex)))


@pytest.mark.parametrize("dau,capex", [(5000, 0), (20000, 30000), (60000, 100000)])
def test_removing_a_gpu_type_never_costs_less(dau, capex):
    both = _cost(_text(dau=dau, capex=capex))
    for only in (("l4",), ("a100-pcie-80gb",)):
        assert _le(both, _cost(_text(dau=dau, capex=capex, gpus=only)))


@pytest.mark.parametrize(
    "dau,capex,power", [(20000, 30000, None), (60000, 100000, 2.0), (8000, 0, None)]
)
def test_cbc_and_highs_agree(dau, capex, power):
    text = _text(dau=dau, capex=capex, power_cap=power)
    a, b = _cost(text, "cbc"), _cost(text, "highs")
    assert a == pytest.approx(b, rel=1e-4)


def test_same_problem_same_plan():
    text = _text(dau=30000, capex=40000)

    def decisions(plan):
        d = plan.model_dump(exclude={"solve_seconds", "assumptions", "message", "gap"})
        return d

    one = plan_problem(load_problem_text(text, "m.yaml"))
    two = plan_problem(load_problem_text(text, "m.yaml"))
    assert decisions(one) == decisions(two)
