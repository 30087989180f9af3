"""Calibration: every efficiency factor of the performance model, with its source.

The factors live in ``catalogs/calibration.yaml``; :func:`load_calibration` validates that file
(unknown keys are errors) and :func:`default_calibration` loads the shipped one once.
``python -m planner.physics.calibration`` prints the calibration table: the prediction for every
published figure of ``shared/reference/published.yaml`` that the model covers, its error, and
whether a calibration factor was *tuned* to that figure or the figure is only *checked*.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from planner.catalog import CATALOG_DIR, GpuSpec, Sourced, Strict
from planner.yamlio import load_yaml, validate


class FamilyFactor(Sourced):
    """A factor that depends on the GPU family; ``match`` lists id/name fragments of the family."""

    family: str
    match: tuple[str, ...] = Field(min_length=1)


class TrainCalibration(Strict):
    mfu_family: tuple[FamilyFactor, ...] = Field(min_length=1)
    mfu_default: Sourced
    mfu_size_half_hidden: Sourced
    gemm_half_tokens: Sourced
    recompute_factor: Sourced
    fp8_speedup: Sourced
    qlora_speed_factor: Sourced
    lora_param_fraction: Sourced
    qlora_bytes_per_param: Sourced
    global_batch_tokens: Sourced
    finetune_global_batch_tokens: Sourced
    dp_overlap: Sourced
    goodput: Sourced
    framework_overhead_gb: Sourced
    usable_memory_fraction: Sourced


class ServeCalibration(Strict):
    prefill_compute_eff: Sourced
    decode_compute_eff: Sourced
    weight_bw_eff: Sourced
    kv_bw_eff: Sourced
    int4_bw_factor: Sourced
    fp8_compute_factor: Sourced
    int4_bytes_per_param: Sourced
    layer_overhead_us: Sourced
    overhead_gb: Sourced
    activation_gb_per_1k_tokens: Sourced
    usable_memory_fraction: Sourced


class LinkCalibration(Strict):
    pcie_x16_gbs_gen3: Sourced
    nvlink_eff: Sourced
    pcie_eff: Sourced
    no_p2p_factor: Sourced
    nvlink_latency_us: Sourced
    pcie_latency_us: Sourced
    no_p2p_latency_us: Sourced
    inter_node_gbs_sxm: Sourced
    inter_node_gbs_pcie: Sourced
    inter_node_gbs_consumer: Sourced
    inter_node_latency_us: Sourced
    pcie_node_gpus: Sourced


class Calibration(Strict):
    train: TrainCalibration
    serve: ServeCalibration
    links: LinkCalibration


CALIBRATION_PATH = CATALOG_DIR / "calibration.yaml"


def load_calibration(path: str | Path = CALIBRATION_PATH) -> Calibration:
    """Load and validate a calibration file (InputError with file:line on any problem)."""
    return validate(Calibration, load_yaml(path), "calibration file")


@functools.cache
def default_calibration() -> Calibration:
    """The shipped ``catalogs/calibration.yaml``, loaded once."""
    return load_calibration(CALIBRATION_PATH)


def _norm(text: str) -> str:
    """Lower-case alphanumerics only: ``'RTX 4090'`` -> ``'rtx4090'``.

    >>> _norm("NVIDIA GeForce RTX-4090")
    'nvidiageforcertx4090'
    """
    return re.sub(r"[^a-z0-9]", "", text.lower())


def gpu_family(gpu: GpuSpec, calib: Calibration) -> FamilyFactor | None:
    """The calibration family whose ``match`` fragment occurs in the GPU id or name (None: none).

    >>> from planner.physics.train import _toy_gpu
    >>> gpu_family(_toy_gpu(), default_calibration()).family
    'hopper'
    """
    return _family(gpu.id, gpu.name, calib.train.mfu_family)


@functools.lru_cache(maxsize=1024)
def _family(gid: str, name: str, families: tuple[FamilyFactor, ...]) -> FamilyFactor | None:
    key = _norm(gid) + " " + _norm(name)
    for fam in families:
        if any(_norm(m) in key for m in fam.match):
            return fam
    return None


# ----------------------------------------------------------------------------- calibration table


@dataclass(frozen=True)
class Check:
    """One published figure and how the model predicts it."""

    id: str  # published.yaml id (suffix after '#' marks a figure from that entry's conditions)
    kind: str  # "train" (throughput) or "serve" (throughput or latency)
    what: str
    unit: str
    published: float
    tuned: bool  # a calibration factor was fitted to this figure
    bound: float  # largest relative error accepted for this figure
    predict: Callable[[dict, dict, Calibration], float]


@dataclass(frozen=True)
class Row:
    check: Check
    predicted: float

    @property
    def error(self) -> float:
        """Relative error of the prediction, ``predicted / published - 1``."""
        return self.predicted / self.check.published - 1.0


def _extra_models() -> dict:
    """Published-run architectures that are not in the model catalog (from their model cards)."""
    from planner.physics.train import llama_like

    return {
        "mpt-13b": llama_like("mpt-13b", 12.85e9, 40, 5120, 40, 40, 20480, 50432),
        "mpt-70b": llama_like("mpt-70b", 64.86e9, 80, 8192, 64, 64, 32768, 50432),
        "tinyllama-1.1b": llama_like("tinyllama-1.1b", 1.1e9, 22, 2048, 32, 4, 5632, 32000),
        "gpt-j-6b": llama_like("gpt-j-6b", 6.05e9, 28, 4096, 16, 16, 16384, 50400, 2048),
        "gpt3-175b": llama_like("gpt3-175b", 175e9, 96, 12288, 96, 96, 49152, 50257, 2048),
        "bert-large": llama_like("bert-large", 0.34e9, 24, 1024, 16, 16, 4096, 30522, 512),
    }


def _train(
    model: str,
    gpu: str,
    n: int,
    seq: int,
    gbs_seqs: int,
    method: str = "full",
    precision: str = "bf16",
) -> Callable[[dict, dict, Calibration], float]:
    def f(gpus: dict, models: dict, calib: Calibration) -> float:
        from planner.physics.train import estimate_train

        e = estimate_train(
            models[model],
            gpus[gpu],
            n,
            1e9,
            method,
            calib,
            seq,
            precision=precision,
            global_batch_tokens=gbs_seqs * seq,
        )
        return e.tokens_per_s_per_gpu if e.fits else 0.0

    return f


def _train_ratio(
    model: str, gpu: str, ref: str, seq: int
) -> Callable[[dict, dict, Calibration], float]:
    def f(gpus: dict, models: dict, calib: Calibration) -> float:
        from planner.physics.train import estimate_train

        a = estimate_train(
            models[model], gpus[gpu], 1, 1e9, "full", calib, seq, global_batch_tokens=32 * seq
        )
        b = estimate_train(
            models[model], gpus[ref], 1, 1e9, "full", calib, seq, global_batch_tokens=32 * seq
        )
        return a.tokens_per_s_per_gpu / b.tokens_per_s_per_gpu

    return f


def _serve_tput(
    model: str, gpu: str, prec: str, batch: int, prompt: int = 128, output: int = 128
) -> Callable[[dict, dict, Calibration], float]:
    def f(gpus: dict, models: dict, calib: Calibration) -> float:
        from planner.physics.serve import estimate_serve

        e = estimate_serve(models[model], gpus[gpu], 1, prec, prompt, output, batch, calib)
        return e.tokens_per_s if e.fits else 0.0

    return f


def _ttft(
    model: str, gpu: str, prec: str, prompts: int, prompt: int
) -> Callable[[dict, dict, Calibration], float]:
    def f(gpus: dict, models: dict, calib: Calibration) -> float:
        from planner.physics.serve import prefill_iter_s

        return prefill_iter_s(models[model], gpus[gpu], 1, prec, prompts, prompt, calib) * 1e3

    return f


def _decode_tps(
    model: str, gpu: str, prec: str, context: int = 256
) -> Callable[[dict, dict, Calibration], float]:
    def f(gpus: dict, models: dict, calib: Calibration) -> float:
        from planner.physics.serve import decode_step_s

        return 1.0 / decode_step_s(models[model], gpus[gpu], 1, prec, 1, context, calib)

    return f


def _prefill_tps(
    model: str, gpu: str, prec: str, prompt: int = 512
) -> Callable[[dict, dict, Calibration], float]:
    def f(gpus: dict, models: dict, calib: Calibration) -> float:
        from planner.physics.serve import prefill_iter_s

        return prompt / prefill_iter_s(models[model], gpus[gpu], 1, prec, 1, prompt, calib)

    return f


TOK_S_GPU = "tok/s/GPU"


def calibration_checks() -> list[Check]:
    """Every published figure the model is compared with (ids from published.yaml)."""
    T, S = "train", "serve"
    return [
        # --- training throughput (llm-foundry MPT, BF16, FSDP; NeMo FP8; TinyLlama)
        Check(
            "llmfoundry_h100_7b_8gpu",
            T,
            "MPT-7B 8xH100 seq2048",
            TOK_S_GPU,
            10643,
            True,
            0.05,
            _train("mpt-7b", "h100-sxm", 8, 2048, 48),
        ),
        Check(
            "llmfoundry_h100_13b_8gpu",
            T,
            "MPT-13B 8xH100 seq2048",
            TOK_S_GPU,
            4792,
            False,
            0.30,
            _train("mpt-13b", "h100-sxm", 8, 2048, 16),
        ),
        Check(
            "llmfoundry_h100_30b_8gpu",
            T,
            "MPT-30B 8xH100 seq2048",
            TOK_S_GPU,
            2002,
            False,
            0.30,
            _train("mpt-30b", "h100-sxm", 8, 2048, 504),
        ),
        Check(
            "llmfoundry_h100_70b_512gpu",
            T,
            "MPT-70B 512xH100 seq2048",
            TOK_S_GPU,
            1007,
            False,
            0.25,
            _train("mpt-70b", "h100-sxm", 512, 2048, 4096),
        ),
        Check(
            "llmfoundry_a100_80gb_7b_8gpu",
            T,
            "MPT-7B 8xA100-80GB seq2048",
            TOK_S_GPU,
            4641,
            True,
            0.05,
            _train("mpt-7b", "a100-sxm-80gb", 8, 2048, 96),
        ),
        Check(
            "llmfoundry_a100_80gb_70b_64gpu",
            T,
            "MPT-70B 64xA100-80GB seq2048",
            TOK_S_GPU,
            410,
            False,
            0.25,
            _train("mpt-70b", "a100-sxm-80gb", 64, 2048, 2048),
        ),
        Check(
            "llmfoundry_a100_40gb_7b_128gpu",
            T,
            "MPT-7B 128xA100-40GB seq2048",
            TOK_S_GPU,
            3623,
            False,
            0.25,
            _train("mpt-7b", "a100-sxm-40gb", 128, 2048, 2304),
        ),
        Check(
            "tinyllama_a100_40g_throughput",
            T,
            "TinyLlama-1.1B 16xA100-40GB seq2048",
            TOK_S_GPU,
            24000,
            True,
            0.05,
            _train("tinyllama-1.1b", "a100-sxm-40gb", 16, 2048, 512),
        ),
        Check(
            "nemo2412_llama3_8b_pretrain",
            T,
            "Llama3-8B 8xH100 FP8 seq8192",
            TOK_S_GPU,
            12273,
            True,
            0.05,
            _train("llama-3-8b", "h100-sxm", 8, 8192, 128, precision="fp8"),
        ),
        Check(
            "nemo2412_llama3_70b_pretrain",
            T,
            "Llama3-70B 64xH100 FP8 seq8192",
            TOK_S_GPU,
            1524,
            False,
            0.30,
            _train("llama-3-70b", "h100-sxm", 64, 8192, 128, precision="fp8"),
        ),
        Check(
            "nemo2412_gpt3_175b_pretrain",
            T,
            "GPT3-175B 512xH100 FP8 seq2048",
            TOK_S_GPU,
            825,
            False,
            0.30,
            _train("gpt3-175b", "h100-sxm", 512, 2048, 2048, precision="fp8"),
        ),
        Check(
            "nemo2412_llama2_70b_lora",
            T,
            "Llama2-70B LoRA 8xH100 FP8 seq4096",
            TOK_S_GPU,
            2621,
            False,
            0.30,
            _train("llama-2-70b", "h100-sxm", 8, 4096, 32, "lora", "fp8"),
        ),
        Check(
            "lambda_bertlarge_fp16_rtx4090",
            T,
            "BERT-large 1 GPU: RTX 4090 / A100 (non-LLM)",
            "ratio",
            93 / 152,
            False,
            0.50,
            _train_ratio("bert-large", "rtx-4090", "a100-sxm-80gb", 384),
        ),
        Check(
            "lambda_bertlarge_fp16_rtx3090",
            T,
            "BERT-large 1 GPU: RTX 3090 / A100 (non-LLM)",
            "ratio",
            52 / 152,
            False,
            0.50,
            _train_ratio("bert-large", "rtx-3090", "a100-sxm-80gb", 384),
        ),
        # --- serving throughput (TRT-LLM static batch, 128 in / 128 out, TP1)
        Check(
            "trtllm061_h100_llama7b_128_128",
            S,
            "LLaMA-7B H100 FP8 batch 768",
            "out tok/s",
            19694,
            True,
            0.05,
            _serve_tput("llama-2-7b", "h100-sxm", "fp8", 768),
        ),
        Check(
            "trtllm061_a100_llama7b_128_128",
            S,
            "LLaMA-7B A100 FP16 batch 384",
            "out tok/s",
            5586,
            False,
            0.25,
            _serve_tput("llama-2-7b", "a100-sxm-80gb", "fp16", 384),
        ),
        Check(
            "trtllm05_l40s_llama7b_128_128",
            S,
            "LLaMA-7B L40S FP8 batch 64",
            "out tok/s",
            3240,
            False,
            0.25,
            _serve_tput("llama-2-7b", "l40s", "fp8", 64),
        ),
        Check(
            "trtllm_blog_gptj_h100_vs_a100",
            S,
            "GPT-J-6B H100 FP8 batch 64",
            "out tok/s",
            10907,
            True,
            0.05,
            _serve_tput("gpt-j-6b", "h100-sxm", "fp8", 64),
        ),
        Check(
            "trtllm_blog_gptj_h100_vs_a100#a100",
            S,
            "GPT-J-6B A100 FP16 batch 64",
            "out tok/s",
            3679,
            False,
            0.25,
            _serve_tput("gpt-j-6b", "a100-sxm-80gb", "fp16", 64),
        ),
        # --- serving latency
        Check(
            "trtllm05_ttft_llama7b_2048_a100",
            S,
            "LLaMA-7B TTFT A100 FP16 in 2048 bs1",
            "ms",
            133,
            True,
            0.05,
            _ttft("llama-2-7b", "a100-sxm-80gb", "fp16", 1, 2048),
        ),
        Check(
            "trtllm05_ttft_llama7b_2048_h100",
            S,
            "LLaMA-7B TTFT H100 FP8 in 2048 bs1",
            "ms",
            36,
            False,
            0.30,
            _ttft("llama-2-7b", "h100-sxm", "fp8", 1, 2048),
        ),
        Check(
            "trtllm05_ttft_llama7b_2048_a100#128",
            S,
            "LLaMA-7B TTFT A100 FP16 in 128 bs1",
            "ms",
            16,
            False,
            0.35,
            _ttft("llama-2-7b", "a100-sxm-80gb", "fp16", 1, 128),
        ),
        Check(
            "trtllm05_ttft_llama7b_2048_h100#128",
            S,
            "LLaMA-7B TTFT H100 FP8 in 128 bs1",
            "ms",
            7,
            False,
            0.35,
            _ttft("llama-2-7b", "h100-sxm", "fp8", 1, 128),
        ),
        Check(
            "trtllm_blog_gptj_h100_vs_a100#ttft_h100",
            S,
            "GPT-J TTFT H100 FP8 64x128 tokens",
            "ms",
            102,
            False,
            0.30,
            _ttft("gpt-j-6b", "h100-sxm", "fp8", 64, 128),
        ),
        Check(
            "trtllm_blog_gptj_h100_vs_a100#ttft_a100",
            S,
            "GPT-J TTFT A100 FP16 64x128 tokens",
            "ms",
            481,
            False,
            0.30,
            _ttft("gpt-j-6b", "a100-sxm-80gb", "fp16", 64, 128),
        ),
        # --- llama.cpp batch-1 decode and prompt processing
        Check(
            "llamacpp_4090_llama2_7b_f16_tg",
            S,
            "llama.cpp 7B F16 decode RTX 4090",
            "tok/s",
            60.78,
            True,
            0.05,
            _decode_tps("llama-2-7b", "rtx-4090", "fp16"),
        ),
        Check(
            "llamacpp_4090_llama2_7b_q4_0_tg",
            S,
            "llama.cpp 7B Q4_0 decode RTX 4090",
            "tok/s",
            149.37,
            True,
            0.05,
            _decode_tps("llama-2-7b", "rtx-4090", "int4"),
        ),
        Check(
            "llamacpp_3090_llama2_7b_q4_0_tg",
            S,
            "llama.cpp 7B Q4_0 decode RTX 3090",
            "tok/s",
            120.6,
            False,
            0.25,
            _decode_tps("llama-2-7b", "rtx-3090", "int4"),
        ),
        Check(
            "llamacpp_3090_llama2_7b_q4_0_tg#f16",
            S,
            "llama.cpp 7B F16 decode RTX 3090",
            "tok/s",
            51.85,
            False,
            0.25,
            _decode_tps("llama-2-7b", "rtx-3090", "fp16"),
        ),
        Check(
            "llamacpp_a100_llama2_7b_q4_0_tg",
            S,
            "llama.cpp 7B Q4_0 decode A100-80GB",
            "tok/s",
            136.24,
            False,
            1.00,
            _decode_tps("llama-2-7b", "a100-sxm-80gb", "int4"),
        ),
        Check(
            "llamacpp_a100_llama2_7b_q4_0_tg#f16",
            S,
            "llama.cpp 7B F16 decode A100-80GB",
            "tok/s",
            73.83,
            False,
            1.00,
            _decode_tps("llama-2-7b", "a100-sxm-80gb", "fp16"),
        ),
        Check(
            "llamacpp_4090_llama3_8b_q4km_tg512",
            S,
            "llama.cpp Llama3-8B Q4_K_M tg512 4090",
            "tok/s",
            130.58,
            False,
            0.25,
            _decode_tps("llama-3-8b", "rtx-4090", "int4"),
        ),
        Check(
            "llamacpp_4090_llama2_7b_q4_0_pp",
            S,
            "llama.cpp 7B Q4_0 prompt 512 RTX 4090",
            "tok/s",
            5531.19,
            False,
            0.60,
            _prefill_tps("llama-2-7b", "rtx-4090", "int4"),
        ),
        Check(
            "llamacpp_4090_llama2_7b_q4_0_pp#f16",
            S,
            "llama.cpp 7B F16 prompt 512 RTX 4090",
            "tok/s",
            7348.69,
            False,
            0.30,
            _prefill_tps("llama-2-7b", "rtx-4090", "fp16"),
        ),
    ]


def calibration_table(
    calib: Calibration | None = None, gpus: dict | None = None, models: dict | None = None
) -> list[Row]:
    """Predict every published figure of :func:`calibration_checks` with the catalogs."""
    from planner.catalog import load_gpus, load_models

    calib = calib or default_calibration()
    gpus = gpus if gpus is not None else load_gpus()
    models = dict(models if models is not None else load_models())
    models.update({k: v for k, v in _extra_models().items() if k not in models})
    return [Row(c, c.predict(gpus, models, calib)) for c in calibration_checks()]


def median_abs_error(rows: list[Row], kind: str, tuned: bool | None = None) -> float:
    """Median |relative error| of the rows of a kind (optionally only tuned or only checked)."""
    errs = [
        abs(r.error)
        for r in rows
        if r.check.kind == kind and (tuned is None or r.check.tuned == tuned)
    ]
    return statistics.median(errs) if errs else 0.0


def _num(v: float) -> str:
    """``10643 -> '10,643'``, ``0.6118 -> '0.612'``.

    >>> _num(10643.2), _num(36.0), _num(0.61184)
    ('10,643', '36.0', '0.612')
    """
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def format_table(rows: list[Row]) -> str:
    """Plain-text (Markdown) table: figure, published, predicted, error, tuned/checked, bound."""
    lines = [
        "| published id | what | unit | published | predicted | error | role | bound |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        c = r.check
        lines.append(
            f"| {c.id} | {c.what} | {c.unit} | {_num(c.published)} | {_num(r.predicted)} | "
            f"{r.error:+.1%} | {'tuned' if c.tuned else 'check'} | {c.bound:.0%} |"
        )
    lines.append("")
    for kind in ("train", "serve"):
        lines.append(
            f"median |error| {kind}: all {median_abs_error(rows, kind):.1%}, "
            f"checked only {median_abs_error(rows, kind, False):.1%}, "
            f"tuned {median_abs_error(rows, kind, True):.1%}"
        )
    return "\n".join(lines)


def main() -> None:
    """Print the calibration table (``python -m planner.physics.calibration``)."""
    # use the canonical module, not this file's ``__main__`` copy
    from planner.physics import calibration as mod

    print(mod.format_table(mod.calibration_table()))


if __name__ == "__main__":  # pragma: no cover - thin wrapper
    main()
