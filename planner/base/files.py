"""Reading inputs and writing outputs safely.

* Inputs: only regular files are read (never a device, FIFO or directory), up to a size limit,
  so ``/dev/zero`` or a huge file is a clean error rather than memory exhaustion.
* Outputs: written to a temporary file beside the target and renamed over it, so a reader never
  sees half a file; a symlink stays a symlink (the file it points to is replaced); devices,
  FIFOs and directories are refused; every failure is an :class:`OutputError` "cannot write
  PATH: reason" (exit 2), with no partial file left. The file is ``fsync``-ed before the rename
  and its folder after it, so a power cut never leaves an empty file where the output was.
* One bounded reader per format: :func:`read_text` (YAML and any text), :func:`read_json` /
  :func:`parse_json` (nesting at most :data:`MAX_NESTING` levels, numbers at most
  :data:`MAX_DIGITS` digits, no duplicated keys; errors name the file and the key path) and
  :func:`read_csv` (no duplicated column, rows streamed with their line numbers). A file is
  opened without blocking and checked on its descriptor, so a FIFO swapped in is refused too.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from planner.base.errors import InputError, OutputError

MAX_INPUT_BYTES = 64 * 1024 * 1024  # the default offers catalog is ~0.4 MB; 64 MB is generous
MAX_NESTING = 32  # the deepest real input (a Mélange config, a plan JSON) is under 10 levels
MAX_DIGITS = 100  # a number of more digits is no price, rate or count (int->str stops at 4,300)
MAX_CSV_FIELD = 128 * 1024  # characters in one CSV cell (Python's csv default); GpuInfo ~200


def _open_regular(p: Path, what: str, max_bytes: int) -> int:
    """A read-only descriptor of the regular file ``p`` of at most ``max_bytes``.

    Looked at before it is opened (a device is never opened: opening some has effects), then
    opened with ``O_NONBLOCK`` and checked again on the descriptor, so a FIFO swapped in
    between never blocks; devices and directories are refused.
    """
    try:
        _check_regular(p, os.stat(p), what, max_bytes)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InputError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, expected a {what}") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte in the name: no file can have it
        raise InputError(f"{str(p)!r}: not a file name (it holds a NUL character)") from None
    try:
        _check_regular(p, os.fstat(fd), what, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(p: Path, st: os.stat_result, what: str, max_bytes: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p}: is a directory, expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: not a regular file (a device, FIFO or socket); expected a {what}")
    if st.st_size > max_bytes:
        raise InputError(f"{p}: {st.st_size:,} bytes; a {what} may be at most {max_bytes:,} bytes")


def read_bytes(path: str | Path, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; an InputError otherwise."""
    p = Path(path)
    fd = _open_regular(p, what, max_bytes)
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # it grew while we looked
        raise InputError(f"{p}: larger than {max_bytes:,} bytes; a {what} may not be")
    return data


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; an InputError otherwise."""
    p = Path(path)
    data = read_bytes(p, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None


# ----------------------------------------------------------------------------------- JSON


class JSONSyntaxError(InputError):
    """Text that is not JSON at all (as opposed to JSON the planner refuses); exit 2."""


class _LongNumber(str):
    """A JSON number of more than :data:`MAX_DIGITS` digits, refused (with its key path) once
    the document is parsed."""


class _DuplicateKeys(dict):
    """A JSON object that names a key twice (``dup`` is the first such key)."""

    dup: str = ""


_NESTED = (dict, list, _LongNumber)  # what the check walks into or refuses


def _int_hook(text: str) -> int | _LongNumber:
    return _LongNumber(text) if len(text) > MAX_DIGITS else int(text)


def _float_hook(text: str) -> float | _LongNumber:
    return _LongNumber(text) if len(text) > MAX_DIGITS else float(text)


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    bad = _DuplicateKeys(out)
    bad.dup = dup
    return bad


def key_path(loc: Iterable[str | int]) -> str:
    """``("gpu_info", "A10G", "tputs", 0)`` -> ``gpu_info.A10G.tputs[0]``.

    >>> key_path(("a", 0, "b")), key_path(())
    ('a[0].b', '(top level)')
    """
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _check_json(data: Any, where: str, max_depth: int) -> None:
    """Nesting, long numbers and duplicated keys, found without recursion and named by path."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, _LongNumber):
            raise InputError(
                f"{where}: {key_path(loc)}: a number of {len(value):,} characters "
                f"({value[:20]}...); numbers may have at most {MAX_DIGITS} digits"
            )
        if isinstance(value, (dict, list)) and len(loc) >= max_depth:
            raise InputError(
                f"{where}: {key_path(loc)}: nested more than {max_depth} levels deep; "
                "not a file the planner reads"
            )
        if isinstance(value, _DuplicateKeys):
            raise InputError(
                f"{where}: {key_path(loc)}: key {value.dup!r} appears twice; JSON readers "
                "would silently keep only the last one"
            )
        if isinstance(value, dict):
            stack.extend((v, (*loc, k)) for k, v in value.items() if isinstance(v, _NESTED))
        elif isinstance(value, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(value) if isinstance(v, _NESTED))


