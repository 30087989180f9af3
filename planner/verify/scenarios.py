"""Checks of a two-stage plan (``scenarios:`` in the problem, issue 28).

A two-stage plan is the first scenario's realisation of the shared purchases, plus, for every
scenario, that realisation (``plan``), the best plan known for the scenario alone
(``own_plan``) and the base forecast's purchases re-planned in it (``base_plan``). Every one of
these is an ordinary plan of its scenario's inputs, and is verified as such by the ordinary
families (the verifier is handed in, so this module does not import its own package). What
ties them together is checked here, recomputed from the plan's scenario figures and the
problem alone:

* the plan's scenarios are the problem's: names, order, probabilities;
* the plan's risk terms are the problem's ``risk`` (expected cost without one);
* the top-level plan is the first scenario's ``plan`` (every table);
* the first stage (purchases, reservations, sales) is one decision: the same in every
  scenario's ``plan``; the base plans share the base forecast's own purchases;
* every scenario's figures (cost, own, regret, base) are its plans' objectives, and the
  totals (expected, worst, CVaR, risk, VSS, EVPI) are the measure of them.

The risk measure is re-implemented here (:func:`measure`) rather than imported from the
solver: an independent check must not share the code it checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from planner.base import tolerances
from planner.inputs.problem import Inputs, Scenario
from planner.plan.data import Plan, ScenarioOutcome

from .findings import Checker, Finding, Findings, close

FAMILY = "scenarios"
PROB_TOL = 1e-9  # the problem file's tolerance on probabilities
USD_TOL = 1.0  # dollars, on a present value summed over a horizon (relative: tolerances.REL)
# Totals that only a two-stage plan fills.
TWO_STAGE_TOTALS = ("expected_usd", "worst_usd", "vss_usd", "evpi_usd", "cvar_usd", "risk_usd")
# Fields in which the top-level plan may differ from the first scenario's realisation: the
# solve's own account, and the two-stage figures only the top level carries.
TOP_ONLY = {
    "status",
    "gap",
    "solve_seconds",
    "message",
    "solver",
    "risk",
    "scenarios",
    "problem_file",  # the file's, where the scenario's plan names its scenario
    "problem_sha256",
}
# What is decided before the future is known, by table: the fields that make the decision
# (prices may differ by scenario; the decision may not).
FIRST_STAGE = {
    "purchases": ("gpu", "server", "slots", "month", "ordered", "count", "nodes"),
    "reservations": ("offer", "provider", "gpu", "start_month", "term_months", "gpus"),
    "sales": ("gpu", "month", "count", "age_months"),
}


class Report(Protocol):
    """What the verifier of one ordinary plan returns (:class:`planner.verify.VerifyReport`)."""

    findings: list[Finding]
    checks: int


Verify = Callable[[Inputs, Plan], Report]


# ---------------------------------------------------------------- the risk measure


def cvar(costs: Sequence[float], probs: Sequence[float], alpha: float) -> float:
    """CVaR_alpha of discrete costs: min over eta among the costs of
    ``eta + sum p (c - eta)^+ / (1 - alpha)`` (the minimum of this convex piecewise-linear
    function is at a cost, the alpha-quantile, so the costs are the only candidates).

    >>> cvar([100.0, 200.0], [0.5, 0.5], 0.9), round(cvar([100.0, 200.0], [0.5, 0.5], 0.4), 6)
    (200.0, 183.333333)
    """
    pairs = list(zip(costs, probs, strict=True))
    return min(eta + sum(p * max(0.0, c - eta) for c, p in pairs) / (1 - alpha) for eta in costs)


def measure(
    costs: Sequence[float], probs: Sequence[float], how: str, alpha: float, w: float
) -> float:
    """The two-stage objective of scenario costs: the expected cost, or with ``cvar`` the
    expected cost plus ``w`` x CVaR_alpha, or with ``worst_case`` the largest cost.

    >>> measure([100.0, 200.0], [0.5, 0.5], "cvar", 0.9, 0.5)
    250.0
    """
    if how == "worst_case":
        return max(costs)
    expected = sum(c * p for c, p in zip(costs, probs, strict=True))
    return expected + w * cvar(costs, probs, alpha) if how == "cvar" else expected


def _money(a: float | None, b: float | None) -> bool:
    """Two present values agree (both None also agree): the verifier's money tolerance."""
    if a is None or b is None:
        return a is None and b is None
    return close(a, b, rel=tolerances.REL, abs_=USD_TOL)


