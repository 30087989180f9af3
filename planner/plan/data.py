"""The Plan: pure data produced by the solver stage and only *read* by reports.

A Plan holds the decisions (purchases, rentals, reservations, allocations of workloads to
owned and rented capacity), the costs by month and kind, per-workload predictions vs targets,
and the assumptions (every catalog figure used, with its source). It round-trips through
JSON (``Plan.model_validate_json``) so ``planner report`` and ``planner verify`` need no solve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.base.errors import InputError
from planner.base.files import atomic_write_bytes, read_text
from planner.inputs.months import parse_month
from planner.plan.plan_json import MAX_TEXT, first_bad_value, parse_int, path_text, show

if TYPE_CHECKING:
    import pandas as pd

Status = Literal[
    "optimal", "feasible", "infeasible", "unbounded", "time_limit", "error", "not_solved"
]


# ------------------------------------------------------------------ a plan's figures
# What each figure of a plan handed back may hold (``planner report`` and ``planner verify``
# read plans from files: :func:`load_plan` refuses anything else, naming the JSON key path).
# Ceilings: money beyond 1e15 USD (1,000 x the largest budget a problem may state) and
# counts beyond 10 million GPUs (10 x the largest serving peak) are not plans.
MAX_USD = 1e15
MAX_COUNT = 10_000_000
MAX_HOURS = 1e13  # GPU-hours: 10 million GPUs x 120 months x 744 h is below 1e12
MAX_RATE = 1e15  # requests/s, tokens and other physical figures
MAX_MONTHS = 120  # horizon.months of a problem
MAX_NAME = 100  # workload and model names
MAX_PROBLEM_NAME = 500
MAX_SCENARIOS = 50  # scenarios of a two-stage plan (the problem file's limit)


def _num(lo: float, hi: float, what: str) -> Any:
    return Field(ge=lo, le=hi, allow_inf_nan=False, description=what)


Usd = Annotated[float, _num(0, MAX_USD, "an amount of USD: a finite number from 0 to 1e15")]
SignedUsd = Annotated[
    float, _num(-MAX_USD, MAX_USD, "a net amount of USD: a finite number from -1e15 to 1e15")
]
Count = Annotated[int, _num(0, MAX_COUNT, "a count is a whole number from 0 to 10,000,000")]
Hours = Annotated[float, _num(0, MAX_HOURS, "hours: a finite number from 0 to 1e13")]
MonthHours = Annotated[float, _num(0, 744, "hours in a month: from 0 to 744 (31 days)")]
Rate = Annotated[float, _num(0, MAX_RATE, "a finite number from 0 to 1e15")]
Share = Annotated[float, _num(0, 1, "a share: a finite number from 0 to 1")]
Signed = Annotated[float, _num(-MAX_RATE, MAX_RATE, "a finite number from -1e15 to 1e15")]
UsdRate = Annotated[float, _num(0, 1000, "USD per GPU-hour: from 0 to 1,000")]
Months = Annotated[int, _num(0, 1200, "a number of months: a whole number from 0 to 1,200")]
MonthLabel = Annotated[
    str, Field(pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])$", description="a month: YYYY-MM")
]
Name = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME, description="a name of 1 to 100 characters")
]
Id = Annotated[
    str, Field(min_length=1, max_length=MAX_TEXT, description="an id of 1 to 10,000 characters")
]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Totals(_Data):
    capex_usd: Usd
    power_usd: Usd
    hosting_usd: Usd
    rental_usd: Usd  # on-demand + spot + reserved commitments
    total_usd: SignedUsd  # net of sales of existing GPUs: may be negative
    reserved_usd: Usd = 0.0  # the reserved-commitment part of rental_usd
    committed_usd: Usd = 0.0  # contracts signed before the plan, inside the horizon
    sale_proceeds_usd: Usd = 0.0  # existing GPUs sold (total_usd is net of them)
    capex_budget_usd: Usd | None = None
    total_budget_usd: Usd | None = None
    # Present value at the finance discount rate of every month's cash (total_usd's parts),
    # less the residual value of owned hardware at the horizon end.
    npv_usd: SignedUsd | None = None
    residual_value_usd: Usd = 0.0  # owned hardware's value at the horizon end (nominal)
    book_value_usd: Usd = 0.0  # undepreciated capex at the horizon end
    # Demand scenarios (``scenarios:``; None without): the scenarios' present values under
    # the plan, their probability-weighted mean and largest; the value of the stochastic
    # solution (the base forecast's purchases re-planned in every scenario, less this plan,
    # in the risk measure) and of perfect information (this plan less every scenario's own
    # best plan, in the risk measure); CVaR_alpha of the costs under ``risk: cvar``.
    expected_usd: SignedUsd | None = None
    worst_usd: SignedUsd | None = None
    vss_usd: SignedUsd | None = None
    evpi_usd: SignedUsd | None = None
    cvar_usd: SignedUsd | None = None
    risk_usd: SignedUsd | None = None  # the two-stage objective: the measure of the costs


class Purchase(_Data):
    """Servers and cards of one GPU type that enter service in ``month``: ordered ``lead``
    months before (``ordered``, at that month's price on the GPU's path), their capex paid in
    ``capex_month`` (the order month, or the delivery with ``finance.capex_at: delivery``).
    Plans written before price paths have no ``ordered``/``capex_month``: both are ``month``."""

    gpu: Id
    month: MonthLabel  # in service from this month (capacity, power, hosting, residual age)
    count: Count  # GPU cards bought (a full server comes with its slots filled)
    nodes: Count  # servers bought (a partial server may get more cards in a later month)
    unit_usd: Usd  # per GPU: card + server/network share (total / count)
    gpu_usd: Usd  # card price per GPU
    overhead_usd: Usd  # server/network share per GPU of this purchase
    total_usd: Usd  # nodes x chassis_usd + count x gpu_usd
    server: str = ""  # server type id
    slots: Count = 0  # GPU slots per server
    chassis_usd: Usd = 0.0  # one server without its cards
    ordered: MonthLabel | Literal[""] = ""  # order month ("" = month: no lead time)
    in_service: MonthLabel | Literal[""] = ""  # = month, named for readers of the JSON
    capex_month: MonthLabel | Literal[""] = ""  # month the capex is paid ("" = month)

    @property
    def order_month(self) -> str:
        return self.ordered or self.month

    @property
    def paid_month(self) -> str:
        return self.capex_month or self.month


class Rental(_Data):
    provider: str
    offer: str
    gpu: Id
    kind: Literal["on_demand", "spot", "reserved", "committed"]
    month: MonthLabel
    workload: Name  # for reserved rows: "(reserved)"; the commitment is paid used or not
    gpu_hours: Hours
    usd_per_gpu_hour: UsdRate
    usd: Usd


class Reservation(_Data):
    offer: str
    provider: str
    gpu: Id
    start_month: MonthLabel
    term_months: Months
    gpus: Count
    usd_per_gpu_hour: UsdRate
    hours: Hours  # hours paid over the term (inside the horizon)
    usd: Usd


class Slice(_Data):
    name: Name
    hours_per_month: MonthHours
    load: Share  # demand relative to the day's peak


class FleetMonth(_Data):
    gpu: Id
    month: MonthLabel
    bought: Count
    owned: Count
    reserved: Count
    owned_busy_gpu_hours: Hours
    rented_gpu_hours: Hours
    # busy / (owned x hours): at most 1, with room for the solver's rounding
    owned_utilization: Annotated[float, _num(0, 1.001, "a utilization: from 0 to 1")]
    power_kw: Rate  # owned fleet at full load, at the meter (PUE included)
    servers: Count = 0  # servers owned
    it_kw: Rate = 0.0  # IT load colocation charges for: GPU TDP + host watts, no PUE
    existing: Count = 0  # of owned: GPUs owned before the plan (fleet.owned), still in service
    sold: Count = 0  # existing GPUs sold by this month (cumulative)


class YearCost(_Data):
    """One plan year (12 months from the horizon start; the last may be shorter): the cash
    view (as paid; the residual value comes back in the last year) and the P&L view
    (straight-line depreciation instead of capex; a sale at the horizon end books its gain)."""

    year: Annotated[int, _num(1, 10, "a plan year: from 1 to 10")]  # 1 = the first 12 months
    first_month: MonthLabel
    last_month: MonthLabel
    capex_usd: Usd
    power_usd: Usd
    hosting_usd: Usd
    rental_usd: Usd
    residual_usd: Usd  # inflow: owned hardware sold at the horizon end
    cash_usd: SignedUsd  # capex + power + hosting + rental + committed - sales - residual
    pv_usd: SignedUsd  # cash_usd discounted monthly
    depreciation_usd: Usd
    gain_on_sale_usd: SignedUsd  # residual - book value of what is sold at the horizon end
    pnl_cost_usd: SignedUsd  # depreciation + power + hosting + rental + committed - gain
    committed_usd: Usd = 0.0  # contracts signed before the plan (cash and P&L)
    sales_usd: Usd = 0.0  # existing GPUs sold (cash in; outside the plan's P&L)


class Depreciation(_Data):
    """Straight-line depreciation of one purchase, per plan year."""

    gpu: Id
    month: MonthLabel
    capex_usd: Usd
    years: Annotated[float, _num(1, 50, "a depreciation life: from 1 to 50 years")]
    by_year_usd: list[Usd]
    book_value_end_usd: Usd
    residual_value_usd: Usd


class MonthCost(_Data):
    month: MonthLabel
    capex_usd: Usd
    power_usd: Usd
    hosting_usd: Usd
    rental_usd: Usd
    total_usd: SignedUsd  # net of sales: may be negative
    cumulative_usd: SignedUsd
    committed_usd: Usd = 0.0  # contracts signed before the plan
    sales_usd: Usd = 0.0  # existing GPUs sold this month (cash in: total_usd is net)


class Sale(_Data):
    """Existing GPUs (fleet.owned) sold at the start of a month at their resale value."""

    gpu: Id
    month: MonthLabel
    count: Count
    age_months: Months
    unit_usd: Usd  # resale value per GPU: catalog price x resale share at that age
    usd: Usd


class ExistingGpus(_Data):
    """One entry of ``fleet.owned``: GPUs owned before the plan (no capex in it), what the
    plan sells of them and what is left at the horizon end, valued like purchases."""

    gpu: Id
    count: Count
    bought: MonthLabel | None = None  # in service before the horizon, since
    arrives: MonthLabel | None = None  # on order: in service from this month
    sell: Literal["never", "allowed"] = "never"
    sold: Count = 0
    kept: Count = 0  # still owned at the horizon end
    age_end_months: Months = 0  # age at the horizon end (from bought, or from arrival)
    residual_share: Share = 0.0  # by finance.residual, as for purchases
    residual_usd: Usd = 0.0  # kept x catalog price x residual_share


class Commitment(_Data):
    """One contract of ``fleet.contracts`` (signed before the plan): paid used or not, for
    every month of its term inside the horizon."""

    provider: str
    gpu: Id
    offer: str  # the committed offer the rentals of kind "committed" use
    count: Count
    start: MonthLabel
    end: MonthLabel
    usd_per_gpu_hour: UsdRate
    months: list[MonthLabel] = []  # months of the term inside the horizon
    usd: Usd = 0.0  # count x hours per month x price x len(months)


class WorkerLayout(_Data):
    """A worker kind of a serving replica: ``count`` workers of ``gpus`` GPUs each, in mode
    ``tp`` (experts sliced), ``ep`` (whole experts per GPU) or ``dep`` (data-parallel attention,
    whole experts per GPU)."""

    count: Annotated[int, _num(1, 4096, "workers: from 1 to 4,096")] = 1
    gpus: Annotated[int, _num(1, 576, "GPUs per worker: from 1 to 576")]
    mode: Literal["tp", "ep", "dep"]


class ServeLayout(_Data):
    """How one serving replica is deployed: aggregated (``prefill`` null: the decode workers
    do both phases) or disaggregated (prefill and decode worker pools), MTP on or off;
    ``label`` as ``4x4:dep+1x32:dep mtp`` (prefill first)."""

    label: Annotated[str, Field(max_length=200)]
    prefill: WorkerLayout | None = None
    decode: WorkerLayout
    mtp: bool = False


class ServeAllocation(_Data):
    workload: Name
    month: MonthLabel
    slice: Name
    gpu: Id
    gpus_per_replica: Annotated[int, _num(1, 576, "GPUs per replica: from 1 to 576")]
    rate_rps_per_replica: Rate
    source: str  # "owned" or an offer id
    replicas: Annotated[float, _num(0, MAX_COUNT, "replicas: from 0 to 10,000,000")]
    demand_rps: Rate  # the slice's demand for the workload (same on every row of the slice)
    # A request mix (workload.requests): req/s per replica for each bucket (0: cannot serve
    # it) and the req/s of capacity these replicas give each bucket (demand / max_load terms:
    # sum over buckets of capacity / rate <= replicas, less the spares of the type)
    bucket_rates_rps: dict[str, Rate] = {}
    bucket_capacity_rps: dict[str, Rate] = {}
    # the replica's layout (None in plans written before layouts: one worker of
    # gpus_per_replica GPUs)
    layout: ServeLayout | None = None


class TrainAllocation(_Data):
    workload: Name
    month: MonthLabel
    slice: Name | None  # owned runs are placed in slices; rentals per month
    gpu: Id
    gpus: Count
    source: str  # "owned" or an offer id
    wall_hours: Hours  # hours of the job's wall clock spent here
    progress_hours: Hours  # wall hours of progress (spot restarts make it smaller)


class WorkloadResult(_Data):
    name: Name
    kind: Literal["train", "serve"]
    model: Name
    gpu: list[Id]
    gpus: Count  # training: GPUs of the job; serving: peak GPUs in use
    config: dict[str, Any]
    cost_usd: Usd
    cost_share: Signed  # of total_usd, which sales can make negative
    meets_target: bool
    predicted: dict[str, float]  # infinite where nothing serves (written as null)
    target: dict[str, float]
    slack: dict[str, float]  # target - predicted: negative where a target is missed
    tokens: Annotated[float, _num(0, 1e21, "tokens: from 0 to 1e21")] = 0.0
    usd_per_1m_tokens: Annotated[float, _num(0, 1e30, "USD per 1M tokens: from 0")] | None = None


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


class RiskTerms(_Data):
    """The two-stage objective a plan with scenarios minimised."""

    measure: Literal["expected", "cvar", "worst_case"]
    alpha: Share = 0.9
    weight: Annotated[float, _num(0, 1000, "a weight: from 0 to 1,000")] = 1.0


class Plan(_Data):
    planner_version: Annotated[str, Field(max_length=MAX_NAME)]
    problem_name: Annotated[
        str, Field(max_length=MAX_PROBLEM_NAME, description="a name of at most 500 characters")
    ]
    problem_file: str
    problem_sha256: Annotated[
        str, Field(pattern=r"^([0-9a-f]{64})?$", description="a sha256: 64 hex digits or empty")
    ]
    status: Status
    objective_usd: SignedUsd | None
    gap: Annotated[float, _num(-1e6, 1e6, "a relative gap: a finite number")] | None
    solve_seconds: Annotated[float, _num(0, 1e7, "seconds: from 0 to 1e7")]
    solver: Annotated[str, Field(max_length=MAX_NAME)]
    message: str = ""
    # present value the repair step added to make rented replicas whole, and its stated
    # bound (one replica-slice per fractional rental of the relaxed plan); 0 when exact
    repair_usd: SignedUsd = 0.0
    repair_bound_usd: Usd = 0.0
    horizon_start: MonthLabel
    months: Annotated[
        list[MonthLabel],
        Field(min_length=1, max_length=MAX_MONTHS, description="1 to 120 months, YYYY-MM"),
    ]
    hours_per_month: Annotated[float, _num(1, 744, "hours in a month: from 1 to 744")]
    slices: Annotated[
        list[Slice], Field(min_length=1, max_length=MAX_MONTHS, description="1 to 120 slices")
    ]
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
    discount_rate: Annotated[
        float, Field(ge=0, lt=1, allow_inf_nan=False, description="an annual rate: 0 to below 1")
    ] = 0.0
    residual_mode: Literal["curve", "none", "straight_line"] = "none"
    workloads: list[WorkloadResult]
    serve_allocations: list[ServeAllocation]
    train_allocations: list[TrainAllocation]
    dropped: list[Dropped]
    assumptions: list[Assumption]
    binding: list[str] = []
    # A two-stage plan (``scenarios:``): this plan is the first scenario's realisation of the
    # shared purchases; every scenario's, with its figures, is in ``scenarios``.
    risk: RiskTerms | None = None
    scenarios: Annotated[list[ScenarioOutcome], Field(max_length=MAX_SCENARIOS)] = []

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The plan's tables as pandas DataFrames, one per list of the plan, named as its
        fields: ``purchases``, ``rentals``, ``reservations``, ``fleet``, ``cash_flow``,
        ``years``, ``depreciation``, ``workloads``, ``serve_allocations``,
        ``train_allocations``, ``sales``, ``existing``, ``commitments``, ``dropped``,
        ``assumptions``, ``scenarios`` (a two-stage plan's figures per scenario, without its
        plans: ``plan.scenarios[i].plan.frames()`` has each). One row per entry, one column per field (an empty table keeps its
        columns); a nested mapping becomes one column per key (``predicted.ttft_ms``)."""
        return {name: _frame(self, name) for name in TABLES}

    @classmethod
    def from_json_file(cls, path: str | Path) -> Plan:
        """A plan read back from ``planner solve --json`` (see :func:`load_plan`)."""
        return load_plan(path)


