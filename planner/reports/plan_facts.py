"""Facts read off a Plan for the reports: the decision in words, peak GPUs, GPU-hours used.

Pure functions of :class:`planner.plan.data.Plan` (no workbook, no solver), so the Excel page 1
and any other report say the same thing, and tests can check them against the plan's rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.inputs.months import month_label
from planner.plan.data import Plan, Purchase, Reservation
from planner.reports.fleet_facts import (  # re-exported: the reports import them from here
    rented_peak_by_workload,
)

# What the model leaves out: finance must not read the plan as covering these.
NOT_MODELED = (
    "Price changes over the horizon: every card price, rental rate and power price is "
    "today's, held flat.",
    "Financing (loans, leases) and taxes: capex is paid in cash in the month of purchase; "
    "resale at the horizon end is assumed at the resale curve's price, with no selling cost.",
    "Spot and on-demand capacity being unavailable when wanted; spot interruptions only as "
    "a restart overhead on training.",
    "Staff, software licences, networking beyond the per-GPU server share, taxes.",
)


def not_modeled(plan: Plan) -> tuple[str, ...]:
    """What the model leaves out, for this plan: with price paths in force, only power prices
    are held flat."""
    if not has_paths(plan):
        return NOT_MODELED
    return (
        "Power prices over the horizon: today's, held flat. Rental and purchase prices follow "
        "the price paths on the Assumptions sheet (a steady change per year, no price shocks).",
        "Financing (loans, leases) and taxes: capex is paid in cash when the plan says (at the "
        "order, or on delivery with finance.capex_at: delivery); resale at the horizon end is "
        "assumed at the resale curve's share of the price paid, with no selling cost.",
        *NOT_MODELED[2:],
    )


# The market figures of a GPU type on the plan's assumptions (group ``gpu:<id>``): price
# paths (a price in month m of the horizon is price x (1 + change)^(m / 12)) and lead time.
MARKET_KEYS = ("rent_change_per_year", "buy_change_per_year", "lead_months")


def market_terms(plan: Plan) -> dict[str, dict[str, tuple[float, str]]]:
    """GPU type -> market key -> (value, source), from the plan's assumptions (empty for a
    plan written before price paths)."""
    out: dict[str, dict[str, tuple[float, str]]] = {}
    for a in plan.assumptions:
        if a.key in MARKET_KEYS and a.group.startswith("gpu:") and _is_number(a.value):
            out.setdefault(a.group.removeprefix("gpu:"), {})[a.key] = (float(a.value), a.source)
    return out


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def used_gpus(plan: Plan) -> list[str]:
    """GPU types the plan buys or rents (contracts aside), in order of appearance."""
    gpus = [p.gpu for p in plan.purchases]
    gpus += [r.gpu for r in plan.rentals if r.kind != "committed"]
    return list(dict.fromkeys(gpus))


def has_paths(plan: Plan) -> bool:
    """Whether prices move or deliveries take time in this plan: a non-zero price change or
    lead time for a GPU type it buys or rents, or a purchase ordered or paid before service.
    A plan without (every change 0, lead 0, or written before price paths) reads as before."""
    if any(p.order_month != p.month or p.paid_month != p.month for p in plan.purchases):
        return True
    terms = market_terms(plan)
    return any(v for g in used_gpus(plan) for v, _ in terms.get(g, {}).values())


def _pct_year(x: float) -> str:
    """``-15 %/year``; ``flat`` for 0.

    >>> _pct_year(-0.15), _pct_year(0.025), _pct_year(0.0)
    ('-15 %/year', '+2.5 %/year', 'flat')
    """
    return "flat" if x == 0 else f"{x * 100:+.3g} %/year"


def _lead_text(n: float) -> str:
    """Months from order to service.

    >>> _lead_text(2), _lead_text(1), _lead_text(0)
    ('lead 2 months', 'lead 1 month', 'no lead time')
    """
    n = int(n)
    return "no lead time" if n == 0 else f"lead {_plural(n, 'month')}"


def _origin(sources: list[str]) -> str:
    """Where the figures came from: the catalog defaults, the problem file, or both."""
    problem = any(s.startswith("problem file") for s in sources)
    catalog = any(not s.startswith("problem file") for s in sources)
    if problem and catalog:
        return "catalog defaults and the problem's market:"
    if problem:
        return "from the problem's market:"
    return "catalog defaults; market: in the problem changes them"


def market_line(plan: Plan) -> str | None:
    """The price paths and lead times in force for the GPU types the plan uses, in one line
    (``rents -15 %/year, purchases -5 %/year, lead 2 months (catalog defaults; ...)``); GPU
    types with different terms are named. None for a plan without paths (:func:`has_paths`)."""
    if not has_paths(plan):
        return None
    terms = market_terms(plan)
    groups: dict[str, list[str]] = {}
    sources: list[str] = []
    for g in used_gpus(plan):
        t = terms.get(g)
        if not t:
            continue
        rent = t.get("rent_change_per_year", (0.0, ""))[0]
        buy = t.get("buy_change_per_year", (0.0, ""))[0]
        lead = t.get("lead_months", (0.0, ""))[0]
        text = f"rents {_pct_year(rent)}, purchases {_pct_year(buy)}, {_lead_text(lead)}"
        groups.setdefault(text, []).append(g)
        sources += [s for _, s in t.values()]
    if not groups:
        return None
    if len(groups) == 1:
        body = next(iter(groups))
    else:
        body = "; ".join(f"{', '.join(gs)}: {text}" for text, gs in groups.items())
    return f"Price paths and lead times: {body} ({_origin(sources)})."


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def rate_text(x: float) -> str:
    """A rate per GPU-hour exactly as charged (up to 4 decimals, at least 2).

    >>> rate_text(1.9156), rate_text(2.0), rate_text(0.12345)
    ('$1.9156', '$2.00', '$0.1235')
    """
    s = f"{x:,.4f}".rstrip("0")
    return "$" + (s + "0" * (2 - len(s.split(".")[1])))


def rate_span(by_month: dict[str, float], rate: float, sep: str = " to ") -> str:
    """The rate of the first month, and of the last if it differs (a price path).

    >>> rate_span({"2027-02": 2.8, "2027-01": 2.9}, 2.9), rate_span({}, 2.0)
    ('$2.90 to $2.80', '$2.00')
    """
    if not by_month:
        return rate_text(rate)
    first, last = by_month[min(by_month)], by_month[max(by_month)]
    if math.isclose(first, last, rel_tol=1e-12):
        return rate_text(first)
    return f"{rate_text(first)}{sep}{rate_text(last)}"


def _span(months: list[str]) -> str:
    """``2027-01..2027-03`` for a run of months, the month alone for one.

    >>> _span(["2027-02", "2027-01", "2027-03"]), _span(["2027-05"])
    ('2027-01..2027-03', '2027-05')
    """
    ms = sorted(set(months))
    return ms[0] if len(ms) == 1 else f"{ms[0]}..{ms[-1]}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _fills(plan: Plan) -> dict[str, str]:
    """GPU type -> how its server is filled (``full`` / ``partial``), from the assumptions."""
    return {
        a.group.removeprefix("gpu:"): str(a.value)
        for a in plan.assumptions
        if a.key == "server_fill" and a.group.startswith("gpu:")
    }


# A purchase unit of more GPUs than any server holds is a rack (GB200/GB300 NVL72: 72 slots).
RACK_SLOTS = 16


def unit_word(slots: int | None) -> str:
    """What a purchase unit is called: ``rack`` above :data:`RACK_SLOTS` slots, else ``server``.

    >>> unit_word(72), unit_word(8), unit_word(None)
    ('rack', 'server', 'server')
    """
    return "rack" if slots and slots > RACK_SLOTS else "server"


def buy_sentences(plan: Plan) -> list[str]:
    """One sentence per purchase (GPU type and month): whole servers and the cards in them."""
    fills = _fills(plan)
    out = []
    for p in plan.purchases:
        when = f"{_when(p)} for {_usd(p.total_usd)}"
        partial = fills.get(p.gpu) == "partial" or (p.slots and p.count != p.nodes * p.slots)
        if not p.slots:  # a plan from before server types: nodes with a server share per GPU
            per_node = p.count // p.nodes if p.nodes else p.count
            nodes = f"{_plural(p.nodes, 'server')} of {per_node}x {p.gpu}"
            text = f"Buy {nodes} ({p.count} GPUs) {when} ({_usd(p.unit_usd)} per GPU with its server share)."
        elif not p.nodes:
            text = (
                f"Add {_plural(p.count, p.gpu + ' card')} to the {p.server} servers already "
                f"bought {when} ({_usd(p.gpu_usd)} per card)."
            )
        elif partial:
            text = (
                f"Buy {_plural(p.nodes, 'server')} of {p.slots}-slot {p.server} with "
                f"{p.count}x {p.gpu} {when} ({_usd(p.chassis_usd)} per server + "
                f"{_usd(p.gpu_usd)} per card)."
            )
        else:
            unit = unit_word(p.slots)
            text = (
                f"Buy {_plural(p.nodes, unit)} of {p.slots}x {p.gpu} ({p.server}, {p.count} "
                f"GPUs) {when} ({_usd(p.unit_usd)} per GPU with its {unit} share)."
            )
        out.append(text)
    return out


def _when(p: Purchase) -> str:
    """``in 2027-04``; with a lead time ``ordered in 2027-02, in service 2027-04`` (and when
    the capex is paid on delivery, says so)."""
    if p.order_month == p.month:
        return f"in {p.month}"
    paid = " (paid on delivery)" if p.paid_month == p.month else ""
    return f"ordered in {p.order_month}{paid}, in service {p.month},"


@dataclass
class _RentGroup:
    provider: str
    gpu: str
    kind: str
    rate: float
    months: list[str]
    hours: float = 0.0
    usd: float = 0.0
    most_in_a_month: float = 0.0  # GPU-hours of its busiest month
    by_month: dict[str, float] = field(default_factory=dict)  # month -> rate (price paths)

    def rate_span(self) -> str:
        """The rate as charged: ``$2.9900``, or on a price path from the first month's to
        the last month's (``$2.9103 to $2.7411``)."""
        return rate_span(self.by_month, self.rate)


