"""Each family of verification checks catches what belongs to it, and only that.

The plans of ``tests/test_verify.py`` (problems/2m_budget.yaml, and a small problem with a
reservation) are solved once; each test breaks one thing a family checks and asserts that the
plan fails, that this family complains and that no other family does.

A natural tamper often trips two families: a purchase of a count that is not a whole number of
nodes also changes the capex (money) and the owned fleet (fleet table, caps). The tampers below
change a figure that only one family reads; each says why when it is not the obvious one.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest

from planner.inputs.problem import Inputs, load_problem_text
from planner.plan.data import Plan
from planner.plan.make import plan_problem
from planner.verify import (
    FAMILIES,
    Finding,
    VerifyContext,
    check_caps,
    check_existing,
    check_money,
    check_purchases,
    check_rentals,
    check_serving,
    check_shape,
    check_training,
    check_workloads,
    verify_report,
)
from tests.test_verify import BUDGET, RESERVED

BY_NAME = {
    "shape": check_shape,
    "purchases": check_purchases,
    "serving": check_serving,
    "training": check_training,
    "caps": check_caps,
    "rentals": check_rentals,
    "money": check_money,
    "existing": check_existing,
    "workloads": check_workloads,
}


@pytest.fixture(scope="module")
def solved() -> tuple[Inputs, Plan]:
    from tests.solved import solved as shared

    return shared(BUDGET)  # solved once per test process, shared with tests/test_verify.py


@pytest.fixture(scope="module")
def reserved() -> tuple[Inputs, Plan]:
    inputs = load_problem_text(RESERVED, "reserved.yaml")
    plan = plan_problem(inputs)
    assert plan.reservations, "the fixture must use a reservation"
    return inputs, plan


def _copy(plan: Plan) -> Plan:
    return plan.model_copy(deep=True)


def _with_problem(inputs: Inputs, **update: object) -> Inputs:
    return dataclasses.replace(inputs, problem=inputs.problem.model_copy(update=update))


def _only(inputs: Inputs, plan: Plan, family: str, *parts: str) -> list[str]:
    """Assert that ``plan`` fails, only ``family`` complains, and one complaint has ``parts``."""
    rep = verify_report(inputs, plan)
    assert not rep.ok
    assert rep.errors == [f.message for f in rep.findings]
    by_family: dict[str, list[str]] = defaultdict(list)
    for f in rep.findings:
        by_family[f.family].append(f.message)
    assert set(by_family) == {family}, dict(by_family)
    assert any(all(p in m for p in parts) for m in by_family[family]), by_family[family]
    # the family functions, called directly, agree with the report
    ctx = VerifyContext.from_inputs(inputs, plan)
    for name, check in BY_NAME.items():
        found = check(ctx)
        assert [f.message for f in found] == by_family.get(name, [])
        assert all(f.family == name for f in found)
    return by_family[family]


# ---------------------------------------------------------------- the intact plans


def test_families_cover_the_report_in_order():
    assert list(FAMILIES) == list(BY_NAME.values())


@pytest.mark.parametrize("which", ["solved", "reserved"])
def test_each_family_passes_the_intact_plan(which: str, request: pytest.FixtureRequest):
    inputs, plan = request.getfixturevalue(which)
    ctx = VerifyContext.from_inputs(inputs, plan)
    checks = 0
    for name, check in BY_NAME.items():
        found = check(ctx)
        assert found == [], (name, found)
        # the reserved problem has no training job: nothing for that family to check
        assert found.checks > 0 or (name == "training" and not inputs.problem.workloads.train)
        checks += found.checks
    rep = verify_report(inputs, plan)
    assert rep.ok and rep.findings == []
    assert rep.checks == checks > 100
    assert rep.total_usd == pytest.approx(plan.totals.total_usd, rel=1e-9)


def test_families_do_not_change_the_context(solved):
    """Families only read: running them twice, in any order, gives the same findings."""
    inputs, plan = solved
    bad = _copy(plan)
    bad.purchases.pop(0)  # trips several families
    ctx = VerifyContext.from_inputs(inputs, bad)
    first = {name: list(check(ctx)) for name, check in BY_NAME.items()}
    again = {name: list(check(ctx)) for name, check in reversed(BY_NAME.items())}
    assert first == again
    assert sum(bool(v) for v in first.values()) >= 3


def test_report_lists_families_in_order(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.purchases.pop(0)
    rep = verify_report(inputs, bad)
    seen = list(dict.fromkeys(f.family for f in rep.findings))
    assert len(seen) >= 3
    assert seen == [name for name in BY_NAME if name in seen]


def test_finding_is_frozen():
    f = Finding("money", "totals.power_usd = 1.00 but recomputed 2.00")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.message = "other"  # type: ignore[misc]


# ---------------------------------------------------------------- one family broken at a time


def test_shape_status(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.status = "time_limit"
    _only(inputs, bad, "shape", "plan status is 'time_limit'")


def test_shape_other_horizon_stops_verification(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.months = bad.months[1:]
    errs = _only(inputs, bad, "shape", "differ from the problem's horizon")
    assert len(errs) == 1
    rep = verify_report(inputs, bad)
    assert rep.total_usd == 0.0 and rep.checks < 5


def test_purchases_nodes(solved):
    """The server count: a full server comes with its slots filled, and each server is paid
    (chassis) and powered (host watts), so money sees it too."""
    inputs, plan = solved
    bad = _copy(plan)
    pu = bad.purchases[0]
    slots = inputs.gpus[pu.gpu].slots
    bad.purchases[0] = pu.model_copy(update={"nodes": pu.nodes + 1})
    fam: dict[str, list[str]] = defaultdict(list)
    for f in verify_report(inputs, bad).findings:
        fam[f.family].append(f.message)
    assert set(fam) == {"purchases", "money"}, fam
    assert any(
        f"{pu.nodes + 1} full servers x {slots} slots != {pu.count} GPUs" in e
        for e in fam["purchases"]
    )
    assert any("totals.capex_usd" in e for e in fam["money"])


def test_purchases_fleet_table(solved):
    inputs, plan = solved
    bad = _copy(plan)
    i = next(i for i, f in enumerate(bad.fleet) if f.owned_busy_gpu_hours > 0)
    fm = bad.fleet[i]
    bad.fleet[i] = fm.model_copy(update={"owned_busy_gpu_hours": fm.owned_busy_gpu_hours + 100})
    _only(inputs, bad, "purchases", f"fleet {fm.gpu} {fm.month}", "busy GPU-h")


def test_serving_demand(solved):
    """A stale demand, not a dropped allocation: dropping one also changes busy and rented
    GPU-hours (fleet table, rentals, money)."""
    inputs, plan = solved
    bad = _copy(plan)
    al = bad.serve_allocations[0]
    bad.serve_allocations[0] = al.model_copy(update={"demand_rps": al.demand_rps * 1.1 + 1})
    errs = _only(inputs, bad, "serving", f"serving {al.workload} {al.month} {al.slice}")
    assert len(errs) == 1 and "demand_rps" in errs[0] and "more like it" not in errs[0]


def test_serving_repeats_fold_into_one_line(solved):
    inputs, plan = solved
    bad = _copy(plan)
    for i, al in enumerate(bad.serve_allocations):
        bad.serve_allocations[i] = al.model_copy(update={"demand_rps": al.demand_rps + 1})
    errs = _only(inputs, bad, "serving", "demand_rps")
    count: dict[str, int] = defaultdict(int)
    for al in plan.serve_allocations:
        count[al.workload] += 1
    # one line per workload, which counts the others
    assert len(errs) == len(count)
    for e in errs:
        name = e.split()[1]
        assert e.endswith(f"(and {count[name] - 1} more like it)"), e


def test_training_progress(solved):
    """The progress claimed, not the hours: fewer hours also change the GPU-hours rented
    (rentals) or busy (fleet table, money) and the predicted wall hours (workloads); the
    family recomputes the progress and compares it with the claim."""
    inputs, plan = solved
    bad = _copy(plan)
    al = bad.train_allocations[0]
    bad.train_allocations[0] = al.model_copy(update={"progress_hours": al.progress_hours / 2})
    _only(inputs, bad, "training", f"training {al.workload} {al.month} on {al.source}", "progress")


def test_caps_power_cap(solved):
    """A power cap, not a capex budget: totals echo the budgets (money), not the power cap."""
    inputs, plan = solved
    site = inputs.problem.site.model_copy(update={"power_cap_kw": 0.1})
    _only(_with_problem(inputs, site=site), plan, "caps", "owned fleet draws", "site.power_cap_kw")


def test_caps_reservation_term(reserved):
    inputs, plan = reserved
    bad = _copy(plan)
    bad.reservations[0] = bad.reservations[0].model_copy(update={"term_months": 1})
    _only(inputs, bad, "caps", "term 1 months != the offer's 2")


def test_rentals_price(solved):
    """The rate only: money recomputes the rental cost from the offer's price, so it agrees."""
    inputs, plan = solved
    bad = _copy(plan)
    r = bad.rentals[0]
    bad.rentals[0] = r.model_copy(update={"usd_per_gpu_hour": r.usd_per_gpu_hour * 0.5})
    _only(inputs, bad, "rentals", f"rental {r.offer} {r.month} for {r.workload}", "!= offer price")


