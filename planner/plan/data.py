"""The Plan: pure data produced by the solver stage and only *read* by reports.

A Plan holds the decisions (purchases, rentals, reservations, allocations of workloads to
owned and rented capacity), the costs by month and kind, per-workload predictions vs targets,
and the assumptions (every catalog figure used, with its source). It round-trips through
JSON (``Plan.model_validate_json``) so ``planner report`` and ``planner verify`` need no solve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.base.errors import InputError
from planner.base.files import atomic_write_bytes, read_text

if TYPE_CHECKING:
    import pandas as pd

Status = Literal[
    "optimal", "feasible", "infeasible", "unbounded", "time_limit", "error", "not_solved"
]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Totals(_Data):
    capex_usd: float
    power_usd: float
    hosting_usd: float
    rental_usd: float  # on-demand + spot + reserved commitments
    total_usd: float
    reserved_usd: float = 0.0  # the reserved-commitment part of rental_usd
    committed_usd: float = 0.0  # contracts signed before the plan, inside the horizon
    sale_proceeds_usd: float = 0.0  # existing GPUs sold (total_usd is net of them)
    capex_budget_usd: float | None = None
    total_budget_usd: float | None = None
    # Present value at the finance discount rate of every month's cash (total_usd's parts),
    # less the residual value of owned hardware at the horizon end.
    npv_usd: float | None = None
    residual_value_usd: float = 0.0  # owned hardware's value at the horizon end (nominal)
    book_value_usd: float = 0.0  # undepreciated capex at the horizon end


class Purchase(_Data):
    gpu: str
    month: str
    count: int  # GPU cards bought (a full server comes with its slots filled)
    nodes: int  # servers bought (a partial server may get more cards in a later month)
    unit_usd: float  # per GPU: card + server/network share (total / count)
    gpu_usd: float  # card price per GPU
    overhead_usd: float  # server/network share per GPU of this purchase
    total_usd: float  # nodes x chassis_usd + count x gpu_usd
    server: str = ""  # server type id
    slots: int = 0  # GPU slots per server
    chassis_usd: float = 0.0  # one server without its cards


class Rental(_Data):
    provider: str
    offer: str
    gpu: str
    kind: Literal["on_demand", "spot", "reserved", "committed"]
    month: str
    workload: str  # for reserved rows: "(reserved)"; the commitment is paid used or not
    gpu_hours: float
    usd_per_gpu_hour: float
    usd: float


class Reservation(_Data):
    offer: str
    provider: str
    gpu: str
    start_month: str
    term_months: int
    gpus: int
    usd_per_gpu_hour: float
    hours: float  # hours paid over the term (inside the horizon)
    usd: float


class Slice(_Data):
    name: str
    hours_per_month: float
    load: float  # demand relative to the day's peak


class FleetMonth(_Data):
    gpu: str
    month: str
    bought: int
    owned: int
    reserved: int
    owned_busy_gpu_hours: float
    rented_gpu_hours: float
    owned_utilization: float  # busy / (owned x hours)
    power_kw: float  # owned fleet at full load, at the meter (PUE included)
    servers: int = 0  # servers owned
    it_kw: float = 0.0  # IT load colocation charges for: GPU TDP + host watts, no PUE
    existing: int = 0  # of owned: GPUs owned before the plan (fleet.owned), still in service
    sold: int = 0  # existing GPUs sold by this month (cumulative)


class YearCost(_Data):
    """One plan year (12 months from the horizon start; the last may be shorter): the cash
    view (as paid; the residual value comes back in the last year) and the P&L view
    (straight-line depreciation instead of capex; a sale at the horizon end books its gain)."""

    year: int  # 1 = the horizon's first 12 months
    first_month: str
    last_month: str
    capex_usd: float
    power_usd: float
    hosting_usd: float
    rental_usd: float
    residual_usd: float  # inflow: owned hardware sold at the horizon end
    cash_usd: float  # capex + power + hosting + rental + committed - sales - residual
    pv_usd: float  # cash_usd discounted monthly
    depreciation_usd: float
    gain_on_sale_usd: float  # residual - book value of what is sold at the horizon end
    pnl_cost_usd: float  # depreciation + power + hosting + rental + committed - gain on sale
    committed_usd: float = 0.0  # contracts signed before the plan (cash and P&L)
    sales_usd: float = 0.0  # existing GPUs sold (cash in; outside the plan's P&L)


class Depreciation(_Data):
    """Straight-line depreciation of one purchase, per plan year."""

    gpu: str
    month: str
    capex_usd: float
    years: float  # depreciation life
    by_year_usd: list[float]
    book_value_end_usd: float
    residual_value_usd: float


class MonthCost(_Data):
    month: str
    capex_usd: float
    power_usd: float
    hosting_usd: float
    rental_usd: float
    total_usd: float
    cumulative_usd: float
    committed_usd: float = 0.0  # contracts signed before the plan
    sales_usd: float = 0.0  # existing GPUs sold this month (cash in: total_usd is net)


class Sale(_Data):
    """Existing GPUs (fleet.owned) sold at the start of a month at their resale value."""

    gpu: str
    month: str
    count: int
    age_months: int
    unit_usd: float  # resale value per GPU: catalog price x resale share at that age
    usd: float


class ExistingGpus(_Data):
    """One entry of ``fleet.owned``: GPUs owned before the plan (no capex in it), what the
    plan sells of them and what is left at the horizon end, valued like purchases."""

    gpu: str
    count: int
    bought: str | None = None  # in service before the horizon, since
    arrives: str | None = None  # on order: in service from this month
    sell: str = "never"
    sold: int = 0
    kept: int = 0  # still owned at the horizon end
    age_end_months: int = 0  # age at the horizon end (from bought, or from arrival)
    residual_share: float = 0.0  # by finance.residual, as for purchases
    residual_usd: float = 0.0  # kept x catalog price x residual_share


class Commitment(_Data):
    """One contract of ``fleet.contracts`` (signed before the plan): paid used or not, for
    every month of its term inside the horizon."""

    provider: str
    gpu: str
    offer: str  # the committed offer the rentals of kind "committed" use
    count: int
    start: str
    end: str
    usd_per_gpu_hour: float
    months: list[str] = []  # months of the term inside the horizon
    usd: float = 0.0  # count x hours per month x price x len(months)


class ServeAllocation(_Data):
    workload: str
    month: str
    slice: str
    gpu: str
    gpus_per_replica: int
    rate_rps_per_replica: float
    source: str  # "owned" or an offer id
    replicas: float
    demand_rps: float  # the slice's demand for the workload (same on every row of the slice)
    # A request mix (workload.requests): req/s per replica for each bucket (0: cannot serve
    # it) and the req/s of capacity these replicas give each bucket (demand / max_load terms:
    # sum over buckets of capacity / rate <= replicas, less the spares of the type)
    bucket_rates_rps: dict[str, float] = {}
    bucket_capacity_rps: dict[str, float] = {}


class TrainAllocation(_Data):
    workload: str
    month: str
    slice: str | None  # owned runs are placed in slices; rentals per month
    gpu: str
    gpus: int
    source: str  # "owned" or an offer id
    wall_hours: float  # hours of the job's wall clock spent here
    progress_hours: float  # wall hours of progress (spot restarts make it smaller)


class WorkloadResult(_Data):
    name: str
    kind: Literal["train", "serve"]
    model: str
    gpu: list[str]
    gpus: int  # training: GPUs of the job; serving: peak GPUs in use
    config: dict[str, Any]
    cost_usd: float
    cost_share: float
    meets_target: bool
    predicted: dict[str, float]
    target: dict[str, float]
    slack: dict[str, float]
    tokens: float = 0.0  # served output+prompt tokens (serving) or trained tokens
    usd_per_1m_tokens: float | None = None


class Dropped(_Data):
    workload: str
    gpu: str
    config: str
    reason: str


class Assumption(_Data):
    group: str  # site | problem | gpu:<id> | offer:<id> | calibration
    key: str
    value: Any
    unit: str = ""
    source: str = ""
    as_of: str = ""


class Plan(_Data):
    planner_version: str
    problem_name: str
    problem_file: str
    problem_sha256: str
    status: Status
    objective_usd: float | None
    gap: float | None
    solve_seconds: float
    solver: str
    message: str = ""
    # present value the repair step added to make rented replicas whole, and its stated
    # bound (one replica-slice per fractional rental of the relaxed plan); 0 when exact
    repair_usd: float = 0.0
    repair_bound_usd: float = 0.0
    horizon_start: str
    months: list[str]
    hours_per_month: float
    slices: list[Slice]
    totals: Totals
    purchases: list[Purchase]
    sales: list[Sale] = []
    existing: list[ExistingGpus] = []  # fleet.owned, as planned
    commitments: list[Commitment] = []  # fleet.contracts, inside the horizon
    rentals: list[Rental]
    reservations: list[Reservation]
    fleet: list[FleetMonth]
    cash_flow: list[MonthCost]
    years: list[YearCost] = []
    depreciation: list[Depreciation] = []
    discount_rate: float = 0.0  # annual, the rate npv_usd uses
    residual_mode: str = "none"  # curve | none | straight_line
    workloads: list[WorkloadResult]
    serve_allocations: list[ServeAllocation]
    train_allocations: list[TrainAllocation]
    dropped: list[Dropped]
    assumptions: list[Assumption]
    binding: list[str] = []

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The plan's tables as pandas DataFrames, one per list of the plan, named as its
        fields: ``purchases``, ``rentals``, ``reservations``, ``fleet``, ``cash_flow``,
        ``years``, ``depreciation``, ``workloads``, ``serve_allocations``,
        ``train_allocations``, ``sales``, ``existing``, ``commitments``, ``dropped``,
        ``assumptions``. One row per entry, one column per field (an empty table keeps its
        columns); a nested mapping becomes one column per key (``predicted.ttft_ms``)."""
        return {name: _frame(self, name) for name in TABLES}

    @classmethod
    def from_json_file(cls, path: str | Path) -> Plan:
        """A plan read back from ``planner solve --json`` (see :func:`load_plan`)."""
        return load_plan(path)


