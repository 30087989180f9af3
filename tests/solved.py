"""The shipped problems solved once per test process, shared by every test module.

The reference (problems/2m_budget.yaml) takes ~17 s to solve; nine modules read its plan.
Each caller gets its own deep copy, so a test that tampers with a plan changes no other
test's. With pytest-xdist the workers share each plan through a file: one solves, checks
that its JSON reads back as the same plan, and the others read that JSON (files under
$TMPDIR/planner-tests-<run id>, a few hundred KB per run).
"""

from __future__ import annotations

import copy
import fcntl
import functools
import hashlib
import os
import tempfile
from pathlib import Path

from planner.inputs.problem import Inputs
from planner.plan.data import Plan, load_plan, write_json

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "problems" / "2m_budget.yaml"


@functools.cache
def _solve(path: str, two_stage_s: float) -> tuple[Inputs, Plan]:
    from planner.inputs.problem import load_problem

    inputs = load_problem(path)
    shared = _shared_file(path, two_stage_s)
    if shared is None:
        return inputs, _plan(inputs, two_stage_s)
    # xdist workers share one solve per problem: the first solves and writes its plan's JSON
    # (temporary file, then rename) under an exclusive lock; the others wait for the lock and
    # read it. Waiting never takes longer than solving, and it saves a whole solve's CPU.
    with open(shared.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            plan = _plan(inputs, two_stage_s)
            tmp = shared.with_suffix(".tmp")
            write_json(plan, tmp)
            if load_plan(tmp) != plan:  # the other workers must test the plan solved here
                raise AssertionError(f"{path}: the plan read back from its JSON is not the plan")
            os.replace(tmp, shared)
            return inputs, plan
    return inputs, load_plan(shared)


def _plan(inputs: Inputs, two_stage_s: float) -> Plan:
    from planner.plan.make import plan_problem
    from tests.golden import TIME_LIMITED, TIME_LIMITED_S

    if Path(inputs.source_path).stem in TIME_LIMITED:
        # a benchmark-size problem stops at its limit either way: the tests check its plan
        return plan_problem(inputs, time_limit=TIME_LIMITED_S)

    if inputs.scenarios:
        # a two-stage problem may spend its whole limit (180 s for uncertain_demand.yaml)
        # improving on a verified plan; the tests check that plan, in a fraction of that
        return plan_problem(inputs, time_limit=min(two_stage_s, _limit(inputs)))
    return plan_problem(inputs)  # the file's own solver options (default 60 s)


def _shared_file(path: str, two_stage_s: float) -> Path | None:
    """Where this test run's workers keep the plan of ``path``; None outside pytest-xdist."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    d = Path(tempfile.gettempdir()) / f"planner-tests-{run}"
    d.mkdir(exist_ok=True)
    # the file's text in the key too: a run id given again (--testrunuid) never reads a plan of
    # an edited problem
    text = Path(path).read_bytes()
    key = hashlib.sha256(f"{path}:{two_stage_s}:".encode() + text).hexdigest()[:16]
    return d / f"{Path(path).stem}-{key}.json"


# Seconds at most the shared solve gives a two-stage problem (benchmarks/scenarios.py
# measures them at their own limits). The fixture of tests/fixtures/scenarios ends its steps
# in ~2 s, but the tests read its exact purchases, so the limit leaves room for a busy
# machine (5 s did not suffice at a load average of 7). A caller that checks only that the
# plan is whole, verified and within budget can ask for less (:func:`solved`).
TWO_STAGE_S = 12.0


def _limit(inputs: Inputs) -> float:
    return inputs.problem.solver.time_limit_s


@functools.cache
def _two_stage(path: str) -> bool:
    from planner.inputs.problem import load_problem

    return bool(load_problem(path).scenarios)


def solved(path: str | Path = REFERENCE, two_stage_s: float = TWO_STAGE_S) -> tuple[Inputs, Plan]:
    """(inputs, plan) of the problem file at ``path`` with the default solver and its limit;
    a two-stage problem gets at most ``two_stage_s`` seconds."""
    resolved = str(Path(path).resolve())
    if two_stage_s != TWO_STAGE_S and not _two_stage(resolved):
        two_stage_s = TWO_STAGE_S  # one shared solve of a problem without scenarios
    inputs, plan = _solve(resolved, two_stage_s)
    return copy.deepcopy(inputs), plan.model_copy(deep=True)
