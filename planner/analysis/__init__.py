"""Tools on top of the pipeline: infeasibility and plan explanations, what-if sweeps and
break-even, catalog comparison."""
