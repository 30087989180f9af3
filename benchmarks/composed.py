"""Composed problems (issue 35): small problems that switch many features on together.

Each feature of the planner was built and tested on its own; the bugs live where they meet.
:func:`compose` draws one problem (6-12 months, one to three workloads) with any subset of the
features below, through a chooser, so the same code serves two drivers:

* the test suite draws with hypothesis (``tests/test_composed.py``: shrinking, a saved
  failing example), through :class:`HypothesisPick`;
* ``benchmarks/compose.py --n N --seed S`` draws with :class:`RandomPick` (seeded, many more
  problems, in parallel).

Features (``FEATURES``): owned fleets (keep or sell, arriving later), contracts, discounts,
reserved offers, spot (training and serving), price paths (problem-wide and per GPU), lead
times, ``capex_at``, scenarios and each risk measure, request mixes, measured profiles,
budgets (capex and total), power caps, today's accelerators (``today``: an H200, B200,
GB200 or MI300X beside the older cards, services at FP8 or FP4, a vendor quote or a vendor
efficiency as a per-GPU override), and deployments (``deployments``: services with
``disaggregated`` and ``mtp`` auto, true or false, a list of precisions, a ``gpus`` subset),
and those of issues 52-53: multi-turn ``sessions`` (cached prefixes, think time, a KV offload
tier), dated ``price_steps`` on an offer, reservations paid ``upfront``,
``provider_caps``, and the shipped offers files read by default (``shipped_offers``, now and
then with ``estimates``). A problem is written as YAML beside its files (a
profiles file when profiles are drawn) by :func:`write_case`; every draw is a valid problem:
the planner must end it in a verified plan (exit 0) or an infeasibility diagnosis (exit 3).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

FEATURES = (
    "owned",
    "contract",
    "discount",
    "reserved",
    "spot",
    "paths",
    "gpu_paths",
    "lead",
    "capex_at",
    "scenarios",
    "mix",
    "profiles",
    "budget",
    "power_cap",
    "catalog_offers",
    "today",
    "deployments",
    # drawn after "deployments", so that the draws of every earlier seed stay what they were
    "sessions",
    "price_steps",
    "upfront",
    "provider_caps",
    "shipped_offers",
)
LATE = FEATURES[FEATURES.index("deployments") + 1 :]
START_YEAR = 2027
# Cards with catalog specs, prices and resale curves; the consumer card only where allowed.
GPUS = ("a100-pcie-80gb", "h100-sxm", "l40s", "rtx-4090")
# Today's accelerators (feature "today"): one joins the list. GB200 is bought only as a
# liquid-cooled 72-GPU rack; FP4 runs on B200 and GB200 only.
TODAY = ("h200-sxm", "b200", "gb200", "mi300x")
# Rough list prices per GPU-hour of each card (SkyPilot catalogs, 2026): the inline offers
# are these +-30 %, so buying and renting both win somewhere. Today's: the median on-demand
# row of catalogs/offers.yaml (H200 24 rows, B200 12), GB200 Spheron's and MI300X Vultr's
# listing (catalogs/offers-manual.yaml).
RENT = {
    "a100-pcie-80gb": 1.6,
    "h100-sxm": 2.6,
    "l40s": 1.0,
    "rtx-4090": 0.5,
    "h200-sxm": 3.0,
    "b200": 5.6,
    "gb200": 4.5,
    "mi300x": 1.85,
}
SMALL_MODELS = ("llama-2-7b", "llama-3-8b", "llama-2-13b")
# Served only (a mixture-of-experts model: memory by total, compute by active parameters).
SERVE_MODELS = (*SMALL_MODELS, "qwen3-30b-a3b")


class Pick:
    """What :func:`compose` asks of a driver: one of some options, a bool, a whole number."""

    def one(self, options: Sequence[T]) -> T:  # pragma: no cover - interface
        raise NotImplementedError

    def flag(self, p: float = 0.5) -> bool:
        return (
            self.one([True, False]) if p == 0.5 else self.one([True] + [False] * round(1 / p - 1))
        )

    def int(self, lo: int, hi: int) -> int:
        return self.one(range(lo, hi + 1))

    def subset(self, options: Sequence[T], lo: int = 1) -> list[T]:
        chosen = [o for o in options if self.flag()]
        return chosen if len(chosen) >= lo else list(options[:lo])


class RandomPick(Pick):
    """A seeded chooser for the benchmark: the same seed draws the same problem."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def one(self, options: Sequence[T]) -> T:
        return self.rng.choice(list(options))


