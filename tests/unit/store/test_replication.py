"""Replication, the store's side: a master's chunks, a slave's appends, its tail check."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from apogee.errors import DiskFullError, StoreError
from apogee.store.config import BrokerRole
from apogee.store.file_store import FileMessageStore
from apogee.store.replication import (
    Outcome,
    ReplicaTail,
    Step,
    TransferCursor,
    record_start,
    transfer_start,
)
from apogee.testing.store import expected_queues, message, queue_units, small_config

FILE = 4096


def _master(root: Path) -> FileMessageStore:
    return FileMessageStore.open(small_config(root))


def _slave(root: Path) -> FileMessageStore:
    return FileMessageStore.open(small_config(root, broker_role=BrokerRole.SLAVE))


def _fill(store: FileMessageStore, count: int, tag: str = "a", size: int = 100) -> None:
    for i in range(count):
        body = f"{tag}-{i}-".encode().ljust(size, b"x")
        assert store.put(message(queue_id=i % 3, body=body, keys=f"{tag}{i}")).status.is_stored
    store.dispatch_step(100_000)


def _bytes(store: FileMessageStore, begin: int, end: int) -> bytes:
    out = bytearray()
    pos = begin
    while pos < end:
        seg = store.commit_log.queue.locate(pos)
        assert seg is not None
        n = min(seg.start + seg.wrote, end) - pos
        out += seg.view[pos - seg.start : pos - seg.start + n]
        pos += n
    return bytes(out)


def _paired(root: Path, count: int) -> tuple[FileMessageStore, FileMessageStore]:
    """A master with ``count`` records and a slave with all of them (it joined early)."""
    master, slave = _master(root / "m"), _slave(root / "s")
    _fill(master, 2)
    Link(master, ReplicaTail(slave)).sync()
    _fill(master, count - 2)
    Link(master, ReplicaTail(slave)).sync()
    assert slave.commit_log_min_offset() == 0
    return master, slave


class Link:
    """The broker's two connection ends, minus the socket: an Apogee master streaming
    to one ReplicaTail, chunk by chunk, heartbeats as the HA master sends them."""

    def __init__(self, master: FileMessageStore, tail: ReplicaTail, chunk: int = 1000) -> None:
        self.master = master
        self.tail = tail
        self.chunk = chunk
        self.reports: list[int] = []
        self.reasons: list[str] = []

    def connect(self) -> Outcome:
        """One connection, until the slave has everything or asks to reconnect."""
        first = self.tail.start()
        self.reports.append(first)
        cursor = TransferCursor(self.master.replication_source(), first)
        if cursor.behind_slave:  # an Apogee master says where its log ends at once
            outcome = self.tail.on_frame(cursor.next, memoryview(b""))
            if outcome.step is Step.RECONNECT:
                return outcome
        while (taken := cursor.take(self.chunk)) is not None:
            offset, view = taken
            outcome = self.tail.on_frame(offset, view)
            view.release()
            if outcome.ack is not None:
                self.reports.append(outcome.ack)
            if outcome.step is Step.RECONNECT:
                return outcome
        return self.tail.on_frame(cursor.next, memoryview(b""))  # caught up: a heartbeat

    def sync(self, max_connections: int = 20) -> None:
        for _ in range(max_connections):
            outcome = self.connect()
            if outcome.step is Step.CONTINUE and not self.tail.checking:
                return
            self.reasons.append(outcome.reason)
        raise AssertionError(f"no agreement after {max_connections} connections: {self.reasons}")


def _same_log(master: FileMessageStore, slave: FileMessageStore) -> None:
    low, high = slave.commit_log_min_offset(), slave.commit_log_max_offset()
    assert high == master.commit_log_max_offset()
    assert _bytes(slave, low, high) == _bytes(master, low, high)
    slave.dispatch_step(100_000)
    theirs = {
        key: kept
        for key, units in queue_units(master.queues).items()
        if (kept := [u for u in units if u[1] >= low])
    }
    assert queue_units(slave.queues) == theirs


def test_where_a_master_starts() -> None:
    assert transfer_start(0, 0, 10_000, FILE) == 8192  # start of the last file
    assert transfer_start(0, 0, 8192, FILE) == 8192
    assert transfer_start(500, 0, 10_000, FILE) == 500
    assert transfer_start(20_000, 0, 10_000, FILE) == 10_000  # past the end: the end


def test_chunks_stay_in_one_file_and_in_written_bytes(tmp_path: Path) -> None:
    master = _master(tmp_path)
    _fill(master, 60)
    end = master.commit_log_max_offset()
    assert end > 2 * FILE
    cursor = TransferCursor(master.replication_source(), 1)
    seen = [(1, 0)]
    while (taken := cursor.take(3000)) is not None:
        offset, view = taken
        assert offset // FILE == (offset + len(view) - 1) // FILE
        seen.append((offset, len(view)))
        view.release()
    assert cursor.next == end
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(seen))
    master.close()


def test_record_starts_follow_the_records(tmp_path: Path) -> None:
    master = _master(tmp_path)
    _fill(master, 50)
    starts = [u[1] for units in queue_units(master.queues).values() for u in units]
    starts.sort()
    for a, b in itertools.pairwise(starts):
        assert record_start(master.commit_log, a) == a
        if b - a > 1 and b // FILE == a // FILE:
            assert record_start(master.commit_log, b - 1) == a
            assert record_start(master.commit_log, b - 1, hint=a) == a  # walked from a
    last_file_blank = FILE - 10  # inside the blank end record of the first file
    first_file_last = max(s for s in starts if s < FILE)
    assert record_start(master.commit_log, last_file_blank) > first_file_last
    with pytest.raises(ValueError, match="not in the log"):
        record_start(master.commit_log, master.commit_log_max_offset())
    master.close()


def test_a_slave_copies_byte_for_byte_and_builds_its_queues(tmp_path: Path) -> None:
    master = _master(tmp_path / "m")
    slave = _slave(tmp_path / "s")
    _fill(master, 70)
    link = Link(master, ReplicaTail(slave))
    link.sync()
    assert link.reports[0] == 0  # an empty slave lets the master choose: its last file
    assert slave.commit_log_min_offset() == master.commit_log_max_offset() // FILE * FILE > 0
    _same_log(master, slave)
    assert queue_units(slave.queues) == expected_queues(slave.config)
    _fill(master, 20, tag="b")
    link.sync()
    _same_log(master, slave)
    assert link.reports[-1] == master.commit_log_max_offset()
    master.close()
    slave.close()


def test_a_restarted_slave_checks_its_last_record_and_goes_on(tmp_path: Path) -> None:
    master, slave = _paired(tmp_path, 30)
    end = slave.commit_log_max_offset()
    slave.close()
    _fill(master, 10, tag="b")
    slave = _slave(tmp_path / "s")
    link = Link(master, ReplicaTail(slave))
    link.sync()
    assert link.reports[0] == record_start(slave.commit_log, end - 1) < end
    assert not link.reasons
    _same_log(master, slave)
    master.close()
    slave.close()


def test_a_slave_ahead_of_its_master_truncates_to_the_masters_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    master, slave = _paired(tmp_path, 60)
    ahead = slave.commit_log_max_offset()
    starts = sorted(u[1] for units in queue_units(master.queues).values() for u in units)
    cut = starts[-12]  # the master lost its last 12 records (a torn tail)
    assert master.truncate_log(cut) == ahead - cut
    tail = ReplicaTail(slave)
    link = Link(master, tail)
    link.sync()
    assert slave.commit_log_max_offset() == cut
    assert tail.truncations == [(ahead, cut, f"the master's log ends at {cut}")]
    assert "truncated the commit log" in caplog.text
    _same_log(master, slave)
    _fill(master, 5, tag="c")
    link.sync()
    _same_log(master, slave)
    assert slave.max_offset_in_queue("TopicTest", 0) == master.max_offset_in_queue("TopicTest", 0)
    master.close()
    slave.close()


@pytest.mark.parametrize("lost", [1, 3, 25])
def test_a_master_that_lost_its_tail_and_wrote_again_is_followed(tmp_path: Path, lost: int) -> None:
    master, slave = _paired(tmp_path, 60)
    starts = sorted(u[1] for units in queue_units(master.queues).values() for u in units)
    cut = starts[-lost]
    master.truncate_log(cut)
    _fill(master, lost + 8, tag="new")  # different records where the slave's were
    assert master.commit_log_max_offset() > slave.commit_log_max_offset()
    tail = ReplicaTail(slave)
    Link(master, tail).sync()
    assert tail.truncations and tail.truncations[0][1] == cut
    _same_log(master, slave)
    got = slave.query_message("TopicTest", f"a{60 - lost}", 10, 0, 2**62)
    assert not got.messages, "an index entry of a dropped record must not find the new one"
    master.close()
    slave.close()


def test_appends_follow_the_stores_health(tmp_path: Path) -> None:
    slave = _slave(tmp_path / "s")
    master = _master(tmp_path / "m")
    _fill(master, 5)
    data = _bytes(master, 0, master.commit_log_max_offset())
    assert not slave.append_data(100, data)  # not where the log ends
    slave.mark_fault("commit-log fsync failed: EIO")
    with pytest.raises(StoreError, match="fsync failed"):
        slave.append_data(0, data)
    slave.close()
    slave = _slave(tmp_path / "s2")
    slave.mark_disk_full("no room for the next file")
    with pytest.raises(DiskFullError, match="disk is full"):
        slave.append_data(0, data)
    slave.close()
    master.close()


def test_a_slave_never_takes_puts(tmp_path: Path) -> None:
    slave = _slave(tmp_path)
    result = slave.put(message())
    assert result.status.value == "SERVICE_NOT_AVAILABLE" and "slave" in result.reason
    slave.close()