def rent_groups(plan: Plan) -> dict[tuple[str, str], _RentGroup]:
    """Rentals summed per (workload, offer), biggest spend first."""
    groups: dict[tuple[str, str], _RentGroup] = {}
    for r in plan.rentals:
        g = groups.setdefault(
            (r.workload, r.offer),
            _RentGroup(r.provider, r.gpu, r.kind, r.usd_per_gpu_hour, []),
        )
        g.months.append(r.month)
        g.by_month.setdefault(r.month, r.usd_per_gpu_hour)
        g.hours += r.gpu_hours
        g.usd += r.usd
        g.most_in_a_month = max(g.most_in_a_month, r.gpu_hours)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1].usd))


def rent_sentences(plan: Plan) -> list[str]:
    """One sentence per (workload, offer) rented: how many GPUs at most, when, and the cost."""
    peak = rented_peak_by_workload(plan)
    kinds = {w.name: w.kind for w in plan.workloads}
    out = []
    for (workload, offer), g in rent_groups(plan).items():
        if g.kind == "reserved":
            continue  # said by reserve_sentences
        # at once, never fewer than the busiest month's average
        n = max(peak.get((workload, g.gpu), 0.0), g.most_in_a_month / plan.hours_per_month)
        how = "at peak hours" if kinds.get(workload) == "serve" else "for the run"
        if g.kind == "committed":
            out.append(
                f"Use up to {n:,.0f} {g.gpu} of the {g.provider} contract ({offer}) {how} of "
                f"{workload} in {_span(g.months)}: {g.hours:,.0f} GPU-h, paid by the contract."
            )
            continue
        block = _block_of(plan, workload, offer)
        if block:
            out.append(
                f"Book a capacity block from {g.provider} ({offer}, {block}"
                f"{_fabric_text(plan, workload, offer)}) "
                f"of {n:,.0f} {g.gpu} for the run of {workload} in {_span(g.months)}: "
                f"{g.hours:,.0f} GPU-h at {g.rate_span()}/GPU-h = {_usd(g.usd)}, paid when "
                "booked (the plan counts it in the months of the run)."
            )
            continue
        out.append(
            f"Rent up to {n:,.0f} {g.gpu} ({g.kind.replace('_', '-')}, {g.provider} {offer}"
            f"{_fabric_text(plan, workload, offer)}) "
            f"{how} of {workload} in {_span(g.months)}: {g.hours:,.0f} GPU-h at "
            f"{g.rate_span()}/GPU-h = {_usd(g.usd)}."
        )
    return out


