"""Calibration checks: the model's prediction for every published figure it covers.

The factors themselves live in :mod:`planner.physics.calibration.values` (re-exported here so
existing imports keep working). This module runs the physics against the published figures, so it
imports ``train`` and ``serve``; they import only the values, never this module.
``python -m planner.physics.calibration.serving`` prints the calibration table: the prediction for every
published figure of ``shared/reference/published.yaml`` that the model covers, its error, and
whether a calibration factor was *tuned* to that figure or the figure is only *checked*.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from planner.inputs.catalog import GpuSpec, ModelArch, load_gpus, load_models
from planner.physics.calibration.values import (
    CALIBRATION_PATH,
    Calibration,
    default_calibration,
    gpu_family,
    load_calibration,
)
from planner.physics.serve import decode_step_s, estimate_serve, prefill_iter_s
from planner.physics.train import estimate_train, llama_like

__all__ = [
    "CALIBRATION_PATH",
    "Calibration",
    "Check",
    "Row",
    "calibration_checks",
    "calibration_table",
    "default_calibration",
    "format_table",
    "gpu_family",
    "load_calibration",
    "median_abs_error",
]

Gpus = Mapping[str, GpuSpec]
Models = Mapping[str, ModelArch]
Role = Literal["tuned", "check"]
TUNED: Final = "tuned"  # a calibration factor was fitted to this figure
CHECK: Final = "check"  # no factor was fitted to it: an out-of-sample test of the model
TOK_S_GPU = "tok/s/GPU"


# ----------------------------------------------------------------------------- predictors


class Predictor:
    """How the model predicts one published figure; ``kind`` and ``unit`` follow from the type."""

    kind: ClassVar[str]  # "train" (throughput) or "serve" (throughput or latency)
    unit: ClassVar[str]

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class TrainTput(Predictor):
    """Training tokens/s per GPU of a published run (0 when no layout fits)."""

    kind: ClassVar[str] = "train"
    unit: ClassVar[str] = TOK_S_GPU
    model: str
    gpu: str
    gpus: int
    seq: int
    gbs_seqs: int  # global batch in sequences, as the runs report it
    method: str = "full"
    precision: str = "bf16"

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        e = estimate_train(
            models[self.model],
            gpus[self.gpu],
            self.gpus,
            1e9,
            self.method,
            calib,
            self.seq,
            precision=self.precision,
            global_batch_tokens=self.gbs_seqs * self.seq,
        )
        return e.tokens_per_s_per_gpu if e.fits else 0.0


@dataclass(frozen=True)
class TrainRatio(Predictor):
    """Single-GPU training speed of ``gpu`` relative to ``ref`` (sources that publish only ratios)."""

    kind: ClassVar[str] = "train"
    unit: ClassVar[str] = "ratio"
    model: str
    gpu: str
    ref: str
    seq: int

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        m, gbs = models[self.model], 32 * self.seq
        a = estimate_train(
            m, gpus[self.gpu], 1, 1e9, "full", calib, self.seq, global_batch_tokens=gbs
        )
        b = estimate_train(
            m, gpus[self.ref], 1, 1e9, "full", calib, self.seq, global_batch_tokens=gbs
        )
        return a.tokens_per_s_per_gpu / b.tokens_per_s_per_gpu


@dataclass(frozen=True)
class ServeTput(Predictor):
    """Static-batch output tokens/s of one GPU (0 when the batch does not fit)."""

    kind: ClassVar[str] = "serve"
    unit: ClassVar[str] = "out tok/s"
    model: str
    gpu: str
    precision: str
    batch: int
    prompt: int = 128
    output: int = 128

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        m, g = models[self.model], gpus[self.gpu]
        e = estimate_serve(m, g, 1, self.precision, self.prompt, self.output, self.batch, calib)
        return e.tokens_per_s if e.fits else 0.0


@dataclass(frozen=True)
class Ttft(Predictor):
    """Time to first token (ms) of ``prompts`` prompts of ``prompt`` tokens prefilled together."""

    kind: ClassVar[str] = "serve"
    unit: ClassVar[str] = "ms"
    model: str
    gpu: str
    precision: str
    prompts: int
    prompt: int

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        m, g = models[self.model], gpus[self.gpu]
        return prefill_iter_s(m, g, 1, self.precision, self.prompts, self.prompt, calib) * 1e3


@dataclass(frozen=True)
class DecodeRate(Predictor):
    """Batch-1 decode tokens/s at ``context`` tokens (llama.cpp ``tg``)."""

    kind: ClassVar[str] = "serve"
    unit: ClassVar[str] = "tok/s"
    model: str
    gpu: str
    precision: str
    context: int = 256

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        m, g = models[self.model], gpus[self.gpu]
        return 1.0 / decode_step_s(m, g, 1, self.precision, 1, self.context, calib)


@dataclass(frozen=True)
class PrefillRate(Predictor):
    """Batch-1 prompt tokens/s of one ``prompt``-token prompt (llama.cpp ``pp``)."""

    kind: ClassVar[str] = "serve"
    unit: ClassVar[str] = "tok/s"
    model: str
    gpu: str
    precision: str
    prompt: int = 512

    def __call__(self, gpus: Gpus, models: Models, calib: Calibration) -> float:
        m, g = models[self.model], gpus[self.gpu]
        return self.prompt / prefill_iter_s(m, g, 1, self.precision, 1, self.prompt, calib)


# ----------------------------------------------------------------------------- calibration table


@dataclass(frozen=True)
class Check:
    """One published figure and how the model predicts it."""

    id: str  # published.yaml id (suffix after '#' marks a figure from that entry's conditions)
    what: str
    published: float
    role: Role
    bound: float  # largest relative error accepted for this figure
    predict: Predictor

    @property
    def kind(self) -> str:
        return self.predict.kind

    @property
    def unit(self) -> str:
        return self.predict.unit

    @property
    def tuned(self) -> bool:
        return self.role == TUNED


@dataclass(frozen=True)
class Row:
    check: Check
    predicted: float

    @property
    def error(self) -> float:
        """Relative error of the prediction, ``predicted / published - 1``."""
        return self.predicted / self.check.published - 1.0


# Every published figure the model is compared with, one case per two lines:
#   published.yaml id (the source), what /
#   published value, role (tuned or check), largest accepted |error|, predictor.
# Kept as a hand-aligned literal so a new figure is one more case, not new code.
# fmt: off
CHECKS: tuple[Check, ...] = (
    # --- training throughput (llm-foundry MPT, BF16, FSDP; NeMo FP8; TinyLlama)
    Check("llmfoundry_h100_7b_8gpu", "MPT-7B 8xH100 seq2048",
          10643, TUNED, 0.05, TrainTput("mpt-7b", "h100-sxm", 8, 2048, 48)),
    Check("llmfoundry_h100_13b_8gpu", "MPT-13B 8xH100 seq2048",
          4792, CHECK, 0.30, TrainTput("mpt-13b", "h100-sxm", 8, 2048, 16)),
    Check("llmfoundry_h100_30b_8gpu", "MPT-30B 8xH100 seq2048",
          2002, CHECK, 0.30, TrainTput("mpt-30b", "h100-sxm", 8, 2048, 504)),
    Check("llmfoundry_h100_70b_512gpu", "MPT-70B 512xH100 seq2048",
          1007, CHECK, 0.25, TrainTput("mpt-70b", "h100-sxm", 512, 2048, 4096)),
    Check("llmfoundry_a100_80gb_7b_8gpu", "MPT-7B 8xA100-80GB seq2048",
          4641, TUNED, 0.05, TrainTput("mpt-7b", "a100-sxm-80gb", 8, 2048, 96)),
    Check("llmfoundry_a100_80gb_70b_64gpu", "MPT-70B 64xA100-80GB seq2048",
          410, CHECK, 0.25, TrainTput("mpt-70b", "a100-sxm-80gb", 64, 2048, 2048)),
    Check("llmfoundry_a100_40gb_7b_128gpu", "MPT-7B 128xA100-40GB seq2048",
          3623, CHECK, 0.25, TrainTput("mpt-7b", "a100-sxm-40gb", 128, 2048, 2304)),
    Check("tinyllama_a100_40g_throughput", "TinyLlama-1.1B 16xA100-40GB seq2048",
          24000, TUNED, 0.05, TrainTput("tinyllama-1.1b", "a100-sxm-40gb", 16, 2048, 512)),
    Check("nemo2412_llama3_8b_pretrain", "Llama3-8B 8xH100 FP8 seq8192",
          12273, TUNED, 0.05, TrainTput("llama-3-8b", "h100-sxm", 8, 8192, 128, precision="fp8")),
    Check("nemo2412_llama3_70b_pretrain", "Llama3-70B 64xH100 FP8 seq8192",
          1524, CHECK, 0.30, TrainTput("llama-3-70b", "h100-sxm", 64, 8192, 128, precision="fp8")),
    Check("nemo2412_gpt3_175b_pretrain", "GPT3-175B 512xH100 FP8 seq2048",
          825, CHECK, 0.30, TrainTput("gpt3-175b", "h100-sxm", 512, 2048, 2048, precision="fp8")),
    Check("nemo2412_llama2_70b_lora", "Llama2-70B LoRA 8xH100 FP8 seq4096",
          2621, CHECK, 0.30, TrainTput("llama-2-70b", "h100-sxm", 8, 4096, 32, "lora", "fp8")),
    Check("lambda_bertlarge_fp16_rtx4090", "BERT-large 1 GPU: RTX 4090 / A100 (non-LLM)",
          93 / 152, CHECK, 0.50, TrainRatio("bert-large", "rtx-4090", "a100-sxm-80gb", 384)),
    Check("lambda_bertlarge_fp16_rtx3090", "BERT-large 1 GPU: RTX 3090 / A100 (non-LLM)",
          52 / 152, CHECK, 0.50, TrainRatio("bert-large", "rtx-3090", "a100-sxm-80gb", 384)),
    # --- serving throughput (TRT-LLM static batch, 128 in / 128 out, TP1)
    Check("trtllm061_h100_llama7b_128_128", "LLaMA-7B H100 FP8 batch 768",
          19694, TUNED, 0.05, ServeTput("llama-2-7b", "h100-sxm", "fp8", 768)),
    Check("trtllm061_a100_llama7b_128_128", "LLaMA-7B A100 FP16 batch 384",
          5586, CHECK, 0.25, ServeTput("llama-2-7b", "a100-sxm-80gb", "fp16", 384)),
    Check("trtllm05_l40s_llama7b_128_128", "LLaMA-7B L40S FP8 batch 64",
          3240, CHECK, 0.25, ServeTput("llama-2-7b", "l40s", "fp8", 64)),
    Check("trtllm_blog_gptj_h100_vs_a100", "GPT-J-6B H100 FP8 batch 64",
          10907, TUNED, 0.05, ServeTput("gpt-j-6b", "h100-sxm", "fp8", 64)),
    Check("trtllm_blog_gptj_h100_vs_a100#a100", "GPT-J-6B A100 FP16 batch 64",
          3679, CHECK, 0.25, ServeTput("gpt-j-6b", "a100-sxm-80gb", "fp16", 64)),
    # --- serving latency
    Check("trtllm05_ttft_llama7b_2048_a100", "LLaMA-7B TTFT A100 FP16 in 2048 bs1",
          133, TUNED, 0.05, Ttft("llama-2-7b", "a100-sxm-80gb", "fp16", 1, 2048)),
    Check("trtllm05_ttft_llama7b_2048_h100", "LLaMA-7B TTFT H100 FP8 in 2048 bs1",
          36, CHECK, 0.30, Ttft("llama-2-7b", "h100-sxm", "fp8", 1, 2048)),
    Check("trtllm05_ttft_llama7b_2048_a100#128", "LLaMA-7B TTFT A100 FP16 in 128 bs1",
          16, CHECK, 0.35, Ttft("llama-2-7b", "a100-sxm-80gb", "fp16", 1, 128)),
    Check("trtllm05_ttft_llama7b_2048_h100#128", "LLaMA-7B TTFT H100 FP8 in 128 bs1",
          7, CHECK, 0.35, Ttft("llama-2-7b", "h100-sxm", "fp8", 1, 128)),
    Check("trtllm_blog_gptj_h100_vs_a100#ttft_h100", "GPT-J TTFT H100 FP8 64x128 tokens",
          102, CHECK, 0.30, Ttft("gpt-j-6b", "h100-sxm", "fp8", 64, 128)),
    Check("trtllm_blog_gptj_h100_vs_a100#ttft_a100", "GPT-J TTFT A100 FP16 64x128 tokens",
          481, CHECK, 0.30, Ttft("gpt-j-6b", "a100-sxm-80gb", "fp16", 64, 128)),
    # --- llama.cpp batch-1 decode and prompt processing
    Check("llamacpp_4090_llama2_7b_f16_tg", "llama.cpp 7B F16 decode RTX 4090",
          60.78, TUNED, 0.05, DecodeRate("llama-2-7b", "rtx-4090", "fp16")),
    Check("llamacpp_4090_llama2_7b_q4_0_tg", "llama.cpp 7B Q4_0 decode RTX 4090",
          149.37, TUNED, 0.05, DecodeRate("llama-2-7b", "rtx-4090", "int4")),
    Check("llamacpp_3090_llama2_7b_q4_0_tg", "llama.cpp 7B Q4_0 decode RTX 3090",
          120.6, CHECK, 0.25, DecodeRate("llama-2-7b", "rtx-3090", "int4")),
    Check("llamacpp_3090_llama2_7b_q4_0_tg#f16", "llama.cpp 7B F16 decode RTX 3090",
          51.85, CHECK, 0.25, DecodeRate("llama-2-7b", "rtx-3090", "fp16")),
    Check("llamacpp_a100_llama2_7b_q4_0_tg", "llama.cpp 7B Q4_0 decode A100-80GB",
          136.24, CHECK, 1.00, DecodeRate("llama-2-7b", "a100-sxm-80gb", "int4")),
    Check("llamacpp_a100_llama2_7b_q4_0_tg#f16", "llama.cpp 7B F16 decode A100-80GB",
          73.83, CHECK, 1.00, DecodeRate("llama-2-7b", "a100-sxm-80gb", "fp16")),
    Check("llamacpp_4090_llama3_8b_q4km_tg512", "llama.cpp Llama3-8B Q4_K_M tg512 4090",
          130.58, CHECK, 0.25, DecodeRate("llama-3-8b", "rtx-4090", "int4")),
    Check("llamacpp_4090_llama2_7b_q4_0_pp", "llama.cpp 7B Q4_0 prompt 512 RTX 4090",
          5531.19, CHECK, 0.60, PrefillRate("llama-2-7b", "rtx-4090", "int4")),
    Check("llamacpp_4090_llama2_7b_q4_0_pp#f16", "llama.cpp 7B F16 prompt 512 RTX 4090",
          7348.69, CHECK, 0.30, PrefillRate("llama-2-7b", "rtx-4090", "fp16")),
)
# fmt: on


def calibration_checks() -> list[Check]:
    """Every published figure the model is compared with (ids from published.yaml)."""
    return list(CHECKS)


def _extra_models() -> dict[str, ModelArch]:
    """Published-run architectures that are not in the model catalog (from their model cards)."""
    return {
        "mpt-13b": llama_like("mpt-13b", 12.85e9, 40, 5120, 40, 40, 20480, 50432),
        "mpt-70b": llama_like("mpt-70b", 64.86e9, 80, 8192, 64, 64, 32768, 50432),
        "tinyllama-1.1b": llama_like("tinyllama-1.1b", 1.1e9, 22, 2048, 32, 4, 5632, 32000),
        "gpt-j-6b": llama_like("gpt-j-6b", 6.05e9, 28, 4096, 16, 16, 16384, 50400, 2048),
        "gpt3-175b": llama_like("gpt3-175b", 175e9, 96, 12288, 96, 96, 49152, 50257, 2048),
        "bert-large": llama_like("bert-large", 0.34e9, 24, 1024, 16, 16, 4096, 30522, 512),
    }


def calibration_table(
    calib: Calibration | None = None, gpus: Gpus | None = None, models: Models | None = None
) -> list[Row]:
    """Predict every published figure of :func:`calibration_checks` with the catalogs."""
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
            f"{r.error:+.1%} | {c.role} | {c.bound:.0%} |"
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
    """Print the calibration table (``python -m planner.physics.calibration.serving``)."""
    print(format_table(calibration_table()))


if __name__ == "__main__":  # pragma: no cover - thin wrapper
    main()