def _usd(x: float | None) -> str:
    return "none" if x is None else f"${x:,.2f}"


# ---------------------------------------------------------------- the checks


def check_scenarios(inputs: Inputs, plan: Plan, verify: Verify) -> Findings:
    """Every check of a two-stage plan, and the ordinary checks of each scenario's plans
    (by ``verify``); the top-level plan's ordinary checks are the caller's."""
    chk = Checker(FAMILY, plan.months)
    if not _check_match(chk, inputs.scenarios, plan.scenarios):
        return chk.findings()  # the rest pairs plan and problem scenarios by position
    risk = _risk_terms(inputs)
    _check_risk(chk, plan, risk)
    _check_top(chk, plan)
    _check_first_stage(chk, plan.scenarios)
    for s in plan.scenarios:
        _check_outcome(chk, s, len(plan.scenarios))
    _check_totals(chk, plan, risk)
    _check_alternatives(chk, plan.scenarios, risk)
    found = chk.findings()
    subs = _check_subplans(inputs.scenarios, plan.scenarios, verify)
    return Findings([*found, *subs], checks=found.checks + subs.checks)


def _check_match(
    chk: Checker, problem: Sequence[Scenario], plan: Sequence[ScenarioOutcome]
) -> bool:
    """The plan's scenarios are the problem's, in its order, with its probabilities."""
    if not problem or not plan:
        mine = ", ".join(repr(s.name) for s in problem) or "none"
        theirs = ", ".join(repr(s.name) for s in plan) or "none"
        return chk.check(
            False,
            f"the plan's scenarios ({theirs}) differ from the problem's ({mine}): a two-stage "
            "plan is checked against the problem it was made for",
        )
    names, want = [s.name for s in plan], [s.name for s in problem]
    missing = [n for n in want if n not in names]
    extra = [n for n in names if n not in want]
    if not chk.check(
        names == want,
        f"the plan's scenarios {names} differ from the problem's {want}"
        + (f" (missing: {', '.join(map(repr, missing))})" if missing else "")
        + (f" (not in the problem: {', '.join(map(repr, extra))})" if extra else ""),
    ):
        return False
    ok = True
    for s, p in zip(plan, problem, strict=True):
        ok &= chk.check(
            abs(s.probability - p.probability) <= PROB_TOL,
            f"scenario {s.name!r}: probability {s.probability:g} in the plan, "
            f"{p.probability:g} in the problem",
        )
    return ok


def _risk_terms(inputs: Inputs) -> tuple[str, float, float]:
    """The problem's risk measure as (measure, alpha, weight); expected cost without one."""
    r = inputs.problem.risk
    return ("expected", 0.9, 1.0) if r is None else (r.measure, r.alpha, r.weight)


def _check_risk(chk: Checker, plan: Plan, risk: tuple[str, float, float]) -> None:
    """The plan states the measure it minimised, and it is the problem's."""
    r = plan.risk
    have = None if r is None else (r.measure, r.alpha, r.weight)
    chk.check(
        have is not None
        and have[0] == risk[0]
        and all(close(a, b, rel=0.0, abs_=1e-12) for a, b in zip(have[1:], risk[1:], strict=True)),
        f"plan risk terms {have} differ from the problem's (measure, alpha, weight) {risk}",
    )


def _comparable(plan: Plan) -> dict:
    """The plan as data, without what only a two-stage plan's top level may state."""
    exclude: dict = dict.fromkeys(TOP_ONLY, True)
    exclude["totals"] = set(TWO_STAGE_TOTALS)
    return plan.model_dump(exclude=exclude)


def _check_top(chk: Checker, plan: Plan) -> None:
    """The top-level plan is the first scenario's realisation, table for table: the top
    level is what the workbook and the terminal show, so it must be a plan of its own."""
    first = plan.scenarios[0]
    mine, theirs = _comparable(plan), _comparable(first.plan)
    differ = [k for k in mine if mine[k] != theirs.get(k)]
    chk.check(
        not differ,
        f"the plan differs from scenario {first.name!r} plan (the first scenario's realisation, "
        f"which it must be) in: {', '.join(differ)}",
    )


