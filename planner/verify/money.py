"""Check families of what the plan pays: the rentals billed and the money.

:func:`check_rentals` judges each rental row against its offer (kind, GPU, provider, price) and
the GPU-hours billed against the hours the allocations use; :func:`check_money` the totals,
present and residual value, depreciation, the per-year views and every cash-flow month against
the recomputed ones. Each reads the :class:`~planner.verify.context.VerifyContext` only and
never calls another family.
"""

from __future__ import annotations

from collections import defaultdict

from planner.inputs.problem import month_index
from planner.physics import economics
from planner.physics.demand import HOURS_PER_MONTH

from .context import VerifyContext
from .findings import Checker, Findings, close

H = HOURS_PER_MONTH

# ---------------------------------------------------------------- rentals


def check_rentals(ctx: VerifyContext) -> Findings:
    """Rentals: each names a trusted offer and a month of the horizon; kind, GPU, provider and
    price are the offer's and ``usd = gpu_hours x price``. GPU-hours billed per (offer,
    workload, month) = the hours the allocations use (whole instances for training); reserved
    offers are billed every month of a reservation's term, in full.
    """
    chk = Checker("rentals", ctx.months)
    for row in ctx.rentals:
        r, o = row.r, row.offer
        what = f"rental {r.offer} {r.month} for {r.workload}"
        if not chk.check(o is not None, f"{what}: unknown or untrusted offer {r.offer!r}"):
            continue
        assert o is not None  # for the type checker: just checked
        t = chk.month(r.month, what)
        if t is None:
            continue
        if not chk.check(
            row.hours_ok, f"{what}: gpu_hours {r.gpu_hours} is not a finite number >= 0"
        ):
            continue
        kind = "committed" if o.committed else o.kind
        chk.check(
            r.kind == kind and r.gpu == o.gpu and r.provider == o.provider,
            f"{what}: kind/GPU/provider ({r.kind}, {r.gpu}, {r.provider}) differ from the offer's "
            f"({kind}, {o.gpu}, {o.provider})",
        )
        # the offer's price is the problem's (a negotiated discount applied once, on loading)
        # on its GPU's path in the rental's month; a contract's hours cost nothing at the
        # margin: it is paid in committed_usd
        price = ctx.rental_price(r, o, t)
        chk.check(
            close(r.usd_per_gpu_hour, price, abs_=1e-9),
            f"{what}: rate {r.usd_per_gpu_hour} != offer price {price}",
        )
        chk.check(
            close(row.usd, r.usd),
            f"{what}: {r.usd:,.2f} != {r.gpu_hours:,.2f} h x {price}",
        )
        if o.committed:
            term = (o.available_from or "", o.available_until or "")
            chk.check(
                month_index(term[0], r.month) >= 0 >= month_index(term[1], r.month),
                f"{what}: contract capacity used outside its term {term[0]}..{term[1]}",
            )
    _check_billing(chk, ctx)
    return chk.findings()


def _check_billing(chk: Checker, ctx: VerifyContext) -> None:
    for key in sorted(set(ctx.expect) | set(ctx.seen)):
        oid, w, t = key
        want, billed = ctx.expect.get(key, 0.0), ctx.seen.get(key, 0.0)
        chk.check(
            close(want, billed, rel=1e-6, abs_=1e-3),
            f"rental {oid} for {w} in {ctx.months[t]}: {billed:,.2f} GPU-h billed, allocations use {want:,.2f}",
        )
    for key2 in sorted(set(ctx.reserved_expect) | set(ctx.reserved_seen)):
        oid, t = key2
        want, billed = ctx.reserved_expect.get(key2, 0.0), ctx.reserved_seen.get(key2, 0.0)
        chk.check(
            close(want, billed, rel=1e-6, abs_=1e-3),
            f"reserved {oid} in {ctx.months[t]}: {billed:,.2f} GPU-h billed, "
            f"the reservations commit {want:,.2f}",
        )


# ---------------------------------------------------------------- money


