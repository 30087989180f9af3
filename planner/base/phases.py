"""Where a command's time goes: named phases timed into the log of whoever is recording.

The stages (loading, candidates, model, solve and its steps, verification, writing) each wrap
their work in :func:`phase`; nothing is recorded unless a caller opened :func:`recording`
(the phase benchmark, ``benchmarks/phases.py``, and ``planner solve --timings``). A context
variable, not an argument, carries the log, so no stage's signature changes for a measurement.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class PhaseLog:
    """Phases in the order they ended: ``(name, seconds)``; a name may repeat (two solves)."""

    entries: list[tuple[str, float]] = field(default_factory=list)

    def add(self, name: str, seconds: float) -> None:
        self.entries.append((name, seconds))

    def totals(self) -> dict[str, float]:
        """Seconds per phase name, summed over repeats, in first-seen order.

        >>> log = PhaseLog(); log.add("solve", 1.0); log.add("load", 0.5); log.add("solve", 2.0)
        >>> log.totals()
        {'solve': 3.0, 'load': 0.5}
        """
        out: dict[str, float] = {}
        for name, s in self.entries:
            out[name] = out.get(name, 0.0) + s
        return out


_log: ContextVar[PhaseLog | None] = ContextVar("planner_phase_log", default=None)


@contextlib.contextmanager
def recording() -> Iterator[PhaseLog]:
    """Record every :func:`phase` that ends inside the block into the log yielded; a
    recording inside another (``planner solve --timings`` run by the phase benchmark) hands
    its phases on to the outer one as well when it ends.

    >>> with recording() as outer:
    ...     with recording() as inner:
    ...         with phase("load"):
    ...             pass
    >>> [n for n, _ in inner.entries], [n for n, _ in outer.entries]
    (['load'], ['load'])
    """
    log = PhaseLog()
    outer = _log.get()
    token = _log.set(log)
    try:
        yield log
    finally:
        _log.reset(token)
        if outer is not None:
            outer.entries.extend(log.entries)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` (seconds of wall clock) if anyone is recording; the
    phase is logged even when the block raises, so an interrupted solve still shows.

    >>> with recording() as log:
    ...     with phase("load"):
    ...         pass
    >>> [name for name, _ in log.entries]
    ['load']
    >>> with phase("nobody listens"):   # no recording: nothing happens
    ...     pass
    """
    log = _log.get()
    if log is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        log.add(name, time.perf_counter() - t0)


def phase_since(name: str, t0: float) -> None:
    """Log phase ``name`` as the wall time since ``t0`` (a ``perf_counter`` instant), for a
    phase that began before anyone could open a block (the imports before a command's body).

    >>> import time
    >>> with recording() as log:
    ...     phase_since("start-up", time.perf_counter() - 1.0)
    >>> round(log.entries[0][1])
    1
    """
    log = _log.get()
    if log is not None:
        log.add(name, time.perf_counter() - t0)
