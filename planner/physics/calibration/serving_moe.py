"""Mixture-of-experts serving calibration: published measurements, the fit, leave-one-out.

Three factors are fitted (``catalogs/calibration.yaml`` serve: ``moe_expert_bw_eff``,
``moe_layer_overhead_us`` on the measurements with experts sliced across the GPUs, then
``moe_ep_bw_eff`` on those with whole experts per GPU); every other factor is the dense
calibration's. The fit minimises the mean squared log error by a grid search; leave-one-out refits
without each measurement (and without each *source*, whose points share a software stack) and
predicts it. ``python -m planner.physics.calibration.serving_moe`` prints the table NOTES.md quotes.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from dataclasses import dataclass

from planner.inputs.catalog import Sourced, load_gpus, load_models
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.serve import decode_step_s, estimate_serve, with_layout


@dataclass(frozen=True)
class MoePoint:
    """One published measurement: a replica shape, a request shape and what was measured.

    ``metric``: ``tpot_ms`` (mean time per output token at ``batch`` concurrent requests),
    ``e2e_s`` (a static batch from first to last token) or ``tokens_per_s`` (output tokens/s of
    the replica at ``batch`` concurrent requests)."""

    id: str
    model: str
    gpu: str
    tp: int
    precision: str
    prompt: int
    output: int
    batch: int
    metric: str
    value: float
    source: str
    layout: str = "tp"  # experts sliced across the GPUs (tp) or whole per GPU (ep)


_IX870 = (
    "github.com/SemiAnalysisAI/InferenceX issue 870 (2026-03-05): DeepSeek-R1-0528, SGLang "
    "v0.5.7, FP8, TP8 EP1, 8xH200, ISL/OSL 1024/1024, mean TPOT"
)
_TT340 = (
    "github.com/tenstorrent/tt-inference-server issue 340 (2025-07-18): Qwen3-30B-A3B on A100, "
    "vLLM, concurrency 1, mean TPOT (TP not stated: 1 assumed, the BF16 model fits one 80 GB card)"
)
_V4002 = (
    "github.com/vllm-project/vllm pull 4002 (2024-04-11): Mixtral-8x22B on A100-80G, "
    "benchmark_latency.py (input 32, output 128) with the tuned fused-MoE config, avg latency"
)
_ACB183 = (
    "github.com/ai-bot-pro/achatbot pull 183 (2025-08-10): gpt-oss-20b on 1xH100, SGLang, "
    "MXFP4 weights (weight-only on Hopper: planner int4), 160 prompts 512 in / 1024 out, "
    "max concurrency 32, output token throughput"
)

_IX870B = (
    "github.com/SemiAnalysisAI/InferenceX issue 870 (2026-03-06): DeepSeek-R1-0528-FP4, SGLang "
    "v0.5.6, TP8 EP8, 8xB200, ISL/OSL 1024/1024, output throughput (8 x per-GPU figure); "
    "conc 64 left out (flagged: mean TTFT 5.7 s)"
)
_TRT5929 = (
    "github.com/NVIDIA/TensorRT-LLM issue 5929 (2025-07-10): DeepSeek-R1 FP8 on 8xH200 and FP4 "
    "on 8xB200, TRT-LLM 0.21, TP8 without EP and with EP8, LLMPerf against trtllm-serve, ITL p50"
)

POINTS: tuple[MoePoint, ...] = (
    *(
        MoePoint(f"dsr1-h200-c{b}", "deepseek-r1", "h200-sxm", 8, "fp8", 1024, 1024, b,
                 "tpot_ms", v, _IX870)
        for b, v in ((8, 12.8), (16, 17.2), (32, 25.6), (64, 34.6))
    ),
    *(
        MoePoint(f"q30a3-a100-{p}", "qwen3-30b-a3b", "a100-sxm-80gb", 1, "bf16", p, 128, 1,
                 "tpot_ms", v, _TT340)
        for p, v in ((128, 9.6), (2048, 9.9), (8192, 10.6))
    ),
    *(
        MoePoint(f"mx22-a100-tp{tp}-b{b}", "mixtral-8x22b", "a100-sxm-80gb", tp, "bf16", 32, 128,
                 b, "e2e_s", v, _V4002)
        # TP4 (5.43 / 6.11 / 6.89 s) left out: 282 GB of BF16 weights in 4x80 GB is more
        # than the planner's usable memory (90 %), so it refuses that replica
        for tp, b, v in ((8, 8, 3.708), (8, 16, 4.047), (8, 32, 4.391))
    ),
    MoePoint("gptoss20-h100-c32", "gpt-oss-20b", "h100-sxm", 1, "int4", 512, 1024, 32,
             "tokens_per_s", 2765.4, _ACB183),
    *(
        MoePoint(f"dsr1-fp4-b200-c{b}", "deepseek-r1", "b200", 8, "fp4", 1024, 1024, b,
                 "tokens_per_s", 8 * v, _IX870B, "ep")
        for b, v in ((4, 59.7), (8, 104.8), (16, 169.3), (32, 282.4))
    ),
    *(
        MoePoint(f"dsr1-trt-{g}-{p}-b{b}", "deepseek-r1", g, 8, pr, p, 600, b, "tpot_ms", v,
                 _TRT5929)
        for g, pr, p, b, v in (
            ("h200-sxm", "fp8", 1600, 1, 13.78), ("h200-sxm", "fp8", 8192, 1, 14.53),
            ("h200-sxm", "fp8", 1600, 8, 18.18),
            ("b200", "fp4", 1600, 1, 6.78), ("b200", "fp4", 8192, 1, 7.14),
        )
    ),
    *(
        MoePoint(f"dsr1-trt-ep8-{g}-{p}-b{b}", "deepseek-r1", g, 8, pr, p, 600, b, "tpot_ms", v,
                 _TRT5929, "ep")
        for g, pr, p, b, v in (
            ("h200-sxm", "fp8", 1600, 1, 11.0), ("h200-sxm", "fp8", 8192, 1, 11.78),
            ("h200-sxm", "fp8", 1600, 8, 16.42),
            ("b200", "fp4", 1600, 1, 6.81), ("b200", "fp4", 8192, 1, 7.17),
        )
    ),
)  # fmt: skip


@functools.cache
def _catalogs() -> tuple[dict, dict]:
    return load_gpus(), load_models()


def predict(p: MoePoint, calib: Calibration) -> float:
    """The planner's figure for measurement ``p`` (same unit as ``p.value``)."""
    gpus, models = _catalogs()
    calib = with_layout(calib, p.layout)
    e = estimate_serve(
        models[p.model], gpus[p.gpu], p.tp, p.precision, p.prompt, p.output, p.batch, calib
    )
    if not e.fits:
        raise ValueError(f"{p.id}: the planner says it does not fit: {e.reason}")
    if p.metric == "tpot_ms" and p.batch == 1:
        # one request alone: its TPOT excludes its own prefill (the benchmark's definition)
        ctx = p.prompt + (p.output - 1) / 2
        m, g = models[p.model], gpus[p.gpu]
        return decode_step_s(m, g, p.tp, p.precision, 1, ctx, calib) * 1e3
    if p.metric == "tpot_ms":
        return e.tpot_ms
    if p.metric == "e2e_s":
        return e.tpot_ms * (p.output - 1) / 1e3
    return e.tokens_per_s


