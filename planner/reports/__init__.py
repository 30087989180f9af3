"""Reports read a :class:`planner.plan.Plan` and never import PuLP."""
