"""The planner's MoE serving physics against NVIDIA AIConfigurator (static batches).

AIConfigurator (``pip install aiconfigurator``, Apache-2.0) predicts TTFT and TPOT from measured
kernel databases (H100/H200/B200/B300/GB200; TRT-LLM, SGLang, vLLM). It is not a dependency of
the planner: install it in a venv of its own and point ``--aic`` at its executable::

    python -m venv /tmp/aicvenv && /tmp/aicvenv/bin/pip install aiconfigurator
    python benchmarks/aiconfigurator_moe.py --aic /tmp/aicvenv/bin/aiconfigurator
    python benchmarks/aiconfigurator_moe.py --aic ... --json out.json --cases dsr1-h200

For every case (model, system, tensor-parallel size, precision, ISL/OSL, batch) it runs
``aiconfigurator cli estimate --estimate-mode static`` (a static batch: every request prefilled
together, then decoded together) and the planner's ``decode_step_s`` / ``prefill_iter_s`` for
the same shape, and prints TTFT and TPOT side by side with the ratio planner / AIC.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.inputs.catalog import load_gpus, load_models  # noqa: E402
from planner.physics.calibration.values import default_calibration  # noqa: E402
from planner.physics.serve import decode_step_s, prefill_iter_s  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # planner catalog id
    hf: str  # AIConfigurator --model-path
    gpu: str  # planner catalog id
    system: str  # AIConfigurator --system
    tp: int
    precision: str  # planner precision
    isl: int
    osl: int
    batch: int
    backend: str = "sglang"
    extra: tuple[str, ...] = ()


def _cases() -> list[Case]:
    out = []
    for b in (1, 8, 32, 64, 128):
        out.append(Case(f"dsr1-h200-b{b}", "deepseek-r1", "deepseek-ai/DeepSeek-R1", "h200-sxm",
                        "h200_sxm", 8, "fp8", 1024, 1024, b))  # fmt: skip
        out.append(Case(f"dsr1-b200-b{b}", "deepseek-r1", "deepseek-ai/DeepSeek-R1", "b200",
                        "b200_sxm", 8, "fp8", 1024, 1024, b))  # fmt: skip
    for b in (1, 32, 128):
        for sysname, gid in (("b200_sxm", "b200"), ("b300_sxm", "b300")):
            out.append(Case(f"dsr1-fp4-{gid}-b{b}", "deepseek-r1", "nvidia/DeepSeek-V3.1-NVFP4",
                            gid, sysname, 8, "fp4", 1024, 1024, b, "trtllm"))  # fmt: skip
    for b in (1, 16, 64):
        out.append(Case(f"q30a3-h100-b{b}", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "h100-sxm",
                        "h100_sxm", 1, "bf16", 1024, 1024, b))  # fmt: skip
        out.append(Case(f"q235-h200-b{b}", "qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B",
                        "h200-sxm", "h200_sxm", 8, "bf16", 1024, 1024, b))  # fmt: skip
        out.append(Case(f"gptoss120-h200-b{b}", "gpt-oss-120b", "openai/gpt-oss-120b",
                        "h200-sxm", "h200_sxm", 1, "int4", 1024, 1024, b))  # fmt: skip
    return out


def run_aic(aic: str, c: Case) -> dict[str, float]:
    """TTFT and TPOT (ms) that AIConfigurator prints for a static batch."""
    cmd = [aic, "cli", "estimate", "--model-path", c.hf, "--system", c.system,
           "--backend", c.backend, "--isl", str(c.isl), "--osl", str(c.osl),
           "--batch-size", str(c.batch), "--tp-size", str(c.tp), "--moe-tp-size", str(c.tp),
           "--moe-ep-size", "1", "--estimate-mode", "static", "--no-color", *c.extra]  # fmt: skip
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    got = {}
    for key in ("TTFT", "TPOT"):
        m = re.search(rf"^\s*{key}:\s*([0-9.]+) ms", text, re.M)
        got[key.lower() + "_ms"] = float(m.group(1)) if m else math.nan
    return got


def run_planner(c: Case) -> dict[str, float]:
    """The same static batch in the planner's physics: one prefill of ``batch`` prompts, then
    decode steps at the mean context."""
    calib = default_calibration()
    model, gpu = load_models()[c.model], load_gpus()[c.gpu]
    ttft = prefill_iter_s(model, gpu, c.tp, c.precision, c.batch, c.isl, calib)
    tpot = decode_step_s(model, gpu, c.tp, c.precision, c.batch, c.isl + c.osl / 2, calib)
    return {"ttft_ms": ttft * 1e3, "tpot_ms": tpot * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aic", required=True, help="the aiconfigurator executable (its own venv)")
    ap.add_argument("--cases", default="", help="only cases whose name contains this")
    ap.add_argument("--json", type=Path, default=None, help="write the rows as JSON")
    args = ap.parse_args()
    rows = []
    print(f"{'case':22} {'TTFT aic':>9} {'planner':>9} {'ratio':>6} {'TPOT aic':>9} "
          f"{'planner':>9} {'ratio':>6}")  # fmt: skip
    for c in _cases():
        if args.cases not in c.name:
            continue
        a, p = run_aic(args.aic, c), run_planner(c)
        r = {"case": asdict(c), "aic": a, "planner": p}
        rows.append(r)
        print(
            f"{c.name:22} {a['ttft_ms']:9.1f} {p['ttft_ms']:9.1f} "
            f"{p['ttft_ms'] / a['ttft_ms']:6.2f} {a['tpot_ms']:9.2f} {p['tpot_ms']:9.2f} "
            f"{p['tpot_ms'] / a['tpot_ms']:6.2f}",
            flush=True,
        )
    for key in ("ttft_ms", "tpot_ms"):
        ratios = [r["planner"][key] / r["aic"][key] for r in rows if r["aic"][key] > 0]
        if ratios:
            logs = [abs(math.log(x)) for x in ratios]
            print(
                f"{key}: median |planner/AIC - 1| {math.expm1(statistics.median(logs)):.1%}, "
                f"max {math.expm1(max(logs)):.1%} over {len(ratios)} cases"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
