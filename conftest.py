"""Test-run settings that must apply before any test module (or doctest module) is imported.

Compiled bytecode is cached even where ``PYTHONDONTWRITEBYTECODE`` is set (it is in some
containers and CI images). Without a cache every xdist worker compiles the package and
pytest rewrites the asserts of all ~80 test modules afresh (about 7 s of each worker's
collection), and every ``python -m planner`` a test starts compiles the package again. The
setting's intent, no ``__pycache__`` in the source tree, is kept: the cache goes to a folder
under the temporary directory (``PYTHONPYCACHEPREFIX``), which the child processes inherit.
A machine that writes bytecode normally is left as it is.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def _cache_bytecode_outside_the_tree() -> None:
    if not sys.dont_write_bytecode or sys.pycache_prefix:
        return
    user = os.getuid() if hasattr(os, "getuid") else 0
    prefix = Path(tempfile.gettempdir()) / f"planner-pycache-{user}"
    prefix.mkdir(mode=0o700, exist_ok=True)
    sys.pycache_prefix = str(prefix)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


_cache_bytecode_outside_the_tree()
