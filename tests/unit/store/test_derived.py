"""A record derived from a stored one (``put_derived``) is what a put of its decoded,
changed message would have written: the same bytes, offsets, queues and refusals.

The reference is the way END_TRANSACTION committed before: the half record
decoded into a MessageExt, ``committed_message`` of it put as a StoreMessage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee._util.clock import FakeClock
from apogee.broker.transaction import COMMIT_DROPS, committed_message, half_message, op_message
from apogee.model.kernels import record_facts
from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    StoreMessage,
)
from apogee.model.message_codec import decode_record
from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.store.results import PutResult
from apogee.testing.store import message, small_config

HOST = ("10.0.0.1", 10911)


def halves() -> list[StoreMessage]:
    """Half records of several shapes: hosts, flags, properties, bodies."""
    plain = message(body=b"x" * 900, tags="t", keys="k1 k2", uniq="U1")
    return [
        half_message(m)
        for m in (
            plain,
            message(queue_id=2, body=b"", uniq="U2", extra={"ü": "ß ünïcode"}),
            message(queue_id=3, body=b"y" * 800, uniq="U2b"),
            message(body=b"\0\1\2", born_host=("::1", 7), store_host=("::1", 10911), uniq="U3"),
            message(body=b"v6 born only", born_host=("fe80::1", 9), sys_flag=0x2, flag=77),
            message(body=b"odd \x01 value", extra={"a": "x\x01y", "CLUSTER": "c"}, uniq="U5"),
            message(topic="SCHEDULE_TOPIC_XXXX", queue_id=1, extra={"DELAY": "2"}, tags="d"),
        )
    ]


def open_store(root: Path, clock: FakeClock, flush: FlushDiskType) -> FileMessageStore:
    config = small_config(root, flush_disk_type=flush, mapped_file_size_commit_log_bytes=4096)
    return FileMessageStore.open(config, clock=clock)


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for sub in ("commitlog", "consumequeue")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def end_all(store: FileMessageStore, clock: FakeClock, derived: bool) -> list[PutResult]:
    """Store the halves, then commit each (the last one rolled back) the one way or the other."""
    offsets = []
    for record in halves():
        offsets.append(store.put(record).wrote_offset)
        clock.advance(0.013)
    results = []
    for i, offset in enumerate(offsets):
        view = store.read_message(offset)
        assert view is not None
        half = decode_record(view)
        real = (half.properties["REAL_TOPIC"], int(half.properties["REAL_QID"]))
        kind = TRANSACTION_ROLLBACK_TYPE if i == len(offsets) - 1 else TRANSACTION_COMMIT_TYPE
        if kind == TRANSACTION_COMMIT_TYPE:
            if derived:
                facts = record_facts(view, (), COMMIT_DROPS)
                assert facts is not None
                result = store.put_derived(view, *real, kind, offset, facts[5])
            else:
                result = store.put(committed_message(half, *real))
            results.append(result)
        view.release()
        clock.advance(0.021)
        results.append(store.put(op_message(half, HOST, clock.now_ms())))
    while store.dispatch_step(5):
        pass
    return results


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_derived_commits_write_the_bytes_decoded_commits_wrote(
    tmp_path: Path, flush: FlushDiskType
) -> None:
    written = {}
    for way in ("decoded", "derived"):
        clock = FakeClock()
        store = open_store(tmp_path / way, clock, flush)
        results = end_all(store, clock, derived=way == "derived")
        assert all(r.status.is_stored for r in results)
        written[way] = (
            [(r.wrote_offset, r.wrote_bytes, r.queue_offset, r.msg_id) for r in results],
            list(store.commit_log.topic_queue_table.items()),
        )
        store.close()
    assert written["derived"] == written["decoded"]
    assert files(tmp_path / "derived") == files(tmp_path / "decoded")
    assert len(list((tmp_path / "derived" / "commitlog").iterdir())) > 1  # blank records too


def test_a_derived_record_is_refused_as_its_decoded_message_would_be(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path, clock, FlushDiskType.ASYNC_FLUSH)
    offset = store.put(half_message(message(body=b"b"))).wrote_offset
    view = store.read_message(offset)
    assert view is not None
    half = decode_record(view)
    big = "p" * 33000
    for topic, props in (("t" * 128, "A\x01b\x02"), ("T", f"A\x01{big}\x02"), ("", "")):
        changed = committed_message(half, topic, 1)
        changed.properties = props
        old = store.put(changed)
        new = store.put_derived(view, topic, 1, TRANSACTION_COMMIT_TYPE, offset, props.encode())
        assert (new.status, new.reason) == (old.status, old.reason)
        assert not new.status.is_stored
    assert not store.put_derived(view[:-1], "T", 1, 8, offset, b"").status.is_stored
    view.release()
    store.close()