def _first_stage(plan: Plan) -> dict[str, list[tuple]]:
    """The plan's first-stage decision, table by table, in a canonical order."""
    return {
        table: sorted(tuple(getattr(row, f) for f in fields) for row in getattr(plan, table))
        for table, fields in FIRST_STAGE.items()
    }


def _check_first_stage(chk: Checker, outcomes: Sequence[ScenarioOutcome]) -> None:
    """One first stage: the same purchases, reservations and sales in every scenario's plan;
    every base plan holds the base forecast's own purchases (those of the first scenario's
    own plan)."""
    first = outcomes[0]
    ref = _first_stage(first.plan)
    for s in outcomes[1:]:
        mine = _first_stage(s.plan)
        for table in FIRST_STAGE:
            chk.check(
                mine[table] == ref[table],
                f"scenario {s.name!r} plan: its {table} differ from scenario {first.name!r} "
                "plan's (the first stage is decided once, for every scenario)",
            )
    own = _first_stage(first.own_plan)
    bases = [(s.name, _first_stage(s.base_plan)) for s in outcomes if s.base_plan is not None]
    # own_plan is the shared plan where that is the cheaper in the first scenario: the base
    # forecast's own first stage is then not stated unless a base plan holds it, and the
    # base plans need only agree with each other
    unstated = own == ref and all(b != own for _, b in bases)
    want = bases[0][1] if bases and unstated else own
    for name, mine in bases:
        for table in FIRST_STAGE:
            chk.check(
                mine[table] == want[table],
                f"scenario {name!r} base plan: its {table} differ from scenario "
                f"{first.name!r} own plan's (the base forecast's own first stage)",
            )


def _check_outcome(chk: Checker, s: ScenarioOutcome, n: int) -> None:
    """One scenario's figures are its plans' objectives; its own best is never dearer than
    the shared plan (which is a plan of it too)."""
    name = f"scenario {s.name!r}"
    cost, own = s.plan.objective_usd, s.own_plan.objective_usd
    chk.check(
        _money(s.cost_usd, cost),
        f"{name}: cost_usd {_usd(s.cost_usd)} != its plan's objective {_usd(cost)}",
    )
    chk.check(
        _money(s.own_usd, own),
        f"{name}: own_usd {_usd(s.own_usd)} != its own plan's objective {_usd(own)}",
    )
    chk.check(
        tolerances.at_most(s.own_usd, s.cost_usd, USD_TOL),
        f"{name}: own_usd {_usd(s.own_usd)} exceeds cost_usd {_usd(s.cost_usd)} (its plan is a "
        "plan of it: the best known for it is never dearer)",
    )
    chk.check(
        _money(s.regret_usd, s.cost_usd - s.own_usd),
        f"{name}: regret_usd {_usd(s.regret_usd)} != cost - own {_usd(s.cost_usd - s.own_usd)}",
    )
    base = None if s.base_plan is None else s.base_plan.objective_usd
    chk.check(
        _money(s.base_usd, base),
        f"{name}: base_usd {_usd(s.base_usd)} != its base plan's objective {_usd(base)}",
    )
    chk.check(
        s.fleet_costs_usd is None or len(s.fleet_costs_usd) == n,
        f"{name}: fleet_costs_usd has {len(s.fleet_costs_usd or [])} entries, not one per "
        f"scenario ({n})",
    )


def _want_totals(
    outcomes: Sequence[ScenarioOutcome], risk: tuple[str, float, float]
) -> dict[str, float | None]:
    """The two-stage totals recomputed from the scenarios' costs (see ``Totals``)."""
    probs = [s.probability for s in outcomes]
    costs = [s.cost_usd for s in outcomes]
    value = measure(costs, probs, *risk)
    bases = [s.base_usd for s in outcomes]
    base = None if None in bases else measure(bases, probs, *risk)  # type: ignore[arg-type]
    return {
        "expected_usd": sum(c * p for c, p in zip(costs, probs, strict=True)),
        "worst_usd": max(costs),
        "cvar_usd": cvar(costs, probs, risk[1]) if risk[0] == "cvar" else None,
        "risk_usd": value,
        "vss_usd": None if base is None else base - value,
        "evpi_usd": value - measure([s.own_usd for s in outcomes], probs, *risk),
    }


