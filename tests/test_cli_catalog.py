"""``planner catalog``: the GPU comparison table (specs, purchase price, cheapest rental, value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.inputs.catalog import CATALOG_DIR, load_gpus

OFFERS = """offers:
  - {id: a-h100-od, provider: aws, gpu: h100-sxm, kind: on_demand, usd_per_gpu_hour: 6.0, gpus_per_instance: 8, source: test, as_of: "2026-01"}
  - {id: l-h100-od, provider: lambda, gpu: h100-sxm, kind: on_demand, usd_per_gpu_hour: 3.0, source: test-lambda, as_of: "2026-01"}
  - {id: v-h100-od, provider: vast, gpu: h100-sxm, kind: on_demand, usd_per_gpu_hour: 1.5, marketplace: true, source: test-vast, as_of: "2026-01"}
  - {id: v-h100-spot, provider: vast, gpu: h100-sxm, kind: spot, usd_per_gpu_hour: 0.5, marketplace: true, source: test, as_of: "2026-01"}
  - {id: r-4090-od, provider: runpod, gpu: rtx-4090, kind: on_demand, usd_per_gpu_hour: 0.59, source: test-runpod, as_of: "2026-01"}
"""


@pytest.fixture
def cli():
    """The real command group: its error handling maps bad input to exit 2."""
    from planner.cli import cli as root

    return root


@pytest.fixture
def offers_file(tmp_path: Path) -> Path:
    p = tmp_path / "offers.yaml"
    p.write_text(OFFERS)
    return p


def _json(cli, *args: str) -> list[dict]:
    res = CliRunner().invoke(cli, ["catalog", "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_json_rows_and_cheapest_rental(cli, offers_file):
    rows = {r["id"]: r for r in _json(cli, "--offers", str(offers_file))}
    gpus = load_gpus()
    assert set(rows) == set(gpus)
    h = rows["h100-sxm"]
    g = gpus["h100-sxm"]
    assert h["rent_min"] == 1.5 and h["rent_provider"] == "vast"  # spot offers are ignored
    assert h["aws"] == 6.0 and h["lambda"] == 3.0 and h["gcp"] is None
    assert h["bw_per_k"] == pytest.approx(
        g.memory_bandwidth_gbs.value / g.purchase_usd.value * 1000
    )
    assert h["tflops_per_k"] == pytest.approx(
        g.bf16_dense_tflops.value / g.purchase_usd.value * 1000
    )
    assert h["purchase_low"] <= h["purchase_usd"] <= h["purchase_high"]
    assert rows["rtx-4090"]["runpod"] == 0.59 and rows["rtx-4090"]["class"] == "consumer"
    assert rows["l4"]["rent_min"] is None


def test_no_marketplaces(cli, offers_file):
    rows = {r["id"]: r for r in _json(cli, "--offers", str(offers_file), "--no-marketplaces")}
    assert rows["h100-sxm"]["rent_min"] == 3.0 and rows["h100-sxm"]["rent_provider"] == "lambda"


@pytest.mark.parametrize(
    "column", ["rent_min", "bw_per_k", "memory_gb", "id", "class", "purchase_usd"]
)
def test_sort_any_column(cli, offers_file, column):
    asc = _json(cli, "--offers", str(offers_file), "--sort", column)
    values = [r[column] for r in asc if r[column] is not None]
    assert values == sorted(values)
    assert all(r[column] is None for r in asc[len(values) :])  # empty values last
    desc = _json(cli, "--offers", str(offers_file), "--sort", f"-{column}")
    dvalues = [r[column] for r in desc if r[column] is not None]
    assert dvalues == sorted(dvalues, reverse=True)


def test_bad_sort_column(cli, offers_file):
    res = CliRunner().invoke(cli, ["catalog", "--offers", str(offers_file), "--sort", "speed"])
    assert res.exit_code == 2 and "unknown column 'speed'" in res.output


def test_table_and_sources(cli, offers_file):
    res = CliRunner().invoke(
        cli, ["catalog", "--offers", str(offers_file), "--sources", "--sort", "-tflops_per_k"]
    )
    assert res.exit_code == 0, res.output
    assert "h100-sxm" in res.output and "TF per $1k" in res.output
    assert "offer v-h100-od: test-vast" in res.output
    gpus = load_gpus()
    assert gpus["h100-sxm"].memory_bandwidth_gbs.source[:40] in res.output.replace("\n", "")


def test_json_sources(cli, offers_file):
    rows = {r["id"]: r for r in _json(cli, "--offers", str(offers_file), "--sources")}
    assert rows["h100-sxm"]["sources"]["lambda"].startswith("offer l-h100-od: test-lambda")
    assert "bandwidth_gbs" in rows["h100-sxm"]["sources"]


def test_several_offer_files_and_default_offers(cli, offers_file, tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"offers": [
        {"id": "x-h100-od", "provider": "gcp", "gpu": "h100-sxm", "kind": "on_demand",
         "usd_per_gpu_hour": 1.0, "source": "x", "as_of": "2026-01"}]}))  # fmt: skip
    rows = {r["id"]: r for r in _json(cli, "--offers", str(offers_file), "--offers", str(extra))}
    assert rows["h100-sxm"]["rent_min"] == 1.0 and rows["h100-sxm"]["gcp"] == 1.0
    if (CATALOG_DIR / "offers.yaml").exists():  # default: the committed offers file
        rows = {r["id"]: r for r in _json(cli)}
        assert rows["h100-sxm"]["rent_min"] is not None


def test_offer_for_unknown_gpu_is_an_error(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(OFFERS.replace("gpu: rtx-4090", "gpu: rtx-9090"))
    res = CliRunner().invoke(cli, ["catalog", "--offers", str(bad)])
    assert res.exit_code == 2
    assert "rtx-9090" in res.output and "Traceback" not in res.output
