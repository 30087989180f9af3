"""Head-to-head against Mélange (Griggs et al. 2024, arXiv:2404.14527): same input, both costs.

    python benchmarks/melange.py                                  # the ladder, 3 seeds each
    python benchmarks/melange.py --sizes 4gpu-4x4-s1,8gpu-8x8-s8 --seeds 5 --time-limit 60

Mélange picks the cheapest mix of rented GPU types for one LLM service: requests are bucketed
by (input, output) length, each bucket's load is cut into ``slice_factor`` equal slices, every
slice goes to one GPU type, and a GPU type's count must cover the load of its slices measured in
"GPUs" (slice req/s over the GPU's profiled max req/s at the SLO for that bucket). This module
holds:

* a seeded generator of instances in Mélange's own JSON input format (``gpu_info`` with
  ``cost`` $/h and ``tputs`` req/s per bucket, ``workload_distribution``, ``total_request_rate``,
  ``slice_factor``; nothing else: Mélange's runner takes no other key). The config leaves the
  bucket token ranges implicit; they are Mélange's profiling sizes (:data:`EDGES`, each a
  bucket's upper end), extended past 2000 tokens for grids above 6 x 6;
* an independent PuLP/CBC implementation of Mélange's ILP (:func:`melange_ilp`);
* the planner on the same input (:func:`planner_solve`, through
  ``planner.inputs.importers.profiles.melange_problem``).

The planner solves a relaxation over the same choices (a bucket's load may be split across GPU
types continuously, GPU counts stay whole), so its $/h must not exceed Mélange's: a run where it
does prints a FAIL line and exits 1. A size is ``<G>gpu-<I>x<O>-s<S>``: G GPU types, an I x O
bucket grid, slice factor S.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pulp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

LADDER = ["4gpu-4x4-s1", "6gpu-6x6-s4", "8gpu-8x8-s8", "12gpu-10x10-s8"]

# Mélange's profiling sizes (melange/profiling/benchmark-launcher.sh: 25 .. 2000 tokens), each
# the upper end of a bucket, extended for grids up to 10 x 10: bucket k is
# [EDGES[k - 1] + 1, EDGES[k]] tokens ([1, 25] for k = 0), as the planner's importer reads them.
EDGES = (25, 100, 250, 500, 1000, 2000, 4000, 8000, 12000, 16000)

SLO_TTFT_MS = 1000.0  # the SLO the generated throughputs stand for (Mélange: TPOT 40-120 ms)
SLO_TPOT_MS = 120.0
PROFILES_FILE = "profiles.yaml"
REL_TOL = 1e-6  # the planner may exceed Mélange's $/h by this much (solver tolerances)


@dataclass(frozen=True)
class GpuKind:
    """A rentable GPU: catalog id, a typical on-demand $/h and its memory."""

    id: str
    usd_per_h: float
    memory_gb: float


GPUS: tuple[GpuKind, ...] = (
    GpuKind("rtx-3090", 0.55, 24),
    GpuKind("rtx-4090", 0.75, 24),
    GpuKind("l4", 0.80, 24),
    GpuKind("a10g", 1.01, 24),
    GpuKind("l40s", 1.90, 48),
    GpuKind("a100-sxm-40gb", 2.40, 40),
    GpuKind("a100-pcie-80gb", 3.10, 80),
    GpuKind("a100-sxm-80gb", 3.67, 80),
    GpuKind("h100-pcie", 4.50, 80),
    GpuKind("h100-sxm", 6.00, 80),
    GpuKind("h200-sxm", 7.50, 141),
    GpuKind("b200", 9.50, 180),
)


@dataclass(frozen=True)
class Size:
    """An instance size: GPU types, bucket grid (input x output), slice factor."""

    gpus: int
    inputs: int
    outputs: int
    slice_factor: int

    @property
    def label(self) -> str:
        return f"{self.gpus}gpu-{self.inputs}x{self.outputs}-s{self.slice_factor}"


def parse_size(text: str) -> Size:
    """``"8gpu-8x8-s8"`` -> Size(8, 8, 8, 8).

    >>> parse_size("12gpu-10x6-s4")
    Size(gpus=12, inputs=10, outputs=6, slice_factor=4)
    """
    m = re.fullmatch(r"(\d+)gpu-(\d+)x(\d+)-s(\d+)", text.strip().lower())
    if not m:
        raise ValueError(f"size {text!r}: expected <G>gpu-<I>x<O>-s<S>, e.g. 8gpu-8x8-s8")
    size = Size(*(int(g) for g in m.groups()))
    if not 1 <= size.gpus <= len(GPUS):
        raise ValueError(f"size {text!r}: 1..{len(GPUS)} GPU types")
    if not (1 <= size.inputs <= len(EDGES) and 1 <= size.outputs <= len(EDGES)):
        raise ValueError(f"size {text!r}: 1..{len(EDGES)} buckets per axis")
    if size.slice_factor < 1:
        raise ValueError(f"size {text!r}: slice factor >= 1")
    return size


# ---------------------------------------------------------------------------- generator


def _sig(x: float, digits: int = 3) -> float:
    """Round to ``digits`` significant digits (profiled numbers are not exact)."""
    return 0.0 if x == 0 else round(x, digits - 1 - math.floor(math.log10(abs(x))))


def bucket_range(k: int) -> tuple[int, int]:
    """Token range of bucket ``k`` on either axis.

    >>> bucket_range(0), bucket_range(2)
    ((1, 25), (101, 250))
    """
    return (1 if k == 0 else EDGES[k - 1] + 1), EDGES[k]


def _bucket_tput(
    speed: float, memory_gb: float, inp: tuple[int, int], out: tuple[int, int]
) -> float:
    """Req/s of a GPU on a bucket: falls with the bucket's sizes (decode length most), and
    falls faster on small-memory GPUs (less room for the KV cache of long requests)."""
    mid_in, mid_out = sum(inp) / 2, sum(out) / 2
    base = 40.0 / ((1 + mid_in / 400) * (1 + mid_out / 60))
    squeeze = 1.0 / (1.0 + (inp[1] + out[1]) / (memory_gb * 100.0))
    return speed * base * squeeze


def _gpu_entry(
    g: GpuKind, rng: random.Random, size: Size, largest_gb: float
) -> tuple[float, list[list[float]]]:
    """(cost $/h, tputs[input bucket][output bucket]) for one GPU type; 0 = cannot serve
    (buckets too long for its memory; only GPUs smaller than the instance's largest)."""
    cost = round(min(10.0, max(0.5, g.usd_per_h * rng.uniform(0.85, 1.15))), 2)
    speed = (cost / 3.67) ** rng.uniform(0.6, 1.2)  # A100-80GB = 1; rises with cost
    tputs = []
    for i in range(size.inputs):
        row = []
        for j in range(size.outputs):
            inp, out = bucket_range(i), bucket_range(j)
            if g.memory_gb < largest_gb and inp[1] + out[1] > g.memory_gb * 250:
                row.append(0.0)
                continue
            t = _bucket_tput(speed, g.memory_gb, inp, out) * math.exp(rng.gauss(0, 0.1))
            row.append(max(_sig(t), 0.001))
        tputs.append(row)
    return cost, tputs


def _distribution(rng: random.Random, size: Size) -> list[list[float]]:
    """Shares per (input, output) bucket summing to 1; about a third of the cells are 0,
    mass leaning to the smaller buckets as in chat traces."""
    w = [
        [0.0 if rng.random() < 0.3 else rng.random() * 0.8 ** (i + j) for j in range(size.outputs)]
        for i in range(size.inputs)
    ]
    if not any(any(r) for r in w):
        w[0][0] = 1.0
    total = sum(map(sum, w))
    return [[v / total for v in r] for r in w]


def generate_config(size: Size, seed: int) -> dict:
    """A Mélange input config (its JSON format: bucket k of either axis is
    :func:`bucket_range` ``(k)``); same size and seed, same config."""
    rng = random.Random(f"melange-{size.label}-{seed}")
    kinds = sorted(rng.sample(GPUS, size.gpus), key=lambda g: g.usd_per_h)
    largest = max(g.memory_gb for g in kinds)
    gpu_info = {}
    for g in kinds:
        cost, tputs = _gpu_entry(g, rng, size, largest)
        gpu_info[g.id] = {"cost": cost, "tputs": tputs}
    return {
        "gpu_info": gpu_info,
        "workload_distribution": _distribution(rng, size),
        "total_request_rate": round(rng.uniform(1.0, 50.0), 2),
        "slice_factor": size.slice_factor,
    }


# ---------------------------------------------------------------------------- Mélange ILP


@dataclass
class Outcome:
    """One solve: $/h (None without a plan), status, solver seconds, whole seconds."""

    usd_per_h: float | None
    status: str
    solve_s: float
    wall_s: float
    counts: dict[str, int] = field(default_factory=dict)
    off_menu: list[str] = field(default_factory=list)  # planner choices Mélange does not have


def slices(config: dict) -> list[tuple[int, int, float]]:
    """Mélange's slices: (input bucket, output bucket, req/s), ``slice_factor`` equal slices per
    bucket with load (buckets without load have none)."""
    rate, k = float(config["total_request_rate"]), int(config["slice_factor"])
    return [
        (i, j, share * rate / k)
        for i, row in enumerate(config["workload_distribution"])
        for j, share in enumerate(row)
        if share > 0
        for _ in range(k)
    ]


def _gpu_load(config: dict, gpu: str, i: int, j: int, rps: float) -> float | None:
    """GPUs of type ``gpu`` a slice occupies (req/s over profiled max req/s); None when the GPU
    cannot serve the bucket (max req/s 0)."""
    tput = float(config["gpu_info"][gpu]["tputs"][i][j])
    return rps / tput if tput > 0 else None


def _status(prob: pulp.LpProblem) -> str:
    if prob.sol_status == pulp.LpSolutionOptimal:
        return "optimal"
    if prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return "feasible"
    if prob.status == pulp.LpStatusInfeasible:
        return "infeasible"
    return "no_plan"


def build_melange(config: dict) -> tuple[pulp.LpProblem, dict[str, pulp.LpVariable]]:
    """Mélange's ILP: binary slice-to-GPU-type assignment, whole GPU counts per type covering
    their slices' loads, minimum $/h. Returns the problem and the count variables."""
    gpus = list(config["gpu_info"])
    prob = pulp.LpProblem("melange", pulp.LpMinimize)
    count = {g: pulp.LpVariable(f"n_{k}", lowBound=0, cat="Integer") for k, g in enumerate(gpus)}
    prob += pulp.lpSum(float(config["gpu_info"][g]["cost"]) * count[g] for g in gpus)
    used: dict[str, list[tuple[float, pulp.LpVariable]]] = {g: [] for g in gpus}
    for s, (i, j, rps) in enumerate(slices(config)):
        choices = []
        for k, g in enumerate(gpus):
            load = _gpu_load(config, g, i, j, rps)
            if load is not None:
                x = pulp.LpVariable(f"x_{s}_{k}", cat="Binary")
                choices.append(x)
                used[g].append((load, x))
        if not choices:
            raise ValueError(f"bucket ({i}, {j}) has load but no GPU type can serve it")
        prob += pulp.lpSum(choices) == 1, f"slice_{s}"
    for k, g in enumerate(gpus):
        prob += pulp.lpSum(load * x for load, x in used[g]) <= count[g], f"cap_{k}"
    return prob, count


def melange_ilp(config: dict, time_limit: float = 60.0, gap: float = 0.0) -> Outcome:
    """Solve Mélange's ILP with CBC; ``solve_s`` is the solve call alone (as the planner's
    ``SolveResult.seconds``), ``wall_s`` includes building the model."""
    t0 = time.perf_counter()
    prob, count = build_melange(config)
    t1 = time.perf_counter()
    prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=gap, threads=1))
    t2 = time.perf_counter()
    status = _status(prob)
    if status not in ("optimal", "feasible"):
        return Outcome(None, status, t2 - t1, t2 - t0)
    counts = {g: round(v.varValue or 0.0) for g, v in count.items()}
    usd = sum(float(config["gpu_info"][g]["cost"]) * n for g, n in counts.items())
    return Outcome(usd, status, t2 - t1, t2 - t0, {g: n for g, n in counts.items() if n})


