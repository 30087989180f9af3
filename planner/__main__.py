"""The ``planner`` console script: as few imports as possible before Ctrl-C is handled.

Everything else (click, rich, pydantic, the commands) is imported inside :func:`main`, so an
interrupt at any moment, start-up included, prints one line and exits 130 (SIGTERM: 143).
"""

from __future__ import annotations

import contextlib
import signal
import sys

from planner.base.clock import mark_entry
from planner.base.errors import terminate

_DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def deferred_signals():
    """Hold Ctrl-C, SIGTERM and SIGHUP while the libraries load, then deliver them.

    PuLP probes optional solvers with ``try: import x / except:``, and a bare ``except``
    swallows the KeyboardInterrupt of a Ctrl-C that lands there: the planner would then solve
    on. Blocked signals stay pending and are raised on the first line after the block.
    """
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def redeliver_lost_signal(unraisable: object) -> None:
    """``sys.unraisablehook``: a Ctrl-C or SIGTERM whose exception landed where Python cannot
    raise it (a weakref callback inside ``import``, a ``__del__``) would be printed as
    "Exception ignored" and lost, and the planner would go on solving. Send the signal again a
    moment later, when ordinary code runs; report any other unraisable as Python does."""
    exc = getattr(unraisable, "exc_value", None)
    signum = _signal_of(exc)
    if signum is None:
        sys.__unraisablehook__(unraisable)  # type: ignore[arg-type]
        return
    import os
    import threading

    resend = threading.Timer(0.05, os.kill, (os.getpid(), signum))
    resend.daemon = True
    resend.start()


def _signal_of(exc: object) -> int | None:
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    if type(exc).__name__ == "Terminated":
        args = getattr(exc, "args", ())
        return args[0] if args else signal.SIGTERM
    return None


def main(exit_now: bool = True) -> None:
    """The console script. It ends the process (:func:`_exit_without_teardown`); with
    ``exit_now`` False it ends in ``SystemExit`` instead, for a caller in the same process."""
    mark_entry()  # the time limit counts from here (planner.base.clock)
    _tolerant_streams()
    sys.unraisablehook = redeliver_lost_signal
    try:
        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGHUP, terminate)
        with deferred_signals():
            import pulp  # noqa: F401  (its optional-solver probes swallow Ctrl-C: bare except)

            from planner.cli import run
        code = run()
    except SystemExit as exc:  # a command's own exit code: flushed below like any other
        code = exc.code
    except BrokenPipeError:  # `planner ... | head`: the reader left; say nothing more
        code = _closed_pipe()
    except KeyboardInterrupt:
        code = _interrupted("interrupted (Ctrl-C)", 130)
    except BaseException as exc:
        if type(exc).__name__ != "Terminated":
            raise
        signum = exc.args[0] if exc.args else signal.SIGTERM
        code = _interrupted(f"terminated ({signal.Signals(signum).name})", 128 + signum)
    try:  # a reader that left shows here, not as "Exception ignored" (exit 120) at exit
        sys.stdout.flush()
    except BrokenPipeError:
        code = _closed_pipe()
    except (OSError, ValueError):
        pass
    if code == 1 and _reader_left(sys.stdout):
        # click turns a closed pipe into exit 1 on some paths (--help, whatever the timing
        # of the write); a writer whose reader left exits as a shell reports it, 141
        code = _closed_pipe()
    _exit_past_solver_threads(code)
    if exit_now:
        _exit_without_teardown(code)
    sys.exit(code)


def _exit_past_solver_threads(code: object) -> None:
    """A solver thread still running (HiGHS deaf to its cancel after Ctrl-C, or a run left
    past its time limit) would meet C++'s static destructors at a normal exit: 'terminate
    called without an active exception', SIGABRT instead of the exit code. End at once then,
    after flushing what was printed."""
    import threading

    if not any(t.name in ("highs", "scip") and t.is_alive() for t in threading.enumerate()):
        return
    import os

    _flush_streams()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _exit_without_teardown(code: object) -> None:
    """End at once with ``code`` (a number, or None: 0) once what was printed is flushed and the
    exit handlers (``atexit``: logging, multiprocessing, temporary directories) have run: the
    interpreter's teardown of its modules and objects after a solve (pandas, pydantic, HiGHS's
    models) took 0.19-0.28 s of the reference's command and does nothing the planner needs
    (every output is closed and renamed before this). A normal exit where another non-daemon
    thread is alive, which it would wait for, or for a code that is a message."""
    import threading

    if code is not None and not isinstance(code, int):
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    import atexit
    import os

    _flush_streams()
    atexit._run_exitfuncs()
    _flush_streams()  # what the exit handlers printed
    os._exit(code or 0)


def _reader_left(stream: object) -> bool:
    """Whether ``stream`` is a pipe whose reading end is closed (poll says POLLERR)."""
    import os
    import select
    import stat

    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _closed_pipe() -> int:
    from planner.base.files import silence_stdout

    silence_stdout()
    return 141  # 128 + SIGPIPE, as a shell reports it


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


if __name__ == "__main__":
    main()
