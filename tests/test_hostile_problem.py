"""Hostile problem files, second round: the sections added since the first (fleets, contracts,
inline offers, discounts, request mixes, measured profiles) and the diagnoses of infeasible
problems. Each case ends in a named error (exit 2, file, field path, what is allowed), an
infeasibility that names the limit (exit 3), or a correct plan; never a traceback.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.base.errors import InputError, PlannerError
from planner.base.units import check_text
from planner.base.yamlevents import EventDoc
from planner.cli import cli
from planner.inputs.problem import load_problem, load_problem_text
from planner.inputs.profiles import load_profile_file
from planner.optimize.candidates import build_candidates, check_candidates

ROOT = Path(__file__).resolve().parent.parent

# A small problem of a team that owns GPUs, holds a contract, has a discount, writes an offer
# inline, serves a request mix and measured a profile: every section of this round.
SMALL = yaml.safe_load(
    """
name: small brownfield
horizon: {start: 2027-01, months: 3}
budget: {capex_usd: 200000}
site: {power_usd_per_kwh: 0.12, pue: 1.3, power_cap_kw: 100}
gpus: [h100-sxm, a100-sxm-80gb]
fleet:
  owned:
    - {gpu: a100-sxm-80gb, count: 8, bought: 2025-06, sell: allowed}
    - {gpu: h100-sxm, count: 8, arrives: 2027-02}
  contracts:
    - {provider: cloud, gpu: h100-sxm, count: 8, start: 2026-10, end: 2027-02,
       usd_per_gpu_hour: 2.0, gpus_per_instance: 8, fabric: infiniband, fabric_gbps_per_gpu: 400}
offers:
  files: []
  discounts: {cloud: 0.2}
  extra:
    - {id: cloud-h100-od, provider: cloud, gpu: h100-sxm, kind: on_demand, usd_per_gpu_hour: 3.0,
       gpus_per_instance: 8, max_gpus: 64, source: test, as_of: "2026-11"}
profiles: [profiles.yaml]
workloads:
  serve:
    - name: chat
      model: llama-3-8b
      start: 2027-01
      traffic: {daily_active_users: 2000, requests_per_user_per_day: 10}
      requests:
        - {name: short, prompt: [1, 256], output: [1, 128], share: 0.6}
        - {name: long, prompt: [257, 2000], output: [129, 500], share: 0.4}
      slo: {p95_ttft_ms: 1000, p95_tpot_ms: 60}
      redundancy: 1
"""
)
PROFILES = yaml.safe_load(
    """
serve:
  - {model: llama-3-8b, gpu: h100-sxm, tp: 1, precision: fp16, prompt: 256, output: 128,
     points: [{rps: 5.0, p95_ttft_ms: 100, p95_tpot_ms: 20}], source: test, as_of: 2026-11}
train:
  - {model: llama-3-8b, gpu: h100-sxm, gpus: 8, tokens_per_s_per_gpu: 3000, source: test,
     as_of: 2026-11}
