"""Solves for the page: one at a time, in the background, each under a time limit.

A job is a problem (already validated :class:`~planner.inputs.problem.Inputs`) to plan. The
runner has one worker thread, so a second what-if waits for the first; the page polls a
job's state (``queued``, ``running`` with its seconds against its limit, ``done`` with the
plan, ``failed`` with the CLI's error text). Every plan is verified independently, as
``planner solve`` does, before the page shows it. At most :data:`MAX_WAITING` jobs wait.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planner.base.errors import InfeasibleError, InputError, PlannerError, VerificationError
from planner.plan.data import Plan

MAX_WAITING = 4  # jobs queued behind the running one; more is refused (the page says so)
KEEP_JOBS = 50  # finished jobs kept for the page (their plans), oldest dropped first


@dataclass
class Job:
    """One solve: what it plans (``label``: the problem and its changes), its state and
    outcome. ``changes``: the what-if's ``KEY=VALUE`` list (empty for a base plan)."""

    id: int
    label: str
    changes: list[str]
    time_limit: float
    state: str = "queued"  # queued | running | done | failed
    started: float | None = None
    seconds: float = 0.0
    plan: Plan | None = None
    error: list[str] = field(default_factory=list)
    exit_code: int = 0
    base_id: int | None = None  # the plan this one is compared with

    def progress(self) -> dict[str, Any]:
        """The job's state for the page's poll."""
        elapsed = self.seconds if self.state in ("done", "failed") else (
            time.perf_counter() - self.started if self.started else 0.0
        )  # fmt: skip
        return {
            "id": self.id,
            "label": self.label,
            "state": self.state,
            "elapsed_s": round(elapsed, 1),
            "time_limit_s": self.time_limit,
            "share": min(1.0, elapsed / self.time_limit) if self.time_limit else 0.0,
            "error": self.error,
            "exit_code": self.exit_code,
        }


def error_lines(exc: PlannerError) -> list[str]:
    """The CLI's message for an error: ``error: <text>`` and its reasons, one per line
    (``planner.cli``'s printer says the same on stderr)."""
    if isinstance(exc, InfeasibleError):
        return [str(exc), *(f"- {line}" for line in exc.diagnosis)]
    lines = [f"error: {exc}"]
    if isinstance(exc, VerificationError):
        lines += [f"- {line}" for line in exc.violations]
    return lines


def solve_verified(inputs: Any, time_limit: float, solver: str = "auto") -> Plan:
    """``planner solve``'s path without its files: plan within ``time_limit`` seconds (the
    limit bounds the solve and its verification), verify, and refuse a plan the verifier
    rejects."""
    from planner.plan.make import plan_problem
    from planner.verify import verify_report

    deadline = time.perf_counter() + time_limit
    plan = plan_problem(inputs, solver=solver, time_limit=time_limit, deadline=deadline)
    report = verify_report(inputs, plan)
    if report.findings:
        raise VerificationError(
            "a bug: the verifier rejected the solver's own plan; please report it with the "
            "problem file. The checks that failed:",
            [f"{f.family} check: {f.message}" for f in report.findings],
        )
    return plan


class Runner:
    """One worker thread solving jobs in the order they came."""

    def __init__(self, solve: Callable[[Any, float], Plan] = solve_verified) -> None:
        self._solve = solve
        self._ids = itertools.count(1)
        self._queue: queue.Queue[tuple[Job, Any]] = queue.Queue()
        self._lock = threading.Lock()
        self.jobs: dict[int, Job] = {}
        self._thread = threading.Thread(target=self._work, name="planner-ui-solver", daemon=True)
        self._thread.start()

    def submit(
        self, inputs: Any, label: str, time_limit: float, changes: list[str] | None = None,
        base_id: int | None = None,
    ) -> Job:  # fmt: skip
        """Queue a solve of ``inputs``; an InputError when :data:`MAX_WAITING` already wait."""
        with self._lock:
            waiting = sum(1 for j in self.jobs.values() if j.state == "queued")
            if waiting >= MAX_WAITING:
                raise InputError(
                    f"{waiting} plans are already waiting for the solver (one solves at a "
                    "time); try again when one has finished"
                )
            job = Job(next(self._ids), label, list(changes or []), time_limit, base_id=base_id)
            self.jobs[job.id] = job
            self._forget_old()
        self._queue.put((job, inputs))
        return job

    def _forget_old(self) -> None:
        done = [j.id for j in self.jobs.values() if j.state in ("done", "failed")]
        for jid in done[: max(0, len(self.jobs) - KEEP_JOBS)]:
            del self.jobs[jid]

    def _work(self) -> None:
        while True:
            job, inputs = self._queue.get()
            job.state, job.started = "running", time.perf_counter()
            try:
                job.plan = self._solve(inputs, job.time_limit)
                job.state = "done"
            except PlannerError as exc:
                job.error, job.exit_code, job.state = error_lines(exc), int(exc.exit_code), "failed"
            except Exception as exc:  # a bug must not kill the page's only solver thread
                job.error = [f"internal error: {type(exc).__name__}: {exc}"]
                job.exit_code, job.state = 1, "failed"
            job.seconds = time.perf_counter() - job.started

    def wait(self, job_id: int, timeout: float) -> Job:
        """The job once finished, or as it is after ``timeout`` seconds (tests, the CLI)."""
        end = time.perf_counter() + timeout
        job = self.jobs[job_id]
        while job.state in ("queued", "running") and time.perf_counter() < end:
            time.sleep(0.05)
        return job
