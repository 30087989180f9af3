"""Stages 3-4: candidates (what can run where), the model (PuLP, one module per
constraint family), starts, bounds and the solve."""
