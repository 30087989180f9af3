"""Break-even search: bisection on solves finds where the plan changes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.analysis.whatif import Task, breakeven, load_base, resolve_key, run_task
from planner.base.errors import InputError
from planner.cli import cli
from tests.test_whatif import ONE_TYPE, SMALL

PRICE = "offers.extra.cloud-a100-od.usd_per_gpu_hour"


FLAT = (
    "finance: {discount_rate: 0, residual: none}\n"
    "market: {rent_change_per_year: 0, buy_change_per_year: 0, lead_months: 0}\n"
)
# SMALL with its A100s only: the searches below move A100 prices and counts, and with the
# H100 in the choice too each solve at gap 0 took ~1.6 s of CPU instead of ~0.1 s
A100_ONLY = SMALL.replace("gpus: [a100-pcie-80gb, h100-sxm]", "gpus: [a100-pcie-80gb]")


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    # undiscounted, without resale, flat prices and no lead time: the break-even below is
    # checked against the plain cost of an owned GPU-hour
    assert A100_ONLY != SMALL
    p = tmp_path / "small.yaml"
    p.write_text(A100_ONLY + FLAT)
    return p


@pytest.fixture()
def two_types(tmp_path: Path) -> Path:
    """SMALL as written (A100 and H100), for the checks that name the problem's GPU types
    (nothing is solved with it)."""
    p = tmp_path / "two.yaml"
    p.write_text(SMALL + FLAT)
    return p


def _solve(path: Path, key: str, x: float):
    b = load_base(path)
    return run_task(Task(0, b, {key: x}, [(loc, x) for loc in resolve_key(b.data, key)]))


def test_breakeven_on_the_rental_price(small: Path):
    # Cheap A100 rentals: rent everything; dear ones: buying A100s pays. The plan must change.
    be = breakeven(small, f"{PRICE}=0.5:5", workers=2)
    assert be.changed and be.value is not None
    a, b = be.bracket
    assert 0.5 < a < b < 5 and b - a <= be.tol == pytest.approx(4.5 / 200)
    assert be.below.bought == {} and be.above.bought.get("a100-pcie-80gb", 0) > 0
    # at the break-even the owned GPU-hour costs what a rented one does
    above = be.above
    owned_cost = above.totals["capex_usd"] + above.totals["power_usd"] + above.totals["hosting_usd"]
    per_hour = owned_cost / above.owned_gpu_hours["a100-pcie-80gb"]
    assert be.value == pytest.approx(per_hour, abs=2 * be.tol)
    n = be.above.bought["a100-pcie-80gb"]
    assert re.fullmatch(
        rf"above {re.escape(PRICE)} 1\.\d+ the plan buys {n} a100-pcie-80gb; below it rents them",
        be.sentence,
    ), be.sentence
    # the two sides really are different plans when re-solved
    assert _solve(small, PRICE, a).bought == {}
    assert _solve(small, PRICE, b).bought.get("a100-pcie-80gb", 0) > 0
    json.dumps(be.to_json())


def test_breakeven_watching_one_gpu_count(small: Path):
    be = breakeven(
        small, ("utilization", 0.1, 1.0), watch="gpu=a100-pcie-80gb", tol=0.05, workers=2
    )
    assert be.changed and be.watch == "a100-pcie-80gb"
    assert be.below.bought.get("a100-pcie-80gb", 0) != be.above.bought.get("a100-pcie-80gb", 0)
    assert be.bracket[1] - be.bracket[0] <= 0.05
    assert be.sentence.startswith("above utilization ") and "a100-pcie-80gb" in be.sentence


def test_breakeven_reports_no_change(tmp_path: Path):
    p = tmp_path / "one.yaml"
    p.write_text(ONE_TYPE)
    be = breakeven(p, "power_price=0.10:0.12", scan=3, workers=2)
    assert not be.changed and be.value is None and be.bracket is None
    assert be.solves == 3
    assert be.sentence.startswith("the plan does not change over power_price 0.1..0.12")


def test_breakeven_input_errors(small: Path, two_types: Path):
    with pytest.raises(InputError, match="--watch"):
        breakeven(small, "power_price=0.1:0.2", watch="cpu=x")
    with pytest.raises(InputError, match="did you mean 'h100-sxm'"):
        breakeven(two_types, "power_price=0.1:0.2", watch="gpu=h100-sxn")
    with pytest.raises(InputError, match=r"utilization=0.05 is not a valid problem"):
        breakeven(small, "utilization=0.05:0.5", scan=2, workers=1)
    with pytest.raises(InputError, match="no key 'powr'"):
        breakeven(small, "site.powr=0.1:0.2")


def test_cli_breakeven(small: Path):
    r = CliRunner().invoke(
        cli,
        ["breakeven", str(small), "--vary", f"{PRICE}=0.5:5", "--tol", "0.05", "--workers", "1"],
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "the plan buys" in text and "below it rents them" in text
    assert "buy a100-pcie-80gb" in text