Factors = tuple[float, float, float]  # moe_expert_bw_eff, moe_layer_overhead_us, moe_ep_bw_eff


def with_moe(calib: Calibration, f: Factors, source: str) -> Calibration:
    """``calib`` with the three MoE factors set."""

    def s(v: float) -> Sourced:
        return Sourced(value=v, source=source, as_of="2026-11")

    update = {
        "moe_expert_bw_eff": s(f[0]),
        "moe_layer_overhead_us": s(f[1]),
        "moe_ep_bw_eff": s(f[2]),
    }
    return calib.model_copy(update={"serve": calib.serve.model_copy(update=update)})


EFF_GRID = tuple(round(0.2 + 0.05 * i, 2) for i in range(17))  # 0.20 .. 1.00
OVER_GRID = tuple(float(x) for x in range(0, 201, 10))  # 0 .. 200 us per MoE layer
EP_GRID = tuple(round(0.3 + 0.05 * i, 2) for i in range(15))  # 0.30 .. 1.00


def _log_err(p: MoePoint, calib: Calibration) -> float:
    return math.log(predict(p, calib) / p.value)


def _sse(points: list[MoePoint], calib: Calibration) -> float:
    return sum(_log_err(p, calib) ** 2 for p in points)


def fit(points: tuple[MoePoint, ...], base: Calibration) -> Factors:
    """The factors minimising the mean squared log error, in two steps: the sliced-expert
    efficiency and the per-layer time on the ``tp`` measurements (a grid), then the
    whole-expert efficiency on the ``ep`` ones with those fixed (a line)."""
    tp = [p for p in points if p.layout == "tp"]
    ep = [p for p in points if p.layout == "ep"]
    eff, over = min(
        itertools.product(EFF_GRID, OVER_GRID),
        key=lambda a: _sse(tp, with_moe(base, (a[0], a[1], a[0]), "fit")),
    )
    if not ep:
        return eff, over, eff
    ep_eff = min(EP_GRID, key=lambda e: _sse(ep, with_moe(base, (eff, over, e), "fit")))
    return eff, over, ep_eff


