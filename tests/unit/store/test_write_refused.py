"""A commit-log write the file system refuses: the put fails, nothing of it is ever read,
and the store refuses writes until a restart, which recovers the records before it.

The refusal is a real one (``tests.harness.store_faults.refuse_writes``): the
segment's descriptor is replaced by a read-only one, so ``pwrite`` fails with EBADF.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from apogee.model.message import BatchItem, StoreBatch
from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.store.results import PutResult, PutStatus
from apogee.testing.store import message, small_config
from tests.harness.store_faults import refuse_writes
from tests.harness.store_reads import stored_bodies

SEGMENT = 4 << 20


def _batch(body: bytes) -> StoreBatch:
    return StoreBatch("TopicTest", 0, [BatchItem(0, body, "") for _ in range(3)])


# puts that reach the file by pwrite under ASYNC_FLUSH too (under SYNC_FLUSH every
# record does): a batch and a large single record
PUTS: dict[str, Callable[[FileMessageStore, bytes], PutResult]] = {
    "batch": lambda store, body: store.put_batch(_batch(body)),
    "large single": lambda store, body: store.put(message(body=body * 20)),
}


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize("kind", list(PUTS))
def test_a_refused_write_fails_its_put_and_later_ones_until_a_restart(
    tmp_path: Path, kind: str, flush: FlushDiskType
) -> None:
    config = small_config(
        tmp_path,
        flush_disk_type=flush,
        mapped_file_size_commit_log_bytes=SEGMENT,
        max_message_size_bytes=1 << 20,
    )
    store = FileMessageStore.open(config)
    good = bytes(range(256)) * 4  # 1 KiB, NUL bytes included
    assert PUTS[kind](store, good).status is PutStatus.PUT_OK
    before = stored_bodies(store)
    refuse_writes(store)

    failed = PUTS[kind](store, b"lost" * 256)

    assert failed.status is PutStatus.UNKNOWN_ERROR
    assert "commit-log write failed" in failed.reason
    assert store.fault  # the store says why, and takes no write after this one
    assert store.put(message(body=b"after")).status is PutStatus.SERVICE_NOT_AVAILABLE
    assert stored_bodies(store) == before  # the refused bytes are never read
    store.close()

    reopened = FileMessageStore.open(config)
    try:
        assert not reopened.fault
        assert stored_bodies(reopened) == before
        assert reopened.put(message(body=b"after restart")).status is PutStatus.PUT_OK
        assert stored_bodies(reopened) == [*before, b"after restart"]
    finally:
        reopened.close()


def test_sync_flush_waiters_for_refused_bytes_are_answered_at_once(tmp_path: Path) -> None:
    # A loop-driven store (the broker's) answers a put before its bytes reach the file:
    # the loop's next commit writes them. When that write is refused, the sends waiting
    # for their sync are answered FLUSH_DISK_TIMEOUT then, not at the sync deadline.
    # (Waiters share one answer per sync round: one whose bytes were written before
    # the refused ones, still unsynced in the same round, is answered with them.)
    config = small_config(
        tmp_path,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        sync_flush_timeout_ms=60_000,
        mapped_file_size_commit_log_bytes=SEGMENT,
    )
    store = FileMessageStore.open(config)
    store.start(loop_driven=True)
    commit = store.group_commit
    assert commit is not None

    async def main() -> tuple[PutStatus, PutStatus, float]:
        loop = asyncio.get_running_loop()
        loop.add_reader(commit.fileno(), commit.run_once)
        try:
            kept = store.put(message(body=b"kept"))
            kept_flush = store.flush_future(kept)
            store.commit()  # the loop's commit: in the file, then synced
            kept_status = await asyncio.wait_for(asyncio.wrap_future(kept_flush), 15)
            refuse_writes(store)
            refused = store.put(message(body=b"refused"))
            assert refused.status is PutStatus.PUT_OK  # pending: not yet written
            refused_flush = store.flush_future(refused)
            began = loop.time()
            store.commit()  # refused by the file system: the store faults
            status = await asyncio.wait_for(asyncio.wrap_future(refused_flush), 15)
            took = loop.time() - began
            return kept_status, status, took
        finally:
            loop.remove_reader(commit.fileno())

    kept_status, refused_status, took = uvloop.run(main())
    assert kept_status is PutStatus.PUT_OK
    assert refused_status is PutStatus.FLUSH_DISK_TIMEOUT
    assert took < 10  # at once, not at the 60 s deadline
    assert store.fault
    assert stored_bodies(store) == [b"kept"]
    store.close()
