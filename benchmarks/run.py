"""Benchmark ladder: model size, build and solve times, gap and memory, CBC and HiGHS.

    python benchmarks/run.py                   # full ladder (1, 10, 50, 200 workloads x 4/all GPUs x 12/36 months)
    python benchmarks/run.py --quick           # short ladder
    python benchmarks/run.py --sizes 50x4x36,200xallx36 --solvers highs --time-limit 120

Each (size, solver) runs in its own subprocess so that peak memory (``ru_maxrss``: the
Python process; CBC runs as a child process and is reported separately) belongs to that
run alone. Problems come from :mod:`benchmarks.generate` (seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

FULL = [f"{w}x{g}x{m}" for w in (1, 10, 50, 200) for g in ("4", "all") for m in (12, 36)]
QUICK = ["1x4x12", "10x4x12", "10xallx36", "50xallx36"]


def parse_size(text: str) -> tuple[int, str, int]:
    """``"50xallx36"`` -> (50, "all", 36); ``"10x4x12"`` -> (10, "4", 12)."""
    w, g, m = text.lower().split("x")
    return int(w), g, int(m)


def child(size: str, solver: str, time_limit: float, gap: float, seed: int, verify: bool) -> dict:
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    from benchmarks.generate import generate, load_inputs
    from planner.optimize.candidates import build_candidates, check_candidates
    from planner.optimize.model import build_model
    from planner.optimize.solve import solve_model
    from planner.plan.extract import extract_plan

    t_import = time.perf_counter() - t0
    w, g, m = parse_size(size)
    out: dict = {"size": size, "solver": solver, "import_s": t_import}
    t = time.perf_counter()
    inputs = load_inputs(generate(w, g if g == "all" else int(g), m, seed))
    out["load_s"] = time.perf_counter() - t
    out["gpu_types"] = len(inputs.gpus)
    t = time.perf_counter()
    cands = build_candidates(inputs)
    out["cands_s"] = time.perf_counter() - t
    check_candidates(inputs, cands)
    t = time.perf_counter()
    model = build_model(inputs, cands)
    out["build_s"] = time.perf_counter() - t
    prob = model.prob
    variables = prob.variables()
    out["vars"] = len(variables)
    out["int_vars"] = sum(1 for v in variables if v.cat == "Integer")
    out["cons"] = len(prob.constraints)
    res = solve_model(model, solver=solver, time_limit=time_limit, gap=gap)
    out.update(status=res.status, objective=res.objective, gap=res.gap, solve_s=res.seconds)
    out["message"] = res.message
    if solver == "auto":  # the default path: say which solver it picked
        out["solver"] = f"auto:{res.solver}"
    if res.has_solution:
        t = time.perf_counter()
        plan = extract_plan(model, res)
        out["extract_s"] = time.perf_counter() - t
        if verify:
            from planner.verify import verify_plan

            t = time.perf_counter()
            problems = verify_plan(inputs, plan)
            out["verify_s"] = time.perf_counter() - t
            out["verified"] = not problems
            if problems:
                out["verify_errors"] = problems[:5]
    out["total_s"] = time.perf_counter() - t0
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["child_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def run_one(size: str, solver: str, args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        size,
        "--solvers",
        solver,
        "--time-limit",
        str(args.time_limit),
        "--gap",
        str(args.gap),
        "--seed",
        str(args.seed),
    ]
    if args.verify:
        cmd.append("--verify")
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.time_limit * 3 + 600
        )
    except subprocess.TimeoutExpired:
        return {"size": size, "solver": solver, "status": "timeout"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    err = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return {"size": size, "solver": solver, "status": f"error: {err[:80]}"}


def fmt(r: dict, key: str, spec: str) -> str:
    v = r.get(key)
    if v is None:
        return "-"
    return format(v, spec)


def row(r: dict) -> str:
    gap = r.get("gap")
    mem = max(r.get("rss_mb") or 0, r.get("child_rss_mb") or 0)
    return (
        f"| {r['size']:<10} | {r['solver']:<5} | {fmt(r, 'vars', ',')} ({fmt(r, 'int_vars', ',')} int) | "
        f"{fmt(r, 'cons', ',')} | {fmt(r, 'cands_s', '.2f')} | {fmt(r, 'build_s', '.2f')} | "
        f"{fmt(r, 'solve_s', '.2f')} | {r.get('status', '-')} | "
        f"{'-' if gap is None else f'{gap:.3%}'} | {fmt(r, 'objective', ',.0f')} | "
        f"{fmt(r, 'total_s', '.2f')} | {mem:,.0f} |"
        + (f" {'ok' if r.get('verified') else 'FAIL'} |" if "verified" in r else "")
    )


HEADER = (
    "| size (WxGxM) | solver | variables | constraints | cands s | build s | solve s | status | gap "
    "| objective $ | total s | peak MB |"
)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="planner benchmark ladder")
    ap.add_argument("--quick", action="store_true", help="short ladder: " + ", ".join(QUICK))
    ap.add_argument(
        "--sizes", help="comma-separated WORKLOADSxGPUSxMONTHS, e.g. 50xallx36,200x4x12"
    )
    ap.add_argument(
        "--solvers",
        default="auto",
        help="comma-separated: auto (the default path, as `planner solve`), cbc, highs",
    )
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--gap", type=float, default=0.001)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verify", action="store_true", help="also run planner.verify on each plan")
    ap.add_argument("--json", help="append each result as a JSON line to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(
            json.dumps(
                child(args.child, args.solvers, args.time_limit, args.gap, args.seed, args.verify)
            )
        )
        return
    sizes = args.sizes.split(",") if args.sizes else (QUICK if args.quick else FULL)
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    print(
        f"# planner benchmark  seed={args.seed} time_limit={args.time_limit:g}s gap={args.gap:g} "
        f"cpus={os.cpu_count()} python={sys.version.split()[0]}"
    )
    print(HEADER + (" verified |" if args.verify else ""))
    print("|" + "---|" * (HEADER.count("|") - 1 + (1 if args.verify else 0)))
    for size in sizes:
        for solver in solvers:
            r = run_one(size, solver, args)
            print(row(r), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
