"""Committed consumer offsets (RocketMQ ConsumerOffsetManager).

Owns: ``topic@group`` -> {queue id -> next offset to consume}, and the JSON
form of ``config/consumerOffset.json``.

File shape (RocketMQ writes bare integer keys; we write quoted ones and read
both)::

    {"offsetTable": {"TopicTest@cg1": {"0": 12, "1": 7}}}

``dirty`` says whether anything changed since the last ``encode``; the owner
persists every flushConsumerOffsetInterval (5 s) and at shutdown.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from apogee.errors import ProtocolError
from apogee.protocol import tolerant_json

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


#: (group, topic, queue id) -> offset
LocalCommits = dict[tuple[str, str, int], int]


class ConsumerOffsetManager:
    def __init__(self, *, track_commits: bool = False) -> None:
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False
        #: a slave's record of what consumers committed to it (its master was
        #: away), until the master has it; None on a master
        self.local_commits: LocalCommits | None = {} if track_commits else None

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.table.get(offset_key(topic, group))
        if queues is None:
            queues = self.table[offset_key(topic, group)] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True
        if self.local_commits is not None:
            self.local_commits[(group, topic, queue_id)] = offset

    def adopt(self, table: dict[str, dict[int, int]]) -> None:
        """Take a master's table (a slave's copy); offsets committed here and not yet
        on the master stay (see ``local_commits``)."""
        merged = {key: dict(queues) for key, queues in table.items()}
        for (group, topic, queue_id), offset in (self.local_commits or {}).items():
            merged.setdefault(offset_key(topic, group), {})[queue_id] = offset
        if merged != self.table:
            self.table = merged
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one."""
        queues = self.table.get(offset_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def queue_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(offset_key(topic, group), {}))

    def groups_and_topics(self) -> Iterator[tuple[str, str]]:
        for key in self.table:
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            yield group, topic

    def remove_group(self, group: str) -> int:
        keys = [k for k in self.table if k.partition(TOPIC_GROUP_SEPARATOR)[2] == group]
        for key in keys:
            del self.table[key]
        if keys:
            self.dirty = True
        return len(keys)

    def remove_topic(self, topic: str) -> int:
        """Forget every group's offsets of ``topic`` (the topic was deleted)."""
        keys = [k for k in self.table if k.partition(TOPIC_GROUP_SEPARATOR)[0] == topic]
        for key in keys:
            del self.table[key]
        if keys:
            self.dirty = True
        return len(keys)

    def topics_of(self, group: str) -> list[str]:
        """Topics ``group`` has committed offsets for (RocketMQ whichTopicByConsumer)."""
        return sorted(t for g, t in self.groups_and_topics() if g == group)

    # -- persistence ----------------------------------------------------------

    def encode(self, *, mark_clean: bool = True) -> bytes:
        """The file's JSON; ``mark_clean=False`` for a copy that is not being persisted."""
        if mark_clean:
            self.dirty = False
        table = {
            key: {str(q): off for q, off in sorted(queues.items())}
            for key, queues in sorted(self.table.items())
        }
        return orjson.dumps({"offsetTable": table})

    def load(self, data: bytes | None) -> None:
        """Read a persisted table; a malformed entry is a ProtocolError naming it."""
        if not data:
            return
        self.table = decode_offset_table(data)
        self.dirty = False


def decode_offset_table(data: bytes) -> dict[str, dict[int, int]]:
    """``topic@group`` -> {queue id -> offset} of a consumerOffset.json (or a master's dump).

    Raises:
        ProtocolError: a malformed entry, named.
    """
    obj = tolerant_json.loads(data)
    raw = obj.get("offsetTable", {}) if isinstance(obj, dict) else None
    if not isinstance(raw, dict):
        raise ProtocolError("consumerOffset.json: offsetTable is not an object")
    table: dict[str, dict[int, int]] = {}
    for key, queues in raw.items():
        if TOPIC_GROUP_SEPARATOR not in key or not isinstance(queues, dict):
            raise ProtocolError(f"consumerOffset.json: bad entry {key!r}")
        try:
            table[key] = {int(q): int(off) for q, off in queues.items()}
        except (TypeError, ValueError):
            raise ProtocolError(f"consumerOffset.json: bad offsets of {key!r}") from None
    return table
