"""GPU procurement planner: decide which GPUs to buy and rent, and when.

The library face, for notebooks and scripts (the ``planner`` command calls the same stages;
README.md carries this example, and tests/test_readme_example.py runs the README's copy)::

    >>> import planner
    >>> plan = planner.solve("problems/inference_startup.yaml", time_limit=30)  # and verified
    >>> plan.status
    'optimal'
    >>> frames = plan.frames()  # the plan's tables as pandas DataFrames
    >>> list(frames)[:4]
    ['purchases', 'rentals', 'reservations', 'fleet']
    >>> round(frames["cash_flow"]["total_usd"].sum()) == round(plan.totals.total_usd)
    True
    >>> planner.write_plan(plan, "outputs/inference_startup.json")  # as `solve --json` does
    >>> planner.read_plan("outputs/inference_startup.json").totals == plan.totals
    True
    >>> try:
    ...     planner.solve("problems/no_such_problem.yaml")
    ... except planner.InputError as e:  # bad input: the command exits 2
    ...     print(int(e.exit_code))
    2

:func:`solve` loads, solves and verifies a problem; :func:`write_plan` saves a plan as JSON
and :func:`read_plan` reads one back (or one written by ``planner solve --json``);
:meth:`Plan.frames` gives its tables as pandas DataFrames. The errors the commands exit with
are importable from here: :class:`InputError` (exit 2), :class:`OutputError` (2),
:class:`InfeasibleError` (3; ``diagnosis`` says why), :class:`VerificationError` (4;
``violations`` lists the failed checks), :class:`SolverError` (1), all :class:`PlannerError`.
Nothing is imported until first use, so ``import planner`` stays instant and loads no stage
(checked by tests/test_architecture.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.inputs.problem import Inputs
    from planner.plan.data import Plan

__version__ = "0.1.0"
__all__ = [
    "InfeasibleError",
    "InputError",
    "OutputError",
    "Plan",
    "PlannerError",
    "SolverError",
    "VerificationError",
    "__version__",
    "read_plan",
    "solve",
    "write_plan",
]
_ERRORS = (
    "InfeasibleError",
    "InputError",
    "OutputError",
    "PlannerError",
    "SolverError",
    "VerificationError",
)


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

    Raises the planner's errors, as the command exits with them (all importable from
    ``planner``): ``InputError`` (bad input, exit 2), ``InfeasibleError`` (no plan; its
    ``diagnosis`` says which workload or limit and by how much, exit 3), ``SolverError``, and
    ``VerificationError`` if the independent check rejects the solver's plan (its
    ``violations`` list the failed checks; a bug to report).
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


def write_plan(plan: Plan, path: str | Path) -> None:
    """Save a plan as the JSON ``planner solve --json`` writes (atomically: never half a file;
    missing folders are made; an unwritable path is an ``OutputError``)."""
    from planner.plan.data import write_json

    write_json(plan, path)


def __getattr__(name: str) -> Any:
    """The plan class and the error classes, loaded on first use."""
    if name == "Plan":  # the class, for type hints and isinstance
        from planner.plan.data import Plan

        return Plan
    if name in _ERRORS:
        from planner.base import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
