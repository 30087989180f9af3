"""Break-even search: the value of one KEY in an interval at which the plan changes
(the set of GPU types bought, or the count of one type), found by a scan of evenly
spaced solves and then bisection of the first interval whose ends differ, with the
sentence that reports it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from planner.analysis.sweep import Progress, ScenarioResult, Task, run_tasks
from planner.base.errors import InputError
from planner.base.yamlio import did_you_mean
from planner.inputs.keys import (
    MAX_MAGNITUDE,
    Base,
    Loc,
    load_base,
    parse_bounds,
    resolve_key,
)

MAX_SCAN = 200  # evenly spaced solves before bisecting
MAX_BISECT_STEPS = 60  # solves of the bisection; the tol floor keeps it to at most 30
TOL_REL_FLOOR = 1e-9  # the smallest --tol, as a share of HI - LO ...
TOL_ABS_FLOOR = 1e-12  # ... and in absolute terms (the larger of the two applies)


def tol_floor(lo: float, hi: float) -> float:
    """The smallest bracket width a search over [lo, hi] may ask for: the larger of
    (hi - lo) x 1e-9, 1e-12 and 16 float steps at the larger bound (below that the midpoint
    of two floats is one of them).

    >>> [f"{tol_floor(lo, hi):.3g}" for lo, hi in ((0.1, 1.0), (0.0, 1e-6), (1e15, 2e15))]
    ['9e-10', '1e-12', '1e+06']
    """
    return max((hi - lo) * TOL_REL_FLOOR, TOL_ABS_FLOOR, 16 * math.ulp(max(abs(lo), abs(hi))))


def check_bounds(key: str, lo: Any, hi: Any) -> tuple[float, float]:
    """The interval of a search given as numbers (the Python API): finite, not booleans,
    within the limits of a vary, LO below HI."""
    for name, x in (("LO", lo), ("HI", hi)):
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise InputError(f"--vary {key}: {name} {x!r} is not a number")
        if not math.isfinite(x) or abs(x) > MAX_MAGNITUDE:
            raise InputError(
                f"--vary {key}: {name} {x!r} is out of range; at most {MAX_MAGNITUDE:.0e} in magnitude"
            )
    if not lo < hi:
        raise InputError(f"--vary {key}: LO must be below HI, got {lo:g}:{hi:g}")
    return float(lo), float(hi)


def resolve_tol(lo: float, hi: float, tol: Any) -> float:
    """``--tol``: default (hi - lo) / 200; else finite, from :func:`tol_floor` to hi - lo."""
    floor = tol_floor(lo, hi)
    if tol is None:
        return max((hi - lo) / 200, floor)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not math.isfinite(tol):
        raise InputError(f"--tol {tol!r}: expected a finite number")
    top = max(hi - lo, floor)
    if not floor <= tol <= top:
        raise InputError(
            f"--tol {tol:g} is out of range for {lo:g}..{hi:g}: from {floor:.3g} (the larger of "
            f"(HI-LO) x {TOL_REL_FLOOR:g} and {TOL_ABS_FLOOR:g}) to {top:.6g} (HI-LO)"
        )
    return float(tol)


#: ``--watch commitments``: the commitments signed (reserved offers and GPUs under each), the
#: default when the KEY is the price of a reserved offer (``overrides.offers.<id>...``).
COMMITMENTS = "commitments"


def _signature(r: ScenarioResult, watch: str | None) -> Any:
    if not r.ok:
        return ("no plan", r.status)
    if watch is None:
        return tuple(sorted(r.bought))
    if watch == COMMITMENTS:
        return tuple(sorted(r.reserved.items()))
    return r.bought.get(watch, 0)


def parse_watch(text: str | None, base: Base | None = None) -> str | None:
    """``--watch gpu=h100-sxm`` -> ``"h100-sxm"``; None/``gpus`` -> the set of types bought;
    ``commitments`` -> :data:`COMMITMENTS` (the reserved offers signed and their GPUs)."""
    if text is None or text.strip() in ("", "gpus", "types"):
        return None
    if text.strip() in (COMMITMENTS, "reserved", "gpu=" + COMMITMENTS):
        return COMMITMENTS
    key, sep, val = text.partition("=")
    if key.strip() != "gpu" or not sep or not val.strip():
        raise InputError(
            f"--watch {text!r}: expected gpu=<id> (the count of one GPU type bought), "
            "commitments (the reserved offers signed) or nothing (the set of GPU types bought)"
        )
    gpu = val.strip()
    if (
        base is not None
        and isinstance(base.data.get("gpus"), list)
        and gpu not in base.data["gpus"]
    ):
        raise InputError(
            f"--watch {text!r}: {gpu!r} is not in the problem's gpus; "
            + did_you_mean(gpu, [str(g) for g in base.data["gpus"]])
        )
    return gpu


@dataclass
class BreakEven:
    key: str
    lo: float
    hi: float
    watch: str | None
    changed: bool
    value: float | None  # the change point (middle of the final bracket)
    bracket: tuple[float, float] | None  # (last value with the 'below' plan, first with 'above')
    below: ScenarioResult  # the plan just below the change (at lo when nothing changes)
    above: ScenarioResult  # the plan just above the change (at hi when nothing changes)
    sentence: str
    solves: int
    other_changes: list[tuple[float, float]] = field(
        default_factory=list
    )  # further brackets seen in the scan
    tol: float = 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["below"] = self.below.to_json() | {"bought": self.below.bought}
        d["above"] = self.above.to_json() | {"bought": self.above.bought}
        return d


def _fmt_val(x: float, tol: float) -> str:
    """``x`` with as many decimals as the tolerance resolves.

    >>> _fmt_val(0.28457, 0.0045), _fmt_val(1.5, 0.01), _fmt_val(1234.5, 10)
    ('0.285', '1.5', '1234')
    """
    digits = max(0, -math.floor(math.log10(tol))) if tol > 0 else 3
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _commits(r: ScenarioResult) -> str:
    """What a plan signs: "commits to 16 GPUs of nebius-b200-36m" or "signs no commitment"."""
    if not r.ok:
        return f"has no plan ({r.status})"
    if not r.reserved:
        return "signs no commitment"
    return "commits to " + " and ".join(f"{n} GPUs of {o}" for o, n in r.reserved.items())


def reserved_offer_key(base: Base, key: str) -> str | None:
    """The id of the offer whose price ``key`` varies when that offer is reserved (a
    commitment's price): ``overrides.offers.<id>.usd_per_gpu_hour`` or an inline
    ``offers.extra`` entry of kind reserved; else None."""
    parts = key.split(".")
    if len(parts) == 4 and parts[:2] == ["overrides", "offers"] and parts[3] == "usd_per_gpu_hour":
        oid = parts[2]
        try:
            from planner.inputs.problem import load_problem

            inputs = load_problem(base.path)
        except Exception:  # an invalid problem is reported by the solves themselves
            return None
        o = inputs.offers.get(oid)
        return oid if o is not None and o.kind == "reserved" else None
    return None


def _buys(r: ScenarioResult, watch: str | None) -> str:
    if not r.ok:
        return f"has no plan ({r.status})"
    if watch == COMMITMENTS:
        return _commits(r)
    items = {watch: r.bought.get(watch, 0)} if watch else r.bought
    items = {g: n for g, n in items.items() if n}
    if not items:
        return f"buys no {watch}" if watch else "buys no GPUs"
    return "buys " + " and ".join(f"{n} {g}" for g, n in items.items())


def _describe_other(r: ScenarioResult, other: ScenarioResult, watch: str | None) -> str:
    """What ``r`` does instead of what ``other`` buys ("rents them", "buys 2 a100...")."""
    if not r.ok:
        return f"there is no plan ({r.status}: {r.message.splitlines()[0] if r.message else ''})"
    if watch == COMMITMENTS:
        return "it " + _commits(r)
    types = [watch] if watch else list(other.bought)
    mine = {g: n for g, n in r.bought.items() if (g in types if watch else True) and n}
    rented = {g for g, h in r.rented_gpu_hours.items() if h > 1e-6}
    if not mine:
        if types and set(types) <= rented:
            return (
                "it rents them"
                if len(types) > 1 or other.bought.get(types[0], 0) > 1
                else "it rents it"
            )
        if rented:
            return "it buys none and rents " + ", ".join(sorted(rented))
        return "it buys none"
    return "it " + _buys(r, watch)


@dataclass
class _Solves:
    """Solves the problem at values of one KEY, counting the solves for the report.

    Like a what-if row, each probe keeps the cheaper of its own plan and the base problem's
    purchases re-planned there (:func:`planner.analysis.improve.keep_best`): the base problem
    is solved with the first probes, and the re-plans (a quarter of the time limit each) are
    not counted as solves."""

    base: Base
    key: str
    locs: list[Loc]
    solver: str
    time_limit: float | None
    gap: float | None
    workers: int | None
    progress: Progress | None
    count: int = 0
    base_result: ScenarioResult | None = None

    def __call__(self, xs: Sequence[float]) -> list[ScenarioResult]:
        """One result per value of ``xs``, in order."""
        tasks = [
            Task(
                i,
                self.base,
                {self.key: x},
                [(loc, x) for loc in self.locs],
                self.solver,
                self.time_limit,
                self.gap,
            )
            for i, x in enumerate(xs)
        ]
        self.count += len(tasks)
        first = self.base_result is None
        if first:  # the problem as written, whose purchases every probe re-plans
            tasks.append(
                Task(len(tasks), self.base, {}, [], self.solver, self.time_limit, self.gap)
            )
        out = run_tasks(tasks, self.workers, None, self.progress)
        if first:
            tasks.pop()
            self.base_result = out.pop()
        return self._with_base(tasks, out)

    def _with_base(self, tasks: list[Task], out: list[ScenarioResult]) -> list[ScenarioResult]:
        """Each probe's result, or the base purchases re-planned there where cheaper."""
        from planner.analysis.improve import keep_best

        b = self.base_result
        if b is None or not b.ok or b.fleet is None:
            return out
        worth = [i for i, r in enumerate(out) if r.status not in ("invalid", "infeasible")]
        extra = [
            dataclasses.replace(tasks[i], index=len(tasks) + i, replan=("base", b.fleet))
            for i in worth
        ]
        done = dict(zip(worth, run_tasks(extra, self.workers, None, None), strict=True))
        return [keep_best(r, [done[i]] if i in done else [], b) for i, r in enumerate(out)]


def _tidy(x: float, scale: float) -> float:
    """``x`` to 12 significant digits of ``scale`` (the interval's largest magnitude): float
    noise is dropped from values shown in reports and JSON (0.5, not 0.49999999999999994;
    0, not 6.9e-18 in an interval ending at 0.05).

    >>> _tidy(0.49999999999999994, 0.9), _tidy(6.938893903907228e-18, 0.05), _tidy(1e-9, 1e-6)
    (0.5, 0.0, 1e-09)
    """
    if not math.isfinite(x) or scale <= 0:
        return x
    digits = 12 - math.floor(math.log10(scale))
    return float(f"{round(x, digits):.12g}") if abs(x) >= 10.0**-digits else 0.0


def _scan_values(lo: float, hi: float, scan: int) -> list[float]:
    """``scan`` evenly spaced values from lo to hi, ends included.

    >>> _scan_values(0.2, 0.9, 8)
    [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    >>> _scan_values(-0.15, 0.05, 5)
    [-0.15, -0.1, -0.05, 0.0, 0.05]
    """
    scale = max(abs(lo), abs(hi))
    return [_tidy(lo + (hi - lo) * i / (scan - 1), scale) for i in range(scan)]


def _require_valid(key: str, xs: Sequence[float], points: Sequence[ScenarioResult]) -> None:
    """An invalid scan point is a bad interval, not a plan change: stop with its message."""
    for x, r in zip(xs, points, strict=True):
        if r.status == "invalid":
            raise InputError(f"breakeven: {key}={x:g} is not a valid problem: {r.message}")


def _types_unchanged(points: Sequence[ScenarioResult], tried: str) -> str:
    """Why the set of GPU types bought did not change, hinting at --watch when counts did."""
    types = ", ".join(points[0].bought) if points[0].ok else ""
    what = (
        "the set of GPU types bought stays the same ("
        + (f"it buys {types}" if types else f"it {_buys(points[0], None)}")
        + f" {tried}"
    )
    counts = {g: sorted({r.bought.get(g, 0) for r in points}) for g in points[0].bought}
    moved = [f"{g} from {c[0]} to {c[-1]}" for g, c in counts.items() if len(c) > 1]
    if moved:
        what += f"; the counts change: {', '.join(moved)}: try --watch gpu=<id>"
    return what + ")"


def _unchanged_sentence(
    key: str, lo: float, hi: float, watch: str | None, points: Sequence[ScenarioResult]
) -> str:
    """The report when every scanned value gives the same signature."""
    tried = f"at every one of the {len(points)} values tried"
    if watch == COMMITMENTS:
        what = f"the commitments signed stay the same (it {_commits(points[0])} {tried})"
    elif watch:
        what = f"the number of {watch} bought stays the same (it {_buys(points[0], watch)} {tried})"
    else:
        what = _types_unchanged(points, tried)
    return f"the plan does not change over {key} {lo:g}..{hi:g}: {what}"


def _bisect(
    solve: _Solves,
    watch: str | None,
    tol: float,
    a: float,
    b: float,
    ra: ScenarioResult,
    rb: ScenarioResult,
) -> tuple[float, float, ScenarioResult, ScenarioResult]:
    """Narrow ``[a, b]`` (plans ``ra`` != ``rb``) to a bracket no wider than ``tol``, in at
    most :data:`MAX_BISECT_STEPS` solves, stopping where floats cannot split the bracket."""
    sa, sb = _signature(ra, watch), _signature(rb, watch)
    scale = max(abs(a), abs(b))
    for _ in range(MAX_BISECT_STEPS):
        m = _tidy((a + b) / 2, scale)
        if b - a <= tol or not a < m < b:
            break
        (rm,) = solve([m])
        sm = _signature(rm, watch)
        if sm == sa:
            a, ra = m, rm
        elif sm == sb:
            b, rb = m, rm
        else:  # a third plan in between: keep the lower change
            b, rb, sb = m, rm, sm
    return a, b, ra, rb


def _change_sentence(
    key: str, xt: str, ra: ScenarioResult, rb: ScenarioResult, watch: str | None
) -> str:
    """The report of a change at ``xt`` between plan ``ra`` (below) and ``rb`` (above).

    It leads with the side that buys: "above X the plan buys ...", unless the plan above
    has no plan or buys nothing where the one below buys.
    """
    if watch == COMMITMENTS:
        return (
            f"below {key} {xt} the plan {_commits(ra)}; above it {_commits(rb).removeprefix('it ')}"
        )
    if not rb.ok or (not rb.bought and ra.bought):
        return f"below {key} {xt} the plan {_buys(ra, watch)}; above it {_describe_other(rb, ra, watch).removeprefix('it ')}"
    return f"above {key} {xt} the plan {_buys(rb, watch)}; below it {_describe_other(ra, rb, watch).removeprefix('it ')}"


def breakeven(
    base: Base | str | Path,
    vary: str | tuple[str, float, float],
    watch: str | None = None,
    tol: float | None = None,
    scan: int = 5,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
    workers: int | None = 1,
    progress: Progress | None = None,
) -> BreakEven:
    """Find the value of one KEY in [lo, hi] at which the plan changes, by bisection on solves.

    The plan's *signature* is the set of GPU types bought (or, with ``watch="<gpu>"``, the
    count of that type bought; with ``watch="commitments"``, the reserved offers signed and
    the GPUs under each, the default when KEY is a reserved offer's price,
    ``overrides.offers.<id>.usd_per_gpu_hour``). ``scan`` evenly spaced values (ends included) are solved
    first; the first interval whose ends differ is bisected until it is narrower than
    ``tol`` (default (hi - lo) / 200, at least :func:`tol_floor`), in at most
    :data:`MAX_BISECT_STEPS` solves (at most 30 with the floor). So the search makes at
    most ``scan`` + 30 solves, each within the time limit, and takes at most about
    ceil(scan / workers) + 30 time limits. Other changing intervals of the scan are reported
    in ``other_changes``. If every scanned value gives the same signature the plan is
    taken as unchanged over [lo, hi] (a change that reverts between scan points is missed).
    """
    if not isinstance(base, Base):
        base = load_base(base)
    if isinstance(vary, str):
        key, lo, hi = parse_bounds(vary)
    else:
        key, lo, hi = vary
        lo, hi = check_bounds(key, lo, hi)
    watch = parse_watch(watch if watch is None or "=" in watch else f"gpu={watch}", base)
    if watch is None and reserved_offer_key(base, key) is not None:
        watch = COMMITMENTS  # a commitment's price: does the plan still sign it?
    tol = resolve_tol(lo, hi, tol)
    if isinstance(scan, bool) or not isinstance(scan, int) or not 2 <= scan <= MAX_SCAN:
        raise InputError(f"--scan {scan!r}: expected a whole number from 2 to {MAX_SCAN}")
    locs = resolve_key(base.data, key)
    solve = _Solves(base, key, locs, solver, time_limit, gap, workers, progress)
    xs = _scan_values(lo, hi, scan)
    points = solve(xs)
    _require_valid(key, xs, points)
    sigs = [_signature(r, watch) for r in points]
    changes = [i for i in range(len(xs) - 1) if sigs[i] != sigs[i + 1]]
    if not changes:
        sentence = _unchanged_sentence(key, lo, hi, watch, points)
        return BreakEven(
            key, lo, hi, watch, False, None, None, points[0], points[-1], sentence, solve.count,
            [], tol,
        )  # fmt: skip
    i = changes[0]
    a, b, ra, rb = _bisect(solve, watch, tol, xs[i], xs[i + 1], points[i], points[i + 1])
    x = _tidy((a + b) / 2, max(abs(lo), abs(hi)))
    sentence = _change_sentence(key, _fmt_val(x, tol), ra, rb, watch)
    others = [(xs[j], xs[j + 1]) for j in changes[1:]]
    return BreakEven(
        key, lo, hi, watch, True, x, (a, b), ra, rb, sentence, solve.count, others, tol
    )
