"""Independent verification of a Plan against its problem.

Recomputes, from the problem (and the catalogs and physics) and the Plan alone, every
constraint and every total, without the model builder or the solver. ``planner solve`` runs
it before writing anything; ``planner verify PROBLEM PLAN.json`` runs it on a saved plan.

:class:`~planner.verify.context.VerifyContext` recomputes, once, the figures several checks
share (owned GPUs, busy and rented GPU-hours, reservations, money). Each family of checks is a
function of it returning its :class:`Finding` s (a failure is one line of the list
``verify_plan`` returns); :func:`verify_report` runs them in the order of
:data:`~planner.verify.families.FAMILIES`. They live by area: :mod:`planner.verify.fleet`
(purchases, caps), :mod:`planner.verify.workloads` (serving, training, workload results),
:mod:`planner.verify.money` (rentals, money), :mod:`planner.verify.existing`, and
:mod:`planner.verify.families` (shape, and the order):

* :func:`check_shape`: status is optimal/feasible; months, hours per month and load slices
  are the problem's (on another horizon nothing else is checked);
* :func:`check_purchases`: allowed GPU, whole nodes (count = nodes x node size), licence
  (GeForce cards only where ``site.consumer_gpus_allowed``), unit price = catalog/override card
  + server share, totals; the ``fleet`` table agrees (bought, owned, reserved, busy and rented
  GPU-hours, power) with what the purchases, allocations and rentals imply;
* :func:`check_serving`: every allocation belongs to a workload of the problem, in its active
  months and a real slice; replica rate and demand recomputed by the physics and the demand
  model; owned replicas are whole; rented replicas use a trusted offer for that GPU whose
  instances hold the replica's tensor-parallel group, spot only if
  ``offers.spot_for_serving``; demand covered and at least one whole replica up (owned +
  rented, ``serve_floor``) in every (month, slice);
* :func:`check_training`: one configuration, which fits in memory (physics); progress >= the
  hours the physics needs; wall hours inside the window (in total, per month and per slice);
  owned runs need ``k`` owned GPUs; rentals obey the instance-size rule (instances of >=
  min(k, 8) GPUs), the availability cap, spot rules (allowed, max share, restart overhead) and
  are not reserved offers;
* :func:`check_caps` (reservations and caps): capex budget, total budget, power cap in every
  month; owned GPUs in use (serving and training) fit the owned fleet per month and slice;
  reserved offers used within the committed reservations, rented ones within their
  availability cap; reservations: term, price, whole instances, inside the horizon;
* :func:`check_rentals`: offer trusted, kind/GPU/provider/price are the offer's,
  ``usd = hours x price``, hours billed = hours the allocations use (whole instances for
  training); reserved offers billed in full every month of the term;
* :func:`check_money`: capex, power (idle + host all month, busy extra per busy GPU-hour, PUE,
  price), hosting, rental and total recomputed; ``totals``, every ``cash_flow`` month (and the
  cumulative column), the budgets echoed in totals, and the solver objective must agree;
* :func:`check_existing` (:mod:`planner.verify.existing`): the plan's ``existing`` rows are
  the problem's ``fleet.owned`` with the sales made and their end value recomputed (existing
  GPUs are never purchases: ``capex`` comes from ``purchases`` alone); ``commitments`` are
  ``fleet.contracts`` with their months inside the horizon and cost (committed rentals are used
  only inside the term: :func:`check_rentals`); every offer of a discounted provider costs its
  listed price x (1 - discount), applied once, and so does every rental of it;
* :func:`check_workloads`: one result per workload; predicted vs target recomputed (training
  wall hours vs window hours, serving p95 TTFT/TPOT of the configurations used vs the SLO);
  ``meets_target`` must be true and match the recomputation;
* :func:`check_scenarios` (:mod:`planner.verify.scenarios`), for a two-stage plan only: the
  plan's scenarios are the problem's; the top-level plan is the first scenario's realisation
  (and is checked as a plan of that scenario's inputs); one first stage in every scenario;
  every scenario's plans verified by these families against its own inputs; every scenario
  figure and two-stage total (expected, worst, CVaR, risk, VSS, EVPI) recomputed.

Every family also checks that the months its rows name are months of the horizon.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.inputs.problem import Inputs
from planner.plan.data import Plan

from .context import VerifyContext
from .existing import check_existing
from .families import FAMILIES, check_shape
from .findings import ABS, REL, Finding, Findings
from .fleet import check_caps, check_purchases
from .idle import idle_purchase_warnings
from .money import check_money, check_rentals
from .scenarios import check_scenarios
from .workloads import check_serving, check_training, check_workloads

__all__ = [
    "ABS",
    "FAMILIES",
    "REL",
    "Finding",
    "Findings",
    "VerifyContext",
    "VerifyReport",
    "check_caps",
    "check_existing",
    "check_money",
    "check_purchases",
    "check_rentals",
    "check_scenarios",
    "check_serving",
    "check_shape",
    "check_training",
    "check_workloads",
    "verify_plan",
    "verify_report",
]


@dataclass
class VerifyReport:
    """The violations found and the totals recomputed from the problem and the plan."""

    errors: list[str] = field(default_factory=list)
    capex_usd: float = 0.0
    power_usd: float = 0.0
    hosting_usd: float = 0.0
    rental_usd: float = 0.0
    total_usd: float = 0.0
    npv_usd: float = 0.0  # present value less resale, at the problem's discount rate
    residual_usd: float = 0.0
    committed_usd: float = 0.0  # contracts signed before the plan
    sale_proceeds_usd: float = 0.0  # existing GPUs sold
    checks: int = 0  # number of individual checks made
    findings: list[Finding] = field(default_factory=list)  # errors, with their family
    warnings: list[str] = field(default_factory=list)  # not violations: GPUs bought, never used

    @property
    def ok(self) -> bool:
        return not self.errors


def verify_plan(inputs: Inputs, plan: Plan) -> list[str]:
    """Every violation of the problem's constraints by ``plan`` (empty list = valid)."""
    return verify_report(inputs, plan).errors


def verify_report(inputs: Inputs, plan: Plan) -> VerifyReport:
    """Run every family of checks, in order, on ``plan``; the totals are the recomputed ones.

    A two-stage plan's top level is its first scenario's realisation: it is checked against
    that scenario's inputs (which may differ from the file's), then every scenario's plans
    and the figures that tie them are checked by :func:`check_scenarios`."""
    two_stage = bool(plan.scenarios and inputs.scenarios)
    ctx = VerifyContext.from_inputs(inputs.scenarios[0].inputs if two_stage else inputs, plan)
    rep = VerifyReport()
    for family in FAMILIES:
        found = family(ctx)
        rep.findings += found
        rep.checks += found.checks
        if not ctx.horizon_matches:
            # check_shape, first, has said so; every other check indexes months by the
            # problem's horizon and would only add noise
            break
    else:
        rep.capex_usd, rep.power_usd = ctx.capex, ctx.power
        rep.hosting_usd, rep.rental_usd, rep.total_usd = ctx.hosting, ctx.rental, ctx.total
        rep.npv_usd, rep.residual_usd = ctx.npv, ctx.residual + ctx.existing_residual
        rep.committed_usd = sum(ctx.committed_by_month.values())
        rep.sale_proceeds_usd = sum(ctx.sales_by_month.values())
        rep.warnings = idle_purchase_warnings(ctx)
        if plan.scenarios or inputs.scenarios:
            found = check_scenarios(inputs, plan, verify_report)
            rep.findings += found
            rep.checks += found.checks
    rep.errors = [f.message for f in rep.findings]
    return rep
