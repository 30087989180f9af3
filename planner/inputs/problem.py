"""The problem file: loading and resolution against the catalogs.

A problem file is a contract: other tools write it. Unknown keys are errors (a typo must
not be silently ignored), numbers must be finite, dates are ``YYYY-MM`` months. The schema
(pydantic v2) is in :mod:`planner.inputs.schema` and month parsing in
:mod:`planner.inputs.months`; both are re-exported here, where callers import them from.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.base.errors import InputError
from planner.base.yamlevents import locate
from planner.base.yamlio import (
    YamlDoc,
    did_you_mean,
    format_loc,
    load_yaml,
    parse_yaml_text,
    validate,
)
from planner.inputs.catalog import (
    CATALOG_DIR,
    GpuSpec,
    ModelArch,
    Offer,
    Sourced,
    SourcedRange,
    load_gpus,
    load_models,
    load_offers,
    load_servers,
    with_server,
)
from planner.inputs.finance import FinanceDefaults, FinanceTerms, load_finance_defaults
from planner.inputs.market import MarketTerms, resolve_market
from planner.inputs.model_files import with_model_files
from planner.inputs.months import month_index, month_label, parse_month
from planner.inputs.offer_trust import (
    check_provider_caps,
    check_providers,
    discounted,
    within_provider_cap,
)
from planner.inputs.profiles import Profiles, load_profile_file
from planner.inputs.scenarios import scenario_data
from planner.inputs.schema import (
    DEFAULT_MAX_LOAD,
    DEFAULT_REDUNDANCY,
    MAX_USD,
    NAME_MAX,
    SHARE_TOLERANCE,
    Budget,
    Contract,
    CustomGpu,
    Finance,
    Fleet,
    GpuOverride,
    Horizon,
    Month,
    OfferChoice,
    OfferOverride,
    Overrides,
    OwnedGpus,
    Problem,
    RequestBucket,
    Risk,
    ScenarioScale,
    ScenarioSpec,
    ServeWorkload,
    Site,
    Slo,
    SolverOptions,
    Spot,
    TokenShape,
    TokenSize,
    Traffic,
    TrainJob,
    Window,
    Workloads,
)
from planner.inputs.schema_serve import serve_gpu_errors
from planner.inputs.slo_units import unit_warning


@dataclass(frozen=True)
class Inputs:
    """A problem resolved against the catalogs: everything the physics and model need."""

    problem: Problem
    gpus: dict[str, GpuSpec]  # the allowed GPU types, overrides applied
    models: dict[str, ModelArch]
    offers: dict[str, Offer]  # trusted offers for allowed GPUs, overrides applied
    source_path: str = "<memory>"
    source_sha256: str = ""
    offer_files: list[str] = field(default_factory=list)
    finance: FinanceTerms = field(default_factory=FinanceTerms)
    warnings: list[str] = field(default_factory=list)  # said, not refused (e.g. a past contract)
    profiles: Profiles = field(default_factory=Profiles)
    market: MarketTerms = field(default_factory=MarketTerms)  # price paths and lead times
    # The problem's demand scenarios (``scenarios`` in the file), each resolved; () when the
    # file has none, and then nothing else differs from a problem without the section.
    scenarios: tuple[Scenario, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """One demand forecast of a two-stage plan: its probability and the problem as it would be."""

    name: str
    probability: float
    # the problem with this scenario's set and scale applied; no scenarios of its own
    inputs: Inputs
    # what differs from the problem file, in words: "power_price = 0.2", "serving demand x 2"
    changes: tuple[str, ...]


def finance_terms(problem: Problem, defaults: FinanceDefaults | None = None) -> FinanceTerms:
    """The problem's finance settings, each unset one from catalogs/finance.yaml.

    Colocation: a problem that prices hosting per GPU (``hosting_usd_per_gpu_month``) and
    names no per-kW rate pays no per-kW rate; otherwise the catalog's default applies.
    """
    f, site = problem.finance, problem.site
    d = defaults if defaults is not None else load_finance_defaults()
    used: list[tuple[str, str]] = []

    def pick(name: str, given: float | None, default: SourcedRange) -> float:
        if given is not None:
            return given
        used.append((name, f"{default.value:g}: {default.source} ({default.as_of})"))
        return default.value

    rate = pick("finance.discount_rate", f.discount_rate, d.discount_rate)
    years = pick("finance.depreciation_years", f.depreciation_years, d.depreciation_years)
    if site.colo_usd_per_kw_month is None and "hosting_usd_per_gpu_month" in site.model_fields_set:
        colo = 0.0
    else:
        colo = pick(
            "site.colo_usd_per_kw_month", site.colo_usd_per_kw_month, d.colo_usd_per_kw_month
        )
    return FinanceTerms(
        discount_rate=rate,
        residual=f.residual,
        depreciation_years=years,
        colo_usd_per_kw_month=colo,
        currency_label=f.currency_label,
        capex_at=f.capex_at,
        sources=tuple(used),
    )


def _override_gpu(gpu: GpuSpec, ov: GpuOverride) -> GpuSpec:
    changes: dict[str, Any] = {}
    for key, value in ov.model_dump(exclude={"source", "server", "like", "name"}).items():
        if value is None:
            continue
        old = getattr(gpu, key)
        if isinstance(old, SourcedRange):
            changes[key] = old.model_copy(
                update={
                    "value": value,
                    "low": min(old.low, value),
                    "high": max(old.high, value),
                    "source": ov.source,
                    "note": f"overridden in the problem file; catalog default {old.value:g} ({old.source})",
                }
            )
        elif isinstance(old, Sourced) or old is None:
            changes[key] = Sourced(
                value=value,
                source=ov.source,
                as_of="problem",
                note=f"overridden in the problem file; catalog default {old.value:g}"
                if old is not None
                else "set in the problem file",
            )
    # Validate the result as a whole: an override must respect the same ranges and the same
    # cross-field rules (idle <= TDP) as a catalog entry.
    return GpuSpec.model_validate({**gpu.model_dump(by_alias=True), **changes})


def _find_offer_file(name: str, base: Path) -> Path | None:
    p = Path(name)
    for cand in [p] if p.is_absolute() else [base / p, CATALOG_DIR / p]:
        if cand.exists():
            return cand
    return None


@dataclass
class _Errors:
    """Bad ids found while resolving, each as ``file:line: field.path: text``.

    Collected rather than raised so that one run reports every unknown id, not just the first.
    """

    doc: YamlDoc | None
    messages: list[str] = field(default_factory=list)

    def add(self, loc: tuple, text: str) -> None:
        """Record ``text`` at ``loc`` (a field path of the problem file)."""
        where = self.doc.where(loc) if self.doc is not None else "problem"
        self.messages.append(f"{where}: {format_loc(loc)}: {text}")

    def raise_if_any(self) -> None:
        """One InputError holding every message (indented one per line when several)."""
        if not self.messages:
            return
        errors = self.messages
        head = "invalid problem file: " if self.doc is not None else "invalid problem: "
        raise InputError(head + (errors[0] if len(errors) == 1 else "\n  " + "\n  ".join(errors)))


def _allowed_gpus(
    problem: Problem, all_gpus: dict[str, GpuSpec], errors: _Errors
) -> dict[str, GpuSpec]:
    """The problem's GPU types (every catalog GPU when it names none), overrides applied."""
    allowed = problem.gpus if problem.gpus is not None else list(all_gpus)
    for i, g in enumerate(allowed):
        if g not in all_gpus:
            errors.add(("gpus", i), f"unknown gpu {g!r}; {did_you_mean(g, all_gpus.keys())}")
        elif g in allowed[:i]:
            errors.add(("gpus", i), f"gpu {g!r} is listed twice (also gpus[{allowed.index(g)}])")
    if not allowed:
        errors.add(
            ("gpus",),
            "the list is empty; name at least one GPU type (or omit gpus to allow every catalog GPU)",
        )
    gpus = {g: all_gpus[g] for g in allowed if g in all_gpus}
    for g, ov in problem.overrides.gpus.items():
        if g not in all_gpus:
            errors.add(
                ("overrides", "gpus", g), f"unknown gpu {g!r}; {did_you_mean(g, all_gpus.keys())}"
            )
        elif g in gpus:
            try:
                if ov.server is not None:
                    gpus[g] = _rehouse(gpus[g], ov.server)
                gpus[g] = _override_gpu(gpus[g], ov)
            except ValidationError as exc:
                why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
                errors.add(("overrides", "gpus", g), f"the overridden GPU is not valid: {why}")
            except _OverrideError as exc:
                errors.add(("overrides", "gpus", g, "server"), str(exc))
    return gpus


