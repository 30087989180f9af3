"""Keys of the problem file: parsing ``--vary`` values and ranges, resolving KEY paths and
aliases in the problem file's data, and the problem file as data (:class:`Base`) with the
varies resolved against it and checked value by value, before any solve.

It lives at the inputs stage because the problem file itself uses it: a scenario's ``set``
(:mod:`planner.inputs.scenarios`) names its values with the same paths and aliases as
``planner whatif --vary`` (whose syntax is described in :mod:`planner.analysis.whatif`).
"""

from __future__ import annotations

import copy
import math
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation, Overflow, localcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from planner.base.errors import InputError
from planner.base.yamlio import did_you_mean, format_loc, load_yaml
from planner.inputs.schema import Problem

Loc = tuple[str | int, ...]
Value = float | int | str | bool

# Aliases: name -> description; resolved by :func:`resolve_key`.
ALIASES = {
    "utilization": "every serving workload's traffic.utilization",
    "growth": "every serving workload's traffic.growth_per_month",
    "power_price": "site.power_usd_per_kwh",
    "discount_rate": "finance.discount_rate",
    "colo_price": "site.colo_usd_per_kw_month",
    "rent_change": "market.rent_change_per_year (every GPU's rental path)",
    "buy_change": "market.buy_change_per_year (every GPU's purchase path)",
    "lead_months": "market.lead_months (every GPU's order-to-service months)",
    "capex_budget": "budget.capex_usd",
    "total_budget": "budget.total_usd",
}
# Aliases that stand for one path of the problem file.
_PATH_ALIASES = {
    "power_price": ("site", "power_usd_per_kwh"),
    "discount_rate": ("finance", "discount_rate"),
    "colo_price": ("site", "colo_usd_per_kw_month"),
    "rent_change": ("market", "rent_change_per_year"),
    "buy_change": ("market", "buy_change_per_year"),
    "lead_months": ("market", "lead_months"),
    "capex_budget": ("budget", "capex_usd"),
    "total_budget": ("budget", "total_usd"),
}
# Aliases that stand for one field of every serving workload.
_SERVE_ALIASES = {
    "utilization": ("traffic", "utilization"),
    "growth": ("traffic", "growth_per_month"),
}

# The default grid when no --vary is given: 8 x 5 = 40 scenarios.
DEFAULT_VARIES = (
    ("utilization", "0.2:0.9:0.1"),
    ("power_price", "0.06:0.30:0.06"),
)

MAX_VALUES = 10_000  # per vary
MAX_SCENARIOS = 10_000  # per grid
MAX_VARIES = 16  # --vary options in one grid (each is a column of the table)
MAX_WORKERS = 256  # parallel solves (each is a process of its own)
# Numbers in a vary (list items, range parts, break-even bounds): 0 or a magnitude from
# 1e-18 to 1e18 (the largest ceiling in the problem file is 1e15 training tokens), with at
# most 30 significant digits (a float keeps 17). Within these, float conversion neither
# overflows nor underflows and the range arithmetic below is exact.
MAX_MAGNITUDE = Decimal("1e18")
MIN_MAGNITUDE = Decimal("1e-18")
MAX_DIGITS = 30
_LIMITS = "0, or 1e-18 to 1e18 in magnitude with at most 30 significant digits"
# Range arithmetic: wide exponents so that no input overflows while its size is counted,
# and enough digits that, within the limits above, differences and counts are exact.
_COUNTING = Context(prec=100, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, Overflow])


# --------------------------------------------------------------------------- values


