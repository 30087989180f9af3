"""Money over time: discounting, resale value, depreciation, colocation by the kW.

Pure functions: every coefficient the model, the verifier and the reports use. The finance
terms they take are resolved in :mod:`planner.inputs.finance` (defaults with sources in
``catalogs/finance.yaml``).

Conventions
-----------
* Month ``t`` is 0 for the horizon's first month. Cash of month ``t`` (a purchase at its start,
  its power, hosting and rentals) is discounted by ``(1 + r) ** (-t / 12)``: annual rate ``r``,
  monthly compounding, start-of-month timing (conservative for costs).
* The residual value of owned hardware is an inflow at the horizon end (``t = T``).
* Rented hours are paid in the month they are used (the model places a training run's rented
  hours in the months of its window).
* ``residual: none`` means the hardware is kept after the horizon: no sale, no resale value; its
  undepreciated book value stays an asset (``book_value_usd``), not a loss in the P&L.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.physics.demand import HOURS_PER_MONTH

if TYPE_CHECKING:
    from planner.inputs.catalog import GpuSpec


def discount_factor(annual_rate: float, month: float) -> float:
    """Present value of $1 paid at the start of month ``month`` (0 = horizon start).

    ``(1 + r) ** (-month / 12)``, r annual.

    >>> discount_factor(0.10, 12)
    0.9090909090909091
    >>> discount_factor(0.0, 35)
    1.0
    """
    return (1.0 + annual_rate) ** (-month / 12.0)


def annuity_factor(annual_rate: float, first: int, months: int) -> float:
    """Present value of $1 paid at the start of each of ``months`` months from ``first``.

    >>> annuity_factor(0.0, 3, 4)
    4.0
    >>> round(annuity_factor(0.12, 0, 12), 6)
    11.398659
    """
    return sum(discount_factor(annual_rate, t) for t in range(first, first + months))


def term_bills(months: int, upfront: float) -> list[float]:
    """Months' worth of a term's monthly price billed in each month of a ``months``-month term
    when ``upfront`` of the whole term is paid at signing: ``(1 - u) + u L`` in the first
    month, ``1 - u`` in the others (``L`` months' worth in all).

    >>> term_bills(3, 0.0), term_bills(3, 1.0), term_bills(4, 0.5)
    ([1.0, 1.0, 1.0], [3.0, 0.0, 0.0], [2.5, 0.5, 0.5, 0.5])
    """
    return [(1.0 - upfront) + (upfront * months if i == 0 else 0.0) for i in range(months)]


def term_pv_factor(annual_rate: float, first: int, months: int, upfront: float) -> float:
    """Present value of a term's monthly price paid as :func:`term_bills` (months' worth):
    ``sum_i bills_i d(first + i)``; with ``upfront`` 0, :func:`annuity_factor`.

    >>> round(term_pv_factor(0.0, 0, 12, 0.3), 9)
    12.0
    >>> term_pv_factor(0.1, 0, 12, 1.0) > term_pv_factor(0.1, 0, 12, 0.0)
    True
    """
    if upfront == 0.0:
        return annuity_factor(annual_rate, first, months)
    bills = term_bills(months, upfront)
    return sum(b * discount_factor(annual_rate, first + i) for i, b in enumerate(bills))


def residual_share(gpu: GpuSpec, age_months: float, mode: str, depreciation_years: float) -> float:
    """Share of a card's purchase price it is worth at ``age_months`` (0 to 1).

    ``curve``: the catalog's used-market curve (0 when the GPU has none); ``straight_line``:
    book value, ``1 - age / (12 years)`` floored at 0; ``none``: 0.

    >>> from types import SimpleNamespace as NS
    >>> residual_share(NS(residual=None), 24, "straight_line", 4)
    0.5
    >>> residual_share(NS(residual=None), 24, "curve", 4)
    0.0
    """
    if mode == "none" or age_months < 0:
        return 0.0
    if mode == "straight_line":
        return max(0.0, 1.0 - age_months / (12.0 * depreciation_years))
    if gpu.residual is None:
        return 0.0
    return gpu.residual.share_at(age_months)


def sale_share(gpu: GpuSpec, age_months: float) -> float:
    """Share of a card's catalog price a sale fetches at ``age_months``: the used-market
    resale curve whatever ``finance.residual`` says (that setting values what is kept at the
    horizon end; a sale happens on the market). 0 for a card without a curve.

    >>> from types import SimpleNamespace as NS
    >>> sale_share(NS(residual=None), 24)
    0.0
    """
    return residual_share(gpu, age_months, "curve", 1.0)


def chassis_residual_share(age_months: float, mode: str, depreciation_years: float) -> float:
    """Share of a server chassis's price it is worth at ``age_months``: book value under
    ``straight_line``; 0 otherwise (used servers without cards fetch little; no curve is
    published, so none is assumed).

    >>> chassis_residual_share(12, "straight_line", 4), chassis_residual_share(12, "curve", 4)
    (0.75, 0.0)
    """
    if mode != "straight_line":
        return 0.0
    return max(0.0, 1.0 - age_months / (12.0 * depreciation_years))


def depreciation_by_year(
    capex: float, first_month: int, depreciation_years: float, horizon_months: int
) -> list[float]:
    """Straight-line depreciation to zero of ``capex`` bought at the start of ``first_month``,
    per plan year (12-month blocks from the horizon start) within the horizon; what is left
    at the horizon end is the book value.

    A life that is not a whole number of months ends with a part month: the charges always
    add up to ``capex`` and agree with :func:`book_value`.

    >>> depreciation_by_year(1200.0, 6, 1, 24)
    [600.0, 600.0]
    >>> depreciation_by_year(3600.0, 0, 5, 36)
    [720.0, 720.0, 720.0]
    >>> sum(depreciation_by_year(1000.0, 0, 1.3, 24))
    1000.0
    """
    per_month = capex / (12.0 * depreciation_years)
    years = [0.0] * ((horizon_months + 11) // 12)
    left = capex
    for t in range(first_month, horizon_months):
        charge = min(per_month, left)
        if charge <= 0:
            break
        years[t // 12] += charge
        left -= charge
    return [round(v, 6) for v in years]


def book_value(capex: float, age_months: float, depreciation_years: float) -> float:
    """Undepreciated capex after ``age_months`` of straight-line depreciation.

    >>> book_value(1000.0, 30, 5)
    500.0
    """
    return capex * max(0.0, 1.0 - age_months / (12.0 * depreciation_years))


def it_kw(gpus: float, gpu_tdp_w: float, servers: float, host_w: float) -> float:
    """kW of IT load colocation charges for: GPU TDP per card plus host watts per server.

    >>> it_kw(8, 700, 1, 4600)
    10.2
    """
    return round((gpus * gpu_tdp_w + servers * host_w) / 1000.0, 12)


# ---------------------------------------------------------------- power, hosting, colocation
# One home for the owned fleet's running costs: the model's coefficients
# (planner.optimize.model.objective) and the plan's fleet months (planner.plan.fleet) call
# these; the verifier keeps its own copy on purpose (planner.verify.recompute), and the
# workbook writes the same formulas as live Excel formulas.


def meter_usd_per_wh(usd_per_kwh: float, pue: float) -> float:
    """Dollars per watt-hour drawn by IT equipment, at the meter: ``price x PUE / 1000``.

    >>> round(meter_usd_per_wh(0.12, 1.3), 12)
    0.000156
    """
    return usd_per_kwh * pue / 1000.0


def power_usd(
    e: float, idle_w: float, busy_gpu_hours: float = 0.0, busy_extra_w: float = 0.0
) -> float:
    """Power bill of one month, USD: ``e (H x idle_w + busy GPU-h x busy_extra_w)``, with
    ``e`` $/Wh at the meter (:func:`meter_usd_per_wh`), ``H`` hours per month, ``idle_w`` the
    watts drawn all month (hosts, idle cards) and ``busy_extra_w`` a card's TDP above idle.

    >>> round(power_usd(0.000156, idle_w=600, busy_gpu_hours=100, busy_extra_w=600), 6)
    77.688
    """
    return e * (HOURS_PER_MONTH * idle_w + busy_gpu_hours * busy_extra_w)


def hosting_usd(
    gpus: float, usd_per_gpu_month: float, it_kw_load: float, colo_usd_per_kw_month: float
) -> float:
    """Hosting of one month, USD: a per-GPU fee plus colocation by the kW of IT load
    (:func:`it_kw`, no PUE): ``gpus x fee + kW x colo``.

    >>> hosting_usd(8, 50.0, 10.2, 150.0)
    1930.0
    """
    return gpus * usd_per_gpu_month + it_kw_load * colo_usd_per_kw_month


def host_watts(gpu: GpuSpec, servers: float, existing_cards: float = 0.0) -> float:
    """Host watts of a fleet: ``host_w`` per server bought, and for cards owned before the plan
    their share of their server (``host_w / slots`` each)."""
    return servers * gpu.host_w + existing_cards * gpu.host_w / max(gpu.slots, 1)


def fleet_month_opex(
    gpu: GpuSpec,
    e: float,
    usd_per_gpu_month: float,
    colo_usd_per_kw_month: float,
    owned: int,
    servers: int,
    existing_cards: int,
    busy_gpu_hours: float,
) -> tuple[float, float, float]:
    """(idle power USD, hosting USD, IT kW) of one GPU type's owned fleet in one month:
    ``owned`` cards (``existing_cards`` of them from ``fleet.owned``) in ``servers`` servers.
    The busy power (``busy_gpu_hours x (tdp - idle) x e``) is the caller's: the model prices it
    per busy hour (``power_coefficients``)."""
    host = host_watts(gpu, servers, existing_cards)
    kw = (owned * gpu.tdp_w.value + host) / 1000.0
    idle = power_usd(e, host + owned * gpu.idle_w.value)
    return idle, hosting_usd(owned, usd_per_gpu_month, kw, colo_usd_per_kw_month), kw


def price_factor(change_per_year: float, month: float) -> float:
    """A price in month ``month`` of the horizon relative to month 0, on a path changing by
    ``change_per_year`` a year compounded monthly: ``(1 + c)^(month / 12)``.

    >>> round(price_factor(-0.2, 12), 12), price_factor(0.0, 7), round(price_factor(0.1, 6), 6)
    (0.8, 1.0, 1.048809)
    """
    if change_per_year == 0.0:
        return 1.0
    return (1.0 + change_per_year) ** (month / 12.0)
