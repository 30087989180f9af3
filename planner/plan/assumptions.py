"""Stage 5, the Assumptions section: every figure the plan rests on, with its source.

The problem file and the solve, finance terms (and whether each came from the problem file or
catalogs/finance.yaml), measured or modeled capacities of the configurations used, each GPU
type's catalog figures and server, the price and fabric of every offer the plan rents, the
load slices and serving loads, and how the existing fleet, contracts and discounts are
treated.
"""

from __future__ import annotations

from planner import __version__
from planner.inputs.catalog import GpuSpec, Offer, Sourced, SourcedRange
from planner.optimize.solve import SolveResult
from planner.physics.demand import HOURS_PER_MONTH
from planner.physics.vendor import Kind, describe, serve_efficiency
from planner.plan.data import Assumption, Rental
from planner.plan.readout import ReadContext, var_value

GPU_FIELDS = (
    ("purchase_usd", "USD"),
    ("server_overhead_usd_per_gpu", "USD/GPU"),
    ("memory_gb", "GB"),
    ("memory_bandwidth_gbs", "GB/s"),
    ("bf16_dense_tflops", "TFLOPS"),
    ("fp8_dense_tflops", "TFLOPS"),
    ("tdp_w", "W"),
    ("idle_w", "W"),
    ("host_w_per_gpu", "W"),
    ("node_size", "GPUs"),
)


def gpu_assumptions(gpu: GpuSpec) -> list[Assumption]:
    """Assumptions section for one GPU type: every catalog figure used, with unit and source."""
    out = []
    for key, unit in GPU_FIELDS:
        f = getattr(gpu, key)
        if f is None:
            continue
        src = f.source
        if isinstance(f, SourcedRange):
            src = f"{f.source} (range {f.low:,.0f}-{f.high:,.0f})"
        if isinstance(f, Sourced) and f.note:
            src += f"; {f.note}"
        out.append(
            Assumption(
                group=f"gpu:{gpu.id}", key=key, value=f.value, unit=unit, source=src, as_of=f.as_of
            )
        )
    out.append(Assumption(group=f"gpu:{gpu.id}", key="class", value=gpu.klass, source=gpu.name))
    return out + vendor_assumptions(gpu) + _server_assumptions(gpu)


# The vendor's software efficiency (catalogs/vendors.yaml, planner/physics/vendor.py): what it
# multiplies in the physics, as the unit of its row.
VENDOR_FIELDS: tuple[tuple[Kind, str], ...] = (
    ("train", "x MFU of the NVIDIA-calibrated physics"),
    ("serve", "x replica tokens/s of the NVIDIA-calibrated physics"),
)


def vendor_assumptions(gpu: GpuSpec) -> list[Assumption]:
    """The GPU's vendor software efficiency on training and serving, relative to NVIDIA's
    (1.0 for NVIDIA, the reference), with its range and source."""
    out = []
    for kind, unit in VENDOR_FIELDS:
        d = describe(gpu, kind)
        out.append(
            Assumption(
                group=f"gpu:{gpu.id}",
                key=f"{kind}_efficiency",
                value=d["value"],
                unit=unit,
                source=f"{d['vendor']} software relative to NVIDIA's: {d['source']} "
                f"(range {d['low']:g}-{d['high']:g})",
                as_of=str(d["as_of"]),
            )
        )
    return out


def _server_assumptions(gpu: GpuSpec) -> list[Assumption]:
    """The server the card is bought in (slots, fill, chassis price, host watts) and its
    resale curve (share of the card's price by age)."""
    group, spec = f"gpu:{gpu.id}", gpu.server_spec
    out = [
        Assumption(
            group=group,
            key="server_slots",
            value=gpu.slots,
            unit="GPUs",
            source=spec.name if spec else "no server type: one node per purchase",
        ),
        Assumption(
            group=group,
            key="server_fill",
            value=spec.fill if spec else "full",
            source="full: sold with every slot filled; partial: cards added one by one",
        ),
        Assumption(
            group=group,
            key="chassis_usd",
            value=gpu.chassis_usd,
            unit="USD/server",
            source=f"server_overhead_usd_per_gpu x {gpu.slots} slots",
        ),
        Assumption(
            group=group,
            key="host_w",
            value=gpu.host_w,
            unit="W/server",
            source=f"host_w_per_gpu x {gpu.slots} slots",
        ),
    ]
    if gpu.residual is not None:
        for p in gpu.residual.points:
            out.append(
                Assumption(
                    group=group,
                    key=f"residual_share_{p.age_months}m",
                    value=p.share,
                    unit="share of card price",
                    source=f"{p.source or gpu.residual.source} (range {p.low:g}-{p.high:g})",
                    as_of=gpu.residual.as_of,
                )
            )
    return out


