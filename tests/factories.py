"""Builders for small, fully controlled problems (synthetic GPUs, offers and candidates)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from planner.inputs.catalog import GpuSpec, ModelArch, ResidualCurve, ServerSpec, with_server
from planner.inputs.problem import Inputs, Problem, resolve
from planner.optimize.candidates import Candidates, ServeCandidate, TrainCandidate
from planner.physics.demand import FLAT, problem_slices, workload_slices


def sourced(v: float) -> dict:
    return {"value": v, "source": "test", "as_of": "2026-01"}


def gpu(
    gid: str = "g1",
    price: float = 10_000.0,
    overhead: float = 0.0,
    node: int = 1,
    tdp: float = 0.0,
    idle: float = 0.0,
    host: float = 0.0,
    consumer: bool = False,
    server: dict | None = None,
    residual: list[tuple[int, float]] | None = None,
) -> GpuSpec:
    """A synthetic GPU; ``server`` = {slots, fill, chassis, host_w} buys it in a server type,
    ``residual`` = [(age months, share)] is its resale curve."""
    g = _gpu(gid, price, overhead, node, tdp, idle, host, consumer)
    if residual is not None:
        curve = {
            "points": [{"age_months": a, "share": v, "low": v, "high": v} for a, v in residual],
            "source": "test",
            "as_of": "2026-01",
        }
        g = g.model_copy(update={"residual": ResidualCurve.model_validate(curve)})
    if server is not None:
        spec = ServerSpec.model_validate(
            {
                "id": f"{gid}-server",
                "name": "test server",
                "slots": server["slots"],
                "fill": server.get("fill", "partial"),
                "chassis_usd": {**sourced(server["chassis"]), "low": 0, "high": 1e7},
                "host_w": sourced(server.get("host_w", 0.0)),
            }
        )
        g = with_server(g, spec)
    return g


def _gpu(
    gid: str,
    price: float,
    overhead: float,
    node: int,
    tdp: float,
    idle: float,
    host: float,
    consumer: bool,
) -> GpuSpec:
    return GpuSpec.model_validate(
        {
            "id": gid,
            "name": gid,
            "class": "consumer" if consumer else "datacenter",
            "form_factor": "sxm" if node > 1 else "pcie",
            "memory_gb": sourced(80),
            "memory_bandwidth_gbs": sourced(2000),
            "bf16_dense_tflops": sourced(300),
            "interconnect": {
                "nvlink_gbs": 0,
                "pcie_gen": 4,
                "p2p": True,
                "source": "t",
                "as_of": "2026",
            },
            "tdp_w": sourced(tdp),
            "idle_w": sourced(idle),
            "host_w_per_gpu": sourced(host),
            "node_size": sourced(node),
            "purchase_usd": {**sourced(price), "low": price, "high": price},
            "server_overhead_usd_per_gpu": {**sourced(overhead), "low": overhead, "high": overhead},
        }
    )


def offer(oid: str, gid: str, price: float, kind: str = "on_demand", **kw: Any) -> dict:
    return {
        "id": oid,
        "provider": oid.split("-")[0],
        "gpu": gid,
        "kind": kind,
        "usd_per_gpu_hour": price,
        "source": "test",
        "as_of": "2026-01",
        **kw,
    }


MODEL = ModelArch(
    id="m7b",
    name="m7b",
    params=7e9,
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=32,
    intermediate=11008,
    vocab=32000,
    max_context=4096,
    source="test",
    as_of="2026",
)


def problem(
    months: int = 3,
    capex: float = 1e9,
    total: float | None = None,
    power_price: float = 0.0,
    pue: float = 1.0,
    hosting: float = 0.0,
    power_cap: float | None = None,
    consumer_ok: bool = False,
    offers: list[dict] | None = None,
    serve: list[dict] | None = None,
    train: list[dict] | None = None,
    gpus: list[GpuSpec] | None = None,
    finance: dict | None = None,
    colo: float | None = None,
    fleet: dict | None = None,
    discounts: dict | None = None,
) -> Inputs:
    """A tiny problem. Money is nominal (no discounting, no resale) unless ``finance`` says
    otherwise: most hand-computed optima here check the model's mechanics, not finance."""
    gpus = gpus or [gpu()]
    data = {
        "name": "tiny",
        "horizon": {"start": "2027-01", "months": months},
        "budget": {"capex_usd": capex, **({"total_usd": total} if total else {})},
        "site": {
            "power_usd_per_kwh": power_price,
            "pue": pue,
            "hosting_usd_per_gpu_month": hosting,
            "power_cap_kw": power_cap,
            "consumer_gpus_allowed": consumer_ok,
            **({"colo_usd_per_kw_month": colo} if colo is not None else {}),
        },
        "finance": finance if finance is not None else {"discount_rate": 0, "residual": "none"},
        "offers": {"files": [], "extra": offers or [], "discounts": discounts or {}},
        "fleet": fleet or {},
        "workloads": {"serve": serve or [], "train": train or []},
    }
    p = Problem.model_validate(data)
    return resolve(p, gpu_catalog={g.id: g for g in gpus}, model_catalog={"m7b": MODEL})


def serve_workload(
    name: str = "chat",
    start: str = "2027-01",
    rps: float = 1.0,
    util: float = 1.0,
    max_load: float = 1.0,
    redundancy: int = 0,
) -> dict:
    """A serving workload; no headroom and no spare replica unless asked (tests of the
    mechanics state them; the problem file's defaults are max_load 0.8, redundancy 1)."""
    # daily_active_users x requests/day / 86400 = rps (mean); peak = mean / util
    return {
        "name": name,
        "model": "m7b",
        "start": start,
        "traffic": {
            "daily_active_users": rps * 86400,
            "requests_per_user_per_day": 1,
            "utilization": util,
        },
        "tokens": {"prompt": 100, "output": 100},
        "slo": {"p95_ttft_ms": 1000, "p95_tpot_ms": 100, "max_load": max_load},
        "redundancy": redundancy,
    }


