"""A stand-in for the external check of issue 44: ``planner estimate serve`` over a broad grid.

Runs the CLI in-process (click's CliRunner) exactly as the external check calls it::

    planner estimate serve --model M --gpu G --precision P --prompt I --output O --batch C \
        --prefill WxG:MODE --decode WxG:MODE [--mtp] --json
    planner estimate serve ... --batch C --gpus N --layout tp|ep|dep [--mtp] --json

over the large MoE and dense models of the catalog, the 2026 datacenter GPUs, their precisions,
prompts 1k/8k, batches 1-4096, the worker shapes people deploy (1x4:dep .. 1x72:dep, 1x8:tp,
two-node 1x16 on HGX, disaggregated pairs), with and without MTP, plus the rows of
``catalogs/sources/serving-scale-measurements.yaml`` translated to CLI calls. It counts:

* crashes: exit code 1 or an exception (a traceback);
* refusals: exit 2 (input error) or 3 / ``fits: false``, grouped by reason; the "must serve"
  shapes (what people really deploy) are listed when refused;
* nonsense: null / NaN / inf in the figures the check reads, tokens/s per GPU above the compute
  roofline (each output token costs at least 2 x active params FLOPs, each prompt token too),
  TPOT below the weight-streaming floor at batch 1, tokens/s falling as the batch doubles at low
  batch (<= 64), missing keys;
* slow calls (> 10 s) and the slowest call.

``python -m benchmarks.serving_cli_sweep [--sample N] [--seed S] [--show K]``; ``--sample 0``
runs the whole grid (slow: tens of thousands of calls).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import re
import statistics
import sys
import time
import traceback
from pathlib import Path

import yaml
from click.testing import CliRunner

from planner.cli import cli
from planner.inputs.catalog import load_gpus, load_models

DATA = Path(__file__).resolve().parents[1] / "catalogs/sources/serving-scale-measurements.yaml"
MODELS = [
    "deepseek-r1", "deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "gpt-oss-120b",
    "gpt-oss-20b", "llama-3.3-70b", "llama-3-70b", "llama-3.1-405b", "llama-4-maverick",
]  # fmt: skip
GPUS = ["h100-sxm", "h200-sxm", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x"]
DISAGG = [
    ("1x4:dep", "1x8:dep"), ("2x8:dep", "1x16:dep"), ("4x4:dep", "1x32:dep"),
    ("1x8:tp", "1x16:dep"), ("1x8:tp", "1x8:ep"), ("1x8:ep", "1x16:ep"), ("2x8:tp", "1x8:tp"),
    ("4x4:dep", "1x48:dep"), ("1x16:dep", "1x72:dep"), ("1x8:tp", "2x8:tp"),
    ("2x4:tp", "1x4:dep"), ("1x16:ep", "1x16:ep"), ("3x4:dep", "1x16:dep"),
]  # fmt: skip
AGG = [(n, lay) for n in (4, 8, 16, 32, 72) for lay in ("tp", "ep", "dep")]
BATCHES = [1, 8, 64, 256, 1024, 4096]
LADDER = [1, 2, 4, 8, 16, 32, 64]
KEYS = ("tokens_per_s", "tpot_ms", "ttft_ms", "gpus", "layout")
# shapes people really deploy: a refusal of any of these is a bug
MUST = [
    ("deepseek-r1", "h100-sxm", "fp8", "--gpus 16 --layout tp"),
    ("deepseek-r1", "h100-sxm", "fp8", "--gpus 16 --layout dep"),
    ("deepseek-r1", "h100-sxm", "fp8", "--gpus 16 --layout ep"),
    ("deepseek-r1", "h100-sxm", "fp8", "--prefill 1x16:dep --decode 1x16:dep"),
    ("deepseek-r1", "h100-sxm", "fp8", "--prefill 2x16:dep --decode 1x32:dep"),
    ("deepseek-r1", "h200-sxm", "fp8", "--prefill 1x8:tp --decode 1x16:ep"),
    ("deepseek-r1", "h200-sxm", "fp8", "--gpus 16 --layout ep"),
    ("deepseek-r1", "h200-sxm", "fp8", "--gpus 8 --layout tp"),
    ("deepseek-r1", "h200-sxm", "fp8", "--gpus 8 --layout ep"),
    ("deepseek-r1", "h200-sxm", "fp8", "--gpus 8 --layout dep"),
    ("deepseek-r1", "mi300x", "fp8", "--gpus 8 --layout tp"),
    ("deepseek-r1", "mi300x", "fp8", "--gpus 8 --layout ep"),
    ("deepseek-r1", "mi300x", "fp8", "--gpus 8 --layout dep"),
    ("deepseek-r1", "mi355x", "fp4", "--gpus 8 --layout tp"),
    ("deepseek-r1", "mi355x", "fp8", "--prefill 1x8:tp --decode 1x8:dep"),
    ("deepseek-r1", "b200", "fp8", "--gpus 8 --layout tp"),
    ("deepseek-r1", "b200", "fp8", "--gpus 4 --layout tp"),
    ("deepseek-r1", "b200", "fp4", "--gpus 4 --layout tp"),
    ("deepseek-r1", "b200", "fp4", "--prefill 1x4:dep --decode 1x8:dep"),
    ("deepseek-r1", "gb200", "fp4", "--prefill 4x4:dep --decode 1x32:dep"),
    ("deepseek-r1", "gb200", "fp4", "--prefill 1x4:dep --decode 1x72:dep"),
    ("deepseek-r1", "gb200", "fp8", "--prefill 2x8:dep --decode 1x48:dep"),
    ("deepseek-r1", "gb300", "fp4", "--prefill 2x4:dep --decode 1x16:dep"),
    ("deepseek-r1", "gb200", "fp4", "--gpus 72 --layout dep"),
    ("deepseek-r1", "gb200", "fp4", "--gpus 4 --layout tp"),
    ("deepseek-r1", "b300", "fp4", "--gpus 8 --layout dep"),
    ("kimi-k2", "h200-sxm", "fp8", "--gpus 16 --layout dep"),
    ("kimi-k2", "gb200", "fp4", "--prefill 2x4:dep --decode 1x16:dep"),
    ("qwen3-235b-a22b", "h100-sxm", "fp8", "--gpus 8 --layout ep"),
    ("qwen3-235b-a22b", "h100-sxm", "fp8", "--gpus 4 --layout tp"),
    ("gpt-oss-120b", "h100-sxm", "fp4", "--gpus 1 --layout tp"),
    ("gpt-oss-120b", "h200-sxm", "fp4", "--gpus 1 --layout tp"),
    ("gpt-oss-120b", "mi300x", "fp4", "--gpus 1 --layout tp"),
    ("gpt-oss-120b", "b200", "fp4", "--gpus 1 --layout tp"),
    ("gpt-oss-120b", "mi355x", "fp4", "--gpus 8 --layout tp"),
    ("llama-3.3-70b", "h100-sxm", "fp8", "--gpus 8 --layout tp"),
    ("llama-3.1-405b", "h100-sxm", "fp8", "--gpus 8 --layout tp"),
    ("llama-3.1-405b", "h100-sxm", "bf16", "--gpus 16 --layout tp"),
    ("llama-3.1-405b", "mi300x", "fp8", "--gpus 8 --layout tp"),
]


def _precisions(gpu) -> list[str]:
    out = ["bf16"]
    if gpu.fp8_dense_tflops is not None:
        out.append("fp8")
    if gpu.fp4_dense_tflops is not None:
        out.append("fp4")
    return out


def _call(model, gpu, prec, prompt, output, batch, shape, mtp, tag="grid") -> dict:
    return {"model": model, "gpu": gpu, "precision": prec, "prompt": prompt, "output": output,
            "batch": batch, "shape": shape, "mtp": mtp, "tag": tag}  # fmt: skip


def _argv(c: dict) -> list[str]:
    a = ["estimate", "serve", "--model", c["model"], "--gpu", c["gpu"], "--precision",
         c["precision"], "--prompt", str(c["prompt"]), "--output", str(c["output"]),
         *(["--batch", str(c["batch"])] if c["batch"] else []), *c["shape"].split()]  # fmt: skip
    if c["mtp"]:
        a.append("--mtp")
    return [*a, "--json"]


def _shape_agg(n, lay):
    return f"--gpus {n} --layout {lay}"


def _shape_dis(p, d):
    return f"--prefill {p} --decode {d}"


def grid(models, gpus) -> list[dict]:
    calls = []
    for m in MODELS:
        if m not in models:
            continue
        moe = models[m].moe is not None
        mtps = (False, True) if models[m].num_nextn_predict_layers > 0 else (False,)
        for g in GPUS:
            for p in _precisions(gpus[g]):
                if (
                    p == "bf16"
                    and m in ("deepseek-r1", "deepseek-v3", "kimi-k2")
                    and g.startswith("h100")
                ):
                    pass  # still asked: a refusal with a reason
                shapes = [_shape_agg(n, lay) for n, lay in AGG if moe or lay == "tp"]
                if moe:
                    shapes += [_shape_dis(pp, dd) for pp, dd in DISAGG]
                else:
                    shapes += [_shape_dis(pp, dd) for pp, dd in DISAGG
                               if pp.endswith(":tp") and dd.endswith(":tp")]  # fmt: skip
                for prompt in (1024, 8192):
                    for b in BATCHES:
                        for s in shapes:
                            for mtp in mtps:
                                calls.append(_call(m, g, p, prompt, 1024, b, s, mtp))
    return calls


def ladders(models, gpus) -> list[dict]:
    """Batch 1..64 on a few shapes per model and GPU: tokens/s must not fall as batch grows."""
    calls = []
    for m in ("deepseek-r1", "kimi-k2", "qwen3-235b-a22b", "gpt-oss-120b", "llama-3.3-70b"):
        if m not in models:
            continue
        moe = models[m].moe is not None
        shapes = ["--gpus 8 --layout tp", "--prefill 1x8:tp --decode 1x8:tp"]
        if moe:
            shapes += [
                "--gpus 16 --layout dep",
                "--gpus 8 --layout ep",
                "--prefill 2x4:dep --decode 1x16:dep",
                "--prefill 1x8:tp --decode 1x16:ep",
            ]
        for g in GPUS:
            p = "fp4" if gpus[g].fp4_dense_tflops is not None else "fp8"
            for s in shapes:
                for mtp in (False, True) if models[m].num_nextn_predict_layers else (False,):
                    for b in LADDER:
                        calls.append(_call(m, g, p, 1024, 1024, b, s, mtp, "ladder"))
    return calls


def must(models) -> list[dict]:
    calls = []
    for m, g, p, s in MUST:
        if m not in models:
            continue
        for b in (1, 64, 512):
            for mtp in (False, True) if models[m].num_nextn_predict_layers else (False,):
                calls.append(_call(m, g, p, 1024, 1024, b, s, mtp, "must"))
    return calls


def measurement_calls() -> list[dict]:
    """The measurement rows with stated pools, as the external check would call them."""
    from benchmarks.serving_scale import _mtp, _worker

    data = yaml.safe_load(DATA.read_text())["measurements"]
    calls = []
    for r in data:
        dep = r.get("deployment") or {}
        if r.get("phase") != "e2e" or not r.get("prompt") or not r.get("output"):
            continue
        mtp, _ = _mtp(r)
        conc = r.get("concurrency")
        if "aggregated" in dep:
            w = _worker(dep["aggregated"])
            if w is None:
                continue
            shape = _shape_agg(w.gpus, w.mode)
            conc = max(1, int(conc / w.count)) if conc else None  # None: the most that fit
        else:
            pre, dec = _worker(dep.get("prefill")), _worker(dep.get("decode"))
            if pre is None or dec is None:
                continue
            shape = _shape_dis(pre.label(), dec.label())
            conc = int(conc) if conc else None
        c = _call(r["model"], r["gpu"], r["precision"], int(r["prompt"]), int(r["output"]),
                  conc, shape, mtp, "measured")  # fmt: skip
        c["row"] = r
        calls.append(c)
    return calls


def _num(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _reason_key(text: str) -> str:
    """A refusal reason with the numbers taken out, to group them."""
    t = re.sub(r"\d[\d,.]*", "#", text.strip().splitlines()[-1] if text.strip() else "")
    t = re.sub(r"'[^']*'", "'*'", t)
    return t[:140]


def run_one(runner, c, models, gpus) -> dict:
    t0 = time.perf_counter()
    res = runner.invoke(cli, _argv(c))
    dt = time.perf_counter() - t0
    out = {"call": c, "seconds": dt, "exit": res.exit_code, "problems": []}
    if res.exit_code not in (0, 2, 3) or (
        res.exception is not None and not isinstance(res.exception, SystemExit)
    ):
        exc = res.exception
        tb = "".join(traceback.format_exception(exc)) if exc is not None else res.output
        out["crash"] = tb[-1500:]
        return out
    if res.exit_code == 2:
        out["refused"] = _reason_key(res.output)
        out["refused_text"] = res.output.strip()[-300:]
        return out
    try:
        j = json.loads(res.stdout)
    except ValueError:
        out["crash"] = "stdout is not JSON: " + res.stdout[:300]
        return out
    out["json"] = {k: j.get(k) for k in (*KEYS, "fits", "reason", "batch", "precision")}
    if not j.get("fits") or res.exit_code == 3:
        out["refused"] = _reason_key(str(j.get("reason")))
        out["refused_text"] = str(j.get("reason"))
        return out
    for k in KEYS:
        if k not in j:
            out["problems"].append(f"missing key {k}")
        elif k != "layout" and not _num(j[k]):
            out["problems"].append(f"{k} is {j[k]!r}")
    if not isinstance(j.get("layout"), str) or ":" not in str(j.get("layout")):
        out["problems"].append(f"layout {j.get('layout')!r} is not a WxG:MODE label")
    if out["problems"]:
        return out
    m, g = models[c["model"]], gpus[c["gpu"]]
    active = m.active_params or m.computed_active_params or m.params
    prec = j.get("precision") or c["precision"]  # fp4 without FP4 cores: int4 (weight-only)
    peak = {"bf16": g.bf16_dense_tflops, "fp8": g.fp8_dense_tflops, "fp4": g.fp4_dense_tflops,
            "int4": g.bf16_dense_tflops}[prec]  # fmt: skip
    peak = float(getattr(peak, "value", peak)) * 1e12
    flops_per_out = 2 * active * (1 + c["prompt"] / c["output"])
    roof = peak / flops_per_out  # tokens/s per GPU at 100 % of peak
    per_gpu = j["tokens_per_s"] / j["gpus"]
    if per_gpu > roof:
        out["problems"].append(f"{per_gpu:,.0f} tok/s/GPU above roofline {roof:,.0f}")
    if (j["tpot_ms"] <= 0 and c["output"] > 1) or j["ttft_ms"] <= 0 or j["tokens_per_s"] <= 0:
        out["problems"].append("non-positive figure")
    # weight-streaming floor: one step reads at least the active weights once across the decode
    # GPUs; MTP emits at most 1 + max draft tokens per step
    dec = j.get("deployment", {}) if isinstance(j.get("deployment"), dict) else {}
    bpp = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5, "int4": 0.5}[prec]
    bw = float(getattr(g.memory_bandwidth_gbs, "value", g.memory_bandwidth_gbs)) * 1e9
    dec_gpus = j["gpus"]
    m_ = re.search(r"--decode (\d+)x(\d+)", c["shape"])
    if m_:
        dec_gpus = int(m_.group(2))  # one decode worker
    floor_ms = active * bpp / (dec_gpus * bw) / (4.0 if c["mtp"] else 1.0) * 1e3
    if c["output"] > 1 and j["tpot_ms"] < floor_ms:
        out["problems"].append(f"TPOT {j['tpot_ms']:.3f} ms below floor {floor_ms:.3f} ms")
    _ = dec
    return out


def monotone_problems(results) -> list[str]:
    by = collections.defaultdict(dict)
    for r in results:
        c = r["call"]
        if c["tag"] != "ladder" or "json" not in r or r.get("refused"):
            continue
        key = (c["model"], c["gpu"], c["precision"], c["prompt"], c["shape"], c["mtp"])
        by[key][c["batch"]] = r["json"]
    probs = []
    for key, pts in by.items():
        bs = sorted(pts)
        for a, b in zip(bs, bs[1:], strict=False):
            ta, tb = pts[a]["tokens_per_s"], pts[b]["tokens_per_s"]
            if _num(ta) and _num(tb) and tb < 0.98 * ta:
                probs.append(f"{key}: tokens/s {ta:,.0f} at batch {a} > {tb:,.0f} at {b}")
            pa, pb = pts[a]["tpot_ms"], pts[b]["tpot_ms"]
            if _num(pa) and _num(pb) and pb < 0.9 * pa:
                probs.append(f"{key}: TPOT {pa:.2f} ms at batch {a} > {pb:.2f} at {b}")
    return probs


def measured_errors(results) -> dict:
    """Median |error| and worst ratio of output tokens/s per GPU and TPOT on the measurement rows
    (basis all, output figure published), by category."""
    cats = collections.defaultdict(lambda: {"tput": [], "tpot": [], "n": 0, "refused": 0})
    for r in results:
        c = r["call"]
        if c["tag"] != "measured":
            continue
        row = c["row"]
        dis = "--prefill" in c["shape"]
        cat = ("disaggregated" if dis else "aggregated") + ("+mtp" if c["mtp"] else "")
        e = cats[cat]
        e["n"] += 1
        if "crash" in r or r.get("refused"):
            e["refused"] += 1
            continue
        j = r["json"]
        basis = row.get("per_gpu_basis") or "all"
        if basis == "all" and row.get("output_tokens_per_s_per_gpu"):
            e["tput"].append(
                j["tokens_per_s"] / j["gpus"] / float(row["output_tokens_per_s_per_gpu"])
            )
        elif basis == "all" and row.get("total_tokens_per_s_per_gpu"):
            tot = j["tokens_per_s"] * (c["prompt"] + c["output"]) / c["output"] / j["gpus"]
            e["tput"].append(tot / float(row["total_tokens_per_s_per_gpu"]))
        tp = row.get("tpot_ms") or (1000 / row["tokens_per_s_per_user"]
                                    if row.get("tokens_per_s_per_user") else None)  # fmt: skip
        if tp:
            e["tpot"].append(j["tpot_ms"] / float(tp))
    out = {}
    for cat, e in sorted(cats.items()):
        d = {"calls": e["n"], "refused": e["refused"]}
        for k in ("tput", "tpot"):
            if e[k]:
                d[f"{k}_n"] = len(e[k])
                d[f"{k}_median_err"] = round(statistics.median(abs(x - 1) for x in e[k]), 3)
                d[f"{k}_worst_ratio"] = round(max(max(x, 1 / x) for x in e[k]), 2)
        out[cat] = d
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=4000, help="grid calls sampled (0: all)")
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--show", type=int, default=8, help="examples shown per finding")
    ap.add_argument("--json", dest="json_out", type=Path, default=None)
    a = ap.parse_args(argv)
    models, gpus = load_models(), load_gpus()
    g = grid(models, gpus)
    if a.sample and a.sample < len(g):
        g = random.Random(a.seed).sample(g, a.sample)
    calls = must(models) + measurement_calls() + ladders(models, gpus) + g
    runner = CliRunner()
    results = []
    t0 = time.time()
    for i, c in enumerate(calls):
        results.append(run_one(runner, c, models, gpus))
        if (i + 1) % 1000 == 0:
            print(f"... {i + 1}/{len(calls)} calls, {time.time() - t0:.0f} s", file=sys.stderr)
    crashes = [r for r in results if "crash" in r]
    refused = [r for r in results if r.get("refused")]
    nonsense = [r for r in results if r["problems"]]
    slow = [r for r in results if r["seconds"] > 10]
    mono = monotone_problems(results)
    must_refused = [
        r for r in results if r["call"]["tag"] == "must" and (r.get("refused") or "crash" in r)
    ]
    print(f"calls {len(results)} ({len(calls) - len(g)} fixed + {len(g)} sampled grid), "
          f"{time.time() - t0:.0f} s")  # fmt: skip
    print(f"crashes {len(crashes)}")
    for r in crashes[: a.show]:
        print("  ", " ".join(_argv(r["call"])), "\n    ", r["crash"].strip().splitlines()[-1])
    by_reason = collections.Counter(r["refused"] for r in refused)
    print(f"refusals {len(refused)} ({len(refused) / max(1, len(results)):.1%})")
    for k, v in by_reason.most_common(25):
        print(f"  {v:6d}  {k}")
    print(f"refused must-serve shapes {len(must_refused)}")
    seen = set()
    for r in must_refused:
        c = r["call"]
        k = (c["model"], c["gpu"], c["precision"], c["shape"], c["mtp"])
        if k in seen:
            continue
        seen.add(k)
        print(
            "  ",
            " ".join(_argv(c)),
            "\n     ->",
            r.get("refused_text") or r.get("crash", "")[-200:],
        )
    probs = collections.Counter(re.sub(r"[\d,.]+", "#", p) for r in nonsense for p in r["problems"])
    print(f"nonsense {len(nonsense)}")
    for k, v in probs.most_common(10):
        print(f"  {v:6d}  {k}")
    for r in nonsense[: a.show]:
        print("  ", " ".join(_argv(r["call"])), "->", r["problems"])
    print(f"not monotone in batch (<= 64) {len(mono)}")
    for p in mono[: a.show]:
        print("  ", p)
    slowest = max(results, key=lambda r: r["seconds"])
    print(f"slow (> 10 s) {len(slow)}; slowest {slowest['seconds']:.2f} s: "
          f"{' '.join(_argv(slowest['call']))}")  # fmt: skip
    print("measurement rows as CLI calls:")
    for cat, d in measured_errors(results).items():
        print(f"  {cat}: {d}")
    if a.json_out:
        a.json_out.write_text(json.dumps(
            [{k: v for k, v in r.items() if k != "call"} | {"argv": _argv(r["call"])}
             for r in results if "crash" in r or r.get("refused") or r["problems"]], indent=1,
            default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
