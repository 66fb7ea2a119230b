"""``apogee dashboard``: serve the web UI (needs the ``apogee[dashboard]`` extra).

Owns: the command's options; ``apogee.dashboard.serve`` runs the application
under uvicorn on the event loop every ``apogee`` process uses.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from apogee.cli.logs import log_dir_option, log_level_option
from apogee.cli.process import parse_listen, setup_logging

log = logging.getLogger("apogee.dashboard")


@click.command("dashboard")
@click.option(
    "--namesrv",
    "-n",
    envvar="NAMESRV_ADDR",
    required=True,
    help="Name servers, HOST:PORT[;HOST:PORT] (default: $NAMESRV_ADDR).",
)
@click.option("--listen", default="0.0.0.0:8080", show_default=True, help="HOST:PORT to serve on.")
@click.option(
    "--sample-interval",
    type=click.FloatRange(0.2),
    default=10.0,
    show_default=True,
    help="Seconds between the samples the TPS and lag charts draw.",
)
@log_dir_option
@log_level_option
def dashboard(
    *, namesrv: str, listen: str, sample_interval: float, log_dir: Path | None, log_level: str
) -> None:
    """Serve the web dashboard: cluster, topics, consumers, messages, dead letters."""
    try:
        from apogee.dashboard.app import create_app  # noqa: PLC0415
        from apogee.dashboard.serve import serve  # noqa: PLC0415
    except ImportError as exc:
        raise click.ClickException(
            "the dashboard needs its extra: pip install 'apogee[dashboard]' "
            f"({exc.name} is missing)"
        ) from None
    from apogee._util.net import listen_socket  # noqa: PLC0415
    from apogee.cli.process import startup_error  # noqa: PLC0415
    from apogee.remoting.runner import run  # noqa: PLC0415

    log_file = setup_logging(log_level, process="dashboard", log_dir=log_dir)
    host, port = parse_listen(listen)
    log.info("dashboard for %s at http://%s:%d/ (logs %s)", namesrv, host, port,
             log_file or "stderr only")  # fmt: skip
    try:  # bound here, so a taken port is one line naming its holder
        sock = listen_socket(host, port)
    except OSError as exc:
        raise click.ClickException(startup_error(exc)) from None
    run(serve(create_app(namesrv, sample_interval_s=sample_interval), sock))
