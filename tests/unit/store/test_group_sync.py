"""The SYNC_FLUSH sync loop (both twins, see conftest): rounds, files, errors, wake-ups."""

from __future__ import annotations

import errno
import os
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from apogee.store import group_sync
from apogee.store.group_sync import Syncer


def readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


@contextmanager
def running(sync: Syncer) -> Iterator[threading.Thread]:
    thread = threading.Thread(target=sync.run, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        sync.stop()
        thread.join(5)
        assert not thread.is_alive()


def data_file(path: Path, size: int = 1 << 16) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"x" * size, 0)
    return fd


def test_a_round_covers_every_request_made_before_it(tmp_path: Path) -> None:
    fd = data_file(tmp_path / "a")
    sync = group_sync.GroupSync(0)
    sync.add_file(0, 1 << 16, fd)
    os.close(fd)  # the loop keeps its own descriptor
    sync.request(100)
    sync.request(300)
    sync.request(200)  # never lowers what was asked
    assert (sync.requested, sync.synced) == (300, 0)
    assert not readable(sync.fileno())
    with running(sync):
        assert sync.wait(0, 5) == 300
        assert sync.syncs == 1
        assert sync.error == 0
        assert sync.sync_seconds > 0
        assert readable(sync.fileno())
        sync.ack()
        assert not readable(sync.fileno())
        sync.request(1000)
        assert sync.wait(300, 5) == 1000
        assert sync.syncs == 2
    assert not sync.running


def test_files_wholly_below_synced_are_closed(tmp_path: Path) -> None:
    sync = group_sync.GroupSync(0)
    for i in range(3):
        fd = data_file(tmp_path / str(i), 100)
        sync.add_file(i * 100, 100, fd)
        os.close(fd)
    assert sync.files == 3
    with running(sync):
        sync.request(250)
        assert sync.wait(0, 5) == 250
        sync.request(260)
        assert sync.wait(250, 5) == 260
        assert sync.files == 1  # the round closed the two files below 250


def test_a_failing_file_fails_the_round_and_synced_stays(tmp_path: Path) -> None:
    # A pipe is a real descriptor whose fdatasync fails (EINVAL): the seam
    # where a disk error would show, without a failing disk.
    fd = data_file(tmp_path / "a", 100)
    read_end, write_end = os.pipe()
    sync = group_sync.GroupSync(0)
    sync.add_file(0, 100, fd)
    sync.add_file(100, 100, read_end)
    for n in (fd, read_end, write_end):
        os.close(n)
    with running(sync):
        sync.request(150)  # spans both files: the second one fails
        for _ in range(500):
            if sync.error:
                break
            sync.wait(0, 0.01)
        assert sync.error == errno.EINVAL
        assert sync.failed
        assert sync.synced == 0
        assert readable(sync.fileno())  # a failed round is announced too


def test_after_a_failed_fdatasync_no_later_round_vouches_for_anything(tmp_path: Path) -> None:
    # After a failed fsync the kernel may have dropped the dirty pages: a
    # later sync that succeeds proves nothing, so the loop never syncs again.
    fd = data_file(tmp_path / "a", 100)
    read_end, write_end = os.pipe()
    sync = group_sync.GroupSync(0)
    sync.add_file(0, 100, read_end)
    for n in (read_end, write_end):
        os.close(n)
    with running(sync):
        sync.request(50)
        for _ in range(500):
            if sync.failed:
                break
            sync.wait(0, 0.01)
        assert sync.failed and sync.error == errno.EINVAL
        sync.add_file(0, 100, fd)  # a good descriptor for the same bytes
        os.close(fd)
        sync.request(80)
        assert sync.wait(0, 0.3) == 0
        assert (sync.synced, sync.syncs, sync.failed) == (0, 0, True)


def test_a_range_no_file_covers_is_not_vouched_for(tmp_path: Path) -> None:
    sync = group_sync.GroupSync(1000)
    with running(sync):
        sync.request(2000)
        for _ in range(500):
            if sync.error:
                break
            sync.wait(1000, 0.01)
        assert sync.error == errno.ENOENT
        assert sync.synced == 1000
        fd = data_file(tmp_path / "late", 100)
        sync.add_file(0, 4096, fd)  # the file appears: the retry succeeds
        os.close(fd)
        assert sync.wait(1000, 5) == 2000
        assert sync.error == 0
        assert not sync.failed  # a missing file is not a failed sync


def test_stop_wakes_waiters_and_run_refuses_a_second_loop(tmp_path: Path) -> None:
    sync = group_sync.GroupSync(0)
    woke: list[int] = []
    waiter = threading.Thread(target=lambda: woke.append(sync.wait(0, 30)))
    with running(sync):
        waiter.start()
        with pytest.raises(RuntimeError):
            for _ in range(500):  # the loop thread may not have started yet
                if sync.running:
                    sync.run()
                sync.wait(0, 0.001)
    waiter.join(5)
    assert woke == [0]
    assert readable(sync.fileno())


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    sync = group_sync.GroupSync(0)
    with pytest.raises(ValueError):
        sync.add_file(-1, 100, 0)
    with pytest.raises(ValueError):
        sync.add_file(0, 0, 0)
    with pytest.raises(OSError):
        sync.add_file(0, 100, 987654)  # not an open descriptor
    with pytest.raises(ValueError):
        group_sync.GroupSync(-5)
    assert sync.files == 0
