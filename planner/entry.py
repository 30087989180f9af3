"""The ``planner`` console script: as few imports as possible before Ctrl-C is handled.

Everything else (click, rich, pydantic, the commands) is imported inside :func:`main`, so an
interrupt at any moment, start-up included, prints one line and exits 130 (SIGTERM: 143).
"""

from __future__ import annotations

import contextlib
import signal
import sys


def terminate(signum: int, frame: object) -> None:
    """Signal handler: raise, so ``finally`` blocks run (solver ended, files removed)."""
    from planner.errors import Terminated

    raise Terminated(signum)


def main() -> None:
    _tolerant_streams()
    try:
        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGHUP, terminate)
        from planner.cli import run

        code = run()
    except BrokenPipeError:  # `planner ... | head`: the reader left; say nothing more
        from planner.fileio import silence_stdout

        silence_stdout()
        code = 141  # 128 + SIGPIPE, as a shell reports it
    except KeyboardInterrupt:
        code = _interrupted("interrupted (Ctrl-C)", 130)
    except BaseException as exc:
        if type(exc).__name__ != "Terminated":
            raise
        signum = exc.args[0] if exc.args else signal.SIGTERM
        code = _interrupted(f"terminated ({signal.Signals(signum).name})", 128 + signum)
    sys.exit(code)


def _interrupted(what: str, code: int) -> int:
    try:
        sys.stderr.write(f"{what}: stopped; nothing half-written\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code


def _tolerant_streams() -> None:
    """Print under any locale: a character the terminal cannot encode becomes an escape
    (``\\u2500``), never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
