"""What every long-running ``apogee`` process shares: logging, addresses, signals.

Owns: ``HOST:PORT`` parsing, and running a service until SIGINT or SIGTERM
asks it to stop. A service that cannot start (its port or store is held by
another process, a setting is wrong) ends with one ``Error:`` line naming
what holds it, never a traceback. Log setup is ``apogee.cli.logs``.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import re
import signal
from collections.abc import Awaitable, Callable

import click

from apogee.cli.holders import port_holder, process_label
from apogee.cli.logs import FILE_ONLY, setup_logging
from apogee.errors import ConfigError, StoreError, StoreInUseError
from apogee.remoting.runner import run

__all__ = ["parse_listen", "run_service", "setup_logging", "startup_error"]

#: how the servers word a failed bind (RemotingServer.start, the broker's socket)
_LISTEN_ERROR = re.compile(r"cannot listen on .*:(\d+): ")


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
        freeze_startup_objects()
        await stopping.wait()
        logging.getLogger("apogee").info("shutting down")
    finally:
        await stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


#: The cycle collector's thresholds (Python's defaults: 700, 10, 10). With many requests in
#: flight (a client pipelining thousands), the default ones run collections that walk all
#: of them again and again, each a pause for every client (200k parked pulls, when each was
#: four tracked objects: another client's p99 361 ms, 50 ms with these). The request path
#: makes few reference cycles, so collecting less often costs little memory. A smaller
#: first threshold does not shorten the pauses: the young generation is counted as objects
#: made minus objects freed anywhere, so it outgrows the threshold when older ones die
#: (5,000: as long, and more of them, parking 200k pulls).
GC_THRESHOLD = (20_000, 5, 100)


def freeze_startup_objects() -> None:
    """Leave what start-up built (modules, config, tables) out of every later collection.

    Those objects live as long as the process; without this each full
    collection walks them again (~46,000 in a broker), a pause for every client.
    """
    gc.collect()
    gc.freeze()


def run_service(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    gc.set_threshold(*GC_THRESHOLD)
    try:
        run(serve_until_signalled(start, stop))
    except (OSError, StoreError, ConfigError) as exc:
        message = startup_error(exc)
        # stderr gets the Error: line below; the log file gets the reason too
        logging.getLogger("apogee").error("cannot start: %s", message, extra=FILE_ONLY)
        raise click.ClickException(message) from None


def startup_error(exc: BaseException) -> str:
    """One line saying why a service could not start, and who holds what it needs."""
    if isinstance(exc, StoreInUseError) and exc.pid is not None:
        text = str(exc).replace(f" (pid {exc.pid})", "")
        return f"{text}: held by {process_label(exc.pid)}"
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
        found = _LISTEN_ERROR.search(text)
        if exc.errno == errno.EADDRINUSE and found is not None:
            holder = port_holder(int(found.group(1)))
            text += f"; held by {holder}" if holder else "; another process listens there"
        return text
    return str(exc)
