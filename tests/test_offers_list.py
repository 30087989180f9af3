"""``planner offers list``: the offers the planner would use, one row each, and the market of
2026 (issue 45) in the shipped catalogs: for each of today's GPU types an on-demand offer with
an availability cap and a committed offer of at least 12 months, every one sourced and dated."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.cli.offers import ROW_FIELDS, SHIPPED_OFFER_FILES, catalog_rows, is_estimate
from planner.inputs.catalog import CATALOG_DIR, load_gpus, load_offers
from planner.inputs.importers.offers import ON_DEMAND_CAPPED, on_demand_cap
from planner.inputs.problem import load_problem_text

ROOT = Path(__file__).resolve().parent.parent
TODAY = ("h200-sxm", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x")


def _list(*args: str) -> list[dict]:
    r = CliRunner().invoke(cli, ["offers", "list", "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_rows_are_the_listed_fields():
    rows = _list()
    assert rows and all(tuple(r) == ROW_FIELDS for r in rows)
    required = {"id", "provider", "gpu", "kind", "usd_per_gpu_hour", "term_months", "max_gpus",
                "source", "as_of"}  # fmt: skip
    assert required <= set(ROW_FIELDS)
    assert len({r["id"] for r in rows}) == len(rows)  # a later file's id wins: one row per id
    assert not any(r["marketplace"] for r in rows)  # as a problem reads them by default


def test_every_type_of_today_has_capped_on_demand_and_a_commitment():
    rows = _list()
    for gpu in TODAY:
        mine = [r for r in rows if r["gpu"] == gpu]
        od = [r for r in mine if r["kind"] == "on_demand"]
        committed = [r for r in mine if r["kind"] == "reserved" and r["term_months"] >= 12]
        assert od, f"{gpu}: no on-demand offer"
        assert committed, f"{gpu}: no committed offer of 12 months or more"
        for r in od + committed:
            assert r["source"].strip() and r["as_of"].strip(), r["id"]
        assert all(r["max_gpus"] for r in od), [r["id"] for r in od if not r["max_gpus"]]
        # a commitment is cheaper than the same provider's on-demand price in the same region
        # (a capacity block, prepaid for days or weeks, may be cheaper than a year's savings
        # plan; SkyPilot's on-demand prices are its cheapest region's, region unstated, which
        # may be below a commitment's in us-central1: GCP's A3 Ultra)
        for c in committed:
            same = [
                r["usd_per_gpu_hour"]
                for r in od
                if r["provider"] == c["provider"]
                and not r["cluster"]
                and r["region"] == c["region"]
            ]
            assert not same or c["usd_per_gpu_hour"] < min(same), c["id"]


def test_every_on_demand_offer_of_today_is_capped_even_marketplaces():
    rows = _list("--marketplaces")
    od = [r for r in rows if r["gpu"] in TODAY and r["kind"] == "on_demand"]
    assert od and all(r["max_gpus"] for r in od), [r["id"] for r in od if not r["max_gpus"]]


@pytest.mark.parametrize("gpu", ["h200-sxm", "b200"])
def test_four_providers_on_demand_for_h200_and_b200(gpu):
    rows = _list("--gpu", gpu, "--kind", "on-demand")
    providers = {r["provider"] for r in rows}
    assert len(providers) >= 4, providers
    assert {r["gpu"] for r in rows} == {gpu} and {r["kind"] for r in rows} == {"on_demand"}


def test_filters_and_kind_spellings():
    reserved = _list("--kind", "reserved")
    assert reserved and {r["kind"] for r in reserved} == {"reserved"}
    assert all(r["term_months"] for r in reserved)
    assert _list("--kind", "ON-DEMAND") == _list("--kind", "on_demand")
    gb200 = _list("--gpu", "gb200", "--kind", "reserved")
    assert gb200 and all(r["gpus_per_instance"] == 72 for r in gb200)  # whole NVL72 racks


def test_bad_gpu_and_kind_exit_2_with_what_is_allowed():
    r = CliRunner().invoke(cli, ["offers", "list", "--gpu", "b2000"])
    assert r.exit_code == 2
    assert "b2000" in r.output and "allowed:" in r.output and "b200" in r.output
    assert all(g in r.output for g in load_gpus())
    r = CliRunner().invoke(cli, ["offers", "list", "--kind", "lease"])
    assert r.exit_code == 2
    assert "lease" in r.output and "on-demand" in r.output and "reserved" in r.output


def test_table_output_and_empty_result():
    r = CliRunner().invoke(cli, ["offers", "list", "--gpu", "b200", "--kind", "reserved"])
    assert r.exit_code == 0, r.output
    assert "nebius-b200-36m" in r.output and "estimate" in r.output
    # an allowed GPU without offers of that kind: an empty list, not an error
    r = CliRunner().invoke(cli, ["offers", "list", "--gpu", "rtx-3090", "--kind", "reserved"])
    assert r.exit_code == 0 and "none" in r.output
    assert _list("--gpu", "rtx-3090", "--kind", "reserved") == []


def test_problem_lists_what_its_plan_may_use():
    rows = _list("--problem", str(ROOT / "problems" / "b200_committed.yaml"))
    assert {r["gpu"] for r in rows} == {"b200"}
    assert {r["id"] for r in rows if r["kind"] == "reserved"} >= {"nebius-b200-36m"}
    assert {r["file"] for r in rows} <= {"offers.yaml", "offers-market.yaml"}
    # the reference plan reads SkyPilot's catalog only (problems/2m_budget.yaml says why)
    ref = _list("--problem", str(ROOT / "problems" / "2m_budget.yaml"))
    assert ref and {r["file"] for r in ref} == {"offers.yaml"}
    assert not any(r["kind"] == "reserved" for r in ref)
    r = CliRunner().invoke(
        cli, ["offers", "list", "--problem", str(ROOT / "problems" / "2m_budget.yaml"),
              "--marketplaces"],
    )  # fmt: skip
    assert r.exit_code == 2


def test_estimates_are_said_and_read_only_when_asked():
    """Safe defaults: a problem without `offers:` reads every shipped offers file's published
    prices (the committed prices of offers-committed.yaml among them) and none of the
    estimates; `offers.estimates: true`, or offers files the problem lists, bring them in."""
    market = load_offers(CATALOG_DIR / "offers-market.yaml", load_gpus())
    assert any(is_estimate(o) for o in market.values())
    for o in market.values():
        assert o.gpu in TODAY
        if is_estimate(o):
            assert o.source.startswith("estimate"), o.id
    text = (
        "name: t\nhorizon: {start: 2027-01, months: 12}\nbudget: {capex_usd: 0}\n"
        "site: {power_usd_per_kwh: 0.1}\ngpus: [b200]\nworkloads:\n  serve:\n"
        "    - name: s\n      model: llama-3-8b\n      start: 2027-01\n"
        "      traffic: {daily_active_users: 100, requests_per_user_per_day: 10}\n"
        "      tokens: {prompt: 100, output: 100}\n      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 100}\n"
    )
    default = load_problem_text(text, base_dir=ROOT / "problems")
    reserved = {o.id for o in default.offers.values() if o.kind == "reserved"}
    assert reserved >= {"civo-b200-36m", "aws-p6-b200-sp-36m", "gcp-a4-highgpu-8g-cud-36m"}
    assert not any(o.estimated for o in default.offers.values())
    assert all(o.max_gpus for o in default.offers.values() if o.kind == "on_demand")
    asked = load_problem_text(text + "offers: {estimates: true}\n", base_dir=ROOT / "problems")
    assert {"nebius-b200-36m", "lambda-b200-36m"} <= set(asked.offers)
    listed = load_problem_text(
        text + "offers: {files: [offers.yaml, offers-market.yaml]}\n", base_dir=ROOT / "problems"
    )
    assert "nebius-b200-36m" in listed.offers and "civo-b200-36m" not in listed.offers
    refused = load_problem_text(
        text + "offers: {files: [offers-market.yaml], estimates: false}\n",
        base_dir=ROOT / "problems",
    )
    assert not any(o.estimated for o in refused.offers.values())


def test_published_committed_prices_for_the_types_of_2026():
    """Issue 53: at least 30 published committed prices, each with its source, date, term and
    payment; every type of 2026 that any provider prices on a term has one."""
    committed = load_offers(CATALOG_DIR / "offers-committed.yaml", load_gpus())
    assert len(committed) >= 30
    for o in committed.values():
        assert not o.estimated and "payment:" in o.source, o.id
        assert o.as_of >= "2026-08" and "http" in o.source, o.id
        if o.cluster:  # a capacity block: booked by the day, for multi-node training
            assert o.kind == "on_demand" and o.min_term_days and o.fabric_gbps_per_gpu, o.id
        else:
            assert o.kind == "reserved" and o.term_months and o.term_months >= 6, o.id
    assert {o.gpu for o in committed.values()} >= {
        "h100-sxm", "h200-sxm", "b200", "b300", "mi300x", "mi325x"
    }  # fmt: skip
    # no provider publishes a term price for GB200, GB300 or MI355X: the file says so
    assert "GB200, GB300 or MI355X" in (CATALOG_DIR / "offers-committed.yaml").read_text()


def test_shipped_files_in_problem_order_and_importer_cap():
    assert SHIPPED_OFFER_FILES[0] == "offers.yaml"
    rows = catalog_rows()
    by_file = defaultdict(int)
    for r in rows:
        by_file[r["file"]] += 1
    assert set(by_file) == set(SHIPPED_OFFER_FILES)
    assert set(ON_DEMAND_CAPPED) == set(TODAY)
    assert on_demand_cap("gb200", "on_demand", 72) == 72
    assert on_demand_cap("b200", "reserved", 8) is None


def test_check_flags_offers_older_than_the_limit(tmp_path):
    """`offers check`: ages counted from --today, a bare year as its January, an as_of that
    names no month flagged too; the shipped AWS capacity blocks are of 2026-07."""
    path = tmp_path / "offers.yaml"
    rows = [("fresh", "2026-10"), ("old", "2025-11-02"), ("year", "2026"), ("what", "soon")]
    path.write_text(
        "offers:\n"
        + "".join(
            f"  - {{id: {i}, provider: p, gpu: h100-sxm, kind: on_demand, usd_per_gpu_hour: 2.0,"
            f" source: 'https://example.com', as_of: '{a}'}}\n"
            for i, a in rows
        )
    )
    r = CliRunner().invoke(
        cli, ["offers", "check", "--file", str(path), "--today", "2026-11", "--max-age-months",
              "6", "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    got = [(x["id"], x["age_months"]) for x in json.loads(r.output)]
    assert got == [("what", None), ("old", 12), ("year", 10)]
    shipped = CliRunner().invoke(cli, ["offers", "check", "--today", "2026-11", "--json"])
    ids = {x["id"] for x in json.loads(shipped.output)}
    assert "aws-p4d-capacity-block" in ids and "aws-p6-b200-capacity-block" not in ids
    bad = CliRunner().invoke(cli, ["offers", "check", "--today", "2026-13"])
    assert bad.exit_code == 2 and "YYYY-MM" in bad.output
