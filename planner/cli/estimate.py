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

from planner.base.errors import ExitCode, InputError
from planner.base.units import parse_count
from planner.cli.estimate_tables import fmt, serve_table, train_table, vendor_row
from planner.cli.options import acceptance_option
from planner.inputs.catalog import CATALOG_DIR, GpuSpec, ModelArch, load_gpus, load_models
from planner.inputs.slo_units import check_floor, unit_warning
from planner.physics import vendor
from planner.physics.calibration.values import (
    CALIBRATION_PATH,
    Calibration,
    PrefixReuse,
    load_calibration,
)
from planner.physics.moe import attention_facts
from planner.physics.realized import DEFAULT_STACK, STACKS
from planner.physics.serve import (
    PRECISIONS,
    TP_SIZES,
    ep_possible,
    estimate_serve,
    replica_capacity,
    with_layout,
)
from planner.physics.serving import (
    Deployment,
    Worker,
    WorkerPhysics,
    deployment_capacity,
    estimate_deployment,
    gpus_error,
    parse_worker,
)
from planner.physics.serving.deployment import MAX_WORKER_GPUS, MODES
from planner.physics.serving.prefix import with_prefix
from planner.physics.serving.worker import acceptance_assumed, with_draft_acceptance
from planner.physics.train import METHODS, derive_model, estimate_train, h800_from

# The most concurrent requests ``estimate serve --batch`` takes. DeepSeek's whole V3/R1 service
# streamed 168B output tokens a day at 20-22 tokens/s per request (DeepSeek, "Inference System
# Overview", 2025-03-01): ~90,000 requests in flight on ~2,200 H800s. Ten times that is beyond
# any deployment one estimate describes; larger numbers are typos (a 1e30 batch printed a 1e27-ms
# TTFT as a result, with only a note).
MAX_SERVE_BATCH = 1_000_000


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
    from planner.physics.calibration.values import default_calibration

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


_TRAIN_GPUS = click.option(
    "--gpus",
    "gpus",
    required=True,
    type=click.IntRange(1, 1_000_000),
    metavar="K",
    help="number of GPUs",
)
_SERVE_GPUS = click.option(
    "--gpus",
    "gpus",
    default=None,
    type=click.IntRange(1, MAX_WORKER_GPUS),
    metavar="N",
    help="GPUs of one aggregated worker: 1, 2, 4 or 8 within one server; on a rack-scale GPU "
    "(GB200/GB300 NVL72) 1, 2 or a multiple of 4 up to 72; across servers a multiple of the "
    "server (or rack) size, at the scale-out fabric's cost. Not with --prefill/--decode.",
)


