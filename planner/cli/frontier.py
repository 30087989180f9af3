"""``planner estimate frontier``: for each GPU type, the Pareto frontier of output tokens/s per
GPU against tokens/s per user over every layout the planner knows and a sweep of concurrency,
each point with its layout and its cost per million output tokens, owned and rented
(:mod:`planner.analysis.frontier`); ``--json`` prints ``{gpu_id: [points...]}``, ``--chart``
writes a PNG (matplotlib, the ``plot`` extra).

Registered under the ``estimate`` group (:mod:`planner.cli`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from planner.analysis.frontier import (
    DEFAULT_POWER_USD_PER_KWH,
    DEFAULT_PUE,
    GpuFrontier,
    OwnedTerms,
    frontiers,
    supported_precisions,
    to_json,
)
from planner.base.errors import ExitCode, InputError
from planner.inputs.catalog import CATALOG_DIR, GpuSpec, ModelArch, Offer, load_gpus, load_models
from planner.physics.serve_weights import PRECISIONS

_TRISTATE = click.Choice(["auto", "on", "off"], case_sensitive=False)


def _ids(text: str, what: str) -> list[str]:
    """``a,b,a`` -> ``[a, b]`` (order kept, repeats dropped); empty is an error."""
    out: list[str] = []
    for part in text.split(","):
        p = part.strip()
        if p and p not in out:
            out.append(p)
    if not out:
        raise InputError(f"{what}: give at least one id")
    return out


def _pick_model(model_id: str, models_file: Path | None) -> ModelArch:
    models = load_models(models_file or CATALOG_DIR / "models.yaml")
    if model_id not in models:
        from planner.base.yamlio import did_you_mean

        raise InputError(f"unknown model {model_id!r}; " + did_you_mean(model_id, models.keys()))
    return models[model_id]


def _pick_gpus(ids: list[str], gpus_file: Path | None) -> list[GpuSpec]:
    gpus = load_gpus(gpus_file or CATALOG_DIR / "gpus.yaml")
    for gid in ids:
        if gid not in gpus:
            from planner.base.yamlio import did_you_mean

            raise InputError(
                f"unknown gpu {gid!r}; " + did_you_mean(gid, gpus.keys())
                + f" (the catalog has {', '.join(gpus)})"
            )  # fmt: skip
    return [gpus[g] for g in ids]


def _precisions(text: str, gpus: list[GpuSpec]) -> list[str]:
    """The precisions asked for, each known and each GPU supporting at least one (exit 2
    naming what a GPU supports otherwise)."""
    wanted = [p.lower() for p in _ids(text, "--precision")]
    for p in wanted:
        if p not in PRECISIONS:
            raise InputError(
                f"--precision: unknown precision {p!r}; one of {', '.join(PRECISIONS)}"
            )
    for g in gpus:
        ok = supported_precisions(g)
        if not any(p in ok for p in wanted):
            raise InputError(
                f"--precision {','.join(wanted)}: {g.id} supports none of them (it serves at "
                f"{', '.join(ok)}); list several, best first, and each GPU takes the first it "
                f"supports: --precision {','.join([*wanted, ok[0]])}"
            )
    return wanted


def _offers(files: tuple[Path, ...]) -> list[Offer]:
    """The offers of ``files`` (default: the catalog's); offers for GPUs not compared are
    never used, so they are not checked against a GPU catalog (``--gpus-file`` may be small)."""
    from planner.inputs.catalog import load_offers

    out: list[Offer] = []
    for p in list(files) or [CATALOG_DIR / "offers.yaml"]:
        out.extend(load_offers(p).values())
    return out


def _tri(value: str) -> bool | None:
    return {"auto": None, "on": True, "off": False}[value.lower()]


def _money(v: float | None, digits: int = 3) -> str:
    return "-" if v is None or not math.isfinite(v) else f"${v:,.{digits}f}"


def _head(f: GpuFrontier) -> str:
    o = f.owned
    owned = (
        f"owned ${o.total:.2f}/GPU-h (capex {o.capex:.2f} + power {o.power:.2f} + hosting "
        f"{o.hosting:.2f})"
    )
    r = f.rental
    rent = "no rental offer" if r is None else (
        f"rented from ${r.usd_per_gpu_hour:.2f}/GPU-h ({r.offer}, {r.kind.replace('_', '-')}; "
        "a point's rental is the cheapest offer that holds its widest worker)"
    )  # fmt: skip
    return f"{owned}; {rent}"


def _table(f: GpuFrontier, model: ModelArch, prompt: int, output: int) -> Table:
    t = Table(
        title=f"{f.gpu} at {f.precision}: {model.id}, {prompt} in / {output} out",
        caption=f"{_head(f)}; {len(f.points)} points on the frontier of {f.evaluated} "
        f"({f.deployments} deployments x batches)",
    )
    for name in ("tok/s/user", "tok/s/GPU", "layout", "batch", "GPUs", "TPOT ms", "TTFT ms",
                 "owned $/Mtok", "rented $/Mtok"):  # fmt: skip
        t.add_column(name, justify="left" if name == "layout" else "right")
    for p in f.points:
        t.add_row(
            f"{p.tokens_per_s_per_user:,.1f}",
            f"{p.tokens_per_s_per_gpu:,.0f}",
            p.layout,
            str(p.batch),
            str(p.gpus),
            f"{p.tpot_ms:,.1f}",
            f"{p.ttft_ms:,.0f}",
            _money(p.owned_usd_per_mtok),
            _money(p.rental_usd_per_mtok),
        )
    return t


def _cannot(f: GpuFrontier, model: ModelArch) -> str:
    why = f.reasons[-1] if f.reasons else "no deployment serves"  # the largest worker's
    if f.deployments:
        why += f" ({f.deployments} deployments tried; none serves)"
    at = f" at {f.precision}" if f.precision else ""
    return f"{f.gpu}: cannot serve {model.id}{at}: {why}"


@click.command("frontier")
@click.option("--model", "model_id", required=True, metavar="ID", help="model id from the catalog")
@click.option("--gpu", "gpu_ids", required=True, metavar="A,B,...",
              help="GPU ids from the catalog, comma-separated")  # fmt: skip
@click.option("--precision", default="bf16", show_default=True, metavar="P[,P2]",
              help=f"serving precision ({', '.join(PRECISIONS)}); several, best first: each "
              "GPU takes the first it supports")  # fmt: skip
@click.option("--prompt", type=click.IntRange(1, 1_000_000), required=True, metavar="N",
              help="prompt tokens per request")  # fmt: skip
@click.option("--output", type=click.IntRange(2, 1_000_000), required=True, metavar="N",
              help="output tokens per request")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print {gpu_id: [points...]} as JSON")
@click.option("--chart", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="PNG", help="also draw the frontiers (needs the plot extra: matplotlib)")  # fmt: skip
@click.option("--disaggregated", type=_TRISTATE, default="auto", show_default=True,
              help="prefill/decode disaggregated deployments: auto = with and without")  # fmt: skip
@click.option("--mtp", type=_TRISTATE, default="auto", show_default=True,
              help="multi-token prediction (models with MTP layers): auto = with and without")  # fmt: skip
@click.option("--max-ttft-ms", type=click.FloatRange(0, None, min_open=True), default=None,
              help="leave out points whose TTFT is longer (default: none left out)")  # fmt: skip
@click.option("--power-usd-per-kwh", type=click.FloatRange(0, 10), default=None,
              help=f"owned: electricity, $ per kWh [default: {DEFAULT_POWER_USD_PER_KWH}]")  # fmt: skip
@click.option("--pue", type=click.FloatRange(1, 3), default=None,
              help=f"owned: facility power over IT power [default: {DEFAULT_PUE}]")  # fmt: skip
@click.option("--hosting-usd-per-gpu-month", type=click.FloatRange(0, 10_000), default=None,
              help="owned: $ per GPU a month on top of colocation [default: 0]")  # fmt: skip
@click.option("--colo-usd-per-kw-month", type=click.FloatRange(0, 5_000), default=None,
              help="owned: colocation per kW of IT load [default: catalogs/finance.yaml]")  # fmt: skip
@click.option("--depreciation-years", type=click.FloatRange(1, 50), default=None,
              help="owned: straight-line life of card and server [default: catalogs/finance.yaml]")  # fmt: skip
@click.option("--offers", "offer_files", multiple=True, type=click.Path(path_type=Path),
              help="offers file(s) for the rental cost (default: catalogs/offers.yaml)")  # fmt: skip
@click.option("--marketplaces", is_flag=True, help="rent from marketplace/reseller offers too")
@click.option("--gpus-file", type=click.Path(path_type=Path), default=None,
              help="GPU catalog (default catalogs/gpus.yaml)")  # fmt: skip
@click.option("--models-file", type=click.Path(path_type=Path), default=None,
              help="model catalog (default catalogs/models.yaml)")  # fmt: skip
@click.option("--calibration", "calib_file", type=click.Path(path_type=Path), default=None,
              help="calibration file (default catalogs/calibration.yaml)")  # fmt: skip
@click.option("--acceptance", default=None, metavar="AL[,AL...]",
              help="measured speculative acceptance length(s) for the MTP points (as estimate "
              "serve --acceptance); default: the model's catalog figure, else the fitted curve")  # fmt: skip
@click.option("--draft", type=click.IntRange(1, 16), default=None,
              help="with --acceptance AL: the draft length AL was measured at")  # fmt: skip
@click.option("--cached-share", type=click.FloatRange(0.0, 0.999), default=None,
              help="share of each prompt already in the prefix cache (agentic sessions)")  # fmt: skip
def frontier(
    model_id: str,
    gpu_ids: str,
    precision: str,
    prompt: int,
    output: int,
    as_json: bool,
    chart: Path | None,
    disaggregated: str,
    mtp: str,
    max_ttft_ms: float | None,
    power_usd_per_kwh: float | None,
    pue: float | None,
    hosting_usd_per_gpu_month: float | None,
    colo_usd_per_kw_month: float | None,
    depreciation_years: float | None,
    offer_files: tuple[Path, ...],
    marketplaces: bool,
    gpus_file: Path | None,
    models_file: Path | None,
    calib_file: Path | None,
    acceptance: str | None,
    draft: int | None,
    cached_share: float | None,
) -> None:
    """Tokens/s per GPU against tokens/s per user, per GPU type: the Pareto frontier over every
    layout and batch, each point with its layout and $ per million output tokens (owned,
    amortized at full load; the cheapest on-demand or reserved rental)."""
    if chart is not None:
        from planner.reports.frontier_chart import require_matplotlib

        require_matplotlib()  # exit 2 before any work when the plot extra is missing
    model = _pick_model(model_id, models_file)
    gpus = _pick_gpus(_ids(gpu_ids, "--gpu"), gpus_file)
    wanted = _precisions(precision, gpus)
    terms = OwnedTerms.defaults(
        power_usd_per_kwh=power_usd_per_kwh,
        pue=pue,
        hosting_usd_per_gpu_month=hosting_usd_per_gpu_month,
        colo_usd_per_kw_month=colo_usd_per_kw_month,
        depreciation_years=depreciation_years,
    )
    calib = _calib(calib_file, acceptance, draft, mtp != "false", cached_share)
    fronts = frontiers(
        model, gpus, wanted, prompt, output, terms, _offers(offer_files),
        marketplaces=marketplaces, calib=calib, disaggregated=_tri(disaggregated),
        mtp=_tri(mtp), max_ttft_ms=max_ttft_ms,
    )  # fmt: skip
    _print(fronts, model, prompt, output, as_json)
    if chart is not None:
        _write_chart(fronts, model, prompt, output, chart, as_json)
    if not any(f.serves for f in fronts.values()):
        raise SystemExit(int(ExitCode.INFEASIBLE))


def _calib(
    path: Path | None,
    acceptance: str | None = None,
    draft: int | None = None,
    mtp: bool = True,
    cached_share: float | None = None,
) -> Any:
    """The calibration file, with a measured acceptance and a cached prompt share if given."""
    from planner.cli.options import acceptance_option
    from planner.physics.calibration.values import (
        PrefixReuse,
        default_calibration,
        load_calibration,
    )
    from planner.physics.serving import with_draft_acceptance
    from planner.physics.serving.prefix import with_prefix

    calib = load_calibration(path) if path else default_calibration()
    calib = with_draft_acceptance(calib, acceptance_option(acceptance, draft, mtp))
    if cached_share:
        reuse = PrefixReuse(cached_share=cached_share, source="estimate frontier --cached-share")
        calib = with_prefix(calib, reuse)
    return calib


def _print(
    fronts: dict[str, GpuFrontier], model: ModelArch, prompt: int, output: int, as_json: bool
) -> None:
    err = Console(stderr=True, soft_wrap=True, emoji=False, highlight=False)
    if as_json:
        click.echo(json.dumps(_finite(to_json(fronts)), indent=2))
        for f in fronts.values():
            if not f.serves:
                err.print(_cannot(f, model), markup=False)
        return
    console = Console(soft_wrap=False, emoji=False, highlight=False)
    if not console.is_terminal:
        console = Console(width=160, emoji=False, highlight=False)
    for f in fronts.values():
        if f.serves:
            console.print(_table(f, model, prompt, output))
        else:
            console.print(_cannot(f, model), markup=False)
    console.print(
        "cost per million output tokens at full load: $/GPU-h / (3600 x tokens/s per GPU) x 1e6",
        markup=False,
    )


def _write_chart(
    fronts: dict[str, GpuFrontier],
    model: ModelArch,
    prompt: int,
    output: int,
    path: Path,
    quiet: bool,
) -> None:
    from planner.base.files import atomic_write_bytes
    from planner.reports.frontier_chart import frontier_png

    title = f"{model.id}, {prompt} in / {output} out: output tokens/s per GPU vs per user"
    atomic_write_bytes(path, frontier_png(fronts, title))
    msg = f"chart: {path}"
    if quiet:
        Console(stderr=True, highlight=False).print(msg, markup=False)
    else:
        Console(highlight=False).print(msg, markup=False)


def _finite(obj: Any) -> Any:
    """JSON-safe: infinities and NaN become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj
