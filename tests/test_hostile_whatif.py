"""Hostile input to what-if ranges and break-even, one test per finding of the hardening
review: each ends in exit 2 naming the bad value and what is allowed, within a time bound,
never a traceback, a hang or a range made before it is counted. No test here solves."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.analysis.breakeven import (
    MAX_BISECT_STEPS,
    _bisect,
    breakeven,
    resolve_tol,
    tol_floor,
)
from planner.analysis.sweep import ScenarioResult, run_tasks
from planner.analysis.whatif import (
    MAX_SCENARIOS,
    MAX_VALUES,
    MAX_VARIES,
    MAX_WORKERS,
    load_base,
    make_varies,
    parse_bounds,
    parse_range,
    parse_values,
    parse_vary,
    run_whatif,
)
from planner.base.errors import InputError
from planner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
P = ROOT / "problems" / "inference_startup.yaml"
FAST = 1.0  # seconds: any parse, however hostile, is refused or done within this


def run(*args: object) -> tuple[int, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, r.output


def refused(fn, *args, match: str) -> str:
    """``fn(*args)`` raises an InputError matching ``match`` within :data:`FAST` seconds."""
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=match) as err:
        fn(*args)
    assert time.perf_counter() - t0 < FAST
    return str(err.value)


@pytest.fixture(scope="module")
def base():
    return load_base(P)


# ------------------------------------------------------------------ ranges: counted first


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("0:1e999999:1", "about 1.000e+999999"),  # was 30 s of work, then exit 1
        ("0:1e999999999:1", "about 1.000e+999999999"),  # was a decimal overflow, exit 1
        ("0:1:1e-999999999", "about 1.000e+999999999"),
        ("0:1e17:1", "about 1.000e+17"),
        ("0:1:0.0001", "10,001"),
        ("1e18:-1e18:-1e-18", "about 2.000e+36"),
    ],
)
def test_a_range_is_counted_before_any_value_is_made(text, count):
    msg = refused(parse_range, text, "--vary u", match="would make")
    assert f"would make {count} values; the limit is {MAX_VALUES}" in msg
    assert len(parse_range("0:0.9999:0.0001")) == MAX_VALUES  # the cap itself is allowed


def test_a_huge_range_on_the_command_line_is_exit_2_at_once():
    t0 = time.perf_counter()
    code, out = run("whatif", P, "--vary", "utilization=0:1e999999:1", "--no-excel")
    assert code == 2 and "would make about" in out and str(MAX_VALUES) in out
    code, out = run("whatif", P, "--vary", "utilization=0:1e999999999:1", "--no-excel")
    assert code == 2 and "would make about" in out
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0:1e-999999999:1", "'1e-999999999' is out of range"),  # a float would make it 0
        ("1e19:1e19:1", "'1e19' is out of range"),
        ("0:1e-20:1e-21", "'1e-20' is out of range"),
        ("1:2:1." + "1" * 40, "out of range"),  # more digits than exact arithmetic keeps
        ("1e99999999999999999999:2:1", "start .* is not a number"),  # beyond Decimal
        ("1000000000000000.001:1000000000000000.005:0.001", "closer together than a float"),
        ("0.5,1e400", "'1e400' is out of range"),  # a float would make it inf
        ("0.5,1e-400", "'1e-400' is out of range"),  # ... or 0
        ("5," + "9" * 5000, "out of range"),  # beyond Python's int() digit limit
    ],
)
def test_numbers_that_overflow_are_named(text, says):
    msg = refused(parse_values, text, "--vary u", match=says)
    assert "1e-18 to 1e18" in msg or "not a number" in msg or "float" in msg


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0:1:0", "step is 0"),
        ("0:1:-0", "step is 0"),
        ("0:1:-0.1", "never reaches its stop"),
        ("1:0:0.1", "never reaches its stop"),
        ("nan:1:0.1", "not a finite number"),
        ("0:inf:0.1", "not a finite number"),
        ("0:1:-Infinity", "not a finite number"),
        ("0:1:sNaN", "not a finite number"),
        ("0::1", "stop '' is not a number"),
        ("١:٢:١", "start '١' is not a number"),  # unicode digits are not numbers here
        ("true:2:1", "start 'true' is not a number"),
        ("0:1:1:1", "start:stop:step"),
    ],
)
def test_bad_steps_and_bounds(text, says):
    refused(parse_values, text, "--vary u", match=says)


def test_bad_steps_on_the_command_line():
    for vary in ("utilization=0.2:0.9:0", "utilization=0.9:0.2:0.1", "utilization=nan:1:0.1"):
        code, out = run("whatif", P, "--vary", vary, "--no-excel")
        assert code == 2 and "--vary utilization" in out, out


# ------------------------------------------------------------------ value lists


def test_lists_with_repeats_or_too_many_entries():
    refused(parse_values, "0.1,0.10,1e-1", "--vary u", match=r"repeated value\(s\) \[0.1, 0.1\]")
    refused(parse_values, "1,1.0,2", "--vary u", match="repeated")
    many = ",".join(str(i) for i in range(MAX_VALUES + 1))
    msg = refused(parse_values, many, "--vary u", match="the list has 10,001 values")
    assert len(msg) < 200  # the list itself is not echoed
    assert len(parse_values(",".join(str(i) for i in range(MAX_VALUES)))) == MAX_VALUES
    dups = ",".join(["0.5"] * 1000)
    assert len(refused(parse_values, dups, "--vary u", match="and 989 more")) < 300
    code, out = run("whatif", P, "--vary", "utilization=0.3,0.3", "--no-excel")
    assert code == 2 and "repeated" in out


def test_values_given_as_a_list_follow_the_same_rules(base):
    for values, says in [
        ([0.5, math.nan], "not a finite number"),
        ([0.5, math.inf], "not a finite number"),
        ([1e300], "out of range"),
        ([0.5, 0.5], "repeated"),
        ([None], "is a NoneType"),
        (list(range(MAX_VALUES + 1)), "the limit is"),
    ]:
        refused(make_varies, base, [("utilization", values)], match=says)
    refused(run_whatif, base, [("power_price", [0.1, math.nan])], match="not a finite number")


def test_booleans_are_not_numbers(base):
    refused(make_varies, base, ["utilization=true"], match="boolean")
    refused(make_varies, base, [("power_price", [True])], match="boolean")
    refused(breakeven, base, ("utilization", True, 0.9), match="LO True is not a number")
    code, out = run("breakeven", P, "--vary", "utilization=false:1")
    assert code == 2 and "not a number" in out


def test_unicode_digits_in_a_list_are_text_the_schema_refuses(base):
    assert parse_values("١٢,fp8") == ["١٢", "fp8"]
    refused(make_varies, base, ["utilization=٠٫٥"], match="valid number")


# ------------------------------------------------------------------ keys and grids


@pytest.mark.parametrize(
    ("key", "suggests"),
    [
        ("utilizaton", "did you mean 'utilization'"),
        ("power-price", "did you mean 'power_price'"),
        ("site.power_usd_per_kwhh", "did you mean 'power_usd_per_kwh'"),
        ("workloads.serve.assistnt.traffic.utilization", "did you mean 'assistant'"),
    ],
)
def test_an_unknown_key_suggests_the_closest(base, key, suggests):
    refused(make_varies, base, [f"{key}=0.5"], match=suggests)
    code, out = run("breakeven", P, "--vary", f"{key}=0.2:0.9")
    assert code == 2 and suggests in out


def test_grids_are_capped_before_values_are_checked(base):
    # 1001 x 20 scenarios: refused from the counts alone, before 21,000 schema checks
    msg = refused(
        make_varies, base, ["utilization=0:1:0.001", "power_price=0.01:0.2:0.01"], match="grid"
    )
    assert f"20,020 scenarios (1001 x 20); the limit is {MAX_SCENARIOS}" in msg
    specs = [f"site.k{i}=1" for i in range(MAX_VARIES + 1)]
    refused(make_varies, base, specs, match=f"17 --vary options; the limit is {MAX_VARIES}")


# ------------------------------------------------------------------ workers


def test_workers_are_1_to_the_cap():
    for n in ("0", "-1", str(MAX_WORKERS + 1), "99999999999999999999"):
        for cmd in (("whatif", P, "--vary", "utilization=0.3", "--no-excel"),):
            code, out = run(*cmd, "--workers", n)
            assert code == 2 and "--workers" in out
        code, out = run("breakeven", P, "--vary", "utilization=0.2:0.9", "--workers", n)
        assert code == 2 and "--workers" in out
    for n in (0, -3, MAX_WORKERS + 1, True, 2.5):
        refused(run_tasks, [], n, match="--workers")


# ------------------------------------------------------------------ break-even


def test_breakeven_tol_below_the_floor_names_the_floor():
    t0 = time.perf_counter()
    code, out = run("breakeven", P, "--vary", "utilization=0.2:0.9", "--tol", "1e-300")
    assert code == 2 and "--tol 1e-300" in out and "from 7e-10" in out
    for tol in ("0", "-0.1", "nan", "inf", "-inf", "5"):
        code, out = run("breakeven", P, "--vary", "utilization=0.2:0.9", "--tol", tol)
        assert code == 2 and "--tol" in out, (tol, out)
    assert time.perf_counter() - t0 < 5  # refused before any solve


def test_tol_floor_and_default():
    assert tol_floor(0.2, 0.9) == pytest.approx(7e-10)
    assert tol_floor(0.0, 1e-6) == 1e-12  # the absolute floor
    assert tol_floor(1e15, 1e15 + 1) >= 16 * math.ulp(1e15)  # float steps at large values
    assert resolve_tol(0.2, 0.9, None) == pytest.approx(0.7 / 200)
    assert resolve_tol(0.0, 1e-12, None) == 1e-12  # the default never undercuts the floor
    assert resolve_tol(0.2, 0.9, 1e-9) == 1e-9
    for bad in (1e-10, 0.0, -1.0, math.nan, math.inf, 0.71, True):
        refused(resolve_tol, 0.2, 0.9, bad, match="--tol")


def _fake_solve(threshold: float, calls: list[float]):
    def solve(xs):
        calls.extend(xs)
        return [
            ScenarioResult(0, {}, "optimal", totals={}, bought={"h100": 1} if x > threshold else {})
            for x in xs
        ]

    return solve


@pytest.mark.parametrize(
    ("a", "b", "tol"),
    [
        (0.2, 0.9, 7e-10),  # at the floor: at most 30 steps
        (0.2, 0.9, 0.0),  # no tol at all: the step cap or float resolution ends it
        (1e15, 1e15 + 4, 1e-300),  # adjacent floats after 5 steps
        (0.0, 5e-324, 0.0),  # the two smallest floats: nothing between them
    ],
)
def test_bisection_is_bounded(a, b, tol):
    calls: list[float] = []
    solve = _fake_solve(a + (b - a) / 3, calls)
    ra, rb = solve([a, b])
    t0 = time.perf_counter()
    x, y, rx, ry = _bisect(solve, None, tol, a, b, ra, rb)
    assert time.perf_counter() - t0 < FAST
    assert len(calls) - 2 <= MAX_BISECT_STEPS
    assert a <= x < y <= b and rx.bought == {} and ry.bought == {"h100": 1}
    if tol >= tol_floor(a, b):
        assert y - x <= tol and len(calls) - 2 <= 30


def test_breakeven_searches_one_key():
    code, out = run(
        "breakeven", P, "--vary", "utilization=0.2:0.9", "--vary", "power_price=0.1:0.2"
    )
    assert code == 2 and "breakeven searches one key" in out and "power_price" in out


@pytest.mark.parametrize(
    ("vary", "says"),
    [
        ("utilization=0.9:0.2", "LO must be below HI"),
        ("utilization=0.5:0.5", "LO must be below HI"),
        ("utilization=nan:0.9", "not a finite number"),
        ("utilization=0.2:inf", "not a finite number"),
        ("utilization=0.2:1e999999999", "'1e999999999' is out of range"),
        ("utilization=0.2:0.5:0.1", "LO:HI"),
        ("utilization=0.2", "LO:HI"),
    ],
)
def test_breakeven_bounds(vary, says):
    refused(parse_bounds, vary, match=says)
    code, out = run("breakeven", P, "--vary", vary)
    assert code == 2


def test_breakeven_api_checks_what_the_cli_checks(base):
    refused(breakeven, base, ("utilization", 0.2, math.inf), match="out of range")
    refused(breakeven, base, ("utilization", 0.9, 0.2), match="LO must be below HI")
    refused(breakeven, base, ("utilization", 0.2, 0.9), None, 1e-300, match="from 7e-10")
    refused(breakeven, base, ("utilization", 0.2, 0.9), None, None, 10**9, match="--scan")


# ------------------------------------------------------------------ fuzz

_NUMBERS = st.one_of(
    st.integers(-(10**25), 10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.builds(
        lambda m, e: f"{m}e{e}",
        st.integers(-9, 9),
        st.integers(-(10**12), 10**12),
    ),
    st.sampled_from(["", " ", "-0", "1_000", "0x10", "١", "٣.٥", "０", "²", "nan", "-Infinity"]),
    st.sampled_from(["1." + "0" * 50 + "1", "9" * 5000, "true", "fp8", "'0.5'"]),
)
_SEPS = st.sampled_from([":", ",", "::", ",,", ":,", " "])


@st.composite
def _vary_text(draw) -> str:
    parts = draw(st.lists(_NUMBERS, min_size=1, max_size=6))
    seps = draw(st.lists(_SEPS, min_size=len(parts), max_size=len(parts)))
    text = "".join(p + s for p, s in zip(parts, seps, strict=True))[:-1]
    if draw(st.booleans()):
        text += "," * draw(st.integers(0, 3 * MAX_VALUES // 2))
    return text


def _ok(values: list) -> bool:
    def one(v) -> bool:
        if isinstance(v, bool | str):
            return True
        return isinstance(v, int | float) and math.isfinite(v) and abs(v) <= 1e18

    return 1 <= len(values) <= MAX_VALUES and all(one(v) for v in values)


_FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_FUZZ
@given(
    text=st.one_of(
        _vary_text(),
        st.builds(lambda a, b, c: f"{a}:{b}:{c}", _NUMBERS, _NUMBERS, _NUMBERS),
        st.text(max_size=40),
    )
)
def test_fuzz_range_syntax_is_values_within_the_caps_or_an_input_error(text):
    for fn in (parse_values, lambda t: parse_vary("k=" + t)[1], parse_range):
        t0 = time.perf_counter()
        try:
            values = fn(text)
        except InputError as exc:
            assert len(str(exc)) < 400  # the input is quoted, not echoed whole
        else:
            assert _ok(values), values[:5]
        assert time.perf_counter() - t0 < FAST
    t0 = time.perf_counter()
    try:
        key, lo, hi = parse_bounds("k=" + text)
    except InputError:
        pass
    else:
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi and abs(hi) <= 1e18
    assert time.perf_counter() - t0 < FAST


@settings(_FUZZ, max_examples=20)
@given(text=_vary_text(), tol=_NUMBERS, workers=_NUMBERS)
def test_fuzz_cli_options_end_in_exit_2(text, tol, workers):
    # 'nokey' never resolves, so no command here solves: each ends in a usage or input error
    t0 = time.perf_counter()
    code, out = run("whatif", P, "--vary", "nokey=" + text, "--no-excel", "--workers", workers)
    assert code == 2
    code, out = run("breakeven", P, "--vary", "nokey=" + text, "--tol", tol)
    assert code == 2
    assert time.perf_counter() - t0 < 2 * FAST
