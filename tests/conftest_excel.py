"""Hand-built, internally consistent Plans for the Excel report tests (no solver needed).

The costs are computed here with the solver's definitions, so the workbook's live formulas
must reproduce them exactly:

* capex per purchase = servers x chassis_usd + count x gpu_usd
* rental usd = gpu_hours x usd_per_gpu_hour (reserved: one row per month of the term)
* power per fleet row = pue x usd/kWh x (H x (servers x host_w + owned x idle_w)
  + busy x (tdp_w - idle_w)) / 1000
* hosting per fleet row = owned x hosting_usd_per_gpu_month + it_kw x colo_usd_per_kw_month,
  it_kw = (owned x tdp_w + servers x host_w) / 1000

``servers=False`` builds a plan as written before server types (no slots, chassis or host
watts per server; a server share per GPU): old plan JSONs must still give a valid workbook.
"""

from __future__ import annotations

from planner.plan.data import (
    Assumption,
    Dropped,
    FleetMonth,
    MonthCost,
    Plan,
    Purchase,
    Rental,
    Reservation,
    ServeAllocation,
    Slice,
    Totals,
    TrainAllocation,
    WorkloadResult,
)

H = 730.0
SITE = {"power_usd_per_kwh": 0.12, "pue": 1.3, "hosting_usd_per_gpu_month": 150.0}
COLO = 120.0  # USD per kW-month of IT load
# server type per GPU: slots, fill, chassis USD (= slots x the per-GPU share), host W per server
SERVERS = {
    "h100-sxm": {
        "server": "hgx-8",
        "slots": 8,
        "fill": "full",
        "chassis": 50_000.0,
        "host_w": 2000.0,
    },
    "l40s": {
        "server": "pcie-4",
        "slots": 4,
        "fill": "partial",
        "chassis": 8_000.0,
        "host_w": 480.0,
    },
}
CAPEX_BUDGET = 2_000_000.0
GPUS = {
    "h100-sxm": {
        "tdp_w": 700.0,
        "idle_w": 90.0,
        "host_w_per_gpu": 250.0,
        "purchase_usd": 25_000.0,
        "server_overhead_usd_per_gpu": 6_250.0,
        "node_size": 8.0,
    },
    "l40s": {
        "tdp_w": 350.0,
        "idle_w": 35.0,
        "host_w_per_gpu": 120.0,
        "purchase_usd": 7_500.0,
        "server_overhead_usd_per_gpu": 2_000.0,
        "node_size": 4.0,
    },
}
OFFERS = {
    "lambda-h100-od": ("lambda", "h100-sxm", "on_demand", 2.99),
    "runpod-l40s-spot": ("runpod", "l40s", "spot", 0.55),
    "coreweave-l40s-res": ("coreweave", "l40s", "reserved", 0.80),
}
SERVE_NAME = "chat-api"


def host_watts(gpu: str, owned: int, servers: int, with_servers: bool) -> float:
    """Host watts of the owned fleet: per server, or per GPU in a plan from before servers."""
    if with_servers:
        return servers * SERVERS[gpu]["host_w"]
    return owned * GPUS[gpu]["host_w_per_gpu"]


def power_usd(gpu: str, owned: int, busy: float, host_w: float) -> float:
    g = GPUS[gpu]
    energy_wh = H * (host_w + owned * g["idle_w"]) + busy * (g["tdp_w"] - g["idle_w"])
    return SITE["pue"] * SITE["power_usd_per_kwh"] * energy_wh / 1000


def it_kw(gpu: str, owned: int, host_w: float) -> float:
    return (owned * GPUS[gpu]["tdp_w"] + host_w) / 1000