class HypothesisPick(Pick):
    """A chooser over hypothesis's ``draw``: every choice shrinks toward its first option."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw

    def one(self, options: Sequence[T]) -> T:
        from hypothesis import strategies as st

        return self.draw(st.sampled_from(list(options)))


@dataclass
class Case:
    """One composed problem: its mapping, the features it has, and files beside it."""

    problem: dict[str, Any]
    features: frozenset[str]
    files: dict[str, Any] = field(default_factory=dict)

    @property
    def time_limit(self) -> float:
        """The problem's own limit: a two-stage problem is one model copy per scenario, so
        each scenario brings the limit of a one-forecast problem (10 s for 3 scenarios was too
        short to find any plan in benchmarks/compose.py seed 0 problem 783, drawn before the
        feature ``today`` shifted the draws; 30 s plans it)."""
        return float(self.problem["solver"]["time_limit_s"])

    @property
    def key(self) -> str:
        """The feature combination, sorted: the benchmark's table groups by it."""
        return "+".join(sorted(self.features)) or "(none)"


def month(m: int) -> str:
    """The YYYY-MM of horizon month ``m`` (0 = 2027-01).

    >>> month(0), month(13)
    ('2027-01', '2028-02')
    """
    return f"{START_YEAR + m // 12}-{m % 12 + 1:02d}"


def compose(pick: Pick, time_limit: float = 10.0) -> Case:
    """Draw one problem with a random subset of :data:`FEATURES` (see the module docstring)."""
    # "deployments" is drawn last, so the draws of every earlier seed stay what they were
    early = FEATURES[: FEATURES.index("deployments")]
    on = {f for f in early if pick.flag(0.25 if f == "catalog_offers" else 0.5)}
    months = pick.int(6, 12)
    gpus = pick.subset(GPUS)
    if gpus == ["rtx-4090"]:
        gpus.insert(0, "a100-pcie-80gb")  # owned fleets and profiles need a datacenter card
    if "today" in on:
        gpus.append(pick.one(TODAY))
    lead = pick.int(1, 3) if "lead" in on else 0
    problem: dict[str, Any] = {
        "name": "composed",
        "horizon": {"start": month(0), "months": months},
        "budget": _budget(pick, on),
        "site": _site(pick, on, gpus),
        "gpus": gpus,
        "offers": _offers(pick, on, gpus),
        "market": _market(pick, on, gpus, lead, months),
        "workloads": _workloads(pick, on, gpus, months),
        "solver": {"time_limit_s": time_limit},
    }
    if "capex_at" in on:
        problem["finance"] = {"capex_at": pick.one(["order", "delivery"])}
    if "today" in on and pick.flag():
        problem["overrides"] = {"gpus": {gpus[-1]: _override(pick, gpus[-1])}}
    fleet = _fleet(pick, on, gpus, months)
    if fleet:
        problem["fleet"] = fleet
    files: dict[str, Any] = {}
    if "profiles" in on:
        files["profiles.yaml"] = _profiles(pick, problem, gpus)
        problem["profiles"] = ["profiles.yaml"]
    if "scenarios" in on:
        problem["scenarios"], risk = _scenarios(pick)
        problem["risk"] = risk
        problem["solver"]["time_limit_s"] = time_limit * len(problem["scenarios"])
    if pick.flag():
        on.add("deployments")
        for w in problem["workloads"].get("serve", []):
            _deployments(pick, w, gpus)
    on |= {f for f in LATE if pick.flag()}
    _late_features(pick, on, problem)
    return Case(problem, frozenset(on), files)


def _late_features(pick: Pick, on: set[str], problem: dict[str, Any]) -> None:
    """Sessions, price steps, upfront reservations, provider caps and the shipped offers files
    read by default (issues 52-53) on the problem drawn so far."""
    months = problem["horizon"]["months"]
    rows = problem["offers"]["extra"]
    if "sessions" in on:
        for w in problem["workloads"].get("serve", []):
            if "tokens" in w:
                w["sessions"] = {"turns": pick.int(2, 6), "tokens_per_turn": pick.one([200, 1000]),
                                 "think_time_s": pick.one([0, 10])}  # fmt: skip
                if pick.flag():
                    w["sessions"]["kv_offload"] = {"tier": "host", "gb_per_gpu": 500,
                                                   "gbs_per_gpu": 50}  # fmt: skip
    if "price_steps" in on and rows:
        row = pick.one(rows)
        price = round(row["usd_per_gpu_hour"] * pick.one([0.6, 1.4]), 3)
        row["price_steps"] = [{"month": month(pick.int(1, months - 1)), "usd_per_gpu_hour": price,
                               "source": "composed test step"}]  # fmt: skip
    for row in rows if "upfront" in on else ():
        if row["kind"] == "reserved":
            row["upfront_share"] = pick.one([0.5, 1.0])
    if "provider_caps" in on and rows:
        row = pick.one(rows)
        cap = {"provider": row["provider"], "gpu": row["gpu"], "max_gpus": pick.one([8, 64])}
        problem["offers"]["provider_caps"] = [cap]
    if "shipped_offers" in on:
        # every shipped offers file, as a problem without `files:` reads them (published
        # prices only), estimates now and then
        problem["offers"].pop("files", None)
        problem["offers"].pop("providers", None)
        if pick.flag(0.3):
            problem["offers"]["estimates"] = True