def _rehouse(gpu: GpuSpec, server_id: str) -> GpuSpec:
    """``gpu`` bought in another server type of catalogs/servers.yaml."""
    servers = load_servers()
    if server_id not in servers:
        raise _OverrideError(
            f"unknown server type {server_id!r}; {did_you_mean(server_id, servers.keys())}"
        )
    try:
        return with_server(gpu, servers[server_id])
    except ValueError as exc:
        raise _OverrideError(str(exc)) from None


class _OverrideError(ValueError):
    pass


def _custom_gpus(
    problem: Problem, all_gpus: dict[str, GpuSpec], errors: _Errors
) -> dict[str, GpuSpec]:
    """The catalog plus ``custom_gpus``: each a copy of its ``like`` GPU with the given figures."""
    out = dict(all_gpus)
    for cid, c in problem.custom_gpus.items():
        loc = ("custom_gpus", cid)
        if cid in all_gpus:
            errors.add(loc, f"gpu {cid!r} is in the catalog; use overrides.gpus to change it")
            continue
        if c.like not in all_gpus:
            errors.add(
                (*loc, "like"), f"unknown gpu {c.like!r}; {did_you_mean(c.like, all_gpus.keys())}"
            )
            continue
        base = all_gpus[c.like].model_copy(
            update={"id": cid, "name": c.name or f"{cid} (figures of {c.like} unless given)"}
        )
        try:
            if c.server is not None:
                base = _rehouse(base, c.server)
            out[cid] = _override_gpu(base, c)
        except ValidationError as exc:
            why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            errors.add(loc, f"the custom GPU is not valid: {why}")
        except _OverrideError as exc:
            errors.add((*loc, "server"), str(exc))
    return out


