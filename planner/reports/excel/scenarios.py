"""The ``Scenarios`` sheet (only in a two-stage plan, ``scenarios:``): one row per demand
scenario with its probability (a yellow input), what changes in it and its present value
under this plan's purchases, under its own best plan, the regret between them, under the
base forecast's purchases and under every other forecast's own purchases (each re-planned in
the scenario by the planner). Below each value column: its expected value, its worst case
and, for ``risk: cvar``, its CVaR and risk measure, all live; then the measure's inputs and
the value of the stochastic solution (VSS) and of perfect information (EVPI) beside the
planner's figures.

The costs are the planner's (a re-plan per scenario cannot be a formula); what follows from
them is live, so finance can change a probability and see the expected cost, VSS and EVPI
move. Sums of products are written out (``B5*D5+B6*D6``): the in-repo evaluator that stores
every formula's value (:mod:`planner.reports.formula_eval`) has no SUMPRODUCT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openpyxl.utils import get_column_letter
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.worksheet import Worksheet

from planner.plan.data import Plan
from planner.reports.excel.cells import (
    _BORDER,
    _F_BOLD,
    _F_SUB,
    _FILL_INPUT,
    _FILL_KEY,
    _FILL_TOTAL,
    _TOP_ALIGN,
    _WRAP,
    FIRST_ROW,
    HEADER_ROW,
    NUM2,
    PCT,
    USD,
    USD_CENTS,
    F,
    _num,
    _put,
    _sheet_ref,
)
from planner.reports.excel.context import Ctx
from planner.reports.excel.refs import SCENARIOS
from planner.reports.excel.tables import _head_cells, _lines, _print_setup, _section, _title
from planner.reports.plan_facts import measure_text

# columns of the scenario table (1-based)
C_NAME, C_PROB, C_CHANGES, C_COST, C_OWN, C_REGRET, C_BASE = 1, 2, 3, 4, 5, 6, 7
_WIDTHS = {C_NAME: 24, C_PROB: 12, C_CHANGES: 40}
_VALUE_WIDTH = 17


@dataclass
class _Layout:
    """Where everything on the sheet is: scenario rows, value columns (each with its values
    by scenario, None where the planner has none), the rows below the table, the inputs."""

    plan: Plan
    values: dict[int, list[float | None]]  # value column -> its figure per scenario
    headers: dict[int, str]
    cand: dict[int, int] = field(default_factory=dict)  # value column -> CVaR candidates

    @property
    def n(self) -> int:
        return len(self.plan.scenarios)

    @property
    def measure(self) -> str:
        return "expected" if self.plan.risk is None else self.plan.risk.measure

    @property
    def last(self) -> int:
        return FIRST_ROW + self.n - 1

    @property
    def expected(self) -> int:  # row: probability-weighted sums
        return self.last + 1

    @property
    def worst(self) -> int:
        return self.last + 2

    @property
    def cvar(self) -> int:  # cvar only
        return self.last + 3

    @property
    def in_measure(self) -> int:
        """The row of each column's value in the risk measure."""
        return {"expected": self.expected, "worst_case": self.worst}.get(
            self.measure, self.last + 4
        )

    @property
    def inputs(self) -> int:  # the risk measure block's section row
        return max(self.worst, self.in_measure) + 2

    @property
    def alpha(self) -> str:
        return f"$D${self.inputs + 2}"

    @property
    def weight(self) -> str:
        return f"$D${self.inputs + 3}"

    def complete(self, col: int) -> bool:
        return all(v is not None for v in self.values[col])

    def rng(self, col: int) -> str:
        L = get_column_letter(col)
        return f"${L}${FIRST_ROW}:${L}${self.last}"

    def weighted(self, col: int) -> str:
        """probability x value, summed (SUMPRODUCT written out)."""
        L = get_column_letter(col)
        return "+".join(f"$B${r}*${L}${r}" for r in range(FIRST_ROW, self.last + 1))


def _layout(plan: Plan) -> _Layout:
    """The value columns: this plan, own best, base forecast's purchases, then each other
    forecast's own purchases the planner re-planned; CVaR candidate columns after them."""
    sc = plan.scenarios
    values: dict[int, list[float | None]] = {
        C_COST: [s.cost_usd for s in sc],
        C_OWN: [s.own_usd for s in sc],
        C_BASE: [s.base_usd for s in sc],
    }
    headers = {
        C_COST: "Cost under this plan (PV)",
        C_OWN: "Own best plan (PV)",
        C_BASE: f"Buying for the base forecast ('{sc[0].name}') alone (PV)",
    }
    col = C_BASE
    for s in sc[1:]:
        costs = s.fleet_costs_usd
        if costs is None or len(costs) != len(sc):
            continue
        col += 1
        values[col] = list(costs)
        headers[col] = f"Buying for '{s.name}' alone (PV)"
    lay = _Layout(plan, values, headers)
    if lay.measure == "cvar":
        for c in [c for c in values if lay.complete(c)]:
            col += 1
            lay.cand[c] = col
    return lay


