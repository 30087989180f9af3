"""Demand scenarios in the problem file (issue 28, inputs): the ``scenarios`` and ``risk``
sections, each scenario resolved as the problem it would be, and every bad entry refused
with exit 2 naming the scenario, the field and its line. No solves: these are inputs only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.base.errors import ExitCode, InputError
from planner.cli import cli
from planner.inputs.problem import Inputs, Scenario, load_problem, load_problem_text

ROOT = Path(__file__).resolve().parent.parent
BASE = (ROOT / "problems" / "2m_budget.yaml").read_text()

THREE = """
scenarios:
  - {name: base, probability: 0.5}
  - {name: slow, probability: 0.3, set: {workloads.serve.chat.traffic.growth_per_month: 0.0}}
  - {name: viral, probability: 0.2, scale: {serving_demand: 2.0}}
risk: {measure: expected}
"""


def _load(extra: str) -> Inputs:
    return load_problem_text(BASE + extra, "p.yaml", base_dir=ROOT / "problems")


def _refused(extra: str, *parts: str) -> str:
    """The InputError of the base problem plus ``extra``; it names every one of ``parts``."""
    with pytest.raises(InputError) as exc:
        _load(extra)
    msg = str(exc.value)
    for part in parts:
        assert part in msg, (part, msg)
    return msg


@pytest.fixture(scope="module")
def three() -> Inputs:
    return _load(THREE)


def test_three_scenarios_resolve(three: Inputs):
    base = three.problem.workloads.serve[0].traffic
    assert [s.name for s in three.scenarios] == ["base", "slow", "viral"]
    assert [s.probability for s in three.scenarios] == [0.5, 0.3, 0.2]
    assert all(isinstance(s, Scenario) for s in three.scenarios)
    by = {s.name: s.inputs.problem.workloads.serve[0].traffic for s in three.scenarios}
    assert by["base"] == base
    assert by["slow"].growth_per_month == 0.0
    assert by["slow"].daily_active_users == base.daily_active_users
    assert by["viral"].daily_active_users == 2 * base.daily_active_users
    assert by["viral"].growth_per_month == base.growth_per_month
    assert three.problem.risk is not None and three.problem.risk.measure == "expected"


def test_scenarios_say_what_changes_and_have_none_of_their_own(three: Inputs):
    s = {x.name: x for x in three.scenarios}
    assert s["base"].changes == ()
    assert s["slow"].changes == ("workloads.serve.chat.traffic.growth_per_month = 0",)
    assert s["viral"].changes == ("serving demand x 2",)
    for x in three.scenarios:
        assert x.inputs.scenarios == ()
        assert x.inputs.problem.scenarios is None and x.inputs.problem.risk is None
        assert x.inputs.problem.month_labels() == three.problem.month_labels()
        assert set(x.inputs.gpus) == set(three.gpus)


def test_scenario_sources_name_the_file_and_the_scenario(three: Inputs):
    assert three.source_path == "p.yaml"
    paths = [s.inputs.source_path for s in three.scenarios]
    assert paths == ["p.yaml [scenario base]", "p.yaml [scenario slow]", "p.yaml [scenario viral]"]
    digests = {s.inputs.source_sha256 for s in three.scenarios} | {three.source_sha256}
    assert len(digests) == 4 and all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests)


def test_load_problem_keeps_the_scenarios(tmp_path: Path):
    p = tmp_path / "p.yaml"
    p.write_text(BASE + THREE)  # the reference reads offers.yaml: a scenario reads the same
    inputs = load_problem(p)
    assert [s.name for s in inputs.scenarios] == ["base", "slow", "viral"]
    assert inputs.scenarios[1].inputs.source_path == f"{p} [scenario slow]"


def test_an_alias_and_a_path_missing_from_the_file():
    inputs = _load(
        """
scenarios:
  - {name: dear, probability: 0.6, set: {power_price: 0.2, rent_change: 0.1, utilization: 0.4}}
  - {name: cheap, probability: 0.4, set: {site.hosting_usd_per_gpu_month: 50, buy_change: -0.2}}
