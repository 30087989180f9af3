"""What-if analysis: vary problem-file values over a grid, re-plan each scenario, find break-evens.

A *vary* is ``KEY=VALUES``. KEY is a dotted path into the problem file's data (the YAML
mapping, before validation); list items are addressed by their ``name``
(``workloads.serve.chat.traffic.utilization``), by their ``id`` (``offers.extra.<id>``) or by
their index. Aliases: ``utilization`` (every serving workload's ``traffic.utilization``),
``power_price`` (``site.power_usd_per_kwh``), ``discount_rate`` (``finance.discount_rate``)
and ``colo_price`` (``site.colo_usd_per_kw_month``). VALUES is a comma list (``0.08,0.12,0.2``) or an inclusive
range ``start:stop:step`` (``0.2:0.9:0.1`` -> 8 values ending at 0.9; the arithmetic is
decimal, so no float drift).

Each scenario applies its values to a deep copy of the data, validates it against
:class:`~planner.inputs.problem.Problem`, resolves it with the problem file's directory as base
(offers files are found relative to it) and calls :func:`~planner.plan.make.plan_problem`.
A scenario that fails (invalid value, infeasible, solver error) is a row with its status
and message, never an abort. Scenarios run in a process pool, or on a Dask cluster.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
import os
import time
import types
import typing
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from planner.base.errors import InfeasibleError, InputError, PlannerError, SolverError
from planner.base.yamlio import YamlDoc, did_you_mean, format_loc, load_yaml
from planner.plan.data import Plan

Loc = tuple[str | int, ...]
Value = float | int | str | bool

# Aliases: name -> description; resolved by :func:`resolve_key`.
ALIASES = {
    "utilization": "every serving workload's traffic.utilization",
    "power_price": "site.power_usd_per_kwh",
    "discount_rate": "finance.discount_rate",
    "colo_price": "site.colo_usd_per_kw_month",
}
# Aliases that stand for one path of the problem file.
_PATH_ALIASES = {
    "power_price": ("site", "power_usd_per_kwh"),
    "discount_rate": ("finance", "discount_rate"),
    "colo_price": ("site", "colo_usd_per_kw_month"),
}

# The default grid when no --vary is given: 8 x 5 = 40 scenarios.
DEFAULT_VARIES = (
    ("utilization", "0.2:0.9:0.1"),
    ("power_price", "0.06:0.30:0.06"),
)

MAX_VALUES = 10_000  # per vary
MAX_SCENARIOS = 10_000  # per grid


# --------------------------------------------------------------------------- values


def _scalar(text: str, what: str) -> Value:
    """One comma-list item: int, float, bool or string; NaN/inf are errors.

    >>> [_scalar(t, "x") for t in ("3", "1e-3", "true", "fp8", "'0.5'")]
    [3, 0.001, True, 'fp8', '0.5']
    """
    item = text.strip()
    if not item:
        raise InputError(
            f"{what}: empty value in the list (two commas in a row or a trailing comma?)"
        )
    try:
        return int(item)
    except ValueError:
        pass
    try:
        v = float(item)
    except ValueError:
        pass
    else:
        if not math.isfinite(v):
            raise InputError(f"{what}: {item!r} is not a finite number")
        return v
    if item.lower() in ("true", "false"):
        return item.lower() == "true"
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1]
    return item


def _decimal(text: str, what: str, part: str) -> Decimal:
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        raise InputError(f"{what}: range {part} {text.strip()!r} is not a number") from None
    if not d.is_finite():
        raise InputError(f"{what}: range {part} {text.strip()!r} is not a finite number")
    return d


def _number(d: Decimal, integral: bool) -> float | int:
    return int(d) if integral else float(d)


def parse_range(text: str, what: str = "range") -> list[float | int]:
    """``start:stop:step`` -> values from start to stop (inclusive when stop lands on the grid).

    Decimal arithmetic: no float drift. Integers stay integers when all three parts are.

    >>> parse_range("0.2:0.9:0.1")
    [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    >>> parse_range("1:10:4")
    [1, 5, 9]
    >>> parse_range("0.3:0.06:-0.12")
    [0.3, 0.18, 0.06]
    """
    parts = text.split(":")
    if len(parts) != 3:
        raise InputError(
            f"{what}: expected a range start:stop:step (e.g. 0.2:0.9:0.1) or a comma list, got {text!r}"
        )
    start, stop, step = (
        _decimal(p, what, n) for p, n in zip(parts, ("start", "stop", "step"), strict=True)
    )
    if step == 0:
        raise InputError(f"{what}: range step is 0 in {text!r}")
    if (stop - start) * step < 0:
        raise InputError(
            f"{what}: range {text!r} never reaches its stop: the step goes "
            f"{'up' if step > 0 else 'down'} but stop is {'below' if step > 0 else 'above'} start"
        )
    n = int((stop - start) / step) + 1  # exact in Decimal: stop included iff on the grid
    if n > MAX_VALUES:
        raise InputError(f"{what}: range {text!r} has {n} values; the limit is {MAX_VALUES}")
    integral = all(d == d.to_integral_value() for d in (start, stop, step)) and "." not in text
    return [_number(start + i * step, integral) for i in range(n)]


def parse_values(text: str, what: str = "values") -> list[Value]:
    """A comma list or a ``start:stop:step`` range.

    >>> parse_values("0.08, 0.12,0.2")
    [0.08, 0.12, 0.2]
    >>> parse_values("fp8,int8")
    ['fp8', 'int8']
    >>> parse_values("2")
    [2]
    """
    text = text.strip()
    if not text:
        raise InputError(f"{what}: no values given")
    if ":" in text and "," not in text:
        return list(parse_range(text, what))
    values = [_scalar(t, what) for t in text.split(",")]
    seen: set = set()
    dups = []
    for v in values:
        k = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else repr(v)
        if k in seen:
            dups.append(v)
        seen.add(k)
    if dups:
        raise InputError(f"{what}: repeated value(s) {dups} in {text!r}")
    return values


def parse_vary(text: str) -> tuple[str, list[Value]]:
    """``KEY=VALUES`` -> (key, values).

    >>> parse_vary("power_price=0.06:0.18:0.06")
    ('power_price', [0.06, 0.12, 0.18])
    """
    key, sep, vals = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(
            f"--vary {text!r}: expected KEY=VALUES, e.g. utilization=0.2:0.9:0.1 or power_price=0.08,0.12"
        )
    return key, parse_values(vals, f"--vary {key}")


def parse_bounds(text: str) -> tuple[str, float, float]:
    """``KEY=LO:HI`` (break-even search interval) -> (key, lo, hi).

    >>> parse_bounds("utilization=0.1:1.0")
    ('utilization', 0.1, 1.0)
    """
    key, sep, vals = text.partition("=")
    key = key.strip()
    what = f"--vary {text!r}"
    if not sep or not key:
        raise InputError(f"{what}: expected KEY=LO:HI, e.g. utilization=0.1:1.0")
    parts = vals.split(":")
    if len(parts) != 2:
        raise InputError(f"{what}: expected an interval LO:HI (two numbers), got {vals!r}")
    lo, hi = (float(_decimal(p, what, n)) for p, n in zip(parts, ("LO", "HI"), strict=True))
    if not lo < hi:
        raise InputError(f"{what}: LO must be below HI, got {lo:g}:{hi:g}")
    return key, lo, hi


# --------------------------------------------------------------------------- paths


def _model_type(tp: Any) -> Any:
    """Strip ``X | None`` / ``Optional[X]`` from an annotation."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        non_none = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(non_none) == 1:
            return non_none[0]
    return tp


def _child_type(tp: Any, part: str | int) -> Any:
    """The schema type one step below ``tp`` (None when unknown)."""
    tp = _model_type(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        f = tp.model_fields.get(str(part))
        return f.annotation if f is not None else None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _schema_keys(tp: Any) -> list[str]:
    tp = _model_type(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return []


def _is_model(tp: Any) -> bool:
    tp = _model_type(tp)
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _item_name(item: Any) -> str | None:
    """A list item's address: its ``name`` (workloads), else its ``id`` (inline offers)."""
    if isinstance(item, dict):
        for k in ("name", "id"):
            if isinstance(item.get(k), str | int):
                return str(item[k])
    return None


def _here(loc: Sequence[str | int]) -> str:
    """The location reached so far, as messages name it."""
    return format_loc(tuple(loc)) if loc else "the top level"


def _dict_child(
    cur: dict, parts: Sequence[str], i: int, key: str, tp: Any, loc: list[str | int]
) -> Any:
    """Step from the mapping ``cur`` to ``parts[i]``, appending it to ``loc``; the child.

    A key the schema has but the file lacks yields ``{}`` (more parts follow and the child
    is a mapping) or None (the last part): the scenario will add it.
    """
    part = parts[i]
    more = i < len(parts) - 1
    if part in cur:
        loc.append(part)
        return cur[part]
    if not (part in _schema_keys(tp) or (typing.get_origin(_model_type(tp)) is dict and more)):
        known = sorted(set(map(str, cur)) | set(_schema_keys(tp)))
        raise InputError(
            f"--vary {key}: no key {part!r} in {_here(loc)}; "
            + (did_you_mean(part, known) if known else "it is empty")
        )
    loc.append(part)
    child = _child_type(tp, part)
    mapping = _is_model(child) or typing.get_origin(_model_type(child)) is dict
    if more and not mapping:
        raise InputError(
            f"--vary {key}: {format_loc(tuple(loc))} is not in the problem file "
            f"and is not a mapping, so {parts[i + 1]!r} cannot be set below it"
        )
    return {} if more else None


def _list_index(cur: list, part: str, key: str, here: str) -> int:
    """The index of the item of ``cur`` named ``part`` (its name or id), else ``part`` as an index."""
    idx = next((j for j, it in enumerate(cur) if _item_name(it) == part), None)
    if idx is None and part.lstrip("-").isdigit():
        j = int(part)
        if -len(cur) <= j < len(cur):
            idx = j % len(cur)
    if idx is not None:
        return idx
    names = [_item_name(it) for it in cur if _item_name(it) is not None]
    what = (
        f"no item named {part!r} in {here}; " + did_you_mean(part, [str(n) for n in names])
        if names
        else f"{here} is a list of {len(cur)} item(s) without names; address items by index 0..{len(cur) - 1}"
    )
    raise InputError(f"--vary {key}: {what}")


def _require_value(cur: Any, loc: Sequence[str | int], key: str) -> None:
    """A vary sets one value: a path that ends at a mapping or list is an error."""
    if isinstance(cur, dict | list):
        sub = sorted(map(str, cur)) if isinstance(cur, dict) else [f"{len(cur)} item(s)"]
        raise InputError(
            f"--vary {key}: {format_loc(tuple(loc))} is a {'mapping' if isinstance(cur, dict) else 'list'}, "
            f"not a single value; vary one of its values ({', '.join(sub)})"
        )


def _walk(data: Any, parts: Sequence[str], key: str, root_type: Any) -> Loc:
    """Resolve one dotted path to a location in ``data`` (list items by name or index).

    A missing *last* key (or missing mappings on the way) is allowed when the schema has
    that field: the scenario will add it (``site.pue`` when the file relies on the default).
    """
    loc: list[str | int] = []
    cur = data
    tp = root_type
    for i, part in enumerate(parts):
        here = _here(loc)
        if not part:
            raise InputError(f"--vary {key}: empty part in the path (two dots in a row?)")
        if isinstance(cur, dict):
            cur = _dict_child(cur, parts, i, key, tp, loc)
        elif isinstance(cur, list):
            idx = _list_index(cur, part, key, here)
            loc.append(idx)
            cur = cur[idx]
        else:
            raise InputError(
                f"--vary {key}: {here} is a value ({cur!r}), not a mapping or list, "
                f"so it has no {part!r}"
            )
        tp = _child_type(tp, part if not isinstance(loc[-1], int) else 0)
    _require_value(cur, loc, key)
    return tuple(loc)


def resolve_key(data: Any, key: str) -> list[Loc]:
    """The locations a KEY sets (an alias may set several).

    >>> d = {"site": {"power_usd_per_kwh": 0.1}, "workloads": {"serve": [
    ...     {"name": "chat", "traffic": {"utilization": 0.5}}]}}
    >>> resolve_key(d, "power_price")
    [('site', 'power_usd_per_kwh')]
    >>> resolve_key(d, "discount_rate"), resolve_key(d, "colo_price")
    ([('finance', 'discount_rate')], [('site', 'colo_usd_per_kw_month')])
    >>> resolve_key(d, "workloads.serve.chat.traffic.utilization")
    [('workloads', 'serve', 0, 'traffic', 'utilization')]
    """
    from planner.inputs.problem import Problem

    if not isinstance(data, dict):
        raise InputError("the problem file is not a mapping")
    if key in _PATH_ALIASES:
        return [_walk(data, list(_PATH_ALIASES[key]), key, Problem)]
    if key == "utilization":
        serve = (
            (data.get("workloads") or {}).get("serve")
            if isinstance(data.get("workloads"), dict)
            else None
        )
        if not serve or not isinstance(serve, list):
            raise InputError(
                "--vary utilization: the problem has no serving workloads (workloads.serve), "
                "so there is no traffic.utilization to vary"
            )
        locs = []
        for i, w in enumerate(serve):
            name = w.get("name", i) if isinstance(w, dict) else i
            locs.append(
                _walk(
                    data, ["workloads", "serve", str(name), "traffic", "utilization"], key, Problem
                )
            )
        return locs
    return [_walk(data, key.split("."), key, Problem)]


def set_at(data: Any, loc: Loc, value: Any) -> None:
    """Set ``data[loc] = value`` creating missing mappings on the way."""
    cur = data
    for part in loc[:-1]:
        if isinstance(cur, dict) and part not in cur:
            cur[part] = {}
        cur = cur[part]
    cur[loc[-1]] = value


# --------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Vary:
    key: str
    values: list[Value]
    locs: list[Loc]


@dataclass
class Base:
    """The problem file as data, with what a scenario needs to be rebuilt anywhere."""

    data: dict[str, Any]
    path: str
    base_dir: str
    lines: dict[Loc, int] = field(default_factory=dict)


def load_base(path: str | Path) -> Base:
    p = Path(path)
    doc = load_yaml(p)
    if not isinstance(doc.data, dict):
        raise InputError(
            f"{p}: expected a mapping of keys (name, horizon, ...), got {type(doc.data).__name__}"
        )
    return Base(doc.data, str(p), str(p.resolve().parent), doc.lines)


def base_from_text(text: str, name: str = "<text>", base_dir: str | Path | None = None) -> Base:
    """A Base from YAML text (tests)."""
    from planner.base.yamlio import parse_yaml_text

    doc = parse_yaml_text(text, Path(name))
    if not isinstance(doc.data, dict):
        raise InputError(f"{name}: expected a mapping")
    return Base(doc.data, name, str(Path(base_dir or Path.cwd()).resolve()), doc.lines)


def default_varies(base: Base) -> list[tuple[str, str]]:
    """:data:`DEFAULT_VARIES`, without ``utilization`` when the problem serves nothing."""
    serve = (
        (base.data.get("workloads") or {}).get("serve")
        if isinstance(base.data.get("workloads"), dict)
        else None
    )
    return [(k, v) for k, v in DEFAULT_VARIES if k != "utilization" or serve]


def make_varies(base: Base, specs: Iterable[str | tuple[str, Sequence[Value] | str]]) -> list[Vary]:
    """``["utilization=0.2:0.9:0.1", ("power_price", [0.1, 0.2])]`` -> resolved varies."""
    out: list[Vary] = []
    for spec in specs:
        if isinstance(spec, str):
            key, values = parse_vary(spec)
        else:
            key, vals = spec
            values = parse_values(vals, f"--vary {key}") if isinstance(vals, str) else list(vals)
        if any(v.key == key for v in out):
            raise InputError(f"--vary {key}: given twice; put every value in one --vary")
        if not values:
            raise InputError(f"--vary {key}: no values")
        locs = resolve_key(base.data, key)
        for v in out:
            clash = set(v.locs) & set(locs)
            if clash:
                raise InputError(
                    f"--vary {key} and --vary {v.key} both set {format_loc(sorted(clash, key=str)[0])}"
                )
        for value in values:
            check_value(base, key, locs, value)
        out.append(Vary(key, list(values), locs))
    n = math.prod(len(v.values) for v in out) if out else 0
    if n > MAX_SCENARIOS:
        raise InputError(f"the grid has {n} scenarios; the limit is {MAX_SCENARIOS}")
    return out


def check_value(base: Base, key: str, locs: Sequence[Loc], value: Value) -> None:
    """Refuse a value the problem file itself would refuse at that place (wrong type, out of
    range), before any solve: ``--vary utilization=abc`` is bad input (exit 2), not a failed
    scenario. Errors elsewhere in the file are left to the scenarios to report."""
    from pydantic import ValidationError

    from planner.inputs.problem import Problem

    data = copy.deepcopy(base.data)
    for loc in locs:
        set_at(data, loc, value)
    try:
        Problem.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            here = tuple(err["loc"])
            if any(here[: len(loc)] == tuple(loc) for loc in locs):
                msg = err["msg"].removeprefix("Value error, ")
                raise InputError(f"--vary {key}={value!r}: {format_loc(here)}: {msg}") from None


def grid(varies: Sequence[Vary]) -> list[dict[str, Value]]:
    """Cartesian product of the varies' values (the first vary changes slowest)."""
    return [
        dict(zip([v.key for v in varies], combo, strict=True))
        for combo in itertools.product(*(v.values for v in varies))
    ]


@dataclass
class Task:
    """Everything one scenario needs; picklable (sent to processes or Dask workers)."""

    index: int
    base: Base
    params: dict[str, Value]
    sets: list[tuple[Loc, Value]]
    solver: str = "auto"
    time_limit: float | None = None
    gap: float | None = None
    keep_plan: bool = False


@dataclass
class ScenarioResult:
    index: int
    params: dict[str, Value]
    status: str  # optimal | feasible | infeasible | invalid | error | time_limit ...
    message: str = ""
    totals: dict[str, Any] | None = None
    purchases: list[dict[str, Any]] = field(default_factory=list)
    owned_gpu_hours: dict[str, float] = field(default_factory=dict)
    rented_gpu_hours: dict[str, float] = field(default_factory=dict)
    rented_share: float | None = None
    usd_per_1m_tokens: float | None = None
    bought: dict[str, int] = field(default_factory=dict)  # GPUs bought per type over the horizon
    rented_by: dict[str, dict[str, float]] = field(default_factory=dict)  # gpu -> {kind: GPU-h}
    rental_usd_by_gpu: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    plan_json: str | None = None

    @property
    def ok(self) -> bool:
        return self.totals is not None

    @property
    def plan(self) -> Plan | None:
        return Plan.model_validate_json(self.plan_json) if self.plan_json else None

    def to_json(self) -> dict[str, Any]:
        """The JSON contract of ``planner whatif --json`` (one object per scenario)."""
        return {
            "params": self.params,
            "status": self.status,
            "message": self.message,
            "totals": self.totals,
            "purchases": self.purchases,
            "owned_gpu_hours": self.owned_gpu_hours,
            "rented_gpu_hours": self.rented_gpu_hours,
            "rented_share": self.rented_share,
            "usd_per_1m_tokens": self.usd_per_1m_tokens,
        }


def summarize(plan: Plan, index: int = 0, params: dict[str, Value] | None = None) -> ScenarioResult:
    """The what-if row of a solved plan."""
    owned: dict[str, float] = defaultdict(float)
    rented: dict[str, float] = defaultdict(float)
    for f in plan.fleet:
        owned[f.gpu] += f.owned_busy_gpu_hours
        rented[f.gpu] += f.rented_gpu_hours
    by: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    rusd: dict[str, float] = defaultdict(float)
    for r in plan.rentals:
        by[r.gpu][r.kind] += r.gpu_hours
        rusd[r.gpu] += r.usd
    bought: dict[str, int] = defaultdict(int)
    for p in plan.purchases:
        bought[p.gpu] += p.count
    gpus = sorted(set(owned) | set(rented) | set(bought))
    total_h = sum(owned.values()) + sum(rented.values())
    serve = [w for w in plan.workloads if w.kind == "serve"]
    tokens = sum(w.tokens for w in serve)
    per_m = sum(w.cost_usd for w in serve) / tokens * 1e6 if serve and tokens > 0 else None
    return ScenarioResult(
        index=index,
        params=dict(params or {}),
        status=plan.status,
        message=plan.message,
        totals=plan.totals.model_dump(),
        purchases=[p.model_dump() for p in plan.purchases],
        owned_gpu_hours={g: round(owned.get(g, 0.0), 6) for g in gpus},
        rented_gpu_hours={g: round(rented.get(g, 0.0), 6) for g in gpus},
        rented_share=(sum(rented.values()) / total_h) if total_h > 0 else 0.0,
        usd_per_1m_tokens=per_m,
        bought={g: n for g, n in sorted(bought.items()) if n},
        rented_by={g: dict(k) for g, k in sorted(by.items())},
        rental_usd_by_gpu=dict(sorted(rusd.items())),
        seconds=plan.solve_seconds,
    )


def scenario_inputs(task: Task):
    """Apply the task's values to a deep copy of the data, validate and resolve."""
    from planner.base.yamlio import validate
    from planner.inputs.problem import Problem, resolve

    data = copy.deepcopy(task.base.data)
    for loc, value in task.sets:
        set_at(data, loc, value)
    label = ", ".join(f"{k}={v}" for k, v in task.params.items())
    doc = YamlDoc(data, dict(task.base.lines), Path(task.base.path))
    problem = validate(Problem, doc, f"problem file ({label})" if label else "problem file")
    inputs = resolve(problem, doc, base_dir=Path(task.base.base_dir))
    text = json.dumps(data, sort_keys=True, default=str)
    return dataclasses.replace(
        inputs,
        source_path=f"{task.base.path} [{label}]" if label else task.base.path,
        source_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


def run_task(task: Task) -> ScenarioResult:
    """Solve one scenario; every failure becomes a row (never raises)."""
    from planner.plan.make import plan_problem

    t0 = time.perf_counter()

    def fail(status: str, message: str) -> ScenarioResult:
        return ScenarioResult(
            task.index, dict(task.params), status, message, seconds=time.perf_counter() - t0
        )

    try:
        inputs = scenario_inputs(task)
        # the per-scenario time limit bounds the scenario, building and extracting included
        limit = (
            task.time_limit if task.time_limit is not None else inputs.problem.solver.time_limit_s
        )
        plan = plan_problem(
            inputs,
            solver=task.solver,
            time_limit=limit,
            gap=task.gap,
            diagnose=False,
            deadline=t0 + limit,
        )
    except InputError as exc:
        return fail("invalid", str(exc))
    except InfeasibleError as exc:
        msg = str(exc) + ("".join(f"\n  - {d}" for d in exc.diagnosis) if exc.diagnosis else "")
        return fail("infeasible", msg)
    except SolverError as exc:
        return fail("error", str(exc))
    except PlannerError as exc:
        return fail("error", str(exc))
    except Exception as exc:  # noqa: BLE001 - a scenario never aborts the grid
        return fail("error", f"{type(exc).__name__}: {exc}")
    res = summarize(plan, task.index, task.params)
    res.seconds = time.perf_counter() - t0
    if task.keep_plan:
        res.plan_json = plan.to_json()
    return res


def make_tasks(
    base: Base,
    varies: Sequence[Vary],
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
) -> list[Task]:
    locs = {v.key: v.locs for v in varies}
    tasks = []
    for i, params in enumerate(grid(varies)):
        sets = [(loc, val) for k, val in params.items() for loc in locs[k]]
        tasks.append(Task(i, base, params, sets, solver, time_limit, gap))
    return tasks


Progress = Callable[[ScenarioResult], None]


def worker_signals() -> None:
    """In a sweep worker, SIGTERM and SIGHUP raise like in the main process, so a solve in
    progress ends its CBC process and removes its temporary files before the worker goes."""
    import signal

    from planner.base.errors import terminate

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, terminate)


def _run_local(
    tasks: Sequence[Task], workers: int, progress: Progress | None
) -> list[ScenarioResult]:
    if workers <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            r = run_task(t)
            if progress:
                progress(r)
            out.append(r)
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: no fork of a parent that runs threads (rich's refresh thread, dask, ...)
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if "forkserver" in methods:
        ctx.set_forkserver_preload(["planner.analysis.whatif", "planner.plan.make", "pulp"])
    results: dict[int, ScenarioResult] = {}
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)), mp_context=ctx, initializer=worker_signals
    )
    try:
        futs = {pool.submit(run_task, t): t for t in tasks}
        for fut in as_completed(futs):
            t = futs[fut]
            try:
                r = fut.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker is a row, not an abort
                r = ScenarioResult(
                    t.index, dict(t.params), "error", f"worker failed: {type(exc).__name__}: {exc}"
                )
            results[t.index] = r
            if progress:
                progress(r)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the whole grid
        raise
    pool.shutdown(wait=True)
    return [results[t.index] for t in tasks]


def _run_dask(
    tasks: Sequence[Task], address: str, progress: Progress | None
) -> list[ScenarioResult]:
    """Run on an existing Dask cluster. The workers need ``planner`` installed, and the
    problem's offers files at the same absolute path (a shared file system), since each
    scenario resolves them from the problem file's directory."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError(
            "--scheduler needs Dask distributed, which is not installed; "
            "install the cluster extra: pip install 'gpu-planner[cluster]'"
        ) from None
    try:
        client = Client(address, timeout="10s")  # a scheduler that answers does so in ms
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: a malformed address
        raise InputError(
            f"--scheduler {address}: cannot connect to the Dask scheduler: {exc}"
        ) from None
    results: dict[int, ScenarioResult] = {}
    try:
        futs = client.map(run_task, list(tasks), pure=False)
        by_key = {f.key: t for f, t in zip(futs, tasks, strict=True)}
        for fut in as_completed(futs):
            t = by_key[fut.key]
            try:
                r = fut.result()
            except Exception as exc:  # noqa: BLE001
                r = ScenarioResult(
                    t.index,
                    dict(t.params),
                    "error",
                    f"dask task failed: {type(exc).__name__}: {exc}",
                )
            results[t.index] = r
            if progress:
                progress(r)
    finally:
        client.close()
    return [results[t.index] for t in tasks]


def run_tasks(
    tasks: Sequence[Task],
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> list[ScenarioResult]:
    """Run scenarios (process pool of ``workers``, or a Dask cluster at ``scheduler``), in order."""
    if scheduler:
        return _run_dask(tasks, scheduler, progress)
    return _run_local(tasks, workers or os.cpu_count() or 1, progress)


@dataclass
class WhatIf:
    base: Base
    varies: list[Vary]
    results: list[ScenarioResult]
    base_result: ScenarioResult | None  # the problem as written (keep_plan=True)
    seconds: float

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.results]


def run_whatif(
    base: Base | str | Path,
    varies: Sequence[str | tuple[str, Sequence[Value] | str]] | None = None,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
    with_base: bool = True,
) -> WhatIf:
    """Run the grid (default: :data:`DEFAULT_VARIES`); with ``with_base`` also the problem as written."""
    if not isinstance(base, Base):
        base = load_base(base)
    from planner.optimize.solve import SOLVERS

    if solver not in SOLVERS:
        raise InputError(f"--solver: unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}")
    vs = make_varies(base, list(varies) if varies else default_varies(base))
    tasks = make_tasks(base, vs, solver, time_limit, gap)
    if with_base:
        tasks.append(Task(len(tasks), base, {}, [], solver, time_limit, gap, keep_plan=True))
    t0 = time.perf_counter()
    results = run_tasks(tasks, workers, scheduler, progress)
    seconds = time.perf_counter() - t0
    base_result = results.pop() if with_base else None
    return WhatIf(base, vs, results, base_result, seconds)


def write_results_json(results: Sequence[ScenarioResult], path: str | Path) -> None:
    from planner.plan.data import atomic_write_bytes

    text = json.dumps([r.to_json() for r in results], indent=2)
    atomic_write_bytes(path, text.encode("utf-8"))


# --------------------------------------------------------------------------- break-even


def _signature(r: ScenarioResult, watch: str | None) -> Any:
    if not r.ok:
        return ("no plan", r.status)
    if watch is None:
        return tuple(sorted(r.bought))
    return r.bought.get(watch, 0)


def parse_watch(text: str | None, base: Base | None = None) -> str | None:
    """``--watch gpu=h100-sxm`` -> ``"h100-sxm"``; None/``gpus`` -> the set of types bought."""
    if text is None or text.strip() in ("", "gpus", "types"):
        return None
    key, sep, val = text.partition("=")
    if key.strip() != "gpu" or not sep or not val.strip():
        raise InputError(
            f"--watch {text!r}: expected gpu=<id> (the count of one GPU type bought) "
            "or nothing (the set of GPU types bought)"
        )
    gpu = val.strip()
    if (
        base is not None
        and isinstance(base.data.get("gpus"), list)
        and gpu not in base.data["gpus"]
    ):
        raise InputError(
            f"--watch {text!r}: {gpu!r} is not in the problem's gpus; "
            + did_you_mean(gpu, [str(g) for g in base.data["gpus"]])
        )
    return gpu


@dataclass
class BreakEven:
    key: str
    lo: float
    hi: float
    watch: str | None
    changed: bool
    value: float | None  # the change point (middle of the final bracket)
    bracket: tuple[float, float] | None  # (last value with the 'below' plan, first with 'above')
    below: ScenarioResult  # the plan just below the change (at lo when nothing changes)
    above: ScenarioResult  # the plan just above the change (at hi when nothing changes)
    sentence: str
    solves: int
    other_changes: list[tuple[float, float]] = field(
        default_factory=list
    )  # further brackets seen in the scan
    tol: float = 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["below"] = self.below.to_json() | {"bought": self.below.bought}
        d["above"] = self.above.to_json() | {"bought": self.above.bought}
        return d


def _fmt_val(x: float, tol: float) -> str:
    """``x`` with as many decimals as the tolerance resolves.

    >>> _fmt_val(0.28457, 0.0045), _fmt_val(1.5, 0.01), _fmt_val(1234.5, 10)
    ('0.285', '1.5', '1234')
    """
    digits = max(0, -math.floor(math.log10(tol))) if tol > 0 else 3
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _buys(r: ScenarioResult, watch: str | None) -> str:
    if not r.ok:
        return f"has no plan ({r.status})"
    items = {watch: r.bought.get(watch, 0)} if watch else r.bought
    items = {g: n for g, n in items.items() if n}
    if not items:
        return f"buys no {watch}" if watch else "buys no GPUs"
    return "buys " + " and ".join(f"{n} {g}" for g, n in items.items())


def _describe_other(r: ScenarioResult, other: ScenarioResult, watch: str | None) -> str:
    """What ``r`` does instead of what ``other`` buys ("rents them", "buys 2 a100...")."""
    if not r.ok:
        return f"there is no plan ({r.status}: {r.message.splitlines()[0] if r.message else ''})"
    types = [watch] if watch else list(other.bought)
    mine = {g: n for g, n in r.bought.items() if (g in types if watch else True) and n}
    rented = {g for g, h in r.rented_gpu_hours.items() if h > 1e-6}
    if not mine:
        if types and set(types) <= rented:
            return (
                "it rents them"
                if len(types) > 1 or other.bought.get(types[0], 0) > 1
                else "it rents it"
            )
        if rented:
            return "it buys none and rents " + ", ".join(sorted(rented))
        return "it buys none"
    return "it " + _buys(r, watch)


@dataclass
class _Solves:
    """Solves the problem at values of one KEY, counting the solves for the report."""

    base: Base
    key: str
    locs: list[Loc]
    solver: str
    time_limit: float | None
    gap: float | None
    workers: int | None
    progress: Progress | None
    count: int = 0

    def __call__(self, xs: Sequence[float]) -> list[ScenarioResult]:
        """One result per value of ``xs``, in order."""
        tasks = [
            Task(
                i,
                self.base,
                {self.key: x},
                [(loc, x) for loc in self.locs],
                self.solver,
                self.time_limit,
                self.gap,
            )
            for i, x in enumerate(xs)
        ]
        self.count += len(tasks)
        return run_tasks(tasks, self.workers, None, self.progress)


def _scan_values(lo: float, hi: float, scan: int) -> list[float]:
    """``scan`` evenly spaced values from lo to hi, ends included.

    >>> _scan_values(0.2, 0.9, 8)
    [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    """
    xs = [lo + (hi - lo) * i / (scan - 1) for i in range(scan)]
    # 12 significant digits drop float noise from values shown in reports and JSON:
    # 0.5, not 0.49999999999999994
    return [float(f"{x:.12g}") for x in xs]


def _require_valid(key: str, xs: Sequence[float], points: Sequence[ScenarioResult]) -> None:
    """An invalid scan point is a bad interval, not a plan change: stop with its message."""
    for x, r in zip(xs, points, strict=True):
        if r.status == "invalid":
            raise InputError(f"breakeven: {key}={x:g} is not a valid problem: {r.message}")


def _types_unchanged(points: Sequence[ScenarioResult], tried: str) -> str:
    """Why the set of GPU types bought did not change, hinting at --watch when counts did."""
    types = ", ".join(points[0].bought) if points[0].ok else ""
    what = (
        "the set of GPU types bought stays the same ("
        + (f"it buys {types}" if types else f"it {_buys(points[0], None)}")
        + f" {tried}"
    )
    counts = {g: sorted({r.bought.get(g, 0) for r in points}) for g in points[0].bought}
    moved = [f"{g} from {c[0]} to {c[-1]}" for g, c in counts.items() if len(c) > 1]
    if moved:
        what += f"; the counts change: {', '.join(moved)}: try --watch gpu=<id>"
    return what + ")"


def _unchanged_sentence(
    key: str, lo: float, hi: float, watch: str | None, points: Sequence[ScenarioResult]
) -> str:
    """The report when every scanned value gives the same signature."""
    tried = f"at every one of the {len(points)} values tried"
    if watch:
        what = f"the number of {watch} bought stays the same (it {_buys(points[0], watch)} {tried})"
    else:
        what = _types_unchanged(points, tried)
    return f"the plan does not change over {key} {lo:g}..{hi:g}: {what}"


def _bisect(
    solve: _Solves,
    watch: str | None,
    tol: float,
    a: float,
    b: float,
    ra: ScenarioResult,
    rb: ScenarioResult,
) -> tuple[float, float, ScenarioResult, ScenarioResult]:
    """Narrow ``[a, b]`` (plans ``ra`` != ``rb``) to a bracket no wider than ``tol``."""
    sa, sb = _signature(ra, watch), _signature(rb, watch)
    while b - a > tol:
        m = (a + b) / 2
        (rm,) = solve([m])
        sm = _signature(rm, watch)
        if sm == sa:
            a, ra = m, rm
        elif sm == sb:
            b, rb = m, rm
        else:  # a third plan in between: keep the lower change
            b, rb, sb = m, rm, sm
    return a, b, ra, rb


def _change_sentence(
    key: str, xt: str, ra: ScenarioResult, rb: ScenarioResult, watch: str | None
) -> str:
    """The report of a change at ``xt`` between plan ``ra`` (below) and ``rb`` (above).

    It leads with the side that buys: "above X the plan buys ...", unless the plan above
    has no plan or buys nothing where the one below buys.
    """
    if not rb.ok or (not rb.bought and ra.bought):
        return f"below {key} {xt} the plan {_buys(ra, watch)}; above it {_describe_other(rb, ra, watch).removeprefix('it ')}"
    return f"above {key} {xt} the plan {_buys(rb, watch)}; below it {_describe_other(ra, rb, watch).removeprefix('it ')}"


def breakeven(
    base: Base | str | Path,
    vary: str | tuple[str, float, float],
    watch: str | None = None,
    tol: float | None = None,
    scan: int = 5,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    workers: int | None = 1,
    progress: Progress | None = None,
) -> BreakEven:
    """Find the value of one KEY in [lo, hi] at which the plan changes, by bisection on solves.

    The plan's *signature* is the set of GPU types bought (or, with ``watch="<gpu>"``, the
    count of that type bought). ``scan`` evenly spaced values (ends included) are solved
    first; the first interval whose ends differ is bisected until it is narrower than
    ``tol`` (default (hi - lo) / 200). Other changing intervals of the scan are reported
    in ``other_changes``. If every scanned value gives the same signature the plan is
    taken as unchanged over [lo, hi] (a change that reverts between scan points is missed).
    """
    if not isinstance(base, Base):
        base = load_base(base)
    key, lo, hi = parse_bounds(vary) if isinstance(vary, str) else vary
    if not lo < hi:
        raise InputError(f"--vary {key}: LO must be below HI")
    watch = parse_watch(watch if watch is None or "=" in watch else f"gpu={watch}", base)
    tol = tol if tol is not None else (hi - lo) / 200
    if not tol > 0:
        raise InputError(f"--tol must be positive, got {tol}")
    locs = resolve_key(base.data, key)
    solve = _Solves(base, key, locs, solver, time_limit, gap, workers, progress)
    xs = _scan_values(lo, hi, max(2, scan))
    points = solve(xs)
    _require_valid(key, xs, points)
    sigs = [_signature(r, watch) for r in points]
    changes = [i for i in range(len(xs) - 1) if sigs[i] != sigs[i + 1]]
    if not changes:
        sentence = _unchanged_sentence(key, lo, hi, watch, points)
        return BreakEven(
            key, lo, hi, watch, False, None, None, points[0], points[-1], sentence, solve.count,
            [], tol,
        )  # fmt: skip
    i = changes[0]
    a, b, ra, rb = _bisect(solve, watch, tol, xs[i], xs[i + 1], points[i], points[i + 1])
    x = (a + b) / 2
    sentence = _change_sentence(key, _fmt_val(x, tol), ra, rb, watch)
    others = [(xs[j], xs[j + 1]) for j in changes[1:]]
    return BreakEven(
        key, lo, hi, watch, True, x, (a, b), ra, rb, sentence, solve.count, others, tol
    )
