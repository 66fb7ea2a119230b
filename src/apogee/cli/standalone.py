"""``apogee standalone``: the embedded single-process deployment for a newcomer.

Owns: wiring a name server (9876) and a broker (10911) that registers with it
into one process and one event loop, from the same ``broker.conf`` a broker
takes, with the options winning over the file. The broker always registers
with the name server of its own process; a ``namesrvAddr`` in the file is
replaced (and the log says so). The first log lines name the store, its
flush mode, the log file and the config file, so an old store is never
opened silently.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import click

from apogee.cli.logs import log_dir_option, log_level_option
from apogee.cli.process import parse_listen, run_service, setup_logging

log = logging.getLogger("apogee.standalone")


@click.command("standalone")
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="broker.conf (RocketMQ key=value properties).",
)
@click.option("--listen", default=None, help="Broker HOST:PORT (0.0.0.0:10911, listenPort).")
@click.option("--namesrv-listen", default=None, help="Name server HOST:PORT (0.0.0.0:9876).")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store root directory (storePathRootDir, ~/store).",
)
@log_dir_option
@log_level_option
def standalone(
    *,
    config_path: Path | None,
    listen: str | None,
    namesrv_listen: str | None,
    store: Path | None,
    log_dir: Path | None,
    log_level: str,
) -> None:
    """Run a name server and a broker in one process (9876 and 10911)."""
    from apogee._util.props import load_properties  # noqa: PLC0415
    from apogee.broker.base import BrokerBase  # noqa: PLC0415
    from apogee.broker.broker import Broker  # noqa: PLC0415
    from apogee.cli.broker import describe_broker, load_config, recovery_progress  # noqa: PLC0415
    from apogee.namesrv.config import NamesrvConfig  # noqa: PLC0415
    from apogee.namesrv.server import NameServer  # noqa: PLC0415

    log_file = setup_logging(log_level, process="standalone", log_dir=log_dir)
    ns_host, ns_port = parse_listen(namesrv_listen) if namesrv_listen else ("0.0.0.0", 9876)
    ns_reach = "127.0.0.1" if ns_host in ("0.0.0.0", "::", "") else ns_host
    config = load_config(config_path, listen=listen, store=store,
                         namesrv_addr=f"{ns_reach}:{ns_port}")  # fmt: skip
    root = config.store.store_path_root_dir
    namesrv_config = dataclasses.replace(
        NamesrvConfig(),
        bind_address=ns_host,
        listen_port=ns_port,
        kv_config_path=str(root / "namesrv" / "kvConfig.json"),
    )
    describe_broker(config, config_path, log_file)
    if config_path is not None and "namesrvAddr" in load_properties(config_path):
        log.info("namesrvAddr of %s replaced: this broker registers with its own name server",
                 config_path)  # fmt: skip
    with recovery_progress() as progress:
        namesrv = NameServer(namesrv_config)
        base = BrokerBase.build(config)
        started: list[Broker] = []

        async def start() -> None:
            await namesrv.start()
            broker = await Broker.open_from(base, recovery_progress=progress)
            started.append(broker)
            progress.done()
            if broker.metrics_exporter is not None:  # one /metrics for both servers
                broker.metrics_exporter.add(namesrv.metrics().build)
            log.info("ready: name server %s:%d, broker %s (send with NAMESRV_ADDR=%s:%d)",
                     ns_host, namesrv.port, broker.address, ns_reach, namesrv.port)  # fmt: skip

        async def stop() -> None:
            for broker in started:
                await broker.stop()  # unregisters while the name server still listens
            await namesrv.stop()

        run_service(start, stop)
