"""Tables that ``planner estimate train`` and ``estimate serve`` print (rendering only)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from planner.inputs.catalog import GpuSpec, ModelArch
from planner.physics import vendor
from planner.physics.moe import attention_facts


def fmt(value: float, digits: int = 1) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.{digits}f}"


def vendor_row(gpu: GpuSpec, kind: vendor.Kind, what: str) -> tuple[str, str]:
    """The table row of the vendor's software efficiency, e.g. ``x 0.81 (amd, 0.68-0.99)``."""
    d = vendor.describe(gpu, kind)
    return (
        f"vendor software efficiency (x {what})",
        f"x {d['value']:g} ({d['vendor']}, {d['low']:g}-{d['high']:g})",
    )


def size_label(model: ModelArch) -> str:
    """``70.6B`` or, for a mixture of experts, ``671B, 37B active``."""
    total = f"{model.params / 1e9:,.3g}B" if model.params < 1e12 else f"{model.params / 1e9:,.0f}B"
    if model.moe is None:
        return total
    active = model.active_params or model.computed_active_params
    return f"{total}, {active / 1e9:,.3g}B active"


def train_table(
    model: ModelArch, gpu: GpuSpec, gpus: int, n_tokens: float, method: str, est: Any
) -> Table:
    t = Table(
        title=f"train {model.id} ({size_label(model)}) on {gpus}x {gpu.id}, "
        f"{n_tokens:.3g} tokens, {method}"
    )
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("fits", "yes" if est.fits else "NO")
    if est.reason:
        t.add_row("reason", est.reason)
    t.add_row(f"wall hours (median, {est.stack} stack)", fmt(est.wall_hours))
    t.add_row("  P10 - P90", f"{fmt(est.wall_hours_p10)} - {fmt(est.wall_hours_p90)}")
    t.add_row("  benchmark steady state", fmt(est.steady_wall_hours))
    t.add_row("GPU-hours (median)", fmt(est.gpu_hours, 0))
    t.add_row("  P10 - P90", f"{fmt(est.gpu_hours_p10, 0)} - {fmt(est.gpu_hours_p90, 0)}")
    t.add_row("tokens/s per GPU", fmt(est.tokens_per_s_per_gpu, 0))
    t.add_row("MFU", f"{est.mfu:.1%}")
    if est.layout:
        lay = est.layout
        t.add_row(
            "layout",
            f"TP {lay.tp} x PP {lay.pp} x DP {lay.dp}"
            f"{f' (EP {lay.ep})' if lay.ep > 1 else ''}, ZeRO-{lay.zero_stage}, "
            f"micro-batch {lay.micro_batch}"
            f"{f', {lay.schedule} pipeline' if lay.pp > 1 else ''}"
            f"{', recompute' if lay.recompute else ''}",
        )
    t.add_row("memory per GPU (GB)", f"{fmt(est.memory_per_gpu_gb)} of {gpu.memory_gb.value:g}")
    for k, v in est.memory.items():
        t.add_row(f"  {k}", fmt(v))
    return t


def serve_table(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: str,
    precision: str,
    prompt: int,
    output: int,
    est: Any,
    cap: Any,
) -> Table:
    t = Table(title=f"serve {model.id} on {gpus} {gpu.id}, {precision}, {prompt} in / {output} out")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("fits", "yes" if est.fits else "NO")
    if est.reason:
        t.add_row("reason", est.reason)
    t.add_row("batch", str(est.batch))
    t.add_row("output tokens/s (deployment)", fmt(est.tokens_per_s, 0))
    t.add_row("TTFT ms (unloaded)", fmt(est.ttft_ms))
    t.add_row("TPOT ms (at this batch)", fmt(est.tpot_ms, 2))
    t.add_row("memory per GPU (GB)", f"{fmt(est.memory_per_gpu_gb)} of {gpu.memory_gb.value:g}")
    for k, v in est.memory.items():
        t.add_row(f"  {k}", fmt(v))
    att = attention_facts(model, precision, prompt + output)
    t.add_row("attention", str(att["description"]))
    t.add_row("  KV cache per sequence (GB, all GPUs)", fmt(att["kv_cache_gb_per_sequence"], 3))
    t.add_row(
        "  KV read per decode step (GB/sequence)", fmt(att["kv_read_gb_per_step_per_sequence"], 3)
    )
    if cap is not None:
        if cap.feasible:
            t.add_row("max rate within SLO (req/s)", fmt(cap.rate_rps, 2))
            t.add_row("  p95 TTFT / TPOT ms", f"{cap.p95_ttft_ms:.0f} / {cap.p95_tpot_ms:.1f}")
            t.add_row("  output tokens/s", fmt(cap.tokens_per_s, 0))
            t.add_row("  batch cap", str(cap.batch))
        else:
            t.add_row("SLO", f"not reachable: {cap.reason}")
    return t
