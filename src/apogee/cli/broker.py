"""``apogee broker``: run one broker.

Owns: the command's options and how they override broker.conf (options win),
and the first log lines every broker process writes: the store directory
(and whether it already holds data), the flush mode, the config file and the
log file.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apogee._util.progress import Progress
from apogee.cli.logs import log_dir_option, log_level_option
from apogee.cli.process import parse_listen, run_service, setup_logging

if TYPE_CHECKING:
    from apogee.broker.config import BrokerConfig

log = logging.getLogger("apogee.broker")


@click.command("broker")
@click.option(
    "-n", "--namesrv", default=None, help="Name servers, HOST:PORT[;HOST:PORT] (mqbroker -n)."
)
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
@log_dir_option
@log_level_option
def broker(
    *,
    namesrv: str | None,
    listen: str | None,
    store: Path | None,
    config_path: Path | None,
    log_dir: Path | None,
    log_level: str,
) -> None:
    """Run a broker: store messages and serve producers and consumers."""
    from apogee.broker.base import BrokerBase  # noqa: PLC0415
    from apogee.broker.broker import Broker  # noqa: PLC0415
    from apogee.errors import ConfigError  # noqa: PLC0415

    log_file = setup_logging(log_level, process="broker", log_dir=log_dir)
    overrides: dict[str, Any] = {} if namesrv is None else {"namesrv_addr": namesrv}
    config = load_config(config_path, listen=listen, store=store, **overrides)
    describe_broker(config, config_path, log_file)
    with recovery_progress() as progress:
        try:  # reads plain_acl.yml and TLS files: bad ones are usage errors
            base = BrokerBase.build(config)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
        started: list[Broker] = []

        async def start() -> None:
            started.append(await Broker.open_from(base, recovery_progress=progress))
            progress.done()

        async def stop() -> None:
            for broker in started:
                await broker.stop()

        run_service(start, stop)


class _RecoveryBar:
    """The store's recovery scan as a progress bar (a line per tenth when not on a terminal)."""

    def __init__(self) -> None:
        self._bar = Progress("recovering the store", None, unit="MiB", log=log)
        self._started = False

    def __call__(self, done: int, total: int) -> None:
        if not self._started:
            self._started = True
            self._bar.__enter__()
        self._bar.update(done / (1 << 20), total / (1 << 20))

    def done(self) -> None:
        if self._started:
            self._started = False
            self._bar.__exit__(None, None, None)


def load_config(
    config_path: Path | None, *, listen: str | None, store: Path | None, **overrides: Any
) -> BrokerConfig:
    """broker.conf with the command line's ``--listen`` and ``--store`` (and ``overrides``)
    over it; a bad file or value is a usage error."""
    from apogee.broker.config import load_broker_config  # noqa: PLC0415
    from apogee.errors import ConfigError  # noqa: PLC0415

    if listen is not None:
        overrides["bind_address"], overrides["listen_port"] = parse_listen(listen)
    store_overrides = {"store_path_root_dir": store} if store is not None else None
    try:
        return load_broker_config(config_path, store_overrides=store_overrides, **overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


@contextlib.contextmanager
def recovery_progress() -> Iterator[_RecoveryBar]:
    bar = _RecoveryBar()
    try:
        yield bar
    finally:
        bar.done()


def describe_broker(config: BrokerConfig, config_path: Path | None, log_file: Path | None) -> None:
    """The first log lines: what this process will open and where it writes."""
    root = config.store.store_path_root_dir
    commit_log = root / "commitlog"
    files = sorted(commit_log.iterdir()) if commit_log.is_dir() else []
    if files:
        size = sum(f.stat().st_size for f in files)
        state = f"existing store, {len(files)} commit-log file(s), {size / (1 << 20):.0f} MiB"
    else:
        state = "new store"
    log.info("store %s (%s), %s, role %s", root, state, config.store.flush_disk_type.value,
             config.store.broker_role.value)  # fmt: skip
    log.info("config %s; logs %s", config_path or "(defaults, no -c file)",
             log_file or "(stderr only)")  # fmt: skip