def train_job(
    name: str = "job", start: str = "2027-01", deadline: str = "2027-01", **kw: Any
) -> dict:
    return {
        "name": name,
        "model": "m7b",
        "tokens": 1e9,
        "window": {"start": start, "deadline": deadline},
        **kw,
    }


def fake_capacity(rate: float) -> SimpleNamespace:
    return SimpleNamespace(
        feasible=True,
        reason=None,
        rate_rps=rate,
        p95_ttft_ms=100.0,
        p95_tpot_ms=50.0,
        batch=8,
        tokens_per_s=rate * 100,
        gpus=1,
        layout="tp",  # as ReplicaCapacity's default: a plain replica
    )


def fake_estimate(hours: float, k: int) -> SimpleNamespace:
    return SimpleNamespace(
        fits=True,
        reason=None,
        wall_hours=hours,
        gpu_hours=hours * k,
        mfu=0.4,
        memory_per_gpu_gb=40.0,
        layout=None,
        gpus=k,
        # A fake job is exactly as long as given: no band, no realized-throughput loss.
        steady_wall_hours=hours,
        wall_hours_p10=hours,
        wall_hours_p90=hours,
        gpu_hours_p10=hours * k,
        gpu_hours_p90=hours * k,
        wall_hours_at=lambda q: hours,
    )


def candidates(
    inputs: Inputs,
    serve: dict[str, list[tuple[str, int, float]]] | None = None,
    train: dict[str, list[tuple[str, int, float]]] | None = None,
) -> Candidates:
    """Candidates with chosen coefficients: serve {w: [(gpu, tp, rate)]}, train {j: [(gpu, k, hours)]}."""
    from planner.inputs.problem import month_index
    from planner.optimize.candidates import prune_offers, train_window
    from planner.physics.demand import HOURS_PER_MONTH, mean_request_rate, peak_request_rate

    p = inputs.problem
    c = Candidates(
        months=p.month_labels(),
        slices=problem_slices([w.traffic.utilization for w in p.workloads.serve]),
    )
    c.offers = prune_offers(inputs.offers)
    for w in p.workloads.serve:
        a = month_index(p.horizon.start, w.start)
        c.active[w.name] = list(range(a, p.horizon.months))
        sl = workload_slices(w.traffic.utilization, c.slices == [FLAT])
        c.serve_loads[w.name] = [s.load for s in sl]
        mean = mean_request_rate(w.traffic.daily_active_users, w.traffic.requests_per_user_per_day)
        for t in c.active[w.name]:
            peak = peak_request_rate(mean, w.traffic.utilization, w.traffic.growth_per_month, t - a)
            for s, x in enumerate(sl):
                c.demand[(w.name, t, s)] = peak * x.load
        c.serve[w.name] = [
            ServeCandidate(w.name, g, tp, rate, fake_capacity(rate))  # type: ignore[arg-type]
            for g, tp, rate in (serve or {}).get(w.name, [])
        ]
    for j in p.workloads.train:
        c.window[j.name] = train_window(j, p.horizon.start)
        c.window_hours[j.name] = len(c.window[j.name]) * HOURS_PER_MONTH
        c.train[j.name] = [
            TrainCandidate(
                j.name,
                g,
                k,
                h,
                fake_estimate(h, k),
                _same_speed(inputs, j, g, h),  # type: ignore[arg-type]
            )
            for g, k, h in (train or {}).get(j.name, [])
        ]
    return c


def _same_speed(inputs: Inputs, job: Any, gid: str, hours: float) -> tuple:
    """Fabric hours of a test candidate: the same hours on every fabric its offers have (tests
    of the mechanics; the physics of fabrics is tested on its own)."""
    from planner.optimize.candidates import fabric_gbs
    from planner.physics.calibration.values import default_calibration

    speeds = {fabric_gbs(o, job.ethernet, default_calibration()) for o in inputs.offers.values()}
    return tuple((g, hours) for g in sorted(x for x in speeds if x is not None))


def assistant_yaml(
    name: str = "one small assistant",
    months: int = 3,
    capex_usd: int = 50000,
    gpus: tuple[str, ...] = ("l4",),
    top: str = "",
) -> str:
    """A problem file's text: one small int4 Llama-3-8B service (2,000 users a day) over
    ``months`` from 2027-01, on ``gpus``, with the catalog's offers; ``top`` adds top-level
    lines (e.g. ``offers: {files: [offers.yaml]}``). Solved in ~0.05 s on one L4 type: for the
    tests where any plan will do."""
    return (
        f"name: {name}\n"
        f"horizon: {{start: 2027-01, months: {months}}}\n"
        f"budget: {{capex_usd: {capex_usd}}}\n"
        "site: {power_usd_per_kwh: 0.12}\n"
        f"gpus: [{', '.join(gpus)}]\n"
        f"{top}"
        "workloads:\n"
        "  serve:\n"
        "    - name: assistant\n"
        "      model: llama-3-8b\n"
        "      precision: int4\n"
        "      start: 2027-01\n"
        "      traffic: {daily_active_users: 2000, requests_per_user_per_day: 10, utilization: 0.45}\n"
        "      tokens: {prompt: 800, output: 300}\n"
        "      slo: {p95_ttft_ms: 800, p95_tpot_ms: 50}\n"
    )
