"""Price paths and lead times in plans (issue 27): metamorphic relations on solved problems.

- Every change 0 and lead 0: the plan is today's (the fingerprints stored before price paths
  existed, tests/fixtures/golden_no_market).
- Rents falling 20 % a year: each rented row's price is its month-0 price x 0.8^(m/12) (month
  13 costs 0.8 x month 1), and the optimum is no higher than with flat rents.
- Lead 6 months: nothing bought serves before its order month + 6, the purchases say so,
  and the independent verifier agrees; a tampered monthly price is caught (exit 4).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from planner.inputs.problem import load_problem_text
from planner.plan.make import plan_problem
from planner.verify import verify_report
from tests.factories import assistant_yaml
from tests.golden import signature

ROOT = Path(__file__).resolve().parent.parent
OFF = "\nmarket: {rent_change_per_year: 0, buy_change_per_year: 0, lead_months: 0}\n"
FALLING = "\nmarket: {rent_change_per_year: -0.2, buy_change_per_year: 0, lead_months: 0}\n"


@functools.cache
def _solve(name: str, extra: str, time_limit: float = 60):
    """The problem with EXTRA appended, solved once per process."""
    text = (ROOT / "problems" / f"{name}.yaml").read_text() + extra
    inputs = load_problem_text(text, f"{name}.yaml", base_dir=ROOT / "problems")
    return inputs, plan_problem(inputs, time_limit=time_limit)


# Two years of one L4 service with no capex budget: every month rented on demand (24 rows),
# ~0.05 s a solve. The falling-rents relation and its tamper do not depend on the problem's
# size; finetune_lab's falling plan (also on-demand rentals only) took ~1.9 s.
RENTER = assistant_yaml(name="a rented assistant", months=24, capex_usd=0)


@functools.cache
def _rented(extra: str):
    """RENTER with EXTRA appended, solved once per process (two tests read the falling plan)."""
    inputs = load_problem_text(RENTER + extra, "renter.yaml")
    return inputs, plan_problem(inputs, time_limit=60)


def _month0_price(inputs, offer_id: str) -> float:
    return inputs.offers[offer_id].marginal_usd_per_gpu_hour


@pytest.mark.parametrize("name", ["finetune_lab", "inference_startup"])
def test_no_path_and_no_lead_plan_as_before_price_paths(name):
    stored = json.loads((ROOT / "tests/fixtures/golden_no_market" / f"{name}.json").read_text())
    _, plan = _solve(name, OFF)
    now = signature(json.loads(plan.to_json()))
    gap = max(plan.gap or 0.0, 1e-3)
    assert now["objective_usd"] == pytest.approx(stored["objective_usd"], rel=gap)
    if plan.gap is not None and plan.gap < 1e-6:  # proven to the last cent: the same plan
        assert now["purchases"] == stored["purchases"]


def test_falling_rents_price_each_month_on_the_path_and_never_cost_more():
    inputs, flat = _rented(OFF)
    inputs, falling = _rented(FALLING)
    months = falling.months
    rented = [r for r in falling.rentals if r.kind in ("on_demand", "spot")]
    assert rented, "the plan rents nothing: the relation is not exercised"
    assert any(months.index(r.month) >= 12 for r in rented)  # into the path's second year
    for r in rented:
        m = months.index(r.month)
        want = _month0_price(inputs, r.offer) * 0.8 ** (m / 12)
        assert r.usd_per_gpu_hour == pytest.approx(want, rel=1e-9), r
        assert r.usd == pytest.approx(r.gpu_hours * want, rel=1e-9)
    tol = (flat.gap or 0.0) + (falling.gap or 0.0) + 1e-9
    assert falling.objective_usd <= flat.objective_usd * (1 + tol)
    assert verify_report(inputs, falling).findings == []


def test_a_tampered_monthly_price_is_caught():
    # the falling-rents plan (its flat purchase prices do not matter to a rental's price)
    inputs, plan = _rented(FALLING)
    # a row after month 0, where the path and the month-0 price differ
    rows = [
        i
        for i, r in enumerate(plan.rentals)
        if r.kind == "on_demand" and plan.months.index(r.month) > 0
    ]
    assert rows, "no rental after the first month: the tamper is not exercised"
    i = rows[len(rows) // 2]
    r = plan.rentals[i]
    # the month-0 price where the path says less: the tamper a stale price list would make
    flat = _month0_price(inputs, r.offer)
    bad = r.model_copy(update={"usd_per_gpu_hour": flat, "usd": r.gpu_hours * flat})
    tampered = plan.model_copy(update={"rentals": [*plan.rentals[:i], bad, *plan.rentals[i + 1 :]]})
    families = {f.family for f in verify_report(inputs, tampered).findings}
    assert "rentals" in families


def test_a_lead_time_delays_every_purchase_and_the_verifier_agrees():
    # six times the reference's chat traffic: owning an H100 server pays (tests/fixtures; its
    # prices are flat there, this test adds the lead time). Its H100s only: the same one
    # purchase, solved in ~0.2 s of CPU instead of ~1.7 s with all four GPU types.
    path = ROOT / "tests" / "fixtures" / "buying.yaml"
    flat = "market: {rent_change_per_year: 0, buy_change_per_year: 0, lead_months: 0}"
    gpus = "gpus: [h100-sxm, a100-sxm-80gb, a100-pcie-80gb, rtx-4090]"
    text = path.read_text()
    assert flat in text and gpus in text
    text = text.replace(flat, flat.replace("lead_months: 0", "lead_months: 6"))
    text = text.replace(gpus, "gpus: [h100-sxm]")
    inputs = load_problem_text(text, "buying.yaml", base_dir=path.parent)
    plan = plan_problem(inputs, time_limit=20)
    months = plan.months
    assert plan.purchases, "nothing bought: the lead time is not exercised"
    for p in plan.purchases:
        assert months.index(p.month) - months.index(p.order_month) == 6
        assert p.paid_month == p.order_month  # capex_at: order (the default)
    first = min(months.index(p.month) for p in plan.purchases)
    assert first >= 6
    for f in plan.fleet:
        if months.index(f.month) < 6:
            assert f.owned - f.existing == 0 and f.owned_busy_gpu_hours == 0
    assert verify_report(inputs, plan).findings == []
    for p in plan.purchases:
        assert p.in_service == p.month and p.ordered
    early = plan.purchases[0].model_copy(
        update={"month": months[2], "in_service": months[2], "ordered": months[0]}
    )
    tampered = plan.model_copy(update={"purchases": [early, *plan.purchases[1:]]})
    assert verify_report(inputs, tampered).findings
