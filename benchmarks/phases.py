"""Where `planner solve` spends its time, phase by phase, on every shipped problem.

    python -m benchmarks.phases                          # every file in problems/, own limits
    python -m benchmarks.phases --problems lab_2026,2m_budget --time-limit 15
    python -m benchmarks.phases --markdown               # the table as benchmarks/README.md keeps it
    python -m benchmarks.phases --no-lp                  # skip the LP relaxation (its own solve)

Each problem runs in its own subprocess, as a user would run ``planner solve PROBLEM -o X.xlsx
--json X.json`` (the command's own code path, imports included), with the phase log of
:mod:`planner.base.phases` recording: start-up, load, candidates, model build, the solve's steps
(start, MILP, repair, exact model), idle purchases, extract, verify, workbook, JSON. Then, in
the same child, the model is built again to report its size as the solver gets it once every
rented replica is whole (the exact model): rows, columns, integer columns, nonzeros, and the
LP relaxation of that model (every integer relaxed) solved by HiGHS, whose gap to the plan
(``(plan - LP) / plan``) says how much of the plan's cost the LP cannot see: what branch and
bound must close to prove it. Columns:

| column | meaning |
|---|---|
| wall s | the subprocess's command, from its first import to the last file written |
| phases | seconds per phase (``solve:`` phases are the steps inside the solver's time) |
| status, gap | as the plan reports them, and the bound the gap is measured against |
| plan $ | the plan's present value |
| LP gap | ``(plan - LP relaxation) / plan`` on the exact model |
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The columns of the table, in the order a command runs them (a phase absent from a run is
# blank): what :mod:`planner.base.phases` names them, and the table's short heading.
PHASES = [
    ("start-up (imports)", "start-up"),
    ("load", "load"),
    ("candidates", "cands"),
    ("model build", "build"),
    ("solve: start (LP + rounded-fleet search)", "start"),
    ("solve: start (restricted spare)", "spare start"),
    ("solve: MILP (highs)", "MILP"),
    ("solve: MILP (cbc)", "MILP cbc"),
    ("solve: MILP (scip)", "MILP scip"),
    ("solve: repair (whole replicas)", "repair"),
    ("solve: exact model (proof / polish)", "exact"),
    ("solve: idle purchases", "idle"),
    ("extract plan", "extract"),
    ("verify", "verify"),
    ("buy margins", "margins"),
    ("write workbook", "xlsx"),
    ("write json", "json"),
]

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from planner.base.clock import mark_entry
mark_entry()
from planner.base.phases import recording
from planner.cli import cli
args, out = json.loads(sys.argv[1]), sys.argv[2]
code = 0
with recording() as log:
    try:
        cli.main(args=args, standalone_mode=False)
    except SystemExit as exc:
        code = exc.code or 0
    except Exception as exc:
        code = f"{type(exc).__name__}: {exc}"
wall = time.perf_counter() - t0
json.dump({"wall": wall, "code": code, "phases": log.entries}, open(out, "w"))
"""

_SIZE = r"""
import json, sys, tempfile, os
from planner.inputs.problem import load_problem
from planner.optimize.candidates import build_candidates
from planner.optimize.model import build_model
from planner.optimize.whole import exact_model
inputs = load_problem(sys.argv[1])
m = build_model(inputs, build_candidates(inputs))
out = {}
with exact_model(m):
    vs = m.prob.variables()
    out["rows"] = len(m.prob.constraints)
    out["cols"] = len(vs)
    out["integers"] = sum(1 for v in vs if v.cat == "Integer")
    out["nonzeros"] = sum(len(c) for c in m.prob.constraints.values())
if sys.argv[2] == "lp":
    import highspy
    fd, path = tempfile.mkstemp(suffix=".mps"); os.close(fd)
    m.prob.writeMPS(path)
    h = highspy.Highs(); h.setOptionValue("output_flag", False); h.readModel(path); os.unlink(path)
    lp = h.getLp(); n = lp.num_col_
    import numpy as np
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.zeros(n, dtype=np.uint8))
    h.setOptionValue("time_limit", 120.0)
    h.run()
    ok = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    out["lp"] = h.getInfo().objective_function_value + m.prob.objective.constant if ok else None
print(json.dumps(out))
"""


