"""Where a consumer group's progress is kept: in memory, on the broker, in a file.

Owns: :class:`OffsetTable`, the in-memory offsets by queue with RocketMQ's
update and read rules; :class:`RemoteOffsets`, what a CLUSTERING consumer
keeps between its persists to the broker (the requests themselves are sent
by the caller, through its ClientInstance); :class:`LocalOffsetStore`, the
file a BROADCASTING consumer keeps its offsets in.

Rules (RocketMQ's OffsetStore implementations):

* ``update(mq, offset, increase_only=True)`` never moves an offset back (a
  late commit of an older batch); ``increase_only=False`` sets it (a seek,
  or the value read from the store).
* Reading: READ_FROM_MEMORY answers from memory only; READ_FROM_STORE asks
  the store and remembers its answer; MEMORY_FIRST_THEN_STORE answers from
  memory when it has the queue, else reads the store. None means neither
  has an offset for the queue (a new group there).
* Persisting a CLUSTERING group sends the offsets of the queues it is
  assigned and forgets the others (they were rebalanced away).

Local file, one per client id and group::

    <base dir>/<client id>/<group>/offsets.json     (previous content in .bak)
    {"offsetTable": {"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"t\\"}": 12, ...}}

The base dir defaults to ``~/.rocketmq_offsets`` as in RocketMQ. Keys are
written as strings holding the queue's JSON (standard JSON, read by
fastjson); files written by a Java client, with the queue objects as bare
keys, are read too. Writes replace the file atomically. The file calls
block: a consumer on an event loop runs them in a thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from enum import Enum
from pathlib import Path

from apogee._util.fileio import atomic_write
from apogee.errors import ClientError, ProtocolError
from apogee.model.client import MessageQueue
from apogee.protocol.admin_bodies import encode_mq_offset_table
from apogee.protocol.bodies import decode_mq_offset_table

OFFSETS_FILE = "offsets.json"


def default_offset_dir() -> Path:
    """``~/.rocketmq_offsets``, RocketMQ's rocketmq.client.localOffsetStoreDir default."""
    return Path.home() / ".rocketmq_offsets"


class ReadOffsetType(Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetTable:
    """Offsets of one group by queue, in memory."""

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        old = self._offsets.get(mq)
        if old is None or not increase_only or offset > old:
            self._offsets[mq] = offset

    def get(self, mq: MessageQueue) -> int | None:
        return self._offsets.get(mq)

    def remove(self, mq: MessageQueue) -> None:
        self._offsets.pop(mq, None)

    def snapshot(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the table, of one topic's queues when ``topic`` is given."""
        return {mq: o for mq, o in self._offsets.items() if not topic or mq.topic == topic}

    def __len__(self) -> int:
        return len(self._offsets)

    def __contains__(self, mq: object) -> bool:
        return mq in self._offsets


class RemoteOffsets(OffsetTable):
    """What a CLUSTERING consumer keeps of its broker-stored offsets between persists."""

    async def read(
        self,
        mq: MessageQueue,
        how: ReadOffsetType,
        fetch: Callable[[MessageQueue], Awaitable[int | None]],
    ) -> int | None:
        """The queue's offset by the rule ``how``; ``fetch`` asks the broker.

        ``fetch`` gives None for QUERY_NOT_FOUND and raises on other
        failures, which reach the caller (RocketMQ's -2: skip the queue this
        round).
        """
        if how is not ReadOffsetType.READ_FROM_STORE:
            offset = self.get(mq)
            if offset is not None or how is ReadOffsetType.READ_FROM_MEMORY:
                return offset
        stored = await fetch(mq)
        if stored is not None:
            self.update(mq, stored)
        return stored

    def to_persist(self, assigned: Collection[MessageQueue]) -> dict[MessageQueue, int]:
        """The offsets to send now: those of ``assigned`` queues; the rest are forgotten."""
        keep = set(assigned)
        out: dict[MessageQueue, int] = {}
        for mq in list(self._offsets):
            if mq in keep:
                out[mq] = self._offsets[mq]
            else:
                del self._offsets[mq]
        return out


class LocalOffsetStore(OffsetTable):
    """A BROADCASTING consumer's offsets, kept in a local file (see the module docstring)."""

    def __init__(self, client_id: str, group: str, *, base_dir: Path | None = None) -> None:
        super().__init__()
        self.path = (base_dir or default_offset_dir()) / client_id / group / OFFSETS_FILE

    def load(self) -> None:
        """Read the file (or its backup) into memory.

        Raises:
            ClientError: neither the file nor its backup holds an offset table.
        """
        for mq, offset in (self._read_file() or {}).items():
            self.update(mq, offset)

    def read(self, mq: MessageQueue, how: ReadOffsetType) -> int | None:
        """The queue's offset by the rule ``how``; the store is the file."""
        if how is not ReadOffsetType.READ_FROM_STORE:
            offset = self.get(mq)
            if offset is not None or how is ReadOffsetType.READ_FROM_MEMORY:
                return offset
        try:
            stored = (self._read_file() or {}).get(mq)
        except ClientError:
            return None
        if stored is not None:
            self.update(mq, stored)
        return stored

    def persist_all(self, queues: Collection[MessageQueue]) -> None:
        """Write the offsets of ``queues`` into the file, keeping the other queues it has."""
        if not queues:
            return
        table = self._read_file() or {}
        for mq in queues:
            offset = self.get(mq)
            if offset is not None:
                table[mq] = offset
        atomic_write(self.path, encode_mq_offset_table(table))

    def persist(self, mq: MessageQueue) -> None:
        self.persist_all([mq])

    def _read_file(self) -> dict[MessageQueue, int] | None:
        """The file's table; its backup's when the file is missing, empty or corrupt.

        None when neither exists. A corrupt file with no usable backup is an
        error rather than an empty table: starting over would lose progress.
        """
        backup = self.path.with_name(self.path.name + ".bak")
        problem: str | None = None
        for candidate in (self.path, backup):
            try:
                raw = candidate.read_bytes()
            except FileNotFoundError:
                continue
            if not raw.strip():
                continue
            try:
                return decode_mq_offset_table(raw)
            except ProtocolError as exc:
                problem = problem or f"{candidate}: not an offset table ({exc})"
        if problem is not None:
            raise ClientError(problem)
        return None
