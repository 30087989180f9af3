"""HiGHS's thread count per run: the exact proof of a small model runs on two threads
and the first MILP run on two threads (:func:`planner.optimize.whole.proof_threads`) and every
other run on one, in one process.
HiGHS 1.16 fixes its thread count per calling thread at the first run, and a later run in
that thread asking for another count fails at once; every run therefore has a thread of
its own (:func:`planner.optimize.backends._run_cancellable`). A forked child (a scenario's
own solve) must solve too."""

from __future__ import annotations

import multiprocessing
import random

import pulp
import pytest

from planner.optimize.backends import _BulkHiGHS


def _covering(seed: int = 0, n: int = 40) -> pulp.LpProblem:
    """A small integer covering problem that HiGHS branches on (it is not solved in presolve)."""
    rnd = random.Random(seed)
    prob = pulp.LpProblem("cover", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{i}", 0, 5, cat=pulp.LpInteger) for i in range(n)]
    prob += pulp.lpSum(rnd.randint(5, 40) * v for v in x)
    for _ in range(25):
        prob += pulp.lpSum(rnd.randint(0, 9) * v for v in x) >= rnd.randint(40, 90)
    return prob


def _solve(threads: int) -> float:
    prob = _covering()
    prob.solve(_BulkHiGHS(msg=False, threads=threads, timeLimit=20))
    assert prob.sol_status == pulp.LpSolutionOptimal
    return pulp.value(prob.objective)


def _child(queue) -> None:
    queue.put(_solve(1))


def test_thread_counts_may_change_between_runs():
    first = _solve(1)
    assert _solve(2) == pytest.approx(first)
    assert _solve(1) == pytest.approx(first)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_fork_after_a_two_thread_run_solves():
    expected = _solve(2)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(30)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0
    assert queue.get(timeout=1) == pytest.approx(expected)
