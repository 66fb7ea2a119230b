"""This host's address as peers see it, and listening sockets.

Owns: ``local_ipv4`` (the address of the interface outgoing traffic leaves
by), which client ids and message ids carry, ``listen_socket`` (a bound
socket whose failure names the address, for servers that bind before they
serve) and ``free_port``, the one way tests and benchmarks pick a port for a
process they start.
"""

from __future__ import annotations

import collections
import functools
import os
import random
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


#: Where Linux's ephemeral range starts when /proc does not say (ip_local_port_range).
_EPHEMERAL_FLOOR = 32768
#: How far below the ephemeral range ``free_port`` picks.
_PICK_SPAN = 12000
#: Ports handed out lately (and their neighbours) are not handed out again.
_recent: collections.deque[int] = collections.deque(maxlen=1024)


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _EPHEMERAL_FLOOR


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing uses right now, below the kernel's ephemeral range, with the port
    after it free too.

    A port from ``bind(0)`` comes from the ephemeral range, which every outgoing
    connection on the host also draws from: one could take it between this call and the
    bind of the process it is meant for (seen as "Address already in use" in a test).
    Below that range only servers bind, so the race left is with processes that pick
    ports the same way. The next port is checked as well, since a broker also listens
    on its port + 1 (RocketMQ's HA port) unless told otherwise, and ports handed out
    lately in this process are not handed out again, nor their neighbours.
    """
    floor = _ephemeral_floor()
    low = max(1024, floor - _PICK_SPAN)
    for _ in range(200 if floor - low > 1000 else 0):
        port = random.randrange(low, floor - 1)
        if port in _recent or port - 1 in _recent or port + 1 in _recent:
            continue
        if _bindable(port) and _bindable(port + 1):
            _recent.append(port)
            return port
    with socket.socket() as sock:  # no room below the range: the kernel's choice
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
    return chosen
