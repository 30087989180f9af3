"""``planner report`` on a large plan: wall time and peak memory of the whole command.

    python benchmarks/report_large_plan.py                 # a 45 MB plan (the reference x ~250)
    python benchmarks/report_large_plan.py --mb 10 --mb 45

The plan is the saved reference plan (``tests/fixtures/nominal/2m_budget.json``) with its row
lists (rentals, serving and training allocations, fleet months, assumptions) repeated until
the JSON is about ``--mb`` megabytes: a plan of that size with the reference's mix of rows
(45 MB: ~16,000 rentals and fleet months, ~61,000 serving allocations and ~29,000
assumptions, a workbook of ~600,000 cells). Each size runs ``planner report PLAN.json -o
PLAN.xlsx`` in a subprocess, as a user would: reading and checking the plan, building the
workbook, computing every formula's value and saving. Columns: plan MB, rows, wall s, peak
memory of the child (MB), workbook MB. Exits 1 if a report failed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "nominal" / "2m_budget.json"
ENTRY = "import sys; from planner.__main__ import main; sys.argv[0] = 'planner'; main()"
LISTS = ("rentals", "serve_allocations", "train_allocations", "fleet", "assumptions")


def large_plan(mb: float) -> tuple[str, int]:
    """The reference plan with its row lists repeated to about ``mb`` MB; (JSON, rows)."""
    data = json.loads(SOURCE.read_text())
    base = len(json.dumps(data))
    per_copy = sum(len(json.dumps(data[k])) for k in LISTS)
    times = max(1, round((mb * 1e6 - base) / per_copy) + 1)
    for k in LISTS:
        data[k] = data[k] * times
    return json.dumps(data), sum(len(data[k]) for k in LISTS)


def run(mb: float, tmp: Path) -> tuple[bool, str]:
    text, rows = large_plan(mb)
    plan = tmp / f"plan_{mb:g}mb.json"
    plan.write_text(text)
    out = plan.with_suffix(".xlsx")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY, "report", str(plan), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    peak_mb = (peak if peak > before else before) / 1024  # ru_maxrss is in KB on Linux
    ok = proc.returncode == 0
    size = out.stat().st_size / 1e6 if out.exists() else 0.0
    line = f"{len(text) / 1e6:8.1f} {rows:9,d} {wall:8.1f} {peak_mb:9.0f} {size:8.1f}" + (
        "" if ok else f"  FAILED (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    )
    return ok, line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, action="append", help="plan sizes in MB (default 45)")
    args = ap.parse_args()
    sizes = args.mb or [45.0]
    print(f"{'plan MB':>8} {'rows':>9} {'wall s':>8} {'peak MB':>9} {'xlsx MB':>8}")
    failed = False
    with tempfile.TemporaryDirectory() as d:
        for mb in sizes:
            ok, line = run(mb, Path(d))
            print(line, flush=True)
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
