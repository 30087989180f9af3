"""Independent verification catches a tampered plan.

A real plan (problems/2m_budget.yaml: purchases, on-demand and spot rentals, training and
serving) and a small plan with reservations are solved once; each test tampers with a copy
and checks that ``verify_plan`` names the violation, and that the CLI exits 1 (0 when intact).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from planner.base.errors import ExitCode
from planner.cli import cli
from planner.inputs.problem import load_problem_text
from planner.plan.data import Plan, write_json
from planner.plan.make import plan_problem
from planner.verify import verify_plan, verify_report

ROOT = Path(__file__).resolve().parent.parent
BUDGET = ROOT / "tests" / "fixtures" / "buying.yaml"  # the reference, at a size that buys

RESERVED = """
name: reserved and on-demand L4s
horizon: {start: 2027-01, months: 4}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.12}
gpus: [l4]
offers:
  files: []
  extra:
    - {id: cloud-l4-od, provider: cloud, gpu: l4, kind: on_demand, usd_per_gpu_hour: 1.0,
       gpus_per_instance: 8, source: test, as_of: 2026-11}
    - {id: cloud-l4-2m, provider: cloud, gpu: l4, kind: reserved, term_months: 2,
       usd_per_gpu_hour: 0.4, gpus_per_instance: 8, source: test, as_of: 2026-11}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 20000, requests_per_user_per_day: 20, utilization: 0.5}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
