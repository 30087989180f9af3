"""Rental-offer import: SkyPilot catalog folders (several column layouts, GCP host+accelerator
split), the shared aggregate CSV, the offers-file writer and the ``offers`` CLI group."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.cli.offers import offers as offers_group
from planner.inputs.catalog import CATALOG_DIR, load_gpus, load_offers
from planner.inputs.importers.offers import (
    DEFAULT_GPU_IDS,
    normalize_accelerator,
    read_aggregate_csv,
    read_skypilot_catalog,
    write_offers_yaml,
)

AGGREGATE = CATALOG_DIR / "sources" / "gpu_rental_offers.csv"

# Column orders differ on purpose: found by name, never by position.
AWS = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,Region,SpotPrice
m5.large,,,2,8,,0.096,us-east-1,0.04
p5.48xlarge,H100,8,192,2048,"{'Gpus': [{'Name': 'H100', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 81920}}]}",55.04,us-east-1,10.0
p5.48xlarge,H100,8,192,2048,"{'Gpus': [{'Name': 'H100', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 81920}}]}",60.0,us-west-2,12.0
p5.48xlarge,H100,8,192,2048,"{'Gpus': [{'Name': 'H100', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 81920}}]}",70.0,eu-west-1,
p5.4xlarge,H100,1,16,256,,6.88,us-east-1,
p4d.24xlarge,A100,8,96,1152,"{'Gpus': [{'Name': 'A100', 'MemoryInfo': {'SizeInMiB': 40960}}]}",21.9576,us-east-1,3.0
p4d.24xlarge,A100,8,96,1152,"{'Gpus': [{'Name': 'A100', 'MemoryInfo': {'SizeInMiB': 40960}}]}",,us-west-2,
p5e.48xlarge,H200,8,192,2048,,,us-east-2,19.2
g4dn.xlarge,T4,1,4,16,,0.526,us-east-1,0.2
g4dn.2xlarge,T4,1,8,32,,0.752,us-east-1,0.3
g6e.xlarge,L40S,1,4,32,,1.861,us-east-1,0.47
g5.xlarge,A10G,1,4,16,,1.006,us-east-1,0.36
"""
LAMBDA = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice
gpu_1x_h100_pcie,H100,1,26,225,3.29,us-west-3,"{'Gpus': [{'Name': 'H100', 'MemoryInfo': {'SizeInMiB': 81920}}]}",
gpu_1x_h100_pcie,H100,1,26,225,3.29,us-east-1,"{'Gpus': [{'Name': 'H100', 'MemoryInfo': {'SizeInMiB': 81920}}]}",
gpu_8x_h100_sxm5,H100,8,208,1800,31.92,us-east-1,,
gpu_8x_a100_80gb_sxm4,A100-80GB,8,240,1800,22.32,us-east-1,,
gpu_1x_a100,A100,1,30,200,1.99,us-east-1,,
gpu_1x_a10,A10,1,30,200,1.29,us-east-1,,
gpu_1x_gh200,GH200,1,64,432,1.49,us-east-3,,
"""
GCP = """InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice
a3-highgpu-8g,208.0,1872.0,,,,us-central1,us-central1-a,9.46,2.0
a3-highgpu-8g,208.0,1872.0,,,,us-central1,us-central1-b,9.46,2.0
a3-highgpu-8g,208.0,1872.0,,,,europe-west4,europe-west4-b,9.93,2.5
a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.74,0.39
a2-highgpu-1g,12.0,85.0,,,,asia-northeast1,asia-northeast1-a,0.95,0.55
n2-standard-8,8.0,32.0,,,,us-central1,us-central1-a,0.39,0.09
g2-standard-24,24.0,96.0,,,,us-central1,us-central1-a,1.0,0.4
,,,H100,8,"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}",us-central1,us-central1-a,34.0,8.0
,,,H100,8,"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}",us-central1,us-central1-b,34.0,8.0
,,,H100,8,"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}",europe-west4,europe-west4-b,36.0,9.0
,,,A100,1,"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]}",us-central1,us-central1-a,2.93,1.54
,,,L4,2,,us-central1,us-central1-a,1.2,0.5
,,,T4,1,,us-central1,us-central1-a,0.35,0.07
,,,T4,2,,us-central1,us-central1-a,0.70,0.14
,,,tpu-v5p-8,1,tpu-v5p-8,us-east5,us-east5-a,33.6,8.0
,,,tpu-v5p-16,1,tpu-v5p-16,us-east5,us-east5-a,67.2,16.0
"""
RUNPOD = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Region,SpotPrice,Price,AvailabilityZone
1x_RTX4090_SECURE,RTX4090,1.0,16.0,62.0,"{'Gpus': [{'Name': 'RTX 4090', 'MemoryInfo': {'SizeInMiB': 24}}]}",CA,0.29,0.59,CA-MTL-1
1x_RTX4090_SECURE,RTX4090,1.0,16.0,62.0,"{'Gpus': [{'Name': 'RTX 4090', 'MemoryInfo': {'SizeInMiB': 24}}]}",US,0.35,0.69,US-TX-3
2x_A100-80GB_SECURE,A100-80GB,2.0,16.0,234.0,"{'Gpus': [{'Name': 'A100 PCIe', 'Count': 2, 'MemoryInfo': {'SizeInMiB': 80}}]}",CA,1.64,3.28,CA-MTL-1
1x_RTX3090_SECURE,RTX-3090,1.0,8.0,31.0,,CA,0.22,0.46,CA-MTL-1
1x_MI300X_SECURE,MI300X,1.0,24.0,283.0,,CA,,2.49,CA-MTL-1
half_A100,A100,0.5,4,16,,CA,,0.5,CA-MTL-1
"""


