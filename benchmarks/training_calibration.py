"""Training estimates against published runs: held-out, leave-one-out and leave-one-source-out.

``python -m benchmarks.training_calibration`` prints what catalogs/NOTES.md (section 10) quotes:

1. dense runs: the held-out file (catalogs/sources/training-runs-heldout.yaml) predicted with
   factors fitted on training-runs.yaml alone; leave-one-out and leave-one-source-out over all
   of them (the shipped factors are the fit on all);
2. mixture-of-experts runs (planner/physics/calibration/training_moe.py): leave-one-out and
   leave-one-source-out of ``moe_mfu_factor``;
3. the famous runs as ``planner estimate train`` predicts them (median and P10-P90 against the
   published GPU-hours) with the run's stack and with the default (typical) stack, and the
   issue's three commands as typed (default stack);
4. each stack's goodput at the GPU counts of the published reliability figures, with the
   first-order Young-Daly figure the model replaced (capped at 0.1 as it was).

Each error is predicted / published - 1. Nothing here is fitted; it reads the shipped calibration.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from planner.inputs.catalog import load_models
from planner.physics.calibration.training import (
    HELDOUT_PATH,
    RUNS_PATH,
    Z90,
    LooRow,
    leave_one_out,
    leave_one_source_out,
    load_runs,
    predict_heldout,
    run_gpu,
    summarize,
)
from planner.physics.calibration.training_moe import RUNS as MOE_RUNS
from planner.physics.calibration.training_moe import leave_one_out as moe_leave_one_out
from planner.physics.calibration.training_moe import leave_one_source_out as moe_loso
from planner.physics.calibration.values import default_calibration
from planner.physics.realized import goodput
from planner.physics.train import estimate_train


def _stats(rows: Sequence[LooRow], log_sd: float) -> str:
    errs = [abs(r.error) for r in rows]
    inside = [abs(r.log_error) <= math.log(Z90) * log_sd for r in rows]
    return (
        f"median |error| {statistics.median(errs):.1%}, max {max(errs):.1%}, "
        f"P10-P90 band covers {sum(inside)}/{len(inside)} "
        f"(band width p90/p10 {math.exp(2 * math.log(Z90) * log_sd):.2f})"
    )


def dense_report() -> list[str]:
    fit, held = load_runs(RUNS_PATH), load_runs(HELDOUT_PATH)
    out = ["## Dense runs"]
    fit_sd = summarize(fit)[1].log_sd
    rows = predict_heldout(fit, held)
    out.append(f"held-out ({len(held)} runs, fit on the other {len(fit)}): " + _stats(rows, fit_sd))
    for r in rows:
        out.append(f"  {r.run.id:17} {r.run.stack:9} {r.run.basis} {r.run.gpu_hours:>12,.0f} "
                   f"{r.predicted_gpu_hours:>12,.0f} {r.error:+7.1%}")  # fmt: skip
    runs = fit + held
    _, summ = summarize(runs)
    out.append(f"leave-one-out ({len(runs)} runs): " + _stats(leave_one_out(runs), summ.log_sd))
    loso = leave_one_source_out(runs)
    labs = len({r.lab for r in runs})
    out.append(f"leave-one-source-out ({labs} publishers): " + _stats(loso, summ.log_sd))
    for r in sorted(loso, key=lambda r: r.run.lab):
        out.append(f"  {r.run.lab:11} {r.run.id:17} {r.error:+7.1%}")
    return out


def moe_report() -> list[str]:
    full, sd, rows = moe_leave_one_out()
    loso = moe_loso()
    out = ["## Mixture-of-experts runs", f"moe_mfu_factor {full:.3f} (log-sd {sd:.3f})"]
    for r, s in zip(rows, loso, strict=True):
        out.append(f"  {r.id:17} leave-one-out {math.expm1(r.log_error):+7.1%}   "
                   f"leave-one-source-out {math.expm1(s.log_error):+7.1%}")  # fmt: skip
    for name, rs in (("leave-one-out", rows), ("leave-one-source-out", loso)):
        med = statistics.median(abs(math.expm1(r.log_error)) for r in rs)
        out.append(f"{name} median |error| {med:.1%}")
    return out


def famous_report() -> list[str]:
    calib, models = default_calibration(), load_models()
    out = ["## planner estimate train on the MoE runs (FP8 where published)"]
    for r in MOE_RUNS:
        for stack in dict.fromkeys((r.stack, "typical")):
            e = estimate_train(models[r.model], run_gpu(r.gpu), r.gpus, r.tokens, "full", calib,
                               r.seq_len, precision=r.precision, stack=stack)  # fmt: skip
            inside = e.gpu_hours_p10 <= r.gpu_hours <= e.gpu_hours_p90
            out.append(
                f"  {r.id:17} {r.gpu:8} {r.precision} {stack:8} published {r.gpu_hours:>10,.0f} "
                f"median {e.gpu_hours:>10,.0f} ({e.gpu_hours / r.gpu_hours - 1:+6.1%}) "
                f"P10-P90 {e.gpu_hours_p10:,.0f}-{e.gpu_hours_p90:,.0f} "
                f"{'inside' if inside else 'OUTSIDE'}"
            )
    return out


# The issue's commands as a user types them (default stack): DeepSeek-V3 on the catalog's H100
# SXM at the CLI's default context (4,096), Llama 4 with --gpus 16384 --seq-len 8192.
ISSUE_COMMANDS = (
    ("deepseek-v3", "h100-sxm", 2048, 14.8e12, 4096, 2.664e6),
    ("llama-4-scout", "h100-sxm", 16384, 40e12, 8192, 5.0e6),
    ("llama-4-maverick", "h100-sxm", 16384, 22e12, 8192, 2.38e6),
)


def default_stack_report() -> list[str]:
    calib, models = default_calibration(), load_models()
    out = ["## The issue's commands with the default stack (typical)"]
    errs = []
    for mid, gid, n, tokens, seq, published in ISSUE_COMMANDS:
        e = estimate_train(models[mid], run_gpu(gid), n, tokens, "full", calib, seq,
                           precision="fp8")  # fmt: skip
        inside = e.gpu_hours_p10 <= published <= e.gpu_hours_p90
        errs.append(abs(e.gpu_hours / published - 1))
        out.append(
            f"  {mid:17} {gid:8} {n:>6} GPUs published {published:>10,.0f} "
            f"median {e.gpu_hours:>10,.0f} ({e.gpu_hours / published - 1:+6.1%}) "
            f"P10-P90 {e.gpu_hours_p10:,.0f}-{e.gpu_hours_p90:,.0f} "
            f"{'inside' if inside else 'OUTSIDE'}"
        )
    out.append(f"median |error| {statistics.median(errs):.1%}")
    return out


def reliability_report() -> list[str]:
    """Goodput of each stack (Daly's complete model) against Young-Daly's first order, at the
    GPU counts of the published reliability figures."""
    stacks = default_calibration().realized.stacks
    out = ["## Goodput per stack: complete model (first order) at published scales"]
    for n, what in ((96, "reference plan"), (992, "OPT-175B: ~0.59 with every loss"),
                    (2048, "DeepSeek-V3, Llama 2"), (4096, "Falcon-180B"),
                    (12288, "MegaScale >0.90; RSC: 0.9 needs ~10 s checkpoints"),
                    (16384, "Llama 3 >0.90")):  # fmt: skip
        cells = []
        for name in ("mature", "typical", "first-run"):
            p = stacks.profile(name)
            lam, c = p.failure_rate_per_gpu_hour * n, p.checkpoint_s / 3600
            first = 1 - math.sqrt(2 * c * lam) - p.recovery_h * lam
            cells.append(f"{name} {goodput(n, p):.3f} ({max(first, 0.1):.3f})")
        out.append(f"  {n:>6} GPUs: " + ", ".join(cells) + f"   [{what}]")
    return out


def main() -> None:
    parts = (dense_report(), moe_report(), famous_report(), default_stack_report(),
             reliability_report())  # fmt: skip
    print("\n\n".join("\n".join(p) for p in parts))


if __name__ == "__main__":
    main()
