"""When the store stops taking writes: a failed flush (until restart), a full disk (until room)."""

from __future__ import annotations

import errno
import time
from pathlib import Path

from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.store.results import GetStatus, PutStatus
from apogee.testing.store import message, small_config


def test_a_failed_async_flush_refuses_writes_until_restart(tmp_path: Path) -> None:
    config = small_config(
        tmp_path, flush_disk_type=FlushDiskType.ASYNC_FLUSH, flush_interval_commit_log_ms=10
    )
    with FileMessageStore.open(config) as store:
        assert store.put(message(body=b"before")).status is PutStatus.PUT_OK
        store.dispatch_step()

        def failing_flush(least_pages: int = 0) -> int:
            # A named fake at the one seam a disk error cannot be made to reach:
            # the flush of the mapped commit log reports EIO, as msync would.
            raise OSError(errno.EIO, "Input/output error")

        store.commit_log.queue.flush = failing_flush  # type: ignore[method-assign]
        store.start()
        deadline = time.monotonic() + 5
        while not store.fault and time.monotonic() < deadline:
            time.sleep(0.01)

        refused = store.put(message(body=b"after"))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "flush failed" in refused.reason and "until restart" in refused.reason
        got = store.get("TopicTest", 0, 0, 10)
        assert got.status is GetStatus.FOUND and len(got.messages) == 1  # reads go on


def test_a_full_disk_waits_for_room_and_keeps_what_it_could_not_index(tmp_path: Path) -> None:
    with FileMessageStore.open(small_config(tmp_path)) as store:
        store.mark_disk_full("no room for a test file")
        refused = store.put(message(body=b"x"))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "disk is full" in refused.reason
        store.dispatch_step()  # within a second of the mark: not looked at yet
        assert store.disk_full_reason
        store._next_room_check = 0  # the second has passed
        store.dispatch_step()
        assert not store.disk_full_reason
        assert store.put(message(body=b"y")).status is PutStatus.PUT_OK