def _common(f, gpus_option=None):
    opts = [
        click.option("--model", "model_id", metavar="ID", help="model id from the model catalog"),
        click.option(
            "--params", metavar="N", help="or: parameter count (7e9, 7B) of a Llama-like model"
        ),
        click.option(
            "--gpu", "gpu_id", required=True, metavar="ID", help="GPU id from the catalog"
        ),
        gpus_option or _TRAIN_GPUS,
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
    calib = _calib(calib_file)
    est = estimate_train(
        model,
        gpu,
        gpus,
        n_tokens,
        method,
        calib,
        seq_len,
        precision=precision,
        stack=stack.lower(),
    )
    _check_train_scale(est, n_tokens, method, calib, seq_len)
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
        table = train_table(model, gpu, gpus, n_tokens, method, est)
        table.add_row(*vendor_row(gpu, "train", "MFU"))
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


def _check_batch(batch: int | None) -> None:
    """Refuse a ``--batch`` below 1 or above :data:`MAX_SERVE_BATCH` (exit 2)."""
    if batch is not None and not 1 <= batch <= MAX_SERVE_BATCH:
        raise InputError(
            f"--batch: 1 to {MAX_SERVE_BATCH:,} concurrent requests (the most is ~10x DeepSeek's "
            f"whole V3/R1 service), got {batch:,}"
        )


def _check_train_scale(
    est: Any, tokens: float, method: str, calib: Calibration, seq_len: int
) -> None:
    """Refuse GPUs that would never see a token (exit 2); warn about a batch thinner than
    the data-parallel replicas (:mod:`planner.optimize.train_scale`)."""
    from planner.optimize.train_scale import batch_tokens, idle_replicas, thin_batch

    why = idle_replicas(est, tokens, seq_len)
    if why is not None:
        raise InputError(f"--gpus: {why}; use fewer GPUs or more --tokens")
    note = thin_batch(est, batch_tokens(tokens, method, calib), seq_len)
    if note is not None:
        click.echo(f"warning: --gpus: {note}", err=True)


def _exit_unless(fits: bool) -> None:
    """Exit 3 (does not fit) after printing the estimate, so scripts can branch on it."""
    if not fits:
        sys.exit(int(ExitCode.INFEASIBLE))


@estimate.command("serve")
@(lambda f: _common(f, _SERVE_GPUS))
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
    "--batch",
    type=int,
    default=None,
    help=f"concurrent requests of the whole deployment, 1 to {MAX_SERVE_BATCH:,} "
    "(default: most that fit)",
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
    type=click.Choice(["auto", *MODES], case_sensitive=False),
    default="auto",
    show_default=True,
    help="with --gpus, a MoE's worker mode: experts sliced across the GPUs (tp), whole experts "
    "per GPU with tensor-parallel attention (ep) or data-parallel attention (dep); auto keeps "
    "the faster of tp and ep within one server, the fastest of tp, ep and dep beyond it",
)
@click.option(
    "--prefill",
    "prefill_spec",
    metavar="WxG:MODE",
    default=None,
    help="disaggregated: W prefill workers of G GPUs in MODE (tp|ep|dep), e.g. 4x4:dep; "
    "needs --decode",
)
@click.option(
    "--decode",
    "decode_spec",
    metavar="WxG:MODE",
    default=None,
    help="W decode workers of G GPUs in MODE, e.g. 1x32:dep; alone: W aggregated workers "
    "(each prefills and decodes)",
)
@click.option(
    "--mtp",
    is_flag=True,
    help="decode with the model's multi-token-prediction layers as a speculative draft "
    "(DeepSeek-V3/R1)",
)
@click.option(
    "--acceptance",
    "acceptance",
    metavar="AL[,AL...]",
    default=None,
    help="with --mtp: the measured acceptance length (tokens per verification step, the "
    "verified one included) at --draft tokens, or a list at drafts 1,2,...; default: the "
    "model's catalog figure, else the calibration's fitted curve",
)
@click.option(
    "--cached-share",
    "cached_share",
    type=click.FloatRange(0.0, 0.999),
    default=None,
    help="share of each prompt already in the prefix cache (an agentic session's earlier turns): "
    "prefill is priced on the rest",
)
@click.option(
    "--draft",
    "draft",
    type=click.IntRange(1, 16),
    default=None,
    help="with --mtp --acceptance AL: the draft length AL was measured at",
)
def serve_cmd(
    model_id: str | None,
    params: str | None,
    gpu_id: str,
    gpus: int | None,
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
    prefill_spec: str | None,
    decode_spec: str | None,
    mtp: bool,
    acceptance: str | None,
    cached_share: float | None,
    draft: int | None,
) -> None:
    """Throughput, TTFT, TPOT and memory of one serving deployment: one aggregated worker of
    --gpus GPUs (--layout), or --decode workers with optional --prefill workers
    (disaggregated), optionally with --mtp."""
    _check_serve_args(prompt, output, batch, slo_ttft_ms, slo_tpot_ms)
    model = _pick_model(model_id, params, models_file)
    gpu = _pick_gpu(gpu_id, gpus_file)
    calib = _serve_calibration(calib_file, acceptance, draft, mtp, cached_share)
    precision = _weight_only_fp4(precision.lower(), gpu)
    layout = layout.lower()
    dep = _deployment(model, gpu, gpus, layout, prefill_spec, decode_spec, mtp, calib)
    if dep is None:  # today's replica: 1-8 GPUs of one server, tp or ep, no MTP
        assert gpus is not None
        if not _beyond_slots(model, gpu, gpus, precision, prompt, output, batch, calib, layout):
            _legacy_serve(model, gpu, gpus, precision, prompt, output, batch, slo_ttft_ms,
                          slo_tpot_ms, layout, calib, as_json)  # fmt: skip
            return
        # more concurrent requests than KV-cache slots: the deployment path, where the rest
        # wait for a slot (a closed-loop benchmark at that concurrency runs, it does not fail)
        dep = Deployment(Worker(gpus, "tp" if layout == "auto" else layout), None, mtp)
    deps = [dep] if layout == "auto" or dep.disaggregated else [dep]
    if layout == "auto" and decode_spec is None and model.moe is not None and gpus and gpus > 1:
        deps = [Deployment(Worker(gpus, m), None, mtp) for m in MODES]
    dep, est = _fastest(model, gpu, deps, precision, prompt, output, batch, calib)
    if not est.fits and est.reason and "weights" in est.reason:
        est = _with_released_hint(est, model, precision)
    slots = _most_that_fit(model, gpu, dep, precision, prompt, output, calib)
    if est.fits and est.batch > slots:
        click.echo(
            f"note: the KV cache holds {slots} of the {est.batch} concurrent requests; "
            "the rest wait for a slot (their wait is in ttft_ms)",
            err=True,
        )
    out: dict[str, Any] = {
        "model": model.id,
        "params": model.params,
        "gpu": gpu.id,
        "prompt": prompt,
        "output": output,
        **asdict(est),
        "tokens_per_s_per_gpu": est.tokens_per_s / est.gpus,
        "kv_slots": slots,
        "attention": attention_facts(model, precision, prompt + output),
        "deployment": dep.to_dict(),
        "vendor_efficiency": vendor.describe(gpu, "serve"),
    }
    if dep.mtp:
        what, src = acceptance_assumed(model, calib)
        out["speculative"] = {"acceptance": what, "source": src}
    cap = None
    if slo_ttft_ms is not None and slo_tpot_ms is not None:
        cap = deployment_capacity(
            model, gpu, dep, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib
        )
        out["capacity"] = {"slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms, **asdict(cap)}
    if as_json:
        click.echo(json.dumps(_finite(out), indent=2))
    else:
        table = serve_table(model, gpu, dep.label(), precision, prompt, output, est, cap)
        table.add_row("output tokens/s per GPU", fmt(est.tokens_per_s / est.gpus, 0))
        if "speculative" in out:
            table.add_row("speculative decoding", out["speculative"]["acceptance"])
        table.add_row(*vendor_row(gpu, "serve", "tokens/s"))
        Console().print(table)
    _exit_unless(est.fits and (cap is None or cap.feasible))


def _check_serve_args(
    prompt: int, output: int, batch: int | None, ttft: float | None, tpot: float | None
) -> None:
    """Token counts, batch and SLO of ``estimate serve``: InputError naming the option."""
    if prompt < 1 or output < 1:
        raise InputError("--prompt and --output must be at least 1 token")
    _check_batch(batch)
    if (ttft is None) != (tpot is None):
        raise InputError("give both --slo-ttft-ms and --slo-tpot-ms, or neither")
    for name, v in (("--slo-ttft-ms", ttft), ("--slo-tpot-ms", tpot)):
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise InputError(f"{name} must be a positive number of milliseconds, got {v}")
    _check_slo_units(ttft, tpot)


def _serve_calibration(
    path: Path | None, acceptance: str | None, draft: int | None, mtp: bool, cached: float | None
) -> Calibration:
    """The calibration file with ``--acceptance``/``--draft`` and ``--cached-share`` applied."""
    calib = with_draft_acceptance(_calib(path), acceptance_option(acceptance, draft, mtp))
    if cached:
        reuse = PrefixReuse(cached_share=cached, source="estimate serve --cached-share")
        calib = with_prefix(calib, reuse)
    return calib


def _fastest(
    model: ModelArch,
    gpu: GpuSpec,
    deps: list[Deployment],
    precision: str,
    prompt: int,
    output: int,
    batch: int | None,
    calib: Calibration,
) -> tuple[Deployment, Any]:
    """The deployment of ``deps`` (and its estimate) with the most tokens/s that fits, at
    ``batch`` or the most requests that fit."""
    best = None
    for d in deps:
        c = batch or _most_that_fit(model, gpu, d, precision, prompt, output, calib)
        e = estimate_deployment(model, gpu, d, precision, prompt, output, max(c, 1), calib)
        if best is None or (e.fits and (not best[1].fits or e.tokens_per_s > best[1].tokens_per_s)):
            best = (d, e)
    assert best is not None  # deps is never empty
    return best


def _deployment(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int | None,
    layout: str,
    prefill_spec: str | None,
    decode_spec: str | None,
    mtp: bool,
    calib: Calibration,
) -> Deployment | None:
    """The deployment the options name (None: today's replica, served by the legacy path);
    a spec that cannot be built is an InputError (exit 2) saying what is allowed."""
    if prefill_spec is not None and decode_spec is None:
        raise InputError("--prefill needs --decode (the decode workers it hands the KV cache to)")
    if decode_spec is not None:
        if gpus is not None:
            raise InputError("give --gpus (one aggregated worker) or --decode/--prefill, not both")
        try:
            dec = parse_worker(decode_spec, "--decode")
            pre = None if prefill_spec is None else parse_worker(prefill_spec, "--prefill")
        except ValueError as e:
            raise InputError(str(e)) from None
        dep = Deployment(dec, pre, mtp)
    else:
        if gpus is None:
            raise InputError(
                "give --gpus N (one aggregated worker) or --decode WxG:MODE "
                "[--prefill WxG:MODE] (a deployment)"
            )
        mode = "tp" if layout == "auto" else layout
        legacy_ok = gpus in TP_SIZES and gpus <= gpu.node_gpus and mode in ("tp", "ep")
        if not mtp and legacy_ok and (layout != "auto" or gpus <= 8):
            if mode == "ep" and model.moe is None:
                raise InputError(
                    f"--layout ep places whole experts per GPU; {model.id} is dense (use tp)"
                )
            return None
        dep = Deployment(Worker(gpus, mode), None, mtp)
    for name, w in (
        ("--prefill", dep.prefill),
        ("--decode" if decode_spec else "--gpus", dep.decode),
    ):
        if w is None:
            continue
        why = gpus_error(gpu, w.gpus, calib)
        if why is not None:
            raise InputError(f"{name}: {why}")
        if w.mode in ("ep", "dep") and model.moe is None:
            raise InputError(
                f"{name}: mode {w.mode} places whole experts per GPU; {model.id} is dense (use tp)"
            )
    if mtp and model.num_nextn_predict_layers < 1:
        click.echo(
            f"note: {model.id} has no multi-token-prediction layers; --mtp assumes a one-layer "
            "draft head (EAGLE-style) with the MTP acceptance",
            err=True,
        )
    return dep


def _weight_only_fp4(precision: str, gpu: GpuSpec) -> str:
    """``fp4`` on a GPU without FP4 tensor cores (Hopper, MI300X/MI325X) is served as engines
    serve MXFP4 checkpoints there (gpt-oss on H100: vLLM's Marlin / Triton MXFP4 kernels):
    4-bit weights dequantized into 16-bit GEMMs, i.e. the physics' weight-only ``int4``."""
    if precision == "fp4" and gpu.fp4_dense_tflops is None:
        click.echo(
            f"note: {gpu.id} has no FP4 tensor cores; fp4 weights are served weight-only "
            "(dequantized to bf16 GEMMs), estimated as --precision int4",
            err=True,
        )
        return "int4"
    return precision


def _check_slo_units(ttft_ms: float | None, tpot_ms: float | None) -> None:
    """The problem file's rules for targets that look like seconds (:mod:`planner.inputs.slo_units`):
    below a floor no hardware reaches, exit 2; below what serving systems publish, a warning."""
    for flag, field, ms in (
        ("--slo-ttft-ms", "p95_ttft_ms", ttft_ms),
        ("--slo-tpot-ms", "p95_tpot_ms", tpot_ms),
    ):
        if ms is None:
            continue
        try:
            check_floor(field, ms)
        except ValueError as exc:
            raise InputError(f"{flag}: {exc}") from None
        warning = unit_warning(flag, field, ms)
        if warning:
            click.echo(f"warning: {warning.replace(f'slo.{field} ', '')}", err=True)


def _beyond_slots(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int | None,
    calib: Calibration,
    layout: str,
) -> bool:
    """True when ``--batch`` exceeds the KV-cache slots of today's replica in every layout it
    would try (the legacy estimate refuses such a batch; the deployment path queues it)."""
    if batch is None:
        return False
    est = _best_layout(model, gpu, gpus, precision, prompt, output, batch, calib, layout)
    if est.fits:
        return False
    top = _best_layout(model, gpu, gpus, precision, prompt, output, None, calib, layout)
    return top.fits and top.batch < batch


def _most_that_fit(model, gpu, dep: Deployment, precision, prompt, output, calib) -> int:
    w = WorkerPhysics(model, gpu, dep.decode, precision, calib, dep.mtp)
    if w.check(prompt, output) is not None:
        return 1
    return max(1, w.max_batch(prompt, output) * dep.decode.count)


def _with_released_hint(est: Any, model: ModelArch, precision: str) -> Any:
    """The estimate with the model's released precision suggested when it is smaller."""
    from dataclasses import replace

    rel = model.released_precision or "bf16"
    if rel == precision or (est.reason or "").endswith("--precision " + rel):
        return est
    bytes_of = {"fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.56, "fp4": 0.56}
    if bytes_of.get(rel, 2) >= bytes_of.get(precision, 2):
        return est
    return replace(
        est, reason=f"{est.reason}; {model.name} is released in {rel}; try --precision {rel}"
    )


def _legacy_serve(
    model: ModelArch,
    gpu: GpuSpec,
    gpus: int,
    precision: str,
    prompt: int,
    output: int,
    batch: int | None,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    layout: str,
    calib: Calibration,
    as_json: bool,
) -> None:
    """One replica of 1-8 GPUs of one server in tp or ep (today's physics, unchanged)."""
    est = _best_layout(model, gpu, gpus, precision, prompt, output, batch, calib, layout)
    calib = with_layout(calib, est.layout)
    if not est.fits and est.reason and "weights" in est.reason:
        est = _with_released_hint(est, model, precision)
    out: dict[str, Any] = {
        "model": model.id,
        "params": model.params,
        "gpu": gpu.id,
        "prompt": prompt,
        "output": output,
        **asdict(est),
        "tokens_per_s_per_gpu": est.tokens_per_s / gpus,
        # the same WxG:MODE label as every other deployment (was the bare mode, "tp" / "ep")
        "layout": Deployment(Worker(gpus, est.layout)).label(),
        "deployment": Deployment(Worker(gpus, est.layout)).to_dict(),
        "attention": attention_facts(model, precision, prompt + output),
        "vendor_efficiency": vendor.describe(gpu, "serve"),
    }
    if model.moe is not None and est.fits:
        out["moe"] = _moe_facts(model, gpus, precision, est.batch, calib)
    cap = None
    if slo_ttft_ms is not None and slo_tpot_ms is not None:
        cap = replica_capacity(
            model, gpu, gpus, precision, prompt, output, slo_ttft_ms, slo_tpot_ms, calib,
            layout=None if layout == "auto" else layout,
        )  # fmt: skip
        out["capacity"] = {"slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms, **asdict(cap)}
    if as_json:
        click.echo(json.dumps(_finite(out), indent=2))
    else:
        table = serve_table(model, gpu, f"{gpus}x", precision, prompt, output, est, cap)
        if "moe" in out:
            f = out["moe"]
            table.add_row("MoE layout", "experts whole per GPU (ep)" if est.layout == "ep" else
                          "experts sliced across the GPUs (tp)")  # fmt: skip
            table.add_row(
                "experts touched per layer (decode)",
                f"{f['experts_touched_per_layer']:.1f} of {f['experts_per_layer']}",
            )
            table.add_row(
                "weights read per step (GB/GPU)", fmt(f["weights_read_per_step_gb_per_gpu"])
            )
        table.add_row(*vendor_row(gpu, "serve", "tokens/s"))
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
