"""This host's address as peers see it, and listening sockets.

Owns: ``local_ipv4`` (the address of the interface outgoing traffic leaves
by), which client ids and message ids carry, ``listen_socket`` (a bound
socket whose failure names the address, for servers that bind before they
serve) and ``free_port``, the one way tests and benchmarks pick a port for a
process they start.
"""

from __future__ import annotations

import functools
import os
import socket


@functools.cache
def local_ipv4() -> str:
    """The IPv4 address of the outgoing interface; 127.0.0.1 without a network."""
    # A connected UDP socket reveals the outgoing interface without sending anything.
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("10.255.255.255", 1))
            address: str = sock.getsockname()[0]
            return address
    except OSError:
        return "127.0.0.1"


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, not yet listening (a broker binds before it serves:
    the bound port goes into every stored record).

    Raises:
        OSError: with its errno and "cannot listen on HOST:PORT: reason".
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
    except OSError as exc:  # say which address, keep errno for the caller
        sock.close()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {reason}") from exc
    return sock


def free_port() -> int:
    """A port nothing listens on right now (bound once, then released).

    Another process may take it before the caller binds it; tests and benchmarks accept
    that small race for ports they choose before a child process starts.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
