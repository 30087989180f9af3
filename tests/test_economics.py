"""Economics (issue 14): present value, resale value, servers as units, colocation by the kW.

Tiny problems with hand-computed optima (coefficients injected, physics bypassed), then
metamorphic relations on them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.base.errors import InputError
from planner.cli import cli
from planner.inputs.catalog import Sourced, SourcedRange, load_gpus
from planner.inputs.market import Market
from planner.inputs.problem import Finance, load_problem, resolve
from planner.optimize.model import build_model
from planner.optimize.solve import solve_model
from planner.physics.economics import annuity_factor, discount_factor
from planner.plan.extract import extract_plan
from planner.plan.make import plan_problem
from planner.verify.context import VerifyContext
from planner.verify.families import check_caps, check_money, check_purchases, check_rentals
from tests.factories import candidates, gpu, offer, problem, serve_workload
from tests.golden import PROBLEMS, ROOT

H = 730.0


def solve(inputs, serve):
    m = build_model(inputs, candidates(inputs, serve=serve))
    res = solve_model(m, time_limit=30, gap=1e-9)
    plan = extract_plan(m, res)
    # the money, purchase, capacity and rental families (the serving family recomputes the
    # physics these tests bypass)
    ctx = VerifyContext.from_inputs(inputs, plan)
    found = [
        f for fam in (check_purchases, check_caps, check_rentals, check_money) for f in fam(ctx)
    ]
    assert not found, found
    return res, plan


def growing(rps: float, growth: float) -> dict:
    w = serve_workload(rps=rps)
    w["traffic"]["growth_per_month"] = growth
    return w


# ------------------------------------------------------------------ discounting


def _pv_schedule(
    k1: int, k2: int, rate: float, T: int, K: float, R: float, C: float, g: float
) -> float:
    """Present value of: own replica 1 from month k1 and replica 2 from month k2 (T: never),
    renting the rest in whole replicas at R per replica-month, C idle power per owned GPU
    per month, demand 1.0 x (1 + g)^t req/s at 1 req/s per replica."""
    pv = 0.0
    for t in range(T):
        d = discount_factor(rate, t)
        owned = (t >= k1) + (t >= k2)
        rented = max(0, math.ceil((1 + g) ** t - owned - 1e-9))
        pv += d * (R * rented + C * owned + K * ((t == k1) + (t == k2)))
    return pv


@pytest.mark.parametrize("rate", [0.0, 0.5])
def test_discounting_moves_a_purchase_later(rate):
    """Demand grows 2 %/month from one replica, so from month 1 a whole second replica is
    rented at $219 a month unless a second $2,000 GPU is owned. Undiscounted that GPU pays
    (11 x $219 > $2,000): bought in month 1; at 50 %/year its rent saved is worth less than
    its price, so it is never bought. The optimum matches enumeration of both purchases."""
    T, K, p, g = 12, 2_000.0, 0.3, 0.02
    idle_w, price = 100.0, 0.1
    inputs = problem(
        months=T,
        gpus=[gpu(price=K, idle=idle_w, tdp=idle_w)],
        power_price=price,
        offers=[offer("cloud-g1", "g1", p)],
        serve=[growing(1.0, g)],
        finance={"discount_rate": rate, "residual": "none"},
    )
    res, plan = solve(inputs, {"chat": [("g1", 1, 1.0)]})
    C = idle_w * H / 1000 * price
    pv, k1, k2 = min(
        (_pv_schedule(a, b, rate, T, K, p * H, C, g), a, b)
        for a in range(T + 1)
        for b in range(a, T + 1)
    )
    assert (k1, k2) == ((0, 1) if rate == 0 else (0, T))  # the hand analysis in the docstring
    bought = [(plan.months[k], 1) for k in (k1, k2) if k < T]
    assert [(x.month, x.count) for x in plan.purchases] == bought
    assert res.objective == pytest.approx(pv, rel=1e-6)
    assert plan.totals.npv_usd == pytest.approx(res.objective, rel=1e-9)


def test_present_value_of_a_rental_month_by_month():
    # Renting one replica for 24 months at $1/h, 12 %/year: PV = 730 x annuity(0, 24).
    inputs = problem(
        months=24,
        gpus=[gpu(price=1e7)],
        offers=[offer("cloud-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0)],
        finance={"discount_rate": 0.12, "residual": "none"},
    )
    res, plan = solve(inputs, {"chat": [("g1", 1, 1.0)]})
    assert plan.totals.total_usd == pytest.approx(24 * H)
    assert res.objective == pytest.approx(H * annuity_factor(0.12, 0, 24), rel=1e-9)
    assert [y.year for y in plan.years] == [1, 2]
    assert plan.years[0].cash_usd == pytest.approx(12 * H)
    assert sum(y.pv_usd for y in plan.years) == pytest.approx(res.objective, rel=1e-9)


# ------------------------------------------------------------------ residual value


def _late_service(shares: list[tuple[int, float]] | None, mode: str = "curve"):
    """A service for the last 3 months of 12: renting costs 3 x 730 x $2 = $4,380; a $10,000
    card resold at the horizon end for share(3 months) x $10,000 costs the difference."""
    return problem(
        months=12,
        gpus=[gpu(price=10_000, residual=shares)],
        offers=[offer("cloud-g1", "g1", 2.0)],
        serve=[serve_workload(rps=1.0, start="2027-10")],
        finance={"discount_rate": 0, "residual": mode},
    )


def test_residual_value_makes_a_late_purchase_win():
    res, plan = solve(_late_service(None, "none"), {"chat": [("g1", 1, 1.0)]})
    assert plan.purchases == [] and res.objective == pytest.approx(3 * H * 2.0)
    res, plan = solve(_late_service([(3, 0.9), (72, 0.2)]), {"chat": [("g1", 1, 1.0)]})
    assert [(x.month, x.count) for x in plan.purchases] == [("2027-10", 1)]
    assert plan.totals.residual_value_usd == pytest.approx(9_000)
    assert res.objective == pytest.approx(10_000 - 9_000)
    assert plan.years[-1].residual_usd == pytest.approx(9_000)
    # sold at the horizon end for 9,000 against a book value of 10,000 x (1 - 3/60)
    assert plan.years[-1].gain_on_sale_usd == pytest.approx(9_000 - 9_500)


def test_straight_line_residual_is_book_value():
    res, plan = solve(_late_service(None, "straight_line"), {"chat": [("g1", 1, 1.0)]})
    # default depreciation 5 years: after 3 months 95 % of the price is left
    assert plan.totals.residual_value_usd == pytest.approx(9_500)
    assert res.objective == pytest.approx(500)
    assert plan.years[-1].gain_on_sale_usd == pytest.approx(0)


@pytest.mark.parametrize("scale", [0.1, 0.4, 0.6, 0.9, 1.0])
def test_more_resale_value_never_lowers_the_credit(scale):
    """Metamorphic: scaling the resale curve up never lowers the optimum's residual credit."""
    credits = []
    for s in (scale * 0.5, scale):
        _, plan = solve(_late_service([(3, s), (72, 0.0)]), {"chat": [("g1", 1, 1.0)]})
        credits.append(plan.totals.residual_value_usd)
    assert credits[1] >= credits[0] - 1e-6


