"""Checks of what the team had before the plan (issue 20): ``fleet.owned`` entries as the plan
reports them, ``fleet.contracts`` inside the horizon, and ``offers.discounts`` applied exactly
once. The money of both (sales, committed cost, end value) is in :func:`check_money`."""

from __future__ import annotations

from planner.inputs.problem import contract_offer_id, month_index
from planner.physics.demand import HOURS_PER_MONTH

from .context import VerifyContext
from .findings import Checker, Findings, close


def check_existing(ctx: VerifyContext) -> Findings:
    """``existing`` rows are the problem's ``fleet.owned`` with the sales the plan makes and
    their end value recomputed; ``commitments`` are ``fleet.contracts`` with their months in
    the horizon and cost; every discounted offer costs its listed price x (1 - discount)."""
    chk = Checker("existing", ctx.months)
    _check_owned(chk, ctx)
    _check_commitments(chk, ctx)
    _check_discounts(chk, ctx)
    return chk.findings()


def _check_owned(chk: Checker, ctx: VerifyContext) -> None:
    owned, rows = ctx.problem.fleet.owned, ctx.plan.existing
    chk.check(
        len(rows) == len(owned),
        f"existing: {len(rows)} rows, but fleet.owned has {len(owned)} entries",
    )
    for i, (o, row) in enumerate(zip(owned, rows, strict=False)):
        what = f"existing[{i}] ({row.count} {row.gpu})"
        same = (row.gpu, row.count, row.bought, row.arrives, row.sell) == (
            o.gpu,
            o.count,
            o.bought,
            o.arrives,
            o.sell,
        )
        chk.check(same, f"{what}: differs from fleet.owned[{i}] of the problem")
        sold, value = ctx.existing_entries.get(i, (0, 0.0))
        chk.check(
            row.sold == sold and row.kept == o.count - sold,
            f"{what}: says {row.sold} sold, {row.kept} kept; the sales give {sold}, "
            f"{o.count - sold}",
        )
        chk.check(
            close(row.residual_usd, value, rel=1e-6, abs_=0.5),
            f"{what}: end value {row.residual_usd:,.2f} but recomputed {value:,.2f}",
        )


def _check_commitments(chk: Checker, ctx: VerifyContext) -> None:
    contracts, rows = ctx.problem.fleet.contracts, ctx.plan.commitments
    chk.check(
        len(rows) == len(contracts),
        f"commitments: {len(rows)} rows, but fleet.contracts has {len(contracts)} entries",
    )
    for i, (c, row) in enumerate(zip(contracts, rows, strict=False)):
        what = f"commitments[{i}] ({c.provider} {c.gpu})"
        inside = [m for m in ctx.months if month_index(c.start, m) >= 0 >= month_index(c.end, m)]
        usd = c.count * HOURS_PER_MONTH * c.usd_per_gpu_hour * len(inside)
        chk.check(
            row.offer == contract_offer_id(i, c)
            and (row.count, row.start, row.end) == (c.count, c.start, c.end)
            and close(row.usd_per_gpu_hour, c.usd_per_gpu_hour, abs_=1e-9),
            f"{what}: differs from fleet.contracts[{i}] of the problem",
        )
        chk.check(
            row.months == inside and close(row.usd, usd, rel=1e-6, abs_=0.5),
            f"{what}: {len(row.months)} months, {row.usd:,.2f}; the term inside the horizon "
            f"gives {len(inside)} months, {usd:,.2f}",
        )


def _check_discounts(chk: Checker, ctx: VerifyContext) -> None:
    """Each offer of a discounted provider costs its listed price x (1 - share): once, not
    twice (the rentals' rates are checked against the offer in :func:`check_rentals`)."""
    shares = ctx.problem.offers.discounts
    for oid, o in ctx.inputs.offers.items():
        if o.committed:
            continue
        d = shares.get(o.provider, 0.0)
        listed = o.list_usd_per_gpu_hour
        ok = (
            close(o.usd_per_gpu_hour, listed * (1 - d), abs_=1e-9) if listed is not None else d == 0
        )
        chk.check(
            ok,
            f"offer {oid}: ${o.usd_per_gpu_hour:g}/GPU-h is not its listed price "
            f"${listed or o.usd_per_gpu_hour:g} less the {o.provider} discount {d:.0%} "
            "applied once",
            group=("discount", o.provider),
        )
    for r in ctx.plan.rentals:
        d = shares.get(r.provider, 0.0)
        o = ctx.inputs.offers.get(r.offer)
        t = ctx.idx.get(r.month)
        if not d or o is None or o.committed or o.list_usd_per_gpu_hour is None or t is None:
            continue
        # The row's month moves the price along its GPU's path (x the path factor): the
        # discount is applied once to the listed price, then the path, never the reverse twice.
        factor = ctx.rental_price(r, o, t) / o.usd_per_gpu_hour if o.usd_per_gpu_hour else 1.0
        want = o.list_usd_per_gpu_hour * (1 - d) * factor
        chk.check(
            close(r.usd_per_gpu_hour, want, rel=1e-9, abs_=1e-9),
            f"rental {r.offer} {r.month}: rate {r.usd_per_gpu_hour:g} is not the listed "
            f"${o.list_usd_per_gpu_hour:g} less the {r.provider} discount {d:.0%} applied once"
            f" (x {factor:.6g} on the price path: ${want:.6g})",
            group=("discount_rate", r.offer),
        )