def _read_profiles(
    problem: Problem,
    base: Path,
    gpus: dict[str, GpuSpec],
    models: dict[str, ModelArch],
    errors: _Errors,
) -> Profiles:
    """Load ``profiles`` files; every entry must name a known model and GPU (file:line)."""
    serve, train = [], []
    for i, name in enumerate(problem.profiles):
        path = Path(name) if Path(name).is_absolute() else base / name
        if path.is_dir():
            errors.add(("profiles", i), f"profiles file {name!r} is a directory, not a file")
            continue
        if not path.exists():
            errors.add(("profiles", i), f"profiles file {name!r} not found (looked in {base})")
            continue
        try:
            pf, doc = load_profile_file(path)
        except InputError as exc:
            errors.add(("profiles", i), f"profiles file {name!r}: {exc}")
            continue
        bad: list[tuple[str, int, tuple[str, str]]] = []
        for kind, entries, out in (("serve", pf.serve, serve), ("train", pf.train, train)):
            for j, e in enumerate(entries):
                why = _profile_ids(e.model, e.gpu, gpus, models)
                if why:
                    bad.append((kind, j, why))
                else:
                    out.append((e, str(path)))
        shown = bad[:MAX_PROFILE_ERRORS]
        locate(doc, [(kind, j, why[0]) for kind, j, why in shown])
        for kind, j, (key, text) in shown:
            where = doc.where((kind, j, key))
            errors.add(("profiles", i), f"{where}: {kind}[{j}].{key}: {text}")
        if len(bad) > len(shown):
            errors.add(
                ("profiles", i), f"... and {len(bad) - len(shown):,} more entries like these"
            )
    return Profiles(tuple(serve), tuple(train))