def write_scenarios(ctx: Ctx) -> None:
    """The Scenarios sheet of a two-stage plan (nothing for an ordinary plan)."""
    plan = ctx.plan
    if not plan.scenarios or SCENARIOS not in ctx.ws:
        return
    ws = ctx.ws[SCENARIOS]
    lay = _layout(plan)
    _title(ws, SCENARIOS, _subtitle(plan))
    _scenario_rows(ws, lay)
    _candidate_cols(ws, lay)
    _summary_rows(ws, lay)
    r = _risk_inputs(ws, lay)
    r = _figures(ctx, ws, lay, r + 2)
    _put(
        ws,
        r + 2,
        1,
        "Costs in the scenario rows are the planner's present values (each a re-plan of the "
        "rentals in that scenario); every figure below them is a live formula over the yellow "
        "probabilities.",
        font=_F_SUB,
    )
    for c in range(1, max(lay.values) + len(lay.cand) + 1):
        ws.column_dimensions[get_column_letter(c)].width = _WIDTHS.get(c, _VALUE_WIDTH)
    ws.row_dimensions[HEADER_ROW].height = 54
    _print_setup(ws, f"{HEADER_ROW}:{HEADER_ROW}", f"B{FIRST_ROW}")


def _subtitle(plan: Plan) -> str:
    n = len(plan.scenarios)
    return (
        f"One purchase decision across {n} demand scenarios, chosen to minimise "
        f"{measure_text(plan)}. 'Buying for X alone': the purchases of X's own best plan, "
        "held in every scenario with the rentals re-planned. Probabilities are yellow inputs: "
        "change one and the expected cost, VSS and EVPI follow."
    )


def _scenario_rows(ws: Worksheet, lay: _Layout) -> None:
    """One row per scenario: name, probability (input), changes, values, regret."""
    _head_cells(ws, HEADER_ROW, ["Scenario", "Probability", "What changes"])
    heads = {**lay.headers, C_REGRET: "Regret (cost - own best)"}
    for c, text in heads.items():
        _head_cells(ws, HEADER_ROW, [text], start_col=c)
    for i, s in enumerate(lay.plan.scenarios):
        r = FIRST_ROW + i
        changes = "; ".join(s.changes) or "none: the problem as written"
        _put(ws, r, C_NAME, s.name, font=_F_BOLD, align=_WRAP, border=_BORDER)
        _put(ws, r, C_PROB, _num(s.probability), PCT, fill=_FILL_INPUT, border=_BORDER)
        _put(ws, r, C_CHANGES, changes, align=_WRAP, border=_BORDER)
        for c, vals in lay.values.items():
            v = vals[i]
            _put(ws, r, c, "n/a" if v is None else _num(v), USD, align=_TOP_ALIGN, border=_BORDER)
        _put(ws, r, C_REGRET, F(f"=D{r}-E{r}"), USD, align=_TOP_ALIGN, border=_BORDER)
        lines = max(_lines(changes, _WIDTHS[C_CHANGES]), _lines(s.name, _WIDTHS[C_NAME]))
        if lines > 1:
            ws.row_dimensions[r].height = 13 * lines + 1


def _candidate_cols(ws: Worksheet, lay: _Layout) -> None:
    """For cvar: per value column, eta + sum p x max(0, value - eta) / (1 - alpha) at eta =
    each row's value; the smallest is the column's CVaR (the minimum over eta is reached at
    one of the values, as the planner computes it)."""
    for col, cand in lay.cand.items():
        L = get_column_letter(col)
        _head_cells(ws, HEADER_ROW, [f"CVaR candidate: {lay.headers[col]}"], start_col=cand)
        for r in range(FIRST_ROW, lay.last + 1):
            tail = "+".join(
                f"$B${k}*MAX(0,${L}${k}-${L}${r})" for k in range(FIRST_ROW, lay.last + 1)
            )
            formula = F(f"=${L}${r}+({tail})/(1-{lay.alpha})")
            _put(ws, r, cand, formula, USD, align=_TOP_ALIGN, border=_BORDER)


