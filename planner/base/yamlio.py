"""Safe YAML loading and pydantic validation with errors that name file, line, field and value.

Every input file goes through :func:`load_yaml` (``yaml.safe_load`` semantics, plus a map
from field path to line number) and :func:`validate`, which turns a pydantic
``ValidationError`` into an :class:`~planner.base.errors.InputError` a user can act on: one line
per problem, ``file:line: field.path: what is wrong (got value)``, with the allowed keys for
an unknown key and the closest known ids for an unknown id.
"""

from __future__ import annotations

import difflib
import functools
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.base.errors import InputError
from planner.base.files import MAX_NESTING, read_text

M = TypeVar("M", bound=BaseModel)
Loc = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps/dates as strings (``2027-01`` stays text)."""


# libyaml's parser reads the shipped catalogs ~5x faster (offers.yaml: 0.12 s instead of
# 0.59 s) but recurses in C: a hostile file nested thousands deep crashes the process. So it
# reads only the files shipped in catalogs/; everything a user hands in goes through the
# pure-Python parser, whose depth is checked.
_CBase: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _CatalogLoader(_CBase):  # type: ignore[misc, valid-type]
    """The fast loader for shipped catalogs, with the same resolvers as :class:`_Loader`."""


SHIPPED = Path(__file__).resolve().parents[2] / "catalogs"

# Dates are parsed by pydantic, so YAML's implicit timestamp resolver is removed.
_Loader.yaml_implicit_resolvers = _CatalogLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}


class LocatedError(ValueError):
    """A ValueError raised inside a pydantic validator that knows which field it is about.

    ``items`` are ``(loc, message)`` pairs; each ``loc`` is relative to the model whose
    validator raised (pydantic reports the model's own location). :func:`validation_message`
    turns each item into its own ``file:line: field: message`` line.
    """

    def __init__(self, items: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(msg for _, msg in items))
        self.items = items


class YamlDoc:
    """Parsed YAML data plus the line (1-based) of every mapping key and list item."""

    def __init__(
        self, data: Any, lines: dict[Loc, int], path: Path, shipped_text: str | None = None
    ) -> None:
        self.data = data
        self.lines = lines
        self.path = path
        # the text of a shipped catalog file, as read: what :func:`validate` keys its cache by
        self.shipped_text = shipped_text

    def line_of(self, loc: Loc) -> int | None:
        """Line of the deepest known prefix of ``loc``."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())

    def where(self, loc: Loc = ()) -> str:
        """``file:line`` of ``loc`` (or just ``file`` when the line is unknown)."""
        line = self.line_of(loc)
        return f"{self.path}:{line}" if line else f"{self.path}"


class _CachedDoc(YamlDoc):
    """A shipped catalog's :class:`YamlDoc` over the parse kept by :func:`_parsed`: its data
    and lines are copied on first use, so a caller that changes them never changes the kept
    parse, and one that only validates (cached by :func:`validate`) copies nothing."""

    def __init__(self, parsed: tuple[Any, dict[Loc, int]], path: Path, shipped_text: str):
        self._parsed = parsed
        self.path = path
        self.shipped_text = shipped_text

    @functools.cached_property
    def data(self) -> Any:  # type: ignore[override]
        return tree_copy(self._parsed[0])

    @functools.cached_property
    def lines(self) -> dict[Loc, int]:  # type: ignore[override]
        return dict(self._parsed[1])


MAX_VALUES = 200_000  # values in a document once YAML aliases are expanded ("billion laughs")


def _index_lines(
    node: yaml.Node, loc: Loc, out: dict[Loc, int], path: Path, count: list[int] | None = None
) -> None:
    count = count if count is not None else [0]
    count[0] += 1
    if count[0] > MAX_VALUES:
        raise InputError(
            f"{path}:{node.start_mark.line + 1}: the document expands to more than {MAX_VALUES:,} values "
            "(YAML anchors and aliases nested too deep); write the values out"
        )
    out.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode) and key != "<<":
                if key in seen:
                    raise InputError(
                        f"{path}:{line}: {format_loc(loc + (key,))}: key {key!r} appears twice "
                        f"(first at line {seen[key]}); YAML would silently keep only the last one"
                    )
                seen[key] = line
            out[loc + (key,)] = line
            _index_lines(value_node, loc + (key,), out, path, count)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[loc + (i,)] = item.start_mark.line + 1
            _index_lines(item, loc + (i,), out, path, count)