def _catalog(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "v8"
    for provider, text in files.items():
        (root / provider).mkdir(parents=True)
        (root / provider / "vms.csv").write_text(text)
    return root


@pytest.fixture
def sky(tmp_path: Path) -> Path:
    return _catalog(tmp_path, aws=AWS, **{"lambda": LAMBDA}, gcp=GCP, runpod=RUNPOD)


def _by_id(result) -> dict:
    return {o.id: o for o in result.offers}


# ----------------------------------------------------------------------------- SkyPilot import


def test_prices_per_gpu_hour_median_across_regions(sky):
    r = read_skypilot_catalog(sky, gpu_ids=DEFAULT_GPU_IDS)
    o = _by_id(r)
    p5 = o["aws-p5.48xlarge-od"]
    assert p5.gpu == "h100-sxm" and p5.gpus_per_instance == 8 and p5.region is None
    assert p5.usd_per_gpu_hour == pytest.approx(60.0 / 8)  # median of 55.04, 60, 70
    assert o["aws-p5.48xlarge-spot"].usd_per_gpu_hour == pytest.approx(11.0 / 8)  # median of 10, 12
    assert o["aws-p5.48xlarge-od"].kind == "on_demand" and o["aws-p5.48xlarge-spot"].kind == "spot"
    assert o["aws-p4d.24xlarge-od"].usd_per_gpu_hour == pytest.approx(21.9576 / 8)
    assert o["lambda-gpu-1x-h100-pcie-od"].usd_per_gpu_hour == pytest.approx(3.29)
    assert o["runpod-1x-rtx4090-secure-od"].usd_per_gpu_hour == pytest.approx((0.59 + 0.69) / 2)
    assert o["runpod-2x-a100-80gb-secure-od"].usd_per_gpu_hour == pytest.approx(1.64)
    assert o["runpod-2x-a100-80gb-secure-od"].gpus_per_instance == 2
    assert all(not x.marketplace for x in r.offers)
    assert p5.source.startswith("skypilot-catalog catalogs/v8/aws/vms.csv")


def test_min_vs_median(sky):
    lo = _by_id(read_skypilot_catalog(sky, providers=["aws"], price="min", gpu_ids=DEFAULT_GPU_IDS))
    assert lo["aws-p5.48xlarge-od"].usd_per_gpu_hour == pytest.approx(55.04 / 8)
    assert lo["aws-p5.48xlarge-spot"].usd_per_gpu_hour == pytest.approx(10.0 / 8)


def test_one_region(sky):
    r = read_skypilot_catalog(sky, providers=["aws"], region="us-west-2", gpu_ids=DEFAULT_GPU_IDS)
    o = _by_id(r)
    assert set(o) == {"aws-p5.48xlarge-od", "aws-p5.48xlarge-spot"}  # p4d in us-west-2 has no price
    assert o["aws-p5.48xlarge-od"].usd_per_gpu_hour == pytest.approx(60.0 / 8)
    assert o["aws-p5.48xlarge-od"].region == "us-west-2"
    assert r.skipped["no Price"] == 1


def test_gcp_host_plus_accelerator_in_same_region(sky):
    r = read_skypilot_catalog(sky, providers=["gcp"], gpu_ids=DEFAULT_GPU_IDS)
    o = _by_id(r)
    a3 = o["gcp-a3-highgpu-8g-od"]
    assert a3.gpu == "h100-sxm" and a3.gpus_per_instance == 8
    # zones of a region count once; median of (9.46+34) and (9.93+36)
    assert a3.usd_per_gpu_hour == pytest.approx(((9.46 + 34.0) + (9.93 + 36.0)) / 2 / 8)
    assert o["gcp-a3-highgpu-8g-spot"].usd_per_gpu_hour == pytest.approx(
        ((2.0 + 8.0) + (2.5 + 9.0)) / 2 / 8
    )
    # asia-northeast1 has no A100 accelerator row: that host row cannot be priced
    a2 = o["gcp-a2-highgpu-1g-od"]
    assert a2.gpu == "a100-sxm-40gb" and a2.usd_per_gpu_hour == pytest.approx(0.74 + 2.93)
    assert r.skipped["host VM without accelerator price in its region"] == 1
    assert o["gcp-g2-standard-24-od"].gpu == "l4"
    assert o["gcp-g2-standard-24-od"].usd_per_gpu_hour == pytest.approx((1.0 + 1.2) / 2)
    assert r.skipped["no accelerator (CPU instance)"] == 1  # n2-standard-8
    assert r.unknown["T4"] == 2 and r.unknown["tpu-v5p"] == 2
    assert not any("n2-standard" in x.id for x in r.offers)


def test_normalization_and_unknown_reported(sky):
    r = read_skypilot_catalog(sky, gpu_ids=DEFAULT_GPU_IDS)
    gpu = {x.instance_type: x.gpu for x in r.offers}
    assert gpu["gpu_1x_h100_pcie"] == "h100-pcie"
    assert gpu["gpu_8x_h100_sxm5"] == "h100-sxm"
    assert gpu["p5.4xlarge"] == "h100-sxm"  # AWS p5 family is SXM even with one GPU
    assert gpu["gpu_8x_a100_80gb_sxm4"] == "a100-sxm-80gb"
    assert gpu["gpu_1x_a100"] == "a100-sxm-40gb"
    assert gpu["2x_A100-80GB_SECURE"] == "a100-pcie-80gb"  # GpuInfo says PCIe
    assert gpu["1x_RTX3090_SECURE"] == "rtx-3090"
    assert gpu["1x_RTX4090_SECURE"] == "rtx-4090"
    assert gpu["g6e.xlarge"] == "l40s" and gpu["g5.xlarge"] == "a10g"
    assert gpu["p5e.48xlarge"] == "h200-sxm"
    assert {"T4", "A10", "GH200", "MI300X", "tpu-v5p"} <= set(r.unknown)
    assert r.unknown["T4"] == 2 + 2  # two AWS instance types, two GCP accelerator counts
    assert r.skipped["fractional or missing AcceleratorCount"] == 1


def test_spot_only_instance(sky):
    o = _by_id(read_skypilot_catalog(sky, providers=["aws"], gpu_ids=DEFAULT_GPU_IDS))
    assert "aws-p5e.48xlarge-spot" in o and "aws-p5e.48xlarge-od" not in o


def test_gpu_missing_from_catalog_is_reported_not_emitted(sky):
    ids = DEFAULT_GPU_IDS - {"h100-pcie"}
    r = read_skypilot_catalog(sky, providers=["lambda"], gpu_ids=ids)
    assert all(o.gpu != "h100-pcie" for o in r.offers)
    assert any("h100-pcie" in k for k in r.unknown)


@pytest.mark.parametrize(
    "name,count,itype,info,expected",
    [
        ("A100", 8, "p4d.24xlarge", "", "a100-sxm-40gb"),
        ("A100-80GB", 8, "p4de.24xlarge", "", "a100-sxm-80gb"),
        ("A100-80GB", 1, "a2-ultragpu-1g", "", "a100-sxm-80gb"),
        ("A100", 1, "intel-ice-lake-a100-pci_1x4v8gb", "A100:80GB", "a100-pcie-80gb"),
        (
            "A100",
            1,
            "1x-A100-4-8192",
            "{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}",
            "a100-pcie-80gb",
        ),
        ("H100", 8, "BM.GPU.H100.8", "", "h100-sxm"),
        ("H100-MEGA", 8, "a3-megagpu-8g", "", "h100-sxm"),
        ("H100-NVLINK", 8, "H100_NVLINK_80GB::8", "", "h100-sxm"),
        ("H100-SXM", 1, "sapphire-rapids-h100_1x2v4gb", "", "h100-sxm"),
        ("H100", 1, "hyperstack_H100", "", "h100-pcie"),
        ("H200", 8, "a3-ultragpu-8g", "", "h200-sxm"),
        ("B200", 8, "p6-b200.48xlarge", "", "b200"),
        ("RTX4090", 1, "", "", "rtx-4090"),
        ("RTX 4090", 1, "", "", "rtx-4090"),
        ("RTX3090", 1, "", "", "rtx-3090"),
        ("L40S", 1, "", "", "l40s"),
        ("L4", 1, "", "", "l4"),
        ("A10G", 1, "", "", "a10g"),
        ("L40", 1, "", "", None),
        ("A10", 1, "", "", None),
        ("V100", 8, "p3.16xlarge", "", None),
        ("RTXA6000", 1, "", "", None),
        ("H100", 1, "1x-H100_NVL-32-65536", "", None),
        ("A100", 2, "2x-A100_PCIE-32-65536", "", None),
    ],
)
def test_normalize_table(name, count, itype, info, expected):
    assert normalize_accelerator(name, count, itype, info)[0] == expected


def test_missing_column_error_names_file_and_column(tmp_path):
    root = _catalog(tmp_path, aws=AWS.replace(",Price,", ",Cost,", 1))
    with pytest.raises(InputError, match=r"aws/vms\.csv: missing column 'Price'"):
        read_skypilot_catalog(root, gpu_ids=DEFAULT_GPU_IDS)


def test_bad_number_names_line_and_column(tmp_path):
    root = _catalog(tmp_path, aws=AWS.replace("55.04", "lots"))
    with pytest.raises(InputError, match=r"vms\.csv:3: column 'Price': not a number"):
        read_skypilot_catalog(root, gpu_ids=DEFAULT_GPU_IDS)


def test_unknown_provider_and_missing_folder(sky, tmp_path):
    with pytest.raises(InputError, match="no vms.csv for provider"):
        read_skypilot_catalog(sky, providers=["azure"], gpu_ids=DEFAULT_GPU_IDS)
    with pytest.raises(InputError, match="not found"):
        read_skypilot_catalog(tmp_path / "nope", gpu_ids=DEFAULT_GPU_IDS)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no <provider>/vms.csv"):
        read_skypilot_catalog(tmp_path / "empty", gpu_ids=DEFAULT_GPU_IDS)


def test_single_vms_csv_file(sky):
    r = read_skypilot_catalog(sky / "lambda" / "vms.csv", gpu_ids=DEFAULT_GPU_IDS)
    assert r.providers == ["lambda"] and {o.provider for o in r.offers} == {"lambda"}


def test_write_is_valid_and_atomic(sky, tmp_path):
    r = read_skypilot_catalog(sky, gpu_ids=DEFAULT_GPU_IDS)
    out = write_offers_yaml(r, tmp_path / "out" / "offers.yaml")
    assert [p.name for p in out.parent.iterdir()] == ["offers.yaml"]  # no temp file left
    loaded = load_offers(out, {g: None for g in DEFAULT_GPU_IDS})
    assert len(loaded) == len(r.offers)
    doc = yaml.safe_load(out.read_text())
    prov = doc["provenance"]
    assert "T4: 4" in prov["unknown_accelerators"]
    assert prov["providers"] == ["aws", "gcp", "lambda", "runpod"]
    assert prov["price_statistic"] == "median" and prov["imported_at"].endswith("Z")
    assert any(s.startswith("skypilot-catalog catalogs/v8/gcp/vms.csv") for s in prov["sources"])


# ----------------------------------------------------------------------------- aggregate CSV


def test_aggregate_csv_real_file():
    r = read_aggregate_csv(AGGREGATE)
    assert r.rows_read == 391
    assert len(r.providers) == 12
    gpus = load_gpus()
    assert all(o.gpu in gpus for o in r.offers)
    assert len({o.id for o in r.offers}) == len(r.offers)
    assert {o.provider for o in r.offers if o.marketplace} == {
        "vast",
        "shadeform",
        "primeintellect",
    }
    assert r.unknown["A6000"] == 42 and r.unknown["A10"] == 5
    assert (
        sum(r.unknown.values()) + len({(o.provider, o.instance_type, o.gpu) for o in r.offers})
        == 391
    )
    o = _by_id(r)
    assert o["aws-p4d.24xlarge-od"].usd_per_gpu_hour == pytest.approx(25.7981 / 8)
    assert o["aws-p4d.24xlarge-spot"].usd_per_gpu_hour == pytest.approx(0.3135)
    assert "aws-p5e.48xlarge-spot" in o and "aws-p5e.48xlarge-od" not in o
    assert o["lambda-gpu-8x-h100-sxm5-od"].gpu == "h100-sxm"
    assert o["runpod-1x-a100-80gb-secure-od"].gpu == "a100-pcie-80gb"
    assert all(x.as_of == "2026-07-09" and x.region is None for x in r.offers)
    lo = _by_id(read_aggregate_csv(AGGREGATE, price="min"))
    assert lo["aws-p4d.24xlarge-od"].usd_per_gpu_hour == pytest.approx(2.7447)


def test_aggregate_missing_column(tmp_path):
    bad = tmp_path / "agg.csv"
    bad.write_text("provider,instance_type\naws,p5.48xlarge\n")
    with pytest.raises(InputError, match=r"agg\.csv: missing column 'accelerator_raw'"):
        read_aggregate_csv(bad)


def test_committed_offers_file_validates():
    offers = load_offers(CATALOG_DIR / "offers.yaml", load_gpus())
    assert len(offers) > 300
    doc = yaml.safe_load((CATALOG_DIR / "offers.yaml").read_text())
    assert doc["provenance"]["source_path"] == "catalogs/sources/gpu_rental_offers.csv"


# ----------------------------------------------------------------------------- CLI


@pytest.fixture
def cli():
    @click.group()
    def root() -> None:
        pass

    root.add_command(offers_group)
    return root


def test_cli_import_skypilot(cli, sky, tmp_path):
    out = tmp_path / "o.yaml"
    res = CliRunner().invoke(
        cli,
        [
            "offers",
            "import-skypilot",
            str(sky),
            "--providers",
            "aws,gcp",
            "--price",
            "min",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "aws" in res.output and "gcp" in res.output and "T4" in res.output
    doc = yaml.safe_load(out.read_text())
    assert {o["provider"] for o in doc["offers"]} == {"aws", "gcp"}
    assert "--price min" in doc["provenance"]["generator"]


def test_cli_import_skypilot_default_output(cli, sky, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default output goes to the working folder
    res = CliRunner().invoke(cli, ["offers", "import-skypilot", str(sky), "--providers", "lambda"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "offers-skypilot.yaml").is_file()


def test_cli_import_aggregate(cli, tmp_path):
    out = tmp_path / "agg.yaml"
    res = CliRunner().invoke(cli, ["offers", "import-aggregate", str(AGGREGATE), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "shadeform" in res.output and "A6000" in res.output
    assert len(load_offers(out, load_gpus())) == len(read_aggregate_csv(AGGREGATE).offers)


def test_cli_bad_input_raises_input_error(cli, tmp_path):
    root = _catalog(tmp_path, aws=AWS.replace(",Price,", ",Cost,", 1))
    res = CliRunner().invoke(
        cli, ["offers", "import-skypilot", str(root), "-o", str(tmp_path / "x.yaml")]
    )
    assert isinstance(res.exception, InputError)
    assert "missing column 'Price'" in str(res.exception) and "vms.csv" in str(res.exception)
    assert not (tmp_path / "x.yaml").exists()
