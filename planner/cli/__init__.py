"""The ``planner`` command line: one thin module per command group.

Each command parses its arguments, loads, calls the library and prints; this module builds the
click group and maps every :class:`~planner.base.errors.PlannerError` to its exit code
(:class:`~planner.base.errors.ExitCode`: 0 success, 1 unexpected failure, 2 bad input,
3 infeasible or does not fit, 4 plan fails verification, 5 sweep with failed scenarios).
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys

import click
from rich.console import Console

from planner import __version__
from planner.base.errors import (
    ExitCode,
    InfeasibleError,
    PlannerError,
    Terminated,
    VerificationError,
)

# emoji=False: a message like "file.yaml:100: field" must not become "file.yaml💯 field"
err_console = Console(stderr=True, soft_wrap=True, emoji=False)

# (module, command) pairs: one module per command group, registered on the group below.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("planner.cli.solve", "solve"),
    ("planner.cli.estimate", "estimate"),
    ("planner.cli.report", "report"),
    ("planner.cli.offers", "offers"),
    ("planner.cli.catalog", "catalog"),
    ("planner.cli.whatif", "whatif"),
    ("planner.cli.whatif", "breakeven"),
    ("planner.cli.verify", "verify"),
    ("planner.cli.verify", "explain"),
    ("planner.cli.profile", "profile"),
    ("planner.cli.model", "model"),
    ("planner.cli.schema", "schema"),
    ("planner.cli.ui", "ui"),
)


def _print_error(exc: PlannerError) -> None:
    """One clean message (and its list of reasons) on stderr, never a traceback."""
    if isinstance(exc, InfeasibleError):
        err_console.print(str(exc), style="bold red", highlight=False, markup=False)
        for line in exc.diagnosis:
            err_console.print(f"  - {line}", highlight=False, markup=False)
        return
    err_console.print("[red]error:[/red] ", end="")
    err_console.print(str(exc), highlight=False, markup=False)
    if isinstance(exc, VerificationError):
        for line in exc.violations:
            err_console.print(f"  - {line}", highlight=False, markup=False)


class PlannerGroup(click.Group):
    """Turns every PlannerError into a clean message and its exit code (no traceback)."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except PlannerError as exc:
            _print_error(exc)
            sys.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            err_console.print(
                "interrupted (Ctrl-C): stopped; nothing half-written", highlight=False
            )
            sys.exit(int(ExitCode.INTERRUPTED))
        except Terminated as exc:
            signum = exc.args[0] if exc.args else signal.SIGTERM
            err_console.print(
                f"terminated ({signal.Signals(signum).name}): stopped; nothing half-written",
                highlight=False,
            )
            sys.exit(128 + int(signum))
        except SystemExit as exc:
            if broken_pipe(exc):  # rich's console turns a closed pipe into SystemExit(1)
                _closed_pipe()
            raise
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except BrokenPipeError:  # `planner ... | head`: the reader left; exit as a shell would
            _closed_pipe()
        except Exception as exc:  # a bug: say so plainly; PLANNER_DEBUG=1 shows the traceback
            _reraise_wrapped_signal(exc)
            if os.environ.get("PLANNER_DEBUG"):
                raise
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                err_console.print(f"error: cannot write the output: {exc.strerror}", markup=False)
                sys.exit(int(ExitCode.BAD_INPUT))
            err_console.print("[red]internal error:[/red] ", end="")
            err_console.print(
                f"{type(exc).__name__}: {exc}\n  (a bug in the planner; rerun with "
                "PLANNER_DEBUG=1 for the traceback and report it)",
                highlight=False,
                markup=False,
            )
            sys.exit(int(ExitCode.UNEXPECTED))


SIGPIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


def broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling, a closed output pipe (EPIPE): click
    and rich turn one into ``SystemExit(1)``, which must not pass for a failure."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, BrokenPipeError) or (
            isinstance(link, OSError) and link.errno == errno.EPIPE
        ):
            return True
        link = link.__cause__ or link.__context__
    return False


def _closed_pipe() -> None:
    """End quietly, as a shell reports a writer whose reader left: exit 141."""
    from planner.base.files import silence_stdout

    silence_stdout()
    sys.exit(SIGPIPE_EXIT)


def _reraise_wrapped_signal(exc: BaseException) -> None:
    """Ctrl-C inside class creation reaches us as ``RuntimeError: Error calling __set_name__``
    with the KeyboardInterrupt as its cause: an interrupt, not a bug."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, (KeyboardInterrupt, Terminated)):
            raise link
        link = link.__cause__ or link.__context__


@click.group(cls=PlannerGroup)
@click.version_option(__version__, prog_name="planner")
def cli() -> None:
    """GPU procurement planner: which GPUs to buy and rent, and when.

    \b
    Exit codes: 0 success, 1 unexpected failure, 2 bad input, 3 infeasible
    (or does not fit), 4 plan fails verification, 5 some scenarios of a sweep failed.
    """


def _register() -> None:
    for module, attr in COMMANDS:
        cli.add_command(getattr(importlib.import_module(module), attr))
    cli.commands["estimate"].add_command(importlib.import_module("planner.cli.frontier").frontier)  # type: ignore[attr-defined]


_register()


def run(args: list[str] | None = None) -> int:
    """Run the command line and return its exit code (click's own errors included).

    Not in click's standalone mode, so Ctrl-C during argument parsing reaches the caller as
    KeyboardInterrupt (``planner.__main__``) rather than click's "Aborted!" with exit 1.
    """
    try:
        rv = cli.main(args=args, prog_name="planner", standalone_mode=False)
    except SystemExit as exc:  # click's own EPIPE handling (--help, --version) exits 1
        if broken_pipe(exc):
            from planner.base.files import silence_stdout

            silence_stdout()
            return SIGPIPE_EXIT
        raise
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        err_console.print("aborted", highlight=False)
        return int(ExitCode.UNEXPECTED)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return rv if isinstance(rv, int) else int(ExitCode.OK)
