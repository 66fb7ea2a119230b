"""The store's flush threads run on their timers, never once per append.

A service thread woken per message competes with the event loop for the GIL at the
message rate (RocketMQ wakes its commit-log flush on every put under ASYNC_FLUSH); here
each runs every ``flushInterval*`` only. With intervals longer than the test, thousands
of appends and dispatch steps (what the broker's loop does per message) leave both flush
threads without a single round.
"""

from __future__ import annotations

from pathlib import Path

from apogee.store.file_store import FileMessageStore
from apogee.store.flush import CommitLogFlushService, ConsumeQueueFlushService
from apogee.store.results import PutStatus
from apogee.testing.store import message, small_config

NEVER_MS = 600_000


def test_appends_and_dispatch_wake_no_flush_thread(tmp_path: Path) -> None:
    config = small_config(
        tmp_path,
        mapped_file_size_commit_log_bytes=8 << 20,
        mapped_file_size_consume_queue_bytes=20 * 10_000,
        max_message_size_bytes=4096,
        flush_interval_commit_log_ms=NEVER_MS,
        flush_interval_consume_queue_ms=NEVER_MS,
    )
    store = FileMessageStore.open(config)
    store.start()
    try:
        flushers = [
            s for s in store.services
            if isinstance(s, CommitLogFlushService | ConsumeQueueFlushService)
        ]  # fmt: skip
        assert len(flushers) == 2 and all(s.running for s in flushers)
        for n in range(3000):
            assert store.put(message(queue_id=n % 4, body=bytes(1024))).status is PutStatus.PUT_OK
            if n % 10 == 9:
                store.dispatch_step()  # the broker steps once per loop turn
        while store.dispatch_step():
            pass
        assert store.dispatch_behind_bytes() == 0
        assert [s.rounds for s in flushers] == [0, 0]
    finally:
        store.close()
    # and a round does flush: the close made everything durable
    assert store.commit_log.queue.flushed_offset == store.commit_log.max_offset