"""
    )
    dear, cheap = (s.inputs.problem for s in inputs.scenarios)
    assert dear.site.power_usd_per_kwh == 0.2 and dear.market.rent_change_per_year == 0.1
    assert dear.workloads.serve[0].traffic.utilization == 0.4
    assert inputs.problem.site.power_usd_per_kwh == 0.12  # the file's own value is kept
    assert cheap.site.hosting_usd_per_gpu_month == 50
    assert cheap.market.buy_change_per_year == -0.2


@pytest.mark.parametrize("key", ["lead_months", "market.lead_months"])
def test_a_lead_time_is_the_same_in_every_scenario(key):
    """Purchases are ordered once for all scenarios: a scenario's lead time is refused."""
    with pytest.raises(InputError, match=r"scenario 'late'.*lead time"):
        _load(
            f"""
scenarios:
  - {{name: base, probability: 0.5}}
  - {{name: late, probability: 0.5, set: {{{key}: 6}}}}
"""
        )


def test_no_scenarios_is_the_problem_as_before():
    inputs = _load("")
    assert inputs.scenarios == ()
    assert inputs.problem.scenarios is None and inputs.problem.risk is None


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_probabilities_must_sum_to_one():
    extra = """
scenarios:
  - {name: a, probability: 0.5}
  - {name: b, probability: 0.4}
"""
    line = _line_of(BASE + extra, "scenarios:")
    _refused(extra, f"p.yaml:{line}: scenarios:", "sum to 0.9", "a: 0.5", "b: 0.4")


@pytest.mark.parametrize("p", ["0", "-0.2", "1.5", ".nan", "true"])
def test_a_probability_out_of_range_is_refused(p: str):
    extra = f"""
scenarios:
  - {{name: a, probability: 1}}
  - {{name: b, probability: {p}}}
"""
    line = _line_of(BASE + extra, "name: b")
    _refused(extra, f"p.yaml:{line}: scenarios[1].probability")


def test_duplicate_names_name_both_indexes():
    extra = """
scenarios:
  - {name: a, probability: 0.5}
  - {name: b, probability: 0.25}
  - {name: a, probability: 0.25}
"""
    _refused(extra, "scenarios[2].name", "'a'", "scenarios[0] and scenarios[2]")


def test_an_unknown_key_is_named_with_the_scenario_and_line():
    extra = """
scenarios:
  - {name: a, probability: 0.5}
  - {name: b, probability: 0.5, set: {workloads.serve.chat.traffic.growth_per_mnth: 0}}
"""
    line = _line_of(BASE + extra, "name: b")
    msg = _refused(
        extra,
        f"p.yaml:{line}: scenarios[1].set.workloads.serve.chat.traffic.growth_per_mnth",
        "scenario 'b'",
        "growth_per_mnth",
        "growth_per_month",  # did you mean
    )
    assert "--vary" not in msg


@pytest.mark.parametrize(
    "key", ["horizon.months", "solver.time_limit_s", "profiles.0", "custom_gpus.t4.tdp_w"]
)
def test_keys_that_change_the_shape_are_refused(key: str):
    extra = f"""
scenarios:
  - {{name: long, probability: 1.0, set: {{{key}: 48}}}}
"""
    root = key.split(".")[0]
    _refused(extra, f"scenarios[0].set.{key}", "scenario 'long'", f"under {root}", "forecast")


def test_a_key_of_text_or_a_flag_is_refused():
    extra = """
scenarios:
  - {name: a, probability: 1.0, set: {site.consumer_gpus_allowed: 1}}
"""
    _refused(extra, "scenarios[0].set.site.consumer_gpus_allowed", "is not a number")


@pytest.mark.parametrize("value", ["true", "'0.1'", "fast"])
def test_a_value_that_is_not_a_number_is_refused(value: str):
    extra = f"""
scenarios:
  - {{name: a, probability: 1.0, set: {{power_price: {value}}}}}
"""
    _refused(extra, "scenarios[0].set.power_price", "expected a number")


