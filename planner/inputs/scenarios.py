"""Demand scenarios of a problem file: each entry of ``scenarios`` as the problem file's data
with its ``set`` values and ``scale`` multipliers applied, ready to be validated and resolved
like the file itself (:func:`planner.inputs.problem.resolve` does that and wraps each in a
:class:`~planner.inputs.problem.Scenario`).

A scenario is a forecast, not another problem: it may change numbers (demand, growth, prices,
rates) but not the model's shape (the horizon, the GPU types, the solver, the profiles), so
that every scenario has the same months and workloads and a two-stage plan can share its
first-stage decisions among them. Its keys are those of ``planner whatif --vary`` (paths and
aliases, :mod:`planner.inputs.keys`), so one vocabulary names a value everywhere.

This module only prepares data (it imports neither the resolution nor the catalogs): the
resolution imports it, not the other way round.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from planner.base.errors import InputError
from planner.base.yamlio import YamlDoc, format_loc
from planner.inputs.keys import Loc, _child_type, _model_type, resolve_key, set_at
from planner.inputs.schema import Problem, ScenarioSpec

# Sections a scenario may not change, and why (each would change the model's shape).
FIXED_SECTIONS = {
    "horizon": "the months of the plan",
    "solver": "how the plan is solved",
    "scenarios": "the scenarios themselves",
    "risk": "how the scenarios are weighed",
    "gpus": "the GPU types the plan may use",
    "custom_gpus": "the GPU types the plan may use",
    "profiles": "the measured profiles",
}


# Fields of an offer a reservation is signed on (its term and instance size): the same in
# every scenario, as the reservation is (a price may differ).
TERMS = ("term_months", "gpus_per_instance")


@dataclass(frozen=True)
class ScenarioData:
    """One scenario as problem-file data (no ``scenarios`` or ``risk`` of its own), and what
    differs from the file, in words."""

    name: str
    probability: float
    data: dict[str, Any]
    changes: tuple[str, ...]
    # The line of each value the scenario sets: its ``set`` entry, so that a value the
    # schema refuses is reported where it is written (the rest keep the file's lines).
    lines: dict[Loc, int] = field(default_factory=dict)


def _where(doc: YamlDoc | None, loc: Loc) -> str:
    """``invalid problem file: file:line: scenarios[i].set.KEY``, as the file's other errors
    (just the field without a file)."""
    if doc is None:
        return f"invalid problem: {format_loc(loc)}"
    return f"invalid problem file: {doc.where(loc)}: {format_loc(loc)}"


def _as_written(x: float) -> float | int:
    """An integral number as an int: some fields (``lead_months``) take whole numbers only,
    and the schema has read every ``set`` value as a float."""
    return int(x) if float(x).is_integer() else x


def _numeric(tp: Any) -> bool:
    """Whether a schema annotation holds a number (``float``, ``int``, ``Count``, optional)."""
    tp = _model_type(tp)
    if typing.get_origin(tp) is typing.Annotated:
        return _numeric(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_numeric(a) for a in typing.get_args(tp) if a is not type(None))
    return tp in (int, float)


def _field_type(loc: Loc) -> Any:
    """The schema annotation of the field at ``loc`` (None when the schema does not say)."""
    tp: Any = Problem
    for part in loc:
        tp = _child_type(tp, 0 if isinstance(part, int) else part)
        if tp is None:
            return None
    return tp


def _key_locs(data: dict[str, Any], key: str, name: str, at: str) -> list[Loc]:
    """The locations ``key`` sets, or an InputError naming the scenario, key and line."""
    root = key.split(".")[0]
    if root in FIXED_SECTIONS:
        raise InputError(
            f"{at}: scenario {name!r}: {key!r} is under {root}, {FIXED_SECTIONS[root]}; a "
            "scenario is a forecast (demand, growth, prices, rates), not another problem, so "
            f"it cannot change {root}"
        )
    try:
        locs = resolve_key(data, key)
    except InputError as exc:
        why = str(exc).removeprefix(f"--vary {key}: ")
        raise InputError(f"{at}: scenario {name!r}: {why}") from None
    for loc in locs:
        if str(loc[0]) in FIXED_SECTIONS:  # an alias would not; a path was refused above
            raise InputError(f"{at}: scenario {name!r}: {key!r} is under {loc[0]}")
        if loc[-1] in TERMS:
            raise InputError(
                f"{at}: scenario {name!r}: {key!r} is a term a reservation is signed on, and "
                "reservations are signed once for every scenario; change it for the whole "
                "problem"
            )
        if loc[-1] == "lead_months":
            raise InputError(
                f"{at}: scenario {name!r}: {key!r} is a lead time, which says when purchases "
                "are ordered; a two-stage plan orders them once for every scenario, so a lead "
                "time is the same in all of them (change it in market: for the whole problem)"
            )
        tp = _field_type(loc)
        if tp is not None and not _numeric(tp):
            raise InputError(
                f"{at}: scenario {name!r}: {format_loc(loc)} is not a number "
                f"({_type_name(tp)}); a scenario sets numbers only"
            )
    return locs


def _type_name(tp: Any) -> str:
    """What a field holds, in words, for the message refusing it."""
    tp = _model_type(tp)
    if typing.get_origin(tp) is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(tp)))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"a mapping of {', '.join(tp.model_fields)}"
    names = {bool: "true or false", str: "text"}
    return names.get(tp) or getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _apply_set(
    data: dict[str, Any], spec: ScenarioSpec, i: int, doc: YamlDoc | None, lines: dict[Loc, int]
) -> list[str]:
    """Set ``spec.set`` in ``data`` (in place), each location's line in ``lines``; the
    changes in words."""
    changes: list[str] = []
    seen: dict[Loc, str] = {}
    for key, value in spec.set.items():
        here = ("scenarios", i, "set", key)
        at = _where(doc, here)
        line = doc.line_of(here) if doc is not None else None
        for loc in _key_locs(data, key, spec.name, at):
            if loc in seen:
                raise InputError(
                    f"{at}: scenario {spec.name!r}: {key!r} and {seen[loc]!r} both set "
                    f"{format_loc(loc)}; set it once"
                )
            seen[loc] = key
            set_at(data, loc, _as_written(value))
            if line is not None:
                lines[loc] = line
        changes.append(f"{key} = {value:.12g}")
    return changes


def _apply_scale(
    data: dict[str, Any], spec: ScenarioSpec, i: int, doc: YamlDoc | None
) -> list[str]:
    """Multiply every serving workload's daily active users (in place): demand is
    proportional to them in every month."""
    if spec.scale is None:
        return []
    factor = spec.scale.serving_demand
    serve = (data.get("workloads") or {}).get("serve") or []
    if not serve:
        at = _where(doc, ("scenarios", i, "scale", "serving_demand"))
        raise InputError(
            f"{at}: scenario {spec.name!r}: the problem has no serving workloads "
            "(workloads.serve), so there is no serving demand to scale"
        )
    for w in serve:
        w["traffic"]["daily_active_users"] = w["traffic"]["daily_active_users"] * factor
    return [f"serving demand x {factor:.12g}"]


def scenario_data(
    data: dict[str, Any], specs: Sequence[ScenarioSpec], doc: YamlDoc | None
) -> list[ScenarioData]:
    """Each scenario as the problem file's ``data`` (left unchanged) without ``scenarios`` and
    ``risk``, ``set`` applied first and ``scale`` on the result.

    >>> from planner.inputs.schema import ScenarioSpec
    >>> d = {"name": "x", "site": {"power_usd_per_kwh": 0.1}, "scenarios": []}
    >>> [s] = scenario_data(d, [ScenarioSpec(name="dear", probability=1,
    ...                                      set={"power_price": 0.2})], None)
    >>> s.data, s.changes
    ({'name': 'x', 'site': {'power_usd_per_kwh': 0.2}}, ('power_price = 0.2',))
    """
    out = []
    for i, spec in enumerate(specs):
        d = copy.deepcopy(data)
        d.pop("scenarios", None)
        d.pop("risk", None)
        lines: dict[Loc, int] = {}
        changes = _apply_set(d, spec, i, doc, lines) + _apply_scale(d, spec, i, doc)
        out.append(ScenarioData(spec.name, spec.probability, d, tuple(changes), lines))
    return out