"""
)


def run(*args: object) -> tuple[int, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, " ".join(r.output.split())


def write(tmp: Path, problem: dict, profiles: Any = PROFILES) -> Path:
    (tmp / "profiles.yaml").write_text(yaml.safe_dump(profiles, allow_unicode=True))
    p = tmp / "p.yaml"
    p.write_text(yaml.safe_dump(problem, allow_unicode=True))
    return p


def edited(edit) -> dict:
    d = copy.deepcopy(SMALL)
    edit(d)
    return d


def test_the_small_problem_plans(tmp_path):
    code, out = run("solve", write(tmp_path, SMALL), "--no-excel", "--time-limit", "30")
    assert code == 0, out


# ------------------------------------------------------------------ contracts


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"fabric": "none", "fabric_gbps_per_gpu": 400}, "fleet.contracts[0].fabric_gbps_per_gpu"),
        ({"fabric": None, "fabric_gbps_per_gpu": 400}, "fleet.contracts[0].fabric_gbps_per_gpu"),
        ({"fabric": "roce", "fabric_gbps_per_gpu": None}, "fleet.contracts[0].fabric:"),
    ],
)
def test_a_contract_fabric_without_its_bandwidth_or_the_reverse_is_bad_input(
    tmp_path, fields, says
):
    def edit(d):
        c = d["fleet"]["contracts"][0]
        for k, v in fields.items():
            if v is None:
                c.pop(k)
            else:
                c[k] = v

    code, out = run("solve", write(tmp_path, edited(edit)), "--no-excel")
    assert code == 2 and says in out and "fabric" in out, out


# ------------------------------------------------------------------ inline offers


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("committed", True),
        ("available_from", "2027-03"),
        ("available_until", "2027-01"),
        ("list_usd_per_gpu_hour", 0.01),
    ],
)
def test_fields_only_the_planner_writes_are_refused_in_inline_offers(tmp_path, field, value):
    p = write(tmp_path, edited(lambda d: d["offers"]["extra"][0].update({field: value})))
    code, out = run("solve", p, "--no-excel")
    assert code == 2 and f"offers.extra[0].{field}" in out and "set by the planner" in out, out


def test_fields_only_the_planner_writes_are_refused_in_offers_files(tmp_path):
    offer = dict(SMALL["offers"]["extra"][0], committed=True)
    (tmp_path / "my-offers.yaml").write_text(yaml.safe_dump({"offers": [offer]}))
    p = write(tmp_path, edited(lambda d: d["offers"].update(files=["my-offers.yaml"], extra=[])))
    code, out = run("solve", p, "--no-excel")
    assert code == 2 and "offers[0].committed" in out and "set by the planner" in out, out


# ------------------------------------------------------------------ ceilings


def _contract(**kw) -> dict:
    c = {"provider": "cloud", "gpu": "h100-sxm", "count": 8, "start": "2027-01",
         "end": "2027-02", "usd_per_gpu_hour": 2.0}  # fmt: skip
    return {**c, **kw}


@pytest.mark.parametrize(
    ("fleet", "says"),
    [
        ({"contracts": [_contract(count=10_000_000, usd_per_gpu_hour=1000)]},
         "fleet.contracts[0].count: Input should be less than or equal to 1000000"),
        ({"contracts": [_contract(count=1_000_000, usd_per_gpu_hour=1000)]},
         "fleet.contracts[0]: commits $1.46e+12"),
        ({"contracts": [_contract(count=400_000, usd_per_gpu_hour=900)] * 2},
         "fleet.contracts: the contracts commit"),
        ({"owned": [{"gpu": "h100-sxm", "count": 10_000_000, "bought": "2026-01"}]},
         "fleet.owned[0].count: Input should be less than or equal to 1000000"),
        ({"owned": [{"gpu": "h100-sxm", "count": 600_000, "bought": "2026-01"}] * 2},
         "fleet.owned: 1,200,000 GPUs in all"),
        ({"contracts": [_contract(count=600_000)] * 2}, "fleet.contracts: 1,200,000 GPUs"),
    ],
)  # fmt: skip
def test_fleets_and_contracts_have_the_readme_ceilings(tmp_path, fleet, says):
    code, out = run("solve", write(tmp_path, edited(lambda d: d.update(fleet=fleet))), "--no-excel")
    assert code == 2 and says in out, out


def test_headroom_counts_in_the_fleet_size_ceiling(tmp_path):
    def edit(d):
        d["workloads"]["serve"][0]["slo"]["max_load"] = 1e-9

    code, out = run("solve", write(tmp_path, edited(edit)), "--no-excel")
    assert code == 2 and "workloads.serve[0].slo.max_load" in out and "1,000,000 GPUs" in out


def test_a_service_of_almost_no_requests_is_not_planned(tmp_path):
    """1e-300 users made a cost per million tokens of 1e304 that no plan can hold."""

    def edit(d):
        d["workloads"]["serve"][0]["traffic"]["daily_active_users"] = 1e-300

    code, out = run("solve", write(tmp_path, edited(edit)), "--no-excel")
    assert code == 2 and "traffic.daily_active_users" in out and "one request a day" in out


def test_a_boolean_discount_is_not_a_number(tmp_path):
    p = write(tmp_path, edited(lambda d: d["offers"]["discounts"].update(cloud=True)))
    code, out = run("solve", p, "--no-excel")
    assert code == 2 and "offers.discounts.cloud" in out and "got a boolean" in out, out
    assert "less than 1" not in out


# ------------------------------------------------------------------ text a workbook cannot hold


def _set_path(path: tuple, value: Any):
    def edit(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("name",), "tiny\x0c"),
        (("name",), "tiny\ufffe"),
        (("workloads", "serve", 0, "name"), "chat\ud800"),
        (("workloads", "serve", 0, "name"), "chat\x01"),
        (("workloads", "serve", 0, "requests", 0, "name"), "short\uffff"),
        (("offers", "extra", 0, "source"), "quote\x1b[2J"),
        (("fleet", "contracts", 0, "provider"), "cloud\x7f"),
    ],
)
def test_text_a_workbook_cannot_hold_is_refused_at_input(tmp_path, path, value):
    code, out = run("solve", write(tmp_path, edited(_set_path(path, value))), "--no-excel")
    field = ".".join(str(p) for p in path).replace(".0", "[0]")
    assert code == 2 and field in out and "not allowed in text" in out, out


def test_keys_and_list_items_get_the_same_text_check(tmp_path):
    cases = [
        lambda d: d.update(custom_gpus={"t4\x0b": {"like": "l4"}}),
        lambda d: d.update(gpus=["h100-sxm\x1b[31m"]),
        lambda d: d["offers"]["discounts"].update({"cl\ufffeoud": 0.1}),
    ]
    for edit in cases:
        code, out = run("solve", write(tmp_path, edited(edit)), "--no-excel")
        assert code == 2 and "not allowed in text" in out, out
    for ok in ("chat (EU)", "tab\there", "naïve 中文 ✓"):
        assert check_text(ok) == ok


# ------------------------------------------------------------------ profiles


def test_a_directory_named_as_the_profiles_file_says_so(tmp_path):
    p = write(tmp_path, edited(lambda d: d.update(profiles=["sub"])))
    (tmp_path / "sub").mkdir()
    code, out = run("solve", p, "--no-excel")
    assert code == 2 and "profiles[0]" in out and "is a directory" in out and "not found" not in out


def _many_profiles(n: int) -> str:
    from benchmarks.inputs_profiles import profiles_text

    return profiles_text(n)


def test_a_large_profiles_file_loads_fast_and_errors_keep_their_lines(tmp_path):
    """5,000 entries (~0.7 MB) through the event reader in under 5 s, 1 ms an entry (it takes
    ~0.1 ms; the checked reader took ~10 ms an entry); a bad entry deep in the file still
    names its line."""
    text = _many_profiles(5_000)
    big = tmp_path / "big.yaml"
    big.write_text(text)
    t0 = time.process_time()
    pf, doc = load_profile_file(big)
    assert time.process_time() - t0 < 5
    assert isinstance(doc, EventDoc) and len(pf.serve) == 5_000
    assert pf.serve[4_321].source == "run 4321"
    lines = text.splitlines()
    lines[3_751] = lines[3_751].replace("tp: ", "tp: -")
    big.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as exc:
        load_profile_file(big)
    assert "big.yaml:3752: serve[3750].tp" in str(exc.value)


def test_unknown_ids_in_a_profiles_file_name_their_lines(tmp_path):
    prof = copy.deepcopy(PROFILES)
    prof["serve"] = prof["serve"] * 30
    prof["serve"][7] = dict(prof["serve"][7], gpu="h100-sxn")
    prof["serve"] = [dict(e, prompt=100 + i) for i, e in enumerate(prof["serve"])]
    code, out = run("solve", write(tmp_path, SMALL, prof), "--no-excel")
    assert code == 2 and "serve[7].gpu: unknown gpu 'h100-sxn'" in out, out
    text = (tmp_path / "profiles.yaml").read_text().splitlines()
    line = 1 + next(i for i, s in enumerate(text) if "gpu: h100-sxn" in s)
    assert line > 20 and f"profiles.yaml:{line}: serve[7].gpu" in out, out


@pytest.mark.parametrize(
    "text",
    [
        "serve: " + "[" * 40 + "]" * 40 + "\n",
        "serve: []\nserve: []\n",
        "serve: [{model: &m llama-3-8b}]\ntrain: [*m]\n",
        "serve: !!python/object/apply:os.system [true]\n",
    ],
)
def test_hostile_profiles_files_are_bad_input(tmp_path, text):
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(InputError):
        load_profile_file(tmp_path / "p.yaml")


# ------------------------------------------------------------------ diagnoses


def test_an_existing_fleet_over_the_power_cap_is_named(tmp_path):
    def edit(d):
        d["fleet"]["owned"] = [{"gpu": "h100-sxm", "count": 1000, "bought": "2026-01"}]
        d["site"]["power_cap_kw"] = 50

    code, out = run("solve", write(tmp_path, edited(edit)), "--no-excel")
    assert code == 3 and "fleet.owned" in out and "1,000 x h100-sxm" in out, out
    assert "site.power_cap_kw = 50.0 kW" in out and "needs 0.0 kW" not in out


def test_the_power_probe_counts_the_existing_fleet(tmp_path):
    """8 existing H100 that may not be sold plus what must be bought: the smallest cap named
    is the one that admits a plan (0.5 kW below it does not)."""

    def edit(d, cap):
        d.update(gpus=["h100-sxm"], offers={"files": []}, fleet={"owned": [
            {"gpu": "h100-sxm", "count": 8, "bought": "2026-01"}]})  # fmt: skip
        d["budget"]["capex_usd"] = 2_000_000
        d["site"]["power_cap_kw"] = cap
        d["workloads"]["serve"][0]["traffic"]["daily_active_users"] = 1_500_000
        d["market"] = {"lead_months": 0}  # in stock: no rentals could bridge a lead time

    code, out = run("solve", write(tmp_path, edited(lambda d: edit(d, 20))), "--no-excel")
    assert code == 3 and "site.power_cap_kw = 20.0 kW" in out, out
    need = float(out.split("admits a plan")[1].split(" is ")[1].split(" kW")[0].replace(",", ""))
    assert need > 20 + 8 * 0.9  # more than the existing cards' draw on their own
    p = write(tmp_path, edited(lambda d: edit(d, need + 0.05)))
    assert run("solve", p, "--no-excel", "--time-limit", "30")[0] == 0


def _windowed(start: str, end: str):
    def edit(d):
        d["gpus"] = ["rtx-4090"]
        d["fleet"] = {"contracts": [_contract(gpu="rtx-4090", gpus_per_instance=8, start=start,
                                              end=end, usd_per_gpu_hour=0.5)]}  # fmt: skip
        d["profiles"] = []

    return edited(edit)


def test_a_contract_outside_the_months_needed_names_its_term(tmp_path):
    code, out = run("solve", write(tmp_path, _windowed("2027-03", "2027-03")), "--no-excel")
    assert code == 3 and "contract-1-cloud-rtx-4090 2027-03..2027-03" in out, out
    assert "none in 2027-01..2027-02" in out and "offer(s) fit" not in out


def test_the_warning_of_a_contract_that_ended_is_shown(tmp_path):
    p = write(tmp_path, _windowed("2026-03", "2026-12"))
    assert any("ends 2026-12, before the horizon" in w for w in load_problem(p).warnings)
    code, out = run("solve", p, "--no-excel")
    assert code == 3 and "note: fleet.contracts[0]: ends 2026-12, before the horizon" in out, out


def test_a_resolution_error_is_bad_input_not_a_crash(tmp_path, monkeypatch):
    """Any pydantic error the resolution meets (a model built from valid fields) is exit 2."""
    import planner.inputs.problem as problem
    from planner.inputs.catalog import Offer

    def broken(*a, **k):
        return Offer(id="x", provider="p", gpu="g", kind="on_demand", usd_per_gpu_hour=-1,
                     source="s", as_of="2026")  # fmt: skip

    p = write(tmp_path, SMALL)
    monkeypatch.setattr(problem, "contract_offer", broken)
    with pytest.raises(InputError, match=r"fleet.contracts\[0\]: the contract is not a valid"):
        load_problem(p)
    monkeypatch.undo()
    monkeypatch.setattr(problem, "_trusted_offers", broken)
    with pytest.raises(InputError, match="do not make a valid Offer: usd_per_gpu_hour"):
        load_problem(p)


# ------------------------------------------------------------------ fuzz


HOSTILE: list[Any] = [
    None, True, False, 0, -1, 0.5, 1e-300, 1e308, -1e308, 10**30, float("nan"), float("inf"),
    "", "abc", "2027-13", "x" * 3000, [], {}, [1, 2], {"a": 1}, "\x00", "a\ufffe",
]  # fmt: skip
SECTIONS = [("problem", "fleet"), ("problem", "offers"), ("problem", "workloads"), ("profiles",)]


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


BASE = {"problem": SMALL, "profiles": PROFILES}
PATHS = [p for p in _paths(BASE) if any(p[: len(s)] == s and len(p) > len(s) for s in SECTIONS)]


def _dump(data: Any, **kw: Any) -> str:
    """``yaml.safe_dump`` with libyaml's emitter when there is one (~5x faster)."""
    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), **kw)