"""


@pytest.fixture(scope="module")
def solved():
    from tests.solved import solved as shared

    return shared(BUDGET)  # solved once per test process, shared with test_verify_families


@pytest.fixture(scope="module")
def reserved():
    inputs = load_problem_text(RESERVED, "reserved.yaml")
    plan = plan_problem(inputs)
    assert plan.reservations, "the fixture must use a reservation"
    return inputs, plan


def _copy(plan: Plan) -> Plan:
    return plan.model_copy(deep=True)


def _has(errs: list[str], *parts: str) -> bool:
    return any(all(p in e for p in parts) for e in errs)


def test_intact_plans_verify(solved, reserved):
    for inputs, plan in (solved, reserved):
        rep = verify_report(inputs, plan)
        assert rep.errors == []
        assert rep.total_usd == pytest.approx(plan.totals.total_usd, rel=1e-9)
        assert rep.checks > 100
        # and after a JSON round trip
        again = Plan.model_validate_json(plan.to_json())
        assert verify_plan(inputs, again) == []


def test_plan_shape_sanity(solved):
    _, plan = solved
    assert plan.purchases and plan.rentals and plan.train_allocations and plan.serve_allocations
    assert {r.kind for r in plan.rentals} >= {"on_demand"}


# ---------------------------------------------------------------- tampering, one way at a time


def test_removed_purchase(solved):
    inputs, plan = solved
    bad = _copy(plan)
    gone = bad.purchases.pop(0)
    errs = verify_plan(inputs, bad)
    assert _has(errs, "owned", gone.gpu)  # allocations use GPUs the plan no longer owns
    assert _has(errs, "totals.capex_usd")
    assert _has(errs, f"fleet {gone.gpu}")


def test_purchase_not_whole_nodes_and_price(solved):
    inputs, plan = solved
    bad = _copy(plan)
    h100 = inputs.gpus["h100-sxm"]
    bad.purchases.append(
        bad.purchases[0].model_copy(
            update={"gpu": "h100-sxm", "count": 3, "nodes": 1, "unit_usd": 1.0, "total_usd": 3.0}
        )
    )
    errs = verify_plan(inputs, bad)
    assert _has(errs, "not a whole number of 8-GPU nodes")
    assert _has(
        errs, "total 3.00 !=", f"{h100.chassis_usd:,.2f}", f"{h100.purchase_usd.value:,.2f}"
    )


def test_consumer_card_purchase_breaks_licence(solved):
    inputs, plan = solved
    bad = _copy(plan)
    g = inputs.gpus["rtx-4090"]
    bad.purchases.append(
        bad.purchases[0].model_copy(
            update={
                "gpu": "rtx-4090",
                "count": 1,
                "nodes": 1,
                "unit_usd": g.unit_capex_usd,
                "gpu_usd": g.purchase_usd.value,
                "overhead_usd": g.server_overhead_usd_per_gpu.value,
                "total_usd": g.unit_capex_usd,
            }
        )
    )
    assert _has(verify_plan(inputs, bad), "GeForce", "consumer_gpus_allowed")


def test_lowered_rental_hours(solved):
    inputs, plan = solved
    bad = _copy(plan)
    i = next(i for i, r in enumerate(bad.rentals) if r.kind != "reserved")
    r = bad.rentals[i]
    bad.rentals[i] = r.model_copy(update={"gpu_hours": r.gpu_hours * 0.9, "usd": r.usd * 0.9})
    errs = verify_plan(inputs, bad)
    assert _has(
        errs, f"rental {r.offer} for {r.workload} in {r.month}", "GPU-h billed, allocations use"
    )


def test_changed_rental_price(solved):
    inputs, plan = solved
    bad = _copy(plan)
    r = bad.rentals[0]
    bad.rentals[0] = r.model_copy(
        update={"usd_per_gpu_hour": r.usd_per_gpu_hour * 0.5, "usd": r.usd * 0.5}
    )
    errs = verify_plan(inputs, bad)
    assert _has(errs, f"rental {r.offer}", "!= offer price")
    assert _has(errs, f"rental {r.offer}", "h x")  # usd no longer hours x the offer's price


def test_changed_offer_price_in_problem(solved):
    """The same plan against a problem whose offer got dearer: the price no longer matches."""
    inputs, plan = solved
    oid = plan.rentals[0].offer
    offers = dict(inputs.offers)
    offers[oid] = offers[oid].model_copy(
        update={"usd_per_gpu_hour": offers[oid].usd_per_gpu_hour + 1}
    )
    errs = verify_plan(dataclasses.replace(inputs, offers=offers), plan)
    assert _has(errs, f"rental {oid}", "!= offer price")


def test_dropped_serving_allocation(solved):
    inputs, plan = solved
    bad = _copy(plan)
    al = max(bad.serve_allocations, key=lambda a: a.replicas * a.rate_rps_per_replica)
    bad.serve_allocations.remove(al)
    errs = verify_plan(inputs, bad)
    assert _has(errs, f"serving {al.workload} {al.month} {al.slice}: capacity", "< demand")


def test_workload_model_and_gpus_must_be_the_plans(solved):
    """A result naming another model, or GPU types its allocations do not use, is caught:
    page 1 and the workbook read both."""
    inputs, plan = solved
    bad = _copy(plan)
    wr = bad.workloads[0]
    wr.model, wr.gpu = "llama-70b", [*wr.gpu, "b200"]
    errs = verify_plan(inputs, bad)
    assert _has(errs, f"workload {wr.name}: model 'llama-70b' is not the problem's")
    assert _has(errs, f"workload {wr.name}: GPU types", "are not those its allocations use")


def test_fractional_owned_replicas(solved):
    inputs, plan = solved
    bad = _copy(plan)
    i = next(i for i, a in enumerate(bad.serve_allocations) if a.source == "owned")
    bad.serve_allocations[i] = bad.serve_allocations[i].model_copy(
        update={"replicas": bad.serve_allocations[i].replicas + 0.5}
    )
    assert _has(verify_plan(inputs, bad), "replicas is not a whole number")


def test_inflated_replica_rate(solved):
    inputs, plan = solved
    bad = _copy(plan)
    for i, a in enumerate(bad.serve_allocations):
        bad.serve_allocations[i] = a.model_copy(
            update={"rate_rps_per_replica": a.rate_rps_per_replica * 2}
        )
    errs = verify_plan(inputs, bad)
    assert _has(errs, "req/s per", "physics says", "more like it")
    assert len(errs) < 30  # repeated violations are folded into one line each


def test_tensor_parallel_replica_on_small_instances(solved):
    inputs, plan = solved
    one_gpu = next(
        o
        for o in inputs.offers.values()
        if o.gpu == "h100-sxm" and o.gpus_per_instance == 1 and o.kind == "on_demand"
    )
    bad = _copy(plan)
    i = next(
        i
        for i, a in enumerate(bad.serve_allocations)
        if a.gpus_per_replica > 1 and a.gpu == "h100-sxm"
    )
    bad.serve_allocations[i] = bad.serve_allocations[i].model_copy(update={"source": one_gpu.id})
    assert _has(verify_plan(inputs, bad), f"on {one_gpu.id}", "whose instances hold 1 GPUs")


def test_training_moved_outside_window(solved):
    inputs, plan = solved
    bad = _copy(plan)
    a = bad.train_allocations[0]
    bad.train_allocations[0] = a.model_copy(update={"month": "2027-06"})
    errs = verify_plan(inputs, bad)
    assert _has(errs, f"training {a.workload} 2027-06", "outside its window 2027-01..2027-04")
    assert _has(errs, "of progress <")


def test_training_on_single_gpu_instances(solved):
    inputs, plan = solved
    bad = _copy(plan)
    i = next(i for i, a in enumerate(bad.train_allocations) if a.source != "owned")
    gpu = bad.train_allocations[i].gpu
    small = next(
        o
        for o in inputs.offers.values()
        if o.gpu == gpu and o.gpus_per_instance < 8 and o.kind != "reserved"
    )
    bad.train_allocations[i] = bad.train_allocations[i].model_copy(update={"source": small.id})
    assert _has(verify_plan(inputs, bad), f"on {small.id}", "instances of at least min(k, 8) GPUs")


def test_training_short_of_progress(solved):
    inputs, plan = solved
    bad = _copy(plan)
    a = bad.train_allocations[0]
    bad.train_allocations[0] = a.model_copy(
        update={"wall_hours": a.wall_hours / 2, "progress_hours": a.progress_hours / 2}
    )
    errs = verify_plan(inputs, bad)
    assert _has(errs, "h of progress <", "needed on")


def test_capex_budget_exceeded(solved):
    inputs, plan = solved
    capex = plan.totals.capex_usd
    assert capex > 0
    tight = inputs.problem.model_copy(
        update={"budget": inputs.problem.budget.model_copy(update={"capex_usd": capex / 2})}
    )
    errs = verify_plan(dataclasses.replace(inputs, problem=tight), plan)
    assert _has(errs, "exceeds budget.capex_usd")


def test_total_budget_and_power_cap_exceeded(solved):
    inputs, plan = solved
    p = inputs.problem
    tight = p.model_copy(
        update={
            "budget": p.budget.model_copy(update={"total_usd": plan.totals.total_usd / 2}),
            "site": p.site.model_copy(update={"power_cap_kw": 0.1}),
        }
    )
    errs = verify_plan(dataclasses.replace(inputs, problem=tight), plan)
    assert _has(errs, "exceeds budget.total_usd")
    assert _has(errs, "owned fleet draws", "site.power_cap_kw")


def test_tampered_totals_objective_and_cash_flow(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.totals.total_usd += 1000
    bad.objective_usd = (bad.objective_usd or 0) - 1000
    bad.cash_flow[3].power_usd += 50
    errs = verify_plan(inputs, bad)
    assert _has(errs, "totals.total_usd")
    assert _has(errs, "solver objective")
    assert _has(errs, f"cash flow {bad.cash_flow[3].month}: power+hosting")


def test_tampered_fleet(solved):
    inputs, plan = solved
    bad = _copy(plan)
    i = next(i for i, f in enumerate(bad.fleet) if f.owned > 0)
    bad.fleet[i] = bad.fleet[i].model_copy(update={"owned": bad.fleet[i].owned + 8})
    assert _has(
        verify_plan(inputs, bad),
        f"fleet {bad.fleet[i].gpu} {bad.fleet[i].month}",
        "the purchases give",
    )


def test_workload_target_claims(solved):
    inputs, plan = solved
    bad = _copy(plan)
    w = next(w for w in bad.workloads if w.kind == "serve")
    w.predicted["p95_ttft_ms"] = 1.0
    t = next(w for w in bad.workloads if w.kind == "train")
    t.target["wall_hours"] = 1e9
    errs = verify_plan(inputs, bad)
    assert _has(errs, f"serving {w.name}: predicted")
    assert _has(errs, f"training {t.name}: target")
    bad2 = _copy(plan)
    bad2.workloads = [w for w in bad2.workloads if w.kind != "serve"]
    assert _has(verify_plan(inputs, bad2), "expected one serving result, found 0")


def test_allocation_for_unknown_workload_and_bad_month(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.serve_allocations.append(bad.serve_allocations[0].model_copy(update={"workload": "ghost"}))
    bad.rentals[0] = bad.rentals[0].model_copy(update={"month": "2031-13"})
    bad.purchases[0] = bad.purchases[0].model_copy(update={"month": "1999-01"})
    errs = verify_plan(inputs, bad)
    assert _has(errs, "'ghost', which is not a serving workload")
    assert _has(errs, "month '2031-13' is not in the horizon")
    assert _has(errs, "month '1999-01' is not in the horizon")


def test_reservation_tampering(reserved):
    inputs, plan = reserved
    rv = plan.reservations[0]
    # a shorter term than the offer's
    bad = _copy(plan)
    bad.reservations[0] = rv.model_copy(update={"term_months": 1})
    assert _has(verify_plan(inputs, bad), "term 1 months != the offer's 2")
    # a dropped reservation: reserved capacity used but not committed, not billed
    bad = _copy(plan)
    bad.reservations.pop(0)
    errs = verify_plan(inputs, bad)
    assert _has(errs, "GPUs used on reserved", "committed")
    assert _has(errs, "GPU-h billed, the reservations commit")
    # a reserved month not billed
    bad = _copy(plan)
    i = next(i for i, r in enumerate(bad.rentals) if r.kind == "reserved")
    bad.rentals.pop(i)
    assert _has(verify_plan(inputs, bad), "the reservations commit")
    # whole instances only
    bad = _copy(plan)
    bad.reservations[0] = rv.model_copy(update={"gpus": 4, "usd": rv.usd / 2})
    assert _has(verify_plan(inputs, bad), "not a whole number of 8-GPU instances")


def test_random_tampering_never_crashes(solved):
    """Random numeric changes anywhere in the plan: verify returns violations, never raises."""
    inputs, plan = solved
    rng = random.Random(1234)
    data = plan.model_dump()
    lists = [
        "purchases",
        "rentals",
        "serve_allocations",
        "train_allocations",
        "fleet",
        "cash_flow",
        "reservations",
    ]
    caught = 0
    for _ in range(60):
        # a copy of the one row changed (the plan's JSON-like dump is never changed in place; a
        # deep copy of the whole dump took ~1 s of the test's ~4 s), drawn as before:
        # rng.choice(rows) and rows[rng.randrange(len(rows))] draw alike
        d = dict(data)
        name = rng.choice([x for x in lists if d[x]])
        rows = d[name] = list(d[name])
        i = rng.randrange(len(rows))
        row = rows[i] = dict(rows[i])
        keys = [k for k, v in row.items() if isinstance(v, int | float) and not isinstance(v, bool)]
        if not keys:
            continue
        k = rng.choice(keys)
        if isinstance(row[k], int):
            row[k] = rng.choice([0, -1, row[k] + 1, 10**9])
        else:
            row[k] = rng.choice([0.0, -1.0, row[k] * 1.5 + 1, float("nan"), float("inf"), 1e9])
        try:
            tampered = Plan.model_validate(d)
        except ValidationError:  # outside every plan's range: refused on reading
            caught += 1
            continue
        errs = verify_plan(inputs, tampered)
        assert isinstance(errs, list)
        caught += bool(errs)
    assert caught >= 50


# ---------------------------------------------------------------- the CLI


def test_cli_verify_ok_and_failed(solved, tmp_path):
    inputs, plan = solved
    good = tmp_path / "plan.json"
    write_json(plan, good)
    r = CliRunner().invoke(cli, ["verify", str(BUDGET), str(good)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("OK: ") and "recomputed total $" in r.output
    assert len(r.output.strip().splitlines()) == 1
    bad = _copy(plan)
    bad.purchases.pop(0)
    badp = tmp_path / "bad.json"
    write_json(bad, badp)
    r = CliRunner().invoke(cli, ["verify", str(BUDGET), str(badp)])
    assert r.exit_code == ExitCode.VERIFY_FAILED == 4
    assert "FAILED" in r.output and "totals.capex_usd" in r.output
    assert "Traceback" not in r.output