@dataclass(frozen=True)
class LooRow:
    id: str
    measured: float
    fitted: float  # prediction with the fit on every point
    loo: float  # prediction with the fit on every other point
    loso: float  # prediction with the fit on the other sources only


def leave_one_out(
    points: tuple[MoePoint, ...] = POINTS, base: Calibration | None = None
) -> tuple[Factors, list[LooRow]]:
    """The fit on all points and, per point, its prediction in and out of the fit."""
    base = base or default_calibration()
    full = fit(points, base)
    rows = []
    by_source = {}
    for p in points:
        rest = tuple(q for q in points if q.id != p.id)
        if p.source not in by_source:
            others = tuple(q for q in points if q.source != p.source)
            by_source[p.source] = fit(others, base)
        rows.append(
            LooRow(
                p.id,
                p.value,
                predict(p, with_moe(base, full, "fit")),
                predict(p, with_moe(base, fit(rest, base), "loo")),
                predict(p, with_moe(base, by_source[p.source], "loso")),
            )
        )
    return full, rows


def _abs_pct(pred: float, meas: float) -> float:
    return abs(pred / meas - 1) * 100


def main() -> None:
    base = default_calibration()
    raw = [predict(p, with_moe(base, (1.0, 0.0, 1.0), "raw")) for p in POINTS]
    (eff, over, ep_eff), rows = leave_one_out(POINTS, base)
    print(
        f"fit: moe_expert_bw_eff {eff:g}, moe_layer_overhead_us {over:g}, moe_ep_bw_eff {ep_eff:g}"
    )
    print(f"{'point':24} {'measured':>9} {'no-MoE':>9} {'fitted':>9} {'LOO':>9} {'LOSO':>9}")
    for r, p0 in zip(rows, raw, strict=True):
        print(f"{r.id:24} {r.measured:9.4g} {p0:9.4g} {r.fitted:9.4g} {r.loo:9.4g} {r.loso:9.4g}")
    for name, col in (
        ("no MoE factors", raw),
        ("fitted", [r.fitted for r in rows]),
        ("leave-one-out", [r.loo for r in rows]),
        ("leave-source-out", [r.loso for r in rows]),
    ):
        errs = [_abs_pct(x, r.measured) for x, r in zip(col, rows, strict=True)]
        print(f"{name:18} median |err| {statistics.median(errs):5.1f} %, max {max(errs):5.1f} %")


if __name__ == "__main__":
    main()
