"""Issue 53: the published committed prices are read by default, and carry a steady load.

A problem that names no offers files reads every shipped file's published prices
(catalogs/offers-committed.yaml among them) and none of the estimates; a flat three-year B200
load is then carried on a published commitment, not on demand. Reservations that an uncapped
on-demand offer beats everywhere are left out before the model
(:func:`planner.optimize.candidates._reserved_beaten`): the optimum does not move.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import planner.optimize.candidates as candidates
from planner.inputs.problem import load_problem_text
from planner.optimize.candidates import build_candidates
from planner.plan.make import plan_problem
from planner.reports.fleet_facts import peak_gpus, rented_peak_by_workload
from planner.reports.plan_facts import decision_sentences
from planner.verify import verify_plan

ROOT = Path(__file__).resolve().parents[1]

# problems/b200_committed.yaml's load with no offers section and utilization 0.95: the issue's
# "flat 36-month B200 base load, capex 0, utilization 0.95" for a new user
FLAT_B200 = """
name: flat B200 base load, default offers
horizon: {start: 2027-01, months: 36}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.10, pue: 1.3}
gpus: [b200]
solver: {time_limit_s: 60, gap: 0.005}
workloads:
  serve:
    - name: assistant
      model: llama-3.3-70b
      precision: fp8
      start: 2027-01
      traffic: {daily_active_users: 240000, requests_per_user_per_day: 40, utilization: 0.95}
      tokens: {prompt: 1000, output: 300}
      slo: {p95_ttft_ms: 1500, p95_tpot_ms: 50}
"""


def _on_demand_share(plan) -> float:
    hours = {"on_demand": 0.0, "other": 0.0}
    for r in plan.rentals:
        hours["on_demand" if r.kind == "on_demand" else "other"] += r.gpu_hours
    return hours["on_demand"] / (hours["on_demand"] + hours["other"])


def test_a_flat_b200_load_is_carried_on_published_commitments_by_default():
    inputs = load_problem_text(FLAT_B200, "flat.yaml", base_dir=ROOT / "problems")
    assert not any(o.estimated for o in inputs.offers.values())
    plan = plan_problem(inputs, time_limit=60)
    assert plan.status == "optimal"
    assert verify_plan(inputs, plan) == []
    assert plan.reservations, "no commitment in the plan"
    for r in plan.reservations:
        offer = inputs.offers[r.offer]
        assert not offer.estimated and offer.term_months == r.term_months
    assert _on_demand_share(plan) <= 0.25
    # page 1 names the commitment, its term, its payment and its price's date
    (r, *_) = plan.reservations
    sentence = next(s for s in decision_sentences(plan) if s.startswith("Commit to"))
    offer = inputs.offers[r.offer]
    assert r.offer in sentence and f"{r.term_months}-month commitment" in sentence
    assert f"published price of {offer.as_of}" in sentence and "billed monthly" in sentence
    # the peak table counts the commitment once (reserved), not again as rented
    (peak,) = peak_gpus(plan)
    assert peak.reserved == sum(x.gpus for x in plan.reservations)
    assert peak.rented == pytest.approx(max(rented_peak_by_workload(plan).values()))


def test_without_the_published_file_the_same_load_runs_on_demand():
    """The other side of the same property: offers.yaml alone has no B200 commitment, and the
    plan is all on demand (what a new user got before)."""
    text = FLAT_B200 + "offers: {files: [offers.yaml]}\n"
    inputs = load_problem_text(text, "flat.yaml", base_dir=ROOT / "problems")
    plan = plan_problem(inputs, time_limit=60)
    assert not plan.reservations and _on_demand_share(plan) == pytest.approx(1.0)


# H100 serving for a year: Civo's and Paperspace's H100 commitments (all their H100 offers) are
# dearer per GPU-hour than Cudo's uncapped 1-GPU on-demand instance, so no plan needs them
H100_YEAR = """
name: a year of H100 serving
horizon: {start: 2027-01, months: 12}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.10}
gpus: [h100-sxm]
solver: {time_limit_s: 60, gap: 0.001}
workloads:
  serve:
    - name: chat
      model: llama-3-8b
      start: 2027-01
      traffic: {daily_active_users: 200000, requests_per_user_per_day: 20}
      tokens: {prompt: 500, output: 250}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
"""


def test_beaten_reservations_are_left_out_and_the_optimum_stays(monkeypatch):
    inputs = load_problem_text(H100_YEAR, "h100.yaml", base_dir=ROOT / "problems")
    kept = build_candidates(inputs).offers
    assert "civo-h100-36m" in inputs.offers and "civo-h100-36m" not in kept
    assert "paperspace-h100-36m" not in kept
    pruned = plan_problem(inputs, time_limit=60)
    monkeypatch.setattr(candidates, "_reserved_beaten", lambda offers, spot_ok=True: set())
    assert "civo-h100-36m" in build_candidates(inputs).offers
    full = plan_problem(inputs, time_limit=60)
    assert pruned.status == full.status == "optimal"
    # both proven within 0.1 %: the left-out offers could not make the plan cheaper
    assert pruned.objective_usd <= full.objective_usd * (1 + 0.001 + 1e-9)
    assert full.objective_usd <= pruned.objective_usd * (1 + 0.001 + 1e-9)


def test_rising_rents_keep_every_reservation():
    """A reservation locks its price; when rents rise an on-demand offer cheaper today may be
    dearer later, so nothing is left out."""
    text = H100_YEAR + "market: {rent_change_per_year: 0.10}\n"
    inputs = load_problem_text(text, "h100.yaml", base_dir=ROOT / "problems")
    assert "civo-h100-36m" in build_candidates(inputs).offers