# ------------------------------------------------------------------ servers as units


def _three_cards(chassis: float, slots: int = 8):
    """Three replicas for a year: renting costs 3 x 730 x 12 x $0.5 = $13,140; owning costs
    three $3,000 cards plus the servers that hold them."""
    return problem(
        months=12,
        gpus=[gpu(price=3_000, server={"slots": slots, "chassis": chassis})],
        offers=[offer("cloud-g1", "g1", 0.5)],
        serve=[serve_workload(rps=3.0)],
    )


def test_a_chassis_cost_makes_a_three_card_purchase_lose_to_renting():
    res, plan = solve(_three_cards(0.0), {"chat": [("g1", 1, 1.0)]})
    assert [(x.count, x.nodes) for x in plan.purchases] == [(3, 1)]
    assert res.objective == pytest.approx(9_000)
    res, plan = solve(_three_cards(5_000.0), {"chat": [("g1", 1, 1.0)]})
    assert plan.purchases == []
    assert res.objective == pytest.approx(3 * H * 12 * 0.5)


def test_cards_need_slots():
    # 2-slot servers at $1,000: three cards need two servers
    res, plan = solve(_three_cards(1_000.0, slots=2), {"chat": [("g1", 1, 1.0)]})
    assert sum(x.count for x in plan.purchases) == 3
    assert sum(x.nodes for x in plan.purchases) == 2
    assert res.objective == pytest.approx(9_000 + 2_000)