# The market figures of a GPU type (issue 27), in this order, with their units.
MARKET_FIELDS = (
    ("rent_change_per_year", "per year"),
    ("buy_change_per_year", "per year"),
    ("lead_months", "months"),
)


def market_assumptions(ctx: ReadContext, gpu: str) -> list[Assumption]:
    """A GPU type's price paths and lead time: the rental and purchase change per year (a
    price in month m is price x (1 + change)^(m / 12)) and months from order to service, each
    with where it came from and the range its sources span."""
    market = ctx.inputs.market
    value = {
        "rent_change_per_year": market.rent(gpu),
        "buy_change_per_year": market.buy(gpu),
        "lead_months": market.lead_months(gpu),
    }
    out = []
    for key, unit in MARKET_FIELDS:
        src = market.sources.get((gpu, key), "no path")
        if (gpu, key) in market.ranges:
            low, high = market.ranges[(gpu, key)]
            src += f" (range {low:g} to {high:g})"
        out.append(Assumption(group=f"gpu:{gpu}", key=key, value=value[key], unit=unit, source=src))
    return out


def _finance_assumptions(ctx: ReadContext) -> list[Assumption]:
    """Discount rate, resale mode, depreciation life and colocation price, each with where
    it came from (the problem file or catalogs/finance.yaml)."""
    f = ctx.inputs.finance
    why = dict(f.sources)

    def src(key: str) -> str:
        return why.get(key, "problem file")

    return [
        Assumption(
            group="finance",
            key="discount_rate",
            value=f.discount_rate,
            unit="per year",
            source=src("finance.discount_rate"),
        ),
        Assumption(
            group="finance",
            key="residual",
            value=f.residual,
            source="curve: catalog resale curve of the cards; straight_line: book value; none",
        ),
        Assumption(
            group="finance",
            key="capex_at",
            value=f.capex_at,
            source="order: a purchase is paid when ordered (lead_months before service); "
            "delivery: when it enters service",
        ),
        Assumption(
            group="finance",
            key="depreciation_years",
            value=f.depreciation_years,
            unit="years",
            source=src("finance.depreciation_years"),
        ),
        Assumption(
            group="site",
            key="colo_usd_per_kw_month",
            value=f.colo_usd_per_kw_month,
            unit="USD/kW-month",
            source=src("site.colo_usd_per_kw_month"),
        ),
    ]


def _problem_assumptions(ctx: ReadContext, result: SolveResult) -> list[Assumption]:
    """The problem file's identity, horizon, budget and site figures, and the solve."""
    inputs, p, site = ctx.inputs, ctx.problem, ctx.problem.site
    return [
        Assumption(group="problem", key="name", value=p.name),
        Assumption(group="problem", key="file", value=inputs.source_path),
        Assumption(group="problem", key="sha256", value=inputs.source_sha256),
        Assumption(
            group="problem", key="horizon", value=f"{p.horizon.start} + {p.horizon.months} months"
        ),
        *(
            Assumption(
                group=group, key=key, value=getattr(obj, key), unit=unit, source="problem file"
            )
            for group, obj, key, unit in (
                ("budget", p.budget, "capex_usd", "USD"),
                ("budget", p.budget, "total_usd", "USD"),
                ("site", site, "power_usd_per_kwh", "USD/kWh"),
                ("site", site, "pue", ""),
                ("site", site, "hosting_usd_per_gpu_month", "USD/GPU-month"),
                ("site", site, "power_cap_kw", "kW"),
                ("site", site, "consumer_gpus_allowed", ""),
                ("site", site, "liquid_cooling", ""),
            )
        ),
        Assumption(
            group="site",
            key="hours_per_month",
            value=HOURS_PER_MONTH,
            unit="h",
            source="8760 h / 12",
        ),
        Assumption(group="solver", key="status", value=result.status),
        Assumption(group="solver", key="solver", value=result.solver),
        Assumption(group="solver", key="gap", value=result.gap),
        Assumption(group="solver", key="solve_seconds", value=round(result.seconds, 3), unit="s"),
        Assumption(group="solver", key="planner_version", value=__version__),
    ]


