"""Where a process's log records go: stderr and a rotating file.

Owns: the log directory (``--log-dir``, else ``$APOGEE_LOG_DIR``, else
``~/logs/apogeelogs``, as RocketMQ writes to ``~/logs/rocketmqlogs``), the
file each process writes there (``<process>.log``: ``broker.log``,
``namesrv.log``, ``standalone.log``, ``dashboard.log``, rotated at 64 MiB,
seven old files kept), and the handlers' format and throttle.

Every subsystem logs under its own name, so one grep or one level setting
picks it out: ``apogee.namesrv``, ``apogee.broker``, ``apogee.store``,
``apogee.remoting``, ``apogee.client``, ``apogee.dashboard``, and
``apogee.broker.refusals`` / ``apogee.namesrv.refusals`` for the requests a
server refused (one line per refusal, WARNING, naming the peer and the
reason). ``--log-level`` takes a level
(``INFO``) and, after commas, ``logger=LEVEL`` pairs
(``INFO,apogee.store=DEBUG``).

One throttle is shared by both handlers, so a record is counted once and
both destinations leave out the same records.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

import click

from apogee._util import logthrottle

LOG_DIR_ENV = "APOGEE_LOG_DIR"
FILE_MAX_BYTES = 64 * 1024 * 1024
FILE_BACKUPS = 7
_FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: ``extra=`` for a record meant for the log file alone (stderr says it another way)
FILE_ONLY = {"apogee_file_only": True}


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, "apogee_file_only", False)


def default_log_dir() -> Path:
    env = os.environ.get(LOG_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / "logs" / "apogeelogs"


def log_dir_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--log-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help=f"Directory of the log files (${LOG_DIR_ENV}, ~/logs/apogeelogs).",
    )(fn)


def log_level_option(fn: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--log-level",
        default="INFO",
        show_default=True,
        help="Level, then optional logger=LEVEL pairs: INFO,apogee.store=DEBUG.",
    )(fn)


def _parse_levels(spec: str) -> tuple[str, dict[str, str]]:
    root = "INFO"
    loggers: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, sep, level = part.partition("=")
        level = (level if sep else name).strip().upper()
        if level not in logging.getLevelNamesMapping():
            raise click.BadParameter(f"unknown log level {level!r}", param_hint="--log-level")
        if sep:
            loggers[name.strip()] = level
        else:
            root = level
    return root, loggers


def setup_logging(
    level: str = "INFO", *, process: str | None = None, log_dir: Path | None = None
) -> Path | None:
    """Log to stderr and, when ``process`` is given, to ``<log dir>/<process>.log``.

    Returns the log file's path (None without one, or when the directory
    cannot be made: stderr says so once, and the process goes on).
    """
    root_level, loggers = _parse_levels(level)
    throttle = logthrottle.ThrottleFilter()  # shared: a flood must not fill the disk
    stderr = _stderr_handler()
    stderr.addFilter(_not_file_only)
    handlers: list[logging.Handler] = [stderr]
    path: Path | None = None
    if process is not None:
        directory = log_dir or default_log_dir()
        path = directory / f"{process}.log"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            file_handler = logging.handlers.RotatingFileHandler(
                path, maxBytes=FILE_MAX_BYTES, backupCount=FILE_BACKUPS, encoding="utf-8"
            )
        except OSError as exc:
            click.echo(f"warning: no log file in {directory}: {exc.strerror}", err=True)
            path = None
        else:
            file_handler.setFormatter(logging.Formatter(_FILE_FORMAT))
            handlers.append(file_handler)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for handler in handlers:
        handler.addFilter(throttle)
        root.addHandler(handler)
    root.setLevel(root_level)
    for name, lvl in loggers.items():
        logging.getLogger(name).setLevel(lvl)
    return path


def _stderr_handler() -> logging.Handler:
    """Rich, coloured records on a terminal; plain one-line records otherwise (pipes)."""
    if sys.stderr.isatty():
        from rich.logging import RichHandler  # noqa: PLC0415  # only terminals need rich

        handler: logging.Handler = RichHandler(show_path=False, rich_tracebacks=True)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s", datefmt="[%X]"))
        return handler
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    return handler
