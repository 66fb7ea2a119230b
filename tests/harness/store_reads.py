"""What a store holds for one queue, read as a consumer would (after dispatching all)."""

from __future__ import annotations

from apogee.model.message_codec import iter_records
from apogee.store.file_store import FileMessageStore


def stored_bodies(
    store: FileMessageStore, topic: str = "TopicTest", queue_id: int = 0
) -> list[bytes]:
    """The bodies in ``topic``'s queue ``queue_id`` from offset 0 (up to 1,000), in order."""
    while store.dispatch_step():
        pass
    got = store.get(topic, queue_id, 0, 1000)
    data = b"".join(bytes(v) for v in got.messages)
    got.release()
    return [m.body for m in iter_records(data)]