def parse_json(text: str, where: str | Path, max_depth: int = MAX_NESTING) -> Any:
    """Parse JSON text with the reader's guarantees; ``where`` names it in errors.

    Syntax errors are a :class:`JSONSyntaxError` with line and column; nesting deeper than
    ``max_depth``, a number of more than :data:`MAX_DIGITS` digits or a key named twice in an
    object are an InputError naming the key path. ``NaN`` and ``Infinity`` are read as Python
    does (callers refuse them where a finite number is needed).

    >>> parse_json('{"a": [1, 2.5]}', "x.json")
    {'a': [1, 2.5]}
    """
    try:
        data = json.loads(
            text, parse_int=_int_hook, parse_float=_float_hook, object_pairs_hook=_pairs_hook
        )
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(
            f"{where}:{exc.lineno}:{exc.colno}: not a JSON file ({exc.msg})"
        ) from None
    except RecursionError:
        raise InputError(
            f"{where}: nested too deeply to read (more than {max_depth} levels); "
            "not a file the planner reads"
        ) from None
    _check_json(data, str(where), max_depth)
    return data


def read_json(path: str | Path, what: str = "JSON file", max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """The JSON document in a regular file (see :func:`parse_json`); an InputError otherwise.

    The plan reader and every importer call this: ``read_json(path, "plan JSON")``.
    """
    p = Path(path)
    return parse_json(read_text(p, what, max_bytes), p)


# ----------------------------------------------------------------------------------- CSV


class CsvRows:
    """The columns of a CSV file and its rows, streamed: ``for line, row in rows``.

    ``row`` maps every column to its stripped text (``""`` when the row is short); ``line``
    is the line the record starts on. Trailing empty cells beyond the header are ignored; a
    row with more non-empty cells than the header has columns is an InputError (a comma in
    an unquoted cell would shift every later column).
    """

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self._reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = next(self._reader, [])
        except csv.Error as exc:
            raise InputError(f"{path}:1: not a CSV header: {exc}") from None
        self.columns = [c.strip() for c in header]
        seen: dict[str, int] = {}
        for i, name in enumerate(self.columns):
            if name and name in seen:
                raise InputError(
                    f"{path}:1: column {name!r} appears twice (columns {seen[name] + 1} and "
                    f"{i + 1}); which one holds the values is ambiguous"
                )
            seen[name] = i

    def require(self, required: Iterable[str]) -> None:
        """An InputError naming the first required column the header lacks."""
        if not any(self.columns):
            raise InputError(f"{self.path}: empty file, expected a CSV header")
        for col in required:
            if col not in self.columns:
                raise InputError(
                    f"{self.path}: missing column {col!r} (columns: {', '.join(self.columns)})"
                )

    def __iter__(self) -> Iterator[tuple[int, dict[str, str]]]:
        cols, n = self.columns, len(self.columns)
        last = self._reader.line_num
        while True:
            try:
                cells = next(self._reader, None)
            except csv.Error as exc:
                raise InputError(f"{self.path}:{last + 1}: cannot read CSV: {exc}") from None
            if cells is None:
                return
            line, last = last + 1, self._reader.line_num
            if not cells:  # a blank line
                continue
            if len(cells) > n and any(c.strip() for c in cells[n:]):
                raise InputError(
                    f"{self.path}:{line}: {len(cells)} cells, the header has {n} columns "
                    "(an unquoted comma in a cell?)"
                )
            yield (
                line,
                {c: (cells[i].strip() if i < len(cells) else "") for i, c in enumerate(cols)},
            )


def read_csv(path: str | Path, what: str = "CSV file", max_bytes: int = MAX_INPUT_BYTES) -> CsvRows:
    """A CSV file (UTF-8, a BOM allowed) as its columns and its rows, streamed.

    Regular files of at most ``max_bytes`` only; a duplicated column name is an InputError
    naming the file and the column; cells are at most :data:`MAX_CSV_FIELD` characters.
    """
    p = Path(path)
    text = read_text(p, what, max_bytes).removeprefix("\ufeff")
    csv.field_size_limit(MAX_CSV_FIELD)
    return CsvRows(p, text)


# ----------------------------------------------------------------------------------- outputs


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:  # os.umask is process-wide and racy in threads; /proc reads it safely
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def output_target(path: str | Path) -> Path:
    """The file an output really replaces: a symlink's target; refuses what is not a file.

    >>> output_target("outputs/x.json").name
    'x.json'
    """
    try:
        return _output_target(Path(path))
    except OSError as exc:  # a name too long, a loop the OS refuses to follow, ...
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _output_target(p: Path) -> Path:
    path = p
    if p.is_symlink():
        p = Path(os.path.realpath(p))
        if p.is_symlink():  # realpath stops on a loop
            raise OutputError(f"cannot write {path}: a symlink loop")
    if p.exists():
        mode = p.stat().st_mode
        if stat.S_ISDIR(mode):
            raise OutputError(f"cannot write {path}: it is a directory")
        if not stat.S_ISREG(mode):
            raise OutputError(f"cannot write {path}: not a regular file (a device, FIFO or socket)")
    for parent in p.parents:  # the first existing ancestor must be a folder
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"cannot write {path}: {parent} is a file, not a folder")
            break
    return p


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file (symlinks followed; missing files by path).

    >>> same_file("outputs/x.json", "outputs/../outputs/x.json")
    True
    """
    try:  # both exist: the same inode (hard links, symlinks, bind mounts)
        return os.path.samefile(a, b)
    except OSError:
        return Path(os.path.realpath(a)) == Path(os.path.realpath(b))


def refuse_overwriting_inputs(output: str | Path, inputs: Iterable[str | Path]) -> None:
    """An OutputError when ``output`` is one of ``inputs`` (an import never writes onto what it
    reads)."""
    for p in inputs:
        if same_file(p, output):
            raise OutputError(f"cannot write {output}: it is the input {p}")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: never half a file.

    The file keeps its mode if it existed, else gets 0666 less the umask (not mkstemp's 0600).
    """
    target = output_target(path)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~_umask()
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            _fsync(fh.fileno())  # the bytes on disk before the name points at them
        os.replace(tmp, target)
        tmp = None
        _fsync_dir(target.parent)  # the rename itself on disk
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte in the name
        raise OutputError(
            f"cannot write {str(path)!r}: not a file name (a NUL character)"
        ) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


#: fsync errors that mean "this file system does not do that", not "the data is lost"
_NO_FSYNC = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EROFS}


def _fsync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_FSYNC:
            raise


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a folder that cannot be opened is left as is)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # no read permission on the folder, or a platform without folder fds
        return
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
