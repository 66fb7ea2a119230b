"""``apogee standalone``: the embedded single-process deployment for a newcomer.

Owns: wiring a name server (9876) into one process. The broker joins it here
once it exists. Imports: ``apogee.namesrv``, ``apogee.cli.process``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from apogee.cli.process import run_service, setup_logging


@click.command("standalone")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path.home() / "store",
    show_default=True,
    help="Root directory for all state.",
)
@click.option("--log-level", default="INFO", show_default=True)
def standalone(store: Path, log_level: str) -> None:
    """Run a name server on 9876 in one process (the broker joins on 10911)."""
    from apogee.namesrv.config import NamesrvConfig  # noqa: PLC0415
    from apogee.namesrv.server import NameServer  # noqa: PLC0415

    setup_logging(log_level)
    config = dataclasses.replace(
        NamesrvConfig(), kv_config_path=str(store / "namesrv" / "kvConfig.json")
    )
    server = NameServer(config)
    run_service(server.start, server.stop)
