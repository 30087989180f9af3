"""The constraint-family registry (:mod:`planner.optimize.model.families`) agrees with the models
the builder makes from ``problems/``, with the table of the model's docstring and with the
families whose duals :mod:`planner.analysis.explain` reads. Models are built, never solved."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import planner.optimize.model as model_pkg
from planner.analysis.explain import DUAL_FAMILIES, _family
from planner.inputs.problem import load_problem
from planner.optimize.candidates import build_candidates
from planner.optimize.model import build_model
from planner.optimize.model.families import (
    BY_PREFIX,
    FAMILIES,
    dual_families,
    family_of,
    row_name,
)
from tests.test_request_mix import PROFILES
from tests.test_request_mix import _problem as mix_problem

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = sorted((ROOT / "problems").glob("*.yaml"))


def _families(path: Path) -> dict[str, list[str]]:
    """Family -> its constraint names, in the model built from the problem at ``path``."""
    inputs = load_problem(path)
    m = build_model(inputs, build_candidates(inputs))
    out: dict[str, list[str]] = {}
    for name in m.prob.constraints:
        out.setdefault(family_of(name) or "(none)", []).append(name)
    return out


@pytest.fixture(scope="module")
def problem_models() -> dict[str, dict[str, list[str]]]:
    return {p.name: _families(p) for p in PROBLEMS}


def _matches(name: str) -> list[str]:
    return [f.prefix for f in FAMILIES if name == f.prefix or name.startswith(f.prefix + "_")]


def test_every_row_of_the_problems_belongs_to_one_family(problem_models):
    assert PROBLEMS
    for problem, fams in problem_models.items():
        assert "(none)" not in fams, (problem, fams.get("(none)", [])[:5])
        for fam, names in fams.items():
            for name in names:
                # several prefixes match only when one registered prefix extends another:
                # the longest is the family (serve_largest_order is not serve_largest)
                found = _matches(name)
                assert max(found, key=len) == fam, (problem, name, found)
                assert all(fam.startswith(f) for f in found), (problem, name, found)


def test_the_only_nested_prefixes_are_known():
    """A name cannot say where a prefix ends; the one nesting in the registry is resolved by
    the longest match, and a new one should be a conscious choice."""
    nested = sorted(
        (a.prefix, b.prefix)
        for a in FAMILIES
        for b in FAMILIES
        if a is not b and b.prefix.startswith(a.prefix + "_")
    )
    assert nested == [("serve_largest", "serve_largest_order")]
    assert len(BY_PREFIX) == len(FAMILIES)


# One month of a two-bucket request mix with a spare and a total budget (the request-mix
# tests' problem): the families the problems do not create (request mixes, budget_total).
_REQUESTS = [
    {"name": "short", "prompt": [1, 256], "output": [1, 128], "share": 0.5},
    {"name": "long", "prompt": [257, 4000], "output": [129, 512], "share": 0.5},
]
_MIX = {**mix_problem(_REQUESTS, redundancy=1), "budget": {"capex_usd": 0, "total_usd": 1_000_000}}
# a loose provider cap: the family is built, the plan is the same
_MIX["offers"] = {
    **_MIX["offers"],
    "provider_caps": [{"provider": "quote", "gpu": "l4", "max_gpus": 1000}],
}


def test_every_family_is_created_by_a_problem_or_under_its_condition(problem_models, tmp_path):
    made = {fam for fams in problem_models.values() for fam in fams}
    missing = set(BY_PREFIX) - made
    # a family no problem creates is one the registry says is conditional ...
    assert all(BY_PREFIX[f].only_when for f in missing), sorted(missing)
    # ... and the small case built under those conditions creates it
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(PROFILES, sort_keys=False))
    (tmp_path / "mix.yaml").write_text(yaml.safe_dump(_MIX, sort_keys=False))
    mix = _families(tmp_path / "mix.yaml")
    assert "(none)" not in mix, mix.get("(none)")
    assert missing <= set(mix), sorted(missing - set(mix))


def _table_labels(doc: str) -> list[str]:
    """The family of each row of the docstring's constraint table (its first block of lines
    opening with a double-backquoted label, ``<prefix>_<ids>`` or ``<prefix>``)."""
    section = doc[doc.index("Constraints (label") : doc.index("Size reductions")].splitlines()
    start = next(i for i, line in enumerate(section) if line.startswith("``"))
    end = section.index("", start)
    rows = "\n".join(section[start:end])
    return re.findall(r"^``([a-z]+(?:_[a-z]+)*)(?:_<|``)", rows, flags=re.MULTILINE)


def test_the_docstring_table_lists_exactly_the_registered_families():
    labels = _table_labels(model_pkg.__doc__ or "")
    assert len(labels) == len(set(labels)), labels
    assert labels == [f.prefix for f in FAMILIES]


def test_explain_reads_the_registered_dual_families():
    assert set(DUAL_FAMILIES) <= set(BY_PREFIX)
    assert dual_families() == DUAL_FAMILIES
    assert _family("capacity_h100_sxm_2027_01_peak") == "capacity"
    assert _family("budget_total") == "budget_total"
    assert _family("serve_largest_order_chat_a100_2027_01") is None  # registered, no dual
    assert _family("rent_whole_x") is None


def test_an_unregistered_family_is_refused():
    assert row_name("licence", "rtx-4090") == "licence_rtx_4090"
    with pytest.raises(ValueError, match="rent_whole"):
        row_name("rent_whole", "chat")
