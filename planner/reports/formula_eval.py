"""Compute the formulas the Excel report writes, in Python, so the saved file carries values.

openpyxl saves a formula without its result, so pandas, mail previews and file viewers see
blanks until a spreadsheet program recalculates. The report writes a small, closed set of
formulas (references, ``+ - * / ^``, comparisons, ``SUM``, ``SUMIFS``, ``IF``, ``MAX``,
``MIN``, ``ROUND``, ``EDATE``); this module evaluates exactly that set over an in-memory
openpyxl workbook and raises :class:`UnsupportedFormula` for anything else, so a new kind of
formula fails the tests instead of shipping without a value. :mod:`planner.reports.xlsx_cache`
then stores the results in the saved file. Excel and LibreOffice still recalculate on open
(``fullCalcOnLoad``); the test suite checks these values against LibreOffice's.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from openpyxl.formula.tokenizer import Token, Tokenizer
from openpyxl.utils.cell import column_index_from_string, get_column_letter
from openpyxl.workbook.workbook import Workbook

_EPOCH = dt.datetime(1899, 12, 30)


class UnsupportedFormula(ValueError):
    """A formula outside the set this evaluator knows (a bug in the report writer)."""


@dataclass(frozen=True)
class XlError:
    """An Excel error value such as ``#DIV/0!``."""

    code: str


@dataclass(frozen=True)
class _Range:
    sheet: str
    c1: int
    r1: int
    c2: int
    r2: int

    def cells(self) -> Iterator[tuple[int, int]]:
        for r in range(self.r1, self.r2 + 1):
            for c in range(self.c1, self.c2 + 1):
                yield r, c


def excel_serial(d: dt.date | dt.datetime) -> float:
    """A date as Excel's day number (1900 date system).

    >>> excel_serial(dt.date(2027, 1, 1))
    46388.0
    """
    if not isinstance(d, dt.datetime):
        d = dt.datetime(d.year, d.month, d.day)
    return (d - _EPOCH).total_seconds() / 86400.0


_REF = re.compile(r"\$?([A-Z]{1,3})\$?(\d+)")


def _parse_range(text: str, here: str) -> _Range:
    """``'Cash flow'!$B$5:$B$9`` / ``A5`` -> a range on a sheet."""
    sheet = here
    if "!" in text:
        sheet, text = text.rsplit("!", 1)
        if sheet.startswith("'"):
            sheet = sheet[1:-1].replace("''", "'")
    parts = text.split(":")
    ends = [_REF.fullmatch(p) for p in parts]
    if len(parts) > 2 or not all(ends):
        raise UnsupportedFormula(f"reference {text!r}")
    coords = [(column_index_from_string(m[1]), int(m[2])) for m in ends if m]
    (c1, r1), (c2, r2) = coords[0], coords[-1]
    return _Range(sheet, min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2))


def _num(v: Any) -> float | XlError:
    """A value in arithmetic: empty is 0, numeric text is a number, other text #VALUE!."""
    if isinstance(v, XlError):
        return v
    if v is None or v == "":
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return XlError("#VALUE!")


def _cmp_key(v: Any) -> tuple[int, Any]:
    """Excel's order across types: numbers < text < logicals; text ignores case."""
    if v is None:
        v = 0.0
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, (int, float)):
        return (0, float(v))
    return (1, str(v).lower())


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}


def _criterion(crit: Any) -> Callable[[Any], bool]:
    """A SUMIFS criterion as a test on a cell value (operators and ``* ? ~`` wildcards)."""
    if isinstance(crit, (int, float)) and not isinstance(crit, bool):
        x = float(crit)
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v == x
    s = "" if crit is None else str(crit)
    m = re.match(r"(<=|>=|<>|<|>|=)?(.*)", s, re.S)
    op, rest = (m[1] or "="), m[2]  # type: ignore[index]
    try:
        x = float(rest)
        return lambda v: (
            isinstance(v, (int, float)) and not isinstance(v, bool) and _OPS[op](float(v), x)
        )
    except ValueError:
        pass
    if op in ("=", "<>"):
        pattern = re.compile(_wildcard(rest), re.I | re.S)
        hit = (
            (lambda v: isinstance(v, str) and pattern.fullmatch(v) is not None)
            if rest
            else (lambda v: v is None or v == "")
        )
        return hit if op == "=" else (lambda v: not hit(v))
    return lambda v: isinstance(v, str) and _OPS[op](v.lower(), rest.lower())