def _short(text: str, width: int = 60) -> str:
    """``text`` cut to ``width`` characters for a message (a 100,000-value list is not)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _in_limits(d: Decimal, text: str, what: str) -> None:
    """Refuse a finite number outside :data:`MAX_MAGNITUDE` / :data:`MIN_MAGNITUDE` /
    :data:`MAX_DIGITS` (exact comparisons: no context, no rounding, no overflow)."""
    size = d.copy_abs()
    digits = len("".join(map(str, d.as_tuple().digits)).strip("0"))
    if (size and not MIN_MAGNITUDE <= size <= MAX_MAGNITUDE) or digits > MAX_DIGITS:
        raise InputError(
            f"{what}: {_short(text, 40)!r} is out of range; numbers here are {_LIMITS}"
        )


def _ascii_decimal(item: str) -> Decimal | None:
    """``item`` as a Decimal when it is written as an (ASCII) number, else None."""
    if not item.isascii():
        return None  # unicode digits are not numbers here (the problem file has none)
    try:
        return Decimal(item)
    except (InvalidOperation, ValueError):
        return None


def _scalar(text: str, what: str) -> Value:
    """One comma-list item: int, float, bool or string; NaN/inf and numbers outside the
    limits (:data:`MAX_MAGNITUDE`) are errors.

    >>> [_scalar(t, "x") for t in ("3", "1e-3", "true", "fp8", "'0.5'")]
    [3, 0.001, True, 'fp8', '0.5']
    """
    item = text.strip()
    if not item:
        raise InputError(
            f"{what}: empty value in the list (two commas in a row or a trailing comma?)"
        )
    d = _ascii_decimal(item)
    if d is not None:
        if not d.is_finite():
            raise InputError(f"{what}: {item!r} is not a finite number")
        _in_limits(d, item, what)
        try:
            return int(item)
        except ValueError:
            return float(d)
    if item.lower() in ("true", "false"):
        return item.lower() == "true"
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1]
    return item


def _decimal(text: str, what: str, part: str) -> Decimal:
    """A range part or a break-even bound: a finite ASCII number within the limits."""
    item = text.strip()
    shown = _short(item, 40)
    d = _ascii_decimal(item)
    if d is None:
        raise InputError(f"{what}: range {part} {shown!r} is not a number")
    if not d.is_finite():
        raise InputError(f"{what}: range {part} {shown!r} is not a finite number")
    return d


def _number(d: Decimal, integral: bool) -> float | int:
    return int(d) if integral else float(d)


def _count(start: Decimal, stop: Decimal, step: Decimal, text: str, what: str) -> int:
    """How many values ``start:stop:step`` makes, counted without making them; refused
    above :data:`MAX_VALUES` with the count."""
    shown = _short(text)
    try:
        with localcontext(_COUNTING):
            q = (stop - start) / step
    except Overflow:
        raise InputError(
            f"{what}: range {shown!r} would make more values than a number can hold; "
            f"the limit is {MAX_VALUES}"
        ) from None
    if q >= MAX_VALUES:
        n = f"{int(q) + 1:,}" if q < Decimal("1e15") else f"about {q:.3e}"
        raise InputError(
            f"{what}: range {shown!r} would make {n} values; the limit is {MAX_VALUES}"
        )
    with localcontext(_COUNTING):
        return int((stop - start) // step) + 1  # exact: stop included iff on the grid


def parse_range(text: str, what: str = "range") -> list[float | int]:
    """``start:stop:step`` -> values from start to stop (inclusive when stop lands on the grid).

    Decimal arithmetic: no float drift. Integers stay integers when all three parts are.
    The count is checked (at most :data:`MAX_VALUES`) before any value is made, and each
    part is within :data:`MAX_MAGNITUDE` / :data:`MAX_DIGITS`.

    >>> parse_range("0.2:0.9:0.1")
    [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    >>> parse_range("1:10:4")
    [1, 5, 9]
    >>> parse_range("0.3:0.06:-0.12")
    [0.3, 0.18, 0.06]
    """
    shown = _short(text)
    parts = text.split(":")
    if len(parts) != 3:
        raise InputError(
            f"{what}: expected a range start:stop:step (e.g. 0.2:0.9:0.1) or a comma list, got {shown!r}"
        )
    start, stop, step = (
        _decimal(p, what, n) for p, n in zip(parts, ("start", "stop", "step"), strict=True)
    )
    if step == 0:
        raise InputError(f"{what}: range step is 0 in {shown!r}")
    if stop != start and (stop > start) != (step > 0):  # comparisons: exact, no overflow
        raise InputError(
            f"{what}: range {shown!r} never reaches its stop: the step goes "
            f"{'up' if step > 0 else 'down'} but stop is {'below' if step > 0 else 'above'} start"
        )
    n = _count(start, stop, step, text, what)
    for d, p in zip((start, stop, step), parts, strict=True):
        _in_limits(d, p.strip(), f"{what}: range {shown!r}")
    integral = all(d == d.to_integral_value() for d in (start, stop, step)) and "." not in text
    with localcontext(_COUNTING):
        values = [_number(start + i * step, integral) for i in range(n)]
    if len(set(values)) != n:
        raise InputError(
            f"{what}: range {shown!r}: its values are closer together than a float can tell "
            "apart; use a larger step"
        )
    return values


def _no_repeats(values: Sequence[Value], what: str, text: str) -> None:
    seen: set = set()
    dups = []
    for v in values:
        k = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else repr(v)
        if k in seen:
            dups.append(v)
        seen.add(k)
    if dups:
        shown = _short(text)
        more = f" and {len(dups) - 10} more" if len(dups) > 10 else ""
        raise InputError(f"{what}: repeated value(s) {dups[:10]}{more} in {shown!r}")


def parse_values(text: str, what: str = "values") -> list[Value]:
    """A comma list or a ``start:stop:step`` range, at most :data:`MAX_VALUES` values.

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
    n = text.count(",") + 1
    if n > MAX_VALUES:
        raise InputError(f"{what}: the list has {n:,} values; the limit is {MAX_VALUES}")
    _no_thousands_groups(text, what)
    values = [_scalar(t, what) for t in text.split(",")]
    _no_repeats(values, what, text)
    return values


def _no_thousands_groups(text: str, what: str) -> None:
    """Refuse a list item with a leading zero (``2,500,000`` -> 2, 500 and 0): nobody writes
    a value ``000``, it is a thousands group, and the comma separates values here.

    >>> _no_thousands_groups("0.08,0,100", "--vary x")
    >>> _no_thousands_groups("2,500,000", "--vary capex_usd")
    Traceback (most recent call last):
    ...
    planner.base.errors.InputError: --vary capex_usd: '000' in '2,500,000' looks like a thousands group, but a comma separates values here: write one value as 2500000 or 2.5M
    """
    for part in text.split(","):
        if re.fullmatch(r"0[0-9]+", part.strip()):
            raise InputError(
                f"{what}: {part.strip()!r} in {_short(text)!r} looks like a thousands group, "
                "but a comma separates values here: write one value as 2500000 or 2.5M"
            )


def check_values_list(values: Sequence[Value], what: str) -> list[Value]:
    """Values given as a list (the Python API): the same rules as a comma list."""
    values = list(values)
    if len(values) > MAX_VALUES:
        raise InputError(f"{what}: {len(values):,} values; the limit is {MAX_VALUES}")
    for v in values:
        if isinstance(v, bool | str):
            continue
        if not isinstance(v, int | float):
            raise InputError(
                f"{what}: {v!r} is a {type(v).__name__}; values are numbers, true/false or text"
            )
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"{what}: {v!r} is not a finite number")
        _in_limits(Decimal(repr(v)), repr(v), what)  # repr: the shortest digits
    _no_repeats(values, what, repr(values))
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
            f"--vary {_short(text)!r}: expected KEY=VALUES, e.g. utilization=0.2:0.9:0.1 or power_price=0.08,0.12"
        )
    return key, parse_values(vals, f"--vary {key}")