MAX_PROFILE_ERRORS = 20  # unknown ids listed per profiles file; the rest are counted


def _profile_ids(
    model: str, gpu: str, gpus: dict[str, GpuSpec], models: dict[str, ModelArch]
) -> tuple[str, str] | None:
    """(field, message) for an unknown model or GPU of a profile entry."""
    if model not in models:
        return "model", f"unknown model {model!r}; {did_you_mean(model, models.keys())}"
    if gpu not in gpus:
        return "gpu", f"unknown gpu {gpu!r}; {did_you_mean(gpu, gpus.keys())}"
    return None


def _check_models(problem: Problem, models: dict[str, ModelArch], errors: _Errors) -> None:
    """Every workload's model must be in the model catalog."""
    for kind in ("train", "serve"):
        for i, w in enumerate(getattr(problem.workloads, kind)):
            if w.model not in models:
                errors.add(
                    ("workloads", kind, i, "model"),
                    f"unknown model {w.model!r}; {did_you_mean(w.model, models.keys())}",
                )


def _read_offer_files(
    problem: Problem, base: Path, all_gpus: dict[str, GpuSpec], errors: _Errors
) -> tuple[dict[str, Offer], list[str]]:
    """Offers of the problem's offers files (a later file's id wins) and the paths read."""
    offers: dict[str, Offer] = {}
    files: list[str] = []
    for i, name in enumerate(problem.offers.files):
        path = _find_offer_file(name, base)
        if path is None:
            errors.add(
                ("offers", "files", i),
                f"offers file {name!r} not found (looked in {base} and {CATALOG_DIR})",
            )
            continue
        files.append(str(path))
        try:
            offers.update(load_offers(path, all_gpus))
        except InputError as exc:  # say which entry of the problem named the bad file
            errors.add(("offers", "files", i), f"offers file {name!r}: {exc}")
    return offers, files


def _add_inline_offers(
    problem: Problem, all_gpus: dict[str, GpuSpec], offers: dict[str, Offer], errors: _Errors
) -> None:
    """Add ``offers.extra`` to ``offers``; an inline offer replaces a file's offer of its id
    (that is what inline offers are for), but two inline offers may not share an id."""
    seen: dict[str, int] = {}
    for i, o in enumerate(problem.offers.extra):
        if o.id in seen:
            errors.add(
                ("offers", "extra", i, "id"),
                f"offer id {o.id!r} is also offers.extra[{seen[o.id]}]; ids must be unique",
            )
            continue
        seen[o.id] = i
        if o.gpu not in all_gpus:
            errors.add(
                ("offers", "extra", i, "gpu"),
                f"offer {o.id!r}: unknown gpu {o.gpu!r}; {did_you_mean(o.gpu, all_gpus.keys())}",
            )
            continue
        offers[o.id] = o


def _override_offers(problem: Problem, offers: dict[str, Offer], errors: _Errors) -> None:
    """Apply ``overrides.offers`` in place; the override's source replaces the offer's."""
    for oid, ov in problem.overrides.offers.items():
        if oid not in offers:
            errors.add(
                ("overrides", "offers", oid),
                f"unknown offer {oid!r}; {did_you_mean(oid, offers.keys())}",
            )
            continue
        upd = {k: v for k, v in ov.model_dump(exclude={"source"}).items() if v is not None}
        if upd.get("fabric") == "none":
            upd["fabric_gbps_per_gpu"] = None
        data = {**offers[oid].model_dump(), **upd, "source": ov.source}
        try:  # re-validate: an override must leave a consistent offer
            offers[oid] = Offer.model_validate(data)
        except ValidationError as exc:
            why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            errors.add(("overrides", "offers", oid), f"the overridden offer is not valid: {why}")