def _purchase(gpu: str, month: str, count: int, with_servers: bool) -> Purchase:
    g, sv = GPUS[gpu], SERVERS[gpu]
    servers = -(-count // sv["slots"])
    if not with_servers:  # as written before server types: a server share per GPU
        unit = g["purchase_usd"] + g["server_overhead_usd_per_gpu"]
        return Purchase(
            gpu=gpu,
            month=month,
            count=count,
            nodes=int(count // g["node_size"]),
            unit_usd=unit,
            gpu_usd=g["purchase_usd"],
            overhead_usd=g["server_overhead_usd_per_gpu"],
            total_usd=count * unit,
        )
    total = servers * sv["chassis"] + count * g["purchase_usd"]
    return Purchase(
        gpu=gpu,
        month=month,
        count=count,
        nodes=servers,
        unit_usd=total / count,
        gpu_usd=g["purchase_usd"],
        overhead_usd=servers * sv["chassis"] / count,
        total_usd=total,
        server=sv["server"],
        slots=sv["slots"],
        chassis_usd=sv["chassis"],
    )


def _server_assumptions() -> list[Assumption]:
    out = [Assumption(group="site", key="colo_usd_per_kw_month", value=COLO, unit="USD/kW-month")]
    for gpu, sv in SERVERS.items():
        for key, value, unit in (
            ("server_slots", sv["slots"], "GPUs"),
            ("server_fill", sv["fill"], ""),
            ("chassis_usd", sv["chassis"], "USD/server"),
            ("host_w", sv["host_w"], "W/server"),
        ):
            out.append(
                Assumption(group=f"gpu:{gpu}", key=key, value=value, unit=unit, source="test")
            )
    return out


def make_plan(
    serve_name: str = SERVE_NAME,
    empty: bool = False,
    provider: str = "lambda",
    servers: bool = True,
) -> Plan:
    """2 GPU types, 4 months, 2 slices, 2 purchases (an 8-GPU server full, a 4-slot one with
    3 cards), on-demand/spot/reserved rentals."""
    months = ["2027-01", "2027-02", "2027-03", "2027-04"]
    purchases: list[Purchase] = []
    rentals: list[Rental] = []
    reservations: list[Reservation] = []
    fleet: list[FleetMonth] = []
    if not empty:
        l40s = 3 if servers else 4  # a partly filled server; old plans bought whole nodes
        for gpu, month, count in (("h100-sxm", "2027-01", 8), ("l40s", "2027-02", l40s)):
            purchases.append(_purchase(gpu, month, count, servers))

        def rent(offer: str, month: str, workload: str, hours: float) -> Rental:
            prov, gpu, kind, rate = OFFERS[offer]
            if offer == "lambda-h100-od":
                prov = provider
            return Rental(
                provider=prov,
                offer=offer,
                gpu=gpu,
                kind=kind,
                month=month,
                workload=workload,
                gpu_hours=hours,
                usd_per_gpu_hour=rate,
                usd=hours * rate,
            )

        rentals += [
            rent("lambda-h100-od", "2027-02", "pretrain-7b", 1_200.0),
            rent("lambda-h100-od", "2027-03", "pretrain-7b", 640.5),
            rent("runpod-l40s-spot", "2027-03", serve_name, 300.0),
        ]
        for m in months[1:]:
            rentals.append(rent("coreweave-l40s-res", m, "(reserved)", 2 * H))
        reservations.append(
            Reservation(
                offer="coreweave-l40s-res",
                provider="coreweave",
                gpu="l40s",
                start_month="2027-02",
                term_months=3,
                gpus=2,
                usd_per_gpu_hour=0.80,
                hours=3 * 2 * H,
                usd=3 * 2 * H * 0.80,
            )
        )
        owned = {"h100-sxm": [8, 8, 8, 8], "l40s": [0, l40s, l40s, l40s]}
        busy = {
            "h100-sxm": [5_000.0, 5_840.0, 4_321.25, 1_000.0],
            "l40s": [0.0, 1_500.0, 2_000.0, 1_750.5],
        }
        rented = {"h100-sxm": [0.0, 1_200.0, 640.5, 0.0], "l40s": [0.0, 1_460.0, 1_760.0, 1_460.0]}
        for gpu in GPUS:
            for t, m in enumerate(months):
                o = owned[gpu][t]
                bought = sum(p.count for p in purchases if p.gpu == gpu and p.month == m)
                n = sum(p.nodes for p in purchases if p.gpu == gpu and p.month <= m)
                host_w = host_watts(gpu, o, n, servers)
                fleet.append(
                    FleetMonth(
                        gpu=gpu,
                        month=m,
                        bought=bought,
                        owned=o,
                        reserved=2 if gpu == "l40s" and t >= 1 else 0,
                        owned_busy_gpu_hours=busy[gpu][t],
                        rented_gpu_hours=rented[gpu][t],
                        owned_utilization=busy[gpu][t] / (o * H) if o else 0.0,
                        power_kw=it_kw(gpu, o, host_w) * SITE["pue"],
                        servers=n if servers else 0,
                        it_kw=it_kw(gpu, o, host_w),
                    )
                )

    cash: list[MonthCost] = []
    cum = 0.0
    for m in months:
        capex = sum(p.total_usd for p in purchases if p.month == m)
        here = [f for f in fleet if f.month == m]
        power = sum(
            power_usd(
                f.gpu,
                f.owned,
                f.owned_busy_gpu_hours,
                host_watts(f.gpu, f.owned, f.servers, servers),
            )
            for f in here
        )
        colo = COLO if servers else 0.0
        hosting = sum(f.owned * SITE["hosting_usd_per_gpu_month"] + f.it_kw * colo for f in here)
        rental = sum(r.usd for r in rentals if r.month == m)
        total = capex + power + hosting + rental
        cum += total
        cash.append(
            MonthCost(
                month=m,
                capex_usd=capex,
                power_usd=power,
                hosting_usd=hosting,
                rental_usd=rental,
                total_usd=total,
                cumulative_usd=cum,
            )
        )
    totals = Totals(
        capex_usd=sum(c.capex_usd for c in cash),
        power_usd=sum(c.power_usd for c in cash),
        hosting_usd=sum(c.hosting_usd for c in cash),
        rental_usd=sum(c.rental_usd for c in cash),
        total_usd=cum,
        reserved_usd=sum(r.usd for r in rentals if r.kind == "reserved"),
        capex_budget_usd=CAPEX_BUDGET,
    )
    assumptions = [
        Assumption(group="site", key=k, value=v, unit=u, source="problem file", as_of="problem")
        for (k, v), u in zip(SITE.items(), ["USD/kWh", "", "USD/GPU-month"], strict=True)
    ]
    if servers:
        assumptions += _server_assumptions()
    assumptions.append(
        Assumption(
            group="budget",
            key="capex_usd",
            value=CAPEX_BUDGET,
            unit="USD",
            source="problem file",
            as_of="problem",
        )
    )
    for gpu, g in GPUS.items():
        for k, v in g.items():
            unit = {"node_size": "GPUs"}.get(k, "USD/GPU" if "usd" in k else "W")
            assumptions.append(
                Assumption(
                    group=f"gpu:{gpu}",
                    key=k,
                    value=v,
                    unit=unit,
                    source=f"catalogs/gpus.yaml: vendor datasheet for {gpu}",
                    as_of="2026-09",
                )
            )
    for oid, (prov, _gpu, _kind, rate) in OFFERS.items():
        assumptions.append(
            Assumption(
                group=f"offer:{oid}",
                key="usd_per_gpu_hour",
                value=rate,
                unit="USD/GPU-h",
                source=f"https://{prov}.example/pricing",
                as_of="2026-10",
            )
        )
    assumptions += [
        Assumption(
            group="calibration",
            key="mfu",
            value=0.42,
            unit="",
            source="benchmarks/train.csv",
            as_of="2026-08",
        ),
        Assumption(group="solver", key="time_limit_s", value=60, unit="s", source="problem file"),
        Assumption(
            group="problem", key="offers.files", value=["offers.yaml"], source="problem file"
        ),
        Assumption(group="site", key="consumer_gpus_allowed", value=False, source="problem file"),
    ]
    train_cost = totals.total_usd * 0.6
    workloads = [
        WorkloadResult(
            name="pretrain-7b",
            kind="train",
            model="llama-3-8b",
            gpu=["h100-sxm"],
            gpus=8,
            config={"tp": 1, "pp": 1, "dp": 8, "micro_batch": 4},
            cost_usd=train_cost,
            cost_share=0.6,
            meets_target=True,
            predicted={"finish_month_index": 2.0, "mfu": 0.41},
            target={"finish_month_index": 3.0},
            slack={"finish_month_index": 1.0},
            tokens=2.0e11,
        ),
        WorkloadResult(
            name=serve_name,
            kind="serve",
            model="llama-3-8b",
            gpu=["l40s", "h100-sxm"],
            gpus=6,
            config={"tp": 1, "batch": 32, "precision": "fp8"},
            cost_usd=totals.total_usd * 0.4,
            cost_share=0.4,
            meets_target=True,
            predicted={"p95_ttft_ms": 310.0, "p95_tpot_ms": 42.5},
            target={"p95_ttft_ms": 500.0, "p95_tpot_ms": 50.0},
            slack={"p95_ttft_ms": 190.0, "p95_tpot_ms": 7.5},
            tokens=3.1e10,
            usd_per_1m_tokens=totals.total_usd * 0.4 / 3.1e10 * 1e6,
        ),
    ]
    return Plan(
        planner_version="0.1.0",
        problem_name="2M budget: chat + pretraining",
        problem_file="problems/2m_budget.yaml",
        problem_sha256="ab" * 32,
        status="optimal",
        objective_usd=totals.total_usd,
        gap=0.0004,
        solve_seconds=3.2,
        solver="HiGHS",
        horizon_start="2027-01",
        months=months,
        hours_per_month=H,
        slices=[
            Slice(name="peak", hours_per_month=292.0, load=1.0),
            Slice(name="offpeak", hours_per_month=438.0, load=0.5),
        ],
        totals=totals,
        purchases=purchases,
        rentals=rentals,
        reservations=reservations,
        fleet=fleet,
        cash_flow=cash,
        workloads=workloads,
        serve_allocations=[
            ServeAllocation(
                workload=serve_name,
                month="2027-03",
                slice="peak",
                gpu="l40s",
                gpus_per_replica=1,
                rate_rps_per_replica=3.5,
                source="owned",
                replicas=4.0,
                demand_rps=12.0,
            )
        ],
        train_allocations=[
            TrainAllocation(
                workload="pretrain-7b",
                month="2027-02",
                slice="peak",
                gpu="h100-sxm",
                gpus=8,
                source="owned",
                wall_hours=292.0,
                progress_hours=292.0,
            )
        ],
        dropped=[
            Dropped(
                workload="pretrain-7b", gpu="l40s", config="tp=1", reason="does not fit in 48 GB"
            )
        ],
        assumptions=assumptions,
    )


def server_plan(residual: str = "curve") -> Plan:
    """A solved tiny plan (about a second) with the finance of issue 14: a partly filled PCIe
    server (3 cards, then single cards added in later months), two full 8-GPU HGX servers,
    rentals, resale curves, colocation by the kW, 10 %/year discounting, 3-year depreciation,
    14 months (two plan years, the second short)."""
    from planner.optimize.model import build_model
    from planner.optimize.solve import solve_model
    from planner.plan.extract import extract_plan
    from tests.factories import candidates, gpu, offer, problem, serve_workload

    pcie = gpu(
        "pc",
        price=10_000.0,
        tdp=300.0,
        idle=50.0,
        server={"slots": 8, "fill": "partial", "chassis": 20_000.0, "host_w": 1000.0},
        residual=[(12, 0.7), (36, 0.4)],
    )
    hgx = gpu(
        "hx",
        price=25_000.0,
        node=8,
        tdp=700.0,
        idle=90.0,
        server={"slots": 8, "fill": "full", "chassis": 60_000.0, "host_w": 4600.0},
        residual=[(12, 0.6), (24, 0.45)],
    )
    chat = serve_workload("chat", rps=3.0)
    chat["traffic"]["growth_per_month"] = 0.1  # more cards month by month
    inputs = problem(
        months=14,
        gpus=[pcie, hgx],
        power_price=0.12,
        pue=1.3,
        hosting=10.0,
        colo=195.0,
        offers=[offer("rent-pc", "pc", 3.0), offer("rent-hx", "hx", 6.0)],
        serve=[chat, serve_workload("batch", rps=2.0)],
        finance={"discount_rate": 0.10, "residual": residual, "depreciation_years": 3},
    )
    cands = candidates(inputs, serve={"chat": [("pc", 1, 1.0)], "batch": [("hx", 8, 1.0)]})
    m = build_model(inputs, cands)
    return extract_plan(m, solve_model(m, time_limit=60, gap=1e-9))