def _summary_rows(ws: Worksheet, lay: _Layout) -> None:
    """Below the table: each value column's expected value and worst case (and for cvar its
    CVaR and risk measure); the probabilities' sum and its check."""
    labels = [(lay.expected, "Expected (probability x value)"), (lay.worst, "Worst (largest)")]
    if lay.measure == "cvar":
        labels += [(lay.cvar, "CVaR (smallest candidate)"), (lay.in_measure, "In the risk measure")]
    for r, label in labels:
        _put(ws, r, C_NAME, label, font=_F_BOLD, fill=_FILL_TOTAL, border=_BORDER)
        for c in [*lay.values, C_REGRET]:
            _put(ws, r, c, _summary_cell(lay, r, c), USD, _F_BOLD, _FILL_TOTAL, border=_BORDER)
    e = lay.expected
    _put(
        ws,
        e,
        C_PROB,
        F(f"=SUM(B{FIRST_ROW}:B{lay.last})"),
        PCT,
        _F_BOLD,
        _FILL_TOTAL,
        border=_BORDER,
    )
    check = F(
        f'=IF(ROUND(B{e},6)=1,"OK: the probabilities sum to 100%",'
        '"NO: the probabilities must sum to 100%")'
    )
    _put(ws, e, C_CHANGES, check, font=_F_BOLD, fill=_FILL_TOTAL, border=_BORDER)


def _summary_cell(lay: _Layout, r: int, c: int) -> F | str | None:
    """One value column's figure in a summary row (n/a where a scenario has no value)."""
    if c == C_REGRET:
        if r == lay.expected:
            return F(f"={lay.weighted(c)}")
        return F(f"=MAX({lay.rng(c)})") if r == lay.worst else None
    if not lay.complete(c):
        return "n/a"
    L = get_column_letter(c)
    if r == lay.expected:
        return F(f"={lay.weighted(c)}")
    if r == lay.worst:
        return F(f"=MAX({lay.rng(c)})")
    if r == lay.cvar:
        return F(f"=MIN({lay.rng(lay.cand[c])})")
    return F(f"={L}{lay.expected}+{lay.weight}*{L}{lay.cvar}")


def _risk_inputs(ws: Worksheet, lay: _Layout) -> int:
    """The measure minimised and, for cvar, its level and weight (yellow inputs); the last
    row."""
    top = lay.inputs
    _section(ws, top, "Risk measure")
    risk = lay.plan.risk
    _put(ws, top + 1, 1, "Measure the plan minimises")
    _put(ws, top + 1, C_COST, lay.measure.replace("_", " "), font=_F_BOLD)
    _put(ws, top + 1, C_BASE, measure_text(lay.plan), font=_F_SUB)
    if lay.measure != "cvar" or risk is None:
        return top + 1
    _put(ws, top + 2, 1, "CVaR level alpha")
    _put(ws, top + 2, C_COST, _num(risk.alpha), PCT, fill=_FILL_INPUT, border=_BORDER)
    _put(ws, top + 2, C_BASE, "the mean of the worst 1 - alpha of outcomes", font=_F_SUB)
    _put(ws, top + 3, 1, "Weight of CVaR")
    _put(ws, top + 3, C_COST, _num(risk.weight), NUM2, fill=_FILL_INPUT, border=_BORDER)
    _put(ws, top + 3, C_BASE, "risk measure = expected + weight x CVaR", font=_F_SUB)
    return top + 3


@dataclass(frozen=True)
class _Figure:
    label: str
    live: F | str
    planner: float | None
    how: str
    key: bool = False
    name: str = ""  # a workbook-level name for the live cell


def _figure_lines(lay: _Layout) -> list[_Figure]:
    """The headline figures: live over the rows above, beside the planner's own."""
    t, m = lay.plan.totals, lay.in_measure
    out = [
        _Figure(
            "Expected cost under this plan",
            F(f"=D{lay.expected}"),
            t.expected_usd,
            "probability x cost, summed (column D)",
            key=True,
            name="expected_usd",
        ),
        _Figure(
            "Worst case under this plan",
            F(f"=D{lay.worst}"),
            t.worst_usd,
            "the largest cost in column D",
            name="worst_usd",
        ),
    ]
    if lay.measure == "cvar":
        how = "the smallest CVaR candidate of column D"
        out.append(_Figure("CVaR under this plan", F(f"=D{lay.cvar}"), t.cvar_usd, how))
    if lay.measure != "expected":
        how = f"{lay.measure.replace('_', ' ')}: what the plan minimises"
        out.append(_Figure("This plan in the risk measure", F(f"=D{m}"), t.risk_usd, how))
    out += [_vss_line(lay), _evpi_line(lay)]
    return out + _alternative_lines(lay)