# ---------------------------------------------------------------------------- planner side


def _bucket_index(token_range: int | list[int]) -> int:
    """The bucket (on either axis) whose token range is ``token_range`` (the importer writes a
    range ``[lo, hi]``, or one number for a one-token bucket)."""
    lo, hi = (token_range, token_range) if isinstance(token_range, int) else token_range
    return next(k for k in range(len(EDGES)) if bucket_range(k) == (lo, hi))


def off_menu(config: dict, problem: dict, plan: object) -> list[str]:
    """Serving choices of the planner's plan that Mélange's ILP does not have: a bucket given
    capacity on a GPU type whose profiled max req/s for it is 0 (the planner's physics filled
    the gap), on a replica of more than one GPU, or at a rate other than the profiled one."""
    gpu_of = dict(zip(problem["gpus"], config["gpu_info"], strict=True))
    cell = {
        b["name"]: (_bucket_index(b["prompt"]), _bucket_index(b["output"]))
        for w in problem["workloads"]["serve"]
        for b in w["requests"]
    }
    out = []
    for a in plan.serve_allocations:  # type: ignore[attr-defined]
        for b, cap in a.bucket_capacity_rps.items():
            if cap <= 1e-9:
                continue
            i, j = cell[b]
            tput = float(config["gpu_info"][gpu_of[a.gpu]]["tputs"][i][j])
            rate = a.bucket_rates_rps.get(b, 0.0)
            if a.gpus_per_replica != 1 or tput <= 0 or abs(rate - tput) > 1e-9 * tput:
                out.append(
                    f"{b} on {a.gpus_per_replica} x {a.gpu} at {rate:g} req/s (Mélange: {tput:g})"
                )
    return out


