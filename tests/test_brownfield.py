"""Planning from where the team stands (issue 20): GPUs already owned or on order, contracts
already signed, negotiated discounts, selling existing GPUs at their resale value."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from planner.base.errors import InputError
from planner.inputs.problem import load_problem
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.physics.demand import HOURS_PER_MONTH as H
from planner.plan.extract import extract_plan
from planner.plan.make import plan_problem
from planner.verify import verify_plan
from tests.factories import candidates, gpu, offer, problem, serve_workload

PRICE = 10_000.0


def solve(inputs, serve=None):
    cands = candidates(inputs, serve=serve or {"chat": [("g1", 1, 1.0)]})
    m = build_model(inputs, cands)
    res = solve_model(m, time_limit=30, gap=1e-7)
    return m, res, extract_plan(m, res)


def owned(count=2, **kw):
    return {"owned": [{"gpu": "g1", "count": count, "bought": "2026-01", **kw}]}


# ---------------------------------------------------------------- hand-computed optima


def test_existing_gpus_absorb_a_workload_that_would_be_rented():
    """2 req/s at 1 req/s per replica: without the fleet 2 replicas are rented at $1/h for 3
    months; with 2 GPUs owned (no power or hosting price) nothing is rented or bought."""
    base = dict(
        months=3,
        gpus=[gpu(price=PRICE)],
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload(rps=2.0)],
    )
    _, res0, plan0 = solve(problem(**base))
    assert res0.objective == pytest.approx(2 * H * 3)
    _, res, plan = solve(problem(**base, fleet=owned()))
    assert res.objective == pytest.approx(0.0, abs=1e-6)
    assert not plan.purchases and not plan.rentals
    assert plan.totals.capex_usd == 0
    assert all(f.existing == 2 and f.owned == 2 for f in plan.fleet)


def test_a_contract_is_used_before_anything_is_rented():
    """A contract for 2 GPUs in months 1-2 at $3/h (dearer than the $1 offer) is paid anyway:
    the plan serves from it in its term and rents only in month 3. Committed = 2 x 2 x 730 x 3."""
    inputs = problem(
        months=3,
        gpus=[gpu(price=1e7)],
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload(rps=2.0)],
        fleet={
            "contracts": [
                {
                    "provider": "c",
                    "gpu": "g1",
                    "count": 2,
                    "start": "2026-11",
                    "end": "2027-02",
                    "usd_per_gpu_hour": 3.0,
                }
            ]
        },
    )
    m, res, plan = solve(inputs)
    committed = 2 * 2 * H * 3.0
    assert plan.totals.committed_usd == pytest.approx(committed)
    assert plan.totals.rental_usd == pytest.approx(2 * H * 1.0)  # month 3 only
    assert res.objective == pytest.approx(committed + 2 * H)
    used = {r.month for r in plan.rentals if r.kind == "committed"}
    assert used == {"2027-01", "2027-02"}
    assert all(r.usd == 0 for r in plan.rentals if r.kind == "committed")


def test_a_discount_flips_the_cheapest_provider():
    base = dict(
        months=1,
        gpus=[gpu(price=1e7)],
        offers=[offer("a-g1", "g1", 1.0), offer("b-g1", "g1", 1.2)],
        serve=[serve_workload(rps=1.0)],
    )
    _, _, plan = solve(problem(**base))
    assert {r.provider for r in plan.rentals} == {"a"}
    _, res, plan = solve(problem(**base, discounts={"b": 0.25}))
    assert {r.provider for r in plan.rentals} == {"b"}
    assert res.objective == pytest.approx(0.9 * H)
    assert plan.rentals[0].usd_per_gpu_hour == pytest.approx(0.9)  # applied once


def test_an_idle_existing_fleet_is_sold_in_month_one():
    """No workload uses the two existing GPUs; each costs $50 a month to host; sold in month
    1 they fetch 2 x $10,000 x 0.5 (the curve at 30 months, 18 + 12)."""
    card = gpu(price=PRICE, residual=[(12, 0.8), (30, 0.5), (60, 0.2)])
    inputs = problem(
        months=6,
        gpus=[card],
        hosting=50.0,
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0, start="2027-06")],
        fleet={"owned": [{"gpu": "g1", "count": 2, "bought": "2025-07", "sell": "allowed"}]},
    )
    m, res, plan = solve(inputs)
    assert [(s.month, s.count, s.age_months) for s in plan.sales] == [("2027-01", 2, 18)]
    share = card.residual.share_at(18)
    assert plan.totals.sale_proceeds_usd == pytest.approx(2 * PRICE * share)
    assert plan.totals.hosting_usd == pytest.approx(0.0)
    assert res.objective == pytest.approx(H * 1.0 - 2 * PRICE * share)


def test_gpus_on_order_join_in_their_month():
    inputs = problem(
        months=3,
        gpus=[gpu(price=1e7)],
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0)],
        fleet={"owned": [{"gpu": "g1", "count": 1, "arrives": "2027-02"}]},
    )
    _, res, plan = solve(inputs)
    assert {r.month for r in plan.rentals} == {"2027-01"}
    assert res.objective == pytest.approx(H)


# ---------------------------------------------------------------- metamorphic


@pytest.mark.parametrize("rps", [0.5, 2.0, 3.5])
def test_existing_gpus_raise_the_optimum_at_most_by_their_fixed_costs(rps):
    """Owning more never costs more than the fleet's fixed costs (idle power, hosting) over
    the horizon, and is never charged as a purchase."""
    base = dict(
        months=4,
        gpus=[gpu(price=PRICE, idle=50.0, tdp=300.0)],
        power_price=0.2,
        hosting=40.0,
        offers=[offer("c-g1", "g1", 2.0)],
        serve=[serve_workload(rps=rps)],
    )
    _, res0, _ = solve(problem(**base))
    _, res, plan = solve(problem(**base, fleet=owned(3)))
    fixed = 3 * 4 * (40.0 + 50.0 * H * 0.2 / 1000)
    assert res.objective <= res0.objective + fixed + 1e-6
    assert plan.totals.capex_usd == 0 and not plan.purchases


def test_a_contract_raises_the_optimum_at_most_by_its_committed_cost():
    base = dict(
        months=3,
        gpus=[gpu(price=1e7)],
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload(rps=2.0)],
    )
    _, res0, _ = solve(problem(**base))
    contract = {
        "provider": "c",
        "gpu": "g1",
        "count": 4,
        "start": "2027-01",
        "end": "2027-03",
        "usd_per_gpu_hour": 5.0,
    }
    _, res, plan = solve(problem(**base, fleet={"contracts": [contract]}))
    assert res.objective <= res0.objective + plan.totals.committed_usd + 1e-6
    assert res.objective >= plan.totals.committed_usd - 1e-6


@pytest.mark.parametrize("d1,d2", [(0.0, 0.1), (0.1, 0.3), (0.3, 0.6)])
def test_a_larger_discount_never_raises_the_optimum(d1, d2):
    base = dict(
        months=2,
        gpus=[gpu(price=PRICE)],
        offers=[offer("a-g1", "g1", 1.0)],
        serve=[serve_workload(rps=3.0)],
    )
    _, r1, _ = solve(problem(**base, discounts={"a": d1}))
    _, r2, _ = solve(problem(**base, discounts={"a": d2}))
    assert r2.objective <= r1.objective + 1e-6
    assert r2.objective < r1.objective  # the plan rents from a, so it is cheaper


# ---------------------------------------------------------------- the verifier


def _plan_with_everything():
    card = gpu(price=PRICE, residual=[(12, 0.8), (60, 0.2)])
    inputs = problem(
        months=3,
        gpus=[card],
        hosting=50.0,
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0, start="2027-03")],
        fleet={
            "owned": [{"gpu": "g1", "count": 2, "bought": "2026-01", "sell": "allowed"}],
            "contracts": [
                {
                    "provider": "c",
                    "gpu": "g1",
                    "count": 1,
                    "start": "2027-03",
                    "end": "2027-06",
                    "usd_per_gpu_hour": 2.0,
                }
            ],
        },
    )
    m, res, plan = solve(inputs)
    return inputs, plan


def _errors(inputs, plan):
    """Every finding except the two that compare the tiny problems' chosen rates (1 req/s per
    replica, a fixed p95) with the real physics of the stand-in GPU: those are fake here."""
    fake = ("physics says", "!= physics")
    return [e for e in verify_plan(inputs, plan) if not any(f in e for f in fake)]


def test_verify_catches_a_changed_sale_price():
    inputs, plan = _plan_with_everything()
    assert plan.sales
    assert not _errors(inputs, plan)
    bad = plan.model_copy(update={"sales": [plan.sales[0].model_copy(update={"usd": 1.0})]})
    assert any("resale curve" in e for e in _errors(inputs, bad))


def test_verify_catches_an_existing_gpu_charged_as_a_purchase():
    inputs, plan = _plan_with_everything()
    t = plan.totals.model_copy(update={"capex_usd": plan.totals.capex_usd + 2 * PRICE})
    bad = plan.model_copy(update={"totals": t})
    assert any("capex_usd" in e for e in _errors(inputs, bad))


def test_verify_catches_a_contract_used_outside_its_term():
    inputs, plan = _plan_with_everything()
    rows = [
        r.model_copy(update={"month": "2027-01"}) if r.kind == "committed" else r
        for r in plan.rentals
    ]
    assert any(r.kind == "committed" for r in plan.rentals)
    bad = plan.model_copy(update={"rentals": rows})
    assert any("outside its term" in e for e in _errors(inputs, bad))


def test_verify_catches_a_discount_applied_twice():
    inputs = problem(
        months=1,
        gpus=[gpu(price=1e7)],
        offers=[offer("a-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0)],
        discounts={"a": 0.2},
    )
    _, _, plan = solve(inputs)
    rows = [
        r.model_copy(update={"usd_per_gpu_hour": r.usd_per_gpu_hour * 0.8, "usd": r.usd * 0.8})
        for r in plan.rentals
    ]
    bad = plan.model_copy(update={"rentals": rows})
    assert any("offer price" in e for e in _errors(inputs, bad))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "fleet,needle",
    [
        ({"owned": [{"gpu": "g1", "count": 0, "bought": "2026-01"}]}, "count"),
        ({"owned": [{"gpu": "g1", "count": 1}]}, "bought"),
        ({"owned": [{"gpu": "g1", "count": 1, "bought": "2026-01", "sell": "maybe"}]}, "sell"),
        ({"owned": [{"gpu": "zz", "count": 1, "bought": "2026-01"}]}, "unknown"),
        ({"owned": [{"gpu": "g1", "count": 1, "arrives": "2030-01"}]}, "outside the horizon"),
        ({"owned": [{"gpu": "g1", "count": 1, "bought": "2027-02"}]}, "not before"),
        (
            {
                "contracts": [
                    {
                        "provider": "c",
                        "gpu": "g1",
                        "count": 1,
                        "start": "2027-03",
                        "end": "2027-01",
                        "usd_per_gpu_hour": 1.0,
                    }
                ]
            },
            "before start",
        ),
        (
            {
                "contracts": [
                    {
                        "provider": "nobody",
                        "gpu": "g1",
                        "count": 1,
                        "start": "2027-01",
                        "end": "2027-02",
                        "usd_per_gpu_hour": 1.0,
                    }
                ]
            },
            "unknown provider",
        ),
    ],
)
def test_bad_fleet_is_an_input_error(fleet, needle):
    with pytest.raises((InputError, ValidationError)) as e:
        problem(
            months=3,
            gpus=[gpu()],
            offers=[offer("c-g1", "g1", 1.0)],
            fleet=fleet,
            serve=[serve_workload()],
        )
    assert needle in str(e.value)


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5])
def test_a_discount_outside_zero_to_one_is_an_input_error(share):
    with pytest.raises((InputError, ValidationError)) as e:
        problem(offers=[offer("c-g1", "g1", 1.0)], discounts={"c": share}, serve=[serve_workload()])
    assert "discounts" in str(e.value)


def test_a_contract_before_the_horizon_is_a_warning_not_an_error():
    inputs = problem(
        months=3,
        gpus=[gpu()],
        offers=[offer("c-g1", "g1", 1.0)],
        serve=[serve_workload()],
        fleet={
            "contracts": [
                {
                    "provider": "c",
                    "gpu": "g1",
                    "count": 1,
                    "start": "2025-01",
                    "end": "2026-06",
                    "usd_per_gpu_hour": 1.0,
                }
            ]
        },
    )
    assert any("before the horizon starts" in w for w in inputs.warnings)


# ---------------------------------------------------------------- the reference problem


def test_reference_with_a_contract_commits_exactly_its_hours_in_the_horizon(tmp_path):
    """16 H100 at $2.00 from 2026-07 to 2027-06: 6 months inside a horizon from 2027-01.

    The reference's first 12 months (its training run and the chat service's first 9 months):
    the contract starts before the horizon and ends inside it, and the model is a third of the
    36-month one's (the 3 s solve took ~16 s of wall time on a loaded machine)."""
    from pathlib import Path

    ref = Path(__file__).resolve().parent.parent / "problems" / "2m_budget.yaml"
    reference = ref.read_text()
    assert "horizon: {start: 2027-01, months: 36}" in reference
    text = reference.replace("months: 36}", "months: 12}") + (
        "fleet:\n  contracts:\n    - {provider: cudo, gpu: h100-sxm, count: 16, start: 2026-07,"
        " end: 2027-06, usd_per_gpu_hour: 2.00}\n"
    )
    p = tmp_path / "ref_contract.yaml"
    p.write_text(text)
    inputs = load_problem(p)
    # the commitment is the same in any plan, so any verified plan will do: a short limit
    # (the solve to a 5 % gap took ~4 s and proves nothing more about the contract)
    plan = plan_problem(inputs, gap=0.05, time_limit=3)
    assert plan.totals.committed_usd == pytest.approx(16 * 6 * 730 * 2.00)  # $140,160
    assert not verify_plan(inputs, plan)


