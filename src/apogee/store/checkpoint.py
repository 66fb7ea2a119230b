"""The checkpoint file: store times up to which each log is known durable.

Owns: ``<root>/checkpoint`` (RocketMQ StoreCheckpoint), one 4096-byte page::

    off  size  field
      0     8  physicMsgTimestamp   store time of the newest flushed commit-log record
      8     8  logicsMsgTimestamp   store time of the newest record in flushed consume queues
     16     8  indexMsgTimestamp    what the index's last flush reported
     24  4072  zero

Abnormal recovery trusts records stored before
``min(physic, logics) - 3 s`` (and before the index time when the index must
be safe).

Invariant: each field only ever moves forward in memory; the page is written
and fdatasync'ed as a whole by ``flush``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from apogee._util.fileio import fsync_dir

PAGE_SIZE = 4096
_FIELDS = struct.Struct(">qqq")
RECOVERY_MARGIN_MS = 3000


class Checkpoint:
    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self._fd = -1
        if path.exists():
            data = path.read_bytes()
            if len(data) >= _FIELDS.size:
                values = _FIELDS.unpack_from(data)
                self.physic_msg_timestamp, self.logics_msg_timestamp = values[:2]
                self.index_msg_timestamp = values[2]
        if not readonly:
            path.parent.mkdir(parents=True, exist_ok=True)
            created = not path.exists()
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if created:
                fsync_dir(path.parent)

    def advance(self, *, physic: int = 0, logics: int = 0, index: int = 0) -> None:
        """Move fields forward (a smaller value than the current one is ignored)."""
        self.physic_msg_timestamp = max(self.physic_msg_timestamp, physic)
        self.logics_msg_timestamp = max(self.logics_msg_timestamp, logics)
        self.index_msg_timestamp = max(self.index_msg_timestamp, index)

    def min_timestamp(self) -> int:
        """Records stored before this are in both flushed logs (RocketMQ getMinTimestamp)."""
        value = min(self.physic_msg_timestamp, self.logics_msg_timestamp) - RECOVERY_MARGIN_MS
        return max(value, 0)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def flush(self) -> None:
        if self._fd < 0:
            return
        page = bytearray(PAGE_SIZE)
        _FIELDS.pack_into(
            page,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
        )
        os.pwrite(self._fd, page, 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
