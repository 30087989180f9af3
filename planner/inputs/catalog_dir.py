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