class ScenarioOutcome(_Data):
    """One demand scenario of a two-stage plan: the shared purchases re-planned in it
    (``plan``), the best plan known for it alone (``own_plan``: its own deterministic optimum,
    or ``plan`` where that is cheaper) and the base forecast's purchases re-planned in it
    (``base_plan``; None where they cannot meet this scenario). Costs are present values."""

    name: Name
    probability: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    changes: Annotated[list[Annotated[str, Field(max_length=MAX_TEXT)]], Field(max_length=100)] = []
    cost_usd: SignedUsd
    own_usd: SignedUsd
    regret_usd: SignedUsd
    base_usd: SignedUsd | None
    # This scenario's own purchases (those of ``own_plan``) re-planned in every scenario, in
    # the plan's scenario order: what buying for this forecast alone would cost in each
    # (None: not evaluated in the time limit, or they cannot meet some scenario). The
    # plan's purchases are never dearer, in the risk measure, than any of these.
    fleet_costs_usd: list[SignedUsd | None] | None = None
    plan: Plan
    own_plan: Plan
    base_plan: Plan | None = None


Plan.model_rebuild()  # a plan's scenarios hold plans

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
    "scenarios",
)


def _frame(plan: Plan, name: str) -> pd.DataFrame:
    """One table of ``plan`` as a DataFrame (pandas is imported here: the command line never
    needs it)."""
    import pandas as pd

    if name == "scenarios":  # one row of figures per scenario; its plans are plans of their own
        plans = {"plan", "own_plan", "base_plan"}
        rows = [row.model_dump(exclude=plans) for row in plan.scenarios]
        columns = [f for f in ScenarioOutcome.model_fields if f not in plans]
        return pd.DataFrame(rows, columns=columns)
    rows = [row.model_dump() for row in getattr(plan, name)]
    if rows:
        return pd.json_normalize(rows, max_level=0 if name == "assumptions" else 1)
    item = Plan.model_fields[name].annotation.__args__[0]  # list[Row] -> Row
    return pd.DataFrame(columns=list(item.model_fields))


