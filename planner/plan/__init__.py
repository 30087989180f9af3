"""Stage 5, the plan: pure data (:mod:`planner.plan.data`), read from a solved model
(:mod:`planner.plan.extract`: readout, fleet, workloads, accounting, assumptions), made from a
problem (:mod:`planner.plan.make`)."""
