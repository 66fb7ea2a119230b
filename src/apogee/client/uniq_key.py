"""Producer-side unique message ids (the UNIQ_KEY property).

Owns: ``new_uniq_key``, ``new_uniq_keys`` (many at once, for batches) and
``uniq_key_block`` (many at once, for code that writes the ids itself).

Layout of RocketMQ's MessageClientIDSetter, as 32 uppercase hex characters::

    IPv4 (4 bytes) | pid (2) | per-process random (4) | ms since month start (4) | counter (2)

The first ten bytes are fixed for the process. Java puts its class loader's
hash where we put random bytes; both only make the prefix unique per process.
Ids are opaque to brokers, which only index them.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading

from apogee._util.net import local_ipv4
from apogee.client.batch_body import block_keys

_lock = threading.Lock()
_counter_next = 0
_prefix: str | None = None
_month_start_ms = 0
_next_month_ms = 0
# the id text up to the counter, for the millisecond it was made for
_base_ms = -1
_base_text = ""
_HEX2 = tuple(f"{i:02X}" for i in range(256))  # a byte as two uppercase hex digits


def _month_bounds(now_ms: int) -> tuple[int, int]:
    now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + dt.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


def _rebase(now_ms: int) -> None:
    """Make the id text up to the counter that of ``now_ms``; ``_lock`` is held."""
    global _prefix, _month_start_ms, _next_month_ms, _base_ms, _base_text  # noqa: PLW0603  # per-process state
    if _prefix is None:
        pid = (os.getpid() & 0xFFFF).to_bytes(2, "big")
        fixed = socket.inet_aton(local_ipv4()) + pid + os.urandom(4)
        _prefix = fixed.hex().upper()
    if not _month_start_ms <= now_ms < _next_month_ms:
        _month_start_ms, _next_month_ms = _month_bounds(now_ms)
    since = (now_ms - _month_start_ms) & 0xFFFFFFFF
    _base_ms, _base_text = now_ms, f"{_prefix}{since:08X}"


def uniq_key_block(now_ms: int, count: int) -> tuple[str, int]:
    """``count`` fresh UNIQ_KEYs for messages sent together at ``now_ms``, unwritten:
    the id text up to the counter (28 hex digits) and the first counter value.

    Id ``k`` of the block is the text, then ``(first + k) & 0xFFFF`` as four
    uppercase hex digits.
    """
    global _counter_next  # noqa: PLW0603  # per-process state
    with _lock:
        if now_ms != _base_ms:
            _rebase(now_ms)
        first = _counter_next
        _counter_next = (first + count) & 0xFFFF
        return _base_text, first


def new_uniq_key(now_ms: int) -> str:
    """A fresh UNIQ_KEY for a message sent at ``now_ms``."""
    # _base inlined, and the lock taken without ``with`` (its __enter__ and
    # __exit__ lookups cost as much as the rest): this runs for every message
    # a producer sends one by one
    global _counter_next  # noqa: PLW0603  # per-process state
    _lock.acquire()
    try:
        if now_ms != _base_ms:
            _rebase(now_ms)
        count = _counter_next
        _counter_next = (count + 1) & 0xFFFF
        base = _base_text
    finally:
        _lock.release()
    # two table lookups: the format spec of f"{count:04X}" is parsed at every call
    return f"{base}{_HEX2[count >> 8]}{_HEX2[count & 0xFF]}"


def new_uniq_keys(now_ms: int, count: int) -> list[str]:
    """``count`` fresh UNIQ_KEYs for messages sent together at ``now_ms``."""
    if count <= 0:
        return []
    base, first = uniq_key_block(now_ms, count)
    return block_keys(base, first, count)