def _mutate(path: tuple, op: str, value: Any) -> dict:
    tree = copy.deepcopy(BASE)
    parent = tree
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "set":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif op == "unknown key" and isinstance(parent[last], dict):
        parent[last]["bogus_key"] = value
    else:  # a second copy of a list item, or of a mapping's entry under another key
        target = parent[last]
        if isinstance(target, list) and target:
            target.append(copy.deepcopy(target[0]))
        elif isinstance(parent, dict):
            parent[f"{last}_2"] = copy.deepcopy(target)
    return tree


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.sampled_from(PATHS),
    st.sampled_from(["set", "set", "set", "delete", "unknown key", "duplicate"]),
    st.sampled_from(HOSTILE),
)
def test_mutations_of_the_new_sections_load_or_fail_cleanly(path, op, value):
    tree = _mutate(path, op, value)
    started = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "profiles.yaml").write_text(_dump(tree["profiles"]))
        text = _dump(tree["problem"], allow_unicode=True)
        try:
            inputs = load_problem_text(text, "mutant.yaml", base_dir=Path(tmp))
            cands = build_candidates(inputs)
            check_candidates(inputs, cands)
        except PlannerError as exc:
            assert exc.exit_code in (2, 3), exc
            assert "Traceback" not in str(exc) and len(str(exc)) < 20_000
    assert time.process_time() - started < 10, (path, op, value)


