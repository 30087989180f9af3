"""A problem's own model catalog files (``model_files:``), added to ``catalogs/models.yaml``.

A model brought in with ``planner model import-hf CONFIG.json --id ID -o my-models.yaml`` is
used in a problem by listing the file: ``model_files: [my-models.yaml]`` (relative to the
problem file).

An id defined twice: the same definition (shape and counts; name, source and date aside) is
accepted silently. A file that redefines a catalog id is used, with a warning naming both
definitions and the fields that differ: the file is the user's own, deliberate choice (a
corrected or newer config), and the warning keeps it from passing unnoticed. Two files that
define one id differently are refused: nothing says which one the user meant (the order of a
list is no statement of intent).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from planner.base.errors import InputError
from planner.inputs.catalog import load_models
from planner.inputs.model_arch import ModelArch

AddError = Callable[[tuple[str | int, ...], str], None]
Warn = Callable[[str], None]

# fields that describe an entry without changing what the physics computes
_LABELS = frozenset({"name", "source", "as_of"})


def with_model_files(
    names: list[str],
    base: Path,
    models: dict[str, ModelArch],
    add_error: AddError,
    warn: Warn | None = None,
) -> dict[str, ModelArch]:
    """``models`` with every entry of the files ``names`` (relative to ``base``) added.

    A missing, unreadable or invalid file is reported through ``add_error`` at
    ``model_files[i]`` (the problem's error list names the problem file and line), and so is
    an id two files define differently; a catalog id a file redefines goes to ``warn``.
    """
    if not names:
        return models
    out = dict(models)
    defined_in: dict[str, str] = {}  # model id -> the model file that defined it
    for i, name in enumerate(names):
        path = Path(name) if Path(name).is_absolute() else base / name
        problem = _not_a_file(path)
        if problem:
            add_error(("model_files", i), f"model file {name!r} {problem} (looked in {base})")
            continue
        try:
            loaded = load_models(path)
        except InputError as exc:
            add_error(("model_files", i), f"model file {name!r}: {exc}")
            continue
        for mid, model in loaded.items():
            diff = _differences(out[mid], model) if mid in out else []
            if diff and mid in defined_in:
                add_error(
                    ("model_files", i),
                    f"model file {name!r} defines model {mid!r} differently from model file "
                    f"{defined_in[mid]!r} ({'; '.join(diff)}); keep one definition, or give "
                    "the other its own id",
                )
                continue
            if diff and warn is not None:
                warn(
                    f"model file {name!r} redefines model {mid!r} of the model catalog "
                    f"(catalog -> file: {'; '.join(diff)}); the file's definition is used"
                )
            defined_in.setdefault(mid, name)
            out[mid] = model
    return out


def _differences(old: ModelArch, new: ModelArch, most: int = 3) -> list[str]:
    """``field old -> new`` for the first ``most`` fields that differ (labels aside)."""
    a, b = old.model_dump(), new.model_dump()
    keys = [k for k in a if k not in _LABELS and a[k] != b[k]]
    out = [f"{k} {a[k]!r} -> {b[k]!r}" for k in keys[:most]]
    return out + ([f"{len(keys) - most} more"] if len(keys) > most else [])


def _not_a_file(path: Path) -> str:
    """Why ``path`` cannot be read as a model file ("" when it can): a directory says so."""
    if path.is_dir():
        return "is a directory, not a model catalog file"
    if not path.exists():
        return "not found"
    if not path.is_file():
        return "is not a regular file"
    return ""