def parse_bounds(text: str) -> tuple[str, float, float]:
    """``KEY=LO:HI`` (break-even search interval) -> (key, lo, hi).

    >>> parse_bounds("utilization=0.1:1.0")
    ('utilization', 0.1, 1.0)
    """
    key, sep, vals = text.partition("=")
    key = key.strip()
    what = f"--vary {_short(text)!r}"
    if not sep or not key:
        raise InputError(f"{what}: expected KEY=LO:HI, e.g. utilization=0.1:1.0")
    parts = vals.split(":")
    if len(parts) != 2:
        raise InputError(f"{what}: expected an interval LO:HI (two numbers), got {vals[:60]!r}")
    ds = [_decimal(p, what, n) for p, n in zip(parts, ("LO", "HI"), strict=True)]
    for d, p in zip(ds, parts, strict=True):
        _in_limits(d, p.strip(), what)
    lo, hi = (float(d) for d in ds)
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
        known = sorted(
            set(map(str, cur)) | set(_schema_keys(tp)) | (set() if loc else set(ALIASES))
        )
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
    if not isinstance(data, dict):
        raise InputError("the problem file is not a mapping")
    if key in _PATH_ALIASES:
        return [_walk(data, list(_PATH_ALIASES[key]), key, Problem)]
    if key in _SERVE_ALIASES:
        return _serve_locs(data, key)
    return [_walk(data, key.split("."), key, Problem)]


def _serve_locs(data: dict, key: str) -> list[Loc]:
    """The locations of a serving alias: its field in every serving workload."""
    serve = (
        (data.get("workloads") or {}).get("serve")
        if isinstance(data.get("workloads"), dict)
        else None
    )
    field_path = ".".join(_SERVE_ALIASES[key])
    if not serve or not isinstance(serve, list):
        raise InputError(
            f"--vary {key}: the problem has no serving workloads (workloads.serve), "
            f"so there is no {field_path} to vary"
        )
    locs = []
    for i, w in enumerate(serve):
        name = w.get("name", i) if isinstance(w, dict) else i
        path = ["workloads", "serve", str(name), *_SERVE_ALIASES[key]]
        locs.append(_walk(data, path, key, Problem))
    return locs


def set_at(data: Any, loc: Loc, value: Any) -> None:
    """Set ``data[loc] = value`` creating missing mappings on the way."""
    cur = data
    for part in loc[:-1]:
        if isinstance(cur, dict) and part not in cur:
            cur[part] = {}
        cur = cur[part]
    cur[loc[-1]] = value