def _write_yaml(path: Path, data: dict) -> None:
    import yaml

    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def planner_solve(
    config: dict,
    name: str,
    time_limit: float = 60.0,
    gap: float = 0.0,
    solver: str = "auto",
    model: str = "llama-2-7b",
) -> Outcome:
    """The planner on the same config: ``melange_problem`` -> YAML -> load -> solve -> plan.

    $/h is the plan's nominal total over the one month's 730 hours; ``solve_s`` is the
    planner's ``SolveResult.seconds``, ``wall_s`` everything from the import to the plan.
    """
    from planner.inputs.importers.profiles import melange_problem
    from planner.inputs.problem import load_problem
    from planner.physics.demand import HOURS_PER_MONTH
    from planner.plan.extract import extract_plan
    from planner.plan.make import solve_inputs

    t0 = time.perf_counter()
    problem, profiles = melange_problem(
        config,
        name=name,
        model=model,
        profiles_file=PROFILES_FILE,
        slo_ttft_ms=SLO_TTFT_MS,
        slo_tpot_ms=SLO_TPOT_MS,
        input_edges=EDGES,
        output_edges=EDGES,
    )
    with tempfile.TemporaryDirectory(prefix="melange_bench_") as tmp:
        path = Path(tmp) / "problem.yaml"
        _write_yaml(path, problem)
        _write_yaml(Path(tmp) / PROFILES_FILE, profiles)
        inputs = load_problem(path)
        m, res = solve_inputs(inputs, solver, time_limit, gap)
        if not res.has_solution:
            return Outcome(None, res.status, res.seconds, time.perf_counter() - t0)
        plan = extract_plan(m, res)
    usd = plan.totals.total_usd / HOURS_PER_MONTH
    wall = time.perf_counter() - t0
    status = f"{res.status}:{res.solver}"
    return Outcome(usd, status, res.seconds, wall, off_menu=off_menu(config, problem, plan))