def _block_of(plan: Plan, workload: str, offer: str) -> str | None:
    """The instance type of a capacity block (cluster product) a training run books, or None."""
    w = next((x for x in plan.workloads if x.name == workload and x.kind == "train"), None)
    info = (w.config.get("offers") or {}).get(offer) if w is not None else None
    block = info.get("block") if isinstance(info, dict) else None
    return block if isinstance(block, str) else None


def _fabric_text(plan: Plan, workload: str, offer: str) -> str:
    """``, InfiniBand 400 Gb/s per GPU`` for a training run's offer with a stated fabric."""
    w = next((x for x in plan.workloads if x.name == workload and x.kind == "train"), None)
    info = (w.config.get("offers") or {}).get(offer) if w is not None else None
    if not info or not info.get("fabric"):
        return ""
    gbps = info.get("gbps_per_gpu")
    return f", {info['fabric']}" + (f" {gbps:g} Gb/s per GPU" if gbps else "")


def headroom_sentences(plan: Plan) -> list[str]:
    """Per serving workload: the headroom and spare replicas its fleet is sized with."""
    out = []
    for w in plan.workloads:
        if w.kind != "serve" or "max_load" not in w.config:
            continue
        spare = int(w.config.get("redundancy", 0))
        out.append(
            f"{w.name} is sized to run at most {w.config['max_load']:.0%} of its p95 capacity "
            f"at peak, with {_plural(spare, 'spare replica')} (the p95 holds with "
            f"{'that many' if spare != 1 else 'one'} of the fastest replicas down)."
            if spare
            else f"{w.name} is sized to run at most {w.config['max_load']:.0%} of its p95 "
            "capacity at peak, with no spare replica (redundancy: 0)."
        )
        if w.config.get("requests"):
            out.append(mix_sentence(plan, w.name, w.config["requests"], spare))
        out += [s for r in w.config.get("replicas", []) if (s := deployment_sentence(w.name, r))]
    return out


