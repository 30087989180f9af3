"""Units and spellings accepted everywhere: token counts and amounts of money with suffixes
(``50B`` tokens, ``capex_usd: 3M``), case-insensitive enums.

The same rules hold on the command line (``planner estimate --tokens 2T``) and in problem
files (``tokens: 2T``), so a value that works in one place works in the other.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from planner.base.errors import InputError

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)", re.IGNORECASE)
# Commas only as thousands separators: 1 to 3 digits (no leading zero), then groups of three,
# then an optional fraction, exponent and suffix (2,500,000; 1,234.5; 2,500k). "2,5M" is a
# decimal comma and "1,5T" is not 15T: deleting every comma would read them 10x too large.
_GROUPED = re.compile(
    r"[1-9][0-9]{0,2}(?:,[0-9]{3})+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?\s*[kmbgt]?", re.IGNORECASE
)


class CommaError(ValueError):
    """A comma that is not a thousands separator (a decimal comma, or groups not of three)."""


def _without_commas(s: str, text: object) -> str:
    """``s`` with its thousands separators removed; a :class:`CommaError` for any other comma.

    >>> _without_commas("2,500,000", "2,500,000"), _without_commas("1,234.5k", "1,234.5k")
    ('2500000', '1234.5k')
    >>> _without_commas("2,5M", "2,5M")
    Traceback (most recent call last):
    ...
    planner.base.units.CommaError: '2,5M': a comma only separates thousands (2,500,000 or 1,234.5); a decimal is written with a point: did you mean '2.5M'?
    """
    if "," not in s:
        return s
    if "_" not in s and _GROUPED.fullmatch(s):
        return s.replace(",", "")
    hint = "a decimal is written with a point"
    if s.count(",") == 1 and "." not in s:
        hint += f": did you mean {s.replace(',', '.')!r}?"
    raise CommaError(f"{text!r}: a comma only separates thousands (2,500,000 or 1,234.5); {hint}")


def count_value(text: str | float | int) -> float:
    """A count written as a number or with a suffix: ``7e9``, ``7B``, ``1.5T``, ``300M``,
    ``2_000_000``, ``2,000,000`` (k = 1e3, M = 1e6, B/G = 1e9, T = 1e12). Raises
    ``ValueError`` otherwise, including for booleans (YAML's ``yes``/``true`` are not counts)
    and for a comma that does not separate thousands (:func:`_without_commas`).

    >>> count_value("7B"), count_value("1.5t"), count_value("2e6"), count_value(300)
    (7000000000.0, 1500000000000.0, 2000000.0, 300.0)
    """
    if isinstance(text, bool):
        raise ValueError("expected a number like 7e9, 7B or 1.5T, got a boolean")
    if isinstance(text, int | float):
        return float(text)
    s = _without_commas(str(text).strip(), text).replace("_", "")
    m = _COUNT.fullmatch(s)
    if not m:
        raise ValueError(f"expected a number like 7e9, 7B or 1.5T, got {text!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2).lower()]


def money_value(text: str | float | int) -> float:
    """An amount of money written as a number or with the count suffixes, after an optional
    ``$``: ``3M``, ``$250k``, ``1.5B``, ``2,000,000`` (the same spellings as token counts).
    Raises ``ValueError`` saying what is allowed otherwise.

    >>> money_value("3M"), money_value("$250k"), money_value("1_500"), money_value(7)
    (3000000.0, 250000.0, 1500.0, 7.0)
    """
    s = text.strip().removeprefix("$").strip() if isinstance(text, str) else text
    try:
        return count_value(s)
    except CommaError:
        raise  # it says what is wrong and what was meant
    except ValueError:
        raise ValueError(
            f"expected an amount like 3000000, 3M, $250k or 1.5B, got {text!r}"
        ) from None


def parse_count(text: str | float | int, what: str) -> float:
    """A positive, finite count for option or field ``what``; an ``InputError`` otherwise.

    >>> parse_count("300B", "--tokens")
    300000000000.0
    """
    try:
        value = count_value(text)
    except ValueError as exc:
        raise InputError(f"{what}: {exc}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what}: must be a positive number, got {text!r}")
    return value


def _count_before(v: Any) -> Any:
    """Pydantic pre-validator: strings (``2T``) become numbers, or a ValueError saying what is
    allowed; booleans are refused; anything else goes on to pydantic's own number check."""
    if isinstance(v, str | bool):
        return count_value(v)
    return v


def _lower(v: Any) -> Any:
    return v.lower() if isinstance(v, str) else v


# A count field (tokens, parameters) that also takes 2T, 300B, 7e9.
Count = Annotated[float, BeforeValidator(_count_before)]
# Wrap a Literal of lower-case words: ``LoRA`` and ``FP8`` are read as ``lora`` and ``fp8``.
CaseInsensitive = BeforeValidator(_lower)


def _numeric(annotation: Any) -> bool:
    """Whether a field annotation is a number (``float``, ``int``, ``float | None``, ...).

    >>> _numeric(float), _numeric(int | None), _numeric(str), _numeric(bool)
    (True, True, False, False)
    """
    if annotation in (float, int):
        return True
    args = getattr(annotation, "__args__", ())
    return any(a in (float, int) for a in args) and bool not in args


# Text that cannot be shown or saved: C0/C1 control characters but tab and newline (an escape
# sequence reaches the terminal raw; XML 1.0, the workbook's format, forbids most of them),
# lone UTF-16 surrogates and the non-characters U+FFFE/U+FFFF (no valid XML holds them).
_BAD_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def check_text(value: str) -> str:
    r"""``value`` if it holds only characters a terminal and a workbook can show; the shared
    validator of every name and free text of an input (a ValueError naming the character).

    >>> check_text("chat (EU)\tv2")
    'chat (EU)\tv2'
    >>> check_text("chat\x1b[31m")
    Traceback (most recent call last):
    ...
    ValueError: control characters (escape, NUL, bell, ...) are not allowed in text: '\x1b' (U+001B) at position 4
    >>> check_text("a\ufffe")
    Traceback (most recent call last):
    ...
    ValueError: U+FFFE is not allowed in text (a workbook cannot hold it) at position 1
    """
    m = _BAD_TEXT.search(value)
    if m is None:
        return value
    ch = m.group()
    if ch <= "\x9f":
        raise ValueError(
            "control characters (escape, NUL, bell, ...) are not allowed in text: "
            f"{ch!r} (U+{ord(ch):04X}) at position {m.start()}"
        )
    what = "a lone UTF-16 surrogate" if "\ud800" <= ch <= "\udfff" else f"U+{ord(ch):04X}"
    raise ValueError(
        f"{what} is not allowed in text (a workbook cannot hold it) at position {m.start()}"
    )


def _check_texts(value: Any) -> None:
    """:func:`check_text` on a string, the strings of a list, or a mapping's keys and string
    values (nested models check their own fields)."""
    if isinstance(value, str):
        check_text(value)
    elif isinstance(value, list | tuple):
        for v in value:
            if isinstance(v, str):
                check_text(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                check_text(k)
            if isinstance(v, str):
                check_text(v)


_OTHER, _NUMBER, _FLAG = 0, 1, 2
_FIELD_KIND: dict[tuple[type, str], int] = {}


def _field_kind(cls: Any, name: str) -> int:
    key = (cls, name)
    kind = _FIELD_KIND.get(key)
    if kind is None:
        field = cls.model_fields.get(name)
        annotation = None if field is None else field.annotation
        kind = _NUMBER if _numeric(annotation) else _FLAG if annotation is bool else _OTHER
        _FIELD_KIND[key] = kind
    return kind


def no_bool_for_number(cls: Any, value: Any, info: Any) -> Any:
    """Pydantic ``field_validator("*", mode="before")``: YAML's ``true``/``yes`` is not a number
    (pydantic would read it as 1 and plan with a $1 budget), a number is not a flag, and text
    holds no character a terminal or workbook cannot show (:func:`check_text`)."""
    _check_texts(value)
    kind = _field_kind(cls, info.field_name)
    if kind == _NUMBER and isinstance(value, bool):
        raise ValueError("expected a number, got a boolean (true/false/yes/no)")
    if kind == _NUMBER and isinstance(value, str) and "usd" in info.field_name:
        return money_value(value)  # an amount of money: 3M, $250k, like token counts
    if kind == _FLAG and not isinstance(value, bool):
        # pydantic would read 1, "yes" or "on" as true: a flag is written true or false
        raise ValueError("expected true or false")
    return value


def no_bool(value: Any) -> Any:
    """A ``BeforeValidator`` for numbers inside lists and mappings (``discounts: {aws: 0.25}``),
    which the field-level check above does not reach.

    >>> no_bool(0.25)
    0.25
    >>> no_bool(True)
    Traceback (most recent call last):
    ...
    ValueError: expected a number, got a boolean (true/false/yes/no)
    """
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean (true/false/yes/no)")
    return value


# A number inside a list or mapping: never a boolean.
NotBool = BeforeValidator(no_bool)