# The plan's tables (:meth:`Plan.frames`), in the order a reader meets them.
TABLES = (
    "purchases",
    "rentals",
    "reservations",
    "fleet",
    "cash_flow",
    "years",
    "depreciation",
    "workloads",
    "serve_allocations",
    "train_allocations",
    "sales",
    "existing",
    "commitments",
    "dropped",
    "assumptions",
)


def _frame(plan: Plan, name: str) -> pd.DataFrame:
    """One table of ``plan`` as a DataFrame (pandas is imported here: the command line never
    needs it)."""
    import pandas as pd

    rows = [row.model_dump() for row in getattr(plan, name)]
    if rows:
        return pd.json_normalize(rows, max_level=0 if name == "assumptions" else 1)
    item = Plan.model_fields[name].annotation.__args__[0]  # list[Row] -> Row
    return pd.DataFrame(columns=list(item.model_fields))


def load_plan(src: str | Path) -> Plan:
    """Read a plan JSON; every problem with the file is an InputError with a short message."""
    src = Path(src)
    text = read_text(src, "plan JSON written by `planner solve --json`")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"{src}: not JSON ({exc}); expected a plan written by `planner solve --json`"
        ) from None
    except RecursionError:
        raise InputError(f"{src}: JSON nested too deeply to be a plan") from None
    if not isinstance(data, dict) or "totals" not in data or "planner_version" not in data:
        raise InputError(
            f"{src}: not a plan JSON written by `planner solve --json` (no totals/planner_version)"
        )
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        shown = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in errs[:5]
        )
        more = f" (and {len(errs) - 5} more)" if len(errs) > 5 else ""
        raise InputError(f"{src}: not a valid plan JSON: {shown}{more}") from None


def write_json(plan: Plan, path: str | Path) -> None:
    atomic_write_bytes(path, plan.to_json().encode("utf-8"))


def plan_summary_dict(plan: Plan) -> dict[str, Any]:
    """The JSON contract of ``planner solve --json`` (the whole plan)."""
    return json.loads(plan.to_json())