def deployment_sentence(name: str, replica: dict) -> str | None:
    """A serving replica type that is a deployment (rack-wide workers, disaggregated pools,
    MTP), in words; None for a plain replica.

    >>> print(deployment_sentence("r1", {"gpu": "gb200", "gpus_per_replica": 48,
    ...     "layout": "4x4:dep+1x32:dep mtp", "rate_rps_per_replica": 12.5}))
    r1 runs on gb200 deployments of 48 GPUs: a prefill pool of 4 workers of 4 GPUs (dep) and a decode pool of 1 worker of 32 GPUs (dep), MTP on; 12.5 req/s each.
    """
    label = replica.get("layout")
    if not label:
        return None
    body, _, flag = str(label).partition(" ")
    pools = body.split("+")

    def pool(text: str) -> str:
        count, _, rest = text.partition("x")
        gpus, _, mode = rest.partition(":")
        n = int(count) if count.isdigit() else count
        return f"{_plural(n, 'worker') if isinstance(n, int) else n} of {gpus} GPUs ({mode})"

    if len(pools) == 2:
        what = f"a prefill pool of {pool(pools[0])} and a decode pool of {pool(pools[1])}"
    else:
        what = f"one pool of {pool(pools[0])} doing prefill and decode"
    mtp = "MTP on" if flag == "mtp" else "MTP off"
    rate = replica.get("rate_rps_per_replica")
    each = f"; {rate:.3g} req/s each" if isinstance(rate, (int, float)) else ""
    return (
        f"{name} runs on {replica.get('gpu')} deployments of {replica.get('gpus_per_replica')} "
        f"GPUs: {what}, {mtp}{each}."
    )


