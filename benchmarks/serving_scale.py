"""Serving at scale against public measurements: error of the physics and leave-one-source-out.

Reads ``catalogs/sources/serving-scale-measurements.yaml`` (disaggregated, wide expert
parallelism, MTP, aggregated baselines; InferenceX, SGLang, vLLM, TensorRT-LLM, MLPerf, AMD) and
predicts every row whose deployment is stated (pools, worker sizes and modes) with
:mod:`planner.physics.serving`:

* ``prefill_only`` rows: one prefill worker at full chunks, input tokens/s per prefill GPU;
* ``decode_only`` rows: the decode pool at the stated concurrency (else the most that fit), output
  tokens/s per decode GPU and TPOT;
* ``e2e`` rows: :func:`~planner.physics.serving.estimate_deployment` at the stated concurrency,
  output (or input+output) tokens/s per GPU on the row's basis and TPOT.

Rows whose pools are not published (InferenceX "best config", MoRI blog) are *refused* and
counted. ``python -m benchmarks.serving_scale`` prints the per-row table, the medians by category
and, with ``--fit``, the fit of the serving constants and its leave-one-source-out error
(``--loso``), as catalogs/NOTES.md quotes.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from planner.inputs.catalog import Sourced, load_gpus, load_models
from planner.inputs.model_arch import DraftAcceptance
from planner.physics.calibration.values import Calibration, default_calibration
from planner.physics.serving import (
    Deployment,
    Worker,
    WorkerPhysics,
    estimate_deployment,
    with_draft_acceptance,
)

DATA = Path(__file__).resolve().parents[1] / "catalogs/sources/serving-scale-measurements.yaml"
_MODES = {"tp": "tp", "tep": "ep", "ep": "ep", "dep": "dep"}


@dataclass(frozen=True)
class Row:
    id: str
    group: str
    category: (
        str  # disaggregated | disaggregated+mtp | aggregated | aggregated+mtp | prefill | decode
    )
    gpu: str
    measured: dict[str, float]
    predicted: dict[str, float]
    refused: str | None = None


def _worker(spec) -> Worker | None:
    """The pool a row states. A tensor-parallel pool of G GPUs that no engine runs as one
    TP group (G not a power of two, e.g. TensorRT-LLM's 'TP12' prefill = 3 x TP4) is read as
    G/g workers of the largest power of two g dividing G, at most 8."""
    if not spec:
        return None
    mode = _MODES.get(str(spec.get("mode")))
    g, w = spec.get("gpus"), spec.get("workers") or spec.get("instances") or 1
    if mode is None or not g:
        return None
    g, w = int(g), int(w)
    if mode == "tp" and g & (g - 1):
        p = g & -g  # largest power of two dividing g
        p = min(p, 8)
        return Worker(p, mode, w * g // p)
    return Worker(g, mode, w)


def _mtp(row) -> tuple[bool, int | None]:
    v = row.get("mtp")
    if v is True:
        return True, None
    if v is None or v is False or v == 0:
        return False, None
    return True, int(v)


def _measured(row) -> dict[str, float]:
    out = {}
    for k in ("output_tokens_per_s_per_gpu", "input_tokens_per_s_per_gpu",
              "total_tokens_per_s_per_gpu", "tpot_ms"):  # fmt: skip
        if row.get(k) is not None:
            out[k] = float(row[k])
    if "tpot_ms" not in out and row.get("tokens_per_s_per_user"):
        out["tpot_ms"] = 1000.0 / float(row["tokens_per_s_per_user"])
    return out


#: Whether a row that states its measured MTP acceptance length is predicted with it (the
#: planner's ``speculative:`` input) or with the calibration's fitted curve; main() sets it.
USE_MEASURED_ACCEPTANCE = False


def _row_calibration(row, calib: Calibration) -> Calibration:
    """``calib`` with the row's measured acceptance at its draft length, where it states both
    (and :data:`USE_MEASURED_ACCEPTANCE`)."""
    mtp, draft = _mtp(row)
    al = row.get("mtp_acceptance_length")
    if not (USE_MEASURED_ACCEPTANCE and mtp and draft and al):
        return calib
    acc = DraftAcceptance(lengths=(float(al),), draft=draft, source=f"measured: {row['id']}")
    return with_draft_acceptance(calib, acc)


def predict(row, models, gpus, calib: Calibration) -> Row:
    """The physics' figures for one measurement (or why it cannot be predicted). Pools in
    mode ``ep`` (attention parallelism not stated) are read as the physics' ep: tensor-parallel
    attention within a server, data-parallel across servers."""
    dep = row.get("deployment") or {}
    mtp, draft = _mtp(row)
    calib = _row_calibration(row, calib)
    phase = row.get("phase")
    basis = row.get("per_gpu_basis")
    if phase == "e2e" and "aggregated" not in dep and basis in ("decode", "prefill"):
        phase = f"{basis}_only"  # one pool's figure, measured with the other pool unlimited
    cat = "aggregated" if "aggregated" in dep else "disaggregated"
    if phase == "prefill_only":
        cat = "prefill"
    elif phase == "decode_only":
        cat = "decode"
    if mtp and cat in ("aggregated", "disaggregated"):
        cat += "+mtp"
    meas = _measured(row)

    def no(why: str) -> Row:
        return Row(row["id"], row["source_group"], cat, row["gpu"], meas, {}, why)

    if row.get("not_comparable"):  # a figure that is not what its label says (the row says why)
        return no(str(row["not_comparable"]))
    model = models.get(row.get("model"))
    gpu = gpus.get(row.get("gpu"))
    prec, prompt, output = row.get("precision"), row.get("prompt"), row.get("output")
    if model is None or gpu is None or prec is None or not prompt:
        return no("model, GPU, precision or prompt length not stated")
    conc = row.get("concurrency")
    if phase == "prefill_only":
        pw = _worker((dep or {}).get("prefill"))
        if pw is None:
            return no("prefill worker not stated")
        wp = WorkerPhysics(model, gpu, Worker(pw.gpus, pw.mode), prec, calib)
        why = wp.check(prompt, 1)
        if why:
            return no(why)
        rate, _ = wp.prefill_rate(prompt)
        return Row(row["id"], row["source_group"], cat, row["gpu"], meas,
                   {"input_tokens_per_s_per_gpu": rate * prompt / pw.gpus})  # fmt: skip
    if phase == "decode_only":
        dw_ = _worker((dep or {}).get("decode"))
        if dw_ is None:
            return no("decode worker not stated")
        out_len = output or 1000
        wp = WorkerPhysics(model, gpu, Worker(dw_.gpus, dw_.mode), prec, calib, mtp, draft)
        why = wp.check(prompt, out_len)
        if why:
            return no(why)
        top = wp.max_batch(prompt, out_len)
        n = min(top, conc / dw_.count) if conc else top
        _, acc, step = wp.best_draft(n, prompt + out_len / 2)
        return Row(row["id"], row["source_group"], cat, row["gpu"], meas, {
            "output_tokens_per_s_per_gpu": n * acc / step / dw_.gpus,
            "tpot_ms": step / acc * 1e3})  # fmt: skip
    if not output:
        return no("output length not stated")
    if "aggregated" in dep:
        w = _worker(dep["aggregated"])
        if w is None:
            return no("aggregated worker mode not stated")
        d = Deployment(w, None, mtp, draft)
    else:
        pre, dec = _worker(dep.get("prefill")), _worker(dep.get("decode"))
        if pre is None or dec is None:
            return no("pools not published")
        d = Deployment(dec, pre, mtp, draft)
    if not conc:
        wp = WorkerPhysics(model, gpu, d.decode, prec, calib, mtp, draft)
        conc = max(1, wp.max_batch(prompt, output) * d.decode.count)
    e = estimate_deployment(model, gpu, d, prec, prompt, output, int(conc), calib)
    if not e.fits:
        return no(e.reason or "does not fit")
    basis = row.get("per_gpu_basis") or "all"
    # decode_pool: an end-to-end figure with both pools as stated, per decode-pool GPU
    g = {"all": d.total_gpus, "decode": d.decode.total_gpus, "decode_pool": d.decode.total_gpus,
         "prefill": d.prefill.total_gpus if d.prefill else d.total_gpus}[basis]  # fmt: skip
    pred = {
        "output_tokens_per_s_per_gpu": e.tokens_per_s / g,
        "total_tokens_per_s_per_gpu": e.tokens_per_s * (prompt + output) / output / g,
        "input_tokens_per_s_per_gpu": e.tokens_per_s * prompt / output / g,
        "tpot_ms": e.tpot_ms,
    }
    return Row(row["id"], row["source_group"], cat, row["gpu"], meas, pred)


def rows(calib: Calibration | None = None) -> list[Row]:
    calib = calib or default_calibration()
    data = yaml.safe_load(DATA.read_text())["measurements"]
    models, gpus = load_models(), load_gpus()
    return [predict(r, models, gpus, calib) for r in data]


def ratios(rs: list[Row]) -> list[tuple[Row, str, float]]:
    """(row, metric, predicted / measured) for every metric both sides have."""
    out = []
    for r in rs:
        for k, v in r.measured.items():
            if k in r.predicted and v > 0 and r.predicted[k] > 0:
                out.append((r, k, r.predicted[k] / v))
    return out


def summary(rs: list[Row]) -> dict[str, dict[str, float]]:
    """Median |error| and worst ratio of throughput per GPU and of TPOT, by category."""
    out: dict[str, dict[str, float]] = {}
    rat = ratios(rs)
    for cat in sorted({r.category for r in rs}) + ["all"]:
        sel = [(r, k, x) for r, k, x in rat if cat in ("all", r.category)]
        n_rows = [r for r in rs if cat in ("all", r.category)]
        entry: dict[str, float] = {
            "rows": len(n_rows),
            "refused": sum(1 for r in n_rows if r.refused),
        }
        for name, keys in (("throughput", ("output_tokens_per_s_per_gpu",
                            "total_tokens_per_s_per_gpu", "input_tokens_per_s_per_gpu")),
                           ("tpot", ("tpot_ms",))):  # fmt: skip
            xs = [x for _, k, x in sel if k in keys]
            if xs:
                entry[f"{name}_n"] = len(xs)
                entry[f"{name}_median_err"] = statistics.median(abs(x - 1) for x in xs)
                entry[f"{name}_worst_ratio"] = max(max(x, 1 / x) for x in xs)
        out[cat] = entry
    return out


# ----------------------------------------------------------------------------- fit

FITTED = {
    "a2a_eff": (0.3, 0.45, 0.6, 0.8),
    "a2a_latency_us": (15.0, 30.0, 60.0, 100.0, 150.0, 200.0, 300.0),
    "a2a_scaleout_latency_us": (0.0, 40.0, 100.0, 200.0, 300.0),
    "a2a_overlap": (0.3, 0.5, 0.7, 0.85),
    "dp_imbalance": (0.25, 0.5, 1.0, 1.5),
    "wide_compute_eff": (0.4, 0.55, 0.7, 0.85, 1.0),
    "wide_prefill_eff": (0.4, 0.5, 0.6, 0.7, 0.85, 1.0),
    "mtp_acceptance": (0.8, 0.85, 0.9, 0.95),
    "mtp_acceptance_decay": (0.6, 0.7, 0.8, 0.9),
    "moe_prefill_eff": (0.3, 0.4, 0.5, 0.7, 1.0),
}


def with_values(calib: Calibration, values: dict[str, float]) -> Calibration:
    serve = calib.serve.model_copy(update={
        k: Sourced(value=v, source="benchmarks/serving_scale.py fit", as_of="2026-11")
        for k, v in values.items()})  # fmt: skip
    return calib.model_copy(update={"serve": serve})


def loss(rs: list[Row]) -> float:
    xs = [math.log(x) ** 2 for _, _, x in ratios(rs)]
    refused = sum(1 for r in rs if r.refused)
    return (sum(xs) / max(len(xs), 1)) + 0.0 * refused


def fit(
    data, models, gpus, base: Calibration, exclude: str | None = None, passes: int = 2,
    near: bool = False,
):  # fmt: skip
    """Coordinate descent over :data:`FITTED` (each constant on its grid, the rest held);
    ``near``: only the grid neighbours of the current values (leave-one-source-out refits)."""
    sel = [r for r in data if r.get("source_group") != exclude]
    values = {k: DEFAULTS_OF(base, k) for k in FITTED}

    def evaluate(vals):
        c = with_values(base, vals)
        return loss([predict(r, models, gpus, c) for r in sel])

    best = evaluate(values)
    for _ in range(passes):
        changed = False
        for k, grid in FITTED.items():
            if near and values[k] in grid:
                i = grid.index(values[k])
                grid = grid[max(0, i - 1) : i + 2]
            for v in grid:
                if v == values[k]:
                    continue
                trial = {**values, k: v}
                e = evaluate(trial)
                if e < best - 1e-9:
                    best, values, changed = e, trial, True
        if not changed:
            break
    return values, best


def DEFAULTS_OF(calib: Calibration, name: str) -> float:  # noqa: N802
    from planner.physics.serving.constants import const

    return const(calib, name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the serving constants")
    ap.add_argument("--loso", action="store_true", help="leave-one-source-out (with --fit)")
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument(
        "--acceptance",
        choices=("measured", "curve"),
        default="curve",
        help="MTP rows that state their acceptance length: predicted with it (measured, the "
        "planner's speculative: input) or with the fitted curve",
    )
    a = ap.parse_args(argv)
    global USE_MEASURED_ACCEPTANCE
    USE_MEASURED_ACCEPTANCE = a.acceptance == "measured"
    calib = default_calibration()
    rs = rows(calib)
    if a.rows:
        for r in rs:
            if r.refused:
                print(f"{r.id:50s} {r.category:18s} REFUSED: {r.refused[:70]}")
                continue
            parts = [f"{k.split('_')[0]}:{r.predicted[k]:.0f}/{v:.0f}" for k, v in
                     r.measured.items() if k in r.predicted]  # fmt: skip
            print(f"{r.id:50s} {r.category:18s} " + "  ".join(parts))
    for cat, e in summary(rs).items():
        print(cat, {k: round(v, 3) for k, v in e.items()})
    if a.fit:
        data = yaml.safe_load(DATA.read_text())["measurements"]
        models, gpus = load_models(), load_gpus()
        values, best = fit(data, models, gpus, calib)
        print("fit on all:", values, round(best, 4))
        if a.loso:
            held: list[Row] = []
            for g in sorted({r["source_group"] for r in data}):
                if not any(r.group == g and not r.refused for r in rs):
                    continue
                v, _ = fit(data, models, gpus, with_values(calib, values), exclude=g, passes=1,
                           near=True)  # fmt: skip
                c = with_values(calib, v)
                held += [predict(r, models, gpus, c) for r in data if r["source_group"] == g]
            print("leave-one-source-out:")
            for cat, e in summary(held).items():
                print(" ", cat, {k: round(v, 3) for k, v in e.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
