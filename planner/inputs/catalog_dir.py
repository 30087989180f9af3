"""Where the shipped catalogs live (one place, so packaging can change it alone)."""

from __future__ import annotations

from pathlib import Path

CATALOG_DIR = Path(__file__).resolve().parents[2] / "catalogs"