def test_server_host_power_is_paid_per_server():
    # one 8-slot server (host 400 W) with one card (idle = TDP = 100 W), busy all year
    inputs = problem(
        months=12,
        power_price=0.1,
        gpus=[
            gpu(price=1_000, tdp=100, idle=100, server={"slots": 8, "chassis": 0, "host_w": 400})
        ],
        offers=[offer("cloud-g1", "g1", 50.0)],
        serve=[serve_workload(rps=1.0)],
    )
    res, plan = solve(inputs, {"chat": [("g1", 1, 1.0)]})
    assert plan.totals.power_usd == pytest.approx(12 * H * 500 / 1000 * 0.1)
    assert res.objective == pytest.approx(1_000 + 12 * H * 0.05)


# ------------------------------------------------------------------ colocation by the kW


def test_colocation_is_charged_on_it_kw():
    # one card of 700 W in a server of 1,300 W host: 2.0 kW x $200 x 12 months
    inputs = problem(
        months=12,
        gpus=[gpu(price=1_000, tdp=700, server={"slots": 8, "chassis": 0, "host_w": 1_300})],
        offers=[offer("cloud-g1", "g1", 50.0)],
        serve=[serve_workload(rps=1.0)],
        colo=200.0,
    )
    res, plan = solve(inputs, {"chat": [("g1", 1, 1.0)]})
    assert plan.totals.hosting_usd == pytest.approx(2.0 * 200 * 12)
    assert plan.fleet[0].it_kw == pytest.approx(2.0)


def test_more_expensive_colocation_never_adds_kw():
    """Metamorphic: raising the colocation price never raises the optimum's provisioned kW."""
    peaks = []
    for colo in (0.0, 100.0, 300.0, 1_000.0, 3_000.0):
        inputs = problem(
            months=12,
            gpus=[
                gpu(
                    "hot", price=2_000, tdp=700, server={"slots": 4, "chassis": 500, "host_w": 800}
                ),
                gpu(
                    "cool", price=2_600, tdp=250, server={"slots": 4, "chassis": 500, "host_w": 400}
                ),
            ],
            offers=[offer("cloud-hot", "hot", 0.6), offer("cloud-cool", "cool", 0.7)],
            serve=[serve_workload(rps=3.0)],
            colo=colo,
        )
        _, plan = solve(inputs, {"chat": [("hot", 1, 1.0), ("cool", 1, 1.0)]})
        kw = {}
        for fm in plan.fleet:
            kw[fm.month] = kw.get(fm.month, 0.0) + fm.it_kw
        peaks.append(max(kw.values(), default=0.0))
    assert all(b <= a + 1e-9 for a, b in zip(peaks, peaks[1:], strict=False)), peaks
    assert peaks[0] > peaks[-1]  # the relation is not vacuous: the fleet does change


# ------------------------------------------------------------------ the plans of before


NOMINAL = Path(__file__).resolve().parent / "fixtures" / "nominal"


# The reference problem hosted at $60 per GPU-month before it moved to colocation by the kW.
OLD_HOSTING = {"2m_budget": 60.0}


def _per_gpu_catalog() -> dict:
    """Today's catalog with each card in a server priced as before servers were units: a full
    server of its old node size, chassis = old per-GPU overhead x node, host watts likewise."""
    old = json.loads((NOMINAL / "per_gpu_servers.json").read_text())
    out = {}
    for gid, g in load_gpus().items():
        if gid not in old:  # a type added after servers became units: as it is today
            out[gid] = g
            continue
        o = old[gid]
        out[gid] = g.model_copy(
            update={
                "server": None,
                "server_spec": None,
                "node_size": Sourced(value=o["node_size"], source="before", as_of="2026-11"),
                "host_w_per_gpu": Sourced(value=o["host_w_per_gpu"], source="b", as_of="2026"),
                "server_overhead_usd_per_gpu": SourcedRange(
                    value=o["server_overhead_usd_per_gpu"],
                    low=o["server_overhead_usd_per_gpu"],
                    high=o["server_overhead_usd_per_gpu"],
                    source="before",
                    as_of="2026-11",
                ),
            }
        )
    return out