def test_money_totals(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.totals.power_usd += 1000
    errs = _only(inputs, bad, "money", "totals.power_usd")
    assert len(errs) == 1


def test_money_cash_flow(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.cash_flow[2].cumulative_usd += 500
    _only(inputs, bad, "money", f"cash flow {bad.cash_flow[2].month}: cumulative")


def test_workloads_meets_target(solved):
    inputs, plan = solved
    bad = _copy(plan)
    wr = next(w for w in bad.workloads if w.kind == "serve")
    wr.meets_target = False
    _only(inputs, bad, "workloads", f"serving {wr.name}: does not meet its SLO")


def test_workloads_predicted(solved):
    inputs, plan = solved
    bad = _copy(plan)
    wr = next(w for w in bad.workloads if w.kind == "train")
    wr.predicted["wall_hours"] += 10
    _only(inputs, bad, "workloads", f"training {wr.name}: predicted")


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda p: p.totals.model_copy(update={"npv_usd": p.totals.npv_usd + 100}),
            "totals.npv_usd",
        ),
        (
            lambda p: p.totals.model_copy(update={"residual_value_usd": 0.0}),
            "totals.residual_value_usd",
        ),
    ],
)
def test_money_present_value_and_resale(solved, edit, says):
    inputs, plan = solved
    bad = _copy(plan)
    bad.totals = edit(bad)
    _only(inputs, bad, "money", says)


