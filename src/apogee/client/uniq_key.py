"""Producer-side unique message ids (the UNIQ_KEY property).

Owns: ``new_uniq_key``. Imports: stdlib only.

Layout of RocketMQ's MessageClientIDSetter, as 32 uppercase hex characters::

    IPv4 (4 bytes) | pid (2) | per-process random (4) | ms since month start (4) | counter (2)

The first ten bytes are fixed for the process. Java puts its class loader's
hash where we put random bytes; both only make the prefix unique per process.
Ids are opaque to brokers, which only index them.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import socket
import threading

_lock = threading.Lock()
_counter = itertools.count()
_prefix: str | None = None
_month_start_ms = 0
_next_month_ms = 0


def _local_ipv4() -> bytes:
    # A connected UDP socket reveals the outgoing interface without sending anything.
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("10.255.255.255", 1))
            return socket.inet_aton(sock.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


def _month_bounds(now_ms: int) -> tuple[int, int]:
    now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + dt.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


def new_uniq_key(now_ms: int) -> str:
    """A fresh UNIQ_KEY for a message sent at ``now_ms``."""
    global _prefix, _month_start_ms, _next_month_ms  # noqa: PLW0603  # per-process state
    with _lock:
        if _prefix is None:
            fixed = _local_ipv4() + (os.getpid() & 0xFFFF).to_bytes(2, "big") + os.urandom(4)
            _prefix = fixed.hex().upper()
        if not _month_start_ms <= now_ms < _next_month_ms:
            _month_start_ms, _next_month_ms = _month_bounds(now_ms)
        since = (now_ms - _month_start_ms) & 0xFFFFFFFF
        count = next(_counter) & 0xFFFF
    return f"{_prefix}{since:08X}{count:04X}"
