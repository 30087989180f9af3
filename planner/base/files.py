"""Reading inputs and writing outputs safely.

* Inputs: only regular files are read (never a device, FIFO or directory), up to a size limit,
  so ``/dev/zero`` or a huge file is a clean error rather than memory exhaustion.
* Outputs: written to a temporary file beside the target and renamed over it, so a reader never
  sees half a file; a symlink stays a symlink (the file it points to is replaced); devices,
  FIFOs and directories are refused; every failure is an :class:`OutputError` "cannot write
  PATH: reason" (exit 2), with no partial file left.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from planner.base.errors import InputError, OutputError

MAX_INPUT_BYTES = 64 * 1024 * 1024  # the default offers catalog is ~0.4 MB; 64 MB is generous


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; an InputError otherwise."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"{p}: file not found") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p}: is a directory, expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: not a regular file (a device, FIFO or socket); expected a {what}")
    if st.st_size > max_bytes:
        raise InputError(f"{p}: {st.st_size:,} bytes; a {what} may be at most {max_bytes:,} bytes")
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # it grew while we looked
        raise InputError(f"{p}: larger than {max_bytes:,} bytes; a {what} may not be")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None


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
    return Path(os.path.realpath(a)) == Path(os.path.realpath(b))


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
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
