"""``apogee namesrv``: run one name server.

Owns: the command's options and their mapping onto NamesrvConfig.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import click

from apogee.cli.logs import log_dir_option, log_level_option
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
@log_dir_option
@log_level_option
def namesrv(
    *,
    listen: str | None,
    config_path: Path | None,
    kv_config: str | None,
    log_dir: Path | None,
    log_level: str,
) -> None:
    """Run a name server (route tables for brokers and clients)."""
    from apogee.errors import ConfigError  # noqa: PLC0415
    from apogee.namesrv.config import load_namesrv_config  # noqa: PLC0415
    from apogee.namesrv.server import NameServer  # noqa: PLC0415

    log_file = setup_logging(log_level, process="namesrv", log_dir=log_dir)
    logging.getLogger("apogee.namesrv").info("logs %s", log_file or "(stderr only)")
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