# A plan handed back is at most this large: a 30 MB plan (~117,000 rows; a 200-workload,
# 36-month plan is ~20 MB) reports in ~26 s on 2 cores (benchmarks/report_large_plan.py), so
# every plan within the limit reports within 30 s.
MAX_PLAN_BYTES = 30 * 1024 * 1024


def load_plan(src: str | Path) -> Plan:
    """Read a plan JSON; every problem with the file is an InputError with a short message
    naming the JSON key path, the bad value and what is allowed: the figures' types, signs
    and ceilings (the models above) and their agreement (:func:`validate_plan`)."""
    src = Path(src)
    text = read_text(src, "plan JSON written by `planner solve --json`", MAX_PLAN_BYTES)
    try:
        data = json.loads(text, parse_int=parse_int)
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
    bad = first_bad_value(data)
    if bad is not None:
        raise InputError(f"{src}: not a valid plan JSON: {bad}")
    try:
        plan = Plan.model_validate(data, strict=True)
    except ValidationError as exc:
        errs = exc.errors()
        shown = "; ".join(_error_line(e) for e in errs[:5])
        more = f" (and {len(errs) - 5} more)" if len(errs) > 5 else ""
        raise InputError(f"{src}: not a valid plan JSON: {shown}{more}") from None
    problems = validate_plan(plan)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InputError(f"{src}: not a valid plan JSON: {'; '.join(problems[:5])}{more}")
    return plan


