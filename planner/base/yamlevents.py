"""Large data files (measured profiles) read in seconds: YAML built from libyaml's events.

The checked reader of :mod:`planner.base.yamlio` composes a node tree in pure Python (about a
megabyte a second, and a node object with two marks per value), so a 13 MB profiles file of
100,000 entries took minutes and a gigabyte. libyaml's composer is fast but recursive in C (a
hostile file nested thousands deep crashes the process), so only its *event* parser, which
keeps its own stack and never recurses, is used here: the data is built from the events in
one loop with the nesting depth checked as it goes, and no node tree is kept.

Anything beyond plain data (anchors, aliases, explicit tags, merge keys, complex keys, several
documents) falls back to the checked reader, whose rules and messages then apply unchanged.
Line numbers are not indexed up front: :func:`locate` finds the lines of the fields an error
names with one more pass over the events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from planner.base.errors import InputError
from planner.base.files import read_text
from planner.base.yamlio import MAX_DEPTH, Loc, YamlDoc, parse_yaml_text

_CParser: type | None = getattr(yaml, "CSafeLoader", None)
_RESOLVERS = {  # YAML 1.1 implicit types, timestamps kept as text (as the checked reader does)
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_STR, _MERGE = "tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"
_CONSTRUCT = yaml.SafeLoader("")  # its scalar constructors only (int, float, bool, null)
_BUILD = {
    "tag:yaml.org,2002:int": _CONSTRUCT.construct_yaml_int,
    "tag:yaml.org,2002:float": _CONSTRUCT.construct_yaml_float,
    "tag:yaml.org,2002:bool": _CONSTRUCT.construct_yaml_bool,
    "tag:yaml.org,2002:null": _CONSTRUCT.construct_yaml_null,
}


_NO_KEY = object()  # a mapping waiting for its next key


class _NotPlain(Exception):
    """The document uses YAML beyond plain data: read it with the checked reader."""


class EventDoc(YamlDoc):
    """A :class:`YamlDoc` whose lines are found on demand (:func:`locate`)."""

    def __init__(self, data: Any, path: Path, text: str) -> None:
        super().__init__(data, {}, path)
        self.text = text


def _events(text: str):
    loader = _CParser(text)  # type: ignore[misc]
    try:
        while True:
            ev = loader.get_event()
            yield ev
            if isinstance(ev, yaml.StreamEndEvent):
                return
    finally:
        loader.dispose()


def _scalar(ev: yaml.ScalarEvent, cache: dict[str, Any]) -> Any:
    if ev.tag is not None and ev.tag != "!":
        raise _NotPlain
    value = ev.value
    if not ev.implicit[0]:  # quoted: text
        return value
    try:
        return cache[value]
    except KeyError:
        pass
    tag = _STR
    for t, rx in _RESOLVERS.get(value[:1], []) + _RESOLVERS.get(None, []):
        if rx.match(value):
            tag = t
            break
    if tag == _MERGE:
        raise _NotPlain
    out = value if tag == _STR else _BUILD[tag](yaml.ScalarNode(tag, value))
    if len(cache) < 100_000:
        cache[value] = out
    return out


def _build(text: str, path: Path) -> Any:
    """The document's data, from events; ``_NotPlain`` for anything but plain data."""
    stack: list[list] = []  # [container, pending key or _NO_KEY, line of each key]
    cache: dict[str, Any] = {}
    root: Any = None
    documents = 0
    for ev in _events(text):
        kind = type(ev)
        if kind is yaml.ScalarEvent:
            if ev.anchor is not None:
                raise _NotPlain
            value: Any = _scalar(ev, cache)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if ev.anchor is not None or ev.tag not in (None, "!"):
                raise _NotPlain
            if len(stack) >= MAX_DEPTH - 1:
                raise InputError(
                    f"{path}:{ev.start_mark.line + 1}: nested more than {MAX_DEPTH} levels "
                    "deep; not a planner file"
                )
            stack.append([{} if kind is yaml.MappingStartEvent else [], _NO_KEY, {}])
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            value = stack.pop()[0]
        elif kind is yaml.DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise _NotPlain
            continue
        elif kind is yaml.AliasEvent:
            raise _NotPlain
        else:  # stream start and end, document end
            continue
        if not stack:
            root = value
            continue
        top = stack[-1]
        box = top[0]
        if type(box) is list:
            box.append(value)
        elif top[1] is _NO_KEY:
            if isinstance(value, dict | list):
                raise _NotPlain  # a complex key
            line = ev.start_mark.line + 1
            if value in box:
                raise InputError(
                    f"{path}:{line}: key {value!r} appears twice (first at line "
                    f"{top[2][value]}); YAML would silently keep only the last one"
                )
            top[1], top[2][value] = value, line
        else:
            box[top[1]] = value
            top[1] = _NO_KEY
    return root


def load_plain_yaml(path: str | Path, what: str = "file") -> YamlDoc:
    """Read a large YAML data file fast; the same data, limits and errors as
    :func:`planner.base.yamlio.load_yaml` (whose checked reader takes over for YAML beyond
    plain data). Lines of the returned document are found with :func:`locate`."""
    p = Path(path)
    text = read_text(p, what)
    if _CParser is None:  # PyYAML without libyaml
        return parse_yaml_text(text, p)
    try:
        return EventDoc(_build(text, p), p, text)
    except _NotPlain:
        return parse_yaml_text(text, p)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark else str(p)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: YAML syntax error: {problem}".replace("\n", " ")) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a scalar the constructors refuse
        raise InputError(f"{p}: YAML value error: {exc}") from None


def locate(doc: YamlDoc, locs: list[Loc]) -> None:
    """Fill ``doc.lines`` for every prefix of ``locs`` (an :class:`EventDoc` indexes no lines
    up front; a checked document has them all). One pass over the events."""
    if not isinstance(doc, EventDoc) or not locs:
        return
    wanted = {tuple(loc[:i]) for loc in locs for i in range(len(loc) + 1)}
    path: list[Any] = []
    stack: list[list] = []  # [is_mapping, next index or pending key]
    for ev in _events(doc.text):
        kind = type(ev)
        line = ev.start_mark.line + 1
        if kind in (yaml.MappingEndEvent, yaml.SequenceEndEvent):
            stack.pop()
            if path and stack:
                path.pop()
            continue
        if kind not in (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent):
            continue
        if stack and stack[-1][0] and stack[-1][1] is _NO_KEY:  # a mapping key
            key = _scalar(ev, {}) if kind is yaml.ScalarEvent else None
            stack[-1][1] = key
            loc = (*path, key)
            if loc in wanted:
                doc.lines.setdefault(loc, line)
            continue
        if stack:
            top = stack[-1]
            part = top[1]
            if top[0]:
                top[1] = _NO_KEY
            else:
                top[1] += 1
            path.append(part)
        loc = tuple(path)
        if loc in wanted:
            doc.lines.setdefault(loc, line)
        if kind is yaml.ScalarEvent:
            if stack:
                path.pop()
        else:
            stack.append(
                [kind is yaml.MappingStartEvent, _NO_KEY if kind is yaml.MappingStartEvent else 0]
            )
