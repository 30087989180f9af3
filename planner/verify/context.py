"""What the check families share, computed once from the problem and the plan.

Several families need the same recomputed figures: GPUs owned per month, busy GPU-hours
(serving and training), GPU-hours the allocations rent, reservations active per month, the
money totals. :meth:`VerifyContext.from_inputs` computes them here so that no family calls
another one, and so that each physics call (replica capacity, training estimate) is made once.

Each plan row is also *resolved* here (month index, offer, the gates a family checks before it
uses the row): the figures and the families then skip exactly the same rows. What a row
needs recomputed from the problem alone (demand, existing fleet ages, contracts, fabric speed, a
GPU-month's power and hosting) is a pure function of :mod:`planner.verify.recompute`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from planner.inputs.catalog import Offer
from planner.inputs.problem import Inputs, Problem, ServeWorkload, TrainJob, month_index
from planner.optimize.candidates import spot_overhead_for
from planner.physics.capacity import (
    BucketCapacity,
    measured_factor,
    replica_of_mix,
    scale_train,
    train_measurement,
)
from planner.physics.demand import (
    HOURS_PER_MONTH,
    LoadSlice,
    problem_slices,
)
from planner.physics.economics import discount_factor, residual_share, term_bills
from planner.physics.serve import ReplicaCapacity
from planner.physics.train import TrainEstimate, estimate_train
from planner.plan.data import Plan, Rental, Reservation, ServeAllocation, TrainAllocation

from .findings import ABS, REL, bad_number
from .layouts import layout_key, serve_capacities
from .recompute import (
    Cell,
    contract_costs,
    existing_age,
    existing_start,
    fabric_speed,
    gpu_month_opex,
    path_factor,
    purchase_residual,
    purchase_terms,
    rent_change,
    rental_row_price,
    sale_entries,
    serve_demand,
)

# (serving workload, GPU, GPUs per replica, layout: '' for a plain replica, else
# planner.verify.layouts.layout_key)
ConfigKey = tuple[str, str, int, str]


@dataclass
class ServeRow:
    """One allocation of a serving workload of the problem."""

    al: ServeAllocation
    t: int | None  # None: the month is not in the horizon
    active: bool = False  # inside the workload's active months
    slice_ok: bool = False
    replicas_ok: bool = False  # a finite number >= 0
    rate: float = 0.0  # req/s per replica by the physics; 0 when it cannot meet the SLO
    offer: Offer | None = None  # rented rows whose offer the problem trusts

    @property
    def key(self) -> ConfigKey:
        return (self.al.workload, self.al.gpu, self.al.gpus_per_replica, layout_key(self.al))

    @property
    def usable(self) -> bool:
        """Past the gates after which the serving family checks the row and the totals count it."""
        return self.t is not None and self.active and self.slice_ok and self.replicas_ok


@dataclass
class ServeState:
    """A serving workload: its active months, its demand and what its allocations offer."""

    w: ServeWorkload
    a: int  # first and last active month
    b: int
    demand: dict[Cell, float]  # req/s the planner must cover
    rows: list[ServeRow] = field(default_factory=list)
    offered: defaultdict[Cell, float] = field(default_factory=lambda: defaultdict(float))
    replicas_up: defaultdict[Cell, float] = field(default_factory=lambda: defaultdict(float))
    # per cell: (req/s per replica, replicas) of every row, to take the R largest out
    replica_rates: defaultdict[Cell, list] = field(default_factory=lambda: defaultdict(list))
    # a request mix: capacity given per (cell, bucket); per (cell, gpu, tp) replica-seconds
    # per second the buckets take (sum capacity / rate) and the replicas of that type
    given: defaultdict[tuple[int, str, str], float] = field(
        default_factory=lambda: defaultdict(float)
    )
    type_busy: defaultdict[tuple[int, str, str, int, str], float] = field(
        default_factory=lambda: defaultdict(float)
    )
    type_replicas: defaultdict[tuple[int, str, str, int, str], float] = field(
        default_factory=lambda: defaultdict(float)
    )

    def spare_rps(self, cell: Cell) -> float:
        """Req/s lost when the ``redundancy`` fastest replicas of the cell are down."""
        left, lost = self.w.redundancy, 0.0
        for rate, count in sorted(self.replica_rates.get(cell, []), reverse=True):
            take = min(float(left), count)
            lost += take * rate
            left -= take
            if left <= 0:
                break
        return lost


@dataclass
class TrainRow:
    """One allocation of a training job whose configuration is allowed."""

    al: TrainAllocation
    t: int | None
    in_window: bool = False
    hours_ok: bool = False  # wall_hours is a finite number >= 0
    slice_ok: bool = False  # owned: a known slice, and the hours fit in it
    offer: Offer | None = None  # rented rows whose offer the problem trusts
    paid: int = 0  # rented: GPUs billed (whole instances, at least a cluster's block)
    progress: float = 0.0  # rented: progress hours recomputed (fabric speed, spot restarts)
    fabric_ok: bool = True  # rented: one instance, or a fabric the job may span

    @property
    def counted(self) -> bool:
        """Its wall hours count towards the job's."""
        return self.t is not None and self.in_window and self.hours_ok