def test_money_years_and_depreciation(solved):
    inputs, plan = solved
    bad = _copy(plan)
    bad.years[0] = bad.years[0].model_copy(update={"depreciation_usd": 0.0})
    _only(inputs, bad, "money", "year 1: depreciation")
    bad = _copy(plan)
    d = bad.depreciation[0]
    bad.depreciation[0] = d.model_copy(update={"by_year_usd": [d.capex_usd, *d.by_year_usd[1:]]})
    _only(inputs, bad, "money", f"depreciation {d.gpu} {d.month}")
    bad = _copy(plan)
    bad.discount_rate = 0.0
    _only(inputs, bad, "money", "plan uses discount rate 0.0")


def test_purchases_chassis_price(solved):
    inputs, plan = solved
    bad = _copy(plan)
    pu = bad.purchases[0]
    bad.purchases[0] = pu.model_copy(update={"chassis_usd": 1.0})
    _only(inputs, bad, "purchases", "server 1.00")


def test_a_server_bought_ahead_of_its_cards_is_priced_per_server(solved):
    """A purchase of an empty partial-fill server (legal, never cheaper; a time-limited
    solve of the 200-workload benchmark made one) has its server's total as its unit price,
    and a wrong unit price is still caught."""
    from planner.plan.data import Purchase
    from planner.verify.families import _check_purchase
    from planner.verify.findings import Checker

    inputs, plan = solved
    ctx = VerifyContext.from_inputs(inputs, plan)
    gpu = next(g for g in inputs.gpus.values() if g.partial_fill)
    chassis = gpu.chassis_usd

    def findings(unit: float) -> list[str]:
        chk = Checker("purchases", ctx.months)
        pu = Purchase(gpu=gpu.id, month=ctx.months[0], count=0, nodes=1, server=gpu.server or "",
                      slots=gpu.slots, chassis_usd=chassis, unit_usd=unit,
                      gpu_usd=gpu.purchase_usd.value, overhead_usd=chassis, total_usd=chassis)  # fmt: skip
        _check_purchase(chk, ctx, pu)
        return [f.message for f in chk.findings()]

    assert findings(chassis) == []
    assert any("unit" in f for f in findings(chassis / 2))
