"""GPU procurement planner: decide which GPUs to buy and rent, and when.

The library face, for notebooks and scripts (the ``planner`` command calls the same stages)::

    >>> import planner
    >>> plan = planner.solve("problems/inference_startup.yaml", time_limit=30)
    >>> plan.status
    'optimal'
    >>> frames = plan.frames()
    >>> list(frames)[:4]
    ['purchases', 'rentals', 'reservations', 'fleet']
    >>> round(frames["cash_flow"]["total_usd"].sum()) == round(plan.totals.total_usd)
    True

:func:`solve` loads, solves and verifies a problem; :func:`read_plan` reads a plan JSON
written by ``planner solve --json``; :meth:`Plan.frames` gives its tables as pandas
DataFrames. Nothing is imported until first use, so ``import planner`` stays instant and
loads no stage (checked by tests/test_architecture.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.inputs.problem import Inputs
    from planner.plan.data import Plan

__version__ = "0.1.0"
__all__ = ["Plan", "__version__", "read_plan", "solve"]


def solve(
    problem: str | Path | dict[str, Any] | Inputs,
    *,
    solver: str = "auto",
    time_limit: float | None = None,
    gap: float | None = None,
) -> Plan:
    """Solve a problem and return its verified :class:`~planner.plan.data.Plan`.

    ``problem``: a problem file's path, the same content as a mapping (what ``yaml.safe_load``
    of a problem file gives), or resolved ``Inputs``. ``time_limit`` (seconds) bounds the
    whole call as it bounds ``planner solve``; None takes the file's ``solver.time_limit_s``.

    Raises the planner's errors, as the command exits with them: ``InputError`` (bad input,
    exit 2), ``InfeasibleError`` (no plan; its ``violations`` say which workload or limit and
    by how much, exit 3), ``SolverError``, and ``VerificationError`` if the independent check
    rejects the solver's plan (a bug to report).
    """
    import time

    from planner.base.errors import VerificationError
    from planner.plan.make import plan_problem
    from planner.verify import verify_report

    started = time.perf_counter()
    inputs = _inputs(problem)
    limit = time_limit if time_limit is not None else inputs.problem.solver.time_limit_s
    plan = plan_problem(inputs, solver=solver, time_limit=limit, gap=gap, deadline=started + limit)
    findings = verify_report(inputs, plan).findings
    if findings:
        raise VerificationError(
            "a bug: the verifier rejected the solver's own plan; the checks that failed:",
            [f"{f.family} check: {f.message}" for f in findings],
        )
    return plan


def _inputs(problem: str | Path | dict[str, Any] | Inputs) -> Inputs:
    """Resolved inputs from a path, a mapping (validated like a file) or ``Inputs``."""
    from planner.base.errors import InputError
    from planner.inputs.problem import Inputs, load_problem, load_problem_text

    if isinstance(problem, Inputs):
        return problem
    if isinstance(problem, str | Path):
        return load_problem(problem)
    if isinstance(problem, dict):
        import yaml

        return load_problem_text(yaml.safe_dump(problem, sort_keys=False), "<dict>")
    raise InputError(
        f"planner.solve: a problem is a path, a mapping or Inputs, not {type(problem).__name__}"
    )


def read_plan(path: str | Path) -> Plan:
    """A plan read back from a JSON file written by ``planner solve --json`` (bad files are
    an ``InputError`` with a short message)."""
    from planner.plan.data import load_plan

    return load_plan(path)


def __getattr__(name: str) -> Any:
    if name == "Plan":  # the class, for type hints and isinstance, loaded on first use
        from planner.plan.data import Plan

        return Plan
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