@dataclass
class TrainState:
    """A training job: its one configuration, the physics' estimate and its hours."""

    job: TrainJob
    allocs: list[TrainAllocation]
    configs: set[tuple[str, int]] = field(default_factory=set)
    gpu: str = ""
    k: int = 0
    allowed: bool = False  # the GPU is allowed and k >= 1; nothing else is checked otherwise
    est: TrainEstimate | None = None
    factor: float = 1.0  # measured over modeled hours (a training profile), 1 without one
    a: int = 0  # the window's first and last month
    b: int = 0
    rows: list[TrainRow] = field(default_factory=list)
    wall: float = 0.0
    progress: float = 0.0
    spot: float = 0.0  # progress hours made on spot
    per_month: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    per_offer: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    places: set[str] = field(default_factory=set)  # "owned" or the providers rented from


@dataclass
class ReservationRow:
    """One reservation, with its offer if it is a reserved offer of the problem."""

    rv: Reservation
    offer: Offer | None  # None unless a reserved offer of the problem
    t0: int | None
    usd: float = 0.0  # gpus x term hours x the offer's price
    price: float = 0.0  # the offer's price at the start month, on the GPU's path

    @property
    def term(self) -> int:
        return (self.offer.term_months if self.offer else None) or 1


@dataclass
class RentalRow:
    """One rental row, with its offer if the problem trusts it."""

    r: Rental
    offer: Offer | None
    t: int | None
    hours_ok: bool  # gpu_hours is a finite number >= 0
    usd: float = 0.0  # gpu_hours x the offer's price

    @property
    def counted(self) -> bool:
        return self.offer is not None and self.t is not None and self.hours_ok


ConfigUsed = tuple[str, int, str]  # (gpu, GPUs per replica, layout key) a workload uses


def _sets() -> defaultdict[str, set[ConfigUsed]]:
    return defaultdict(set)


def _floats() -> defaultdict[Any, float]:
    return defaultdict(float)