def _wildcard(text: str) -> str:
    """Excel's criterion wildcards as a regex: ``*`` any run, ``?`` one character, ``~`` escapes.

    >>> _wildcard("a*b?~*")
    'a.*b.\\\\*'
    """
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "~" and i + 1 < len(text):
            out.append(re.escape(text[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        i += 1
    return "".join(out)


class Evaluator:
    """Values of formula cells of one workbook, computed on demand and memoized."""

    def __init__(self, wb: Workbook) -> None:
        self.wb = wb
        self._memo: dict[tuple[str, int, int], Any] = {}
        self._busy: set[tuple[str, int, int]] = set()
        # per range (SUM and SUMIFS read the same columns over and over): its values, and
        # its positions grouped by value (a criterion is tested once per distinct value)
        self._range_values: dict[_Range, list[Any]] = {}
        self._range_groups: dict[_Range, dict[tuple[type, Any], tuple[Any, list[int]]]] = {}

    # -- cells --------------------------------------------------------------------
    def value(self, sheet: str, row: int, col: int) -> Any:
        """The value of a cell: its constant (dates as day numbers) or its formula's result."""
        key = (sheet, row, col)
        if key in self._memo:
            return self._memo[key]
        cell = self.wb[sheet].cell(row=row, column=col)
        v = cell.value
        if cell.data_type == "f" and isinstance(v, str):
            if key in self._busy:
                raise UnsupportedFormula(f"circular reference at {sheet}!{cell.coordinate}")
            self._busy.add(key)
            try:
                v = self.formula(v, sheet)
            finally:
                self._busy.discard(key)
        elif isinstance(v, (dt.date, dt.datetime)):
            v = excel_serial(v)
        self._memo[key] = v
        return v

    def formula(self, text: str, sheet: str) -> Any:
        tokens = [t for t in Tokenizer(text).items if t.type != Token.WSPACE]
        parser = _Parser(tokens, sheet, self)
        result = parser.expr()
        if parser.pos != len(tokens):
            raise UnsupportedFormula(f"trailing tokens in {text!r}")
        if isinstance(result, _Range):
            return self._single(result)
        return result

    def _single(self, rg: _Range) -> Any:
        if (rg.c1, rg.r1) != (rg.c2, rg.r2):
            raise UnsupportedFormula(f"a range where one value is wanted: {rg}")
        v = self.value(rg.sheet, rg.r1, rg.c1)
        return 0.0 if v is None else v

    def scalar(self, v: Any) -> Any:
        return self._single(v) if isinstance(v, _Range) else v

    def values(self, rg: _Range) -> list[Any]:
        """The values of a range, row by row (memoized: cells do not change while evaluated)."""
        vals = self._range_values.get(rg)
        if vals is None:
            vals = [self.value(rg.sheet, r, c) for r, c in rg.cells()]
            self._range_values[rg] = vals
        return vals

    def matching(self, rg: _Range, test: Callable[[Any], bool]) -> set[int]:
        """Positions in ``rg`` (as in :meth:`values`) whose value passes ``test``."""
        groups = self._range_groups.get(rg)
        if groups is None:
            groups = {}
            for i, v in enumerate(self.values(rg)):
                try:
                    groups.setdefault((type(v), v), (v, []))[1].append(i)
                except TypeError:  # an unhashable value: a group of its own
                    groups[(type(v), id(v))] = (v, [i])
            self._range_groups[rg] = groups
        out: set[int] = set()
        for v, where in groups.values():
            if test(v):
                out.update(where)
        return out

    # -- functions ----------------------------------------------------------------
    def call(self, name: str, args: list[Any]) -> Any:
        fn = _FUNCS.get(name)
        if fn is None:
            raise UnsupportedFormula(f"function {name}")
        return fn(self, args)


def _numbers(ev: Evaluator, args: list[Any]) -> list[float] | XlError:
    """The numbers among ``args`` (ranges expanded, text and booleans skipped, as SUM, MIN
    and MAX do), or the first error value met."""
    nums: list[float] = []
    for a in args:
        vals = ev.values(a) if isinstance(a, _Range) else [_num(a)]
        for v in vals:
            if isinstance(v, XlError):
                return v
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                nums.append(float(v))
    return nums


def _fn_sum(ev: Evaluator, args: list[Any]) -> Any:
    nums = _numbers(ev, args)
    return nums if isinstance(nums, XlError) else sum(nums, 0.0)


def _fn_sumifs(ev: Evaluator, args: list[Any]) -> Any:
    if len(args) < 3 or len(args) % 2 == 0 or not isinstance(args[0], _Range):
        raise UnsupportedFormula("SUMIFS arguments")
    target = ev.values(args[0])
    keep: set[int] | None = None
    for rg, crit in zip(args[1::2], args[2::2], strict=True):
        if len(ev.values(rg)) != len(target):
            raise UnsupportedFormula("SUMIFS ranges of different sizes")
        hits = ev.matching(rg, _criterion(ev.scalar(crit)))
        keep = hits if keep is None else keep & hits
    picked = [target[i] for i in sorted(keep)] if keep is not None else []
    errors = [v for v in picked if isinstance(v, XlError)]
    if errors:
        return errors[0]
    return sum(float(v) for v in picked if isinstance(v, (int, float)) and not isinstance(v, bool))


def _fn_if(ev: Evaluator, args: list[Any]) -> Any:
    if not 2 <= len(args) <= 3:
        raise UnsupportedFormula("IF arguments")
    cond = ev.scalar(args[0])
    if isinstance(cond, XlError):
        return cond
    truth = bool(_num(cond)) if not isinstance(cond, bool) else cond
    chosen = args[1] if truth else (args[2] if len(args) == 3 else False)
    return ev.scalar(chosen)


def _extreme(pick: Callable[[list[float]], float]) -> Callable[[Evaluator, list[Any]], Any]:
    def fn(ev: Evaluator, args: list[Any]) -> Any:
        nums = _numbers(ev, args)
        if isinstance(nums, XlError):
            return nums
        return pick(nums) if nums else 0.0

    return fn


def _fn_round(ev: Evaluator, args: list[Any]) -> Any:
    if len(args) != 2:
        raise UnsupportedFormula("ROUND arguments")
    x, d = _num(ev.scalar(args[0])), _num(ev.scalar(args[1]))
    if isinstance(x, XlError) or isinstance(d, XlError):
        return x if isinstance(x, XlError) else d
    q = 10.0 ** int(d)
    # Excel rounds halves away from zero, Python's round() to even
    return math.copysign(math.floor(abs(x) * q + 0.5) / q, x)


def _fn_edate(ev: Evaluator | None, args: list[Any]) -> Any:
    """``EDATE(date, months)``: the day number ``months`` calendar months after ``date``
    (whole months, truncated; the day kept, or the month's last day if shorter).

    >>> april, february = (excel_serial(dt.date(2027, m, 1)) for m in (4, 2))
    >>> _fn_edate(None, [april, -2.0]) == february, _fn_edate(None, [april, -30000.0])
    (True, XlError(code='#NUM!'))
    """
    if len(args) != 2:
        raise UnsupportedFormula("EDATE arguments")
    d, n = (_num(ev.scalar(a) if ev is not None else a) for a in args)
    if isinstance(d, XlError) or isinstance(n, XlError):
        return d if isinstance(d, XlError) else n
    if d < 0:
        return XlError("#NUM!")
    day = (_EPOCH + dt.timedelta(days=math.floor(d))).date()
    k = day.year * 12 + day.month - 1 + int(n)
    year, month = divmod(k, 12)
    if not 1900 <= year <= 9999:
        return XlError("#NUM!")
    dd = min(day.day, calendar.monthrange(year, month + 1)[1])
    return excel_serial(dt.date(year, month + 1, dd))


_FUNCS: dict[str, Callable[[Evaluator, list[Any]], Any]] = {
    "EDATE": _fn_edate,
    "ROUND": _fn_round,
    "SUM": _fn_sum,
    "SUMIFS": _fn_sumifs,
    "IF": _fn_if,
    "MAX": _extreme(max),
    "MIN": _extreme(min),
}

_BINARY = {  # precedence, as in Excel
    "=": 1,
    "<>": 1,
    "<": 1,
    ">": 1,
    "<=": 1,
    ">=": 1,
    "&": 2,
    "+": 3,
    "-": 3,
    "*": 4,
    "/": 4,
    "^": 5,
}


class _Parser:
    """Precedence climbing over openpyxl's formula tokens; evaluates as it parses."""

    def __init__(self, tokens: list[Token], sheet: str, ev: Evaluator) -> None:
        self.t = tokens
        self.pos = 0
        self.sheet = sheet
        self.ev = ev

    def peek(self) -> Token | None:
        return self.t[self.pos] if self.pos < len(self.t) else None

    def expr(self, min_prec: int = 1) -> Any:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is None or tok.type != Token.OP_IN or tok.value not in _BINARY:
                return left
            prec = _BINARY[tok.value]
            if prec < min_prec:
                return left
            self.pos += 1
            right = self.expr(prec + 1)
            left = self.binary(tok.value, self.ev.scalar(left), self.ev.scalar(right))

    def unary(self) -> Any:
        tok = self.peek()
        if tok is not None and tok.type == Token.OP_PRE:
            self.pos += 1
            v = _num(self.ev.scalar(self.unary()))
            return v if isinstance(v, XlError) or tok.value == "+" else -v
        return self.primary()

    def primary(self) -> Any:
        tok = self.peek()
        if tok is None:
            raise UnsupportedFormula("formula ends early")
        self.pos += 1
        if tok.type == Token.OPERAND:
            return self.operand(tok)
        if tok.type == Token.PAREN and tok.subtype == Token.OPEN:
            v = self.expr()
            self.expect(Token.PAREN)
            return v
        if tok.type == Token.FUNC and tok.subtype == Token.OPEN:
            return self.ev.call(tok.value[:-1].upper(), self.args())
        raise UnsupportedFormula(f"token {tok.value!r}")

    def args(self) -> list[Any]:
        out: list[Any] = []
        tok = self.peek()
        if tok is not None and tok.type == Token.FUNC and tok.subtype == Token.CLOSE:
            self.pos += 1
            return out
        while True:
            out.append(self.expr())
            tok = self.peek()
            self.pos += 1
            if tok is not None and tok.type == Token.SEP and tok.subtype == Token.ARG:
                continue
            if tok is not None and tok.type == Token.FUNC and tok.subtype == Token.CLOSE:
                return out
            raise UnsupportedFormula("function arguments")

    def expect(self, kind: str) -> None:
        tok = self.peek()
        if tok is None or tok.type != kind:
            raise UnsupportedFormula(f"expected {kind}")
        self.pos += 1

    def operand(self, tok: Token) -> Any:
        if tok.subtype == Token.NUMBER:
            return float(tok.value)
        if tok.subtype == Token.TEXT:
            return tok.value[1:-1].replace('""', '"')
        if tok.subtype == Token.LOGICAL:
            return tok.value.upper() == "TRUE"
        if tok.subtype == Token.RANGE:
            return _parse_range(tok.value, self.sheet)
        raise UnsupportedFormula(f"operand {tok.value!r}")

    @staticmethod
    def binary(op: str, a: Any, b: Any) -> Any:
        if op in _OPS:
            return _OPS[op](_cmp_key(a), _cmp_key(b))
        if op == "&":
            return f"{'' if a is None else a}{'' if b is None else b}"
        x, y = _num(a), _num(b)
        if isinstance(x, XlError):
            return x
        if isinstance(y, XlError):
            return y
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        if op == "^":
            return _power(x, y)
        if y == 0:
            return XlError("#DIV/0!")
        return x / y


def _power(x: float, y: float) -> float | XlError:
    """``x ^ y`` as Excel computes it: an error where the result is not a real number.

    >>> _power(1.1, -0.5) == 1.1 ** -0.5, _power(-8.0, 0.5), _power(0.0, -1.0)
    (True, XlError(code='#NUM!'), XlError(code='#DIV/0!'))
    """
    if x == 0 and y < 0:
        return XlError("#DIV/0!")
    if x < 0 and not float(y).is_integer():
        return XlError("#NUM!")
    try:
        return float(x**y)
    except OverflowError:
        return XlError("#NUM!")


def evaluate_all(wb: Workbook) -> dict[str, dict[str, Any]]:
    """``{sheet: {"B5": value}}`` for every formula cell of ``wb``."""
    ev = Evaluator(wb)
    out: dict[str, dict[str, Any]] = {}
    for ws in wb.worksheets:
        vals: dict[str, Any] = {}
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type == "f" and isinstance(cell.value, str):
                    v = ev.value(ws.title, cell.row, cell.column)
                    vals[f"{get_column_letter(cell.column)}{cell.row}"] = _clean(v)
        out[ws.title] = vals
    return out


def _clean(v: Any) -> Any:
    """A result as a cell stores it: non-finite numbers are errors, empty is 0."""
    if v is None:
        return 0.0
    if isinstance(v, float) and not math.isfinite(v):
        return XlError("#NUM!")
    return v
