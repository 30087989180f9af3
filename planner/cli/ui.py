"""``planner ui [PROBLEM]``: serve the plan, its what-ifs and the frontier on a local web page."""

from __future__ import annotations

from pathlib import Path

import click

from planner.base.errors import InputError

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8765


def require_ui() -> None:
    """Exit 2 with the install command when the ``ui`` extra is missing."""
    try:
        import plotly  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise InputError(
            f"planner ui needs the ui extra ({exc.name} is not installed): "
            'pip install -c constraints.txt -e ".[ui]"'
        ) from None


@click.command()
@click.argument("problem", type=click.Path(path_type=Path), required=False)
@click.option("--host", default=LOOPBACK, show_default=True,
              help="address to listen on; anything but loopback lets other machines plan on "
              "yours and read the folder's problems (a warning says so)")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="port (0: any free port)")  # fmt: skip
@click.option("--folder", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=".", show_default=True,
              help="the working folder: the page opens problems inside it only and writes "
              "downloads to its outputs/")  # fmt: skip
@click.option("--time-limit", type=click.FloatRange(1, 3600), default=None,
              help="cap on every solve the page starts, seconds (default: each problem's own)")  # fmt: skip
def ui(problem: Path | None, host: str, port: int, folder: Path, time_limit: float | None) -> None:
    """Serve a local web page: the plan of PROBLEM (default: the reference,
    problems/2m_budget.yaml in the folder, when it is there), what-ifs re-planned beside it,
    the serving frontier, and problems opened, uploaded or pasted.

    One solve runs at a time, each under its time limit. Everything the page needs ships with
    the package: it works without internet."""
    require_ui()
    import uvicorn

    from planner.ui.app import REFERENCE, create_app, free_port

    if problem is None and (folder / REFERENCE).is_file():
        problem = folder / REFERENCE
    app = create_app(folder, problem, time_limit)
    if host not in (LOOPBACK, "localhost", "::1"):
        click.echo(
            f"warning: listening on {host}: anyone who reaches this address can start solves "
            "and read the problem files of this folder",
            err=True,
        )
    port = port or free_port(host)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"planner ui: http://{shown}:{port}/  (Ctrl-C to stop)")
    if problem is None:
        click.echo("no problem open: the page's Problem tab opens or pastes one")
    uvicorn.run(app, host=host, port=port, log_level="warning")
