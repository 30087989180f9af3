"""``planner profile``: import measured serving profiles (:mod:`planner.inputs.importers.profiles`).

::

    planner profile import-vllm runs/*.json --model llama-3-8b --gpu h100-sxm -o profiles.yaml
    planner profile import-melange example.json -o melange.yaml   # + melange.profiles.yaml
"""

from __future__ import annotations

from pathlib import Path

import click

from planner.base.errors import InputError
from planner.base.files import refuse_overwriting_inputs
from planner.base.yamlio import did_you_mean, load_yaml, validate
from planner.inputs.catalog import load_gpus, load_models
from planner.inputs.importers.profiles import (
    MELANGE_EDGES,
    melange_problem,
    merge_profiles,
    read_json_config,
    read_json_results,
    vllm_profile,
    write_yaml,
)
from planner.inputs.profiles import ProfileFile

PRECISIONS = ("fp16", "bf16", "fp8", "int8", "int4", "fp4")
MAX_EDGES = 64  # request-length buckets per axis (Mélange profiles 6)
MAX_EDGE_TOKENS = 1_000_000  # as a request shape in the problem file (prompt, output)


def _known(option: str, value: str, known: dict) -> None:
    """An unknown catalog id is bad input (exit 2) with a suggestion."""
    if value not in known:
        raise InputError(f"{option}: unknown id {value!r}; {did_you_mean(value, known.keys())}")


def _edges(ctx: click.Context, param: click.Parameter, text: str | None) -> tuple[int, ...] | None:
    """``25,100,250`` -> (25, 100, 250): each bucket's upper end, increasing (None: not given)."""
    if text is None:
        return None
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if len(parts) > MAX_EDGES or any(len(x) > 7 or not x.isdigit() for x in parts):
        raise click.BadParameter(
            f"{_short(text)}: expected up to {MAX_EDGES} token counts (each at most "
            f"{MAX_EDGE_TOKENS:,}) separated by commas"
        )
    edges = tuple(int(x) for x in parts)
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise click.BadParameter(f"{_short(text)}: expected increasing token counts from 1")
    if edges[-1] > MAX_EDGE_TOKENS:
        raise click.BadParameter(
            f"{_short(text)}: {edges[-1]:,} tokens; a bucket ends at most at {MAX_EDGE_TOKENS:,}"
        )
    return edges


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _not_an_input(output: Path, inputs: list[Path]) -> None:
    refuse_overwriting_inputs(output, inputs)


@click.group("profile")
def profile() -> None:
    """Import measured serving profiles (vLLM benchmark results, Mélange configs)."""


@profile.command("import-vllm")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--model", required=True, help="Catalog model id the runs served.")
@click.option("--gpu", required=True, help="Catalog GPU id the runs used.")
@click.option("--tp", type=click.IntRange(1, 64), default=1, show_default=True,
              help="GPUs per replica (tensor-parallel size).")  # fmt: skip
@click.option("--precision", type=click.Choice(PRECISIONS, case_sensitive=False),
              default="fp16", show_default=True)  # fmt: skip
@click.option("--source", help="Describe the runs (default: files, backend, model_id, dates).")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Profiles file; an existing one is merged into (see --replace).")  # fmt: skip
@click.option("--replace", is_flag=True, help="Overwrite -o instead of merging into it.")
def import_vllm(
    paths: tuple[Path, ...],
    model: str,
    gpu: str,
    tp: int,
    precision: str,
    source: str | None,
    output: Path,
    replace: bool,
) -> None:
    """Turn vLLM serving-benchmark result JSON files (vllm bench serve --save-result) into
    measured points of a profiles file: one point per run, one entry per request shape."""
    _known("--model", model, load_models())
    _known("--gpu", gpu, load_gpus())
    _not_an_input(output, list(paths))
    results = [r for p in paths for r in read_json_results(p)]
    new = vllm_profile(
        results, model=model, gpu=gpu, tp=tp, precision=precision.lower(), source=source
    )
    doc, merged = new, False
    if output.exists() and not replace:
        old = load_yaml(output)
        validate(ProfileFile, old, "profiles file")
        doc, merged = merge_profiles(old.data or {}, new), True
    write_yaml(output, doc)
    for e in new["serve"]:
        pts = ", ".join(
            f"{p['rps']:g} req/s (p95 TTFT {p['p95_ttft_ms']:g} ms, TPOT {p['p95_tpot_ms']:g} ms)"
            for p in e["points"]
        )
        click.echo(f"{model} on {tp}x {gpu} {precision}, {e['prompt']}+{e['output']} tokens: {pts}")
    click.echo(
        f"{'merged into' if merged else 'wrote'} {output}: {len(doc['serve'])} serve entries; "
        f"name it in the problem file: profiles: [{output.name}]"
    )


@profile.command("import-melange")
@click.argument("config", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Problem file to write; its profiles go to <stem>.profiles.yaml beside it.")  # fmt: skip
@click.option("--model", default="llama-2-7b", show_default=True,
              help="Catalog model id the config was profiled with.")  # fmt: skip
@click.option("--slo-tpot-ms", type=click.FloatRange(0, 60_000, min_open=True), default=120.0,
              show_default=True,
              help="p95 TPOT SLO the throughputs were profiled at (the paper used 40 and 120).")  # fmt: skip
@click.option("--slo-ttft-ms", type=click.FloatRange(0, 3_600_000, min_open=True),
              default=10_000.0, show_default=True,
              help="p95 TTFT SLO (Mélange's SLO is on TPOT; the default is loose).")  # fmt: skip
@click.option("--start", default="2027-01", show_default=True, help="The month planned (YYYY-MM).")
@click.option("--as-of", help="Date of the prices and profiles, YYYY-MM (default: this month).")
@click.option("--input-edges", callback=_edges, metavar="N,N,...",
              help="Upper end of each input-length bucket [default: 25,100,250,500,1000,2000].")  # fmt: skip
@click.option("--output-edges", callback=_edges, metavar="N,N,...",
              help="Upper end of each output-length bucket [default: as --input-edges].")  # fmt: skip
def import_melange(
    config: Path,
    output: Path,
    model: str,
    slo_tpot_ms: float,
    slo_ttft_ms: float,
    start: str,
    as_of: str | None,
    input_edges: tuple[int, ...] | None,
    output_edges: tuple[int, ...] | None,
) -> None:
    """Turn a Mélange solver input (workload_distribution, gpu_info, total_request_rate) into a
    problem file and its profiles file."""
    input_edges = input_edges or MELANGE_EDGES
    output_edges = output_edges or input_edges
    _known("--model", model, load_models())
    profiles_path = output.with_name(f"{output.stem}.profiles.yaml")
    _not_an_input(output, [config])
    _not_an_input(profiles_path, [config])
    problem, profiles = melange_problem(
        read_json_config(config),
        name=config.name,
        model=model,
        profiles_file=profiles_path.name,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        start=start,
        as_of=as_of,
        input_edges=input_edges,
        output_edges=output_edges,
    )
    header = f"Imported from the Mélange config {config.name} by planner profile import-melange."
    write_yaml(profiles_path, profiles, header)
    write_yaml(output, problem, header)
    w = problem["workloads"]["serve"][0]
    click.echo(
        f"wrote {output} ({len(w['requests'])} request buckets, GPUs "
        f"{', '.join(problem['gpus'])}) and {profiles_path} ({len(profiles['serve'])} profiles)"
    )
    click.echo(f"next: planner solve {output}")