def renormalise_probabilities(data: Any, locs: Sequence[Loc]) -> None:
    """After a sweep set some scenarios' probabilities (``scenarios.NAME.probability``),
    rescale the other scenarios' in proportion so that all still sum to 1 (varying one
    forecast's weight takes it from the others). Left as is where that cannot be done (the
    set ones sum to more than 1, or the others to 0): the problem's check then names it.

    >>> d = {"scenarios": [{"probability": 0.5}, {"probability": 0.3}, {"probability": 0.2}]}
    >>> renormalise_probabilities(d, [("scenarios", 2, "probability")])
    >>> d["scenarios"][2]["probability"] = 0.6; renormalise_probabilities(d, [("scenarios", 2, "probability")])
    >>> [round(s["probability"], 6) for s in d["scenarios"]]
    [0.25, 0.15, 0.6]
    """
    fixed = {
        loc[1]
        for loc in locs
        if len(loc) == 3 and loc[0] == "scenarios" and loc[2] == "probability"
    }
    rows = data.get("scenarios") if isinstance(data, dict) else None
    if not fixed or not isinstance(rows, list):
        return
    try:
        given = sum(float(rows[i]["probability"]) for i in fixed)
        others = [i for i in range(len(rows)) if i not in fixed]
        rest = sum(float(rows[i]["probability"]) for i in others)
    except (TypeError, ValueError, KeyError, IndexError):
        return  # a malformed entry: the problem's own validation names it
    if given > 1 or rest <= 0:
        return
    for i in others:
        rows[i]["probability"] = float(rows[i]["probability"]) * (1 - given) / rest


# --------------------------------------------------------------------------- problem data


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
    """``["utilization=0.2:0.9:0.1", ("power_price", [0.1, 0.2])]`` -> resolved varies.

    At most :data:`MAX_VARIES` varies and :data:`MAX_SCENARIOS` scenarios, counted before
    any value is checked against the schema."""
    specs = list(specs)
    if len(specs) > MAX_VARIES:
        raise InputError(f"{len(specs)} --vary options; the limit is {MAX_VARIES}")
    parsed: list[tuple[str, list[Value]]] = []
    for spec in specs:
        if isinstance(spec, str):
            key, values = parse_vary(spec)
        else:
            key, vals = spec
            what = f"--vary {key}"
            values = (
                parse_values(vals, what) if isinstance(vals, str) else check_values_list(vals, what)
            )
        if any(k == key for k, _ in parsed):
            raise InputError(f"--vary {key}: given twice; put every value in one --vary")
        if not values:
            raise InputError(f"--vary {key}: no values")
        parsed.append((key, values))
    n = math.prod(len(v) for _, v in parsed) if parsed else 0
    if n > MAX_SCENARIOS:
        sizes = " x ".join(str(len(v)) for _, v in parsed)
        raise InputError(f"the grid has {n:,} scenarios ({sizes}); the limit is {MAX_SCENARIOS}")
    out: list[Vary] = []
    for key, values in parsed:
        locs = resolve_key(base.data, key)
        for v in out:
            clash = set(v.locs) & set(locs)
            if clash:
                raise InputError(
                    f"--vary {key} and --vary {v.key} both set {format_loc(sorted(clash, key=str)[0])}"
                )
        check_values(base, key, locs, values)
        out.append(Vary(key, list(values), locs))
    return out


def check_values(base: Base, key: str, locs: Sequence[Loc], values: Sequence[Value]) -> None:
    """:func:`check_value` for each value, on one copy of the data (~0.3 ms a value)."""
    data = copy.deepcopy(base.data)
    for value in values:
        _check_in(data, key, locs, value)


def check_value(base: Base, key: str, locs: Sequence[Loc], value: Value) -> None:
    """Refuse a value the problem file itself would refuse at that place (wrong type, out of
    range), before any solve: ``--vary utilization=abc`` is bad input (exit 2), not a failed
    scenario. Errors elsewhere in the file are left to the scenarios to report."""
    _check_in(copy.deepcopy(base.data), key, locs, value)


def _check_in(data: dict[str, Any], key: str, locs: Sequence[Loc], value: Value) -> None:
    """Set ``value`` at ``locs`` in ``data`` (a copy, changed in place) and validate it."""
    from pydantic import ValidationError

    for loc in locs:
        set_at(data, loc, value)
    renormalise_probabilities(data, locs)
    try:
        Problem.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            here = tuple(err["loc"])
            if any(here[: len(loc)] == tuple(loc) for loc in locs):
                msg = err["msg"].removeprefix("Value error, ")
                raise InputError(f"--vary {key}={value!r}: {format_loc(here)}: {msg}") from None
