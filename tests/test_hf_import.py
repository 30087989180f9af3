"""``planner model import-hf``: config.json -> model catalog entry, checked against published
parameter counts (totals within 2 %, active counts within the published figure's convention)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.cli import cli
from planner.inputs.catalog import load_models
from planner.inputs.importers.hf_config import model_entry, read_hf_config
from planner.inputs.model_arch import ModelArch, count_mismatch, count_params

HF = Path(__file__).parent / "fixtures" / "hf"
ROOT = Path(__file__).resolve().parent.parent

# (fixture, published total, published active, active counts the input embedding?)
# Mixtral: mistral.ai 46.7B / 12.9B; Qwen3-30B-A3B model card 30.5B / 3.3B; gpt-oss model card
# (arXiv:2508.10925) 20.91B / 3.61B with the unembedding only; Kimi K2 (arXiv:2507.20534)
# 1.04T / 32.6B.
PUBLISHED = [
    ("mixtral-8x7b", 46.7e9, 12.9e9, True),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, True),
    ("gpt-oss-20b", 20.91e9, 3.61e9, False),
    ("kimi-k2", 1.04e12, 32.6e9, True),
]


def _entry(name: str) -> dict:
    path = HF / f"{name}.json"
    return model_entry(read_hf_config(path), name, path, "test", "2026-01")


@pytest.mark.parametrize(("name", "total", "active", "with_embedding"), PUBLISHED)
def test_import_reproduces_published_counts(name, total, active, with_embedding):
    e = _entry(name)
    assert abs(e["params"] / total - 1) < 0.02
    c = count_params(ModelArch.model_validate(e))
    got = c.active if with_embedding else c.active - c.embed_in
    assert abs(got / active - 1) < 0.02
    assert e["active_params"] < e["params"] / 3  # sparse: far fewer active than total


def test_cli_writes_a_catalog_that_loads_and_prints_totals(tmp_path):
    out = tmp_path / "models.yaml"
    runner = CliRunner()
    for name, *_ in PUBLISHED:
        r = runner.invoke(
            cli, ["model", "import-hf", str(HF / f"{name}.json"), "--id", name, "-o", str(out)]
        )
        assert r.exit_code == 0, r.output
        assert "total params" in r.output and "KV cache per token" in r.output
    models = load_models(out)  # the loader re-checks params against the shape
    assert sorted(models) == sorted(n for n, *_ in PUBLISHED)
    # importing again replaces the entry instead of duplicating it
    runner.invoke(
        cli,
        ["model", "import-hf", str(HF / "gpt-oss-20b.json"), "--id", "gpt-oss-20b", "-o", str(out)],
    )
    assert len(yaml.safe_load(out.read_text())["models"]) == len(PUBLISHED)


def test_unknown_model_type_and_missing_field_exit_2_naming_both(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "mamba2", "hidden_size": 1}')
    r = CliRunner().invoke(cli, ["model", "import-hf", str(bad), "--id", "x"])
    assert r.exit_code == 2 and "mamba2" in r.output and "unknown model_type" in r.output
    bad.write_text('{"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32}')
    r = CliRunner().invoke(cli, ["model", "import-hf", str(bad), "--id", "x"])
    assert r.exit_code == 2 and "qwen3_moe" in r.output and "num_hidden_layers" in r.output


def test_missing_moe_field_is_named():
    cfg = read_hf_config(HF / "kimi-k2.json")
    del cfg["kv_lora_rank"]
    with pytest.raises(InputError, match="kimi_k2.*kv_lora_rank"):
        model_entry(cfg, "k", Path("c.json"))


def test_explicit_head_dim_wins_over_hidden_over_heads():
    e = _entry("qwen3-32b")
    assert e["head_dim"] == 128 and e["hidden"] // e["heads"] == 80


def test_llama4_text_config_and_interleaved_moe_layers():
    mav, scout = _entry("llama-4-maverick"), _entry("llama-4-scout")
    assert mav["moe"]["dense_layers"] == 24 and scout["moe"]["dense_layers"] == 0
    assert mav["intermediate"] == 16384 and mav["moe"]["expert_intermediate"] == 8192
    assert abs(mav["params"] / 400e9 - 1) < 0.02


def test_catalog_counts_match_the_shapes_and_a_bad_count_is_refused(tmp_path):
    models = load_models()
    for mid in ("deepseek-r1", "qwen3-235b-a22b", "gpt-oss-120b", "llama-4-maverick", "kimi-k2"):
        assert models[mid].moe is not None and not count_mismatch(models[mid])
    assert models["deepseek-r1"].mla is not None and models["gpt-oss-120b"].sliding_window == 128
    doc = {"models": [{**models["mixtral-8x7b"].model_dump(exclude_none=True), "params": 56e9}]}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match=r"models\[0\]\.params.*56,000,000,000.*46,70"):
        load_models(path)


def test_model_list_json_shows_total_active_and_attention():
    r = CliRunner().invoke(cli, ["model", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["id"]: row for row in json.loads(r.output)}
    r1, l70 = rows["deepseek-r1"], rows["llama-3-70b"]
    assert r1["active_b"] < r1["params_b"] / 10 and r1["attention"] == "MLA"
    assert l70["active_b"] == l70["params_b"] and l70["experts"] == "-"
    # MLA's latent is far smaller per token than a GQA cache of a model a tenth its size
    assert r1["kv_kib_per_token_bf16"] < l70["kv_kib_per_token_bf16"] / 4


def test_a_problem_uses_its_own_model_file(tmp_path):
    from planner.inputs.problem import load_problem

    runner = CliRunner()
    r = runner.invoke(
        cli,
        ["model", "import-hf", str(HF / "qwen3-30b-a3b.json"), "--id", "my-moe", "-o",
         str(tmp_path / "my-models.yaml")],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    text = (
        (ROOT / "problems" / "moe_serving.yaml")
        .read_text()
        .replace("model: gpt-oss-120b", "model: my-moe")
    )
    (tmp_path / "p.yaml").write_text(
        text.replace("workloads:", "model_files: [my-models.yaml]\nworkloads:", 1)
    )
    inputs = load_problem(tmp_path / "p.yaml")
    assert inputs.models["my-moe"].moe is not None and "deepseek-r1" in inputs.models
    (tmp_path / "q.yaml").write_text(
        text.replace("workloads:", "model_files: [nope.yaml]\nworkloads:", 1)
    )
    with pytest.raises(InputError, match=r"model_files\[0\].*nope.yaml.*not found") as exc:
        load_problem(tmp_path / "q.yaml")
    assert "my-moe" in str(exc.value)  # the workload's model is unknown without the file


def test_bad_shapes_are_refused_with_their_field(tmp_path):
    base = load_models()["mixtral-8x7b"].model_dump(exclude_none=True)
    bad = {**base, "moe": {**base["moe"], "experts_per_token": 9}}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"models": [bad]}))
    with pytest.raises(InputError, match=r"models\[0\]\.moe.*experts_per_token 9 > experts 8"):
        load_models(path)
    # no head_dim: hidden // heads, as every Llama 2/3 entry has it
    dense = {k: v for k, v in load_models()["llama-2-7b"].model_dump().items() if v is not None}
    del dense["head_dim"]
    assert ModelArch.model_validate(dense).head_dim == 128
    # import-hf onto a broken catalog file: exit 2, the file left as it was
    path.write_text("models: [{id: x}]\n")
    r = CliRunner().invoke(
        cli, ["model", "import-hf", str(HF / "gpt-oss-20b.json"), "--id", "g", "-o", str(path)]
    )
    assert r.exit_code == 2 and path.read_text() == "models: [{id: x}]\n"
    shipped = ROOT / "catalogs" / "models.yaml"
    before = shipped.read_text()
    r = CliRunner().invoke(
        cli, ["model", "import-hf", str(HF / "gpt-oss-20b.json"), "--id", "g", "-o", str(shipped)]
    )
    assert r.exit_code == 2 and "--models-file" in r.output and shipped.read_text() == before


# The families of late 2026 (issue 52; provenance in tests/fixtures/hf/SOURCES.md):
# (fixture, published total, published active or None, the attention kind). The published
# totals are the cards' headline figures, or the checkpoint's tensor count where the headline
# is a one-digit rounding (Kimi Linear's "48B" is 49,122,681,728 tensors).
LATE_2026 = [
    ("glm-4.5", 355e9, 32e9, "full"),
    ("glm-4.5-air", 106e9, 12e9, "full"),
    ("qwen3-next-80b-a3b", 79_674_391_296, None, "hybrid-linear"),
    ("gemma-3-27b", 27e9, None, "sliding-window"),
    ("gemma-3-12b", 12e9, None, "sliding-window"),
    ("minimax-m2", 230e9, 10e9, "full"),
    ("kimi-linear-48b-a3b", 49_122_681_728, None, "hybrid-linear"),
    ("deepseek-v3.2", 671e9, 37e9, "sparse"),
]


@pytest.mark.parametrize(("name", "total", "active", "kind"), LATE_2026)
def test_late_2026_families_land_within_3_percent(name, total, active, kind):
    e = _entry(name)
    m = ModelArch.model_validate(e)
    assert m.attention_kind == kind
    assert abs(e["params"] / total - 1) < 0.03
    if active is not None:  # the closest of the three conventions (count_mismatch)
        c = count_params(m)
        ways = (c.active, c.active - c.embed_in, c.active - c.embed_in - c.embed_out)
        assert min(abs(a / active - 1) for a in ways) < 0.03


def test_one_digit_active_counts_are_met_within_their_rounding():
    """Qwen3-Next's and Kimi Linear's "3B activated" are one-digit figures: the shape gives
    3.15B and 2.73-3.11B, within the half unit (0.5B) the figure is rounded to."""
    for name in ("qwen3-next-80b-a3b", "kimi-linear-48b-a3b"):
        c = count_params(ModelArch.model_validate(_entry(name)))
        assert abs(c.active - c.embed_in - c.embed_out - 3e9) < 0.5e9


def test_hybrid_and_sparse_shapes_are_read_from_their_fields():
    q3n = _entry("qwen3-next-80b-a3b")["linear_attention"]
    assert q3n == {"kind": "gated_deltanet", "layers": 36, "key_heads": 16, "value_heads": 32,
                   "key_head_dim": 128, "value_head_dim": 128, "conv_kernel": 4}  # fmt: skip
    kimi = _entry("kimi-linear-48b-a3b")
    assert kimi["linear_attention"]["layers"] == 20 and kimi["linear_attention"]["kind"] == "kda"
    assert kimi["mla"]["q_lora_rank"] == 0 and kimi["head_dim"] == 192  # not the stale 72
    assert kimi["max_context"] == 1_048_576  # model_max_length: no max_position_embeddings
    v32 = _entry("deepseek-v3.2")["sparse_attention"]
    assert v32 == {"top_k": 2048, "index_heads": 64, "index_head_dim": 128}
    g12 = _entry("gemma-3-12b")
    assert (g12["sliding_window"], g12["full_attention_every"]) == (1024, 6)  # from layer_types
    g27 = _entry("gemma-3-27b")  # vocab and context from Gemma3TextConfig's defaults
    assert (g27["vocab"], g27["max_context"], g27["tied_embeddings"]) == (262208, 131072, True)
    assert _entry("glm-4.5")["num_nextn_predict_layers"] == 1
    assert "num_nextn_predict_layers" not in _entry("minimax-m2")  # MTP weights not published


def test_minimax_lightning_layers_and_a_bad_pattern_are_named():
    cfg = read_hf_config(HF / "minimax-m2.json")
    cfg["attn_type_list"] = [0, *cfg["attn_type_list"][1:]]
    with pytest.raises(InputError, match="attn_type_list.*lightning"):
        model_entry(cfg, "x", HF / "minimax-m2.json")
    cfg = read_hf_config(HF / "qwen3-next-80b-a3b.json")
    cfg["full_attention_interval"] = 0
    with pytest.raises(InputError, match="full_attention_interval"):
        model_entry(cfg, "x", HF / "qwen3-next-80b-a3b.json")
    cfg = read_hf_config(HF / "kimi-linear-48b-a3b.json")
    del cfg["linear_attn_config"]
    with pytest.raises(InputError, match="linear_attn_config"):
        model_entry(cfg, "x", HF / "kimi-linear-48b-a3b.json")


def test_catalog_entries_of_late_2026_match_their_configs():
    """The catalog's shapes are the importer's from the same files (counts aside)."""
    models = load_models(ROOT / "catalogs" / "models.yaml")
    shape = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab",
             "moe", "mla", "linear_attention", "sparse_attention", "sliding_window")  # fmt: skip
    for name, *_ in LATE_2026:
        if name == "gemma-3-12b":
            continue  # not in the catalog
        got = ModelArch.model_validate(_entry(name)).model_dump(include=set(shape))
        assert models[name].model_dump(include=set(shape)) == got, name