def run_problem(path: Path, limit: float | None, lp: bool, tmp: Path) -> dict:
    """One problem: the command with its phases, then the model's size and LP relaxation."""
    xlsx, js, log = tmp / f"{path.stem}.xlsx", tmp / f"{path.stem}.json", tmp / f"{path.stem}.log"
    args = ["solve", str(path), "-o", str(xlsx), "--json", str(js)]
    if limit is not None:
        args += ["--time-limit", str(limit)]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(args), str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    outer = time.perf_counter() - t0
    row: dict = {"problem": path.stem, "outer_wall": outer}
    if log.exists():
        row.update(json.loads(log.read_text()))
    if js.exists():
        plan = json.loads(js.read_text())
        row.update(status=plan["status"], gap=plan["gap"], objective=plan["objective_usd"])
    else:
        row["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    size = subprocess.run(
        [sys.executable, "-c", _SIZE, str(path), "lp" if lp else "no"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if size.returncode == 0:
        row.update(json.loads(size.stdout.strip().splitlines()[-1]))
    return row


def lp_gap(row: dict) -> float | None:
    """``(plan - LP) / plan``: the share of the plan's cost the LP relaxation does not see.

    >>> lp_gap({"objective": 100.0, "lp": 90.0})
    0.1
    >>> lp_gap({"objective": 100.0}) is None
    True
    """
    plan, lp = row.get("objective"), row.get("lp")
    if plan is None or lp is None or not plan:
        return None
    return round((plan - lp) / abs(plan), 6)


def fmt_row(row: dict) -> list[str]:
    """The table's cells for one problem."""
    totals: dict[str, float] = {}
    for name, s in row.get("phases", []):
        totals[name] = totals.get(name, 0.0) + s
    cells = [row["problem"], f"{row.get('wall', row['outer_wall']):.1f}"]
    cells += [f"{totals[n]:.2f}" if n in totals else "" for n, _ in PHASES]
    gap = row.get("gap")
    cells += [
        row.get("status", "error: " + " ".join(row.get("error", []))),
        "" if gap is None else f"{gap:.2%}",
        "" if row.get("objective") is None else f"{row['objective']:,.0f}",
        *(f"{row[k]:,}" if k in row else "" for k in ("rows", "cols", "integers", "nonzeros")),
        "" if lp_gap(row) is None else f"{lp_gap(row):.1%}",
    ]
    return cells


def heading() -> list[str]:
    return [
        "problem",
        "wall s",
        *(short for _, short in PHASES),
        "status",
        "gap",
        "plan $",
        "rows",
        "cols",
        "ints",
        "nonzeros",
        "LP gap",
    ]


def print_table(rows: list[dict], markdown: bool) -> None:
    head = heading()
    body = [fmt_row(r) for r in rows]
    # drop phase columns no problem ran (SCIP, CBC, margins by default)
    keep = [
        i for i, h in enumerate(head) if any(b[i] for b in body) or i < 2 or i >= 2 + len(PHASES)
    ]
    head = [head[i] for i in keep]
    body = [[b[i] for i in keep] for b in body]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" for _ in head) + "|")
        for b in body:
            print("| " + " | ".join(b) + " |")
        return
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for b in body:
        print("  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", help="comma-separated stems or paths (default: all of problems/)")
    ap.add_argument("--time-limit", type=float, help="--time-limit for every command")
    ap.add_argument("--no-lp", action="store_true", help="skip the LP relaxation")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write the raw rows here (one JSON object a line)")
    args = ap.parse_args(argv)
    if args.problems:
        paths = [
            Path(p) if p.endswith(".yaml") else ROOT / "problems" / f"{p}.yaml"
            for p in args.problems.split(",")
        ]
    else:
        paths = sorted((ROOT / "problems").glob("*.yaml"))
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for path in paths:
            row = run_problem(path.resolve(), args.time_limit, not args.no_lp, Path(d))
            rows.append(row)
            print(f"{path.stem}: {row.get('wall', row['outer_wall']):.1f} s", file=sys.stderr)
    print_table(rows, args.markdown)
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
