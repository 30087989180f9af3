"""Domain errors. The CLI turns every ``PlannerError`` into a clean message and exit code."""

from __future__ import annotations


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""

    exit_code = 1


class InputError(PlannerError):
    """Bad input: a problem, catalog or offers file the planner cannot use (exit code 2)."""

    exit_code = 2


class InfeasibleError(PlannerError):
    """The problem has no feasible plan (exit code 3); ``diagnosis`` says why."""

    exit_code = 3

    def __init__(self, message: str, diagnosis: list[str] | None = None) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis or []


class SolverError(PlannerError):
    """The solver failed for a reason other than infeasibility (exit code 1)."""

    exit_code = 1
