"""What the page may read and write: the working folder, nothing outside it, and small uploads.

The page reads problems the way the CLI does (:func:`planner.inputs.problem.load_problem_text`:
the same safe YAML loader, depth and size limits, the same named errors); it opens files by
path only inside the working folder, and writes only the workbooks it offers for download,
inside that folder's ``outputs/``.
"""

from __future__ import annotations

from pathlib import Path

from planner.base.errors import InputError
from planner.base.files import read_bytes

# A problem pasted, uploaded or opened in the page: the shipped problems are 1-5 kB and a
# generated 200-workload problem ~60 kB; 1 MiB leaves room and keeps a page from sending the
# server the CLI's 64 MB file limit.
MAX_UPLOAD_BYTES = 1024 * 1024
PROBLEM_SUFFIXES = (".yaml", ".yml")


class OutsideFolderError(InputError):
    """A path the page was asked to open is not inside the working folder."""


def inside(workdir: Path, path: str) -> Path:
    """``path`` (relative to ``workdir``, or absolute) resolved, if it lies inside ``workdir``;
    an :class:`OutsideFolderError` otherwise (``..``, absolute paths elsewhere, symlinks out).

    >>> import tempfile; d = Path(tempfile.mkdtemp()).resolve()
    >>> inside(d, "problems/a.yaml") == d / "problems" / "a.yaml"
    True
    >>> inside(d, "../etc/passwd")
    Traceback (most recent call last):
    ...
    planner.ui.safety.OutsideFolderError: ../etc/passwd: outside the working folder ...
    """
    root = workdir.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise OutsideFolderError(
            f"{path}: outside the working folder {root}; the page opens files inside it only"
        )
    return target


def read_problem_file(workdir: Path, path: str) -> tuple[str, str]:
    """(text, name) of a problem file inside the working folder (a YAML file, at most
    :data:`MAX_UPLOAD_BYTES`); the name is its path relative to the folder."""
    target = inside(workdir, path)
    if target.suffix.lower() not in PROBLEM_SUFFIXES:
        raise InputError(f"{path}: not a problem file (a .yaml or .yml file)")
    if not target.is_file():
        raise InputError(f"{path}: no such file in the working folder")
    data = read_bytes(target, "problem file", MAX_UPLOAD_BYTES)
    return data.decode("utf-8", errors="replace"), str(target.relative_to(workdir.resolve()))


def check_upload(size: int) -> None:
    """Refuse a pasted or uploaded problem over :data:`MAX_UPLOAD_BYTES`."""
    if size > MAX_UPLOAD_BYTES:
        raise InputError(
            f"the problem is {size:,} bytes; a problem file may be at most {MAX_UPLOAD_BYTES:,} bytes"
        )


def problem_files(workdir: Path, limit: int = 200) -> list[str]:
    """The problem files the page offers to open: YAML files in the folder's ``problems/``
    (and the folder itself), relative paths, sorted."""
    root = workdir.resolve()
    found: list[str] = []
    for folder in (root / "problems", root):
        if folder.is_dir():
            found += [
                str(p.relative_to(root))
                for p in sorted(folder.iterdir())
                if p.suffix.lower() in PROBLEM_SUFFIXES and p.is_file()
            ]
    return found[:limit]


def output_path(workdir: Path, name: str) -> Path:
    """Where a workbook for download is written: ``<folder>/outputs/<name>`` (inside it)."""
    out = inside(workdir, f"outputs/{Path(name).name}")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out
