"""``apogee standalone``: the embedded single-process deployment for a newcomer.

Owns: wiring a name server (9876) and a broker (10911) that registers with it
into one process and one event loop. Imports: ``apogee.namesrv``,
``apogee.broker``, ``apogee.cli.process``.
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
    """Run a name server on 9876 and a broker on 10911 in one process."""
    from apogee.broker.broker import Broker  # noqa: PLC0415
    from apogee.broker.config import load_broker_config  # noqa: PLC0415
    from apogee.namesrv.config import NamesrvConfig  # noqa: PLC0415
    from apogee.namesrv.server import NameServer  # noqa: PLC0415

    setup_logging(log_level)
    namesrv_config = dataclasses.replace(
        NamesrvConfig(), kv_config_path=str(store / "namesrv" / "kvConfig.json")
    )
    namesrv = NameServer(namesrv_config)
    broker = Broker(
        load_broker_config(
            None,
            store_overrides={"store_path_root_dir": store},
            namesrv_addr=f"127.0.0.1:{namesrv_config.listen_port}",
        )
    )

    async def start() -> None:
        await namesrv.start()
        await broker.start()

    async def stop() -> None:
        await broker.stop()  # unregisters while the name server still listens
        await namesrv.stop()

    run_service(start, stop)
