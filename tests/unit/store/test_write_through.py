"""SYNC_FLUSH write-through: records reach the file by pwrite, at each append or per commit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvloop

from apogee._util.clock import FakeClock
from apogee.model.message import BatchItem, StoreBatch
from apogee.store.commitlog import CommitLog
from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.store.results import GetStatus, PutStatus
from apogee.testing.store import message, small_config

SYNC = FlushDiskType.SYNC_FLUSH


def open_log(tmp_path: Path, flush: FlushDiskType) -> CommitLog:
    log = CommitLog(small_config(tmp_path, flush_disk_type=flush), FakeClock())
    log.load()
    return log


def file_bytes(log: CommitLog) -> bytes:
    return b"".join(seg.path.read_bytes() for seg in log.queue.segments)


def fill(log: CommitLog) -> None:
    for i in range(40):  # rolls several 4 KiB files, so blank records too
        assert log.append(message(queue_id=i % 3, body=bytes([i]) * (50 + i * 7))).status.is_stored
    items = [BatchItem(0, b"b%d" % i, f"KEYS\x01k{i}\x02") for i in range(5)]
    assert log.append_batch(StoreBatch("TopicTest", 1, items, "")).status.is_stored


def test_write_through_files_equal_mapped_writes(tmp_path: Path) -> None:
    mapped = open_log(tmp_path / "async", FlushDiskType.ASYNC_FLUSH)
    through = open_log(tmp_path / "sync", SYNC)
    assert through.write_through and not mapped.write_through
    fill(mapped)
    fill(through)  # each append written at once: no commit needed
    assert through.readable_end == through.max_offset == mapped.max_offset
    assert file_bytes(through) == file_bytes(mapped)
    assert len(through.queue.segments) > 2
    mapped.close()
    through.close()


def test_async_singles_through_the_mapping_and_batches_by_pwrite_interleave(
    tmp_path: Path,
) -> None:
    # ASYNC_FLUSH writes a single record into the mapping and a batch with pwrite: runs of
    # both, across rolls and blank records, give the files a SYNC_FLUSH log writes
    logs = [
        open_log(tmp_path / "async", FlushDiskType.ASYNC_FLUSH),
        open_log(tmp_path / "sync", SYNC),
    ]
    for log in logs:
        for i in range(30):
            body = bytes([i]) * (40 + i * 11)
            assert log.append(message(queue_id=i % 2, body=body)).status.is_stored
            items = [BatchItem(0, b"%d-%d" % (i, j) * (i + 1), "") for j in range(i % 4 + 1)]
            assert log.append_batch(StoreBatch("TopicTest", 1, items, "")).status.is_stored
    mapped, through = logs
    assert mapped.readable_end == mapped.max_offset == through.max_offset
    assert len(mapped.queue.segments) > 3
    assert file_bytes(mapped) == file_bytes(through)
    # and readers of the mapping see the batches' bytes
    for seg in mapped.queue.segments:
        view = mapped.read(seg.start, seg.wrote)
        assert view is not None and bytes(view) == seg.path.read_bytes()[: seg.wrote]
    for log in logs:
        log.close()


def test_deferred_bytes_are_invisible_until_commit(tmp_path: Path) -> None:
    log = open_log(tmp_path, SYNC)
    committed: list[int] = []
    pending: list[int] = []
    log.on_committed = committed.append
    log.on_pending = lambda: pending.append(log.max_offset)
    log.defer_commit = True
    assert log.readable_span() == (0, 0)  # no file yet
    first = log.append(message(body=b"one"))
    second = log.append(message(body=b"two"))
    assert pending == [0]  # once per commit turn, at the first pending bytes
    assert log.readable_end == 0 and log.max_offset == second.end_offset
    assert log.readable_span() == (log.min_offset, log.readable_end) == (0, 0)
    assert log.read(first.wrote_offset, first.wrote_bytes) is None  # not in the file yet
    assert log.commit() == second.end_offset
    assert committed == [second.end_offset]
    view = log.read(first.wrote_offset, first.wrote_bytes)
    assert view is not None and b"one" in bytes(view)
    view.release()
    log.append(message(body=b"three"))
    assert len(pending) == 2
    log.close()  # closing commits what is pending
    reopened = open_log(tmp_path, SYNC)
    assert reopened.queue.segments[0].path.read_bytes().count(b"three") == 1
    reopened.close()


def test_a_roll_commits_the_old_file_first(tmp_path: Path) -> None:
    log = open_log(tmp_path, SYNC)
    log.defer_commit = True
    committed: list[int] = []
    log.on_committed = committed.append
    while len(log.queue.segments) < 2:
        log.append(message(body=bytes(300)))
    assert committed and committed[-1] <= 4096  # the first file was written out at the roll
    assert log.readable_end == log.queue.segments[1].start
    assert log.readable_span() == (log.min_offset, log.readable_end)
    log.commit()
    assert log.readable_span() == (0, log.max_offset) and log.max_offset > 4096
    mapped = open_log(tmp_path / "cmp", FlushDiskType.ASYNC_FLUSH)
    while len(mapped.queue.segments) < 2:
        mapped.append(message(body=bytes(300)))
    assert file_bytes(log)[:4096] == file_bytes(mapped)[:4096]
    log.close()
    mapped.close()


def test_dispatch_waits_for_the_commit_and_makes_it(tmp_path: Path) -> None:
    store = FileMessageStore.open(small_config(tmp_path, flush_disk_type=SYNC))
    store.commit_log.defer_commit = True
    result = store.put(message(body=b"later"))
    assert store.reput.step() == 0  # the record is not in the file yet
    assert store.dispatch_step() == 1  # commits first
    got = store.get("TopicTest", 0, 0, 32)
    assert got.status is GetStatus.FOUND and len(got.messages) == 1
    got.release()
    assert store.flush_future(result).done() is False  # no sync loop: nobody synced it
    store.close()


def test_a_loop_driven_store_answers_sync_flush_waiters_on_the_loop(tmp_path: Path) -> None:
    config = small_config(
        tmp_path, flush_disk_type=SYNC, mapped_file_size_commit_log_bytes=64 * 1024
    )
    store = FileMessageStore.open(config)
    store.start(loop_driven=True)
    commit = store.group_commit
    assert commit is not None and not commit.completion_thread

    async def main() -> list[PutStatus]:
        loop = asyncio.get_running_loop()
        loop.add_reader(commit.fileno(), commit.run_once)
        turns: list[int] = []

        def commit_soon() -> None:
            turns.append(1)
            loop.call_soon(store.commit)

        store.on_pending_commit(commit_soon)

        async def writer(w: int) -> list[PutStatus]:
            out = []
            for i in range(50):
                result = store.put(message(queue_id=w % 4, body=bytes([w, i]) * 100))
                out.append(await asyncio.wrap_future(store.flush_future(result)))
            return out

        try:
            done = await asyncio.wait_for(asyncio.gather(*(writer(w) for w in range(16))), 30)
        finally:
            loop.remove_reader(commit.fileno())
        assert len(turns) < 800  # one commit per loop turn, not per message
        return [s for batch in done for s in batch]

    statuses = uvloop.run(main())
    assert statuses == [PutStatus.PUT_OK] * 800
    assert store.commit_log.queue.flushed_offset == store.commit_log.max_offset
    assert commit.syncs < 800  # rounds cover many appends
    end = store.commit_log.max_offset
    store.close()
    reopened = FileMessageStore.open(config)
    assert reopened.commit_log.max_offset == end
    reopened.close()
