"""``planner estimate``: the physics of one configuration, without the optimizer.

``planner estimate train`` answers "how long, how much memory, which layout" for a training job on
K GPUs of one type; ``planner estimate serve`` answers "what throughput, TTFT and TPOT" for one
serving replica (and, given SLOs, the request rate it sustains). Catalog ids come from
``catalogs/gpus.yaml`` and ``catalogs/models.yaml``; ``--params N`` stands in for a model that is
not in the catalog with a Llama-like architecture derived from N.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from planner.base.errors import ExitCode, InputError
from planner.base.units import parse_count
from planner.inputs.catalog import CATALOG_DIR, GpuSpec, ModelArch, load_gpus, load_models
from planner.physics import vendor
from planner.physics.calibration_values import CALIBRATION_PATH, Calibration, load_calibration
from planner.physics.realized import DEFAULT_STACK, STACKS
from planner.physics.serve import (
    PRECISIONS,
    TP_SIZES,
    ep_possible,
    estimate_serve,
    replica_capacity,
    with_layout,
)
from planner.physics.train import METHODS, derive_model, estimate_train, h800_from


def _pick_model(model_id: str | None, params: str | None, models_file: Path | None) -> ModelArch:
    if (model_id is None) == (params is None):
        raise InputError("give exactly one of --model ID or --params N")
    if params is not None:
        n = parse_count(params, "--params")
        if not 1e6 < n <= 1e14:
            raise InputError(f"--params: between 1e6 and 1e14 parameters, got {params}")
        return derive_model(n)
    models = load_models(models_file or CATALOG_DIR / "models.yaml")
    if model_id not in models:
        from planner.base.yamlio import did_you_mean

        raise InputError(f"unknown model {model_id!r}; " + did_you_mean(model_id, models.keys()))
    return models[model_id]


def _pick_gpu(gpu_id: str, gpus_file: Path | None) -> GpuSpec:
    gpus = load_gpus(gpus_file or CATALOG_DIR / "gpus.yaml")
    if gpu_id not in gpus:
        from planner.base.yamlio import did_you_mean

        raise InputError(f"unknown gpu {gpu_id!r}; " + did_you_mean(gpu_id, gpus.keys()))
    return gpus[gpu_id]


def _calib(path: Path | None) -> Calibration:
    from planner.physics.calibration_values import default_calibration

    return load_calibration(path) if path else default_calibration()


def _finite(obj: Any) -> Any:
    """JSON-safe: infinities and NaN become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.{digits}f}"


