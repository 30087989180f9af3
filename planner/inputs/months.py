"""Month labels of problem files: ``YYYY-MM`` parsing and month arithmetic.

The problem schema (:mod:`planner.inputs.schema`) validates dates with these and every later
stage counts months with them; they live apart so the schema and the resolution in
:mod:`planner.inputs.problem` can share them without importing each other.
"""

from __future__ import annotations

import re

_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")  # ASCII digits only; fullmatch: no trailing text


def parse_month(text: str) -> tuple[int, int]:
    """``"2027-04"`` -> ``(2027, 4)``.

    >>> parse_month("2027-04")
    (2027, 4)
    """
    m = _MONTH.fullmatch(str(text))
    if not m or not 1 <= int(m.group(2)) <= 12 or not 1900 <= int(m.group(1)) <= 2200:
        raise ValueError(
            f"expected a month as YYYY-MM (e.g. 2027-01, years 1900-2200), got {text!r}"
        )
    return int(m.group(1)), int(m.group(2))


def month_index(start: str, month: str) -> int:
    """Months from ``start`` to ``month`` (0 = the same month).

    >>> month_index("2027-01", "2028-03")
    14
    """
    y0, m0 = parse_month(start)
    y1, m1 = parse_month(month)
    return (y1 - y0) * 12 + (m1 - m0)


def month_label(start: str, index: int) -> str:
    """The ``index``-th month after ``start`` as ``YYYY-MM``.

    >>> month_label("2027-11", 3)
    '2028-02'
    """
    y, m = parse_month(start)
    total = y * 12 + (m - 1) + index
    return f"{total // 12:04d}-{total % 12 + 1:02d}"


_AS_OF = re.compile(r"\s*([0-9]{4})(?:-([0-9]{2}))?(?:-[0-9]{2})?\s*")


def as_of_month(text: str) -> str | None:
    """The month a catalog figure's ``as_of`` names (``2026-07``, ``2026-07-22``; a bare year
    is its January, the oldest it can be), or None when it names none.

    >>> as_of_month("2026-07-22"), as_of_month("2024"), as_of_month("unknown")
    ('2026-07', '2024-01', None)
    """
    m = _AS_OF.fullmatch(str(text))
    if not m:
        return None
    label = f"{m.group(1)}-{m.group(2) or '01'}"
    try:
        parse_month(label)
    except ValueError:
        return None
    return label


def this_month() -> str:
    """Today's month as ``YYYY-MM`` (the clock): what "now" means for a price with dated
    steps in the comparisons of today (``planner catalog``, ``estimate frontier``)."""
    import datetime as dt

    d = dt.date.today()
    return f"{d.year:04d}-{d.month:02d}"
