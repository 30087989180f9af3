"""What-if keys: parsing ``--vary`` values and ranges, resolving KEY paths and aliases in
the problem file's data, and the problem file as data (:class:`Base`) with the varies
resolved against it and checked value by value, before any solve. The syntax of a vary
is described in :mod:`planner.analysis.whatif`.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from planner.base.errors import InputError
from planner.base.yamlio import did_you_mean, format_loc, load_yaml

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