HEADROOM_SOURCE = (
    "capacity planned at this share of the SLO rate at peak (default 0.8: "
    "catalogs/NOTES.md, 'Serving headroom')"
)


def _demand_assumptions(ctx: ReadContext) -> list[Assumption]:
    """Hours per month of each load slice, and each serving workload's load per slice."""
    out = [
        Assumption(
            group="slices",
            key=sl.name,
            value=sl.hours_per_month,
            unit="h/month",
            source="daily load curve: 2 h peak, 6 h, 8 h, 8 h (planner.physics.demand)",
        )
        for sl in ctx.slices
    ]
    for w in ctx.problem.workloads.serve:
        out.append(
            Assumption(
                group=f"serve:{w.name}",
                key="max_load",
                value=w.slo.max_load,
                unit="of SLO capacity at peak",
                source=HEADROOM_SOURCE,
            )
        )
        out.append(
            Assumption(
                group=f"serve:{w.name}",
                key="redundancy",
                value=w.redundancy,
                unit="spare replicas",
                source=(
                    "the SLO holds at peak with this many replicas of each GPU type in use down "
                    "(a request mix routes buckets by type)"
                    if w.requests is not None
                    else "the SLO holds at peak with this many of the fastest replicas down"
                )
                + " (N+1 practice; catalogs/NOTES.md, 'Serving headroom')",
            )
        )
        for sl, load in zip(ctx.slices, ctx.cands.serve_loads[w.name], strict=True):
            out.append(
                Assumption(
                    group=f"load:{w.name}",
                    key=sl.name,
                    value=round(load, 6),
                    unit="x peak",
                    source=f"utilization {w.traffic.utilization} (mean/peak)",
                )
            )
    return out


def _train_measured(ctx: ReadContext) -> list[Assumption]:
    """Training configurations chosen whose throughput a profile measured."""
    out = []
    for (job, key), y in ctx.m.y.items():
        c = ctx.m.train_cand(job, key)
        if var_value(y) > 0.5 and c.measured is not None:
            m = c.measured
            out.append(
                Assumption(
                    group=f"train:{job}",
                    key=f"{key}/tokens_per_s_per_gpu",
                    value=m.rate,
                    unit="tokens/s per GPU",
                    source=f"measured ({m.note}): {m.source} [{m.file}]",
                    as_of=m.as_of,
                )
            )
    return out


def _capacity_assumptions(ctx: ReadContext) -> list[Assumption]:
    """Req/s per replica of each replica type the plan uses for a request mix or from a
    measured profile, per bucket: measured (the profile's source) or modeled (the physics)."""
    used = {
        (w, key)
        for cells in (ctx.m.n, ctx.m.q)
        for (w, key, *_), x in cells.items()
        if var_value(x) > 0.5
    }
    out = _train_measured(ctx)
    out += _speculative_assumptions(ctx, used)
    out += _session_assumptions(ctx)
    for w, key in sorted(used):
        c = ctx.m.serve_cand(w, key)
        for b in c.buckets:
            m = b.measured
            source = (
                f"measured ({m.note}): {m.source} [{m.file}]"
                if m
                else f"modeled: planner physics at the bucket's planned shape "
                f"(batch {b.capacity.batch}, p95 TTFT {b.capacity.p95_ttft_ms:.0f} ms, "
                f"TPOT {b.capacity.p95_tpot_ms:.1f} ms)" + _vendor_note(ctx, c.gpu)
            )
            out.append(
                Assumption(
                    group=f"serve:{w}",
                    key=f"{key}/{b.bucket}" if c.mixed else key,
                    value=b.rate,
                    unit="req/s per replica",
                    source=source if b.rate > 0 else f"cannot serve: {b.capacity.reason}",
                    as_of=m.as_of if m else "",
                )
            )
    return out