def estimates_allowed(choice: OfferChoice) -> bool:
    """Whether offers priced by estimate may enter the plan: ``offers.estimates`` if given,
    else whether the problem lists its offers files (a file the problem names is read whole,
    as it was before estimates were left out of the default files).

    >>> estimates_allowed(OfferChoice()), estimates_allowed(OfferChoice(files=["x.yaml"]))
    (False, True)
    >>> estimates_allowed(OfferChoice(estimates=True)), estimates_allowed(
    ...     OfferChoice(files=["x.yaml"], estimates=False))
    (True, False)
    """
    if choice.estimates is not None:
        return choice.estimates
    return "files" in choice.model_fields_set


def _without_estimates(problem: Problem, offers: dict[str, Offer]) -> dict[str, Offer]:
    """``offers`` less those priced by estimate (:attr:`Offer.estimated`) unless the problem
    allows them (:func:`estimates_allowed`); the problem's own inline offers always stay, and
    an override gives an offer the problem's source, so it stays too."""
    if estimates_allowed(problem.offers):
        return offers
    inline = {o.id for o in problem.offers.extra}
    return {oid: o for oid, o in offers.items() if oid in inline or not o.estimated}


def _trusted_offers(
    problem: Problem, offers: dict[str, Offer], gpus: dict[str, GpuSpec]
) -> dict[str, Offer]:
    """Offers for allowed GPUs from allowed providers; marketplaces only when allowed; each
    provider's negotiated discount applied once, here."""
    providers = problem.offers.providers
    caps = {(c.provider, c.gpu): c.max_gpus for c in problem.offers.provider_caps}
    return {
        oid: within_provider_cap(
            discounted(o, problem.offers.discounts.get(o.provider, 0.0)),
            caps.get((o.provider, o.gpu)),
        )
        for oid, o in offers.items()
        if o.gpu in gpus
        and (providers is None or o.provider in providers)
        and (problem.offers.marketplaces or not o.marketplace)
    }


def contract_offer_id(i: int, c: Contract) -> str:
    """The id of ``fleet.contracts[i]`` as a committed offer.

    >>> c = Contract(provider="lambda", gpu="h100-sxm", count=16, start="2026-07",
    ...              end="2027-06", usd_per_gpu_hour=2.0)
    >>> contract_offer_id(0, c)
    'contract-1-lambda-h100-sxm'
    """
    return f"contract-{i + 1}-{c.provider}-{c.gpu}"


def contract_offers(problem: Problem, gpus: dict[str, GpuSpec]) -> dict[str, Offer]:
    """``fleet.contracts`` as committed offers: capacity of ``count`` GPUs inside the term,
    at no marginal cost (the contract is paid whatever the plan does)."""
    out = {}
    for i, c in enumerate(problem.fleet.contracts):
        if c.gpu in gpus:
            o = contract_offer(i, c, gpus[c.gpu])
            out[o.id] = o
    return out


def contract_offer(i: int, c: Contract, gpu: GpuSpec) -> Offer:
    """``fleet.contracts[i]`` as a committed offer (a ValidationError if it is not a valid one)."""
    unit = c.gpus_per_instance or min(gpu.node_gpus, c.count)
    oid = contract_offer_id(i, c)
    return Offer(
        id=oid,
        provider=c.provider,
        gpu=c.gpu,
        kind="on_demand",
        usd_per_gpu_hour=c.usd_per_gpu_hour,
        gpus_per_instance=min(unit, c.count),
        max_gpus=c.count,
        fabric=c.fabric,
        fabric_gbps_per_gpu=c.fabric_gbps_per_gpu,
        committed=True,
        available_from=c.start,
        available_until=c.end,
        source=f"fleet.contracts[{i}]: signed before the plan",
        as_of=c.start,
    )


def _why(exc: ValidationError) -> str:
    """A pydantic error's messages, without pydantic's prefixes, on one line."""
    return "; ".join(
        f"{format_loc(tuple(e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
        if e["loc"]
        else e["msg"].removeprefix("Value error, ")
        for e in exc.errors()[:5]
    )