def check_money(ctx: VerifyContext) -> Findings:
    """Money: ``totals`` (capex, power, hosting, rental, reserved, total) equal the recomputed
    ones (power: idle + host all month, busy extra per busy GPU-hour, PUE, price); the budgets
    echoed in totals are the problem's; the solver objective is the recomputed total; every
    ``cash_flow`` month, and the cumulative column, agree.
    """
    chk = Checker("money", ctx.months)
    tt, budget = ctx.plan.totals, ctx.problem.budget
    for name, mine, theirs in (
        ("capex", ctx.capex, tt.capex_usd),
        ("power", ctx.power, tt.power_usd),
        ("hosting", ctx.hosting, tt.hosting_usd),
        ("rental", ctx.rental, tt.rental_usd),
        ("total", ctx.total, tt.total_usd),
        ("reserved", ctx.reserved_usd, tt.reserved_usd),
        ("committed", sum(ctx.committed_by_month.values()), tt.committed_usd),
        ("sale_proceeds", sum(ctx.sales_by_month.values()), tt.sale_proceeds_usd),
    ):
        chk.check(
            close(mine, theirs, rel=1e-6, abs_=0.5),
            f"totals.{name}_usd = {theirs:,.2f} but recomputed {mine:,.2f}",
        )
    for text in ctx.sale_errors:
        chk.check(False, text)
    chk.check(
        tt.capex_budget_usd is None or close(tt.capex_budget_usd, budget.capex_usd),
        f"totals.capex_budget_usd {tt.capex_budget_usd} != the problem's budget.capex_usd {budget.capex_usd}",
    )
    chk.check(
        tt.total_budget_usd == budget.total_usd
        or (
            tt.total_budget_usd is not None
            and budget.total_usd is not None
            and close(tt.total_budget_usd, budget.total_usd)
        ),
        f"totals.total_budget_usd {tt.total_budget_usd} != the problem's budget.total_usd {budget.total_usd}",
    )
    if ctx.plan.objective_usd is not None:
        chk.check(
            close(ctx.npv, ctx.plan.objective_usd, rel=1e-5, abs_=1.0),
            f"solver objective {ctx.plan.objective_usd:,.2f} != recomputed present value "
            f"{ctx.npv:,.2f}",
        )
    _check_finance(chk, ctx)
    _check_cash_flow(chk, ctx)
    return chk.findings()


def _check_finance(chk: Checker, ctx: VerifyContext) -> None:
    """Present value, residual value, each purchase's depreciation and the per-year cash
    and P&L views, recomputed from the purchases and the recomputed monthly cash."""
    fin, tt = ctx.inputs.finance, ctx.plan.totals
    chk.check(
        close(ctx.plan.discount_rate, fin.discount_rate, abs_=1e-12)
        and ctx.plan.residual_mode == fin.residual,
        f"plan uses discount rate {ctx.plan.discount_rate} / residual {ctx.plan.residual_mode}; "
        f"the problem's are {fin.discount_rate} / {fin.residual}",
    )
    for name, mine, theirs in (
        ("npv", ctx.npv, tt.npv_usd),
        ("residual_value", ctx.residual + ctx.existing_residual, tt.residual_value_usd),
    ):
        chk.check(
            theirs is not None and close(mine, theirs, rel=1e-6, abs_=0.5),
            f"totals.{name}_usd = {theirs} but recomputed {mine:,.2f}",
        )
    book = 0.0
    deps: dict[int, float] = defaultdict(float)
    for i, pu in enumerate(ctx.plan.purchases):
        t0 = ctx.idx.get(pu.month)
        d = ctx.plan.depreciation[i] if i < len(ctx.plan.depreciation) else None
        if t0 is None or not chk.check(
            d is not None and d.gpu == pu.gpu and d.month == pu.month,
            f"depreciation: no schedule for purchase {pu.gpu} {pu.month}",
        ):
            continue
        assert d is not None  # for the type checker: just checked
        years = economics.depreciation_by_year(pu.total_usd, t0, fin.depreciation_years, ctx.T)
        end = economics.book_value(pu.total_usd, ctx.T - t0, fin.depreciation_years)
        chk.check(
            len(d.by_year_usd) == len(years)
            and all(close(a, b, abs_=0.01) for a, b in zip(d.by_year_usd, years, strict=True))
            and close(d.book_value_end_usd, end, abs_=0.01),
            f"depreciation {pu.gpu} {pu.month}: {d.by_year_usd} (book {d.book_value_end_usd:,.2f})"
            f" != straight line over {fin.depreciation_years:g} years {years} (book {end:,.2f})",
        )
        book += end
        for y, v in enumerate(years):
            deps[y] += v
    _check_years(chk, ctx, deps, book)


