r"""The MILP: buy, own, rent and reserve GPUs to meet every workload at least present cost.

Stage 3 of the flow. Builds a PuLP problem from :class:`~planner.inputs.problem.Inputs` (already
validated) and :class:`~planner.optimize.candidates.Candidates` (physics already applied). It never
reads files and never solves; :mod:`planner.optimize.solve` does that.

Notation
--------
=================  ==========================================================================
``g``              GPU type, bought in a server type of ``S_g`` slots: *full* (HGX: a server
                   comes with ``S_g`` cards) or *partial* (PCIe: cards added ``n_g`` at a
                   time); ``C_g`` chassis price, ``K_g`` card price, ``W^host_g`` host watts
                   per server, ``P^idle_g``, ``P^tdp_g`` card watts
``t``              month 0..T-1, ``H = 730`` hours each; ``s`` load slice with ``w_s`` h/month;
                   ``d_t = (1 + r)^(-t/12)`` the discount factor at the annual rate ``r``
``j, c``           training job and its candidate (GPU ``g_c``, ``k_c`` GPUs, ``h_c`` wall
                   hours to finish); window months ``W_j``, window hours ``H_j``
``k, r``           serving workload and candidate (GPU ``g_r``, ``m_r`` GPUs per replica,
                   ``mu_r`` req/s per replica within the p95 SLO); demand ``D_kts`` req/s
``o``              rental offer: GPU ``g_o``, price ``p_o`` $/GPU-h, kind on-demand, spot or
                   reserved (term ``L_o`` months), cap ``A_o`` GPUs, unit ``u_o``
``e``              electricity $/kWh x PUE / 1000 (so watts x hours x e = dollars);
                   ``colo`` $/kW-month of IT load; ``host`` $/GPU-month
``rho_g(a)``       resale share of a card of age ``a`` months (:mod:`planner.physics.economics`)
``i``              an entry of ``fleet.owned`` (issue 20): ``N_i`` existing cards of type
                   ``g_i``, in service from month ``t_i`` (0, or ``arrives``), age ``a_it``
                   months at the start of month t (from ``bought``, or from arrival)
``E_gt``           existing cards of type g in service in month t before any sale
``sigma_g(a)``     what a sale fetches per $ of catalog price: the used-market curve at age a
                   (whatever ``finance.residual`` says; :func:`planner.physics.economics.sale_share`)
``F_g``            running cost of one existing card a month: ``H e (P^idle_g + W^host_g/S_g) +
                   host + colo (P^tdp_g + W^host_g/S_g)/1000`` (it came in its catalog server
                   type: no chassis capex, its share of the host watts)
``o in C``         committed offers, one per ``fleet.contracts`` entry: ``A_o`` GPUs in the
                   months of the term inside the horizon, price ``p_o`` paid used or not
=================  ==========================================================================

Variables
---------
``buy[g,t]``      integer servers bought at the start of month t
``cards[g,t]``    partial servers: integer nodes of cards bought (``n_g`` cards each); full
                  servers: the expression ``S_g buy[g,t]``. ``own[g,t] = sum_{tau<=t} cards``
``owned[g,t]``    integer nodes of cards owned in month t, equal to ``own[g,t] / n_g`` (the
                  ``fleet_owned`` rows); ``capacity`` and ``train_gpus`` read ``n_g owned[g,t]``
                  for ``own[g,t]`` (the solver then branches on a month's fleet as one integer)
``y[j,c]``        binary, job j runs as candidate c
``a[j,c,t]``      binary, the job uses owned GPUs in month t (then ``own >= k_c``)
``z[j,c,t,s]``    wall hours of job j on owned GPUs in month t, slice s
``r[j,c,o,t]``    wall hours of job j rented from offer o in month t (spot hours progress
                  1/(1+overhead))
``n[k,r,t,s]``    integer replicas of workload k on owned GPUs
``q[k,r,o,t,s]``  replicas rented from offer o, continuous: the average over the slice's hours
                  of hourly rentals, with at least one whole replica always up (``serve_floor``)
``use[j,c,o]``    binary, job j's candidate c runs on restricted offer o (a cap, minimum term
                  or block)
``loc[j,p]``      binary, job j runs at place p (a provider, or owned GPUs; ``providers:
                  single``)
``on[k,r,p]``     binary, replica type r may serve workload k in spare period p (the largest
                  type in use is at least as fast as r); ``L[k,p]`` (``largest``) its rate
``alloc[k,b,r,t,s]``  request mixes (``requests:``): req/s of capacity replica type r (owned
                  and rented replicas pooled) gives bucket b of workload k
``res[o,t]``      integer instances of reserved offer o committed from month t for ``L_o`` months
``sell[i,t]``     integer nodes (``n_g`` cards) of existing entry i sold at the start of month
                  t (entries with ``sell: allowed``); ``X_gt = sum_{i: g_i = g} sum_{tau<=t}
                  n_g sell[i,tau]`` cards sold by month t

Objective (``npv_cost``): the present value of all cash less the resale value
-----------------------------------------------------------------------------
.. math::
   \min \sum_{g,t} \Big[ d_t (C_g buy_{gt} + K_g cards_{gt})
      + A_t \big(H e (W^{host}_g buy_{gt} + P^{idle}_g cards_{gt})
                 + colo (W^{host}_g buy_{gt} + P^{tdp}_g cards_{gt}) / 1000
                 + host\, cards_{gt}\big)
      - d_T K_g \rho_g(T - t)\, cards_{gt} \Big]
      + \sum_{g,t} d_t e (P^{tdp}_g - P^{idle}_g) busy_{gt}
      + \sum_{j,c,o,t} d_t p_o \lceil k_c/u_o \rceil u_o\, r_{jcot}
      + \sum_{k,r,o\,\notin reserved,t,s} d_t p_o m_r w_s q_{krots}
      + \sum_{o \in reserved, t} p_o u_o H A^{L_o}_t res_{ot}

plus what the team already has (:func:`add_existing_fleet_constraints`,
:func:`~planner.optimize.model.objective._existing_cost_terms`; every term is 0 without ``fleet``):

.. math::
   + \sum_i N_i \big(F_{g_i} \sum_{t \ge t_i} d_t - d_T K_{g_i} \rho_{g_i}(a_{iT})\big)
   - \sum_{i,t} n_{g_i} sell_{it} \big(d_t K_{g_i} \sigma_{g_i}(a_{it}) + A_t F_{g_i}
        - d_T K_{g_i} \rho_{g_i}(a_{iT})\big)
   + \sum_{o \in C} \sum_{t \in term_o} d_t p_o A_o H

(the first and last sums are constants: existing cards pay their running costs and are
valued at the horizon end like purchases, by ``finance.residual``; a sale earns the
used-market price now and gives up both; a contract is paid whatever the plan does, and its
hours cost 0 at the margin in the ``r`` and ``q`` terms above),
with ``A_t = sum_{tau=t}^{T-1} d_tau`` (a purchase pays its running costs every month to the
horizon end; ``A^L_t`` over the L months of a term), ``busy[g,t] = sum_s w_s sum m_r
n[k,r,t,s] + sum k_c z[j,c,t,s]`` (GPU-hours). Under ``residual: straight_line`` the resale is
the book value of cards and chassis; under ``none`` it is 0. With ``r = 0`` and no resale the
objective is the undiscounted total (``nominal_total``), which is what the budgets cap.

Constraints (label used for the constraint names)
-------------------------------------------------
One row per registered family (:data:`planner.optimize.model.families.FAMILIES`; the builder
names every row through :func:`~planner.optimize.model.families.row_name`):

``train_assign_<j>``            sum_c y[j,c] = 1
``train_progress_<j>_<c>``      sum_ts z + sum_ot r (1/(1+ovh) for spot) = h_c y[j,c]
``train_window_<j>_<c>``        sum_ts z + sum_ot r <= H_j y[j,c]
``train_month_<j>_<c>_<t>``     sum_s z[t,s] + sum_o r[o,t] <= H y[j,c]: one run at a time
``train_spot_share_<j>_<c>``    spot progress <= share_j h_c y[j,c]
``train_slot_<j>_<c>_<t>_<s>``  z <= w_s a[j,c,t]
``train_use_<j>_<c>_<t>``       a[j,c,t] <= y[j,c]
``train_gpus_<j>_<c>_<t>``      k_c a[j,c,t] <= own[g_c,t]
``train_offer_use_<j>_<c>_<o>`` sum_t r[j,c,o,t] <= H_j use[j,c,o] on a restricted offer (a cap,
                                a minimum term or block): its block counts against the cap in
                                every month of the window (``availability``)
``train_min_term_<j>_<c>_<o>``  sum_t r[j,c,o,t] >= L^min_o use[j,c,o]: a run on an offer with a
                                minimum term lasts at least that term
``train_location_<j>_<p>``      (``providers: single``) wall hours of job j at place p (a
                                provider, or owned GPUs) <= H_j loc[j,p]; ``train_location_<j>``:
                                sum_p loc[j,p] = 1
``serve_demand_<k>_<t>_<s>``    sum_r mu_r (n + sum_o q) - R_k L[k,p] >= D[k,t,s] / max_load_k:
                                headroom, and R_k replicas of the largest type in use down
``serve_floor_<k>_<t>_<s>``     sum_r (n + sum_o q) >= 1 + R_k: a live service keeps replicas up
``serve_count_<k>_<t>_<s>``     sum_r (n + sum_o q) + sum_i (K_{i-1} - K_i) on_i >= K_0 with
                                K_i = ceil(D / mu_i) + R_k (incremental form): no replica in use
                                is faster than the largest type, so a cell holds K_j replicas
                                when that type is j (a valid cut: no whole plan is lost)
``serve_largest_<k>_<p>``       L[k,p] - sum_i (mu_i - mu_{i-1}) on[k,i,p] >= mu_0 over the types
                                faster than the slowest (mu_0), sorted by rate, per spare period
                                p of 12 months (above 5,000 rental cells per type:
                                ``serve_largest_<k>_<r>_<p>``, L >= mu_r on[k,r,p])
``serve_largest_order_<k>_<r>_<p>`` on_{i+1} <= on_i (on_i: the largest type in use is at least
                                as fast as i)
``serve_in_use_<k>_<r>_<t>``    sum_{s, o} (n + q)[k,r,.,t,s] <= (sum of their bounds) on[k,r,p]
                                (t in p): a type serves only in periods it is counted in L; up
                                to 50,000 rental cells one row per slice, ``sum_o (n + q) <= up_r
                                on`` (``serve_in_use_<k>_<r>_<t>_<s>``)
``serve_bucket_<k>_<b>_<t>_<s>`` a request mix instead of serve_demand (shares ``f_b``, rates
                                ``mu_rb``): sum_r alloc[b,r] >= f_b D[k,t,s] / max_load_k
``serve_share_<k>_<r>_<t>_<s>``  sum_b alloc[b,r] / mu_rb <= sum_o x[r,o] - R_k on[k,r,p]: each
                                replica type in use keeps R spares (buckets are routed by type)
``capacity_<g>_<t>_<s>``        sum m_r n + sum k_c z / w_s <= own[g,t]
``fleet_owned_<g>_<t>``         owned[g,t] = owned[g,t-1] + cards[g,t] / n_g (ownable types)
``server_slots_<g>_<t>``        partial servers: own[g,t] <= S_g sum_{tau<=t} buy
``server_used_<g>_<t>``         partial servers: buy[g,t] <= cards[g,t] / n_g (a server is bought
                                with its first card: bought empty earlier it costs no less)
``reserved_cap_<o>_<t>_<s>``    sum m_r q[.,o,t,s] <= u_o sum_{t-L_o < tau <= t} res[o,tau]
``availability_<o>_<t>_<s>``    sum m_r q[.,o,t,s] <= A_o (offers with a cap)
``provider_cap_<p>_<g>_<t>_<s>`` sum over p's offers of g: m_r q + paid u (training blocks) +
                                u_o sum res (reserved instances active) <= P_pg (offers.provider_caps)
``budget_capex``                sum (C_g buy + K_g cards) <= capex budget (cash, undiscounted;
                                existing cards are never in it)
``budget_total``                nominal_total <= total budget (when given; contracts in, sale
                                proceeds out)
``power_cap_<t>``               sum_g (W^host_g servers + P^tdp_g cards owned + (E - X)(P^tdp_g
                                + W^host_g/S_g)) PUE/1000 <= cap kW
``sell_at_most_<g>_<i>``        sum_t sell[i,t] <= floor(N_i / n_g): whole nodes, each sold once
``licence_<g>``                 sum_t buy[g,t] = 0 for GeForce cards unless the site allows them,
                                and for liquid-cooled units without ``site.liquid_cooling``
                                (renting consumer cards from a provider is allowed)

With ``fleet.owned``, ``own[g,t]`` in ``train_gpus`` and ``capacity`` is the whole fleet
``own[g,t] + E_gt - X_gt`` (the constant ``E_gt`` on the right-hand side). A committed offer's
``r`` and ``q`` exist only in the months of its term inside the horizon, capped at ``A_o``.

Size reductions (the optimum is unchanged; see also :mod:`planner.optimize.candidates`)
------------------------------------------------------------------------------
Variables that no optimal plan needs are not created, and implied bounds are stated:

* ``q`` exists only for (candidate, offer) pairs that are not dominated replica for replica
  (:func:`planner.optimize.candidates.serve_rental_pairs`): per candidate the cheapest uncapped
  non-reserved offer, capped offers cheaper than it and every reserved offer; and no
  non-reserved pair when an uncapped pair gives at least its req/s for at most its price per
  replica-hour.
* ``n`` exists only for owned replica types not matched on the same GPUs by a smaller one
  (:func:`planner.optimize.candidates.owned_serve_options`: ``tp_a | tp_b`` and ``(tp_b/tp_a) mu_a >=
  mu_b``).
* ``r`` exists only for the cheapest offer per training candidate and kind
  (:func:`train_offers`): nothing but price and kind tells training offers apart.
* ``n``, ``a`` and ``z`` exist only on GPU types that can be owned at all (not a GeForce card
  without ``consumer_gpus_allowed``, one node within the capex budget and the power cap) and
  whose ownership can pay off against renting (:func:`worth_owning`; else ``buy`` is 0).
* bounds: ``buy[g,t] <= min(capex / (C_g + n_g K_g), cap kW / ((W^host_g + n_g P^tdp_g)
  PUE / 1000))`` servers (the cheapest purchase is one server with one node of cards),
  ``n[k,r,t,s] <= max(1, ceil(D_kts / mu_r))``, ``q[k,r,o,t,s] <= max(1, D_kts / mu_r)``.
"""

