"""Reading a plan JSON handed back: the checks on the parsed JSON that come before its
fields are read (:func:`planner.plan.data.load_plan`), with the short, printable key paths
and values its messages name.

The JSON parser keeps an integer of more than :data:`MAX_DIGITS` digits as its text (Python
refuses to convert 4,300 digits and more); :func:`first_bad_value` then names it, and any
NaN or infinity, a number beyond any plan's, a text too long or holding a character no
workbook can hold (a lone UTF-16 surrogate, a control character XML cannot hold), or nesting
deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_TEXT = 10_000  # any text of a plan (README: other texts 10,000 characters)
MAX_DIGITS = 30  # an integer written with more digits is not a plan's figure
MAX_DEPTH = 32  # nesting of a plan JSON (it needs 5)


class _LongInt(str):
    """An integer literal of more than MAX_DIGITS digits, kept as its text (Python refuses to
    convert 4,300 digits and more, and no plan figure has a tenth of that)."""


def parse_int(text: str) -> int | _LongInt:
    return int(text) if len(text.lstrip("-")) <= MAX_DIGITS else _LongInt(text)


# a lone UTF-16 surrogate, a control character XML 1.0 cannot hold, U+FFFE / U+FFFF: a
# workbook holding one does not open
_BAD_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MAX_FREE = 1e30  # numbers of free-form mappings (configs, assumptions): e.g. FLOPs ~1e25


def first_bad_value(data: Any) -> str | None:
    """The first value of the parsed JSON no plan holds, as ``path: value; what is allowed``:
    NaN or infinity, an integer of too many digits, a number beyond any plan's, a text too
    long or with characters a workbook cannot hold, nesting deeper than MAX_DEPTH. Iterative,
    and the path is built only for the bad value."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            return f"{path_text(path)}: nested deeper than {MAX_DEPTH} levels; a plan needs 5"
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            if isinstance(k, str) and (why := _bad_text(k)) is not None:
                return f"{path_text((*path, k))}: the key {show(k)} {why}"
            if isinstance(v, (dict, list)):
                stack.append((v, (*path, k)))
            elif (why := _bad_scalar(v)) is not None:
                return f"{path_text((*path, k))}: {show(v)}; {why}"
    return None


def _bad_scalar(v: Any) -> str | None:
    if isinstance(v, _LongInt):
        return f"a number of the plan has at most {MAX_DIGITS} digits"
    if isinstance(v, str):
        return _bad_text(v)
    if isinstance(v, float) and not (math.isfinite(v) and abs(v) <= _MAX_FREE):
        return "a number of the plan is finite and at most 1e30 in size"
    return None


def _bad_text(s: str) -> str | None:
    if len(s) > MAX_TEXT:
        return f"is {len(s):,} characters long; a text of a plan has at most {MAX_TEXT:,}"
    m = _BAD_CHAR.search(s)
    if m:
        return (
            f"holds the character U+{ord(m[0]):04X} at position {m.start()}: a lone surrogate "
            "or a control character no workbook can hold"
        )
    return None


def show(v: Any) -> str:
    """A value for a message: short, and printable whatever it holds."""
    if isinstance(v, _LongInt):
        return f"an integer of {len(v.lstrip('-')):,} digits"
    text = ascii(str(v)) if isinstance(v, str) else ascii(v)
    return text if len(text) <= 60 else text[:57] + "..."


def path_text(loc: tuple[Any, ...]) -> str:
    """A JSON key path as a reader writes it: ``purchases[0].count``.

    >>> path_text(("purchases", 0, "count"))
    'purchases[0].count'
    >>> path_text(())
    '(top)'
    """
    out = ""
    for k in loc:
        if isinstance(k, int):
            out += f"[{k}]"
        else:
            key = str(k)
            if not re.fullmatch(r"[A-Za-z0-9_:\-]{1,60}", key):
                key = f"[{show(key)}]"
                out += key
                continue
            out += f".{key}" if out else key
    return out or "(top)"
