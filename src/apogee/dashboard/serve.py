"""Serving the dashboard's application with uvicorn, stopped the way every ``apogee``
process stops.

Owns: ``serve`` (uvicorn on a socket bound beforehand; SIGINT or SIGTERM
stop it gracefully and the process exits 0, where uvicorn alone would
re-raise the signal after its shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the loop's own handlers below ask it to exit


async def serve(app: Starlette, sock: socket.socket) -> None:
    config = uvicorn.Config(
        app,
        log_config=None,  # the process's handlers, not uvicorn's
        access_log=False,
        lifespan="on",
    )
    server = _Server(config)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    try:
        await server.serve(sockets=[sock])
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
