"""``apogee broker``: run one broker.

Owns: the command's options and how they override broker.conf (options win).
Imports: ``apogee.broker``, ``apogee.cli.process``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from apogee.cli.process import parse_listen, run_service, setup_logging


@click.command("broker")
@click.option("--namesrv", default=None, help="Name servers, HOST:PORT[;HOST:PORT].")
@click.option("--listen", default=None, help="HOST:PORT to listen on (0.0.0.0:10911).")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store root directory (storePathRootDir, ~/store).",
)
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="broker.conf (RocketMQ key=value properties).",
)
@click.option("--log-level", default="INFO", show_default=True)
def broker(
    namesrv: str | None,
    listen: str | None,
    store: Path | None,
    config_path: Path | None,
    log_level: str,
) -> None:
    """Run a broker: store messages and serve producers and consumers."""
    from apogee.broker.broker import Broker  # noqa: PLC0415
    from apogee.broker.config import load_broker_config  # noqa: PLC0415
    from apogee.errors import ConfigError  # noqa: PLC0415

    setup_logging(log_level)
    overrides: dict[str, Any] = {}
    if namesrv is not None:
        overrides["namesrv_addr"] = namesrv
    if listen is not None:
        overrides["bind_address"], overrides["listen_port"] = parse_listen(listen)
    store_overrides = {"store_path_root_dir": store} if store is not None else None
    try:
        config = load_broker_config(config_path, store_overrides=store_overrides, **overrides)
        server = Broker(config)  # reads plain_acl.yml and TLS files: bad ones are usage errors
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    run_service(server.start, server.stop)
