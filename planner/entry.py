"""The ``planner`` console script: as few imports as possible before Ctrl-C is handled.

Everything else (click, rich, pydantic, the commands) is imported inside :func:`main`, so an
interrupt at any moment, start-up included, prints one line and exits 130 (SIGTERM: 143).
"""

from __future__ import annotations

import signal
import sys


def _terminate(signum: int, frame: object) -> None:
    from planner.errors import Terminated

    raise Terminated()


def main() -> None:
    try:
        signal.signal(signal.SIGTERM, _terminate)
        from planner.cli import run

        code = run()
    except KeyboardInterrupt:
        code = _interrupted("interrupted (Ctrl-C)", 130)
    except BaseException as exc:
        if type(exc).__name__ != "Terminated":
            raise
        code = _interrupted("terminated (SIGTERM)", 143)
    sys.exit(code)


def _interrupted(what: str, code: int) -> int:
    try:
        sys.stderr.write(f"{what}: stopped; nothing half-written\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code
