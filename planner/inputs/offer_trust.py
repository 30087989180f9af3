"""Which offers a problem trusts, and on what terms: its providers, caps per provider and
negotiated discounts checked and applied to the offers read (split from
:mod:`planner.inputs.problem`, which calls these while resolving a problem)."""

from __future__ import annotations

from typing import Protocol

from planner.base.yamlio import did_you_mean
from planner.inputs.catalog import GpuSpec, Offer
from planner.inputs.schema import Problem


class Errors(Protocol):
    """Where input errors are gathered (:class:`planner.inputs.problem._Errors`)."""

    def add(self, loc: tuple, text: str) -> None: ...


def check_providers(problem: Problem, offers: dict[str, Offer], errors: Errors) -> None:
    """Every provider of ``offers.providers`` must have an offer (before any filtering)."""
    providers = problem.offers.providers
    if providers is None:
        return
    known = {o.provider for o in offers.values()}
    for i, p in enumerate(providers):
        if p not in known:
            errors.add(
                ("offers", "providers", i), f"unknown provider {p!r}; {did_you_mean(p, known)}"
            )


def check_provider_caps(
    problem: Problem, gpus: dict[str, GpuSpec], offers: dict[str, Offer], errors: Errors
) -> None:
    """A provider cap names a GPU type the plan may use and a provider that offers it (a typo
    would otherwise cap nothing)."""
    for i, c in enumerate(problem.offers.provider_caps):
        where = ("offers", "provider_caps", i)
        if c.gpu not in gpus:
            errors.add((*where, "gpu"), f"gpu {c.gpu!r} is not a GPU type the plan may use; "
                       f"{did_you_mean(c.gpu, list(gpus))}")  # fmt: skip
            continue
        known = sorted({o.provider for o in offers.values() if o.gpu == c.gpu})
        if c.provider not in known:
            errors.add(
                (*where, "provider"),
                f"provider {c.provider!r} offers no {c.gpu} in the problem's offers files; "
                f"{did_you_mean(c.provider, known)}",
            )


def within_provider_cap(o: Offer, cap: int | None) -> Offer:
    """The offer capped at its provider's cap for its GPU type (no offer delivers more than
    its provider can), so that every stage treats it as capped: an uncapped offer would
    otherwise dominate a dearer one of another provider that the cap makes necessary.
    A cap below one instance leaves the offer out in effect (max_gpus cannot go below it)."""
    if cap is None or (o.max_gpus is not None and o.max_gpus <= cap):
        return o
    return o.model_copy(update={"max_gpus": max(cap, o.gpus_per_instance)})


def discounted(o: Offer, share: float) -> Offer:
    """The offer at ``(1 - share)`` of its listed price, its source saying so. Idempotent:
    the listed price is kept (``list_usd_per_gpu_hour``), so the discount applies once.

    >>> from planner.inputs.catalog import Offer
    >>> o = Offer(id="x", provider="p", gpu="g", kind="on_demand", usd_per_gpu_hour=4.0,
    ...           source="list", as_of="2026")
    >>> discounted(o, 0.25).usd_per_gpu_hour
    3.0
    >>> discounted(discounted(o, 0.25), 0.25).usd_per_gpu_hour
    3.0
    """
    if share <= 0:
        return o
    listed = o.list_usd_per_gpu_hour or o.usd_per_gpu_hour
    # the dated prices too, once (a discounted offer's steps are already discounted)
    steps = o.price_steps
    if o.list_usd_per_gpu_hour is None and steps:
        steps = [
            st.model_copy(update={"usd_per_gpu_hour": st.usd_per_gpu_hour * (1 - share)})
            for st in steps
        ]
    return o.model_copy(
        update={
            "usd_per_gpu_hour": listed * (1 - share),
            "list_usd_per_gpu_hour": listed,
            "price_steps": steps,
            "source": f"{o.source}; negotiated discount {share:.0%} off "
            f"${listed:g} (offers.discounts)",
        }
    )