def mix_sentence(plan: Plan, name: str, requests: list[dict], spare: int) -> str:
    """Which GPU types serve which request buckets of a mix, by the capacity the plan gives
    each bucket over the horizon."""
    given: dict[str, dict[str, float]] = {}
    for al in plan.serve_allocations:
        if al.workload != name:
            continue
        for b, v in al.bucket_capacity_rps.items():
            kind = f"{al.gpu} x{al.gpus_per_replica}"
            given.setdefault(b, {}).setdefault(kind, 0.0)
            given[b][kind] += v
    parts = []
    for r in requests:
        on = given.get(r["name"], {})
        total = sum(on.values())
        kinds = [f"{k} ({v / total:.0%})" for k, v in sorted(on.items(), key=lambda kv: -kv[1])
                 if total and v / total >= 0.005]  # fmt: skip
        parts.append(
            f"{r['name']} ({r['share']:.0%} of requests, up to {r['prompt']}+{r['output']} "
            f"tokens) on {', '.join(kinds) or 'nothing'}"
        )
    tail = f"; each GPU type in use keeps {_plural(spare, 'spare replica')}" if spare else ""
    return f"{name} serves its request mix by size: " + "; ".join(parts) + tail + "."


def commitment_end(r: Reservation) -> str:
    """The last month of a reservation's term (YYYY-MM).

    >>> commitment_end(Reservation(offer="o", provider="p", gpu="b200", start_month="2027-01",
    ...     term_months=36, gpus=16, usd_per_gpu_hour=3.3, hours=26280, usd=1.0))
    '2029-12'
    """
    return month_label(r.start_month, r.term_months - 1)


def commitment_text(r: Reservation) -> str:
    """What a reservation signs: how many GPUs, with whom, for how long and at what rate."""
    return (
        f"{r.gpus} {r.gpu} ({r.provider} {r.offer}) for {r.term_months} months, "
        f"{r.start_month} to {commitment_end(r)}, at {_rate(r.usd_per_gpu_hour)}/GPU-h"
    )


def _rate(x: float) -> str:
    """A price per GPU-hour with 2 to 4 decimals: ``$3.30``, ``$2.7885``.

    >>> _rate(3.3), _rate(2.78851), _rate(12.0)
    ('$3.30', '$2.7885', '$12.00')
    """
    text = f"{x:,.4f}".rstrip("0")
    whole, _, dec = text.partition(".")
    return f"${whole}.{dec.ljust(2, '0')}"


def offer_terms_of(plan: Plan, offer: str) -> str:
    """The plan's record of how ``offer`` is bought and paid, and its price's date
    (:func:`planner.plan.assumptions.offer_terms`); empty for a plan written before it."""
    group = f"offer:{offer}"
    return next(
        (str(a.value) for a in plan.assumptions if a.group == group and a.key == "terms"), ""
    )


def reserve_sentences(plan: Plan) -> list[str]:
    out = []
    for r in plan.reservations:
        terms = offer_terms_of(plan, r.offer)
        out.append(
            f"Commit to {commitment_text(r)}: {_usd(r.usd)} in the horizon, paid whether used "
            "or not" + (f" ({terms})." if terms else ".")
        )
    return out


def existing_sentences(plan: Plan) -> list[str]:
    """What the team already has and what the plan does with it: existing GPUs kept or sold,
    contracts signed before the plan."""
    out = []
    first = {f.gpu: f for f in plan.fleet if f.existing or f.sold}
    kept: dict[str, int] = {}
    for f in plan.fleet:
        if f.month == plan.months[-1]:
            kept[f.gpu] = f.existing
    for g in sorted(first):
        n = kept.get(g, 0)
        if n:
            out.append(f"Keep {_plural(n, g + ' GPU')} already owned (no capex in this plan).")
    for s in plan.sales:
        out.append(
            f"Sell {s.count} existing {s.gpu} in {s.month} ({s.age_months} months old) for "
            f"{_usd(s.usd)} ({_usd(s.unit_usd)} each, the resale curve at that age)."
        )
    if plan.totals.committed_usd:
        out.append(
            f"Contracts signed before the plan cost {_usd(plan.totals.committed_usd)} inside the "
            "horizon, used or not; the plan uses their capacity first."
        )
    if out:
        out.append(_adds_sentence(plan))
    return out


