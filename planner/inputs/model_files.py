"""A problem's own model catalog files (``model_files:``), added to ``catalogs/models.yaml``.

A model brought in with ``planner model import-hf CONFIG.json --id ID -o my-models.yaml`` is
used in a problem by listing the file: ``model_files: [my-models.yaml]`` (relative to the
problem file). An id that is also in the shipped catalog is replaced by the file's entry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from planner.base.errors import InputError
from planner.inputs.catalog import load_models
from planner.inputs.model_arch import ModelArch

AddError = Callable[[tuple[str | int, ...], str], None]


def with_model_files(
    names: list[str], base: Path, models: dict[str, ModelArch], add_error: AddError
) -> dict[str, ModelArch]:
    """``models`` with every entry of the files ``names`` (relative to ``base``) added.

    A missing, unreadable or invalid file is reported through ``add_error`` at
    ``model_files[i]`` (the problem's error list names the problem file and line).
    """
    if not names:
        return models
    out = dict(models)
    for i, name in enumerate(names):
        path = Path(name) if Path(name).is_absolute() else base / name
        if not path.is_file():
            add_error(("model_files", i), f"model file {name!r} not found (looked in {base})")
            continue
        try:
            out.update(load_models(path))
        except InputError as exc:
            add_error(("model_files", i), f"model file {name!r}: {exc}")
    return out