def _essence(plan: dict) -> dict:
    """What must not change: money, purchases, rentals per (offer, workload), workloads."""
    rent: dict[tuple, list[float]] = {}
    for r in plan["rentals"]:
        row = rent.setdefault((r["offer"], r["workload"], r["kind"]), [0.0, 0.0])
        row[0] += r["gpu_hours"]
        row[1] += r["usd"]
    t = plan["totals"]
    return {
        "status": plan["status"],
        "totals": [round(t[k], 2) for k in ("capex_usd", "power_usd", "hosting_usd", "rental_usd")],
        "purchases": [
            (p["gpu"], p["month"], p["count"], round(p["total_usd"], 2)) for p in plan["purchases"]
        ],
        "rentals": sorted((k, round(v[0], 1), round(v[1], 2)) for k, v in rent.items()),
        "workloads": [
            (w["name"], w["gpu"], round(w["cost_usd"], 2), w["meets_target"])
            for w in plan["workloads"]
        ],
    }


# The problems that existed when the nominal plans were stored (a newer one has no "before").
NOMINAL_PROBLEMS = [p for p in PROBLEMS if (NOMINAL / f"{p.stem}.json").exists()]


def test_every_stored_nominal_plan_has_its_problem():
    stored = {p.stem for p in NOMINAL.glob("*.json")} - {"per_gpu_servers"}
    assert stored and stored <= {p.stem for p in NOMINAL_PROBLEMS}


@pytest.mark.parametrize("path", NOMINAL_PROBLEMS, ids=lambda p: p.stem)
def test_nominal_settings_give_the_plans_of_before(path):
    """Regression of the nominal path: with no discounting, no resale, hosting per GPU only,
    flat prices with no lead time and servers priced as the old per-GPU overhead, every
    reference plan is the one stored (before
    issue 14 these were the plans of the time; regenerated once for issue 15's intended
    changes: whole replicas, fabrics, headroom and redundancy)."""
    base = load_problem(path).problem
    site = {"colo_usd_per_kw_month": 0.0}
    if path.stem in OLD_HOSTING:
        site["hosting_usd_per_gpu_month"] = OLD_HOSTING[path.stem]
    problem = base.model_copy(
        update={
            "finance": Finance(discount_rate=0, residual="none"),
            "site": base.site.model_copy(update=site),
            "market": Market(rent_change_per_year=0, buy_change_per_year=0, lead_months=0),
        }
    )
    inputs = resolve(problem, base_dir=path.parent, gpu_catalog=_per_gpu_catalog())
    plan = json.loads(plan_problem(inputs, time_limit=60).to_json())
    before = json.loads((NOMINAL / f"{path.stem}.json").read_text())
    assert plan["totals"]["total_usd"] == pytest.approx(before["totals"]["total_usd"], rel=1e-6)
    assert _essence(plan) == _essence(before)


# ------------------------------------------------------------------ bad input


def _run(*args: object) -> tuple[int, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, " ".join(r.output.split())


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("finance", "discount_rate"), 1.0, "finance.discount_rate: Input should be less than 1"),
        (("finance", "discount_rate"), -0.05, "greater than or equal to 0"),
        (("finance", "depreciation_years"), 0.5, "finance.depreciation_years"),
        (("finance", "residual"), "resale", "'curve', 'none' or 'straight_line'"),
        (("site", "colo_usd_per_kw_month"), -150, "site.colo_usd_per_kw_month"),
        (("overrides", "gpus", "a100-pcie-80gb", "server"), "nope", "unknown server type"),
    ],
)
def test_bad_finance_input_is_exit_2_naming_the_field(tmp_path, path, value, says):
    data = yaml.safe_load((ROOT / "problems" / "2m_budget.yaml").read_text())
    d = data
    for k in path[:-1]:
        d = d.setdefault(k, {})
    d[path[-1]] = value
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data))
    code, out = _run("solve", p, "--no-excel")
    assert code == 2 and says in out, out[:800]


def _one_gpu_catalog(tmp_path: Path, residual=None, server=None, node=1) -> Path:
    g = gpu("card", price=1000, node=node).model_dump(by_alias=True, exclude_none=True)
    g.pop("server_spec", None)
    if residual is not None:
        g["residual"] = {"points": residual, "source": "test", "as_of": "2026-01"}
    if server is not None:
        g.pop("server_overhead_usd_per_gpu")
        g.pop("host_w_per_gpu")
        g["server"] = server["id"]
        (tmp_path / "servers.yaml").write_text(yaml.safe_dump({"servers": [server]}))
    p = tmp_path / "gpus.yaml"
    p.write_text(yaml.safe_dump({"gpus": [g]}))
    return p