def _deployments(pick: Pick, w: dict[str, Any], gpus: list[str]) -> None:
    """Feature ``deployments`` (issue 44) on one service: disaggregated and mtp each auto,
    false or (rarely) true, a list of precisions, the service kept to some of the GPU types.
    A draw no GPU can serve (mtp: true on a model without MTP layers) ends in exit 3."""
    w["disaggregated"] = pick.one(["auto", "auto", False, True])
    w["mtp"] = pick.one(["auto", "auto", False, True])
    if pick.flag():
        w["precision"] = pick.one([["bf16", "fp8"], ["fp8", "fp4"], ["fp16", "fp8", "fp4"]])
    if pick.flag() and len(gpus) > 1:
        w["gpus"] = pick.subset(gpus)


def _override(pick: Pick, gpu: str) -> dict[str, Any]:
    """A per-GPU override of today's card: a vendor quote, or (AMD) its software efficiency
    at either end of the range catalogs/vendors.yaml gives (0.68-0.99 serving)."""
    if gpu == "mi300x" and pick.flag():
        return {"serve_efficiency": pick.one([0.68, 0.99]), "source": "composed test"}
    listed = {"h200-sxm": 30_000, "b200": 40_000, "gb200": 35_000, "mi300x": 12_500}[gpu]
    # a quote below the catalog's default price (catalogs/gpus.yaml), as vendors give
    return {"purchase_usd": round(listed * pick.one([0.7, 0.9])), "source": "composed quote"}


def _budget(pick: Pick, on: set[str]) -> dict[str, float]:
    if "budget" not in on:
        return {"capex_usd": 5_000_000}
    out: dict[str, float] = {"capex_usd": pick.one([0, 40_000, 150_000, 400_000])}
    if pick.flag():
        out["total_usd"] = pick.one([20_000, 100_000, 500_000])
    return out


def _site(pick: Pick, on: set[str], gpus: list[str]) -> dict[str, Any]:
    site: dict[str, Any] = {
        "power_usd_per_kwh": pick.one([0.08, 0.12, 0.25]),
        "pue": pick.one([1.2, 1.4]),
    }
    if "rtx-4090" in gpus:
        site["consumer_gpus_allowed"] = pick.flag()
    if "power_cap" in on:
        site["power_cap_kw"] = pick.one([3, 10, 40])
    if pick.flag(0.25):
        # no effect on air-cooled cards (must change nothing); GB200 racks need it to be bought
        site["liquid_cooling"] = pick.flag()
    return site


def _offer(pick: Pick, provider: str, gpu: str, kind: str, term: int | None) -> dict[str, Any]:
    per_instance = 8 if gpu == "h100-sxm" and pick.flag() else 1
    price = round(RENT[gpu] * pick.one([0.7, 1.0, 1.3]) * (0.4 if kind == "spot" else 1), 3)
    row: dict[str, Any] = {
        "id": f"{provider}-{gpu}-{kind}",
        "provider": provider,
        "gpu": gpu,
        "kind": kind,
        "usd_per_gpu_hour": price,
        "gpus_per_instance": per_instance,
        "source": "composed test offer",
        "as_of": "2026-11",
    }
    if per_instance > 1:
        row.update(fabric="infiniband", fabric_gbps_per_gpu=400)
    if term:
        row["term_months"] = term
    if pick.flag(0.25):
        row["max_gpus"] = per_instance * pick.one([1, 2, 4])
    return row


