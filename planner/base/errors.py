"""Domain errors and the exit-code table. The CLI maps every ``PlannerError`` to its code.

| code | meaning |
|---|---|
| 0 | success |
| 1 | unexpected failure (a bug, or the solver failed for a reason other than infeasibility) |
| 2 | bad input: file, line, field path, bad value, what is allowed; or an output that cannot be written |
| 3 | infeasible (``solve``, ``explain``), or does not fit (``estimate``) |
| 4 | a plan that fails independent verification (``verify``, ``solve``) |
| 5 | a sweep in which some scenarios failed (``whatif``, ``breakeven``; all results written) |
| 130 / 143 | interrupted by Ctrl-C / SIGTERM (one line, nothing half-written, no solver left running) |
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of every ``planner`` command (the README repeats this table)."""

    OK = 0
    UNEXPECTED = 1
    BAD_INPUT = 2
    INFEASIBLE = 3
    VERIFY_FAILED = 4
    SWEEP_INCOMPLETE = 5
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), the shell's convention
    TERMINATED = 143  # SIGTERM (128 + 15)


class Terminated(BaseException):
    """Raised by the SIGTERM handler so ``finally`` blocks run (solver ended, temp files gone)."""


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""

    exit_code: int = ExitCode.UNEXPECTED


class InputError(PlannerError):
    """Bad input: a problem, catalog or offers file the planner cannot use (exit code 2)."""

    exit_code = ExitCode.BAD_INPUT


class OutputError(PlannerError):
    """An output cannot be written (a directory, permissions, a full disk, a device): exit 2."""

    exit_code = ExitCode.BAD_INPUT


class InfeasibleError(PlannerError):
    """The problem has no feasible plan (exit code 3); ``diagnosis`` says why."""

    exit_code = ExitCode.INFEASIBLE

    def __init__(self, message: str, diagnosis: list[str] | None = None) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis or []


class SolverError(PlannerError):
    """The solver failed for a reason other than infeasibility (exit code 1)."""

    exit_code = ExitCode.UNEXPECTED


class VerificationError(PlannerError):
    """A plan breaks a constraint or a total of its problem (exit code 4); ``violations`` lists them."""

    exit_code = ExitCode.VERIFY_FAILED

    def __init__(self, message: str, violations: list[str] | None = None) -> None:
        super().__init__(message)
        self.violations = violations or []


def terminate(signum: int, frame: object) -> None:
    """Signal handler: raise, so ``finally`` blocks run (solver ended, files removed)."""
    raise Terminated(signum)