def _common(f):
    opts = [
        click.option("--model", "model_id", metavar="ID", help="model id from the model catalog"),
        click.option(
            "--params", metavar="N", help="or: parameter count (7e9, 7B) of a Llama-like model"
        ),
        click.option(
            "--gpu", "gpu_id", required=True, metavar="ID", help="GPU id from the catalog"
        ),
        click.option(
            "--gpus",
            "gpus",
            required=True,
            type=click.IntRange(1, 1_000_000),
            metavar="K",
            help="number of GPUs",
        ),
        click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table"),
        click.option(
            "--gpus-file",
            type=click.Path(path_type=Path),
            default=None,
            help="GPU catalog (default catalogs/gpus.yaml)",
        ),
        click.option(
            "--models-file",
            type=click.Path(path_type=Path),
            default=None,
            help="model catalog (default catalogs/models.yaml)",
        ),
        click.option(
            "--calibration",
            "calib_file",
            type=click.Path(path_type=Path),
            default=None,
            help=f"calibration file (default {CALIBRATION_PATH.name})",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.group("estimate")
def estimate() -> None:
    """Physics estimates for one configuration (training time or serving latency)."""


@estimate.command("train")
@_common
@click.option("--tokens", required=True, metavar="N", help="training tokens (1e12, 300B, 2T)")
@click.option(
    "--method", type=click.Choice(METHODS, case_sensitive=False), default="full", show_default=True
)
@click.option("--seq-len", type=click.IntRange(128, 1_048_576), default=4096, show_default=True)
@click.option(
    "--precision",
    type=click.Choice(["bf16", "fp8"], case_sensitive=False),
    default="bf16",
    show_default=True,
    help="training precision (fp8 needs FP8 tensor cores)",
)
@click.option(
    "--stack",
    type=click.Choice(STACKS, case_sensitive=False),
    default=DEFAULT_STACK,
    show_default=True,
    help="how real runs of this team compare with benchmarks (README: stack profiles)",
)
def train_cmd(
    model_id: str | None,
    params: str | None,
    gpu_id: str,
    gpus: int,
    as_json: bool,
    gpus_file: Path | None,
    models_file: Path | None,
    calib_file: Path | None,
    tokens: str,
    method: str,
    seq_len: int,
    precision: str,
    stack: str,
) -> None:
    """Time, GPU-hours, memory per GPU and the fastest parallel layout of a training job."""
    if gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {gpus}")
    if seq_len < 1:
        raise InputError(f"--seq-len must be at least 1, got {seq_len}")
    n_tokens = parse_count(tokens, "--tokens")
    if n_tokens > 1e15:
        raise InputError(
            f"--tokens: at most 1e15 (the largest published runs used ~1.5e13), got {tokens}"
        )
    model = _pick_model(model_id, params, models_file)
    gpu = _train_gpu(gpu_id, gpus_file)
    est = estimate_train(
        model,
        gpu,
        gpus,
        n_tokens,
        method,
        _calib(calib_file),
        seq_len,
        precision=precision,
        stack=stack.lower(),
    )
    out = {
        "model": model.id,
        "params": model.params,
        "gpu": gpu.id,
        "gpus": gpus,
        "tokens": n_tokens,
        "method": method,
        "seq_len": seq_len,
        "precision": precision,
        **asdict(est),
        "vendor_efficiency": vendor.describe(gpu, "train"),
    }
    if as_json:
        click.echo(json.dumps(_finite(out), indent=2))
    else:
        table = _train_table(model, gpu, gpus, n_tokens, method, est)
        table.add_row(*_vendor_row(gpu, "train", "MFU"))
        Console().print(table)
    _exit_unless(est.fits)


def _train_gpu(gpu_id: str, gpus_file: Path | None) -> GpuSpec:
    """The catalog's GPU, or for ``h800`` (absent from the purchase catalog) the H100 SXM with
    400 GB/s NVLink that DeepSeek trained on (:func:`planner.physics.train.h800_from`)."""
    if gpu_id == "h800":
        gpus = load_gpus(gpus_file or CATALOG_DIR / "gpus.yaml")
        if "h800" not in gpus and "h100-sxm" in gpus:
            return h800_from(gpus["h100-sxm"])
    return _pick_gpu(gpu_id, gpus_file)


def _vendor_row(gpu: GpuSpec, kind: vendor.Kind, what: str) -> tuple[str, str]:
    """The table row of the vendor's software efficiency, e.g. ``x 0.81 (amd, 0.68-0.99)``."""
    d = vendor.describe(gpu, kind)
    return (
        f"vendor software efficiency (x {what})",
        f"x {d['value']:g} ({d['vendor']}, {d['low']:g}-{d['high']:g})",
    )


def _exit_unless(fits: bool) -> None:
    """Exit 3 (does not fit) after printing the estimate, so scripts can branch on it."""
    if not fits:
        sys.exit(int(ExitCode.INFEASIBLE))


def _size(model: ModelArch) -> str:
    """``70.6B`` or, for a mixture of experts, ``671B, 37B active``."""
    total = f"{model.params / 1e9:,.3g}B" if model.params < 1e12 else f"{model.params / 1e9:,.0f}B"
    if model.moe is None:
        return total
    active = model.active_params or model.computed_active_params
    return f"{total}, {active / 1e9:,.3g}B active"


def _train_table(
    model: ModelArch, gpu: GpuSpec, gpus: int, n_tokens: float, method: str, est: Any
) -> Table:
    t = Table(
        title=f"train {model.id} ({_size(model)}) on {gpus}x {gpu.id}, "
        f"{n_tokens:.3g} tokens, {method}"
    )
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("fits", "yes" if est.fits else "NO")
    if est.reason:
        t.add_row("reason", est.reason)
    t.add_row(f"wall hours (median, {est.stack} stack)", _fmt(est.wall_hours))
    t.add_row("  P10 - P90", f"{_fmt(est.wall_hours_p10)} - {_fmt(est.wall_hours_p90)}")
    t.add_row("  benchmark steady state", _fmt(est.steady_wall_hours))
    t.add_row("GPU-hours (median)", _fmt(est.gpu_hours, 0))
    t.add_row("  P10 - P90", f"{_fmt(est.gpu_hours_p10, 0)} - {_fmt(est.gpu_hours_p90, 0)}")
    t.add_row("tokens/s per GPU", _fmt(est.tokens_per_s_per_gpu, 0))
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
    t.add_row("memory per GPU (GB)", f"{_fmt(est.memory_per_gpu_gb)} of {gpu.memory_gb.value:g}")
    for k, v in est.memory.items():
        t.add_row(f"  {k}", _fmt(v))
    return t


@estimate.command("serve")
@_common
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS, case_sensitive=False),
    default="bf16",
    show_default=True,
)
@click.option(
    "--prompt",
    type=click.IntRange(1, 1_000_000),
    required=True,
    metavar="N",
    help="prompt tokens per request",
)
@click.option(
    "--output",
    type=click.IntRange(1, 1_000_000),
    required=True,
    metavar="N",
    help="output tokens per request",
)
@click.option(
    "--batch", type=int, default=None, help="concurrent requests (default: most that fit)"
)
@click.option(
    "--slo-ttft-ms",
    type=float,
    default=None,
    help="with --slo-tpot-ms: also the highest request rate with p95 TTFT/TPOT within the SLO",
)
@click.option("--slo-tpot-ms", type=float, default=None)
@click.option(
    "--layout",
    type=click.Choice(["auto", "tp", "ep"], case_sensitive=False),
    default="auto",
    show_default=True,
    help="a MoE on several GPUs: experts sliced across them (tp) or whole per GPU (ep); "
    "auto keeps the faster",
)
def serve_cmd(
    model_id: str | None,
    params: str | None,
    gpu_id: str,
    gpus: int,
    as_json: bool,
    gpus_file: Path | None,
    models_file: Path | None,
    calib_file: Path | None,
    precision: str,
    prompt: int,
    output: int,
    batch: int | None,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    layout: str,
) -> None:
    """Throughput, TTFT, TPOT and memory of one serving replica (gpus = tensor-parallel size)."""
    if gpus not in TP_SIZES:
        raise InputError(
            f"--gpus is the tensor-parallel size of one replica: 1, 2, 4 or 8, got {gpus}"
        )
    if prompt < 1 or output < 1:
        raise InputError("--prompt and --output must be at least 1 token")
    if batch is not None and batch < 1:
        raise InputError(f"--batch must be at least 1, got {batch}")
    if (slo_ttft_ms is None) != (slo_tpot_ms is None):
        raise InputError("give both --slo-ttft-ms and --slo-tpot-ms, or neither")
    for name, v in (("--slo-ttft-ms", slo_ttft_ms), ("--slo-tpot-ms", slo_tpot_ms)):
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise InputError(f"{name} must be a positive number of milliseconds, got {v}")
    model = _pick_model(model_id, params, models_file)
    gpu = _pick_gpu(gpu_id, gpus_file)
    calib = _calib(calib_file)
    est = _best_layout(model, gpu, gpus, precision, prompt, output, batch, calib, layout.lower())
    calib = with_layout(calib, est.layout)
    out: dict[str, Any] = {
        "model": model.id,
        "params": model.params,
        "gpu": gpu.id,
        "prompt": prompt,
        "output": output,
        **asdict(est),
        "vendor_efficiency": vendor.describe(gpu, "serve"),
    }
    if model.moe is not None and est.fits:
        out["moe"] = _moe_facts(model, gpus, precision, est.batch, calib)
    cap = None
    if slo_ttft_ms is not None and slo_tpot_ms is not None:
        cap = replica_capacity(
            model, gpu, gpus, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib,
            layout=None if layout.lower() == "auto" else layout.lower(),
        )  # fmt: skip
        out["capacity"] = {"slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms, **asdict(cap)}
    if as_json:
        click.echo(json.dumps(_finite(out), indent=2))
    else:
        table = _serve_table(model, gpu, gpus, precision, prompt, output, est, cap)
        if "moe" in out:
            f = out["moe"]
            table.add_row("MoE layout", "experts whole per GPU (ep)" if est.layout == "ep" else
                          "experts sliced across the GPUs (tp)")  # fmt: skip
            table.add_row(
                "experts touched per layer (decode)",
                f"{f['experts_touched_per_layer']:.1f} of {f['experts_per_layer']}",
            )
            table.add_row(
                "weights read per step (GB/GPU)", _fmt(f["weights_read_per_step_gb_per_gpu"])
            )
        table.add_row(*_vendor_row(gpu, "serve", "tokens/s"))
        Console().print(table)
    _exit_unless(est.fits and (cap is None or cap.feasible))


def _best_layout(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int | None,
    calib: Calibration,
    layout: str,
) -> Any:
    """The estimate in ``layout`` (``auto``: the faster of tp and ep where both apply)."""
    if layout != "auto":
        return estimate_serve(
            model, gpu, gpus, precision, prompt, output, batch, with_layout(calib, layout)
        )
    tp = estimate_serve(model, gpu, gpus, precision, prompt, output, batch, calib)
    if not ep_possible(model, gpus):
        return tp
    ep = estimate_serve(
        model, gpu, gpus, precision, prompt, output, batch, with_layout(calib, "ep")
    )
    return ep if ep.fits and (not tp.fits or ep.tokens_per_s > tp.tokens_per_s) else tp


def _moe_facts(
    model: ModelArch, gpus: int, precision: str, batch: int, calib: Calibration
) -> dict[str, float]:
    """What a decode step of ``batch`` reads: distinct experts per MoE layer and weights/GPU."""
    from planner.physics.moe import experts_touched, weight_params_read
    from planner.physics.serve import weight_bytes_per_param

    assert model.moe is not None
    m = model.moe
    read = weight_params_read(model, batch) * weight_bytes_per_param(precision, calib) / gpus
    if calib.moe_layout == "ep" and ep_possible(model, gpus):
        from planner.physics.moe import ep_routed_params_read, routed_params_read

        rest = weight_params_read(model, batch) - routed_params_read(model, batch)
        busiest = rest / gpus + ep_routed_params_read(model, batch, gpus)
        read = busiest * weight_bytes_per_param(precision, calib)
    return {
        "active_params": model.active_params or model.computed_active_params,
        "experts_touched_per_layer": experts_touched(m.experts, m.experts_per_token, batch),
        "experts_per_layer": m.experts,
        "weights_read_per_step_gb_per_gpu": read / 1e9,
    }


def _serve_table(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    est: Any,
    cap: Any,
) -> Table:
    t = Table(
        title=f"serve {model.id} on {gpus}x {gpu.id}, {precision}, {prompt} in / {output} out"
    )
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("fits", "yes" if est.fits else "NO")
    if est.reason:
        t.add_row("reason", est.reason)
    t.add_row("batch", str(est.batch))
    t.add_row("output tokens/s (replica)", _fmt(est.tokens_per_s, 0))
    t.add_row("TTFT ms (unloaded)", _fmt(est.ttft_ms))
    t.add_row("TPOT ms (at this batch)", _fmt(est.tpot_ms, 2))
    t.add_row("memory per GPU (GB)", f"{_fmt(est.memory_per_gpu_gb)} of {gpu.memory_gb.value:g}")
    for k, v in est.memory.items():
        t.add_row(f"  {k}", _fmt(v))
    if cap is not None:
        if cap.feasible:
            t.add_row("max rate within SLO (req/s)", _fmt(cap.rate_rps, 2))
            t.add_row("  p95 TTFT / TPOT ms", f"{cap.p95_ttft_ms:.0f} / {cap.p95_tpot_ms:.1f}")
            t.add_row("  output tokens/s", _fmt(cap.tokens_per_s, 0))
            t.add_row("  batch cap", str(cap.batch))
        else:
            t.add_row("SLO", f"not reachable: {cap.reason}")
    return t
