"""Safe YAML loading and pydantic validation with errors that name file, line, field and value.

Every input file goes through :func:`load_yaml` (``yaml.safe_load`` semantics, plus a map
from field path to line number) and :func:`validate`, which turns a pydantic
``ValidationError`` into an :class:`~planner.errors.InputError` a user can act on.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import InputError

M = TypeVar("M", bound=BaseModel)
Loc = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps/dates as strings (``2027-01`` stays text)."""


# Dates are parsed by pydantic, so YAML's implicit timestamp resolver is removed.
_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}


class YamlDoc:
    """Parsed YAML data plus the line (1-based) of every mapping key and list item."""

    def __init__(self, data: Any, lines: dict[Loc, int], path: Path) -> None:
        self.data = data
        self.lines = lines
        self.path = path

    def line_of(self, loc: Loc) -> int | None:
        """Line of the deepest known prefix of ``loc``."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return None


def _index_lines(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    out.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[loc + (key,)] = key_node.start_mark.line + 1
            _index_lines(value_node, loc + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[loc + (i,)] = item.start_mark.line + 1
            _index_lines(item, loc + (i,), out)


def parse_yaml_text(text: str, path: Path) -> YamlDoc:
    """Parse YAML text; syntax errors become an InputError with the line and column."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: YAML syntax error: {problem}") from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _index_lines(node, (), lines)
    return YamlDoc(data, lines, path)


def load_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file; a missing or unreadable file is an InputError."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: file not found")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a YAML file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read: {exc}") from None
    return parse_yaml_text(text, p)


def format_loc(loc: Loc) -> str:
    """``('workloads', 'train', 0, 'tokens')`` -> ``workloads.train[0].tokens``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _value_at(data: Any, loc: Loc) -> tuple[bool, Any]:
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return False, None
    return True, cur


def validation_message(exc: ValidationError, doc: YamlDoc, what: str = "") -> str:
    """One line per pydantic error: ``file:line: field.path: message (got value)``."""
    lines = []
    for err in exc.errors():
        # pydantic puts the union-member / validator tag in loc; keep only real keys.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        found, value = _value_at(doc.data, loc)
        line = doc.line_of(loc)
        where = f"{doc.path}:{line}" if line else f"{doc.path}"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            allowed = err.get("ctx", {}).get("allowed")
            msg = f"unknown key {loc[-1]!r}" + (f"; allowed keys: {allowed}" if allowed else "")
        got = f" (got {_short(value)})" if found and err["type"] != "extra_forbidden" else ""
        lines.append(f"{where}: {format_loc(loc)}: {msg}{got}")
    head = f"invalid {what}: " if what else ""
    return head + ("\n  ".join(lines) if len(lines) == 1 else "\n  " + "\n  ".join(lines))


def validate(model: type[M], doc: YamlDoc, what: str = "") -> M:
    """Validate ``doc.data`` against ``model``; errors become one InputError with every problem."""
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise InputError(validation_message(exc, doc, what)) from None


def did_you_mean(name: str, known: list[str] | set[str]) -> str:
    """Suggestion text for an unknown id.

    >>> did_you_mean("h100-sxn", ["h100-sxm", "a100-sxm-80gb"])
    "did you mean 'h100-sxm'?"
    """
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "known: " + ", ".join(sorted(known))


def finite(value: float, name: str = "value") -> float:
    """Reject NaN and infinity (pydantic allows them in floats by default).

    >>> finite(1.5)
    1.5
    """
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"{name} must be a finite number")
    return value
