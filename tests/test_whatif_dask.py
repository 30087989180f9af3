"""What-if scenarios on a Dask distributed cluster (the optional ``planner[cluster]`` extra)."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.analysis.whatif import run_whatif
from planner.base.errors import InputError
from planner.cli import cli
from tests.test_whatif import ONE_TYPE

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    # in-process workers: fast to start; each scenario still runs CBC in its own subprocess
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as c:
        yield c


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    # the one-GPU-type problem: what is checked here is where scenarios run, not what they
    # choose, and it solves in about a quarter of the two-type problem's time
    p = tmp_path / "small.yaml"
    p.write_text(ONE_TYPE)
    return p


def test_dask_matches_the_process_pool(cluster, small: Path):
    # two scenarios, not a 2x2 grid (20 s): the grid's order is tests/test_whatif.py's to check
    varies = ["utilization=0.3,0.9"]
    seen = []
    on_dask = run_whatif(small, varies, scheduler=cluster.scheduler_address, progress=seen.append)
    local = run_whatif(small, varies, workers=1)
    # 2 scenarios + the base problem, then re-plans of other purchases in each scenario
    assert len([r for r in seen if r.kept == "own"]) == 3
    assert [r.params for r in on_dask.results] == [r.params for r in local.results]
    for d, loc in zip(on_dask.results, local.results, strict=True):
        assert d.status == loc.status == "optimal"
        assert d.totals["total_usd"] == pytest.approx(loc.totals["total_usd"], rel=1e-9)
        assert d.bought == loc.bought
    assert on_dask.base_result.plan is not None


def test_dask_failing_scenario_is_a_row(cluster, small: Path):
    res = run_whatif(
        small,
        ["gpus.0=h100-sxn,a100-pcie-80gb"],
        scheduler=cluster.scheduler_address,
        with_base=False,
    )
    assert [r.status for r in res.results] == ["invalid", "optimal"]


def test_cli_whatif_on_dask(cluster, small: Path):
    r = CliRunner().invoke(
        cli,
        [
            "whatif",
            str(small),
            "--vary",
            "power_price=0.05,0.3",
            "--no-excel",
            "--scheduler",
            cluster.scheduler_address,
            "--json",
            "-",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout[r.stdout.index("[") :])
    assert [row["status"] for row in rows] == ["optimal", "optimal"]


def test_missing_dask_is_a_clear_input_error(small: Path, monkeypatch):
    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.startswith(("dask", "distributed")):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(
        InputError, match=r"--scheduler needs Dask distributed.*gpu-planner\[cluster\]"
    ):
        run_whatif(small, ["power_price=0.1"], scheduler="tcp://127.0.0.1:1")
