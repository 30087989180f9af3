"""Importer benchmark: ``planner offers import-skypilot`` on a 100,000-row catalog folder.

    python benchmarks/inputs_skypilot.py                 # both shapes, 100,000 rows each
    python benchmarks/inputs_skypilot.py --rows 600000   # a bigger folder

Generates a SkyPilot catalog *version folder* (``<provider>/vms.csv``, each provider with its
own column order, GCP with host and accelerator rows apart) in a temporary folder, runs the
import as a user would (a subprocess: start-up, reading, grouping, offers, the YAML written)
and prints rows, CSV megabytes, offers written, wall seconds and the child's peak memory.

Two shapes:

* ``regions``: what real catalogs look like, scaled up: ~100 GPU instance types per provider
  listed in every region and zone (30 regions x 3 zones), CPU instance types for the rest.
* ``widest``: the most the importer allows, 5,000 GPU instance types (its ceiling,
  ``MAX_INSTANCE_TYPES``) each in 20 regions: 10,000 offers written.

The importer streams the rows and keeps one cell per (instance type, region), so memory
follows the instance types and regions, not the rows. Before it did (every row a dict, kept
until the end), 100,000 rows of distinct instance types took 164 s and 1.9 GB; such a file
is now refused at its 5,001st instance type (exit 2) in under a second.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the child writes its own peak memory (KB) to the file named by argv[1] as it exits
ENTRY = (
    "import atexit, resource, sys; from pathlib import Path; peak = Path(sys.argv.pop(1)); "
    "atexit.register(lambda: peak.write_text(str(resource.getrusage(resource.RUSAGE_SELF)"
    ".ru_maxrss))); from planner.__main__ import main; sys.argv[0] = 'planner'; main()"
)
GPUS = [("H100", 8), ("H100", 1), ("A100-80GB", 8), ("A100", 8), ("L4", 1), ("L40S", 4),
        ("A10G", 1), ("H200", 8), ("T4", 1), ("RTX4090", 1), ("B200", 8), ("MI300X", 8)]  # fmt: skip
HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,SpotPrice,AvailabilityZone"
GCP_HEADER = "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice"


def _gpu_rows(provider: str, types: int, regions: int, zones: int, rng: random.Random) -> list[str]:
    rows = []
    for t in range(types):
        acc, n = GPUS[t % len(GPUS)]
        itype = f"{provider}-{acc.lower()}x{n}-v{t}"
        base = rng.uniform(1.0, 5.0) * n
        for r in range(regions):
            for z in range(zones):
                price = base * rng.uniform(0.9, 1.3)
                spot = f"{price * 0.4:.4f}" if rng.random() < 0.7 else ""
                rows.append(f"{itype},{acc},{n},{8 * n},{64 * n},{price:.4f},r{r},{spot},r{r}-{z}")
    return rows


def _gcp_rows(types: int, regions: int, zones: int, rng: random.Random) -> list[str]:
    """GCP: host VMs (a3-highgpu-Ng, a2-ultragpu-Ng) and their accelerators on rows apart."""
    rows = []
    for r in range(regions):
        for z in range(zones):
            zone = f"g{r}-{z}"
            for n in (1, 2, 4, 8):
                rows.append(f"a3-highgpu-{n}g,26,234,,,,g{r},{zone},{1.2 * n:.3f},{0.5 * n:.3f}")
                rows.append(f",,,H100,{n},,g{r},{zone},{3.1 * n:.3f},{1.1 * n:.3f}")
                rows.append(f"a2-ultragpu-{n}g,12,170,,,,g{r},{zone},{0.9 * n:.3f},{0.4 * n:.3f}")
                rows.append(f",,,A100-80GB,{n},,g{r},{zone},{2.4 * n:.3f},{0.9 * n:.3f}")
            for t in range(max(0, types - 8)):
                rows.append(f"n2-standard-{t},{t},{4 * t},,,,g{r},{zone},{0.05 * (t + 1):.3f},")
    return rows


def _cpu_rows(provider: str, count: int, rng: random.Random) -> list[str]:
    return [
        f"{provider}-cpu-{i % 400}.xlarge,,,{4 + i % 64},{16 + i % 256},{rng.uniform(0.05, 3):.4f},"
        f"r{i % 30},{rng.uniform(0.01, 1):.4f},r{i % 30}-{i % 3}"
        for i in range(count)
    ]


def generate(root: Path, rows: int, shape: str, seed: int = 0) -> int:
    """Write a catalog folder of about ``rows`` rows under ``root``; returns the rows written."""
    rng = random.Random(seed)
    files: dict[str, list[str]] = {}
    if shape == "widest":
        providers = ["aws", "lambda", "runpod", "vast", "nebius"]
        per = 5_000 // len(providers)
        regions = max(1, rows // 5_000)
        for p in providers:
            files[p] = [HEADER, *_gpu_rows(p, per, regions, 1, rng)]
    else:
        providers = ["aws", "azure", "lambda", "runpod", "vast", "nebius", "oci"]
        share = rows // (len(providers) + 1)
        for p in providers:
            gpu = _gpu_rows(p, 100, 30, 3, rng)[: share // 2]
            files[p] = [HEADER, *gpu, *_cpu_rows(p, share - len(gpu), rng)]
        files["gcp"] = [GCP_HEADER, *_gcp_rows(60, 30, 3, rng)[:share]]
        short = rows - sum(len(lines) - 1 for lines in files.values())
        files["aws"] += _cpu_rows("aws-extra", max(0, short), rng)
    written = 0
    for provider, lines in files.items():
        (root / provider).mkdir(parents=True, exist_ok=True)
        (root / provider / "vms.csv").write_text("\n".join(lines) + "\n")
        written += len(lines) - 1
    return written


def run(root: Path, out: Path) -> tuple[float, float, int, str]:
    """(wall s, peak MB of the child, exit code, last line of its output)."""
    peak = out.with_suffix(".peak")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY, str(peak), "offers", "import-skypilot", str(root),
         "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    mb = int(peak.read_text()) / 1024 if peak.exists() else float("nan")
    return wall, mb, proc.returncode, lines[0] if lines else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--shapes", default="regions,widest")
    args = ap.parse_args()
    print(f"{'shape':<8} {'rows':>8} {'CSV MB':>7} {'wall s':>7} {'peak MB':>8} exit  result")
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "v8"
            n = generate(root, args.rows, shape)
            mb = sum(f.stat().st_size for f in root.rglob("vms.csv")) / 1e6
            wall, peak, code, line = run(root, Path(tmp) / "offers.yaml")
            print(f"{shape:<8} {n:>8,} {mb:>7.1f} {wall:>7.2f} {peak:>8.0f} {code:>4}  {line}")


if __name__ == "__main__":
    main()
