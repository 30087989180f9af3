"""Plans handed back (``planner report PLAN.json``, ``planner verify PROBLEM PLAN.json``): a
plan JSON is checked before it is used. Each bad figure is exit 2 naming its JSON key path,
the value and what is allowed; never a traceback, a workbook from nonsense, or a workbook
that does not open."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.base.errors import InputError
from planner.cli import cli
from planner.plan.data import load_plan, validate_plan
from planner.reports.excel.assumptions import _ARow, _Assumptions
from planner.reports.formula_eval import evaluate_all
from tests.test_hostile import TINY as HOSTILE_TINY

ROOT = Path(__file__).resolve().parent.parent
NOMINAL = ROOT / "tests" / "fixtures" / "nominal"
PLANS = sorted(p for p in NOMINAL.glob("*.json") if p.stem != "per_gpu_servers")
REFERENCE = NOMINAL / "2m_budget.json"  # purchases, depreciation, three plan years
BROWNFIELD = NOMINAL / "brownfield.json"  # sales: negative net cash in some months


def run(*args: object) -> tuple[int, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, r.output


def _plan(path: Path = REFERENCE) -> dict:
    return json.loads(path.read_text())


def _write(tmp_path: Path, data: dict | str, name: str = "plan.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


# ------------------------------------------------------------------ valid plans keep loading


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_saved_plans_load_and_agree_with_themselves(path):
    plan = load_plan(path)
    assert validate_plan(plan) == []


# A problem that plans in a fraction of a second (problems/finetune_lab.yaml took ~2 s): a
# training job and a service, as the lab's (test_hostile's tiny lab, its job without spot).
TINY = HOSTILE_TINY.replace(", spot: {allowed: true, max_share: 0.6}", "")  # on-demand only


def test_a_fresh_plan_loads(tmp_path):
    problem = tmp_path / "tiny.yaml"
    problem.write_text(TINY)
    out = tmp_path / "tiny.json"
    assert run("solve", problem, "--no-excel", "--json", out)[0] == 0
    plan = load_plan(out)
    assert validate_plan(plan) == [] and plan.months


def test_legitimate_negatives_load():
    """Sales make net cash, the running total and present value negative; a residual below
    book value is a negative gain on sale: all figures a plan may hold."""
    data = _plan(BROWNFIELD)
    assert any(c["total_usd"] < 0 for c in data["cash_flow"])
    data = _plan()
    data["years"][-1]["gain_on_sale_usd"] = -24_606.67
    data["totals"]["npv_usd"] = -1.0
    data["workloads"][0]["slack"] = {"wall_hours": -5.0}
    assert validate_plan(load_plan_from(data)) == []


def load_plan_from(data: dict):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return load_plan(_write(Path(d), data))


# ------------------------------------------------------------------ each finding


def _set(path: str, value):
    """An edit of the plan at a dotted path with list indices (``purchases.0.count``)."""

    def edit(d: dict) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return edit


CASES = [
    # (name, edit, text the message holds)
    ("negative count", _set("purchases.0.count", -8), "purchases[0].count: -8; a count is a whole"),
    ("negative capex", _set("purchases.0.total_usd", -72000), "purchases[0].total_usd: -72000"),
    ("nan total", _set("totals.total_usd", float("nan")), "totals.total_usd: nan"),
    ("inf hours", _set("rentals.0.gpu_hours", float("inf")), "rentals[0].gpu_hours: inf"),
    ("huge usd", _set("totals.capex_usd", 1e20), "totals.capex_usd: 1e+20"),
    ("bool count", _set("fleet.0.owned", True), "fleet[0].owned: True"),
    ("text number", _set("rentals.0.usd", "12"), "rentals[0].usd: '12'"),
    ("fractional count", _set("purchases.0.nodes", 2.5), "purchases[0].nodes: 2.5"),
    ("no months", _set("months", []), "months: []"),
    ("bad month label", _set("purchases.0.month", "2027-13"), "purchases[0].month: '2027-13'"),
    ("month outside", _set("rentals.0.month", "2031-01"), "rentals[0].month: '2031-01'; a month"),
    ("months skip", _set("months.3", "2027-09"), "months[3]: '2027-09'"),
    ("short cash flow", lambda d: d.update(cash_flow=d["cash_flow"][:3]), "cash_flow: 3 entries"),
    ("years", lambda d: d.update(years=d["years"][:1]), "years: 1 entries"),
    ("by year", _set("depreciation.0.by_year_usd", [1.0]), "depreciation[0].by_year_usd"),
    ("unknown workload", _set("serve_allocations.0.workload", "nope"), "a workload of the plan"),
    ("unknown slice", _set("serve_allocations.0.slice", "noon"), "a slice of the plan"),
    ("duplicate names", lambda d: d["workloads"].append(d["workloads"][0]), "is used twice"),
    ("surrogate", _set("workloads.0.name", "chat\ud800"), "workloads[0].name: 'chat\\ud800'"),
    ("control", _set("problem_name", "a\x07b"), "problem_name: 'a\\x07b'"),
    ("gpu id control", _set("fleet.0.gpu", "h100\x1b"), "fleet[0].gpu"),
    ("long name", _set("workloads.0.model", "m" * 101), "workloads[0].model"),
    ("long text", _set("message", "x" * 10_001), "message: 'xxx"),
    ("missing", lambda d: d["totals"].pop("capex_usd"), "totals.capex_usd: missing"),
    ("unknown key", _set("totals.bonus_usd", 1.0), "totals.bonus_usd: not a field"),
    ("config fabric", _set("workloads.0.config.offers", {"o": -8.5}), "config.offers.o"),
    # found by the fuzz test below: a replica type's entry replaced by a number
    ("config replica", _set("workloads.1.config.replicas", [-1]), "config.replicas[0]: -1"),
    ("config layout", _set("workloads.1.config.replicas", [{"layout": 3}]), "replicas[0].layout"),
    ("deep", _set("workloads.0.config.x", json.loads("[" * 40 + "]" * 40)), "nested deeper"),
]


@pytest.mark.parametrize(("edit", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_plans_are_refused_naming_the_key(tmp_path, edit, says):
    data = _plan()
    edit(data)
    plan = _write(tmp_path, data)
    with pytest.raises(InputError) as exc:
        load_plan(plan)
    assert says in str(exc.value)
    assert str(exc.value).isascii()  # printable whatever the plan holds


def test_report_and_verify_refuse_a_bad_plan_with_exit_2(tmp_path):
    data = _plan()
    data["purchases"][0]["count"] = -8
    data["purchases"][0]["total_usd"] = -72_000
    plan = _write(tmp_path, data)
    code, out = run("report", plan, "-o", tmp_path / "p.xlsx")
    assert code == 2 and "purchases[0].count: -8" in out and "purchases[0].total_usd" in out
    assert not (tmp_path / "p.xlsx").exists()
    code, out = run("verify", ROOT / "problems" / "2m_budget.yaml", plan)
    assert code == 2 and "purchases[0].count: -8" in out


def test_a_5000_digit_integer_is_exit_2(tmp_path):
    """Python refuses to convert an integer of 4,300 digits or more; a plan has no use for
    more than 30, whatever the field."""
    for digits, key in ((5000, "solve_seconds"), (4000, "purchases")):
        data = _plan()
        data[key] = 123456789
        text = json.dumps(data).replace("123456789", "9" * digits, 1)
        code, out = run("report", _write(tmp_path, text), "-o", tmp_path / "p.xlsx")
        assert code == 2 and f"{key}: an integer of {digits:,} digits" in out, out


# ------------------------------------------------------------------ the large-plan paths


def test_assumption_lookup_is_indexed_and_agrees_with_a_scan():
    a = _Assumptions([_ARow("gpu:a", "tdp_w", "n/a"), _ARow("gpu:b", "tdp_w", 700.0)])
    assert a.find(["gpu:a", "gpu:b"], ["tdp_w"]) == 1  # the first numeric one
    assert a.find(["gpu:a"], ["tdp_w"]) is None
    i = a.add(_ARow("gpu:a", "tdp_w", 400.0))
    assert a.find(["gpu:a"], ["tdp_w"]) == i == 2
    assert a.find(None, ["idle_w", "tdp_w"]) == 1


def test_sumifs_by_groups_matches_the_cell_by_cell_rule():
    """SUMIFS over grouped values picks the same rows, in row order, as testing each cell:
    text case-insensitively, numbers by value, booleans never equal to numbers, wildcards."""
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "S"
    keys = ["a", "A", "b", "a*", True, 1, 1.0, None, "", "ab"]
    for r, k in enumerate(keys, start=1):
        ws.cell(row=r, column=1, value=k)
        ws.cell(row=r, column=2, value=float(2**r))
    formulas = {
        "C1": '=SUMIFS(B1:B10,A1:A10,"=a")',  # a, A
        "C2": '=SUMIFS(B1:B10,A1:A10,"=a~*")',  # a*
        "C3": '=SUMIFS(B1:B10,A1:A10,"a*")',  # a, A, a*, ab
        "C4": "=SUMIFS(B1:B10,A1:A10,1)",  # 1, 1.0 (not TRUE)
        "C5": '=SUMIFS(B1:B10,A1:A10,"")',  # None, ""
        "C6": '=SUMIFS(B1:B10,A1:A10,"<>a",B1:B10,">8")',
    }
    for ref, f in formulas.items():
        ws[ref] = f
    got = evaluate_all(wb)["S"]
    w = {k: 2.0**r for r, k in enumerate(range(10), start=1)}  # row weights by index
    assert got["C1"] == w[0] + w[1]
    assert got["C2"] == w[3]
    assert got["C3"] == w[0] + w[1] + w[3] + w[9]
    assert got["C4"] == w[5] + w[6]
    assert got["C5"] == w[7] + w[8]
    assert got["C6"] == sum(w[i] for i in range(2, 10) if w[i] > 8)  # not a, A; above 8


# ------------------------------------------------------------------ fuzz


_BAD = [
    float("nan"),
    float("inf"),
    -1,
    -8.5,
    1e300,
    10**40,
    "",
    "x",
    None,
    True,
    [],
    {},
    "2027-13",
    "1999-01",
    "ab\ud800",
    "a\x01b",
    0,
    2.5,
    1e16,
]
_BASES = {
    "reference": (_plan(REFERENCE), ROOT / "problems" / "2m_budget.yaml"),
    "brownfield": (_plan(BROWNFIELD), ROOT / "problems" / "brownfield.yaml"),
}


def _paths(o, p=()):
    if p:
        yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, (*p, k))
    elif isinstance(o, list):
        for i, v in enumerate(o[:2]):
            yield from _paths(v, (*p, i))


@st.composite
def _mutated(draw):
    name = draw(st.sampled_from(sorted(_BASES)))
    data = copy.deepcopy(_BASES[name][0])
    paths = list(_paths(data))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        parent = data
        try:
            for k in path[:-1]:
                parent = parent[k]
            old = parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed it
        op = draw(st.sampled_from(["drop", "truncate", "empty", "value", "text"]))
        if op == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif op in ("truncate", "empty") and isinstance(old, list):
            parent[path[-1]] = (
                old[: draw(st.integers(0, max(0, len(old) - 1)))] if op == "truncate" else []
            )
        elif op == "text" and isinstance(old, str):
            parent[path[-1]] = draw(st.sampled_from([old + "x", old[::-1], "owned", "(reserved)"]))
        else:
            parent[path[-1]] = draw(st.sampled_from(_BAD))
    return name, data


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_mutated())
def test_fuzzed_plans_never_crash_report_or_verify(tmp_path, case):
    name, data = case
    plan = _write(tmp_path, json.dumps(data))
    t0 = time.perf_counter()
    code, out = run("report", plan, "-o", tmp_path / "p.xlsx")
    assert code in (0, 2), out
    code, out = run("verify", _BASES[name][1], plan)
    assert code in (0, 2, 4), out
    assert time.perf_counter() - t0 < 30


def test_a_plan_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    """Plans handed back are capped at 30 MB (one that large reports in ~26 s): a larger file
    is exit 2 naming the limit, without reading it (the file here is sparse)."""
    from click.testing import CliRunner

    from planner.cli import cli
    from planner.plan.data import MAX_PLAN_BYTES

    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(MAX_PLAN_BYTES + 1)
    res = CliRunner().invoke(cli, ["report", str(big), "-o", str(tmp_path / "x.xlsx")])
    assert res.exit_code == 2 and "may be at most 31,457,280 bytes" in res.output, res.output
    assert not (tmp_path / "x.xlsx").exists()
