"""Bounds a server puts on what its peers can make it hold.

Owns: ``ServerLimits`` (the settings) and ``FrameBudget`` (bytes held in
partial frames across every connection of a server). A peer that goes over
a bound is cut off with one log line; the others are not touched:

* connections: beyond ``max_connections`` a new connection is closed at
  once, so the store always has file descriptors left;
* partial frames: the bytes of frames not yet complete, summed over all
  connections, stay under ``max_pending_frame_bytes`` (the connection whose
  bytes go over is closed), and a frame must be complete within
  ``frame_timeout_s`` of its first byte, however slowly it trickles in;
* answers: a peer that does not read them is closed once its connection's
  write buffer passes ``max_write_buffer_bytes`` (reading from it stops
  earlier, at the high-water mark).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from apogee.errors import ConfigError

#: descriptors a broker keeps for its own files when it derives max_connections
FD_RESERVE_MAX = 4096


def connections_for_fd_limit() -> int:
    """Connections the process's descriptor limit allows, leaving room for the store.

    Half the soft limit, or all but 4,096 descriptors when the limit is high.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(16, soft - min(FD_RESERVE_MAX, soft // 2))


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """None switches a bound off."""

    max_connections: int | None = None
    max_pending_frame_bytes: int | None = 512 * 1024 * 1024
    frame_timeout_s: float | None = 30.0
    max_write_buffer_bytes: int | None = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in (
            "max_connections", "max_pending_frame_bytes", "frame_timeout_s",
            "max_write_buffer_bytes",
        ):  # fmt: skip
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"ServerLimits.{name} must be positive, got {value!r}")


class FrameBudget:
    """Bytes held in partial frames by the connections of one server."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.held = 0

    def over(self) -> bool:
        return self.limit is not None and self.held > self.limit