def _speculative_assumptions(ctx: ReadContext, used: set[tuple[str, str]]) -> list[Assumption]:
    """The acceptance assumed by each service the plan decodes speculatively (an MTP
    deployment): the workload's ``speculative``, the model's catalog figure or the fitted
    curve, with its source."""
    from planner.physics.calibration.values import default_calibration
    from planner.physics.capacity import workload_calibration
    from planner.physics.serving import acceptance_assumed

    specs = {w.name: w for w in ctx.problem.workloads.serve}
    out = []
    for w in sorted({w for w, key in used if ctx.m.serve_cand(w, key).layout.get("mtp")}):
        spec = specs[w]
        calib = workload_calibration(spec, default_calibration())
        what, src = acceptance_assumed(ctx.inputs.models[spec.model], calib)
        out.append(
            Assumption(group=f"serve:{w}", key="speculative_acceptance", value=what, source=src)
        )
    return out


def _session_assumptions(ctx: ReadContext) -> list[Assumption]:
    """Each multi-turn service's prefix reuse: the share of prompt tokens served from cache,
    what the last (planned) turn prefills, the idle sessions whose KV is held and where."""
    from planner.physics.serving.prefix import prefix_reuse, session_hit_rate, session_prompts

    out = []
    for w in ctx.problem.workloads.serve:
        reuse = prefix_reuse(w)
        if reuse is None:
            continue
        first, last = session_prompts(w)
        where = (
            f"an offload tier of {reuse.offload_gb_per_gpu:g} GB per GPU at "
            f"{reuse.offload_gbs_per_gpu:g} GB/s (reloaded before the first token)"
            if reuse.offload_gb_per_gpu > 0
            else "HBM, beside the active batch"
        )
        value = (
            f"{session_hit_rate(w):.1%} of prompt tokens from cache; planned at the last turn, "
            f"{last:,} prompt tokens of which {reuse.cached_share:.1%} cached; "
            f"{reuse.idle_per_active:.2g} idle sessions per active one, their KV in {where}"
        )
        out.append(
            Assumption(group=f"serve:{w.name}", key="sessions", value=value, source=reuse.source)
        )
    return out


def _vendor_note(ctx: ReadContext, gpu_id: str) -> str:
    """``, x 0.81 amd serve_efficiency`` for a modeled rate on a non-reference vendor's card."""
    gpu = ctx.inputs.gpus.get(gpu_id)
    if gpu is None or serve_efficiency(gpu) == 1.0:
        return ""
    return f", x {serve_efficiency(gpu):g} {gpu.vendor} serve_efficiency (gpu:{gpu.id})"


def read_assumptions(
    ctx: ReadContext, result: SolveResult, rentals: list[Rental]
) -> list[Assumption]:
    """Assumptions section: problem and solver, every GPU figure, the price of each offer the
    plan rents (USD/GPU-h), the load slices and serving loads."""
    out = _problem_assumptions(ctx, result) + _finance_assumptions(ctx)
    out += _capacity_assumptions(ctx)
    for gpu in ctx.inputs.gpus.values():
        out.extend(gpu_assumptions(gpu))
        out.extend(market_assumptions(ctx, gpu.id))
    used_offers = {r.offer for r in rentals}
    for oid, o in ctx.cands.offers.items():
        if oid in used_offers or o.committed:
            out.append(
                Assumption(
                    group=f"offer:{oid}",
                    # a contract's price is paid in committed_usd, not per GPU-hour used
                    key="committed_usd_per_gpu_hour" if o.committed else "usd_per_gpu_hour",
                    value=o.usd_per_gpu_hour,
                    unit="USD/GPU-h",
                    source=f"{o.provider} {o.kind} {o.instance_type or ''}: {o.source}",
                    as_of=o.as_of,
                )
            )
            out.extend(
                Assumption(
                    group=f"offer:{oid}",
                    key=f"usd_per_gpu_hour_from_{st.month}",
                    value=st.usd_per_gpu_hour,
                    unit="USD/GPU-h",
                    source=st.source,
                )
                for st in ([] if o.committed else o.price_steps)
            )
            out.append(
                Assumption(
                    group=f"offer:{oid}",
                    key="terms",
                    value=offer_terms(o),
                    source=f"the offer: {o.source}",
                    as_of=o.as_of,
                )
            )
            out.append(
                Assumption(
                    group=f"offer:{oid}",
                    key="fabric",
                    value=f"{o.fabric} {o.fabric_gbps_per_gpu:g} Gb/s per GPU"
                    if o.fabric and o.fabric_gbps_per_gpu
                    else (o.fabric or "not stated"),
                    source="the offer, else catalogs/fabrics.yaml by instance type",
                )
            )
    out.extend(_demand_assumptions(ctx))
    out.extend(_fleet_assumptions(ctx))
    return out


