"""``apogee namesrv``: run one name server.

Owns: the command's options and their mapping onto NamesrvConfig.
Imports: ``apogee.namesrv``, ``apogee.cli.process``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from apogee.cli.process import parse_listen, run_service, setup_logging


@click.command("namesrv")
@click.option("--listen", "listen", default=None, help="HOST:PORT to listen on (0.0.0.0:9876).")
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="namesrv.conf (RocketMQ key=value properties).",
)
@click.option("--kv-config", type=click.Path(dir_okay=False), default=None, help="KV config file.")
@click.option("--log-level", default="INFO", show_default=True)
def namesrv(
    listen: str | None, config_path: Path | None, kv_config: str | None, log_level: str
) -> None:
    """Run a name server (route tables for brokers and clients)."""
    from apogee.errors import ConfigError  # noqa: PLC0415
    from apogee.namesrv.config import load_namesrv_config  # noqa: PLC0415
    from apogee.namesrv.server import NameServer  # noqa: PLC0415

    setup_logging(log_level)
    try:
        config = load_namesrv_config(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if listen is not None:
        host, port = parse_listen(listen)
        config = dataclasses.replace(config, bind_address=host, listen_port=port)
    if kv_config is not None:
        config = dataclasses.replace(config, kv_config_path=kv_config)
    try:
        server = NameServer(config)  # reads plain_acl.yml and TLS files
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    run_service(server.start, server.stop)
