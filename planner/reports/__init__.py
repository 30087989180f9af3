"""Reports read a :class:`planner.plan.data.Plan` and never import PuLP."""
