"""Where the shipped catalogs live (one place, so packaging can change it alone).

The catalogs are package data: ``planner/_catalogs`` (a link to the repository's top-level
``catalogs/`` in a checkout, a real folder in an installed wheel), found through
:mod:`importlib.resources`, so a wheel installed anywhere reads its own copy. A problem's
relative paths are resolved against the problem's folder first (``planner.inputs.problem``),
so a file beside the problem still wins over the shipped one.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2] / "catalogs"


def shipped_catalog_dir() -> Path:
    """The folder of the shipped catalogs: the package's ``_catalogs`` data (resolved, so a
    checkout's link names the repository's ``catalogs/``), else a checkout's ``catalogs/``
    (a file system without links)."""
    data = files("planner") / "_catalogs"
    if isinstance(data, Path) and data.is_dir():
        return data.resolve()
    return _CHECKOUT


CATALOG_DIR = shipped_catalog_dir()

#: The shipped offers files, in the order a problem reads them by default (a later file's offer
#: of the same id wins): SkyPilot's public catalogs, the hand-entered offers (capacity blocks,
#: providers SkyPilot does not list), and the committed capacity and capped on-demand offers of
#: today's GPUs. Offers whose price is an estimate are left out unless the problem asks
#: (``offers.estimates``, :attr:`planner.inputs.catalog.Offer.estimated`).
SHIPPED_OFFER_FILES = (
    "offers.yaml",
    "offers-manual.yaml",
    "offers-market.yaml",
    "offers-committed.yaml",
)
