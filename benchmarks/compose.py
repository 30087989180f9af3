"""Many composed problems (issue 35): how each combination of features ends.

    python benchmarks/compose.py --n 2000 --seed 0              # 2000 problems, all cores
    python benchmarks/compose.py --n 200 --seed 7 --workers 1 --time-limit 10
    python benchmarks/compose.py --n 5000 --scheduler tcp://host:8786   # a Dask cluster

Problem ``i`` is :func:`benchmarks.composed.compose` drawn with ``RandomPick(seed * 1_000_003
+ i)``, so one problem can be drawn again alone (``--only I``). Each is solved as a user would
(``planner solve`` with ``--json`` and the workbook, then ``planner verify``), and must end with
exit 0 and a verified plan, or exit 3 with a diagnosis, within ``T x 1.1 + 5`` s (``T`` is
``--time-limit`` per scenario: a two-stage problem gets it once per scenario).

Prints the endings per feature (problems with that feature on), per number of features, and
every bad ending with its feature combination; bad problems are kept under ``--out``
(default ``outputs/compose/``), with the planner's message beside them. Exit 1 when any
ending is bad.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.composed import FEATURES, RandomPick, compose, solve_case, write_case  # noqa: E402

ENDINGS = ("ok", "infeasible", "bad")


def run_one(args: tuple[int, int, float, str]) -> tuple[int, str, str, float, str]:
    """Draw, write and solve problem ``i``; returns (i, features, label, seconds, kept path)."""
    i, seed, limit, out = args
    case = compose(RandomPick(seed * 1_000_003 + i), limit)
    folder = Path(tempfile.mkdtemp(prefix=f"compose{i}-"))
    try:
        path = write_case(case, folder, f"problem{i}")
        ending, _ = solve_case(path, case.time_limit)
        kept = ""
        if not ending.good:
            dest = Path(out) / f"problem{i}"
            shutil.copytree(folder, dest, dirs_exist_ok=True)
            (dest / "message.txt").write_text(f"{ending.label}\n{ending.message}")
            kept = str(dest)
        return i, case.key, ending.label, ending.seconds, kept
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _local(tasks: list[tuple[int, int, float, str]], workers: int) -> Iterable:
    if workers == 1:
        yield from map(run_one, tasks)
        return
    with ProcessPoolExecutor(workers) as pool:
        yield from pool.map(run_one, tasks, chunksize=4)


def _dask(tasks: list[tuple[int, int, float, str]], scheduler: str) -> Iterable:
    from dask.distributed import Client, as_completed

    with Client(scheduler, timeout="10s") as client:
        for future in as_completed(client.map(run_one, tasks, pure=False)):
            yield future.result()


def table(rows: list[tuple[int, str, str, float, str]]) -> str:
    """Endings per feature and per count of features, as text.

    >>> print(table([(0, "lead+spot", "ok", 1.0, ""), (1, "spot", "exit 4", 2.0, "x")]))
    feature              problems      ok  infeasible   bad   mean s
    spot                        2       1           0     1      1.5
    lead                        1       1           0     0      1.0
    <BLANKLINE>
    features on          problems      ok  infeasible   bad   mean s
    1                           1       0           0     1      2.0
    2                           1       1           0     0      1.0
    <BLANKLINE>
    all                         2       1           0     1      1.5
    """
    groups: dict[str, list[tuple[str, float]]] = defaultdict(list)
    counts: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for _, key, label, seconds, _ in rows:
        feats = [] if key == "(none)" else key.split("+")
        for f in feats:
            groups[f].append((label, seconds))
        counts[len(feats)].append((label, seconds))
    lines = [_head("feature")]
    lines += [_line(f, groups[f]) for f in FEATURES + ("saved",) if f in groups]
    lines += ["", _head("features on")]
    lines += [_line(str(n), counts[n]) for n in sorted(counts)]
    lines += ["", _line("all", [(label, s) for _, _, label, s, _ in rows])]
    return "\n".join(lines)


def _head(first: str) -> str:
    return f"{first:<20}{'problems':>9}{'ok':>8}{'infeasible':>12}{'bad':>6}{'mean s':>9}"


def _line(name: str, items: list[tuple[str, float]]) -> str:
    c = Counter("bad" if label not in ENDINGS[:2] else label for label, _ in items)
    mean = sum(s for _, s in items) / max(1, len(items))
    return f"{name:<20}{len(items):>9}{c['ok']:>8}{c['infeasible']:>12}{c['bad']:>6}{mean:>9.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="problems to draw")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=10.0, help="per problem, seconds")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--scheduler", help="a Dask scheduler's address (else local processes)")
    ap.add_argument("--only", type=int, help="draw and solve problem I alone")
    ap.add_argument("--out", default=str(HERE.parent / "outputs" / "compose"))
    a = ap.parse_args(argv)
    ids = [a.only] if a.only is not None else list(range(a.n))
    tasks = [(i, a.seed, a.time_limit, a.out) for i in ids]
    t0 = time.perf_counter()
    runs = _dask(tasks, a.scheduler) if a.scheduler else _local(tasks, a.workers)
    rows = []
    for row in runs:
        rows.append(row)
        if row[2] not in ENDINGS[:2]:
            print(f"problem {row[0]}: {row[2]} [{row[1]}] kept in {row[4]}", flush=True)
        elif len(rows) % 100 == 0:
            print(f"... {len(rows)} of {len(tasks)}", flush=True)
    print(f"\n{len(rows)} problems, seed {a.seed}, {a.time_limit:g} s each, "
          f"{time.perf_counter() - t0:.0f} s\n")  # fmt: skip
    print(table(rows))
    bad = [r for r in rows if r[2] not in ENDINGS[:2]]
    print(f"\nbad endings: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
