from __future__ import annotations

import errno
import struct
import threading
from concurrent.futures import Future, wait
from pathlib import Path

from apogee._util.clock import FakeClock
from apogee.store import group_sync
from apogee.store.checkpoint import Checkpoint
from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.store.flush import CommitLogFlushService, GroupCommitService
from apogee.store.results import PutStatus
from apogee.store.segment_queue import SegmentQueue
from apogee.testing.store import message, small_config


def write(queue: SegmentQueue, n: int) -> int:
    seg = queue.last_segment()
    seg.view[seg.wrote : seg.wrote + n] = b"x" * n
    seg.wrote += n
    return queue.max_offset


def attached(queue: SegmentQueue, clock: FakeClock, timeout_ms: int = 5000) -> GroupCommitService:
    sync = group_sync.GroupSync(queue.flushed_offset)
    for seg in queue.segments:
        sync.add_file(seg.start, seg.size, seg.fd)
    service = GroupCommitService(queue.mark_flushed, clock, timeout_ms=timeout_ms)
    service.attach(sync)
    return service


def test_one_sync_releases_every_waiter_it_covers(tmp_path: Path) -> None:
    queue = SegmentQueue(tmp_path, 1 << 20)
    queue.last_segment()
    service = attached(queue, FakeClock())
    assert service.sync is not None
    futures = [service.request(write(queue, 100)) for _ in range(100)]
    assert len({id(f) for f in futures}) == 1  # one generation, one future
    assert service.sync.requested == 0  # the owner asks, as bytes reach the file
    service.sync.request(queue.max_offset)
    loop = threading.Thread(target=service.sync.run)
    loop.start()
    assert service.sync.wait(0, 5) == 10_000
    assert not futures[0].done()  # answered by a completion round, not by the loop
    service.run_once()
    assert all(f.result(0) is PutStatus.PUT_OK for f in futures)
    assert service.syncs == 1
    assert queue.flushed_offset == 10_000
    assert service.request(5000).result(0) is PutStatus.PUT_OK  # already durable
    service.sync.stop()
    loop.join(5)
    queue.close()


def test_waiters_time_out_when_syncs_do_not_cover_them(tmp_path: Path) -> None:
    clock = FakeClock()
    queue = SegmentQueue(tmp_path, 1 << 20)  # no file registered: every round fails
    service = attached(queue, clock)
    assert service.sync is not None
    fut = service.request(100)
    service.sync.request(100)
    loop = threading.Thread(target=service.sync.run)
    loop.start()
    for _ in range(500):
        if service.sync.error:
            break
        service.sync.wait(0, 0.01)
    assert service.sync.error == errno.ENOENT
    service.run_once()
    assert not fut.done()
    clock.advance(4.9)
    service.run_once()
    assert not fut.done()
    clock.advance(0.2)
    service.run_once()
    assert fut.result(0) is PutStatus.FLUSH_DISK_TIMEOUT
    assert service.waiting() == 0
    service.sync.stop()
    loop.join(5)


def test_a_waiter_callback_may_request_again(tmp_path: Path) -> None:
    queue = SegmentQueue(tmp_path, 1 << 20)
    queue.last_segment()
    service = attached(queue, FakeClock())
    assert service.sync is not None
    again: list[Future[PutStatus]] = []
    sync = service.sync

    def request_again(_: object) -> None:
        again.append(service.request(end := write(queue, 10)))
        sync.request(end)

    first = service.request(write(queue, 10))
    sync.request(queue.max_offset)
    first.add_done_callback(request_again)
    loop = threading.Thread(target=service.sync.run)
    loop.start()
    service.sync.wait(0, 5)
    service.run_once()  # answers inside the round: no lock may be held
    assert first.result(0) is PutStatus.PUT_OK and len(again) == 1
    service.sync.wait(10, 5)
    service.run_once()
    assert again[0].result(0) is PutStatus.PUT_OK
    service.sync.stop()
    loop.join(5)
    queue.close()


def test_service_thread_completes_futures_for_concurrent_writers(tmp_path: Path) -> None:
    config = small_config(
        tmp_path,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commit_log_bytes=1 << 20,
    )
    store = FileMessageStore.open(config)
    store.start()
    futures: list[Future[PutStatus]] = []
    lock = threading.Lock()

    def writer() -> None:
        for _ in range(25):
            with lock:  # one writer at a time, as the broker's writer thread does
                result = store.put(message(body=bytes(200)))
            fut = store.flush_future(result)
            futures.append(fut)
            assert fut.result(10) is PutStatus.PUT_OK

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(futures) == 200
    assert store.commit_log.queue.flushed_offset == store.commit_log.max_offset
    store.close()


def test_async_store_futures_are_done_at_once_and_flushing_catches_up(tmp_path: Path) -> None:
    config = small_config(tmp_path, flush_interval_commit_log_ms=10, flush_commit_log_least_pages=0)
    store = FileMessageStore.open(config)
    result = store.put(message())
    assert store.flush_future(result).result(0) is PutStatus.PUT_OK
    illegal = store.put(message(body=bytes(5000)))
    assert store.flush_future(illegal).result(0) is PutStatus.MESSAGE_ILLEGAL
    store.start()
    done = threading.Event()
    for _ in range(500):
        if store.commit_log.queue.flushed_offset >= result.end_offset:
            done.set()
            break
        done.wait(0.01)
    assert done.is_set()
    store.close()


def test_async_flush_waits_for_enough_pages_until_the_thorough_flush(tmp_path: Path) -> None:
    queue = SegmentQueue(tmp_path, 1 << 20)
    clock = FakeClock()
    service = CommitLogFlushService(
        queue.flush, lambda: None, clock, least_pages=4, thorough_interval_ms=10_000
    )
    write(queue, 4096 * 3)
    service.run_once()
    assert queue.flushed_offset == 0  # only 3 dirty pages
    write(queue, 4096)
    service.run_once()
    assert queue.flushed_offset == 4 * 4096
    write(queue, 10)
    service.run_once()
    assert queue.flushed_offset == 4 * 4096
    clock.advance(10)
    service.run_once()
    assert queue.flushed_offset == 4 * 4096 + 10
    queue.close()


def test_checkpoint_records_flushed_store_times(tmp_path: Path) -> None:
    clock = FakeClock()
    store = FileMessageStore.open(small_config(tmp_path), clock=clock)
    store.put(message())
    stamp = clock.now_ms()
    clock.advance(5)
    store.dispatch_step()
    store.close()
    raw = (tmp_path / "checkpoint").read_bytes()
    assert len(raw) == 4096
    physic, logics, index = struct.unpack_from(">qqq", raw)
    assert (physic, logics, index) == (stamp, stamp, 0)
    cp = Checkpoint(tmp_path / "checkpoint", readonly=True)
    assert cp.min_timestamp() == stamp - 3000


def test_closing_wakes_waiters_that_no_flush_will_cover(tmp_path: Path) -> None:
    config = small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = FileMessageStore.open(config)
    result = store.put(message())
    fut = store.flush_future(result)  # no service running: nobody flushes
    assert not fut.done()
    store.close()  # the final flush covers it
    wait([fut], timeout=1)
    assert fut.result(0) is PutStatus.PUT_OK
