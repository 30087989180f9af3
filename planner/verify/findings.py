"""Findings, and the checker each family records its checks with."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from planner.base import tolerances

REL = tolerances.REL  # relative, on money, hours and demand (planner.base.tolerances)
ABS = tolerances.HOURS


def close(a: float, b: float, rel: float = 1e-6, abs_: float = 0.01) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def bad_number(x: float) -> bool:
    return not isinstance(x, int | float) or not math.isfinite(x) or x < 0


@dataclass(frozen=True)
class Finding:
    """One violation: the family of checks that found it and the message shown to users."""

    family: str
    message: str


class Findings(list[Finding]):
    """The findings of one family, and how many individual checks the family made."""

    def __init__(self, items: Iterable[Finding] = (), checks: int = 0) -> None:
        super().__init__(items)
        self.checks = checks


class Checker:
    """Counts the checks of one family and keeps the failures.

    Checks given a ``group`` report the first failure of the group once, with a count of
    the others (a stale rate repeats in every month and slice).
    """

    def __init__(self, family: str, months: Sequence[str]) -> None:
        self.family = family
        self.checks = 0
        self._months = list(months)
        self._index = {m: i for i, m in enumerate(self._months)}
        self._messages: list[str] = []
        self._groups: dict[Hashable, list[int]] = {}  # group -> [index in messages, repeats]

    def check(self, ok: bool, msg: str, group: Hashable = None) -> bool:
        self.checks += 1
        if not ok:
            if group is None:
                self._messages.append(msg)
            elif group in self._groups:
                self._groups[group][1] += 1
            else:
                self._groups[group] = [len(self._messages), 0]
                self._messages.append(msg)
        return ok

    def month(self, label: str, what: str) -> int | None:
        """The index of ``label`` in the horizon; a failed check when it is not in it."""
        t = self._index.get(label)
        self.check(
            t is not None,
            f"{what}: month {label!r} is not in the horizon {self._months[0]}..{self._months[-1]}",
        )
        return t

    def findings(self) -> Findings:
        out = list(self._messages)
        for i, more in self._groups.values():
            if more:
                out[i] += f" (and {more} more like it)"
        return Findings((Finding(self.family, m) for m in out), checks=self.checks)
