"""The figures behind the Excel report's live formulas: the rows of the ``Assumptions``
sheet (the plan's assumptions, then its own metadata), the lookup that gives each formula
input its cell (adding a derived or a missing row when the plan lacks it), the finance
inputs (discount rate, depreciation life, resale mode) and the resale curves read from them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.plan.data import Plan
from planner.reports.excel.cells import FIRST_ROW, _finite, _sheet_ref


@dataclass
class _ARow:
    group: str
    key: str
    value: Any
    unit: str = ""
    source: str = ""
    as_of: str = ""
    note: str = ""  # "derived" / "missing" rows added by the report


@dataclass
class _Assumptions:
    """The rows of the Assumptions sheet and the cell each formula input lives in."""

    rows: list[_ARow] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    used: set[int] = field(default_factory=set)  # rows referenced by formulas

    def __post_init__(self) -> None:
        self._value_col = "C"
        self._by_key: dict[str, list[int]] = {}  # key -> its rows, in order (find's index)
        for i, r in enumerate(self.rows):
            self._by_key.setdefault(r.key, []).append(i)

    def add(self, row: _ARow) -> int:
        self.rows.append(row)
        self._by_key.setdefault(row.key, []).append(len(self.rows) - 1)
        return len(self.rows) - 1

    def cell(self, idx: int) -> str:
        self.used.add(idx)
        return _sheet_ref("Assumptions", f"${self._value_col}${FIRST_ROW + idx}")

    def find(self, groups: Sequence[str] | None, keys: Sequence[str]) -> int | None:
        """First row with a numeric value in one of ``groups`` (None = any) with one of ``keys``."""
        for key in keys:
            for i in self._by_key.get(key, ()):
                r = self.rows[i]
                if (groups is None or r.group in groups) and _finite(r.value):
                    return i
        return None

    def ref(
        self,
        group: str,
        keys: Sequence[str],
        *,
        fallback: float | None,
        unit: str,
        source: str,
        groups: Sequence[str] | None = None,
    ) -> str:
        """The cell of an input; adds a derived (or, lacking a fallback, missing) row if absent."""
        i = self.find(groups if groups is not None else [group], keys)
        if i is None:
            if fallback is not None and _finite(fallback):
                i = self.add(_ARow(group, keys[0], fallback, unit, source, note="derived"))
            else:
                i = self.add(
                    _ARow(
                        group,
                        keys[0],
                        0.0,
                        unit,
                        "MISSING from plan.assumptions: enter the figure",
                        note="missing",
                    )
                )
                self.missing.append(f"{group} / {keys[0]}")
        return self.cell(i)

    def ref_text(self, group: str, key: str, fallback: str, source: str) -> str:
        """The cell of a text input (such as the resale mode); adds a derived row if absent."""
        for i, r in enumerate(self.rows):
            if r.group == group and r.key == key and isinstance(r.value, str):
                return self.cell(i)
        return self.cell(self.add(_ARow(group, key, fallback, "", source, note="derived")))

    def ref_equal(self, group: str, key: str, value: float, unit: str, source: str) -> str | None:
        """The cell of ``group/key`` if it holds ``value`` (adding it if absent); None if it differs."""
        i = self.find([group], [key])
        if i is None:
            i = self.add(_ARow(group, key, value, unit, source, note="derived"))
        v = self.rows[i].value
        if math.isclose(float(v), float(value), rel_tol=1e-9, abs_tol=1e-9):
            return self.cell(i)
        return None


def _same(a: Any, b: Any) -> bool:
    if _finite(a) and _finite(b):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _build_assumptions(plan: Plan) -> _Assumptions:
    """The plan's assumptions, then the plan's own metadata unless an assumption already says it."""
    a = _Assumptions()
    for x in plan.assumptions:
        a.add(_ARow(x.group, x.key, x.value, x.unit, x.source, x.as_of))
    have = {(x.group, x.key): x.value for x in plan.assumptions}
    meta: list[tuple[str, Any, str, tuple[str, str]]] = [
        ("status", plan.status, "", ("solver", "status")),
        ("solver", plan.solver, "", ("solver", "solver")),
        ("gap", plan.gap if _finite(plan.gap) else "n/a", "", ("solver", "gap")),
        ("solve_seconds", plan.solve_seconds, "s", ("solver", "solve_seconds")),
        (
            "objective_usd",
            plan.objective_usd if _finite(plan.objective_usd) else "n/a",
            "USD",
            ("solver", "objective_usd"),
        ),
        ("planner_version", plan.planner_version, "", ("solver", "planner_version")),
        ("problem_name", plan.problem_name, "", ("problem", "name")),
        ("problem_file", plan.problem_file, "", ("problem", "file")),
        ("problem_sha256", plan.problem_sha256, "", ("problem", "sha256")),
        ("horizon_start", plan.horizon_start, "", ("problem", "horizon_start")),
        ("months", len(plan.months), "months", ("problem", "months")),
    ]
    if plan.message:
        meta.append(("message", plan.message, "", ("solver", "message")))
    for key, value, unit, alias in meta:
        if alias in have and _same(have[alias], value):
            continue
        a.add(_ARow("plan", key, value, unit, "plan (solver output)", note="meta"))
    i = a.find(None, ["hours_per_month"])
    if i is None or not _same(a.rows[i].value, plan.hours_per_month):
        a.add(
            _ARow(
                "plan",
                "hours_per_month",
                plan.hours_per_month,
                "h/month",
                "plan.hours_per_month",
                note="derived",
            )
        )
    return a


@dataclass(frozen=True)
class _FinanceCells:
    """The Assumptions cells of the finance inputs the discounting and the P&L read."""

    rate: str  # annual discount rate
    years: str  # straight-line depreciation life
    mode: str  # resale mode: curve | straight_line | none


def _finance_cells(a: _Assumptions, plan: Plan) -> _FinanceCells:
    """The finance inputs; a plan without them (written before issue 14) gets derived rows
    from its own fields: its discount rate, its resale mode, its depreciation life."""
    life = plan.depreciation[0].years if plan.depreciation else 5.0
    return _FinanceCells(
        rate=a.ref(
            "finance",
            ["discount_rate"],
            fallback=plan.discount_rate,
            unit="per year",
            source="plan.discount_rate",
        ),
        years=a.ref(
            "finance",
            ["depreciation_years"],
            fallback=life,
            unit="years",
            source="plan depreciation schedule (5 years if none)",
        ),
        mode=a.ref_text("finance", "residual", plan.residual_mode, "plan.residual_mode"),
    )


_CURVE_KEY = re.compile(r"residual_share_(\d+)m")


def _curve_points(a: _Assumptions, gpu: str) -> list[tuple[int, int]]:
    """(age in months, Assumptions row) of each point of a GPU's resale curve, by age."""
    out = []
    for i, r in enumerate(a.rows):
        m = _CURVE_KEY.fullmatch(r.key)
        if r.group == f"gpu:{gpu}" and m and _finite(r.value):
            out.append((int(m[1]), i))
    return sorted(out)


