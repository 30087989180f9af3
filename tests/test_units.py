"""One spelling everywhere: token suffixes and case-insensitive choices in problem files and on
the command line; booleans are never numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.base.errors import InputError
from planner.base.units import count_value, parse_count
from planner.inputs.problem import load_problem

ROOT = Path(__file__).resolve().parent.parent
BASE = yaml.safe_load((ROOT / "problems" / "2m_budget.yaml").read_text())


def _write(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    edit(data)
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    ("text", "value"),
    [("2T", 2e12), ("300B", 3e11), ("7e9", 7e9), ("1.5t", 1.5e12), ("2_000_000", 2e6), (5, 5.0)],
)
def test_count_suffixes(text, value):
    assert count_value(text) == value
    assert parse_count(text, "--tokens") == value


@pytest.mark.parametrize("bad", ["2Q", "", "T", True, "-5", "0"])
def test_bad_counts_are_input_errors(bad):
    with pytest.raises(InputError):
        parse_count(bad, "--tokens")


def test_problem_tokens_take_suffixes_and_enums_any_case(tmp_path):
    def edit(d):
        d["workloads"]["train"][0]["tokens"] = "2T"
        d["workloads"]["train"][0]["method"] = "Full"
        d["workloads"]["serve"][0]["precision"] = "FP16"

    inputs = load_problem(_write(tmp_path, edit))
    job = inputs.problem.workloads.train[0]
    assert job.tokens == 2e12 and job.method == "full"
    assert inputs.problem.workloads.serve[0].precision == "fp16"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("budget", "capex_usd"), "budget.capex_usd"),
        (("site", "power_usd_per_kwh"), "site.power_usd_per_kwh"),
        (("workloads", "train", 0, "tokens"), "workloads.train[0].tokens"),
    ],
)
def test_booleans_are_not_numbers(tmp_path, path, field):
    def edit(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = True

    with pytest.raises(InputError) as exc:
        load_problem(_write(tmp_path, edit))
    assert field in str(exc.value) and "boolean" in str(exc.value)


def test_bad_token_suffix_names_the_field_and_what_is_allowed(tmp_path):
    def edit(d):
        d["workloads"]["train"][0]["tokens"] = "2Q"

    with pytest.raises(InputError) as exc:
        load_problem(_write(tmp_path, edit))
    msg = str(exc.value)
    assert "workloads.train[0].tokens" in msg and "2Q" in msg and "1.5T" in msg
