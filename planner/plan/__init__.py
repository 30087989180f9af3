"""Stage 5, the plan: pure data (:mod:`planner.plan.data.data`), read from a solved model
(:mod:`planner.plan.data.extract`), made from a problem (:mod:`planner.plan.data.make`)."""