from __future__ import annotations

import pulp

from planner.inputs.problem import Inputs
from planner.optimize.candidates import Candidates
from planner.optimize.model.core import (
    EQ,
    GE,
    LE,
    PlannerModel,
    existing_age,
    existing_in_service,
    existing_start,
    nid,
)
from planner.optimize.model.families import (
    FAMILIES,
    Family,
    dual_families,
    family_of,
    row_name,
)
from planner.optimize.model.fleet import (
    add_capacity_constraints,
    add_existing_fleet_constraints,
    add_purchase_variables,
    add_server_constraints,
)
from planner.optimize.model.limits import add_budget_constraints, add_site_constraints
from planner.optimize.model.objective import (
    OwnedCoefficients,
    build_cost_terms,
    existing_month_costs,
    nominal_total,
    owned_coefficients,
    power_coefficients,
    present_value,
)
from planner.optimize.model.ownable import (
    node_kw,
    rent_value_per_gpu_hour,
    worth_owning,
)
from planner.optimize.model.rentals import add_provider_cap_constraints, add_rental_constraints
from planner.optimize.model.serving import (
    SPARE_PERIOD_MONTHS,
    ServingForm,
    add_mix_serving_constraints,
    add_serving_constraints,
    rental_cells,
    serve_offers,
    spare_flags,
)
from planner.optimize.model.training import OWNED, add_training_constraints, train_offers