def _check_years(chk: Checker, ctx: VerifyContext, deps: dict[int, float], book: float) -> None:
    fin, T = ctx.inputs.finance, ctx.T
    n = (T + 11) // 12
    if not chk.check(
        [y.year for y in ctx.plan.years] == list(range(1, n + 1)),
        f"years: need plan years 1..{n}, got {[y.year for y in ctx.plan.years]}",
    ):
        return
    for y, row in enumerate(ctx.plan.years):
        months = range(12 * y, min(T, 12 * y + 12))
        last = months[-1] == T - 1
        cash = {
            "capex": sum(ctx.capex_by_month.get(t, 0.0) for t in months),
            "rental": sum(ctx.rental_by_month.get(t, 0.0) for t in months),
            "power+hosting": sum(ctx.opex_by_month.get(t, 0.0) for t in months),
            "committed": sum(ctx.committed_by_month.get(t, 0.0) for t in months),
            "sales": -sum(ctx.sales_by_month.get(t, 0.0) for t in months),
        }
        residual = ctx.residual + ctx.existing_residual if last else 0.0
        # the plan's P&L: purchases' gains; existing assets' disposals stay outside it
        gain = ctx.residual - book if last and fin.residual != "none" else 0.0
        opex = row.power_usd + row.hosting_usd + row.committed_usd
        for name, mine, theirs in (
            ("capex", cash["capex"], row.capex_usd),
            ("rental", cash["rental"], row.rental_usd),
            ("power+hosting", cash["power+hosting"], row.power_usd + row.hosting_usd),
            ("committed", cash["committed"], row.committed_usd),
            ("sales", -cash["sales"], row.sales_usd),
            ("residual", residual, row.residual_usd),
            ("cash", sum(cash.values()) - residual, row.cash_usd),
            ("depreciation", deps.get(y, 0.0), row.depreciation_usd),
            ("gain on sale", gain, row.gain_on_sale_usd),
            ("P&L cost", deps.get(y, 0.0) + opex + row.rental_usd - gain, row.pnl_cost_usd),
        ):
            chk.check(
                close(mine, theirs, rel=1e-6, abs_=0.5),
                f"year {row.year}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                group=("years", name),
            )


def _check_cash_flow(chk: Checker, ctx: VerifyContext) -> None:
    if not chk.check(
        [mc.month for mc in ctx.plan.cash_flow] == ctx.months,
        "cash_flow does not list every month of the horizon once, in order",
    ):
        return
    running = 0.0
    for t, mc in enumerate(ctx.plan.cash_flow):
        capex = ctx.capex_by_month.get(t, 0.0)
        rental = ctx.rental_by_month.get(t, 0.0)
        opex = ctx.opex_by_month.get(t, 0.0)
        for name, mine, theirs in (
            ("capex", capex, mc.capex_usd),
            ("rental", rental, mc.rental_usd),
            ("power+hosting", opex, mc.power_usd + mc.hosting_usd),
        ):
            chk.check(
                close(mine, theirs, rel=1e-6, abs_=0.5),
                f"cash flow {mc.month}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                group=("cash", name),
            )
        for name, mine, theirs in (
            ("committed", ctx.committed_by_month.get(t, 0.0), mc.committed_usd),
            ("sales", ctx.sales_by_month.get(t, 0.0), mc.sales_usd),
        ):
            chk.check(
                close(mine, theirs, rel=1e-6, abs_=0.5),
                f"cash flow {mc.month}: {name} {theirs:,.2f} but recomputed {mine:,.2f}",
                group=("cash", name),
            )
        mine = ctx.month_total(t)
        running += mine
        chk.check(
            close(mine, mc.total_usd, rel=1e-6, abs_=0.5),
            f"cash flow {mc.month}: total {mc.total_usd:,.2f} but recomputed {mine:,.2f}",
            group=("cash", "total"),
        )
        chk.check(
            close(running, mc.cumulative_usd, rel=1e-6, abs_=0.5),
            f"cash flow {mc.month}: cumulative {mc.cumulative_usd:,.2f} but recomputed {running:,.2f}",
            group=("cash", "cumulative"),
        )
