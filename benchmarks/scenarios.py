"""Two-stage benchmark (issue 28): the reference with 1, 3 and 10 demand scenarios.

    python benchmarks/scenarios.py                       # 1, 3 and 10 scenarios at 180 s
    python benchmarks/scenarios.py --counts 3 --time-limit 60

Each case is problems/2m_budget.yaml with a ``scenarios:`` section (written to a temporary
folder), solved as a user would:
``planner solve CASE --time-limit T -o X.xlsx --json X.json`` in a subprocess, workbook and
verification included. The scenarios:

* 1: the reference with probability 1 (the plan must equal the reference's);
* 3: problems/uncertain_demand.yaml's (base 0.5, no growth 0.3, twice the users 0.2);
* 10: growth from -1 %/month to +6 %/month and users x0.6 to x2.4, probability 0.1 each.

Columns: wall s, the bound T x 1.1 + 5, status, gap, expected present value, worst, VSS,
EVPI, the purchases (the same in every scenario) and the seconds of each step of the solve.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REFERENCE = ROOT / "problems" / "2m_budget.yaml"
ENTRY = "import sys; from planner.__main__ import main; sys.argv[0] = 'planner'; main()"
GROWTH = "workloads.serve.chat.traffic.growth_per_month"


def scenario_rows(count: int) -> list[str]:
    """The ``scenarios:`` rows of a case with ``count`` scenarios (1, 3 or 10).

    >>> len(scenario_rows(10)), scenario_rows(1)
    (10, ['{name: base, probability: 1.0}'])
    """
    if count == 1:
        return ["{name: base, probability: 1.0}"]
    if count == 3:
        return [
            "{name: base, probability: 0.5}",
            f"{{name: slow, probability: 0.3, set: {{{GROWTH}: 0.0}}}}",
            "{name: viral, probability: 0.2, scale: {serving_demand: 2.0}}",
        ]
    if count == 10:
        rows = ["{name: base, probability: 0.1}"]
        for i in range(1, 10):
            growth = round(-0.01 + 0.07 * (i - 1) / 8, 4)
            scale = round(0.6 + 1.8 * (i - 1) / 8, 3)
            rows.append(
                f"{{name: s{i}, probability: 0.1, set: {{{GROWTH}: {growth}}}, "
                f"scale: {{serving_demand: {scale}}}}}"
            )
        return rows
    raise SystemExit(f"--counts: 1, 3 or 10, not {count}")


def run_case(count: int, limit: float, out: Path) -> dict:
    """Solve the reference with ``count`` scenarios; the row of the table."""
    text = (
        REFERENCE.read_text() + "scenarios:\n" + "".join(f"  - {r}\n" for r in scenario_rows(count))
    )
    # in the run's temporary folder (the reference names no offers or profiles files, so
    # nothing resolves relative to it), never beside the shipped problems
    case = out / f"reference_{count}_scenarios.yaml"
    case.write_text(text)
    js, xlsx = out / f"s{count}.json", out / f"s{count}.xlsx"
    cmd = [sys.executable, "-c", ENTRY, "solve", str(case), "--time-limit", str(limit)]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*cmd, "-o", str(xlsx), "--json", str(js)], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"scenarios": count, "wall_s": wall, "error": proc.stderr[-400:]}
    plan = json.loads(js.read_text())
    t = plan["totals"]
    steps = plan["message"].rsplit("seconds: ", 1)[-1] if "seconds: " in plan["message"] else ""
    return {
        "scenarios": count,
        "wall_s": round(wall, 1),
        "bound_s": limit * 1.1 + 5,
        "status": plan["status"],
        "gap": plan["gap"],
        "expected_usd": t.get("expected_usd"),
        "worst_usd": t.get("worst_usd"),
        "vss_usd": t.get("vss_usd"),
        "evpi_usd": t.get("evpi_usd"),
        "purchases": [(p["gpu"], p["month"], p["count"]) for p in plan["purchases"]],
        "steps": steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1,3,10")
    ap.add_argument("--time-limit", type=float, default=180.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for count in (int(c) for c in args.counts.split(",")):
            print(json.dumps(run_case(count, args.time_limit, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