__all__ = [
    "EQ",
    "EXACT_RENTAL_CELLS",
    "FAMILIES",
    "GE",
    "INCREMENTAL_SPARE_CELLS",
    "IN_USE_PER_CELL",
    "LE",
    "OWNED",
    "SPARE_PERIOD_MONTHS",
    "Family",
    "OwnedCoefficients",
    "PlannerModel",
    "ServingForm",
    "add_budget_constraints",
    "add_capacity_constraints",
    "add_existing_fleet_constraints",
    "add_mix_serving_constraints",
    "add_purchase_variables",
    "add_provider_cap_constraints",
    "add_rental_constraints",
    "add_server_constraints",
    "add_serving_constraints",
    "add_site_constraints",
    "add_training_constraints",
    "build_cost_terms",
    "build_model",
    "dual_families",
    "existing_age",
    "existing_in_service",
    "existing_month_costs",
    "existing_start",
    "family_of",
    "nid",
    "node_kw",
    "nominal_total",
    "owned_coefficients",
    "power_coefficients",
    "rent_value_per_gpu_hour",
    "row_name",
    "serve_offers",
    "serving_form",
    "spare_flags",
    "train_offers",
    "worth_owning",
]

# The thresholds below are read by :func:`serving_form`, here in the package, when a model is
# built: tests patch them on ``planner.optimize.model``.