def _curve_segment(points: list[tuple[int, int]], age: int) -> int:
    """Index k of the segment (xs[k-1], xs[k]) of ``[0] + ages`` the share at ``age`` is read
    on: the one around the age, the last one past the last point (as ResidualCurve.share_at)."""
    xs = [0] + [x for x, _ in points]
    if len(xs) == 2 or age <= xs[-1]:
        return max(1, next((j for j, x in enumerate(xs) if x >= age), len(xs) - 1))
    return len(xs) - 1


def _curve_value(a: _Assumptions, points: list[tuple[int, int]], age: int) -> float:
    """The curve's share at ``age`` from the figures on Assumptions (0 without a curve)."""
    if not points:
        return 0.0
    k = _curve_segment(points, age)
    xs = [0] + [x for x, _ in points]
    ys = [1.0] + [float(a.rows[i].value) for _, i in points]
    value = ys[k - 1] + (ys[k] - ys[k - 1]) * (age - xs[k - 1]) / (xs[k] - xs[k - 1])
    return min(1.0, max(0.0, value))


def _curve_formula(a: _Assumptions, points: list[tuple[int, int]], age: int, age_cell: str) -> str:
    """The curve's share at ``age`` as a formula over its points: linear between the two
    points around the age, from (0, 100 %), the last segment continued past the last point,
    between 0 and 1 (planner.inputs.catalog.ResidualCurve.share_at)."""
    if not points:
        return "0"
    k = _curve_segment(points, age)
    xs = [0] + [x for x, _ in points]
    y0 = "1" if k == 1 else a.cell(points[k - 2][1])
    y1 = a.cell(points[k - 1][1])
    x0, x1 = xs[k - 1], xs[k]
    return f"MAX(0,MIN(1,{y0}+({y1}-{y0})*({age_cell}-{x0})/{x1 - x0}))"


def _curve_source(gpu: str, points: list[tuple[int, int]]) -> str:
    if not points:
        return f"no resale curve for {gpu} on Assumptions: 0 under 'curve'"
    ages = ", ".join(f"{x}" for x, _ in points)
    return f"resale mode on Assumptions; curve gpu:{gpu} residual_share at {ages} months"