def _point(age: int, share: float) -> dict:
    return {"age_months": age, "share": share, "low": share, "high": share}


@pytest.mark.parametrize(
    ("points", "says"),
    [
        ([_point(12, 0.8), _point(36, 0.9)], "cannot rise with age"),
        ([_point(12, 1.2)], "less than or equal to 1"),
        ([_point(12, -0.1)], "greater than or equal to 0"),
        ([_point(36, 0.5), _point(12, 0.8)], "strictly ascending"),
        ([{"age_months": 12, "share": 0.5, "low": 0.6, "high": 0.7}], "low <= share <= high"),
    ],
)
def test_bad_resale_curves_are_refused_with_file_and_line(tmp_path, points, says):
    with pytest.raises(InputError) as exc:
        load_gpus(_one_gpu_catalog(tmp_path, residual=points))
    msg = " ".join(str(exc.value).split())
    assert says in msg and "gpus.yaml:" in msg and "residual" in msg, msg


def test_a_server_must_hold_whole_nodes(tmp_path):
    server = {
        "id": "four-slot",
        "name": "4-slot",
        "slots": 4,
        "fill": "full",
        "chassis_usd": {"value": 1, "low": 1, "high": 1, "source": "t", "as_of": "2026"},
        "host_w": {"value": 100, "source": "t", "as_of": "2026"},
    }
    with pytest.raises(InputError) as exc:
        load_gpus(_one_gpu_catalog(tmp_path, server=server, node=8))
    msg = str(exc.value)
    assert "gpus[0].server" in msg and "4 slots" in msg and "8 GPUs" in msg, msg


def test_whatif_aliases_vary_the_finance_figures(tmp_path):
    from planner.analysis.whatif import run_whatif
    from tests.test_whatif import SMALL

    p = tmp_path / "small.yaml"
    p.write_text(SMALL + "finance: {residual: none}\n")  # so PV = cash at a zero rate
    wi = run_whatif(p, ["discount_rate=0,0.2", "colo_price=0,400"], workers=1, with_base=False)
    rows = {(r.params["discount_rate"], r.params["colo_price"]): r.totals for r in wi.results}
    assert len(rows) == 4 and all(t is not None for t in rows.values())
    assert rows[(0, 0)]["npv_usd"] == pytest.approx(rows[(0, 0)]["total_usd"])
    assert rows[(0.2, 0)]["npv_usd"] < rows[(0.2, 0)]["total_usd"]
    # colocation is paid only on owned hardware: it can only raise the total
    assert rows[(0, 400)]["total_usd"] >= rows[(0, 0)]["total_usd"] - 1e-6


# ------------------------------------------------------------------ found in review


def test_a_total_budget_can_require_owning_what_loses_on_present_value():
    """Renting for 36 months costs $22,948 in present value but $26,280 in cash; buying the
    $24,000 card loses on present value, yet it is the only plan within a $25,000 total
    budget (which caps cash). The size reduction must not drop the GPU type."""
    inputs = problem(
        months=36,
        total=25_000,
        gpus=[gpu(price=24_000)],
        offers=[offer("cloud-g1", "g1", 1.0)],
        serve=[serve_workload(rps=1.0)],
        finance={"discount_rate": 0.10, "residual": "none"},
    )
    res, plan = solve(inputs, {"chat": [("g1", 1, 1.0)]})
    assert res.status == "optimal"
    assert [(x.month, x.count) for x in plan.purchases] == [("2027-01", 1)]
    assert res.objective == pytest.approx(24_000)


def test_partial_servers_take_cards_in_whole_nodes():
    # a card sold in pairs (node 2) in a 4-slot chassis: one replica needs a whole pair
    inputs = problem(
        months=12,
        gpus=[gpu(price=1_000, node=2, server={"slots": 4, "fill": "partial", "chassis": 100})],
        offers=[offer("cloud-g1", "g1", 10.0)],
        serve=[serve_workload(rps=1.0)],
    )
    res, plan = solve(inputs, {"chat": [("g1", 1, 1.0)]})
    assert [(x.count, x.nodes) for x in plan.purchases] == [(2, 1)]
    assert res.objective == pytest.approx(2_100)