# Up to this many rented (pair, month, slice) cells every rented replica is an integer of
# the model (the exact optimum); above it, uncapped rentals are solved as continuous and made
# whole afterwards (the repair step, :func:`planner.optimize.whole.whole_replicas`). Integer rentals
# everywhere left CBC and HiGHS at a 2-4 % gap after 60 s on the reference (~1,000 cells);
# small models are then proven on the exact model from the repaired plan
# (:data:`planner.optimize.whole.EXACT_POLISH_INTEGERS`), which needs that plan as its start.
EXACT_RENTAL_CELLS = 300
# Up to this many rented cells the spare's in-use rows are per load slice
# (:func:`~planner.optimize.model.serving._add_in_use`;
# from 0 since issue 25: they make the reference provable). Above (the 200-workload, 36-month
# benchmark: 116k cells, 259k rows), the LP relaxation that the MIP start rounds no longer
# finished in half of a 120 s limit, and HiGHS's own plan cost 4x more.
IN_USE_PER_CELL = (0, 50_000)

# Up to this many rented cells the spare's largest rate is in incremental form
# (:func:`~planner.optimize.model.serving._largest_replica`): it makes small models provable. Above, the per-type form stays:
# with the incremental one the searched start of 50 workloads x all GPUs x 36 months left a
# $5.13M plan at 120 s where the per-type form leaves $3.86M.
INCREMENTAL_SPARE_CELLS = 5_000