def test_nan_and_inf_never_reach_the_plan_through_the_new_sections():
    """Each number of the new sections, set to NaN or inf, is refused by name."""
    numbers = [p for p in PATHS if isinstance(_get(BASE, p), int | float)
               and not isinstance(_get(BASE, p), bool)]  # fmt: skip
    assert len(numbers) >= 10
    for path in numbers:
        for bad in (math.nan, math.inf):
            tree = _mutate(path, "set", bad)
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "profiles.yaml").write_text(_dump(tree["profiles"]))
                with pytest.raises(InputError, match="finite|less than|greater than"):
                    load_problem_text(_dump(tree["problem"]), "mutant.yaml", base_dir=Path(tmp))


def _get(tree: Any, path: tuple) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def test_a_warning_the_planner_builds_is_shown_on_a_successful_solve(tmp_path):
    """A contract that ended before the horizon is no error (it costs nothing now), but the
    user is told: the warning is printed on stderr, and the plan is still made."""
    from click.testing import CliRunner

    from planner.cli import cli

    # the small problem (a fraction of a second; problems/inference_startup.yaml took ~3 s)
    # with its contract ended in 2025-06
    past = edited(lambda d: d["fleet"]["contracts"][0].update(start="2025-01", end="2025-06"))
    problem = write(tmp_path, past)
    res = CliRunner().invoke(cli, ["solve", str(problem), "--no-excel", "--time-limit", "30"])
    assert res.exit_code == 0, res.output
    assert "warning:" in res.output and "2025-06" in res.output


def test_a_lead_time_no_rental_can_bridge_is_named(tmp_path):
    """The same problem with the catalog's lead time (2 months for an H100) and nothing to rent:
    infeasible, and the diagnosis names the lead time, not a power cap or an offer."""

    def edit(d):
        d.update(gpus=["h100-sxm"], offers={"files": []}, fleet={})
        d["budget"]["capex_usd"] = 2_000_000
        d["site"]["power_cap_kw"] = 10_000

    code, out = run("solve", write(tmp_path, edited(edit)), "--no-excel")
    assert code == 3, out
    assert "purchases cannot arrive in time" in out and "h100-sxm: 2 month(s)" in out, out