def parse_yaml_text(text: str, path: Path, shipped: bool = False) -> YamlDoc:
    """Parse YAML text safely (no Python tags); errors become an InputError with the line.
    ``shipped``: a file of the planner's own catalogs/ (read with libyaml when available)."""
    try:
        # the reader refuses NUL and control characters here
        loader = _CatalogLoader(text) if shipped else _Loader(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not a YAML text file: {exc}".replace("\n", " ")) from None
    try:
        node = loader.get_single_node()
        if node is not None and not _depth_ok(node):
            raise InputError(
                f"{path}: nested more than {MAX_DEPTH} levels deep; not a planner file"
            )
        data = loader.construct_document(node) if node is not None else None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to read; not a planner file") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. `!!int abc`, `!!timestamp x`
        raise InputError(f"{path}: YAML value error: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in str(problem):
            raise InputError(
                f"{where}: YAML error: {problem}; only plain YAML data (mappings, lists, "
                "strings, numbers, booleans) is allowed, not language-specific tags like !!python/..."
            ) from None
        detail = f"{problem} ({context})" if context else problem
        raise InputError(f"{where}: YAML syntax error: {detail}") from None
    finally:
        loader.dispose()
    lines: dict[Loc, int] = {}
    if node is not None:
        _index_lines(node, (), lines, path)
    return YamlDoc(data, lines, path)


def load_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file; a missing, unreadable, special or huge file is an InputError.

    A shipped catalog is read every time but parsed again only when its text is new to this
    process (:func:`_parsed`): a sweep, a library user or a test suite that loads problems
    hundreds of times parses each catalog once (they were ~0.15 s of a ~0.2 s problem load).
    Each caller gets its own copy of the data (:class:`_CachedDoc`)."""
    p = Path(path)
    shipped = p.resolve().parent == SHIPPED and not p.is_symlink()
    text = read_text(p, "YAML file")
    if not shipped:
        return parse_yaml_text(text, p)
    return _CachedDoc(_parsed(text, p), p, text)


@functools.lru_cache(maxsize=32)
def _parsed(text: str, path: Path) -> tuple[Any, dict[Loc, int]]:
    """The data and line map of a shipped catalog's ``text`` (:func:`parse_yaml_text`), kept
    for the next read of the same text at the same path; errors are raised every time."""
    doc = parse_yaml_text(text, path, shipped=True)
    return doc.data, doc.lines


def tree_copy(data: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of parsed YAML data: new dicts and lists, the same (immutable) scalars.

    A node the text shares through an alias is copied once and shared in the copy too, as
    the parser gave it (so an alias bomb stays as cheap to copy as it was to parse).

    >>> a = {"x": [1, {"y": "z"}]}
    >>> b = tree_copy(a)
    >>> b == a and b["x"] is not a["x"] and b["x"][1] is not a["x"][1]
    True
    >>> shared = [1]
    >>> c = tree_copy({"p": shared, "q": shared})
    >>> c["p"] is c["q"] and c["p"] is not shared
    True
    """
    if not isinstance(data, dict | list):
        return data
    memo = {} if memo is None else memo
    if id(data) in memo:
        return memo[id(data)]
    if isinstance(data, dict):
        copied: dict = {}
        memo[id(data)] = copied
        for k, v in data.items():
            copied[k] = tree_copy(v, memo)
        return copied
    items: list = []
    memo[id(data)] = items
    items.extend(tree_copy(v, memo) for v in data)
    return items


MAX_DEPTH = MAX_NESTING  # 32; the deepest real input (offers in a problem's overrides) is under 10


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [v for _, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _depth_ok(root: yaml.Node, limit: int = MAX_DEPTH) -> bool:
    """Whether a composed YAML node nests no deeper than ``limit``.

    Iterative (no recursion on hostile input) and linear in the number of distinct nodes:
    aliases share nodes, so each node's height is computed once (an alias bomb stays cheap);
    a node that contains itself counts as too deep.
    """
    height: dict[int, int] = {}
    open_ids: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_ids.discard(key)
            height[key] = 1 + max((height[id(c)] for c in _children(node)), default=0)
            if height[key] > limit:
                return False
            continue
        if key in height:
            continue
        if key in open_ids:
            return False  # recursive alias
        open_ids.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in height)
    return True


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
    if isinstance(value, float) and math.isnan(value):
        return ".nan"
    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
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


def _is_tag(part: str | int) -> bool:
    """Parts pydantic adds to a loc that are not keys: union members and validator tags."""
    if not isinstance(part, str):
        return False
    return (
        part.startswith("function-")
        or "[" in part
        or part
        in {"str", "int", "float", "bool", "none", "list", "dict", "is-instance", "lax-or-strict"}
    )


def _clean_loc(data: Any, loc: Loc) -> Loc:
    """Drop the tags pydantic puts in a loc (``function-after[...]``, ``float``, ``list[str]``)."""
    out: list[str | int] = []
    cur, found = data, True
    for part in loc:
        if found:
            try:
                cur = cur[part]
                out.append(part)
                continue
            except (KeyError, IndexError, TypeError):
                found = False
        if not _is_tag(part):
            out.append(part)
    return tuple(out)


def _unwrap(tp: Any) -> list[Any]:
    """The members of an Optional/Union annotation (or ``[tp]``)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return [a for a in typing.get_args(tp) if a is not type(None)]
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    return [tp]


def _model_at(model: type[BaseModel] | None, loc: Loc) -> type[BaseModel] | None:
    """The pydantic model class that validates the mapping at ``loc`` (None if unknown)."""
    if model is None:
        return None
    current: list[Any] = [model]
    for part in loc:
        nxt: list[Any] = []
        for tp in current:
            for t in _unwrap(tp):
                origin = typing.get_origin(t)
                if isinstance(t, type) and issubclass(t, BaseModel) and isinstance(part, str):
                    for name, f in t.model_fields.items():
                        if part in (name, f.alias):
                            nxt.append(f.annotation)
                elif origin in (list, tuple, set) and isinstance(part, int):
                    nxt.extend(typing.get_args(t)[:1])
                elif origin is dict:
                    args = typing.get_args(t)
                    if len(args) == 2:
                        nxt.append(args[1])
        current = nxt
        if not current:
            return None
    for tp in current:
        for t in _unwrap(tp):
            if isinstance(t, type) and issubclass(t, BaseModel):
                return t
    return None


def allowed_keys(model: type[BaseModel]) -> list[str]:
    """The keys a mapping validated by ``model`` may have (aliases where set)."""
    return [f.alias or name for name, f in model.model_fields.items()]


def _required_keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items() if f.is_required()]


def _friendly(err: dict[str, Any], loc: Loc, model: type[BaseModel] | None) -> str:
    kind = err["type"]
    msg = err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        parent = _model_at(model, loc[:-1])
        if parent is None:
            allowed = err.get("ctx", {}).get("allowed")
            return f"unknown key {key!r}" + (f"; allowed keys: {allowed}" if allowed else "")
        keys = allowed_keys(parent)
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key {key!r}{hint} (allowed keys: {', '.join(keys)})"
    if kind == "missing":
        return f"missing required key {str(loc[-1]) if loc else '?'!r}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        sub = _model_at(model, loc)
        if sub is not None:
            return f"expected a mapping with keys {', '.join(allowed_keys(sub))}"
        return "expected a mapping (key: value pairs)"
    if kind == "finite_number":
        return "must be a finite number (.nan and .inf are not allowed)"
    if kind == "list_type":
        return "expected a list (e.g. [a, b] or lines starting with '- ')"
    return msg


def validation_message(
    exc: ValidationError, doc: YamlDoc, what: str = "", model: type[BaseModel] | None = None
) -> str:
    """One line per pydantic error: ``file:line: field.path: message (got value)``.

    Errors on the members of one union at one field are merged into one line.
    """
    merged: dict[Loc, list[tuple[str, str]]] = {}
    for err in exc.errors():
        ctx_err = err.get("ctx", {}).get("error")
        base = _clean_loc(doc.data, tuple(err["loc"]))
        if isinstance(ctx_err, LocatedError):
            for sub, msg in ctx_err.items:
                merged.setdefault(base + tuple(sub), []).append(("value_error", msg))
            continue
        merged.setdefault(base, []).append((err["type"], _friendly(err, base, model)))
    lines = []
    for loc, items in merged.items():
        kinds = {k for k, _ in items}
        msgs = list(dict.fromkeys(m for _, m in items))
        if len(msgs) > 1 and any(m.startswith("Input should be") for m in msgs):
            msgs = ["expected " + " or ".join(m.removeprefix("Input should be ") for m in msgs)]
        msg = "; ".join(msgs)
        found, value = _value_at(doc.data, loc)
        show = found and not kinds & {"extra_forbidden", "missing"}
        if show and isinstance(value, dict | list) and len(repr(value)) > 80:
            show = False
        if (
            show
            and isinstance(value, str)
            and (repr(value) in msg or (kinds == {"value_error"} and value in msg))
        ):
            show = False  # the message already quotes the value
        got = f" (got {_short(value)})" if show else ""
        lines.append(f"{doc.where(loc)}: {format_loc(loc)}: {msg}{got}")
    head = f"invalid {what}: " if what else ""
    return head + (lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines))


def require_mapping(doc: YamlDoc, what: str, model: type[BaseModel] | None = None) -> None:
    """The top level of an input file must be a mapping; say so clearly if it is not."""
    keys = f" ({', '.join(_required_keys(model))}, ...)" if model is not None else ""
    if doc.data is None:
        raise InputError(
            f"{doc.path}: the {what or 'file'} is empty; expected a mapping of keys{keys}"
        )
    if not isinstance(doc.data, dict):
        kind = {
            list: "a list",
            str: "a string",
            int: "a number",
            float: "a number",
            bool: "a boolean",
        }.get(type(doc.data), type(doc.data).__name__)
        raise InputError(
            f"{doc.where()}: the {what or 'file'} must be a mapping of keys{keys}, but its top level is {kind}"
        )


def validate(model: type[M], doc: YamlDoc, what: str = "") -> M:
    """Validate ``doc.data`` against ``model``; errors become one InputError with every problem.

    A shipped catalog validated into a frozen model is validated once per process and text
    (:data:`_SHIPPED_MODELS`): its models cannot change, so every caller can share them."""
    key = (model, str(doc.path), doc.shipped_text)
    if doc.shipped_text is not None and model.model_config.get("frozen"):
        if key not in _SHIPPED_MODELS:
            _SHIPPED_MODELS[key] = _validate(model, doc, what)
        return _SHIPPED_MODELS[key]  # type: ignore[return-value]
    return _validate(model, doc, what)


# (model, path, text) -> the shipped catalog's validated model; a dozen files, kept per process
_SHIPPED_MODELS: dict[tuple[type[BaseModel], str, str], BaseModel] = {}


def _validate(model: type[M], doc: YamlDoc, what: str) -> M:
    require_mapping(doc, what, model)
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise InputError(validation_message(exc, doc, what, model)) from None


def did_you_mean(name: str, known: Any) -> str:
    """Suggestion text for an unknown id.

    >>> did_you_mean("h100-sxn", ["h100-sxm", "a100-sxm-80gb"])
    "did you mean 'h100-sxm'?"
    >>> did_you_mean("x", [])
    'none are defined'
    """
    known = sorted(str(k) for k in known)
    if not known:
        return "none are defined"
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    if len(known) > 30:
        return f"known ({len(known)}): " + ", ".join(known[:30]) + ", ..."
    return "known: " + ", ".join(known)


def finite(value: float, name: str = "value") -> float:
    """Reject NaN and infinity (pydantic allows them in floats by default).

    >>> finite(1.5)
    1.5
    """
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"{name} must be a finite number")
    return value