def _slo_unit_warnings(problem: Problem) -> list[str]:
    """Latency targets that look like seconds (``p95_tpot_ms: 0.5``), each said once."""
    out = []
    for i, w in enumerate(problem.workloads.serve):
        for name in ("p95_ttft_ms", "p95_tpot_ms"):
            note = unit_warning(f"workloads.serve[{i}] ({w.name})", name, getattr(w.slo, name))
            if note is not None:
                out.append(note)
    return out


def _check_fleet(
    problem: Problem,
    gpus: dict[str, GpuSpec],
    offers: dict[str, Offer],
    errors: _Errors,
    warnings: list[str],
) -> None:
    """GPUs and providers of ``fleet`` and ``offers.discounts`` exist; dates make sense."""
    start, T = problem.horizon.start, problem.horizon.months
    for i, o in enumerate(problem.fleet.owned):
        where = ("fleet", "owned", i)
        if o.gpu not in gpus:
            errors.add(
                (*where, "gpu"),
                f"unknown or not allowed gpu {o.gpu!r}; {did_you_mean(o.gpu, gpus.keys())}",
            )
        if o.bought is not None and month_index(start, o.bought) >= 0:
            errors.add(
                (*where, "bought"),
                f"bought {o.bought} is not before the horizon start {start}; GPUs that arrive "
                "during the horizon are `arrives: YYYY-MM` (on order) or purchases to plan",
            )
        if o.arrives is not None and not 0 <= month_index(start, o.arrives) < T:
            errors.add(
                (*where, "arrives"),
                f"arrives {o.arrives} is outside the horizon {start} + {T} months",
            )
        spec = gpus.get(o.gpu)
        if spec is not None and spec.liquid_cooled and not problem.site.liquid_cooling:
            # the team has them, so they run somewhere: planned, but the contradiction is said
            warnings.append(
                f"fleet.owned[{i}]: {o.gpu} runs in {spec.server}, which needs liquid cooling, "
                "but site.liquid_cooling is false; planned as owned all the same (no more can "
                "be bought on this site)"
            )
    known = {o.provider for o in offers.values()}
    for i, c in enumerate(problem.fleet.contracts):
        where = ("fleet", "contracts", i)
        if c.gpu not in gpus:
            errors.add(
                (*where, "gpu"),
                f"unknown or not allowed gpu {c.gpu!r}; {did_you_mean(c.gpu, gpus.keys())}",
            )
        if c.provider not in known:
            errors.add(
                (*where, "provider"),
                f"unknown provider {c.provider!r}; {did_you_mean(c.provider, known)}",
            )
        if c.gpu in gpus:
            try:
                contract_offer(i, c, gpus[c.gpu])
            except ValidationError as exc:
                errors.add(where, f"the contract is not a valid offer: {_why(exc)}")
        if month_index(start, c.end) < 0:
            warnings.append(
                f"fleet.contracts[{i}]: ends {c.end}, before the horizon starts ({start}): "
                "it neither costs nor gives anything in this plan"
            )
    for p in problem.offers.discounts:
        if p not in known:
            errors.add(
                ("offers", "discounts", p), f"unknown provider {p!r}; {did_you_mean(p, known)}"
            )


def resolve(
    problem: Problem,
    doc: YamlDoc | None = None,
    base_dir: Path | None = None,
    gpu_catalog: dict[str, GpuSpec] | None = None,
    model_catalog: dict[str, ModelArch] | None = None,
) -> Inputs:
    """Check ids against the catalogs, apply overrides, gather trusted offers.

    Every unknown id is reported (not just the first), each as
    ``file:line: field.path: unknown gpu 'x'; did you mean 'y'?``. A model the resolution
    builds from valid fields that does not validate is bad input too (exit 2), never a crash.
    """
    try:
        return _resolve(problem, doc, base_dir, gpu_catalog, model_catalog)
    except ValidationError as exc:
        where = f"{doc.path}: " if doc is not None else ""
        raise InputError(
            f"invalid problem: {where}the problem's fields do not make a valid "
            f"{exc.title}: {_why(exc)}"
        ) from None


