"""Seeded generator of synthetic planner problems for benchmarks.

Knobs: number of workloads, number of GPU types (or all of the catalog's), months in the
horizon, seed. Models and GPUs are drawn from the catalogs (``catalogs/models.yaml``,
``catalogs/gpus.yaml``); rental offers are the default offers file
(``offers: {files: [offers.yaml]}``). The same arguments always give the same problem.

Every problem is validated by :class:`planner.inputs.problem.Problem` before it is returned, and
resolved against the catalogs by :func:`load_inputs`.

Usage::

    python benchmarks/generate.py --workloads 50 --gpus all --months 36 --seed 1 -o p.yaml
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from planner.inputs.catalog import load_gpus, load_models  # noqa: E402
from planner.inputs.problem import Inputs, Problem, month_label, resolve  # noqa: E402

START = "2027-01"
TRAIN_SHARE = 0.25  # a quarter of the workloads are training jobs
# A GPU every generated problem can use: large models need 80 GB+ cards in 8-GPU nodes.
ANCHOR_GPU = "h100-sxm"
# Serving: model -> precisions that fit on one 8 x 80 GB node with room for the KV cache.
SERVE_MODELS = {
    "llama-2-7b": ("fp16", "bf16", "fp8"),
    "llama-2-13b": ("fp16", "fp8"),
    "llama-3-8b": ("bf16", "fp8"),
    "mistral-7b": ("fp16", "int8"),
    "mpt-7b": ("fp16",),
    "mpt-30b": ("fp16", "fp8"),
    "llama-2-70b": ("fp8", "int4"),
    "llama-3-70b": ("fp8", "int4"),
}
# Training: model -> (method, tokens low, tokens high); sized to finish in a few months.
TRAIN_MODELS = {
    "llama-2-7b": ("full", 5e9, 2e11),
    "llama-3-8b": ("full", 5e9, 1e11),
    "mistral-7b": ("full", 5e9, 1e11),
    "llama-2-13b": ("full", 5e9, 1e11),
    "mpt-30b": ("lora", 1e9, 2e10),
    "llama-2-70b": ("lora", 5e8, 1e10),
    "llama-3-70b": ("qlora", 5e8, 5e9),
}


def _loguniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


# The catalog's GPU types before issue 37 added eight (AMD Instinct, B300, NVL72 racks, RTX
# PRO/5090): the tests' "all GPUs" models keep this size (twice the types made them twice as
# slow); the benchmarks' "all" is the whole catalog of today.
HOPPER_ERA = (
    "h100-sxm", "h200-sxm", "b200", "h100-pcie", "a100-sxm-80gb", "a100-sxm-40gb",
    "a100-pcie-80gb", "l40s", "l4", "a10g", "rtx-4090", "rtx-3090",
)  # fmt: skip


def _pick_gpus(
    rng: random.Random, gpus: int | str | tuple[str, ...], catalog: list[str]
) -> list[str] | None:
    """``"all"`` -> None (every catalog GPU); a tuple of ids -> those; an int -> the anchor
    GPU plus random others."""
    if isinstance(gpus, tuple):
        return list(gpus)
    if gpus == "all" or (isinstance(gpus, int) and gpus >= len(catalog)):
        return None
    n = int(gpus)
    if n < 1:
        raise ValueError("gpus must be >= 1 or 'all'")
    others = [g for g in catalog if g != ANCHOR_GPU]
    return [ANCHOR_GPU] + sorted(rng.sample(others, n - 1))


def _serve(rng: random.Random, i: int, months: int, context: dict[str, int]) -> dict[str, Any]:
    model = rng.choice(sorted(SERVE_MODELS))
    start = rng.randrange(0, max(1, months // 2))
    w: dict[str, Any] = {
        "name": f"serve-{i:03d}",
        "model": model,
        "precision": rng.choice(SERVE_MODELS[model]),
        "start": month_label(START, start),
        "traffic": {
            "daily_active_users": round(_loguniform(rng, 2_000, 200_000)),
            "requests_per_user_per_day": round(rng.uniform(5, 40), 1),
            "utilization": round(rng.uniform(0.3, 0.8), 2),
            "growth_per_month": round(rng.uniform(0.0, 0.05), 3),
        },
        "tokens": {
            "prompt": rng.choice((200, 500, 1000, 2000)),
            "output": rng.choice((100, 250, 500)),
        },
        "slo": {
            "p95_ttft_ms": rng.choice((800, 1000, 2000)),
            "p95_tpot_ms": rng.choice((50, 60, 100)),
        },
    }
    tok = w["tokens"]  # prompt + output must fit the model's context (no extra random draws)
    tok["prompt"] = min(tok["prompt"], context[model] - tok["output"])
    if rng.random() < 0.3 and start + 2 < months - 1:
        w["end"] = month_label(START, rng.randrange(start + 2, months))
    return w


def _train(rng: random.Random, i: int, months: int) -> dict[str, Any]:
    model = rng.choice(sorted(TRAIN_MODELS))
    method, lo, hi = TRAIN_MODELS[model]
    length = rng.randint(1, min(4, months))
    start = rng.randrange(0, months - length + 1)
    return {
        "name": f"train-{i:03d}",
        "model": model,
        "tokens": float(f"{_loguniform(rng, lo, hi):.3g}"),
        "method": method,
        "window": {
            "start": month_label(START, start),
            "deadline": month_label(START, start + length - 1),
        },
        "spot": {
            "allowed": rng.random() < 0.7,
            "max_share": round(rng.uniform(0.2, 0.8), 2),
            "overhead": round(rng.uniform(0.05, 0.3), 2),
        },
    }


def generate(
    workloads: int, gpus: int | str | tuple[str, ...] = "all", months: int = 36, seed: int = 0
) -> dict[str, Any]:
    """A problem as a dict (YAML-ready), validated by :class:`planner.inputs.problem.Problem`."""
    if workloads < 1:
        raise ValueError("workloads must be >= 1")
    if not 1 <= months <= 120:
        raise ValueError("months must be in 1..120")
    rng = random.Random(f"planner-bench:{workloads}:{gpus}:{months}:{seed}")
    catalog = list(load_gpus())
    allowed = _pick_gpus(rng, gpus, catalog)
    n_train = workloads // 4 if workloads > 1 else 0
    n_serve = workloads - n_train
    context = {k: m.max_context for k, m in load_models().items()}
    serve = [_serve(rng, i, months, context) for i in range(n_serve)]
    train = [_train(rng, i, months) for i in range(n_train)]
    data: dict[str, Any] = {
        "name": f"bench {workloads}w x {len(allowed) if allowed else 'all'} gpus x {months}m (seed {seed})",
        "horizon": {"start": START, "months": months},
        "budget": {"capex_usd": float(500_000 * workloads)},
        "site": {
            "power_usd_per_kwh": round(rng.uniform(0.06, 0.2), 3),
            "pue": round(rng.uniform(1.1, 1.5), 2),
            "hosting_usd_per_gpu_month": float(rng.choice((40, 60, 90))),
            "power_cap_kw": float(40 * workloads + 100),
            "consumer_gpus_allowed": False,
        },
        "offers": {"files": ["offers.yaml"]},
        "workloads": {"train": train, "serve": serve},
    }
    if allowed is not None:
        data["gpus"] = allowed
    Problem.model_validate(data)  # a generated problem is always a valid problem file
    return data


def load_inputs(data: dict[str, Any]) -> Inputs:
    """Validate and resolve a generated problem against the catalogs."""
    return resolve(
        Problem.model_validate(data), gpu_catalog=load_gpus(), model_catalog=load_models()
    )


def to_yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", type=int, default=10)
    ap.add_argument("--gpus", default="all", help="number of GPU types or 'all'")
    ap.add_argument("--months", type=int, default=36)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", help="write YAML here (default stdout)")
    a = ap.parse_args(argv)
    gpus: int | str = a.gpus if a.gpus == "all" else int(a.gpus)
    text = to_yaml(generate(a.workloads, gpus, a.months, a.seed))
    if a.output:
        Path(a.output).write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