# ---------------------------------------------------------------------------- the table


@dataclass
class Row:
    size: str
    seed: int
    slices: int
    melange: Outcome
    planner: Outcome | None
    error: str = ""

    @property
    def ratio(self) -> float | None:
        if self.planner is None or self.planner.usd_per_h is None or not self.melange.usd_per_h:
            return None
        return self.planner.usd_per_h / self.melange.usd_per_h

    @property
    def failed(self) -> str:
        """Why this row fails ('' when it passes): the planner dearer than Mélange, a planner
        plan using a (GPU, replica size, bucket) Mélange's input does not offer, or no planner
        plan where Mélange has one."""
        mel = self.melange.usd_per_h
        if mel is None:
            return ""
        if self.planner is None or self.planner.usd_per_h is None:
            why = self.error or (self.planner.status if self.planner else "not run")
            return f"the planner has no plan ({why}); Mélange: ${mel:,.4f}/h"
        if self.planner.off_menu:
            return (
                f"the planner's plan uses {len(self.planner.off_menu)} choice(s) Mélange's input "
                f"does not offer (not the same choices), e.g. {self.planner.off_menu[0]}"
            )
        if self.planner.usd_per_h > mel * (1 + REL_TOL):
            return (
                f"the planner's ${self.planner.usd_per_h:,.4f}/h is above Mélange's ${mel:,.4f}/h "
                f"(+{self.planner.usd_per_h / mel - 1:.4%}; planner {self.planner.status}, "
                f"Mélange {self.melange.status})"
            )
        return ""