def _offers(pick: Pick, on: set[str], gpus: list[str]) -> dict[str, Any]:
    kinds = ["on_demand"] + (["spot"] if "spot" in on else [])
    providers = ["alpha", "beta"][: pick.int(1, 2)]
    rows = [
        _offer(pick, provider, gpu, kind, None)
        for provider in providers
        for gpu in gpus
        for kind in kinds
        if pick.flag(0.75)
    ]
    if "reserved" in on:
        gpu = pick.one(gpus)
        rows.append(_offer(pick, "alpha", gpu, "reserved", pick.one([3, 6])))
        rows[-1]["usd_per_gpu_hour"] = round(RENT[gpu] * 0.6, 3)
    offers: dict[str, Any] = {"files": [], "extra": rows}
    if "catalog_offers" in on:
        offers["files"] = ["offers.yaml"]
        catalog = pick.subset(["lambda", "nebius", "runpod"])
        offers["providers"] = sorted({r["provider"] for r in rows} | set(catalog))
        providers += catalog
    if "discount" in on:
        offers["discounts"] = {pick.one(providers): pick.one([0.1, 0.3])}
    if "spot" in on:
        offers["spot_for_serving"] = pick.flag()
    return offers


def _market(pick: Pick, on: set[str], gpus: list[str], lead: int, months: int) -> dict[str, Any]:
    market: dict[str, Any] = {}
    if "paths" in on:
        market["rent_change_per_year"] = pick.one([-0.3, -0.1, 0.0, 0.2])
        market["buy_change_per_year"] = pick.one([-0.1, 0.0, 0.05])
    else:
        market.update(rent_change_per_year=0, buy_change_per_year=0)
    market["lead_months"] = lead
    if "gpu_paths" in on:
        gpu = pick.one(gpus)
        market["gpus"] = {gpu: {"rent_change_per_year": pick.one([-0.4, 0.3])}}
        if "lead" in on:
            market["gpus"][gpu]["lead_months"] = min(months - 1, lead + pick.int(0, 2))
    return market


def _serve(pick: Pick, on: set[str], i: int, months: int) -> dict[str, Any]:
    start = pick.int(0, months - 2)
    w: dict[str, Any] = {
        "name": f"svc{i}",
        "model": pick.one(SERVE_MODELS),
        "precision": pick.one(["fp16", "bf16", *(["fp8", "fp4"] if "today" in on else [])]),
        "start": month(start),
        "traffic": {
            "daily_active_users": pick.one([300, 3_000, 20_000]),
            "requests_per_user_per_day": pick.one([5, 20]),
            "utilization": pick.one([0.3, 0.5, 0.7]),
            "growth_per_month": pick.one([0.0, 0.03, 0.1]),
        },
        "slo": {"p95_ttft_ms": pick.one([1000, 3000]), "p95_tpot_ms": pick.one([60, 100])},
        "redundancy": pick.one([1, 0]),
    }
    if pick.flag(0.25):
        w["end"] = month(pick.int(start + 1, months - 1))
    if "mix" in on and pick.flag(0.75):
        w["requests"] = [
            {"name": "short", "prompt": [1, 256], "output": [1, 128], "share": 0.6},
            {"name": "long", "prompt": [257, 2000], "output": [129, 500], "share": 0.4},
        ]
    else:
        w["tokens"] = {"prompt": pick.one([200, 500]), "output": pick.one([100, 250])}
    return w


def _train(pick: Pick, on: set[str], i: int, months: int) -> dict[str, Any]:
    start = pick.int(0, months - 2)
    method = pick.one(["lora", "qlora", "full"])
    tokens = {"full": [2e8, 2e9], "lora": [5e8, 5e9], "qlora": [5e8, 5e9]}[method]
    job: dict[str, Any] = {
        "name": f"job{i}",
        "model": pick.one(SMALL_MODELS[:2]),
        "tokens": pick.one(tokens),
        "method": method,
        "window": {
            "start": month(start),
            "deadline": month(min(months - 1, start + pick.int(0, 3))),
        },
        "providers": pick.one(["single", "split"]),
    }
    if "spot" in on:
        job["spot"] = {"allowed": True, "max_share": pick.one([0.5, 1.0])}
    return job


def _workloads(pick: Pick, on: set[str], gpus: list[str], months: int) -> dict[str, Any]:
    n = pick.int(1, 3)
    kinds = [pick.one(["serve", "train"]) for _ in range(n)]
    if "mix" in on or "profiles" in on or "scenarios" in on:
        kinds[0] = "serve"  # the feature acts on a service
    out: dict[str, Any] = {}
    for i, kind in enumerate(kinds):
        row = _serve(pick, on, i, months) if kind == "serve" else _train(pick, on, i, months)
        out.setdefault(kind, []).append(row)
    return out


