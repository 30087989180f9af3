"""``planner estimate train|serve`` through click's CliRunner with a tiny root group."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.base.units import parse_count
from planner.cli import cli
from planner.cli.estimate import MAX_SERVE_BATCH, estimate
from planner.inputs.catalog import CATALOG_DIR
from planner.physics.train import derive_model

needs_catalogs = pytest.mark.skipif(
    not (CATALOG_DIR / "gpus.yaml").exists() or not (CATALOG_DIR / "models.yaml").exists(),
    reason="catalogs not written yet",
)


@click.group()
def root() -> None:
    """Stand-in for the planner's root group."""


root.add_command(estimate)


def run(*args: str):
    return CliRunner().invoke(root, ["estimate", *args])


@needs_catalogs
def test_train_json_has_the_promised_fields():
    r = run(
        "train",
        "--model",
        "llama-2-7b",
        "--tokens",
        "1e11",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "8",
        "--json",
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for key in (
        "gpu_hours",
        "wall_hours",
        "memory_per_gpu_gb",
        "fits",
        "mfu",
        "layout",
        "memory",
        "tokens_per_s_per_gpu",
    ):
        assert key in out
    assert out["fits"] is True and out["layout"]["tp"] >= 1
    assert out["gpu_hours"] == pytest.approx(out["wall_hours"] * 8)


@needs_catalogs
def test_train_table_and_infeasible_reason():
    r = run("train", "--model", "llama-2-70b", "--tokens", "2T", "--gpu", "rtx-4090", "--gpus", "2")
    assert r.exit_code == 3, r.output  # printed, then "does not fit"
    assert "NO" in r.output and "GB per GPU" in r.output
    r = run(
        "train",
        "--params",
        "7B",
        "--tokens",
        "300B",
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "16",
        "--method",
        "lora",
    )
    assert r.exit_code == 0, r.output
    assert "optimizer" in r.output and "activations" in r.output  # memory breakdown


@needs_catalogs
def test_train_json_infeasible_is_valid_json():
    r = run(
        "train",
        "--model",
        "llama-2-70b",
        "--tokens",
        "1e9",
        "--gpu",
        "rtx-4090",
        "--gpus",
        "1",
        "--json",
    )
    out = json.loads(r.output)  # no Infinity tokens
    assert out["fits"] is False and out["wall_hours"] is None and out["reason"]


@needs_catalogs
def test_serve_json_and_capacity():
    r = run(
        "serve",
        "--model",
        "llama-2-7b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "1",
        "--precision",
        "fp8",
        "--prompt",
        "1024",
        "--output",
        "256",
        "--json",
        "--slo-ttft-ms",
        "1000",
        "--slo-tpot-ms",
        "50",
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for key in ("tokens_per_s", "ttft_ms", "tpot_ms", "batch", "fits", "memory_per_gpu_gb"):
        assert key in out
    assert out["fits"] and out["batch"] > 1
    assert out["capacity"]["feasible"] and out["capacity"]["p95_tpot_ms"] <= 50 + 1e-6


@needs_catalogs
def test_serve_table_shows_memory_and_fp8_reason():
    r = run(
        "serve",
        "--model",
        "llama-2-7b",
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "1",
        "--precision",
        "fp8",
        "--prompt",
        "512",
        "--output",
        "128",
    )
    assert r.exit_code == 3 and "FP8" in r.output  # no FP8 on this GPU: does not fit
    r = run(
        "serve",
        "--params",
        "13e9",
        "--gpu",
        "rtx-4090",
        "--gpus",
        "2",
        "--precision",
        "int4",
        "--prompt",
        "512",
        "--output",
        "128",
        "--batch",
        "4",
    )
    assert r.exit_code == 0, r.output
    assert "kv_cache" in r.output and "weights" in r.output


@needs_catalogs
@pytest.mark.parametrize(
    "args,match",
    [
        (
            [
                "train",
                "--model",
                "llama-2-7",
                "--tokens",
                "1e9",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "8",
            ],
            "did you mean 'llama-2-7b'",
        ),
        (
            [
                "train",
                "--model",
                "llama-2-7b",
                "--tokens",
                "1e9",
                "--gpu",
                "h100-sxn",
                "--gpus",
                "8",
            ],
            "did you mean 'h100-sxm'",
        ),
        (["train", "--tokens", "1e9", "--gpu", "h100-sxm", "--gpus", "8"], "exactly one"),
        (
            [
                "train",
                "--model",
                "llama-2-7b",
                "--params",
                "7B",
                "--tokens",
                "1e9",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "8",
            ],
            "exactly one",
        ),
        (
            [
                "train",
                "--model",
                "llama-2-7b",
                "--tokens",
                "lots",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "8",
            ],
            "--tokens",
        ),
        (
            [
                "train",
                "--model",
                "llama-2-7b",
                "--tokens",
                "1e9",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "0",
            ],
            "--gpus",
        ),
        (
            [
                "serve",
                "--model",
                "llama-2-7b",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "3",
                "--prompt",
                "10",
                "--output",
                "10",
            ],
            "1, 2 or a multiple of 4",
        ),
        (
            [
                "serve",
                "--model",
                "llama-2-7b",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "1",
                "--prompt",
                "0",
                "--output",
                "10",
            ],
            "--prompt",
        ),
        (
            [
                "serve",
                "--model",
                "llama-2-7b",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "1",
                "--prompt",
                "10",
                "--output",
                "10",
                "--slo-ttft-ms",
                "100",
            ],
            "both",
        ),
    ],
)
def test_bad_input_raises_input_error(args, match):
    r = run(*args)
    if isinstance(r.exception, InputError):  # the library's check
        assert match in str(r.exception)
    else:  # click's own range check on the option: a usage error, exit 2
        assert r.exit_code == 2 and match in r.output, r.output


SERVE_7B = ("serve", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--prompt", "100",
            "--output", "100")  # fmt: skip


@needs_catalogs
@pytest.mark.parametrize("batch", [10**30, MAX_SERVE_BATCH + 1])
def test_a_batch_beyond_any_deployment_is_bad_input(batch):
    """Issue 51 item 5: ``--batch 1e30`` printed an estimate (a 1e27-ms TTFT) with a note. It
    is the library's InputError, and exit 2 with one line through the planner's own group."""
    r = run(*SERVE_7B, "--gpus", "1", "--batch", str(batch))
    assert isinstance(r.exception, InputError), r.output
    assert "--batch: 1 to 1,000,000 concurrent requests" in str(r.exception)
    assert f"got {batch:,}" in str(r.exception)
    args = ["estimate", *SERVE_7B, "--decode", "2x8:tp", "--batch", str(batch)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert r.output.startswith("error: --batch: 1 to 1,000,000 concurrent requests"), r.output


@needs_catalogs
def test_the_largest_batch_allowed_is_estimated():
    r = run(*SERVE_7B, "--gpus", "1", "--batch", str(MAX_SERVE_BATCH), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output[r.output.index("{") :])["batch"] == MAX_SERVE_BATCH


def test_parse_count_and_derived_models():
    assert parse_count("70B", "x") == 70e9
    assert parse_count("1_000", "x") == 1000
    with pytest.raises(InputError):
        parse_count("-5", "x")
    m = derive_model(70e9)
    assert m.params == 70e9 and m.heads % 8 == 0 and m.kv_heads == 8
    assert abs(12 * m.layers * m.hidden**2 / 70e9 - 1) < 0.1
