"""``planner model``: bring a model in from its Hugging Face config.json.

::

    planner model import-hf config.json --id my-moe -o my-models.yaml
    planner estimate serve --models-file my-models.yaml --model my-moe --gpu h200-sxm --gpus 8 ...
    planner model list [--models-file my-models.yaml] [--json]
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from planner.base.errors import InputError
from planner.base.files import refuse_overwriting_inputs
from planner.base.yamlevents import load_plain_yaml
from planner.inputs.catalog import CATALOG_DIR, load_models
from planner.inputs.importers.hf_config import model_entry, read_hf_config
from planner.inputs.importers.profiles import dump_yaml, write_yaml
from planner.inputs.model_arch import ModelArch, count_params
from planner.physics.moe import attention_description, kv_bytes_per_token


@click.group("model")
def model() -> None:
    """Model architectures: import a Hugging Face config.json into a model catalog file."""


def _merge(out: Path, entry: dict) -> dict:
    """The catalog in ``out`` (if it exists) with ``entry`` added or replacing its id."""
    if not out.exists():
        return {"models": [entry]}
    load_models(out)  # refuse to extend a broken (or huge) file
    doc = load_plain_yaml(out, "model catalog")
    models = [m for m in doc.data["models"] if m.get("id") != entry["id"]]
    return {"models": [*models, entry]}


@model.command("import-hf")
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--id", "model_id", required=True, metavar="ID", help="id of the model entry")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="model catalog file to write (added to, or the entry replaced, if it exists); "
    "default: print the entry",
)
@click.option("--source", default=None, help="where the config.json came from (a URL)")
@click.option("--as-of", default=None, help="date of the config (default: today)")
def import_hf(
    config: Path, model_id: str, output: Path | None, source: str | None, as_of: str | None
) -> None:
    """Read CONFIG.json (on disk, no network) and write a model entry with its parameters."""
    if not model_id.strip() or len(model_id) > 100:
        raise InputError(f"--id: 1 to 100 characters, got {model_id!r}")
    cfg = read_hf_config(config)
    entry = model_entry(cfg, model_id, config, source, as_of or dt.date.today().isoformat())
    arch = ModelArch.model_validate(entry)
    if output is not None:
        refuse_overwriting_inputs(output, [config])
        if output.resolve() == (CATALOG_DIR / "models.yaml").resolve():
            # rewriting would drop the shipped catalog's comments and published counts
            raise InputError(
                f"-o {output}: not the shipped catalog; write your own file and pass it with "
                "--models-file (estimate) or model_files: (problem files)"
            )
        header = f"Model catalog (planner model import-hf {config.name})"
        write_yaml(output, _merge(output, entry), header)
    else:
        click.echo(dump_yaml({"models": [entry]}))
    _summary(arch, err=output is None)


def _summary(arch: ModelArch, err: bool) -> None:
    """Totals and the KV cache per token (on stderr when stdout carries the YAML)."""
    c = count_params(arch)
    kv16 = kv_bytes_per_token(arch, "bf16", arch.max_context)
    kv8 = kv_bytes_per_token(arch, "fp8", arch.max_context)
    lines = [
        f"{arch.id}: total params {c.total / 1e9:,.2f}B, active per token {c.active / 1e9:,.2f}B"
        f" ({(c.active - c.embed_in) / 1e9:,.2f}B without the input embedding)",
        f"  KV cache per token (mean over a full {arch.max_context:,}-token context): "
        f"{kv16 / 1024:,.1f} KiB bf16, {kv8 / 1024:,.1f} KiB fp8",
    ]
    lines.append(f"  attention: {attention_description(arch)}")
    if arch.moe is not None:
        m = arch.moe
        lines.append(
            f"  MoE: {m.experts} experts, {m.experts_per_token} per token, "
            f"{arch.moe_layers} MoE layers, {m.dense_layers} dense"
        )
    for line in lines:
        click.echo(line, err=err)


def _row(m: ModelArch) -> dict:
    """One model's facts for the list: published and recomputed sizes, shape, KV per token."""
    c = count_params(m)
    return {
        "id": m.id,
        "params_b": m.params / 1e9,
        "active_b": (m.active_params or c.active * m.params / c.total) / 1e9,
        "layers": m.layers,
        "experts": f"{m.moe.experts_per_token}/{m.moe.experts}" if m.moe else "-",
        "attention": ("MLA" if m.mla else ("GQA" if m.kv_heads < m.heads else "MHA"))
        + (f" w{m.sliding_window}" if m.sliding_window else "")
        + (f" +lin{m.linear_layers}" if m.linear_attention else "")
        + (f" top{m.sparse_attention.top_k}" if m.sparse_attention else ""),
        "kv_kib_per_token_bf16": kv_bytes_per_token(m, "bf16") / 1024,
        "max_context": m.max_context,
    }


@model.command("list")
@click.option(
    "--models-file",
    type=click.Path(path_type=Path),
    default=None,
    help="model catalog (default catalogs/models.yaml)",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
def list_models(models_file: Path | None, as_json: bool) -> None:
    """The models of a catalog: total and active parameters, experts, attention, KV cache."""
    rows = [_row(m) for m in load_models(models_file or CATALOG_DIR / "models.yaml").values()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    t = Table(title="models (KV cache per token in BF16, every layer at full context)")
    for col in ("id", "params B", "active B", "layers", "experts k/E", "attention", "KV KiB/tok"):
        left = col in ("id", "attention")
        t.add_column(col, justify="left" if left else "right", no_wrap=col == "id")
    for r in rows:
        t.add_row(
            r["id"], f"{r['params_b']:,.1f}", f"{r['active_b']:,.1f}", str(r["layers"]),
            r["experts"], r["attention"], f"{r['kv_kib_per_token_bf16']:,.0f}",
        )  # fmt: skip
    Console().print(t)