# ---------------------------------------------------------------- more of the verifier


def test_verify_catches_a_discount_applied_twice_to_the_offer():
    """The offers themselves: a provider's price scaled a second time (list x 0.8 x 0.8)."""
    inputs = problem(
        months=1,
        gpus=[gpu(price=1e7)],
        offers=[offer("a-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0)],
        discounts={"a": 0.2},
    )
    _, _, plan = solve(inputs)
    assert not _errors(inputs, plan)
    o = inputs.offers["a-g1"]
    assert o.usd_per_gpu_hour == pytest.approx(0.8) and o.list_usd_per_gpu_hour == 1.0
    twice = o.model_copy(update={"usd_per_gpu_hour": 0.64})
    bad_inputs = type(inputs)(
        inputs.problem, inputs.gpus, inputs.models, {**inputs.offers, "a-g1": twice}
    )
    errors = _errors(bad_inputs, plan)
    assert any("applied once" in e for e in errors)


def test_verify_catches_changed_existing_and_commitment_rows():
    inputs, plan = _plan_with_everything()
    assert plan.existing and plan.commitments
    e = plan.existing[0].model_copy(update={"sold": 0, "kept": 2})
    assert any(
        "existing[0]" in x for x in _errors(inputs, plan.model_copy(update={"existing": [e]}))
    )
    c = plan.commitments[0].model_copy(update={"usd": plan.commitments[0].usd / 2})
    bad = plan.model_copy(update={"commitments": [c]})
    assert any("commitments[0]" in x for x in _errors(inputs, bad))
    t = plan.totals.model_copy(update={"committed_usd": 0.0})
    assert any("committed_usd" in x for x in _errors(inputs, plan.model_copy(update={"totals": t})))


def test_existing_gpus_are_never_purchases_even_when_the_budget_is_zero():
    """Owning cards before the plan needs no capex budget: with capex 0 they still serve."""
    inputs = problem(
        months=2,
        gpus=[gpu(price=PRICE)],
        capex=0,
        offers=[offer("c-g1", "g1", 5.0)],
        serve=[serve_workload(rps=2.0)],
        fleet=owned(2),
    )
    _, res, plan = solve(inputs)
    assert not plan.purchases and plan.totals.capex_usd == 0 and not plan.rentals
    assert not _errors(inputs, plan)


def test_sales_are_whole_nodes_and_at_most_the_entry():
    """12 cards of 8-card nodes: at most one node (8) can be sold; the other 4 stay."""
    card = gpu(price=PRICE, node=8, residual=[(12, 0.8), (60, 0.2)])
    inputs = problem(
        months=3,
        gpus=[card],
        hosting=50.0,
        offers=[offer("c-g1", "g1", 1.0, gpus_per_instance=8)],
        serve=[serve_workload(rps=1.0, start="2027-03")],
        fleet={"owned": [{"gpu": "g1", "count": 12, "bought": "2026-01", "sell": "allowed"}]},
    )
    _, _, plan = solve(inputs)
    assert sum(s.count for s in plan.sales) == 8
    assert plan.existing[0].kept == 4
    assert not _errors(inputs, plan)


# ---------------------------------------------------------------- the command line


BAD_FLEET = """
name: bad fleet
horizon: {start: 2027-01, months: 3}
budget: {capex_usd: 0}
site: {power_usd_per_kwh: 0.12}
gpus: [a100-pcie-80gb]
offers:
  files: []
  extra:
    - {id: cloud-a100-od, provider: cloud, gpu: a100-pcie-80gb, kind: on_demand,
       usd_per_gpu_hour: 2.5, source: test, as_of: "2026-11"}
  discounts: {cloud: DISCOUNT}
fleet:
  owned:
    - {gpu: OWNED_GPU, count: COUNT, bought: 2026-01, sell: SELL}
  contracts:
    - {provider: PROVIDER, gpu: a100-pcie-80gb, count: 2, start: 2026-06, end: END,
       usd_per_gpu_hour: 2.0}
workloads:
  serve:
    - name: chat
      model: llama-2-7b
      start: 2027-01
      traffic: {daily_active_users: 500, requests_per_user_per_day: 10, utilization: 0.5}
      tokens: {prompt: 200, output: 100}
      slo: {p95_ttft_ms: 2000, p95_tpot_ms: 100}
"""
GOOD = {
    "DISCOUNT": "0.1",
    "OWNED_GPU": "a100-pcie-80gb",
    "COUNT": "2",
    "SELL": "allowed",
    "PROVIDER": "cloud",
    "END": "2027-02",
}


@pytest.mark.parametrize(
    "key,value,where,allowed",
    [
        ("COUNT", "0", "fleet.owned[0].count", "greater than or equal to 1"),
        ("OWNED_GPU", "h200-sxm-typo", "fleet.owned[0].gpu", "unknown"),
        ("SELL", "sometimes", "fleet.owned[0].sell", "never"),
        ("DISCOUNT", "1.0", "offers.discounts.cloud", "less than 1"),
        ("PROVIDER", "nobody", "fleet.contracts[0].provider", "unknown provider"),
        ("END", "2026-05", "fleet.contracts[0]", "before start"),
    ],
)
def test_bad_fleet_file_exits_2_naming_file_line_and_field(tmp_path, key, value, where, allowed):
    from click.testing import CliRunner

    from planner.cli import cli

    text = BAD_FLEET
    for k, v in {**GOOD, key: value}.items():
        text = text.replace(k, v)
    path = tmp_path / "bad_fleet.yaml"
    path.write_text(text)
    res = CliRunner().invoke(cli, ["solve", str(path), "-o", str(tmp_path / "x.xlsx")])
    assert res.exit_code == 2, res.output
    assert "bad_fleet.yaml:" in res.output and where in res.output, res.output
    assert allowed in res.output, res.output
    # the line the placeholder stood on ("0" alone would match the horizon's line first)
    line = next(i for i, t in enumerate(BAD_FLEET.splitlines(), 1) if re.search(rf"\b{key}\b", t))
    assert f"bad_fleet.yaml:{line}" in res.output, res.output


def test_the_good_fleet_file_solves(tmp_path):
    from click.testing import CliRunner

    from planner.cli import cli

    text = BAD_FLEET
    for k, v in GOOD.items():
        text = text.replace(k, v)
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    out = tmp_path / "p.json"
    res = CliRunner().invoke(
        cli, ["solve", str(path), "-o", str(tmp_path / "x.xlsx"), "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["verify", str(path), str(out)])
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------- the example and its workbook


@pytest.fixture(scope="module")
def brownfield(tmp_path_factory):
    from pathlib import Path

    from planner.reports.excel import write_workbook
    from tests.solved import solved

    path = Path(__file__).resolve().parent.parent / "problems" / "brownfield.yaml"
    # the file's own solve (plan_problem with its solver options), shared with test_problems
    inputs, plan = solved(path)
    out = tmp_path_factory.mktemp("bf") / "brownfield.xlsx"
    write_workbook(plan, out)
    return inputs, plan, out


def _cash_flow_total_row(ws):
    return next(r for r in range(5, ws.max_row + 1) if ws.cell(r, 1).value == "Total")


def test_the_example_uses_every_existing_asset(brownfield):
    inputs, plan, _ = brownfield
    assert not verify_plan(inputs, plan)
    assert plan.totals.committed_usd == pytest.approx(16 * 6 * H * 2.00)  # $140,160
    assert plan.totals.capex_usd == 0 or plan.purchases
    assert any(r.kind == "committed" for r in plan.rentals)
    assert any(f.existing for f in plan.fleet)
    assert plan.totals.total_usd == pytest.approx(
        plan.totals.capex_usd
        + plan.totals.power_usd
        + plan.totals.hosting_usd
        + plan.totals.rental_usd
        + plan.totals.committed_usd
        - plan.totals.sale_proceeds_usd
    )


def test_the_example_workbook_has_existing_rows_with_live_values(brownfield):
    from openpyxl import load_workbook

    _, plan, out = brownfield
    wb = load_workbook(out, data_only=True)
    assert "Existing" in wb.sheetnames
    ex = wb["Existing"]
    marked = [
        r for r in range(5, ex.max_row + 1) if ex.cell(r, 1).value == "existing (before the plan)"
    ]
    assert len(marked) == len(plan.existing) + len(plan.sales) + sum(
        len(c.months) for c in plan.commitments
    )
    cf = wb["Cash flow"]
    tr = _cash_flow_total_row(cf)
    assert cf.cell(tr, 6).value == pytest.approx(plan.totals.total_usd, rel=1e-9)
    assert cf.cell(tr, 17).value == pytest.approx(plan.totals.committed_usd, rel=1e-9)
    assert cf.cell(tr, 18).value == pytest.approx(plan.totals.sale_proceeds_usd, rel=1e-9)
    formulas = load_workbook(out)
    assert str(formulas["Cash flow"].cell(5, 17).value).startswith("=SUMIFS(Existing!")


def test_the_example_workbook_recalculates_in_libreoffice(brownfield, tmp_path):
    from openpyxl import load_workbook

    from tests.test_excel_recalc import recalc

    _, plan, out = brownfield
    (again,) = recalc([out], tmp_path)
    wb = load_workbook(again, data_only=True)
    cf = wb["Cash flow"]
    tr = _cash_flow_total_row(cf)
    assert cf.cell(tr, 6).value == pytest.approx(plan.totals.total_usd, rel=1e-6)
    assert cf.cell(tr, 17).value == pytest.approx(plan.totals.committed_usd, rel=1e-6)
    assert cf.cell(tr, 18).value == pytest.approx(plan.totals.sale_proceeds_usd, rel=1e-6)


def test_no_fleet_means_no_existing_sheet_and_zero_columns():
    """A plan from an empty datacenter keeps today's workbook (no Existing sheet)."""
    from planner.reports.excel import SHEETS, build_workbook

    inputs = problem(months=1, offers=[offer("c-g1", "g1", 1.0)], serve=[serve_workload()])
    _, _, plan = solve(inputs)
    assert not plan.existing and not plan.commitments and not plan.sales
    assert tuple(build_workbook(plan).sheetnames) == SHEETS