@dataclass
class VerifyContext:
    """The problem's horizon and every figure recomputed from the problem and the plan."""

    inputs: Inputs
    plan: Plan
    months: list[str]
    slices: list[LoadSlice]
    sl_hours: dict[str, float]
    idx: dict[str, int]
    owned: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    bought: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    servers: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    capex: float = 0.0
    capex_by_month: defaultdict[int, float] = field(default_factory=_floats)
    residual: float = 0.0  # resale value at the horizon end, nominal
    # allocations: owned GPUs in use per (gpu, t, slice), busy GPU-hours per (gpu, t)
    use: defaultdict[tuple[str, int, str], float] = field(default_factory=_floats)
    busy: defaultdict[tuple[str, int], float] = field(default_factory=_floats)
    serve: list[ServeState] = field(default_factory=list)
    capacity: dict[ConfigKey, ReplicaCapacity | None] = field(default_factory=dict)
    bucket_caps: dict[ConfigKey, dict[str, BucketCapacity]] = field(default_factory=dict)
    serve_configs_used: defaultdict[str, set[ConfigUsed]] = field(default_factory=_sets)
    rent_expect: defaultdict[tuple[str, str, int], float] = field(default_factory=_floats)
    reserved_use: defaultdict[tuple[str, int, str], float] = field(default_factory=_floats)
    capped_use: defaultdict[tuple[str, int, str], float] = field(default_factory=_floats)
    rented_use: defaultdict[tuple[str, int, str], float] = field(default_factory=_floats)
    train: list[TrainState] = field(default_factory=list)
    train_rent: defaultdict[tuple[str, str, int], float] = field(default_factory=_floats)
    # (offer, job, month) -> GPUs the job's block holds from the offer that month
    train_held: dict[tuple[str, str, int], int] = field(default_factory=dict)
    train_wall: dict[str, float] = field(default_factory=dict)
    # reservations: GPUs committed and GPU-hours billed per (offer, t)
    reservations: list[ReservationRow] = field(default_factory=list)
    res_active: defaultdict[tuple[str, int], float] = field(default_factory=_floats)
    reserved_expect: defaultdict[tuple[str, int], float] = field(default_factory=_floats)
    reserved_usd: float = 0.0
    # rentals: GPU-hours billed per (offer, workload, t), expected from the allocations
    rentals: list[RentalRow] = field(default_factory=list)
    rental: float = 0.0
    rental_by_month: defaultdict[int, float] = field(default_factory=_floats)
    rented_by_gpu: defaultdict[tuple[str, int], float] = field(default_factory=_floats)
    seen: defaultdict[tuple[str, str, int], float] = field(default_factory=_floats)
    reserved_seen: defaultdict[tuple[str, int], float] = field(default_factory=_floats)
    expect: defaultdict[tuple[str, str, int], float] = field(default_factory=_floats)
    # money
    power: float = 0.0
    hosting: float = 0.0
    opex_by_month: defaultdict[int, float] = field(default_factory=_floats)
    reserved_gpus: defaultdict[tuple[str, int], float] = field(default_factory=_floats)
    total: float = 0.0
    npv: float = 0.0
    # the existing fleet (fleet.owned) and contracts
    existing: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    sold: defaultdict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    existing_residual: float = 0.0
    sales_by_month: defaultdict[int, float] = field(default_factory=_floats)
    sale_errors: list[str] = field(default_factory=list)
    committed_by_month: defaultdict[int, float] = field(default_factory=_floats)
    existing_entries: dict[int, tuple[int, float]] = field(default_factory=dict)  # sold, value

    @classmethod
    def from_inputs(cls, inputs: Inputs, plan: Plan) -> VerifyContext:
        months = inputs.problem.month_labels()
        slices = problem_slices([w.traffic.utilization for w in inputs.problem.workloads.serve])
        ctx = cls(
            inputs=inputs,
            plan=plan,
            months=months,
            slices=slices,
            sl_hours={s.name: s.hours_per_month for s in slices},
            idx={m: i for i, m in enumerate(months)},
        )
        # rentals compare the hours the allocations rent, and money needs the busy hours and
        # the reservations: they come last
        ctx._add_purchases()
        ctx._add_existing()
        for w in inputs.problem.workloads.serve:
            ctx._add_serving(w)
        for j in inputs.problem.workloads.train:
            ctx._add_training(j)
        ctx._add_reservations()
        ctx._add_rentals()
        ctx._add_money()
        return ctx

    @property
    def problem(self) -> Problem:
        return self.inputs.problem

    @property
    def T(self) -> int:  # the horizon's length, named as in the model
        return len(self.months)

    @property
    def horizon_matches(self) -> bool:
        return self.plan.months == self.months

    @property
    def serve_names(self) -> set[str]:
        return {w.name for w in self.problem.workloads.serve}

    @property
    def train_names(self) -> set[str]:
        return {j.name for j in self.problem.workloads.train}

    def _add_purchases(self) -> None:
        for pu in self.plan.purchases:
            t0 = self.idx.get(pu.month)
            gpu = self.inputs.gpus.get(pu.gpu)
            if gpu is None or t0 is None:
                continue
            _, paid, price = purchase_terms(self.inputs, pu.gpu, t0)
            cost = max(pu.nodes, 0) * gpu.chassis_usd + max(pu.count, 0) * gpu.purchase_usd.value
            cost *= price
            self.capex += cost
            self.capex_by_month[max(paid, 0)] += cost
            self.bought[(pu.gpu, t0)] += max(pu.count, 0)
            for t in range(t0, self.T):
                self.owned[(pu.gpu, t)] += max(pu.count, 0)
                self.servers[(pu.gpu, t)] += max(pu.nodes, 0)
            self.residual += purchase_residual(
                gpu, pu.count, pu.nodes, self.T - t0, self.inputs.finance, price
            )

    def _add_existing(self) -> None:
        """Existing GPUs in service per month (owned before the plan, joining when they
        arrive, leaving when sold), each sale matched to a ``sell: allowed`` entry by its
        age and priced at the resale curve; the unsold ones' value at the horizon end; and
        contracts' cost in every month of their term inside the horizon."""
        fin = self.inputs.finance
        entries = list(enumerate(self.problem.fleet.owned))
        left = {i: o.count for i, o in entries}
        gone: dict[int, list[tuple[int, int]]] = defaultdict(list)  # entry -> (t, count)
        for sale in self.plan.sales:
            t = self.idx.get(sale.month)
            match = sale_entries(self.problem, left, sale, t)
            if not match or sale.count < 1:
                self.sale_errors.append(
                    f"sale of {sale.count} {sale.gpu} in {sale.month} (age {sale.age_months} "
                    "months): no existing GPUs with sell: allowed of that age are left to sell"
                )
                continue
            i, gpu = match[0], self.inputs.gpus[sale.gpu]
            left[i] -= sale.count
            gone[i].append((t, sale.count))
            # a sale fetches the used-market price: the resale curve at that age
            share = gpu.residual.share_at(sale.age_months) if gpu.residual else 0.0
            usd = sale.count * gpu.purchase_usd.value * share
            self.sales_by_month[t] += usd
            if abs(usd - sale.usd) > 0.01 + 1e-6 * abs(usd):
                self.sale_errors.append(
                    f"sale of {sale.count} {sale.gpu} in {sale.month}: {sale.usd:,.2f} but the "
                    f"resale curve at {sale.age_months} months gives {usd:,.2f}"
                )
        for i, o in entries:
            gpu = self.inputs.gpus.get(o.gpu)
            if gpu is None:
                continue
            out_by = 0
            for t in range(existing_start(self.problem, i), self.T):
                out_by += sum(n for tt, n in gone[i] if tt == t)
                self.existing[(o.gpu, t)] += o.count - out_by
                self.sold[(o.gpu, t)] += out_by
                self.owned[(o.gpu, t)] += o.count - out_by
            share = residual_share(
                gpu, existing_age(self.problem, i, self.T), fin.residual, fin.depreciation_years
            )
            value = (o.count - out_by) * gpu.purchase_usd.value * share
            self.existing_residual += value
            self.existing_entries[i] = (out_by, value)
        for t, usd in contract_costs(self.problem, self.months):
            self.committed_by_month[t] += usd

    def _add_serving(self, w: ServeWorkload) -> None:
        a, b, demand = serve_demand(self.problem, self.slices, self.T, w)
        state = ServeState(w, a, b, demand)
        self.serve.append(state)
        for al in self.plan.serve_allocations:
            if al.workload == w.name:
                state.rows.append(self._serve_row(state, al))

    def _serve_row(self, state: ServeState, al: ServeAllocation) -> ServeRow:
        row = ServeRow(al, self.idx.get(al.month))
        if row.t is None:
            return row
        t = row.t
        row.active = state.a <= t <= state.b
        row.slice_ok = al.slice in self.sl_hours
        row.replicas_ok = not bad_number(al.replicas)
        if not row.usable:
            return row
        cap = self._capacity(row.key, state.w, al)
        row.rate = cap.rate_rps if cap is not None and cap.feasible else 0.0
        if state.w.requests is not None:
            self._mix_row(state, row)
        if al.replicas > 0:
            self.serve_configs_used[state.w.name].add(row.key[1:])
        # a rate above the physics' does not serve more: the serving family flags it
        state.offered[(t, al.slice)] += al.replicas * min(row.rate, al.rate_rps_per_replica)
        state.replicas_up[(t, al.slice)] += al.replicas
        state.replica_rates[(t, al.slice)].append((row.rate, al.replicas))
        gpus = al.replicas * al.gpus_per_replica
        if al.source == "owned":
            self.use[(al.gpu, t, al.slice)] += gpus
            self.busy[(al.gpu, t)] += gpus * self.sl_hours[al.slice]
            return row
        o = row.offer = self.inputs.offers.get(al.source)
        if o is None:
            return row
        if o.kind == "reserved":
            self.reserved_use[(o.id, t, al.slice)] += gpus
        else:
            self.rent_expect[(o.id, state.w.name, t)] += gpus * self.sl_hours[al.slice]
            self.rented_use[(o.id, t, al.slice)] += gpus
        if o.max_gpus is not None:
            self.capped_use[(o.id, t, al.slice)] += gpus
        return row

    def _capacity(
        self, key: ConfigKey, w: ServeWorkload, al: ServeAllocation
    ) -> ReplicaCapacity | None:
        """The replica for ``key`` (None: GPU not allowed, by the problem or the workload's
        ``gpus``), computed once per key from the row's layout
        (:func:`planner.verify.layouts.serve_capacities`): measured where a profile applies,
        else the physics; a mix: the mix rate, feasible when it serves some bucket (each
        bucket's rate is in ``bucket_caps``)."""
        if key not in self.capacity:
            _, gpu_id, tp, _ = key
            allowed = w.gpus is None or gpu_id in w.gpus
            if gpu_id not in self.inputs.gpus or tp < 1 or not allowed:
                self.capacity[key] = None
                return None
            caps = serve_capacities(self.inputs, w, al)
            self.bucket_caps[key] = {c.bucket: c for c in caps}
            self.capacity[key] = replica_of_mix(caps, [b.share for b in w.buckets()])
        return self.capacity[key]

    def _mix_row(self, state: ServeState, row: ServeRow) -> None:
        """A mix's row: capacity given per bucket, and the replica time it takes."""
        al, t = row.al, row.t
        assert t is not None  # rows without a month never get here
        caps = self.bucket_caps.get(row.key, {})
        kind = (t, al.slice, *row.key[1:])
        state.type_replicas[kind] += al.replicas
        for b, v in al.bucket_capacity_rps.items():
            state.given[(t, al.slice, b)] += v
            rate = caps[b].rate if b in caps else 0.0
            state.type_busy[kind] += v / rate if rate > 0 else (math.inf if v > 0 else 0.0)

    def _add_training(self, j: TrainJob) -> None:
        state = TrainState(j, [al for al in self.plan.train_allocations if al.workload == j.name])
        self.train.append(state)
        if not state.allocs:
            return
        state.configs = {(al.gpu, al.gpus) for al in state.allocs}
        state.gpu, state.k = sorted(state.configs)[0]
        state.allowed = state.gpu in self.inputs.gpus and state.k >= 1
        if not state.allowed:
            return
        est = estimate_train(
            self.inputs.models[j.model],
            self.inputs.gpus[state.gpu],
            state.k,
            j.tokens,
            j.method,
            seq_len=j.seq_len,
            stack=j.stack,
        )
        state.factor = measured_factor(est, train_measurement(self.inputs, j, state.gpu, state.k))
        state.est = scale_train(est, state.factor)
        state.a = month_index(self.problem.horizon.start, j.window.start)
        state.b = month_index(self.problem.horizon.start, j.window.deadline)
        for al in state.allocs:
            state.rows.append(self._train_row(state, al))
        self.train_wall[j.name] = state.wall

    def _train_row(self, state: TrainState, al: TrainAllocation) -> TrainRow:
        row = TrainRow(al, self.idx.get(al.month))
        if row.t is None:
            return row
        t, k = row.t, state.k
        row.in_window = state.a <= t <= state.b
        row.hours_ok = not bad_number(al.wall_hours)
        if not row.counted:
            return row
        state.wall += al.wall_hours
        state.per_month[t] += al.wall_hours
        if al.wall_hours > ABS:
            o = self.inputs.offers.get(al.source)
            state.places.add(o.provider if o is not None else al.source)
        if al.source == "owned":
            state.progress += al.wall_hours
            row.slice_ok = (
                al.slice in self.sl_hours
                and al.wall_hours <= self.sl_hours[al.slice] * (1 + REL) + ABS
            )
            if row.slice_ok:
                self.use[(state.gpu, t, al.slice)] += k * al.wall_hours / self.sl_hours[al.slice]
                self.busy[(state.gpu, t)] += k * al.wall_hours
            return row
        o = row.offer = self.inputs.offers.get(al.source)
        if o is None:
            return row
        u = o.gpus_per_instance
        row.paid = max(-(-k // u), -(-(o.min_gpus or 0) // u)) * u
        speed = fabric_speed(self.inputs, state.job, state.gpu, k, state.est, state.factor, o)
        row.fabric_ok = speed is not None
        row.progress = al.wall_hours * (speed or 0.0)
        if o.kind == "spot":
            row.progress /= 1 + spot_overhead_for(state.job, o, k)
            state.spot += row.progress
        state.progress += row.progress
        state.per_offer[o.id] += al.wall_hours
        self.train_rent[(o.id, state.job.name, t)] += al.wall_hours * row.paid
        if al.wall_hours > ABS:
            self.train_held[(o.id, state.job.name, t)] = row.paid
        return row

    def _add_reservations(self) -> None:
        for rv in self.plan.reservations:
            o = self.inputs.offers.get(rv.offer)
            row = ReservationRow(
                rv,
                o if o is not None and o.kind == "reserved" else None,
                self.idx.get(rv.start_month),
            )
            self.reservations.append(row)
            if row.offer is None or row.t0 is None:
                continue
            L, n = row.term, max(rv.gpus, 0)
            # signed at its start month's price on the GPU's path, fixed for the term
            row.price = row.offer.price_in(rv.start_month) * path_factor(
                rent_change(self.inputs, row.offer.gpu), row.t0
            )
            row.usd = n * L * HOURS_PER_MONTH * row.price
            self.reserved_usd += row.usd
            bills = term_bills(L, row.offer.upfront_share)  # monthly, or partly up front
            for t in range(row.t0, min(self.T, row.t0 + L)):
                self.res_active[(row.offer.id, t)] += n
                self.reserved_expect[(row.offer.id, t)] += n * HOURS_PER_MONTH * bills[t - row.t0]

    def rental_price(self, r: Rental, o: Offer, t: int) -> float:
        """The recomputed price of a rental row (:func:`rental_row_price`)."""
        return rental_row_price(self.inputs, self.reservations, r, o, t)

    def _add_rentals(self) -> None:
        for r in self.plan.rentals:
            row = RentalRow(
                r,
                self.inputs.offers.get(r.offer),
                self.idx.get(r.month),
                not bad_number(r.gpu_hours),
            )
            self.rentals.append(row)
            if not row.counted:
                continue
            o, t = row.offer, row.t
            assert o is not None and t is not None  # counted
            row.usd = r.gpu_hours * self.rental_price(r, o, t)  # a contract is paid apart
            self.rental += row.usd
            self.rental_by_month[t] += row.usd
            self.rented_by_gpu[(o.gpu, t)] += r.gpu_hours
            if o.kind == "reserved":
                self.reserved_seen[(o.id, t)] += r.gpu_hours
            else:
                self.seen[(r.offer, r.workload, t)] += r.gpu_hours
        self.expect = defaultdict(float, self.rent_expect)
        for key, v in self.train_rent.items():
            self.expect[key] += v

    def _add_money(self) -> None:
        site = self.problem.site
        for (oid, t), gpus in self.res_active.items():
            self.reserved_gpus[(self.inputs.offers[oid].gpu, t)] += gpus
        colo = self.inputs.finance.colo_usd_per_kw_month
        for g, gpu in self.inputs.gpus.items():
            for t in range(self.T):
                own, servers = self.owned.get((g, t), 0), self.servers.get((g, t), 0)
                pw, hs = gpu_month_opex(
                    site, colo, gpu, own, servers, self.existing[(g, t)], self.busy.get((g, t), 0.0)
                )
                self.power += pw
                self.hosting += hs
                self.opex_by_month[t] += pw + hs
        committed, sales = sum(self.committed_by_month.values()), sum(self.sales_by_month.values())
        self.total = self.capex + self.power + self.hosting + self.rental + committed - sales
        r = self.inputs.finance.discount_rate
        self.npv = sum(self.month_total(t) * discount_factor(r, t) for t in range(self.T)) - (
            self.residual + self.existing_residual
        ) * discount_factor(r, self.T)

    def month_total(self, t: int) -> float:
        """Recomputed cash of month t: capex + power + hosting + rentals + contracts - sales."""
        return (
            self.capex_by_month.get(t, 0.0)
            + self.opex_by_month.get(t, 0.0)
            + self.rental_by_month.get(t, 0.0)
            + self.committed_by_month.get(t, 0.0)
            - self.sales_by_month.get(t, 0.0)
        )