# ------------------------------------------------------------------ reading a plan JSON


def _error_line(e: Any) -> str:
    """One pydantic error as ``path: value; what is allowed``."""
    loc = tuple(e["loc"])
    allowed = _allowed(loc)
    if e["type"] == "missing":
        return f"{path_text(loc)}: missing; {allowed or 'a required field'}"
    if e["type"] == "extra_forbidden":
        return f"{path_text(loc)}: not a field of a plan (unknown key)"
    msg = str(e["msg"])
    msg = msg[:1].lower() + msg[1:]
    why = f"{allowed} ({msg})" if allowed else msg
    return f"{path_text(loc)}: {show(e.get('input'))}; {why}"


def _allowed(loc: tuple[Any, ...]) -> str | None:
    """The description of the field at ``loc`` (what it may hold), if it has one."""
    model: Any = Plan
    info = None
    for k in loc:
        if isinstance(k, int):
            continue
        fields = getattr(model, "model_fields", None)
        if fields is None or k not in fields:
            return None
        info = fields[k]
        model = _inner_model(info.annotation)
    return None if info is None else info.description


def _inner_model(tp: Any) -> Any:
    """The model a field holds (through lists and optionals), or None."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    if get_origin(tp) is Annotated:
        return _inner_model(get_args(tp)[0])
    for arg in get_args(tp):
        m = _inner_model(arg)
        if m is not None:
            return m
    return None


# ------------------------------------------------------------------ a plan's agreement


def validate_plan(plan: Plan) -> list[str]:
    """What in ``plan`` does not agree with itself, as ``path: value; what is allowed``
    lines (empty: a plan the reports and the verifier can read). The field types hold each
    figure's type, sign and ceiling; these are the checks across fields: the months form
    the horizon, every dated row falls in it, the lists by month and by year have one entry
    each, and the names the rows use exist."""
    out: list[str] = []
    out += _check_months(plan)
    months = set(plan.months)
    T = len(plan.months)
    for name in (
        "purchases",
        "sales",
        "rentals",
        "fleet",
        "serve_allocations",
        "train_allocations",
        "depreciation",
    ):
        for i, row in enumerate(getattr(plan, name)):
            if row.month not in months:
                out.append(f"{name}[{i}].month: {show(row.month)}; {_in_horizon(plan)}")
    for i, r in enumerate(plan.reservations):
        if r.start_month not in months:
            out.append(f"reservations[{i}].start_month: {show(r.start_month)}; {_in_horizon(plan)}")
    for i, c in enumerate(plan.commitments):
        for j, m in enumerate(c.months):
            if m not in months:
                out.append(f"commitments[{i}].months[{j}]: {show(m)}; {_in_horizon(plan)}")
    if len(plan.cash_flow) != T:
        out.append(f"cash_flow: {len(plan.cash_flow)} entries; one per month of `months` ({T})")
    for i, (c, m) in enumerate(zip(plan.cash_flow, plan.months, strict=False)):
        if c.month != m:
            out.append(f"cash_flow[{i}].month: {show(c.month)}; month {i} of the horizon, {m}")
    out += _check_years(plan)
    out += _check_names(plan)
    for i, w in enumerate(plan.workloads):
        out += _check_config(f"workloads[{i}].config", w.config)
    out += _check_scenarios(plan)
    return out


def _check_scenarios(plan: Plan) -> list[str]:
    """A two-stage plan's scenario plans, each checked as a plan (no scenarios of its own),
    on the same months as the plan."""
    out: list[str] = []
    for i, s in enumerate(plan.scenarios):
        for field_name in ("plan", "own_plan", "base_plan"):
            sub = getattr(s, field_name)
            if sub is None:
                continue
            at = f"scenarios[{i}].{field_name}"
            if sub.scenarios:
                out.append(f"{at}.scenarios: a scenario's plan has no scenarios of its own")
                continue
            if sub.months != plan.months:
                out.append(f"{at}.months: {show(sub.months[:3])}...; the plan's months")
            out += [f"{at}.{line}" for line in validate_plan(sub)]
    return out


def _in_horizon(plan: Plan) -> str:
    return f"a month of the plan's horizon ({plan.months[0]} to {plan.months[-1]})"


def _check_months(plan: Plan) -> list[str]:
    out = []
    try:
        y, m = parse_month(plan.horizon_start)
    except ValueError as exc:
        return [f"horizon_start: {show(plan.horizon_start)}; {exc}"]
    for t, label in enumerate(plan.months):
        total = y * 12 + m - 1 + t
        want = f"{total // 12:04d}-{total % 12 + 1:02d}"
        if label != want:
            out.append(
                f"months[{t}]: {show(label)}; the months run one by one from horizon_start "
                f"({plan.horizon_start}), so this is {want}"
            )
            break
    return out


def _check_years(plan: Plan) -> list[str]:
    out = []
    n = (len(plan.months) + 11) // 12
    if plan.years and len(plan.years) != n:
        out.append(f"years: {len(plan.years)} entries; one per plan year of the horizon ({n})")
    for i, yc in enumerate(plan.years):
        if yc.year != i + 1:
            out.append(f"years[{i}].year: {yc.year}; the years are numbered 1, 2, ... ({i + 1})")
        block = plan.months[12 * i : 12 * i + 12]
        if block and (yc.first_month, yc.last_month) != (block[0], block[-1]):
            out.append(
                f"years[{i}]: {yc.first_month} to {yc.last_month}; plan year {i + 1} is "
                f"{block[0]} to {block[-1]}"
            )
    for i, d in enumerate(plan.depreciation):
        if len(d.by_year_usd) != n:
            out.append(
                f"depreciation[{i}].by_year_usd: {len(d.by_year_usd)} entries; one per plan "
                f"year ({n})"
            )
    return out


def _check_names(plan: Plan) -> list[str]:
    """Workload and slice names are unique, and every row names one that exists."""
    out = []
    slices = [s.name for s in plan.slices]
    names = [w.name for w in plan.workloads]
    for what, seen in (("slices", slices), ("workloads", names)):
        dup = sorted({x for x in seen if seen.count(x) > 1}) if len(set(seen)) < len(seen) else []
        if dup:
            out.append(f"{what}: the name {show(dup[0])} is used twice; names are unique")
    known, known_slices = set(names), set(slices)
    for kind in ("serve_allocations", "train_allocations"):
        for i, a in enumerate(getattr(plan, kind)):
            if a.workload not in known:
                out.append(
                    f"{kind}[{i}].workload: {show(a.workload)}; {_one_of('a workload', names)}"
                )
            if a.slice is not None and a.slice not in known_slices:
                out.append(f"{kind}[{i}].slice: {show(a.slice)}; {_one_of('a slice', slices)}")
    for i, r in enumerate(plan.rentals):
        if r.workload not in known and r.workload != "(reserved)":
            out.append(
                f"rentals[{i}].workload: {show(r.workload)}; "
                f"{_one_of('a workload', [*names, '(reserved)'])}"
            )
    return out


def _is_num(v: Any, lo: float, hi: float) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi


def _check_config(at: str, cfg: dict[str, Any]) -> list[str]:
    """The entries of a workload's free-form ``config`` the reports read: ``offers`` (per
    offer id its ``fabric`` and ``gbps_per_gpu``), ``max_load``, ``redundancy`` and the
    request mix ``requests`` (``name``, ``share``, ``prompt``, ``output``)."""
    out = []
    if "max_load" in cfg and not _is_num(cfg["max_load"], 0, 1):
        out.append(f"{at}.max_load: {show(cfg['max_load'])}; a share of capacity: 0 to 1")
    if "redundancy" in cfg and not (
        isinstance(cfg["redundancy"], int) and _is_num(cfg["redundancy"], 0, 100)
    ):
        out.append(
            f"{at}.redundancy: {show(cfg['redundancy'])}; spare replicas: a whole number 0-100"
        )
    offers = cfg.get("offers", {})
    if not isinstance(offers, dict):
        out.append(f"{at}.offers: {show(offers)}; a mapping of offer id to its fabric")
        offers = {}
    for oid, info in offers.items():
        if not isinstance(info, dict):
            out.append(f"{at}.offers.{oid}: {show(info)}; a mapping (provider, fabric, ...)")
        elif not isinstance(info.get("fabric"), (str, type(None))):
            out.append(f"{at}.offers.{oid}.fabric: {show(info['fabric'])}; a fabric name")
        elif info.get("gbps_per_gpu") is not None and not _is_num(info["gbps_per_gpu"], 0, 1e6):
            out.append(
                f"{at}.offers.{oid}.gbps_per_gpu: {show(info['gbps_per_gpu'])}; "
                "Gb/s per GPU: a number from 0 to 1e6"
            )
    out += _check_replicas(at, cfg.get("replicas", []))
    requests = cfg.get("requests", [])
    if not isinstance(requests, list):
        return [*out, f"{at}.requests: {show(requests)}; a list of request buckets"]
    for j, b in enumerate(requests):
        where = f"{at}.requests[{j}]"
        if not isinstance(b, dict):
            out.append(f"{where}: {show(b)}; a bucket: name, share, prompt, output")
            continue
        if not isinstance(b.get("name"), str):
            out.append(f"{where}.name: {show(b.get('name'))}; a bucket's name")
        if not _is_num(b.get("share"), 0, 1):
            out.append(f"{where}.share: {show(b.get('share'))}; a share of requests: 0 to 1")
        for k in ("prompt", "output"):
            if not _is_num(b.get(k), 0, MAX_RATE):
                out.append(f"{where}.{k}: {show(b.get(k))}; tokens: a number from 0")
    return out


def _check_replicas(at: str, replicas: Any) -> list[str]:
    """A workload's ``config.replicas``, as the reports read it: a list of replica types,
    each a mapping whose ``layout`` (a deployment's pools) is text or absent."""
    if not isinstance(replicas, list):
        return [f"{at}.replicas: {show(replicas)}; a list of replica types"]
    out = []
    for j, r in enumerate(replicas):
        if not isinstance(r, dict):
            out.append(
                f"{at}.replicas[{j}]: {show(r)}; a replica type (gpu, gpus_per_replica, ...)"
            )
        elif not isinstance(r.get("layout"), (str, type(None))):
            out.append(
                f"{at}.replicas[{j}].layout: {show(r['layout'])}; a deployment's pools as text"
            )
    return out


def _one_of(what: str, names: list[str]) -> str:
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f"{what} of the plan ({shown})" if names else f"{what} of the plan (it has none)"


def write_json(plan: Plan, path: str | Path) -> None:
    atomic_write_bytes(path, plan.to_json().encode("utf-8"))


def plan_summary_dict(plan: Plan) -> dict[str, Any]:
    """The JSON contract of ``planner solve --json`` (the whole plan)."""
    return json.loads(plan.to_json())
