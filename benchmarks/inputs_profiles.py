"""Loading a large measured-profiles file: time and peak memory.

    python benchmarks/inputs_profiles.py                 # 100,000 serving entries (14 MB)
    python benchmarks/inputs_profiles.py --entries 20000 --keep /tmp/profiles.yaml

Generates a profiles file of ``--entries`` distinct serving entries (one flow mapping per line,
half with a measured point, half with ``max_rps``) and a one-workload
problem naming it, then loads the problem through :func:`planner.inputs.problem.load_problem`
(YAML, schema, ids checked against the catalogs) and asks one serving rate, as the candidates
do. Prints the file size, the load seconds, the lookup milliseconds and the process's peak
memory (``ru_maxrss``), with how much the profiles added to it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROBLEM = """\
name: profiles benchmark
horizon: {start: 2027-01, months: 3}
budget: {capex_usd: 100000}
site: {power_usd_per_kwh: 0.1}
gpus: [h100-sxm, a100-sxm-80gb, l4]
profiles: [profiles.yaml]
workloads:
  serve:
    - name: chat
      model: llama-3-8b
      start: 2027-01
      traffic: {daily_active_users: 1000, requests_per_user_per_day: 10}
      tokens: {prompt: 512, output: 128}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
"""


def profiles_text(entries: int) -> str:
    """A profiles file of ``entries`` serving entries, every one distinct (shape, GPU, tp).

    >>> profiles_text(2).count("model: llama-3-8b")
    2
    """
    gpus = ("h100-sxm", "a100-sxm-80gb", "l4")
    lines = ["serve:"]
    for i in range(entries):
        gpu, tp = gpus[i % 3], 1 << (i // 3 % 3)
        prompt, output = 64 + i // 9 % 4000, 16 + i // 36000 % 1000
        rate = (
            f"max_rps: {1 + i % 7 / 4:g}"
            if i % 2
            else f"points: [{{rps: {1 + i % 5 / 4:g}, p95_ttft_ms: 105.6, p95_tpot_ms: 22}}]"
        )
        lines.append(
            f"  - {{model: llama-3-8b, gpu: {gpu}, tp: {tp}, prompt: {prompt}, output: {output}, "
            f"{rate}, source: run {i}, as_of: 2026-11}}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, help="also write the profiles file here")
    args = ap.parse_args(argv)

    from planner.inputs.problem import load_problem
    from planner.inputs.profiles import serve_rate

    text = profiles_text(args.entries)
    if args.keep:
        args.keep.write_text(text)
    with tempfile.TemporaryDirectory() as tmp:
        problem = Path(tmp) / "problem.yaml"
        problem.write_text(PROBLEM)
        (Path(tmp) / "profiles.yaml").write_text(profiles_text(10))
        load_problem(problem)  # imports and catalogs, so that only the profiles are measured
        before = _rss_mb()
        (Path(tmp) / "profiles.yaml").write_text(text)
        t0 = time.perf_counter()
        inputs = load_problem(problem)
        load_s = time.perf_counter() - t0
        peak = _rss_mb()
        t0 = time.perf_counter()
        for gpu in ("h100-sxm", "a100-sxm-80gb", "l4"):
            for tp in (1, 2, 4):
                serve_rate(inputs.profiles, "llama-3-8b", gpu, tp, "fp16", (512, 512), (16, 16),
                           (1000.0, 60.0))  # fmt: skip
        lookup_s = time.perf_counter() - t0
    print(
        f"entries {args.entries:,}  file {len(text) / 1e6:.1f} MB  load {load_s:.2f} s  "
        f"9 lookups {lookup_s * 1000:.1f} ms  peak memory {peak:.0f} MB "
        f"(+{peak - before:.0f} MB for the profiles)"
    )
    return 0


def _rss_mb() -> float:
    """The process's peak resident memory so far, MB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    raise SystemExit(main())