def _fleet(pick: Pick, on: set[str], gpus: list[str], months: int) -> dict[str, Any]:
    fleet: dict[str, Any] = {}
    if "owned" in on:
        gpu = pick.one([g for g in gpus if g != "rtx-4090"])
        # a whole server or rack, so that selling it is possible (a GB200 rack holds 72)
        count = 72 if gpu == "gb200" else 8
        row: dict[str, Any] = {"gpu": gpu, "count": count, "sell": pick.one(["never", "allowed"])}
        if pick.flag(0.25):
            row["arrives"] = month(pick.int(1, months - 1))
        else:
            row["bought"] = pick.one(["2024-06", "2026-01"])
        fleet["owned"] = [row]
    if "contract" in on:
        gpu = pick.one(gpus)
        fleet["contracts"] = [
            {
                "provider": "alpha",
                "gpu": gpu,
                "count": pick.one([1, 4, 8]),
                "start": pick.one(["2026-06", month(1)]),
                "end": month(pick.int(2, months + 3)),
                "usd_per_gpu_hour": round(RENT[gpu] * 0.8, 3),
            }
        ]
    return fleet


def _profiles(pick: Pick, problem: dict[str, Any], gpus: list[str]) -> dict[str, Any]:
    """A measured serving rate for the first service's shape on one of its GPUs."""
    w = problem["workloads"]["serve"][0]
    gpu = pick.one([g for g in gpus if g != "rtx-4090"])
    shape = w.get("tokens") or {"prompt": 256, "output": 128}
    entry = {
        "model": w["model"],
        "gpu": gpu,
        "tp": 1,
        "precision": w["precision"] if isinstance(w["precision"], str) else w["precision"][0],
        "prompt": shape["prompt"],
        "output": shape["output"],
        "max_rps": pick.one([0.5, 2.0, 6.0]),
        "source": "composed test measurement",
        "as_of": "2026-11",
    }
    return {"serve": [entry]}


def _scenarios(pick: Pick) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"name": "base", "probability": 0.5}]
    rows.append({"name": "busy", "probability": 0.3, "scale": {"serving_demand": 2.0}})
    rows.append(
        {"name": "cheap", "probability": 0.2, "set": {"power_price": pick.one([0.05, 0.3])}}
    )
    rows = rows[: pick.int(2, 3)]
    if len(rows) == 2:
        rows[1]["probability"] = 0.5
    measure = pick.one(["expected", "cvar", "worst_case"])
    return rows, {"measure": measure}


def write_case(case: Case, folder: Path, stem: str = "problem") -> Path:
    """Write the problem (and its files) into ``folder``; returns the problem's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in case.files.items():
        (folder / name).write_text(yaml.safe_dump(content, sort_keys=False))
    path = folder / f"{stem}.yaml"
    head = f"# features: {case.key}\n"
    path.write_text(head + yaml.safe_dump(case.problem, sort_keys=False))
    return path


@dataclass
class Ending:
    """How the planner ended one composed problem, and whether that ending is allowed."""

    code: int
    verified: bool | None  # the plan accepted by `planner verify` (exit 0 only)
    seconds: float
    bound_s: float  # the time limit's promise: T x 1.1 + 5
    message: str = ""

    @property
    def good(self) -> bool:
        """Exit 0 with a verified plan, or exit 3 with a diagnosis; within the time bound."""
        in_time = self.seconds <= self.bound_s
        if self.code == 0:
            return bool(self.verified) and in_time
        return self.code == 3 and "infeasible" in self.message.lower() and in_time

    @property
    def label(self) -> str:
        if self.good:
            return "ok" if self.code == 0 else "infeasible"
        if self.seconds > self.bound_s:
            return "late"
        return f"exit {self.code}" + (" unverified" if self.code == 0 else "")


def solve_case(
    path: Path, time_limit: float, excel: bool = True
) -> tuple[Ending, dict[str, Any] | None]:
    """``planner solve PATH --json`` (and the workbook unless ``excel`` is false) then
    ``planner verify`` on its plan, in this process."""
    import json
    import time

    from click.testing import CliRunner

    from planner.cli import cli

    out = path.with_suffix(".json")
    book = ["-o", str(path.with_suffix(".xlsx"))] if excel else ["--no-excel"]
    args = ["solve", str(path), "--json", str(out), *book]
    t0 = time.perf_counter()
    r = CliRunner().invoke(cli, [*args, "--time-limit", str(time_limit)])
    seconds = time.perf_counter() - t0
    message = r.output + (f"\n{r.exception!r}" if r.exception and r.exit_code != 3 else "")
    if r.exit_code != 0:
        return Ending(r.exit_code, None, seconds, time_limit * 1.1 + 5, message), None
    v = CliRunner().invoke(cli, ["verify", str(path), str(out)])
    plan = json.loads(out.read_text())
    ending = Ending(0, v.exit_code == 0, seconds, time_limit * 1.1 + 5, message + v.output)
    return ending, plan
