"""The serving measurements the physics is judged on (catalogs/sources/serving-scale-measurements.yaml):
rows a reading shows are not what their label says are refused with the reason, and the pools
of the InferenceX API rows agree with the recipe each names."""

from __future__ import annotations

import re

import pytest
import yaml

from benchmarks.serving_scale import DATA, predict
from planner.inputs.catalog import load_gpus, load_models
from planner.physics.calibration.values import default_calibration

ROWS = yaml.safe_load(DATA.read_text())["measurements"]
BY_ID = {r["id"]: r for r in ROWS}


def test_ids_are_unique_and_sourced():
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids))
    assert all(r.get("source") and r.get("as_of") for r in ROWS)


def test_a_row_marked_not_comparable_is_refused_with_its_reason():
    marked = [r for r in ROWS if r.get("not_comparable")]
    assert len(marked) >= 3
    models, gpus = load_models(), load_gpus()
    for r in marked:
        out = predict(r, models, gpus, default_calibration())
        assert out.refused == r["not_comparable"] and not out.predicted


@pytest.mark.parametrize(
    ("mixed", "prefill"),
    [
        ("vllm-h200-sxm-fp8-tp8-mixed-isl2k-osl128", "vllm-h200-sxm-fp8-tp8-prefill-only-isl2k"),
        ("vllm-b300-fp4-tp2-mixed-isl2k-osl128", "vllm-b300-fp4-tp2-prefill-only-isl2k"),
        ("vllm-gb300-fp4-tp2-mixed-isl2k-osl128", "vllm-gb300-fp4-tp2-prefill-only-isl2k"),
    ],
)
def test_the_refused_decode_bars_exceed_their_own_prefill_ceiling(mixed, prefill):
    """As a mean, output tok/s x (prompt / output) is the input rate the same instance must
    prefill; these bars ask for more than its own prefill-only peak gives."""
    m, p = BY_ID[mixed], BY_ID[prefill]
    assert m["not_comparable"]
    ceiling = p["total_tokens_per_s_per_gpu"] * m["output"] / m["prompt"]
    assert m["output_tokens_per_s_per_gpu"] > 1.3 * ceiling


def test_inferencex_api_rows_agree_with_the_recipe_they_name():
    rows = [r for r in ROWS if r["id"].startswith("ix-api-")]
    assert len(rows) >= 16
    for r in rows:
        m = re.search(r"ctx(\d+)_gen(\d+)_(dep|tep)(\d+)_.*mtp(\d)", r["source"])
        assert m, r["id"]
        ctx, gen, mode, n, mtp = int(m[1]), int(m[2]), m[3], int(m[4]), int(m[5])
        pre, dec = r["deployment"]["prefill"], r["deployment"]["decode"]
        assert (pre["workers"], dec["workers"], dec["gpus"], dec["mode"]) == (ctx, gen, n, mode)
        assert mtp == 0 and r["mtp"] is False
        assert r["concurrency"] > 0 and r["total_tokens_per_s_per_gpu"] > 0
