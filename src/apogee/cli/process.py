"""What every long-running ``apogee`` process shares: logging, addresses, signals.

Owns: log setup, ``HOST:PORT`` parsing, and running a service until SIGINT or
SIGTERM asks it to stop. Imports: stdlib, rich, ``apogee.remoting.runner``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

import click

from apogee._util import logthrottle
from apogee.remoting.runner import run


def setup_logging(level: str = "INFO") -> None:
    """Rich, coloured logs on a terminal; plain one-line records otherwise (files, pipes)."""
    if sys.stderr.isatty():
        from rich.logging import RichHandler  # noqa: PLC0415  # only terminals need rich

        logging.basicConfig(
            level=level.upper(),
            format="%(name)s: %(message)s",
            datefmt="[%X]",
            handlers=[RichHandler(show_path=False, rich_tracebacks=True)],
        )
    else:
        logging.basicConfig(
            level=level.upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    for handler in logging.getLogger().handlers:
        logthrottle.install(handler)  # a flood of alike records must not fill the disk


def parse_listen(value: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    try:
        number = int(port)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not HOST:PORT") from None
    if not 0 <= number <= 65535:
        raise click.BadParameter(f"port {number} is out of range")
    return (host or default_host), number


async def serve_until_signalled(
    start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]
) -> None:
    """Start, wait for SIGINT/SIGTERM, then stop (a second signal is ignored)."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await start()
        await stopping.wait()
        logging.getLogger("apogee").info("shutting down")
    finally:
        await stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run_service(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    run(serve_until_signalled(start, stop))
