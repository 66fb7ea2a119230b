"""What the commit log tells its derived stores about each record.

Owns: DispatchRequest (one per stored record, built either at append time or
by re-reading the log during recovery and on slaves), the Dispatcher
protocol implemented by the consume-queue builder and the index service (and
its batch form, EntryDispatcher), the compact tuple form of a request used on
hot paths (``DispatchEntry``, read by the names of its positions, ``E_TOPIC``
.. ``E_PREPARED_OFFSET``), ``parse_run`` (the entries of a run of records read back from the
log, the fast path of replicated bytes), and ``index_fields``, the
one function that derives tag code, keys and unique key from a record's
property string, so that the append path and the log-parsing path cannot
disagree (its common part is ``apogee.model.kernels.message_fields``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from apogee.model.kernels import message_fields
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    property_value,
)
from apogee.model.message_codec import MESSAGE_MAGIC_CODE_V1, RecordMeta
from apogee.model.topic import SCHEDULE_TOPIC


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """The facts of one stored record that consume queues and indexes need."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None  # the KEYS property: space-separated user keys
    uniq_key: str | None  # the UNIQ_KEY property: client-generated id
    sys_flag: int
    prepared_transaction_offset: int


class Dispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None:
        """Record ``request``; must be idempotent for records already seen."""
        ...


#: A DispatchRequest as a plain tuple, fields in the same order; the append
#: path hands these to the dispatcher because building one is much cheaper.
#: Read it by the names below (mypy takes a Final int as its literal, so each
#: position keeps its field's type); the compiled kernels copy them into C
#: numbers at import.
DispatchEntry = tuple[str, int, int, int, int, int, int, str | None, str | None, int, int]

E_TOPIC: Final = 0
E_QUEUE_ID: Final = 1
E_COMMIT_LOG_OFFSET: Final = 2
E_MSG_SIZE: Final = 3
E_TAGS_CODE: Final = 4
E_STORE_TIMESTAMP: Final = 5
E_CONSUME_QUEUE_OFFSET: Final = 6
E_KEYS: Final = 7
E_UNIQ_KEY: Final = 8
E_SYS_FLAG: Final = 9
E_PREPARED_OFFSET: Final = 10  # DispatchRequest.prepared_transaction_offset

#: Transaction types (``sys_flag & TRANSACTION_TYPE_MASK``) whose records enter no
#: consume queue: half messages and rollback markers.
NOT_QUEUED: Final = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


class EntryDispatcher(Dispatcher, Protocol):
    """A dispatcher that also takes many records at once, as entries.

    ``dispatch_entries(entries)`` must do what ``dispatch`` of each entry's
    request would, in order; it exists so that per-record costs (locks,
    request objects, header writes) are paid once per batch.
    """

    def dispatch_entries(self, entries: Sequence[DispatchEntry]) -> None: ...


def index_fields(
    topic: str, properties: str, store_timestamp: int, delay_levels_ms: tuple[int, ...]
) -> tuple[int, str | None, str | None]:
    """(tags code, keys, unique key) of a record, by RocketMQ's dispatch rules.

    As ``apogee.model.kernels.message_fields``, except that for SCHEDULE_TOPIC_XXXX the tag
    code is the delivery time: store time plus the delay of the DELAY level,
    clamped to the highest level. Runs for every appended message.
    """
    code, keys, uniq = message_fields(properties)
    if topic == SCHEDULE_TOPIC:
        level_text = property_value(properties, PROPERTY_DELAY_TIME_LEVEL)
        if level_text is not None:
            try:
                level = min(int(level_text), len(delay_levels_ms))
            except ValueError:
                level = 0  # RocketMQ would fail the whole record; we keep the tag hash
            if level > 0:
                code = store_timestamp + delay_levels_ms[level - 1]
    return code, keys, uniq


# A v1 record with IPv4 hosts up to its body length: TOTALSIZE MAGICCODE BODYCRC
# QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP BORNHOST(8)
# STORETIMESTAMP STOREHOST(8) RECONSUMETIMES PREPAREDTRANSACTIONOFFSET BODYLEN.
_V1_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
_V1_V4_SIZE = _V1_V4.size  # 88
_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def parse_run(  # noqa: PLR0917 - one call per run of records, on the dispatch hot path
    view: memoryview, pos: int, end: int, base: int, limit: int, delay_levels_ms: tuple[int, ...]
) -> tuple[list[DispatchEntry], int]:
    """Entries of the records at ``view[pos:end]`` (``base`` = physical offset of
    ``view[0]``), up to ``limit`` of them: the usual records only (v1 magic, IPv4
    hosts, sizes that agree, the physical offset they claim). Returns the entries
    and where parsing stopped; the record there, if any, is for ``check_record``
    (a blank end, another layout, damage, or bytes not all there yet).
    """
    out: list[DispatchEntry] = []
    unpack = _V1_V4.unpack_from
    fields = message_fields
    schedule = SCHEDULE_TOPIC
    while len(out) < limit and end - pos >= _V1_V4_SIZE:
        (total, magic, _, qid, _, qoff, phys, sys_flag, _, _, store_ts, _, _, prepared,
         body_len) = unpack(view, pos)  # fmt: skip
        if (
            magic != MESSAGE_MAGIC_CODE_V1
            or sys_flag & _V6_FLAGS
            or phys != base + pos
            or total > end - pos
            or body_len < 0
        ):
            break
        p = pos + _V1_V4_SIZE + body_len
        record_end = pos + total
        if p + 3 > record_end:
            break
        topic_len = view[p]
        q = p + 1 + topic_len
        if topic_len == 0 or topic_len > 127 or q + 2 > record_end:
            break
        props_len = (view[q] << 8) | view[q + 1]
        if q + 2 + props_len != record_end:
            break
        topic = bytes(view[p + 1 : q]).decode()
        props = bytes(view[q + 2 : record_end]).decode() if props_len else ""
        if topic == schedule:
            code, keys, uniq = index_fields(topic, props, store_ts, delay_levels_ms)
        else:
            code, keys, uniq = fields(props)
        out.append((topic, qid, phys, total, code, store_ts, qoff, keys, uniq, sys_flag,
                    prepared))  # fmt: skip
        pos = record_end
    return out, pos


def entry_from_meta(meta: RecordMeta, delay_levels_ms: tuple[int, ...]) -> DispatchEntry:
    """The dispatch entry of a record read back from the log."""
    code, keys, uniq = index_fields(
        meta.topic, meta.properties, meta.store_timestamp, delay_levels_ms
    )
    return (
        meta.topic,
        meta.queue_id,
        meta.physical_offset,
        meta.size,
        code,
        meta.store_timestamp,
        meta.queue_offset,
        keys,
        uniq,
        meta.sys_flag,
        meta.prepared_transaction_offset,
    )
