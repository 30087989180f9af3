"""The constraint families of the model: one registry of name prefixes, what each row says and
what its dual prices.

Every constraint the builder makes is named ``<prefix>_<domain ids>`` by :func:`row_name`,
which refuses a prefix this registry does not hold; :func:`family_of` reads the family back
from a name (for :mod:`planner.analysis.explain`'s duals and binding rows), and the table of
constraints in :mod:`planner.optimize.model`'s docstring lists exactly these prefixes
(``tests/test_families.py`` checks all three).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.optimize.model.core import nid


@dataclass(frozen=True)
class Family:
    """One family of constraints.

    ``dual`` says what the family's LP dual prices, for the families whose right-hand side is a
    real quantity (demand, capacity, hours, money, kW); None for rows that only link a binary
    to its continuous variables (with the integers fixed their duals price an artifact of the
    fixing). ``only_when`` names the condition under which the builder creates the family at
    all (None: every model with the matching workloads has it).
    """

    prefix: str
    meaning: str
    dual: str | None = None
    only_when: str | None = None


FAMILIES: tuple[Family, ...] = (
    Family("train_assign", "each training job runs as exactly one candidate"),
    Family(
        "train_progress",
        "owned and rented progress finish the chosen candidate's hours",
        dual="$ per extra hour of training the job would need",
    ),
    Family(
        "train_window",
        "a job's wall hours fit in its window",
        dual="$ per extra wall hour in the job's window",
    ),
    Family(
        "train_month",
        "one run at a time: a month holds at most its hours, owned and rented",
        only_when="a candidate that can rent",
    ),
    Family(
        "train_spot_share",
        "spot progress at most the job's spot share",
        dual="$ per extra hour allowed on spot",
        only_when="a job that allows spot and a spot offer",
    ),
    Family(
        "train_slot",
        "owned wall hours in a slice only in a month the job uses owned GPUs",
        only_when="an ownable GPU type",
    ),
    Family(
        "train_use",
        "a job uses owned GPUs in a month only as its chosen candidate",
        only_when="an ownable GPU type",
    ),
    Family(
        "train_gpus",
        "a month on owned GPUs needs the candidate's GPUs in the fleet",
        only_when="an ownable GPU type",
    ),
    Family(
        "train_offer_use",
        "hours on a restricted offer (cap, minimum term, block) only with its use binary",
        only_when="a restricted training offer",
    ),
    Family(
        "train_min_term",
        "a run on an offer with a minimum term lasts at least that term",
        dual="$ per hour less of an offer's minimum term",
        only_when="a training offer with a minimum term",
    ),
    Family(
        "train_location",
        "a run lives with one provider, or on owned GPUs, for all its hours",
        only_when="providers: single and more than one place to run",
    ),
    Family(
        "serve_demand",
        "replica capacity, less the spare, covers demand over max_load",
        dual="$ per extra req/s of demand in that month and slice",
    ),
    Family("serve_floor", "a live service keeps 1 + R replicas up"),
    Family(
        "serve_count",
        "whole replicas implied by the largest type in use (a valid cut)",
        only_when="redundancy and three or more replica rates, in a small model",
    ),
    Family(
        "serve_largest",
        "the largest replica rate in use, for the spare",
        only_when="redundancy and replica types of different rates",
    ),
    Family(
        "serve_largest_order",
        "the in-use flags are ordered by rate (incremental form)",
        only_when="redundancy and three or more replica rates, in a small model",
    ),
    Family(
        "serve_in_use",
        "a replica type serves only in periods its in-use flag is set",
        only_when="redundancy and replica types of different rates (or a request mix)",
    ),
    Family(
        "serve_bucket",
        "a request mix: capacity given to each bucket covers its share of demand",
        only_when="a request mix (requests:)",
    ),
    Family(
        "serve_share",
        "a request mix: a replica type's time shared among buckets, less its spares",
        only_when="a request mix (requests:)",
    ),
    Family(
        "capacity",
        "owned GPUs in use fit in the fleet",
        dual="$ per extra owned GPU in that month and slice (negative: it would save)",
        only_when="a GPU type that can be owned",
    ),
    Family(
        "fleet_owned",
        "the nodes owned in a month: the month before's and those bought in it",
        only_when="a GPU type that can be owned",
    ),
    Family(
        "server_slots",
        "cards owned fit in the servers owned",
        only_when="an ownable partial-fill (PCIe) GPU type",
    ),
    Family(
        "server_used",
        "a server is bought with its first card (no empty server)",
        only_when="an ownable partial-fill (PCIe) GPU type",
    ),
    Family(
        "reserved_cap",
        "replicas on a reserved offer fit in the instances reserved",
        dual="$ per extra reserved GPU in that month and slice",
        only_when="a reserved offer a service can rent",
    ),
    Family(
        "availability",
        "GPUs rented from a capped offer within its cap",
        dual="$ per extra GPU the offer could supply",
        only_when="an offer with max_gpus",
    ),
    Family(
        "provider_cap",
        "GPUs of one type rented from one provider within its cap, all its offers together",
        dual="$ per extra GPU the provider could deliver",
        only_when="offers.provider_caps",
    ),
    Family(
        "budget_capex",
        "purchase cash within the capex budget",
        dual="$ per extra $ of capex budget",
    ),
    Family(
        "budget_total",
        "nominal total within the total budget",
        dual="$ per extra $ of total budget",
        only_when="budget.total_usd",
    ),
    Family(
        "power_cap",
        "the fleet's kW at the meter within the site's cap",
        dual="$ per extra kW of power cap",
        only_when="site.power_cap_kw",
    ),
    Family(
        "sell_at_most",
        "an existing entry's nodes are sold at most once",
        only_when="fleet.owned with sell: allowed",
    ),
    Family(
        "licence",
        "no GeForce card bought unless the site allows them, no liquid-cooled unit without "
        "liquid cooling",
        only_when="a consumer GPU type without consumer_gpus_allowed, or a liquid-cooled "
        "server without site.liquid_cooling",
    ),
)

BY_PREFIX: dict[str, Family] = {f.prefix: f for f in FAMILIES}


def row_name(family: str, *parts: object) -> str:
    """The name of a constraint of ``family`` for the domain ids ``parts`` (:func:`nid`).

    Raises ValueError on a family the registry does not hold: a row the builder makes always
    belongs to a registered family, so explain's duals and the docstring's table see it.

    >>> row_name("capacity", "h100-sxm", "2027-01", "peak")
    'capacity_h100_sxm_2027_01_peak'
    """
    if family not in BY_PREFIX:
        raise ValueError(f"unregistered constraint family {family!r}: add it to FAMILIES")
    return nid(family, *parts)


def family_of(name: str) -> str | None:
    """The registered family of a constraint name: its longest registered prefix (so
    ``serve_largest_order_...`` is not read as ``serve_largest``); None for no family.
    (Names carry no separator between prefix and ids: a workload whose id starts with
    ``order`` would make its ``serve_largest`` rows read as ``serve_largest_order``.)

    >>> family_of("serve_largest_order_chat_a100_2027_01"), family_of("npv_cost")
    ('serve_largest_order', None)
    """
    parts = name.split("_")
    for k in range(len(parts), 0, -1):
        head = "_".join(parts[:k])
        if head in BY_PREFIX:
            return head
    return None


# Families of valid cuts: rows no whole plan can break, added only to tighten the LP. An LP
# that relaxes whole replicas (explain's duals) leaves them out: there they would bind in
# place of the constraint they tighten (serve_count for serve_demand).
CUT_FAMILIES = frozenset({"serve_count"})


def dual_families() -> dict[str, str]:
    """Prefix -> what its dual prices, for the families whose dual means something."""
    return {f.prefix: f.dual for f in FAMILIES if f.dual is not None}
