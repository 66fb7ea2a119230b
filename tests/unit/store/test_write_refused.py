"""A commit-log write the file system refuses: the put fails, nothing of it is ever read,
and the store refuses writes until a restart, which recovers the records before it.

The refusal is a real one: the segment's descriptor is replaced (``dup2``) by one
opened read-only on the same file, so ``pwrite`` fails with EBADF.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from apogee.model.message import BatchItem, StoreBatch
from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.store.results import PutResult, PutStatus
from apogee.testing.store import message, small_config
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


def _refuse_writes(store: FileMessageStore) -> None:
    seg = store.commit_log.queue.segments[-1]
    read_only = os.open(seg.path, os.O_RDONLY)
    try:
        os.dup2(read_only, seg.fd)
    finally:
        os.close(read_only)


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
    _refuse_writes(store)

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