def serving_form(m: PlannerModel) -> ServingForm:
    """The form of ``m``'s serving rows, from its rented cells and the thresholds above."""
    cells = rental_cells(m)
    return ServingForm(
        exact=cells <= EXACT_RENTAL_CELLS,
        per_cell=IN_USE_PER_CELL[0] <= cells <= IN_USE_PER_CELL[1],
        incremental=cells <= INCREMENTAL_SPARE_CELLS,
    )


def build_model(
    inputs: Inputs, cands: Candidates, force_ownable: frozenset[str] = frozenset()
) -> PlannerModel:
    """Build the MILP described in this module's docstring; ``force_ownable``: GPU types whose
    purchase is kept even where :func:`worth_owning` would rule it out (a two-stage plan's
    scenario, whose purchases are shared with scenarios where they may pay)."""
    prob = pulp.LpProblem(nid("gpu_plan", inputs.problem.name)[:60] or "gpu_plan", pulp.LpMinimize)
    m = PlannerModel(prob=prob, inputs=inputs, cands=cands, force_ownable=force_ownable)
    add_purchase_variables(m)
    add_existing_fleet_constraints(m)
    add_training_constraints(m)
    add_serving_constraints(m, serving_form(m))
    add_capacity_constraints(m)
    add_rental_constraints(m)
    add_provider_cap_constraints(m)
    add_server_constraints(m)
    build_cost_terms(m)
    m.prob += present_value(m), "npv_cost"
    add_budget_constraints(m)
    add_site_constraints(m)
    return m