def _adds_sentence(plan: Plan) -> str:
    """What the plan adds to what the team already has: purchases and rented GPU-hours."""
    bought = sum(p.count for p in plan.purchases)
    rented = [r for r in plan.rentals if r.kind != "committed"]
    hours = sum(r.gpu_hours for r in rented)
    providers = sorted({r.provider for r in rented})
    buys = f"buys {_plural(bought, 'GPU')}" if bought else "buys nothing"
    rents = f"rents {hours:,.0f} GPU-hours ({', '.join(providers)})" if rented else "rents nothing"
    return f"On top of what the team already has, the plan {buys} and {rents}."


def decision_sentences(plan: Plan) -> list[str]:
    """The plan in plain words: what it does with what the team has, then buy, rent,
    reserve, then the total. A two-stage plan states its decision once, says it holds in
    every scenario and which scenario the rentals and totals are, and ends with its risk."""
    lines = existing_sentences(plan)
    lines += buy_sentences(plan) or [
        "Buy nothing new." if lines else "Buy nothing: every GPU-hour is rented."
    ]
    lines += reserve_sentences(plan)
    if plan.scenarios:
        lines += [same_decision_sentence(plan), shown_scenario_sentence(plan)]
    lines += rent_sentences(plan) or ["Rent nothing: the owned fleet covers every workload."]
    lines += headroom_sentences(plan)
    lines.append(total_sentence(plan))
    return lines + scenario_risk_sentences(plan)


# ------------------------------------------------------------------ two-stage plans


def _q(name: str) -> str:
    return f"'{name}'"


def _pct(p: float) -> str:
    """A probability as people write it: ``50%``, ``12.5%``.

    >>> _pct(0.5), _pct(0.125), _pct(1 / 3)
    ('50%', '12.5%', '33.3%')
    """
    return f"{p * 100:.3g}%"


def measure_text(plan: Plan) -> str:
    """What a two-stage plan minimised, in words (the measure of the scenarios' present
    values): readers must know the VSS and EVPI are differences in this measure."""
    r = plan.risk
    if r is None or r.measure == "expected":
        return "the expected present value"
    if r.measure == "worst_case":
        return "the worst scenario's present value"
    return (
        f"the expected present value + {r.weight:g} x CVaR {_pct(r.alpha)} (the mean of the "
        f"worst {_pct(1 - r.alpha)} of outcomes)"
    )


def same_decision_sentence(plan: Plan) -> str:
    """That the purchases (and reservations, sales) hold whatever the demand turns out."""
    odds = ", ".join(f"{_q(s.name)} {_pct(s.probability)}" for s in plan.scenarios)
    return (
        f"This decision is the same in every scenario ({odds}): only the rentals adapt to "
        "each scenario's demand."
    )


def shown_scenario_sentence(plan: Plan) -> str:
    """Which scenario the rentals, totals and detail sheets show (the first one's)."""
    first = plan.scenarios[0]
    return (
        f"The rentals and totals that follow, and the detail sheets, show scenario "
        f"{_q(first.name)} ({_pct(first.probability)}); the Scenarios sheet has every "
        "scenario."
    )


def _same_purchases(plan: Plan) -> bool:
    """Whether the base forecast's own purchases are this plan's (then its VSS is 0 by
    construction, not by coincidence of costs)."""
    base = plan.scenarios[0].base_plan
    if base is None:
        return False
    buys = sorted((p.gpu, p.month, p.count, p.nodes) for p in plan.purchases)
    base_buys = sorted((p.gpu, p.month, p.count, p.nodes) for p in base.purchases)
    res = sorted((r.offer, r.start_month, r.gpus) for r in plan.reservations)
    base_res = sorted((r.offer, r.start_month, r.gpus) for r in base.reservations)
    return buys == base_buys and res == base_res


