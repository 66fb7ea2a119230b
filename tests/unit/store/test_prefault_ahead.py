"""The allocation thread maps commit-log pages ahead only for appends through the mapping.

Single appends (ASYNC_FLUSH) write records into the mapping, and a page mapped ahead
saves each its fault. Batches are written by ``pwrite``: a page mapped ahead of them
costs its zeroing, and every flush that cleans it a TLB shootdown on the other cores.
Which pages are mapped is read from the kernel (``/proc/self/smaps`` Rss).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.model.message import BatchItem, StoreBatch
from apogee.store.config import StoreConfig
from apogee.store.file_store import FileMessageStore
from apogee.store.results import PutStatus
from apogee.store.segment import segment_name
from apogee.testing.store import message, small_config
from tests.harness.smaps import dirty_kib, resident_kib
from tests.harness.store_reads import stored_bodies

SEGMENT = 16 << 20
WINDOW = 1 << 20


def _config(tmp_path: Path) -> StoreConfig:
    return small_config(
        tmp_path,
        mapped_file_size_commit_log_bytes=SEGMENT,
        max_message_size_bytes=1 << 20,
        prefault_ahead_bytes=WINDOW,
    )


def batch() -> StoreBatch:
    return StoreBatch("T", 0, [BatchItem(0, bytes(1024), "") for _ in range(100)])


def test_batches_map_nothing_ahead_and_single_appends_do(tmp_path: Path) -> None:
    config = _config(tmp_path)
    store = FileMessageStore.open(config)
    log_dir = config.commit_log_dir
    first, spare = log_dir / segment_name(0), log_dir / segment_name(SEGMENT)
    try:
        for _ in range(20):  # 2 MiB, twice the window
            assert store.put_batch(batch()).status is PutStatus.PUT_OK
        store.allocate()
        # the file being written and the next one: no page mapped by the allocator
        assert resident_kib(first) == 0
        assert spare.exists() and resident_kib(spare) == 0

        # a single append where no page is populated goes by pwrite: no fault
        assert store.put(message(body=bytes(1024))).status is PutStatus.PUT_OK
        assert resident_kib(first) == 0
        wrote = store.commit_log.queue.segments[-1].wrote
        store.allocate()  # a round of single appends: pages ahead of them now
        if store.commit_log.queue.segments[-1].prefaulted <= wrote:
            pytest.skip("the kernel does not populate mappings")
        # a window ahead of the single append, and the start of the next file
        assert resident_kib(first) >= WINDOW // 1024
        assert resident_kib(spare) == WINDOW // 1024

        assert store.put(message(body=b"mapped")).status is PutStatus.PUT_OK

        assert store.put_batch(batch()).status is PutStatus.PUT_OK
        mapped = resident_kib(first)
        store.allocate()  # batches again: nothing more is mapped
        assert resident_kib(first) == mapped
        assert stored_bodies(store) == [bytes(1024), b"mapped"]
    finally:
        store.close()


def test_a_large_single_record_is_written_by_pwrite(tmp_path: Path) -> None:
    # a batch of half messages is stored as one such record
    config = _config(tmp_path)
    store = FileMessageStore.open(config)
    first = config.commit_log_dir / segment_name(0)
    body = bytes(range(256)) * 80  # 20 KiB, NUL bytes included
    try:
        put = store.put(message(body=body))
        assert put.status is PutStatus.PUT_OK
        store.allocate()  # a round of large records: nothing ahead
        assert resident_kib(first) == 0  # and none of the record's pages
        # a small one among them (a transaction's op record) goes by pwrite too
        assert store.put(message(body=b"small")).status is PutStatus.PUT_OK
        assert resident_kib(first) == 0
        assert stored_bodies(store) == [body, b"small"]
    finally:
        store.close()


def test_after_a_restart_only_pages_past_the_end_are_populated(tmp_path: Path) -> None:
    config = _config(tmp_path)
    store = FileMessageStore.open(config)
    for _ in range(30):  # 3 MiB written
        assert store.put_batch(batch()).status is PutStatus.PUT_OK
    store.close()
    store = FileMessageStore.open(config)
    first = config.commit_log_dir / segment_name(0)
    try:
        assert dirty_kib(first) == 0  # recovery read the records
        store.allocate()  # a fresh store expects single appends: pages ahead
        if store.commit_log.queue.segments[-1].prefaulted == 0:
            pytest.skip("the kernel does not populate mappings")
        # the window past the end (and the page it ends in) is populated writable,
        # hence dirty; the 3 MiB before it are not, which the next flush would
        # otherwise write to the disk again
        assert WINDOW // 1024 <= dirty_kib(first) <= WINDOW // 1024 + 4
    finally:
        store.close()
