"""Dated price steps of an offer (issue 53): the month's price in the model, the plan, the
verifier and the workbook's live formulas."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest
import yaml
from click.testing import CliRunner

from planner.cli import cli
from planner.inputs.offer_trust import discounted

STEP = {"month": "2027-02", "usd_per_gpu_hour": 2.0, "source": "announced increase (test)"}


def _problem(steps=(STEP,), rent_change: float = 0.0, **offers) -> dict:
    """Two months of a llama-2-7b service renting A100s from one offer: $1/h, then $2/h."""
    offer = {"id": "q", "provider": "quote", "kind": "on_demand", "gpu": "a100-sxm-80gb",
             "gpus_per_instance": 1, "usd_per_gpu_hour": 1.0, "price_steps": list(steps),
             "source": "test quote", "as_of": "2026-11"}  # fmt: skip
    return {
        "name": "steps",
        "horizon": {"start": "2027-01", "months": 2},
        "budget": {"capex_usd": 0},
        "site": {"power_usd_per_kwh": 0.1},
        "gpus": ["a100-sxm-80gb"],
        "market": {"rent_change_per_year": rent_change},
        "offers": {"files": [], "extra": [offer], **offers},
        "workloads": {"serve": [{
            "name": "chat", "model": "llama-2-7b", "start": "2027-01",
            "traffic": {"daily_active_users": 20, "requests_per_user_per_day": 86400,
                        "utilization": 1.0},
            "tokens": {"prompt": 500, "output": 200},
            "slo": {"p95_ttft_ms": 2000, "p95_tpot_ms": 100, "max_load": 1.0},
        }]},
    }  # fmt: skip


def _solve(tmp_path: Path, doc: dict, excel: bool = False) -> tuple[int, str, dict | None]:
    path, out = tmp_path / "p.yaml", tmp_path / "p.json"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    args = ["solve", str(path), "--json", str(out)]
    args += ["-o", str(tmp_path / "p.xlsx")] if excel else ["--no-excel"]
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.output, json.loads(out.read_text()) if out.exists() else None


def _by_month(plan: dict) -> dict[str, tuple[float, float]]:
    out = {}
    for r in plan["rentals"]:
        hours, usd = out.get(r["month"], (0.0, 0.0))
        out[r["month"]] = (hours + r["gpu_hours"], usd + r["usd"])
    return out


def test_each_month_is_billed_at_its_price(tmp_path):
    code, out, plan = _solve(tmp_path, _problem(), excel=True)
    assert code == 0, out  # solved, verified
    months = _by_month(plan)
    h1, usd1 = months["2027-01"]
    h2, usd2 = months["2027-02"]
    assert h1 == pytest.approx(h2) and h1 > 0  # the same replicas, flat demand
    assert usd1 == pytest.approx(1.0 * h1) and usd2 == pytest.approx(2.0 * h2)
    # the workbook: the step is a yellow input on Assumptions, February's rate reads it
    wb = openpyxl.load_workbook(tmp_path / "p.xlsx")
    keys = {(row[0].value, row[1].value): row for row in wb["Assumptions"].iter_rows()}
    assert ("offer:q", "usd_per_gpu_hour_from_2027-02") in keys
    rates = [
        (row[4].value, row[7].value)
        for row in wb["Rentals"].iter_rows(min_row=2)
        if row[1].value == "q"
    ]
    feb = [f for m, f in rates if str(m).startswith("2027-02")]
    jan = [f for m, f in rates if str(m).startswith("2027-01")]
    assert feb and jan and feb[0] != jan[0]
    assert all(isinstance(f, str) and f.startswith("=Assumptions!") for f in feb + jan)


def test_on_a_rent_path_too(tmp_path):
    code, out, plan = _solve(tmp_path, _problem(rent_change=-0.12))
    assert code == 0, out
    (h1, usd1), (h2, usd2) = _by_month(plan)["2027-01"], _by_month(plan)["2027-02"]
    assert usd2 / h2 == pytest.approx(2.0 * (1 - 0.12) ** (1 / 12))
    assert usd1 / h1 == pytest.approx(1.0)


def test_the_verifier_bills_the_step(tmp_path):
    code, out, _ = _solve(tmp_path, _problem(steps=()))  # the plan at $1/h throughout
    assert code == 0, out
    (tmp_path / "stepped.yaml").write_text(yaml.safe_dump(_problem()))
    r = CliRunner().invoke(
        cli, ["verify", str(tmp_path / "stepped.yaml"), str(tmp_path / "p.json")]
    )
    assert r.exit_code == 4, r.output


def test_a_discount_applies_to_every_dated_price_once():
    from planner.inputs.catalog import Offer

    o = Offer.model_validate({**_problem()["offers"]["extra"][0]})
    d = discounted(discounted(o, 0.25), 0.25)
    assert d.price_in("2027-01") == pytest.approx(0.75) and d.price_in("2027-02") == pytest.approx(
        1.5
    )


def test_steps_out_of_order_are_an_input_error(tmp_path):
    later = {**STEP, "month": "2027-01"}
    code, out, _ = _solve(tmp_path, _problem(steps=(STEP, later)))
    assert code == 2 and "price_steps" in out and "increase" in out, out


def _offer(oid: str, price: float, steps=()):
    from planner.inputs.catalog import Offer

    return Offer(id=oid, provider="p", gpu="h100-sxm", kind="on_demand", usd_per_gpu_hour=price,
                 gpus_per_instance=1, price_steps=list(steps), source="t", as_of="2026")  # fmt: skip


def test_pruning_keeps_an_offer_that_steps_below_a_flat_one():
    """A dearer offer whose price later steps down is cheaper in those months: neither the
    offer pruning nor the serving pairs' dominance may drop it for the flat one."""
    from types import SimpleNamespace as NS

    from planner.optimize.candidates import prune_offers
    from planner.optimize.serve_options import copies_beat

    down = [{"month": "2027-03", "usd_per_gpu_hour": 2.0, "source": "t"}]
    flat, step = _offer("flat", 3.0), _offer("step", 4.0, down)
    assert set(prune_offers({"flat": flat, "step": step})) == {"flat", "step"}
    c = lambda k, tp, mu: NS(gpu="h100-sxm", tp=tp, rate_rps=mu, key=k, deployment=None)  # noqa: E731
    # three tp1 replicas on $2.5 cost $7.5 an hour; one tp2 on the stepped offer $4 after March
    cheap = _offer("cheap", 2.5)
    assert not copies_beat(c("tp1", 1, 1.0), cheap, c("tp2", 2, 2.5), step)
    assert copies_beat(c("tp1", 1, 1.0), cheap, c("tp2", 2, 2.5), _offer("x", 4.0))