HEADER = (
    "| size | seed | slices | Mélange $/h | planner $/h | planner / Mélange | Mélange solve s "
    "| planner solve s | planner wall s | Mélange status | planner status | Mélange GPUs |"
)


def _money(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


def format_row(r: Row) -> str:
    p = r.planner
    gpus = ", ".join(f"{n} {g}" for g, n in r.melange.counts.items()) or "-"
    return (
        f"| {r.size} | {r.seed} | {r.slices} | {_money(r.melange.usd_per_h)} | "
        f"{_money(p.usd_per_h if p else None)} | "
        f"{'-' if r.ratio is None else f'{r.ratio:.4f}'} | {r.melange.solve_s:.2f} | "
        f"{'-' if p is None else f'{p.solve_s:.2f}'} | {'-' if p is None else f'{p.wall_s:.2f}'} | "
        f"{r.melange.status} | {(p.status if p else r.error[:60]) or '-'} | {gpus} |"
    )


def run_one(size: Size, seed: int, args: argparse.Namespace) -> Row:
    """Both solves of one seeded instance; a planner exception is a failed row, not a crash."""
    config = generate_config(size, seed)
    n = len(slices(config))
    mel = melange_ilp(config, args.time_limit, args.gap)
    try:
        plan = planner_solve(config, f"melange-{size.label}-{seed}", args.time_limit, args.gap)
    except Exception as exc:  # noqa: BLE001 - reported in the table and as a FAIL
        return Row(size.label, seed, n, mel, None, f"{type(exc).__name__}: {exc}")
    return Row(size.label, seed, n, mel, plan)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="planner vs Mélange on Mélange's own inputs")
    ap.add_argument(
        "--sizes", help="comma-separated <G>gpu-<I>x<O>-s<S>; default: " + ",".join(LADDER)
    )
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per size")
    ap.add_argument("--time-limit", type=float, default=60.0, help="per solve, seconds")
    ap.add_argument("--gap", type=float, default=0.0, help="relative MIP gap for both solvers")
    args = ap.parse_args(argv)
    sizes = [parse_size(s) for s in (args.sizes.split(",") if args.sizes else LADDER)]
    print(
        f"# planner vs Mélange  seeds={args.seeds} time_limit={args.time_limit:g}s "
        f"gap={args.gap:g} cpus={os.cpu_count()} python={sys.version.split()[0]}"
    )
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    fails = []
    for size in sizes:
        for seed in range(args.seeds):
            r = run_one(size, seed, args)
            print(format_row(r), flush=True)
            if r.failed:
                fails.append(f"FAIL {r.size} seed {r.seed}: {r.failed}")
    for line in fails:
        print(line)
    print(f"# {len(fails)} failed" if fails else "# ok: the planner <= Mélange on every instance")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