def _check_totals(chk: Checker, plan: Plan, risk: tuple[str, float, float]) -> None:
    """Every two-stage total is the measure of the scenarios' figures; VSS and EVPI are
    never negative (the base plan and every scenario's own best are in the comparison)."""
    want = _want_totals(plan.scenarios, risk)
    of = ", ".join(f"{s.name!r} {_usd(s.cost_usd)} (p {s.probability:g})" for s in plan.scenarios)
    for key, mine in want.items():
        theirs = getattr(plan.totals, key)
        chk.check(
            _money(theirs, mine),
            f"totals.{key} {_usd(theirs)} != {_usd(mine)} recomputed from the scenarios "
            f"({risk[0]} measure; costs {of})",
        )
    for key in ("vss_usd", "evpi_usd"):
        v = want[key]
        chk.check(
            v is None or v >= -(USD_TOL + tolerances.REL * abs(want["risk_usd"] or 0.0)),
            f"totals.{key} recomputed is {_usd(v)} < 0: the plan is dearer, in the risk "
            "measure, than a plan it was compared with",
        )


def _check_alternatives(
    chk: Checker, outcomes: Sequence[ScenarioOutcome], risk: tuple[str, float, float]
) -> None:
    """The plan's purchases are no dearer, in the risk measure, than any scenario's own
    purchases re-planned in every scenario (the solve kept the cheapest it evaluated); the
    first scenario's own purchases are the base plans, so their costs are the base costs."""
    probs = [s.probability for s in outcomes]
    value = measure([s.cost_usd for s in outcomes], probs, *risk)
    for s in outcomes:
        costs = s.fleet_costs_usd
        if costs is None or len(costs) != len(outcomes) or None in costs:
            continue
        alt = measure(costs, probs, *risk)  # type: ignore[arg-type]
        chk.check(
            tolerances.at_most(value, alt, USD_TOL),
            f"scenario {s.name!r}: its own purchases cost {_usd(alt)} in the risk measure "
            f"across the scenarios, less than the plan's {_usd(value)} (the plan must be the "
            "cheapest first stage the solve evaluated)",
        )
    first = outcomes[0]
    if first.fleet_costs_usd is not None:
        bases = [s.base_usd for s in outcomes]
        chk.check(
            len(first.fleet_costs_usd) == len(bases)
            and all(_money(a, b) for a, b in zip(first.fleet_costs_usd, bases, strict=False)),
            f"scenario {first.name!r}: fleet_costs_usd {first.fleet_costs_usd} differ from the "
            f"scenarios' base_usd {bases} (both are the base forecast's purchases re-planned)",
        )


# ---------------------------------------------------------------- every scenario's plans


def _nested(sub: Plan) -> list[str]:
    """What a scenario's plan must not hold: scenarios, risk terms or two-stage totals."""
    out = [f"holds {len(sub.scenarios)} scenarios of its own"] if sub.scenarios else []
    out += ["states risk terms"] if sub.risk is not None else []
    filled = [k for k in TWO_STAGE_TOTALS if getattr(sub.totals, k) is not None]
    out += [f"states two-stage totals ({', '.join(filled)})"] if filled else []
    return out


def _check_subplans(
    problem: Sequence[Scenario], outcomes: Sequence[ScenarioOutcome], verify: Verify
) -> Findings:
    """Every scenario's plan, own plan and base plan verified as an ordinary plan of that
    scenario's inputs; each finding names the scenario and the plan."""
    out: list[Finding] = []
    checks = 0
    for p, s in zip(problem, outcomes, strict=True):
        done: list[tuple[Plan, Report]] = []  # a plan stated twice is verified once
        for label, sub in (("plan", s.plan), ("own plan", s.own_plan), ("base plan", s.base_plan)):
            if sub is None:
                continue
            head = f"scenario {s.name!r} {label}"
            nested = _nested(sub)
            out += [
                Finding(FAMILY, f"{head}: {m} (a scenario's plan is an ordinary plan)")
                for m in nested
            ]
            checks += 1
            rep = next((r for q, r in done if q == sub), None)
            if rep is None:
                rep = verify(p.inputs, sub)
                done.append((sub, rep))
                checks += rep.checks
            out += [Finding(f.family, f"{head}: {f.message}") for f in rep.findings]
    return Findings(out, checks=checks)