def test_a_value_out_of_the_fields_range_names_the_scenario_and_its_line():
    extra = """
scenarios:
  - {name: hot, probability: 1.0, set: {power_price: 50}}
"""
    line = _line_of(BASE + extra, "name: hot")
    _refused(extra, "(scenario 'hot')", f"p.yaml:{line}: site.power_usd_per_kwh", "got 50")


def test_warnings_a_scenario_shares_with_the_file_are_said_once():
    extra = """
fleet:
  contracts:
    - {provider: lambda, gpu: h100-sxm, count: 8, start: 2026-01, end: 2026-06,
       usd_per_gpu_hour: 2.0}
scenarios:
  - {name: a, probability: 0.5}
  - {name: b, probability: 0.5, set: {power_price: 0.2}}
"""
    inputs = _load(extra)
    assert len(inputs.warnings) == 1 and "fleet.contracts[0]" in inputs.warnings[0]


def test_scaling_a_problem_that_serves_nothing_is_refused():
    extra = """
scenarios:
  - {name: big, probability: 1.0, scale: {serving_demand: 2}}
"""
    text = BASE.split("  serve:")[0] + extra
    with pytest.raises(InputError, match=r"scenarios\[0\]\.scale\.serving_demand.*no serving"):
        load_problem_text(text, "p.yaml", base_dir=ROOT / "problems")


def test_risk_needs_scenarios():
    extra = "\nrisk: {measure: worst_case}\n"
    line = _line_of(BASE + extra, "risk:")
    _refused(extra, f"p.yaml:{line}: risk:", "scenarios")


def test_alpha_is_for_cvar_only():
    extra = THREE.replace("risk: {measure: expected}", "risk: {measure: expected, alpha: 0.95}")
    _refused(extra, "risk.alpha", "cvar")
    extra = THREE.replace("risk: {measure: expected}", "risk: {measure: worst_case, weight: 2}")
    _refused(extra, "risk.weight", "cvar")
    cvar = _load(THREE.replace("risk: {measure: expected}", "risk: {measure: CVaR, alpha: 0.95}"))
    assert cvar.problem.risk is not None
    assert (cvar.problem.risk.measure, cvar.problem.risk.alpha) == ("cvar", 0.95)


def test_a_scale_beyond_the_users_limit_is_exit_2_naming_the_scenario(tmp_path: Path):
    extra = """
scenarios:
  - {name: base, probability: 0.5}
  - {name: galactic, probability: 0.5, scale: {serving_demand: 1000}}
"""
    p = tmp_path / "p.yaml"
    text = BASE.replace("daily_active_users: 50000", "daily_active_users: 50000000") + extra
    p.write_text(text)
    r = CliRunner().invoke(cli, ["solve", str(p), "--no-excel"])
    assert r.exit_code == ExitCode.BAD_INPUT, r.output
    line = _line_of(p.read_text(), "daily_active_users")
    assert "scenario 'galactic'" in r.output
    assert f"{p.name}:{line}:" in r.output and "daily_active_users" in r.output
    assert "Traceback" not in r.output


def test_a_reservations_term_is_the_same_in_every_scenario():
    """Reservations are signed once for all scenarios: their term and unit are refused."""
    offer = (
        "  extra:\n    - {id: res, provider: cudo, gpu: a100-pcie-80gb, kind: reserved, "
        "usd_per_gpu_hour: 0.9, gpus_per_instance: 1, term_months: 6, source: test, "
        "as_of: 2026-11}\n"
    )
    assert "\noffers: {files: [offers.yaml]}\n" in BASE  # the base's offers section, extended
    for key in ("offers.extra.res.term_months: 12", "offers.extra.res.gpus_per_instance: 2"):
        with pytest.raises(InputError, match=r"scenario 'long'.*reservation"):
            load_problem_text(
                BASE.replace(
                    "\noffers: {files: [offers.yaml]}\n",
                    "\noffers:\n  files: [offers.yaml]\n" + offer,
                    1,
                )
                + "scenarios:\n  - {name: base, probability: 0.5}\n"
                + f"  - {{name: long, probability: 0.5, set: {{{key}}}}}\n",
                "p.yaml",
                base_dir=ROOT / "problems",
            )