def scenario_cost_sentence(plan: Plan) -> str:
    """The expected present value and each scenario's, the worst named; the measure
    minimised when it is not the expectation."""
    t, sc = plan.totals, plan.scenarios
    worst = max(sc, key=lambda s: s.cost_usd)
    each = ", ".join(
        f"{_usd(s.cost_usd)} in {_q(s.name)} ({_pct(s.probability)}"
        + (", the worst)" if s is worst and len(sc) > 1 else ")")
        for s in sc
    )
    text = f"Expected present value {_usd(t.expected_usd or 0.0)} over {len(sc)} scenarios: {each}."
    if plan.risk is not None and plan.risk.measure != "expected":
        cvar = f" (CVaR {_usd(t.cvar_usd)})" if t.cvar_usd is not None else ""
        text += f" The plan minimises {measure_text(plan)}: {_usd(t.risk_usd or 0.0)}{cvar}."
    return text


def _in_measure(plan: Plan) -> str:
    expected = plan.risk is None or plan.risk.measure == "expected"
    return "in expectation" if expected else "in that measure"


def vss_sentence(plan: Plan) -> str:
    """What planning for the base forecast alone would cost more (the VSS), plainly 0 when
    its purchases are this plan's."""
    base, vss = plan.scenarios[0].name, plan.totals.vss_usd
    who = f"Planning for the base forecast ({_q(base)}) alone"
    if vss is None:
        short = [_q(s.name) for s in plan.scenarios if s.base_usd is None]
        where = f" (not {', '.join(short)})" if short else ""
        return (
            f"The base forecast's ({_q(base)}) own purchases cannot meet every scenario{where}: "
            "planning for it alone is no option, so there is no VSS to state."
        )
    if abs(vss) < 0.5:
        if _same_purchases(plan):
            return f"{who} would cost the same: its purchases are this plan's (VSS $0)."
        return f"{who} would cost the same {_in_measure(plan)} (VSS $0)."
    return f"{who} would cost {_usd(vss)} more {_in_measure(plan)} (VSS)."


def evpi_sentence(plan: Plan) -> str:
    """What knowing the future would save (the EVPI), and where the regret is largest."""
    evpi = plan.totals.evpi_usd or 0.0
    if abs(evpi) < 0.5:
        return (
            "Knowing the future would save nothing (EVPI $0): this plan is every scenario's "
            "own best."
        )
    worst = max(plan.scenarios, key=lambda s: s.regret_usd)
    return (
        f"Knowing the future would save {_usd(evpi)} {_in_measure(plan)} (EVPI): against each "
        f"scenario's own best plan, the regret is largest in {_q(worst.name)} "
        f"({_usd(worst.regret_usd)})."
    )


def scenario_risk_sentences(plan: Plan) -> list[str]:
    """A two-stage plan's risk in words (none for an ordinary plan)."""
    if not plan.scenarios:
        return []
    return [scenario_cost_sentence(plan), vss_sentence(plan), evpi_sentence(plan)]


def total_sentence(plan: Plan) -> str:
    """The cash total, then its present value and the resale value it counts (if known)."""
    t = plan.totals
    opex = t.power_usd + t.hosting_usd + t.rental_usd + t.committed_usd
    sold = f", less {_usd(t.sale_proceeds_usd)} from GPUs sold" if t.sale_proceeds_usd else ""
    text = (
        f"Total over {len(plan.months)} months: {_usd(t.total_usd)} cash "
        f"(capex {_usd(t.capex_usd)}, opex {_usd(opex)}{sold})"
    )
    if t.npv_usd is None:  # a plan from before present values
        return text + "."
    text += f"; present value {_usd(t.npv_usd)} at {plan.discount_rate:.1%} a year"
    book = f"book value {_usd(t.book_value_usd)}"
    if not plan.purchases and not t.residual_value_usd:
        pass  # nothing owned: nothing to resell
    elif plan.residual_mode == "none":
        text += f", with no resale of the owned hardware assumed ({book} at the horizon end)"
    else:
        text += (
            f", net of {_usd(t.residual_value_usd)} resale value of the owned hardware at the "
            f"horizon end ({book})"
        )
    return text + "."