def _resolve(
    problem: Problem,
    doc: YamlDoc | None,
    base_dir: Path | None,
    gpu_catalog: dict[str, GpuSpec] | None,
    model_catalog: dict[str, ModelArch] | None,
) -> Inputs:
    errors = _Errors(doc)
    all_gpus = gpu_catalog if gpu_catalog is not None else load_gpus()
    all_gpus = _custom_gpus(problem, all_gpus, errors)
    models = model_catalog if model_catalog is not None else load_models()
    warnings: list[str] = []
    models = with_model_files(
        problem.model_files, base_dir or Path.cwd(), models, errors.add, warnings.append
    )
    gpus = _allowed_gpus(problem, all_gpus, errors)
    _check_models(problem, models, errors)
    for loc, text in serve_gpu_errors(problem.workloads.serve, list(gpus)):
        errors.add(loc, text)
    profiles = _read_profiles(problem, base_dir or Path.cwd(), all_gpus, models, errors)
    offers, files = _read_offer_files(problem, base_dir or Path.cwd(), all_gpus, errors)
    _add_inline_offers(problem, all_gpus, offers, errors)
    _override_offers(problem, offers, errors)
    offers = _without_estimates(problem, offers)
    check_providers(problem, offers, errors)
    check_provider_caps(problem, gpus, offers, errors)
    _check_fleet(problem, gpus, offers, errors, warnings)
    warnings += _slo_unit_warnings(problem)
    errors.raise_if_any()
    inputs = Inputs(
        problem,
        gpus,
        models,
        _trusted_offers(problem, offers, gpus) | contract_offers(problem, gpus),
        offer_files=files,
        finance=finance_terms(problem),
        warnings=warnings,
        profiles=profiles,
        market=resolve_market(problem.market, list(gpus), problem.horizon.months),
    )
    if problem.scenarios is None:
        return inputs
    return _with_scenarios(inputs, doc, base_dir, gpu_catalog, model_catalog)


def _with_scenarios(
    inputs: Inputs,
    doc: YamlDoc | None,
    base_dir: Path | None,
    gpu_catalog: dict[str, GpuSpec] | None,
    model_catalog: dict[str, ModelArch] | None,
) -> Inputs:
    """``inputs`` with its problem's scenarios, each validated and resolved as a problem file
    of its own (the file's data with the scenario's values), so that a scenario is refused
    exactly where the file would be. Warnings a scenario shares with the file are said once;
    a warning of its own is kept, prefixed with its name."""
    problem = inputs.problem
    assert problem.scenarios is not None
    data = (
        doc.data
        if doc is not None
        else problem.model_dump(mode="json", by_alias=True, exclude_unset=True)
    )
    gpu_catalog = gpu_catalog if gpu_catalog is not None else load_gpus()
    model_catalog = model_catalog if model_catalog is not None else load_models()
    path = doc.path if doc is not None else Path("<memory>")
    scenarios, warnings = [], list(inputs.warnings)
    for sd in scenario_data(data, problem.scenarios, doc):
        sdoc = YamlDoc(sd.data, {**(doc.lines if doc is not None else {}), **sd.lines}, path)
        s_inputs = _scenario_inputs(sd.name, sdoc, base_dir, gpu_catalog, model_catalog)
        _same_shape(problem, s_inputs.problem, sd.name)
        new = [w for w in s_inputs.warnings if w not in inputs.warnings]
        warnings += [f"scenario {sd.name!r}: {w}" for w in new]
        scenarios.append(Scenario(sd.name, sd.probability, s_inputs, sd.changes))
    sourced = _sourced(tuple(scenarios), str(path), inputs.source_sha256)
    return dataclasses.replace(inputs, scenarios=sourced, warnings=warnings)


