"""The behaviour fingerprint of a plan, for the before/after regression of refactors.

``signature(plan_json)`` keeps what a refactor must not change (objective, totals, purchases,
rentals, reservations, workloads) and drops what may (solve time, version, file paths).
Regenerate the stored fingerprints only when a change of behaviour is intended:
``python -m tests.golden`` rewrites ``tests/fixtures/golden/*.json`` from ``problems/``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
PROBLEMS = sorted((ROOT / "problems").glob("*.yaml"))

_WORKLOAD_KEYS = (
    "name",
    "kind",
    "model",
    "gpu",
    "gpus",
    "config",
    "cost_usd",
    "meets_target",
    "predicted",
    "target",
)


def signature(plan: dict[str, Any]) -> dict[str, Any]:
    """The parts of a JSON plan that define its behaviour."""
    return {
        "status": plan["status"],
        "objective_usd": plan["objective_usd"],
        "totals": plan["totals"],
        "purchases": plan["purchases"],
        "rentals": plan["rentals"],
        "reservations": plan["reservations"],
        "workloads": [{k: w[k] for k in _WORKLOAD_KEYS} for w in plan["workloads"]],
    }


def regenerate() -> None:
    from planner.inputs.problem import load_problem
    from planner.plan.make import plan_problem

    GOLDEN.mkdir(parents=True, exist_ok=True)
    for path in PROBLEMS:
        plan = plan_problem(load_problem(path), time_limit=60)
        sig = signature(json.loads(plan.to_json()))
        (GOLDEN / f"{path.stem}.json").write_text(json.dumps(sig, indent=1, sort_keys=True) + "\n")
        print(
            f"wrote {GOLDEN / path.stem}.json: objective ${sig['objective_usd']:,.2f}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    regenerate()