def _vss_line(lay: _Layout) -> _Figure:
    """The base forecast's purchases in the measure less this plan (n/a where they cannot
    meet some scenario)."""
    m, sc = lay.in_measure, lay.plan.scenarios
    short = [f"'{s.name}'" for s, v in zip(sc, lay.values[C_BASE], strict=True) if v is None]
    label = "VSS: value of planning for every scenario"
    if short:
        how = f"n/a: the base forecast's purchases cannot meet {', '.join(short)}"
        return _Figure(label, "n/a", lay.plan.totals.vss_usd, how, key=True)
    how = f"the base forecast's purchases (column G) less this plan, {_in(lay)}"
    return _Figure(label, F(f"=G{m}-D{m}"), lay.plan.totals.vss_usd, how, True, "vss_usd")


def _evpi_line(lay: _Layout) -> _Figure:
    m = lay.in_measure
    how = f"this plan less every scenario's own best plan (column E), {_in(lay)}"
    label = "EVPI: value of knowing the future"
    return _Figure(label, F(f"=D{m}-E{m}"), lay.plan.totals.evpi_usd, how, True, "evpi_usd")


def _in(lay: _Layout) -> str:
    return "in expectation" if lay.measure == "expected" else "in the risk measure"


def _alternative_lines(lay: _Layout) -> list[_Figure]:
    """Per other forecast whose own purchases were re-planned everywhere: what they would
    cost more than this plan (the planner keeps the cheapest, so never below 0)."""
    out = []
    probs = [s.probability for s in lay.plan.scenarios]
    for c in [c for c in lay.values if c > C_BASE and lay.complete(c)]:
        L, m = get_column_letter(c), lay.in_measure
        vals = [v or 0.0 for v in lay.values[c]]
        planner = _measure_value(vals, probs, lay) - (lay.plan.totals.risk_usd or 0.0)
        label = lay.headers[c].removesuffix(" (PV)") + ": more than this plan"
        out.append(
            _Figure(label, F(f"={L}{m}-D{m}"), planner, f"column {L} less column D, {_in(lay)}")
        )
    return out


def _measure_value(costs: list[float], probs: list[float], lay: _Layout) -> float:
    """The plan's risk measure of ``costs`` (as :func:`planner.optimize.stochastic.risk_value`
    computes it; reports do not import the optimizer)."""
    expected = sum(c * p for c, p in zip(costs, probs, strict=True))
    risk = lay.plan.risk
    if risk is None or risk.measure == "expected":
        return expected
    if risk.measure == "worst_case":
        return max(costs)

    def tail(eta: float) -> float:
        return eta + sum(p * max(0.0, c - eta) for c, p in zip(costs, probs, strict=True)) / (
            1 - risk.alpha
        )

    return expected + risk.weight * min(tail(c) for c in costs)


def _figures(ctx: Ctx, ws: Worksheet, lay: _Layout, top: int) -> int:
    """The headline figures, workbook (live) vs planner with their difference; the last row."""
    _section(ws, top, "Across the scenarios (present value): workbook (live) vs planner")
    _head_cells(ws, top + 1, ["Item", "", "", "Workbook (live)", "Planner", "Difference"])
    _head_cells(ws, top + 1, ["How it is computed"], start_col=C_BASE)
    r = top + 1
    for f in _figure_lines(lay):
        r += 1
        fill, font = (_FILL_KEY, _F_BOLD) if f.key else (None, None)
        _put(ws, r, 1, f.label, font=font, fill=fill)
        _put(ws, r, C_COST, f.live, USD, font=font, fill=fill, border=_BORDER)
        planner = "n/a" if f.planner is None else _num(f.planner)
        _put(ws, r, C_OWN, planner, USD, border=_BORDER)
        diff = F(f"=D{r}-E{r}") if isinstance(f.live, F) and f.planner is not None else "n/a"
        _put(ws, r, C_REGRET, diff, USD_CENTS, border=_BORDER)
        _put(ws, r, C_BASE, f.how, font=_F_SUB)
        if f.name and isinstance(f.live, F):
            ref = _sheet_ref(SCENARIOS, f"$D${r}")
            ctx.wb.defined_names[f.name] = DefinedName(f.name, attr_text=ref)
    return r
