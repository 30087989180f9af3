"""Price paths and lead times (issue 27): resolution of the ``market`` section and its
catalog defaults, and the price-path formula."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.inputs.market import (
    GpuMarket,
    Market,
    MarketDefault,
    load_market_defaults,
    resolve_market,
)
from planner.physics.economics import price_factor

GPUS = ["h100-sxm", "b200", "rtx-4090"]


def test_every_default_has_a_source_and_lies_in_its_range():
    defaults = load_market_defaults()
    seen: set[str] = set()
    for d in defaults:
        assert not seen & set(d.gpus), "a GPU in two generations"
        seen |= set(d.gpus)
        for fig in (d.rent_change_per_year, d.buy_change_per_year, d.lead_months):
            assert fig.source and fig.as_of and fig.low <= fig.value <= fig.high
        assert float(d.lead_months.value).is_integer()


def test_every_catalog_gpu_has_a_default():
    import yaml

    from planner.inputs.catalog import CATALOG_DIR

    ids = {g["id"] for g in yaml.safe_load((CATALOG_DIR / "gpus.yaml").read_text())["gpus"]}
    covered = {g for d in load_market_defaults() for g in d.gpus}
    assert ids == covered


def test_precedence_gpu_then_problem_then_catalog():
    market = Market(rent_change_per_year=-0.3, gpus={"b200": GpuMarket(rent_change_per_year=0.1)})
    t = resolve_market(market, GPUS, 36)
    assert t.rent("b200") == 0.1 and t.rent("h100-sxm") == -0.3
    catalog = {g: d for d in load_market_defaults() for g in d.gpus}
    assert t.buy("h100-sxm") == catalog["h100-sxm"].buy_change_per_year.value
    assert t.lead_months("b200") == int(catalog["b200"].lead_months.value)
    assert "market.gpus.b200" in t.sources[("b200", "rent_change_per_year")]


def test_explicit_zeros_turn_every_path_off():
    off = Market(rent_change_per_year=0, buy_change_per_year=0, lead_months=0)
    assert resolve_market(off, GPUS, 36).off
    assert not resolve_market(Market(), GPUS, 36).off


def test_a_gpu_without_a_default_has_no_path():
    lonely = [MarketDefault.model_validate(d.model_dump()) for d in load_market_defaults()[:1]]
    t = resolve_market(Market(), ["my-card"], 12, defaults=lonely)
    assert (t.rent("my-card"), t.buy("my-card"), t.lead_months("my-card")) == (0.0, 0.0, 0)


@pytest.mark.parametrize(
    "bad",
    [
        {"rent_change_per_year": -0.95},
        {"buy_change_per_year": 1.5},
        {"lead_months": -1},
        {"lead_months": 1.5},
        {"lead_months": True},
        {"rent_change_per_year": float("nan")},
        {"unknown_key": 1},
    ],
)
def test_bad_values_are_refused(bad):
    with pytest.raises(ValidationError):
        Market.model_validate(bad)


def test_unknown_gpu_and_lead_longer_than_the_horizon_name_the_field():
    with pytest.raises(InputError, match=r"market.gpus.h100: .*did you mean 'h100-sxm'"):
        resolve_market(Market(gpus={"h100": GpuMarket()}), GPUS, 36)
    with pytest.raises(InputError, match=r"market.lead_months: 13 months is longer than the 12"):
        resolve_market(Market(lead_months=13), ["h100-sxm"], 12)
    # a catalog default longer than a short horizon is no error: nothing ordered serves in it
    assert resolve_market(Market(), ["b200"], 2).lead_months("b200") == 3


def test_price_factor_compounds_monthly():
    assert price_factor(-0.2, 12) == pytest.approx(0.8)
    assert price_factor(-0.2, 6) ** 2 == pytest.approx(0.8)
    assert price_factor(0.0, 30) == 1.0
    assert price_factor(0.25, 24) == pytest.approx(1.5625)


@pytest.mark.parametrize(
    ("market", "says"),
    [
        ("{rent_change_per_year: -0.95}", "market.rent_change_per_year"),
        ("{buy_change_per_year: 2}", "market.buy_change_per_year"),
        ("{lead_months: -1}", "market.lead_months"),
        ("{lead_months: 1.5}", "market.lead_months"),
        ("{lead_months: 40}", "market.lead_months: 40 months is longer than the 24-month"),
        ("{gpus: {h100: {lead_months: 1}}}", "market.gpus.h100: not a GPU type"),
    ],
)
def test_bad_market_values_exit_2_naming_the_field(tmp_path, market, says):
    from pathlib import Path

    from click.testing import CliRunner

    from planner.cli import cli

    root = Path(__file__).resolve().parent.parent
    src = (root / "problems" / "inference_startup.yaml").read_text()
    problem = tmp_path / "p.yaml"
    problem.write_text(src + f"\nmarket: {market}\n")
    res = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel"])
    assert res.exit_code == 2, res.output
    assert says in " ".join(res.output.split()), res.output
