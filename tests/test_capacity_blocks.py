"""A training run with a deadline planned on capacity blocks (issue 53): the H200 blocks of
AWS (published prices with their dated step) carry a 70B run the capped on-demand offers
cannot, and the plan says which block, when and what it costs."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from planner.cli import cli
from planner.plan.data import Plan
from planner.reports.plan_facts import decision_sentences

PROBLEM = Path(__file__).parent / "fixtures" / "capacity_block.yaml"


def test_a_three_month_h200_run_books_a_capacity_block(tmp_path):
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(cli, ["solve", str(PROBLEM), "--no-excel", "--json", str(out)])
    assert r.exit_code == 0, r.output  # solved and verified
    plan = Plan.model_validate_json(out.read_text())
    blocks = {x.offer for x in plan.rentals if x.offer.endswith("capacity-block")}
    assert blocks and all(x.gpu == "h200-sxm" for x in plan.rentals)
    months = sorted({x.month for x in plan.rentals})
    assert months[0] >= "2027-02" and months[-1] <= "2027-04"  # the job's window
    # the block's July 2026 price, on the catalog's rent path from the horizon's start
    rates = [x.usd_per_gpu_hour for x in plan.rentals]
    assert all(5.0 < r < 7.0 for r in rates)
    said = " ".join(decision_sentences(plan))
    assert "Book a capacity block from aws" in said and "paid when booked" in said
    assert next(iter(blocks)) in said and "2027-02" in said
    doc = json.loads(out.read_text())
    info = doc["workloads"][0]["config"]["offers"]
    assert any(v.get("block", "").startswith("p5e") for v in info.values())