def _scenario_inputs(
    name: str,
    doc: YamlDoc,
    base_dir: Path | None,
    gpu_catalog: dict[str, GpuSpec],
    model_catalog: dict[str, ModelArch],
) -> Inputs:
    """One scenario's data validated and resolved; its errors name the scenario."""
    label = f"problem file (scenario {name!r})"
    problem = validate(Problem, doc, label)
    try:
        return resolve(problem, doc, base_dir, gpu_catalog, model_catalog)
    except InputError as exc:
        why = str(exc).removeprefix("invalid problem file: ").removeprefix("invalid problem: ")
        raise InputError(f"invalid {label}: {why}") from None


def _same_shape(problem: Problem, scenario: Problem, name: str) -> None:
    """A scenario has the file's months and workloads (what a two-stage plan shares); the
    keys a scenario may set cannot change them, so this guards the rule, not the user."""

    def names(p: Problem) -> list[str]:
        return [w.name for w in p.workloads.train] + [w.name for w in p.workloads.serve]

    if scenario.month_labels() != problem.month_labels() or names(scenario) != names(problem):
        raise InputError(
            f"scenario {name!r}: its months or workloads differ from the problem file's; "
            "a scenario changes numbers, not the plan's shape"
        )


def with_source(inputs: Inputs, path: str, digest: str) -> Inputs:
    """``inputs`` read from ``path`` (whose bytes hash to ``digest``), its scenarios too."""
    scenarios = _sourced(inputs.scenarios, path, digest)
    return dataclasses.replace(inputs, source_path=path, source_sha256=digest, scenarios=scenarios)


def _sourced(scenarios: tuple[Scenario, ...], path: str, digest: str) -> tuple[Scenario, ...]:
    """Each scenario as read from ``path [scenario NAME]``, with a digest of the file's
    digest and its name: a plan names the file it came from, a scenario's plan the scenario."""
    return tuple(
        dataclasses.replace(
            s,
            inputs=dataclasses.replace(
                s.inputs,
                source_path=f"{path} [scenario {s.name}]",
                source_sha256=hashlib.sha256(f"{digest}\n{s.name}".encode()).hexdigest(),
            ),
        )
        for s in scenarios
    )


def load_problem(path: str | Path) -> Inputs:
    """Load, validate and resolve a problem file. Every bad input is an InputError."""
    p = Path(path)
    doc = load_yaml(p)
    problem = validate(Problem, doc, "problem file")
    inputs = resolve(problem, doc, base_dir=p.resolve().parent)
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    return with_source(inputs, str(p), digest)


def load_problem_text(text: str, name: str = "<text>", base_dir: Path | None = None) -> Inputs:
    """Same as :func:`load_problem` for YAML text (tests, what-if scenarios)."""
    doc = parse_yaml_text(text, Path(name))
    problem = validate(Problem, doc, "problem file")
    inputs = resolve(problem, doc, base_dir=base_dir)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return with_source(inputs, name, digest)


# The schema and month names are re-exported: callers import them from here.
__all__ = [
    "DEFAULT_MAX_LOAD", "DEFAULT_REDUNDANCY", "MAX_USD", "NAME_MAX", "SHARE_TOLERANCE", "Budget",
    "Contract", "CustomGpu", "Finance", "Fleet", "GpuOverride", "Horizon", "Inputs", "Month",
    "contract_offer",
    "OfferChoice", "OfferOverride", "Overrides", "OwnedGpus", "Problem", "RequestBucket",
    "Risk", "Scenario", "ScenarioScale", "ScenarioSpec", "ServeWorkload", "Site", "Slo",
    "SolverOptions", "Spot", "TokenShape", "TokenSize", "Traffic",
    "TrainJob", "Window", "Workloads", "contract_offer_id", "contract_offers", "discounted",
    "finance_terms", "load_problem", "load_problem_text", "month_index", "month_label",
    "parse_month", "resolve", "with_source",
]  # fmt: skip
