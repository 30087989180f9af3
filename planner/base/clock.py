"""When the command started: a time limit bounds the whole command, the libraries' import
included (~1.3 s of `planner solve`), not only what follows the command's first line."""

from __future__ import annotations

import time

_entry: float | None = None


def mark_entry() -> None:
    """Called first thing by the console script (:func:`planner.__main__.main`)."""
    global _entry
    _entry = time.perf_counter()


def command_start() -> float:
    """The ``perf_counter`` instant the command's time limit counts from: the console script's
    entry, taken once (a later call in the same process, e.g. the tests' in-process runs,
    counts from its own call), else now.

    >>> mark_entry(); first = command_start(); command_start() >= first
    True
    """
    global _entry
    start, _entry = _entry, None
    return time.perf_counter() if start is None else start