def offer_terms(o: Offer) -> str:
    """How an offer is bought and paid, and whether its price is published: what page 1 and
    the Rentals sheet say of a commitment, a block or an hourly rental.

    >>> from planner.inputs.catalog import Offer
    >>> mk = lambda **k: Offer(**{"id": "x", "provider": "p", "gpu": "b200", "usd_per_gpu_hour": 4.0,
    ...     "source": "https://p.example/pricing", "as_of": "2026-09", **k})
    >>> offer_terms(mk(kind="reserved", term_months=36))
    '36-month commitment, billed monthly; published price of 2026-09'
    >>> offer_terms(mk(kind="reserved", term_months=12, upfront_share=1.0, source="estimate: x"))
    '12-month commitment, paid up front; estimated price of 2026-09'
    >>> offer_terms(mk(kind="on_demand", cluster=True, min_gpus=8, min_term_days=1,
    ...     fabric="efa", fabric_gbps_per_gpu=400))
    'capacity block of 8+ GPUs for 1+ days, paid when booked; published price of 2026-09'
    """
    price = f"{'estimated' if o.estimated else 'published'} price of {o.as_of}"
    if o.committed:
        return f"a contract signed before the plan, paid whether used or not; price of {o.as_of}"
    if o.kind == "reserved":
        pay = (
            "paid up front"
            if o.upfront_share >= 1
            else f"{o.upfront_share:.0%} up front, the rest monthly"
            if o.upfront_share > 0
            else "billed monthly"
        )
        return f"{o.term_months}-month commitment, {pay}; {price}"
    if o.cluster:
        return (
            f"capacity block of {o.min_gpus or o.gpus_per_instance}+ GPUs for "
            f"{o.min_term_days or 1:g}+ days, paid when booked; {price}"
        )
    kind = "spot, may be taken back" if o.kind == "spot" else "on demand, billed by the hour"
    return f"{kind}; {price}"


def _fleet_assumptions(ctx: ReadContext) -> list[Assumption]:
    """How the plan treats what the team already has (only when it has something):
    existing GPUs, their sale price and end value, contracts and discounts."""
    p = ctx.problem
    out = [
        Assumption(
            group=f"discount:{provider}",
            key="share_off_list_price",
            value=share,
            unit="of every listed price",
            source="offers.discounts (problem file): applied once, when offers are loaded",
        )
        for provider, share in sorted(p.offers.discounts.items())
    ]
    if p.fleet.owned:
        out += [
            Assumption(
                group="fleet",
                key="existing_gpus",
                value="no capex; power, hosting and colocation as bought cards",
                source="fleet.owned: in service before the horizon (bought) or from arrives; they "
                "came in their catalog server type (no chassis capex), each card drawing "
                "host_w / slots of its server's host watts",
            ),
            Assumption(
                group="fleet",
                key="sale_price",
                value="catalog purchase_usd x resale share at the card's age",
                source="fleet.owned with sell: allowed: sold in whole nodes at the start of a "
                "month; age from bought (or arrival) to the sale month; the catalog's used-market "
                "curve (catalogs/gpus.yaml residual), whatever finance.residual says",
            ),
            Assumption(
                group="fleet",
                key="end_value",
                value=f"finance.residual = {ctx.inputs.finance.residual}",
                source="existing GPUs still owned at the horizon end are valued like purchases: "
                "curve (used-market share at their age x catalog price), straight_line (book "
                "value from the catalog price) or none; present value only, not cash",
            ),
        ]
    if p.fleet.contracts:
        out.append(
            Assumption(
                group="fleet",
                key="contracts",
                value="count x 730 h x price for each month of the term inside the horizon",
                source="fleet.contracts: signed before the plan, paid used or not "
                "(totals.committed_usd); their capacity costs nothing at the margin",
            )
        )
    return out
