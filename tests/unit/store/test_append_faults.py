"""A put that cannot be encoded is refused and leaves the writer free for the next one."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee._util.clock import FakeClock
from apogee.model.message import StoreBatch
from apogee.store.commitlog import CommitLog
from apogee.store.config import FlushDiskType
from apogee.store.results import PutStatus
from apogee.testing.store import message, small_config


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize(
    "field",
    [
        {"flag": 2**31},
        {"sys_flag": -(2**31) - 1},
        {"reconsume_times": 2**40},
        {"born_timestamp": 2**63},
        {"queue_id": 2**31},
        {"prepared_transaction_offset": 2**64},
    ],
    ids=lambda f: next(iter(f)),
)
def test_an_unencodable_field_is_refused_and_the_next_put_is_served(
    tmp_path: Path, field: dict[str, int], flush: FlushDiskType
) -> None:
    clock = FakeClock()
    log = CommitLog(small_config(tmp_path, flush_disk_type=flush), clock)
    log.load()
    good = log.append(message(body=b"before"))

    bad = log.append(message(body=b"bad", **field))  # type: ignore[arg-type]

    assert bad.status is PutStatus.MESSAGE_ILLEGAL
    name = next(iter(field))
    assert name in (bad.reason or "")
    assert log.lock_held_ms() == 0
    clock.advance(30)  # far past osPageCacheBusyTimeOutMills
    assert not log.is_page_cache_busy()
    after = log.append(message(body=b"after"))
    assert after.status is PutStatus.PUT_OK
    assert after.wrote_offset == good.end_offset  # nothing of the refused put is in the log
    assert after.queue_offset == good.queue_offset + 1
    log.close()


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize(
    ("field", "named"),
    [
        ({"sys_flag": 2**31}, "sys_flag"),
        ({"born_timestamp": -(2**63) - 1}, "born_timestamp"),
        ({"reconsume_times": 2**31}, "reconsume_times"),
        ({"items": [(0, b"a", ""), (2**32, b"b", "")]}, "flag of item 1"),
    ],
    ids=lambda f: f if isinstance(f, str) else "",
)
def test_an_unencodable_batch_is_refused_and_the_next_put_is_served(
    tmp_path: Path, field: dict[str, object], named: str, flush: FlushDiskType
) -> None:
    clock = FakeClock()
    log = CommitLog(small_config(tmp_path, flush_disk_type=flush), clock)
    log.load()
    fields: dict[str, object] = {
        "topic": "TopicTest", "queue_id": 0, "items": [(0, b"a", ""), (0, b"b", "")],
        "properties": "", "sys_flag": 0, "born_timestamp": 1, "born_host": ("10.0.0.7", 1),
        "store_host": ("10.0.0.1", 10911), "reconsume_times": 0,
    }  # fmt: skip
    good = log.append_batch(StoreBatch(**fields))  # type: ignore[arg-type]

    bad = log.append_batch(StoreBatch(**{**fields, **field}))  # type: ignore[arg-type]

    assert bad.status is PutStatus.MESSAGE_ILLEGAL
    assert named in (bad.reason or "")
    clock.advance(30)
    assert not log.is_page_cache_busy()
    after = log.append(message(body=b"after"))
    assert after.status is PutStatus.PUT_OK
    assert after.wrote_offset == good.end_offset
    assert after.queue_offset == 2
    log.close()
