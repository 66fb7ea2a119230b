"""The commit log: every message of every topic, appended in arrival order.

Owns: appending single messages, batches and raw replicated bytes; assigning
physical offsets and per topic-queue logical offsets (the topic-queue table);
the blank end-of-file record; handing each appended record's dispatch facts
to the dispatcher; reading bytes back.

Invariants:
- one writer at a time holds ``put_lock``; store timestamps and offsets are
  assigned under it, so both grow with the offset;
- a record never spans two segments: when a record plus 8 bytes does not fit
  the rest of a segment, a blank record (int32 remaining, int32 0xCBD43194)
  fills it and the record starts the next segment; a batch moves as a whole;
- a segment's ``wrote`` moves only after the record bytes are complete, and
  the hand-off entry is queued after that, so readers and the dispatcher
  never see half a record;
- PREPARED and ROLLBACK transaction records get queue offset 0 and do not
  advance the topic-queue table (they never enter a consume queue).

Two ways to put bytes in a file. ASYNC_FLUSH encodes single records under
16 KiB straight into the segment's mapping: no system call per message.
SYNC_FLUSH encodes into a pending buffer and ``pwrite``s it at the same place
(``write_through``), at each append or, with ``defer_commit``, once per
``commit`` (an event-loop owner commits once per loop turn). Batches and
larger single records take the second way in both modes (written at once
without ``defer_commit``): a ``pwrite`` of whole pages
fills fresh page-cache pages without the kernel zeroing them first, as it
must for a page first touched through a mapping, or populated ahead of the
writer (the prefault thread, which batches therefore do not ask for). On a
2-core machine that zeroing was about a third of the broker's CPU per
batched 1 KiB message.
Both ways land in the same page cache, so readers of the mapping see no
difference once the bytes are written, but pages dirtied through a mapping
cost each sync a write-protect round trip and a fault on the next write, and
a sync of pages dirtied by ``pwrite`` does neither: on this kind of machine
a 64-writer group commit of 1 KiB messages syncs in about 0.3 ms the second
way and 0.6 to 1.1 ms the first.

Write-through invariants: pending bytes are always the last bytes of the log
and lie in one segment (a roll, a blank record or raw bytes commit them
first); ``read`` and the dispatcher stop at ``readable_end``; the sync loop
is asked (``on_committed``) only for bytes already in the file.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from zlib_ng.zlib_ng import crc32

from apogee._util.clock import Clock
from apogee.errors import DiskFullError, StoreError, StoreWriteError
from apogee.model.kernels import message_fields
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    BatchItem,
    StoreBatch,
    StoreMessage,
    property_value,
)
from apogee.model.message_codec import (
    CRC_MASK,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    encode_record_into,
    pack_host,
    store_timestamp_at,
    write_blank,
)
from apogee.model.topic import SCHEDULE_TOPIC
from apogee.store import kernels
from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.dispatch import DispatchEntry, index_fields
from apogee.store.results import PutResult, PutStatus
from apogee.store.segment import Segment
from apogee.store.segment import can_populate as _can_populate
from apogee.store.segment_queue import OS_PAGE_SIZE, SegmentQueue

_HOST_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_packed = pack_host  # module-level names are quicker to reach on the hot path
_crc32 = crc32
_encode = encode_record_into  # apogee.model.kernels, compiled where it could be built
_message_fields = message_fields
_NOT_INDEXED: Final = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
_PAGE_MASK: Final = ~(OS_PAGE_SIZE - 1)
_PUT_OK = PutStatus.PUT_OK  # an Enum class attribute costs a metaclass look-up
_SIZE = struct.Struct(">i")  # TOTALSIZE
_EXTRA_RECORD_BYTES: Final = 64 * 1024  # header + topic + properties allowance
# Write-through bytes gathered before one pwrite; a bigger record gets a
# bigger buffer. A loop turn of a busy broker appends well under this.
_PENDING_BYTES: Final = 256 * 1024
#: Single records from this size on take the pwrite way under ASYNC_FLUSH too. Each
#: page a record fills through the mapping costs a fault or a prefault, and a TLB
#: shootdown when a flush cleans it, where one pwrite costs one system call.
_MAPPED_BELOW: Final = 4 * OS_PAGE_SIZE

# Whether a batch can be written: (_BATCH_OK, its bytes), or a refusal (kind, size).
_BATCH_TOO_BIG, _PROPERTIES_TOO_LONG, _ITEM_TOO_BIG, _BATCH_OK = 0, 1, 2, 3


# The kernels (apogee.store.kernels), as module-level names: quicker to reach
_prepare_batch: Callable[[list[BatchItem], str, int, int, int], tuple[int, int]] = (
    kernels.prepare_batch
)
_encode_batch: Callable[..., tuple[list[int], list[DispatchEntry]]] = kernels.encode_batch
_derived_record: Callable[[object, bytes, bytes], kernels.Derived | None] = kernels.derived_record
_encode_derived: Callable[..., None] = kernels.encode_derived
_pwrite: Callable[[int, object, int, int], None] = kernels.pwrite_all


def _illegal(reason: str) -> PutResult:
    return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)


# What the record encoders raise for a number that does not fit its field
# (struct.error interpreted, OverflowError compiled: see apogee.model.kernels).
_ENCODE_ERRORS = (struct.error, OverflowError, ValueError, TypeError)
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _out_of_range(fields: list[tuple[str, int, tuple[int, int]]]) -> str | None:
    for name, value, (low, high) in fields:
        if not low <= value <= high:
            bits = 32 if high == _INT32[1] else 64
            return f"{name} {value} does not fit a signed {bits}-bit field"
    return None


def _unencodable(msg: StoreMessage) -> str | None:
    """Which field of ``msg`` cannot be stored (the slow path after an encode failed)."""
    return _out_of_range([
        ("queue_id", msg.queue_id, _INT32), ("flag", msg.flag, _INT32),
        ("sys_flag", msg.sys_flag, _INT32), ("born_timestamp", msg.born_timestamp, _INT64),
        ("reconsume_times", msg.reconsume_times, _INT32),
        ("prepared_transaction_offset", msg.prepared_transaction_offset, _INT64),
    ])  # fmt: skip


def _unencodable_batch(batch: StoreBatch) -> str | None:
    """Which field of ``batch`` cannot be stored (the slow path after an encode failed)."""
    problem = _out_of_range([
        ("queue_id", batch.queue_id, _INT32), ("sys_flag", batch.sys_flag, _INT32),
        ("born_timestamp", batch.born_timestamp, _INT64),
        ("reconsume_times", batch.reconsume_times, _INT32),
    ])  # fmt: skip
    if problem is None:
        for i, item in enumerate(batch.items):
            problem = _out_of_range([(f"flag of item {i}", item[0], _INT32)])
            if problem is not None:
                break
    return problem


class CommitLog:
    """Segments of ``<root>/commitlog`` plus the append and read logic."""

    def __init__(self, config: StoreConfig, clock: Clock, *, readonly: bool = False) -> None:
        self.config = config
        self.clock = clock
        self.queue = SegmentQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log_bytes, readonly=readonly
        )
        self.put_lock = threading.Lock()
        #: (topic, queue id) -> next logical offset
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        #: records appended here and not yet taken by the dispatcher
        self.handoff: deque[DispatchEntry] = deque()
        #: store time of the newest appended record (for the checkpoint)
        self.last_store_timestamp = 0
        self.appended_msgs = 0
        self._lock_begin_ms = 0
        self._topic_fields: dict[str, bytes] = {}
        self._max_body = config.max_message_size_bytes
        self._max_record = min(
            config.max_message_size_bytes + _EXTRA_RECORD_BYTES,
            config.mapped_file_size_commit_log_bytes - END_FILE_MIN_BLANK_LENGTH,
        )
        self._delays = config.delay_levels_ms
        self._busy_ms = config.os_page_cache_busy_timeout_ms
        self._now = clock.now_ms
        #: asked (from the writer) when the writer nears the end of the
        #: prefaulted pages; the store points it at its allocator thread
        self.on_prefault_due: Callable[[], None] | None = None
        #: SYNC_FLUSH writes records with pwrite instead of through the mapping
        #: (see the module docstring); readers still read the mapping
        self.write_through = config.flush_disk_type is FlushDiskType.SYNC_FLUSH and not readonly
        #: write-through records not yet in the file: the last ``pending_len``
        #: bytes of the log, all in ``_pending_seg`` from ``_pending_pos`` on
        self._pending = bytearray(0 if readonly else _PENDING_BYTES)  # batches use it too
        self.pending_len = 0
        self._pending_seg: Segment | None = None
        self._pending_pos = 0
        #: leave pending bytes for ``commit`` (an owner calls it every loop
        #: turn) instead of writing them at each append
        self.defer_commit = False
        #: told the end offset of the bytes each commit put in the file
        self.on_committed: Callable[[int], None] | None = None
        #: told why, when a put finds no room on disk for the next file
        self.on_disk_full: Callable[[str], None] | None = None
        #: told why, when the file system refuses pending bytes (``_commit_locked``)
        self.on_write_failed: Callable[[str], None] | None = None
        #: why the file system refused pending bytes ("": it did not); they then
        #: stay pending, never written nor read, and no write is tried again
        self.write_refused = ""
        #: called (with the put lock held) when a deferred append finds no
        #: pending bytes: the owner schedules its next ``commit``
        self.on_pending: Callable[[], None] | None = None
        self.prefault_window = 0 if self.write_through else config.prefault_ahead_bytes
        self._low_water = self.prefault_window // 2
        #: whether pages are populated ahead of the writer (``prefault_wanted``
        #: decides it each allocation round): worth it while most bytes are
        #: small single records, which go through the mapping where its pages
        #: are populated. Bytes written by pwrite need no mapped page, and a
        #: populated one costs its zeroing and a TLB shootdown at each flush.
        self.mapped_appends = True
        self._small_bytes = 0  # single records under _MAPPED_BELOW, this round
        self._large_bytes = 0  # batches and larger single records, this round

    # -- offsets -------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    def lock_held_ms(self) -> int:
        """How long the current writer has held the put lock (0 when free)."""
        begin = self._lock_begin_ms
        return self.clock.now_ms() - begin if begin else 0

    def is_page_cache_busy(self) -> bool:
        """A writer has been stuck in the lock too long (RocketMQ isOSPageCacheBusy)."""
        return self._lock_begin_ms != 0 and self.lock_held_ms() > self._busy_ms

    @contextmanager
    def hold_lock(self) -> Iterator[None]:
        """Hold the put lock as a writer does (raw appends, truncation)."""
        with self.put_lock:
            self._lock_begin_ms = self.clock.now_ms()
            try:
                yield
            finally:
                self._lock_begin_ms = 0

    def _topic_field(self, topic: str) -> bytes:
        """The TOPIC field of ``topic``, cached; b"" when the name cannot be stored."""
        field = self._topic_fields.get(topic)
        if field is None:
            data = topic.encode()
            if len(data) > MAX_TOPIC_LENGTH_V1 or not data:
                return b""
            field = self._topic_fields[topic] = bytes((len(data),)) + data
        return field

    @property
    def _last(self) -> Segment | None:
        segs = self.queue.segments
        return segs[-1] if segs else None

    # -- appending -----------------------------------------------------------

    # One long function on purpose: it runs once per message, and every call
    # or attribute hop shows in the throughput (see apogee/bench/store.py).
    def append(self, msg: StoreMessage) -> PutResult:  # noqa: PLR0915
        """Append one message; see the module invariants."""
        body = msg.body
        topic = msg.topic
        text = msg.properties
        tfield = self._topic_fields.get(topic) or self._topic_field(topic)
        props = text.encode()
        born = _packed(msg.born_host)
        store = _packed(msg.store_host)
        blen = len(body)
        tlen = len(tfield)
        plen = len(props)
        size = 74 + blen + tlen + plen + len(born) + len(store)
        if (
            size > self._max_record
            or blen > self._max_body
            or plen > MAX_PROPERTIES_LENGTH
            or tlen < 2
        ):
            return self._refuse(msg, size, plen)
        sys_flag = msg.sys_flag & ~_HOST_FLAGS
        if len(born) != 8 or len(store) != 8:
            if len(born) == 20:
                sys_flag |= BORNHOST_V6_FLAG
            if len(store) == 20:
                sys_flag |= STOREHOSTADDRESS_V6_FLAG
        crc = _crc32(body) & CRC_MASK
        code, keys, uniq = _message_fields(text)
        indexed = (sys_flag & TRANSACTION_TYPE_MASK) not in _NOT_INDEXED
        qid = msg.queue_id
        prepared = msg.prepared_transaction_offset
        if self._lock_begin_ms and self.is_page_cache_busy():
            return PutResult(PutStatus.OS_PAGECACHE_BUSY, reason="[PC_SYNCHRONIZED] put lock busy")
        with self.put_lock:
            self._lock_begin_ms = now = self._now()
            try:
                segs = self.queue.segments
                seg = segs[-1] if segs else None
                pos = seg.wrote if seg is not None else -1
                if seg is None or size + END_FILE_MIN_BLANK_LENGTH > seg.size - pos:
                    try:
                        seg, pos = self._room_for(size)
                    except StoreError as exc:
                        return self._roll_failed(exc)
                phys = seg.start + pos
                key = (topic, qid)
                qoff = self.topic_queue_table.get(key, 0) if indexed else 0
                # fmt: off
                # _through_mapping, inlined on the hot path
                if size < _MAPPED_BELOW:
                    self._small_bytes += size
                    mapped = not self.write_through and (
                        self.mapped_appends or pos + size <= seg.prefaulted or not _can_populate()
                    )
                else:
                    self._large_bytes += size
                    mapped = False
                try:
                    if mapped:
                        _encode(seg.view, pos, qid, msg.flag, qoff, phys, sys_flag,
                                msg.born_timestamp, born, now, store, msg.reconsume_times,
                                prepared, body, tfield, props, crc)
                    else:
                        at = self._pending_at(seg, pos, size)
                        _encode(self._pending, at, qid, msg.flag, qoff, phys, sys_flag,
                                msg.born_timestamp, born, now, store, msg.reconsume_times,
                                prepared, body, tfield, props, crc)
                        self.pending_len = at + size
                except _ENCODE_ERRORS as exc:  # nothing was counted: the bytes are dropped
                    return _illegal(_unencodable(msg) or f"cannot encode the message: {exc}")
                # fmt: on
                seg.wrote = pos + size
                if not mapped:  # _wrote_single, inlined on the hot path
                    seg.prefaulted = max(seg.prefaulted, (pos + size) & _PAGE_MASK)
                elif pos + size > seg.prefaulted - self._low_water and self.on_prefault_due:
                    self.on_prefault_due()
                if indexed:
                    self.topic_queue_table[key] = qoff + 1
                self.last_store_timestamp = now
                self.appended_msgs += 1
                if topic == SCHEDULE_TOPIC:
                    code = index_fields(topic, text, now, self._delays)[0]
                self.handoff.append(
                    (topic, qid, phys, size, code, now, qoff, keys, uniq, sys_flag, prepared)
                )
                if self.pending_len and not self.defer_commit:
                    self._commit_locked()
            finally:
                # Whatever happened, the writer has left: a stamp left behind
                # would make every later put look stuck (OS_PAGECACHE_BUSY).
                self._lock_begin_ms = 0
        return PutResult(_PUT_OK, phys, size, qoff, 1, now, store)

    def append_derived(  # noqa: PLR0917
        self,
        source: memoryview,
        topic: str,
        queue_id: int,
        transaction_type: int,
        prepared: int,
        properties: bytes,
    ) -> PutResult:
        """Append a copy of the record in ``source`` under a new topic and queue.

        ``source`` holds one whole v1 record (a view of this log, say). The
        copy keeps its body, flag, born time, hosts and reconsume times, gets
        ``topic``, ``queue_id``, ``properties`` (UTF-8), the PREPARED
        TRANSACTION OFFSET ``prepared`` and its sysFlag with the transaction
        bits set to ``transaction_type``: byte for byte what ``append`` writes
        for a StoreMessage decoded from ``source`` and so changed, without the
        decode. The lock section is ``append``'s, with another encoder.
        """
        tfield = self._topic_fields.get(topic) or self._topic_field(topic)
        derived = _derived_record(source, tfield, properties)
        if derived is None:
            return _illegal("the source is not a whole v1 record")
        size, blen, crc, src_flag, code, keys, uniq, host = derived
        plen = len(properties)
        if (
            size > self._max_record
            or blen > self._max_body
            or plen > MAX_PROPERTIES_LENGTH
            or len(tfield) < 2
        ):
            return self._refuse_derived(topic, size, blen, plen)
        sys_flag = (src_flag & ~TRANSACTION_TYPE_MASK) | transaction_type
        indexed = (sys_flag & TRANSACTION_TYPE_MASK) not in _NOT_INDEXED
        if self._lock_begin_ms and self.is_page_cache_busy():
            return PutResult(PutStatus.OS_PAGECACHE_BUSY, reason="[PC_SYNCHRONIZED] put lock busy")
        with self.put_lock:
            self._lock_begin_ms = now = self._now()
            try:
                segs = self.queue.segments
                seg = segs[-1] if segs else None
                pos = seg.wrote if seg is not None else -1
                if seg is None or size + END_FILE_MIN_BLANK_LENGTH > seg.size - pos:
                    try:
                        seg, pos = self._room_for(size)
                    except StoreError as exc:
                        return self._roll_failed(exc)
                phys = seg.start + pos
                key = (topic, queue_id)
                qoff = self.topic_queue_table.get(key, 0) if indexed else 0
                # fmt: off
                mapped = self._through_mapping(seg, pos, size)
                try:
                    if mapped:
                        _encode_derived(seg.view, pos, source, queue_id, qoff, phys, sys_flag,
                                        now, prepared, tfield, properties, crc, size)
                    else:
                        at = self._pending_at(seg, pos, size)
                        _encode_derived(self._pending, at, source, queue_id, qoff, phys,
                                        sys_flag, now, prepared, tfield, properties, crc, size)
                        self.pending_len = at + size
                except _ENCODE_ERRORS as exc:  # nothing was counted: the bytes are dropped
                    return _illegal(f"cannot encode the record: {exc}")
                # fmt: on
                seg.wrote = pos + size
                self._wrote_single(seg, pos + size, mapped)
                if indexed:
                    self.topic_queue_table[key] = qoff + 1
                self.last_store_timestamp = now
                self.appended_msgs += 1
                if topic == SCHEDULE_TOPIC:
                    code = index_fields(topic, properties.decode(), now, self._delays)[0]
                self.handoff.append(
                    (topic, queue_id, phys, size, code, now, qoff, keys, uniq, sys_flag, prepared)
                )
                if self.pending_len and not self.defer_commit:
                    self._commit_locked()
            finally:
                self._lock_begin_ms = 0
        return PutResult(_PUT_OK, phys, size, qoff, 1, now, host)

    def _refuse_derived(self, topic: str, size: int, body_len: int, props_len: int) -> PutResult:
        """``_refuse`` for ``append_derived``: the same refusals, in the same order."""
        if body_len > self._max_body:
            return _illegal(f"body is {body_len} bytes, the limit is {self._max_body}")
        if not self._topic_field(topic):
            return _illegal(f"topic must be 1..{MAX_TOPIC_LENGTH_V1} bytes")
        if props_len > MAX_PROPERTIES_LENGTH:
            return PutResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                reason=f"properties are {props_len} bytes, the limit is {MAX_PROPERTIES_LENGTH}",
            )
        return _illegal(f"record of {size} bytes exceeds {self._max_record}")

    def _roll_failed(self, exc: StoreError) -> PutResult:
        """The result of a put that found no file to go to."""
        if isinstance(exc, DiskFullError):
            if self.on_disk_full is not None:
                self.on_disk_full(str(exc))
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=f"the disk is full: {exc}")
        return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, reason=str(exc))

    def _refuse(self, msg: StoreMessage, size: int, props_len: int) -> PutResult:
        """Why a message that failed the quick size checks cannot be stored."""
        if len(msg.body) > self._max_body:
            return _illegal(f"body is {len(msg.body)} bytes, the limit is {self._max_body}")
        if not self._topic_field(msg.topic):
            return _illegal(f"topic must be 1..{MAX_TOPIC_LENGTH_V1} bytes")
        if props_len > MAX_PROPERTIES_LENGTH:
            return PutResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                reason=f"properties are {props_len} bytes, the limit is {MAX_PROPERTIES_LENGTH}",
            )
        return _illegal(f"record of {size} bytes exceeds {self._max_record}")

    def _room_for(self, size: int) -> tuple[Segment, int]:
        """Segment and position for ``size`` bytes, writing a blank and rolling if needed."""
        segs = self.queue.segments
        seg = segs[-1] if segs else self.queue.last_segment()
        pos = seg.wrote
        if size + END_FILE_MIN_BLANK_LENGTH > seg.size - pos:
            if pos < seg.size:
                if self.write_through:
                    self._commit_locked()  # pending bytes stay in their own segment
                    blank = bytearray(END_FILE_MIN_BLANK_LENGTH)
                    write_blank(blank, 0, seg.size - pos)
                    _pwrite(seg.fd, blank, END_FILE_MIN_BLANK_LENGTH, pos)
                else:
                    write_blank(seg.view, pos, seg.size - pos)
                seg.wrote = seg.size
            seg = self.queue.roll()
            pos = 0
        return seg, pos

    def append_batch(self, batch: StoreBatch) -> PutResult:
        """Append a batch to one topic queue: consecutive offsets, one file, one lock."""
        tfield = self._topic_field(batch.topic)
        if not tfield:
            return _illegal(f"topic must be 1..{MAX_TOPIC_LENGTH_V1} bytes")
        if (batch.sys_flag & TRANSACTION_TYPE_MASK) in _NOT_INDEXED:
            # committed batches (a batch half's commit) are taken; never halves or rollbacks
            return _illegal("a batch cannot carry transaction messages")
        delay = property_value(batch.properties, PROPERTY_DELAY_TIME_LEVEL) or "0"
        if delay.strip() not in ("", "0"):
            return _illegal("a batch cannot be delayed")
        if not batch.items:
            return _illegal("empty batch")
        born = pack_host(batch.born_host)
        store = pack_host(batch.store_host)
        sys_flag = batch.sys_flag & ~_HOST_FLAGS
        if len(born) == 20:
            sys_flag |= BORNHOST_V6_FLAG
        if len(store) == 20:
            sys_flag |= STOREHOSTADDRESS_V6_FLAG
        fixed = 74 + len(tfield) + len(born) + len(store)
        kind, total = _prepare_batch(
            batch.items, batch.properties, self._max_body, fixed, self._max_record
        )
        if kind != _BATCH_OK:
            return self._refuse_batch(kind, total)
        if total + END_FILE_MIN_BLANK_LENGTH > self.queue.segment_size:
            return _illegal(f"batch of {total} bytes cannot fit one commit-log file")
        qid = batch.queue_id
        key = (batch.topic, qid)
        with self.put_lock:
            now = self.clock.now_ms()
            self._lock_begin_ms = now
            try:
                try:
                    seg, pos = self._room_for(total)
                except StoreError as exc:
                    return self._roll_failed(exc)
                first = self.topic_queue_table.get(key, 0)
                # always through the pending buffer and pwrite (see the module docstring)
                at = self._pending_at(seg, pos, total)
                buf, base = self._pending, seg.start + pos - at
                try:
                    offsets, entries = _encode_batch(
                        buf, at, base, qid, first, sys_flag, batch.born_timestamp, born, now,
                        store, batch.reconsume_times, tfield, batch.items, batch.properties,
                        batch.topic,
                    )  # fmt: skip
                except _ENCODE_ERRORS as exc:  # nothing was counted: the bytes are dropped
                    return _illegal(_unencodable_batch(batch) or f"cannot encode the batch: {exc}")
                self.pending_len = at + total
                if not self.defer_commit:
                    self._commit_locked()
                seg.wrote = pos + total
                self.handoff.extend(entries)
                self.topic_queue_table[key] = first + len(offsets)
                self.last_store_timestamp = now
                self.appended_msgs += len(offsets)
                # No prefault for batches: pages pwrite fills need no zeroing, which a
                # prefault would pay for ahead of them. Later single appends populate
                # from here on.
                seg.prefaulted = max(seg.prefaulted, (pos + total) & _PAGE_MASK)
                self._large_bytes += total
            finally:
                self._lock_begin_ms = 0
        return PutResult(
            _PUT_OK, offsets[0], total, first, len(offsets), now, store, _offsets=offsets
        )

    def _through_mapping(self, seg: Segment, pos: int, size: int) -> bool:
        """Whether a single record of ``size`` bytes at ``seg[pos:]`` goes through the
        mapping (else by pwrite), counted for ``prefault_wanted``.

        Only small records: while pages are populated ahead of them
        (``mapped_appends``), or where they are. Otherwise a fault on the
        mapping would read around it, milliseconds on the event loop, for
        the odd small record among batches (a transaction's op record).
        """
        if size >= _MAPPED_BELOW:
            self._large_bytes += size
            return False
        self._small_bytes += size
        if self.write_through:
            return False
        return self.mapped_appends or pos + size <= seg.prefaulted or not _can_populate()

    def _wrote_single(self, seg: Segment, end: int, mapped: bool) -> None:
        """After a single record up to ``end`` of ``seg``: keep the prefault ahead of
        appends through the mapping; a record written by ``pwrite`` wants none."""
        if not mapped:
            seg.prefaulted = max(seg.prefaulted, end & _PAGE_MASK)
        elif end > seg.prefaulted - self._low_water and self.on_prefault_due:
            self.on_prefault_due()

    def prefault_wanted(self) -> bool:
        """Whether to populate pages ahead now (the allocation thread asks each round).

        Yes while small single records brought more bytes than batches and large
        records since the last round; a round without appends keeps the answer.
        """
        small, large = self._small_bytes, self._large_bytes
        self._small_bytes = self._large_bytes = 0
        if small or large:
            self.mapped_appends = small > large
        return self.mapped_appends and self.prefault_window > 0

    def _refuse_batch(self, kind: int, size: int) -> PutResult:
        """The result for a refusal of ``apogee.store.kernels.prepare_batch``."""
        if kind == _BATCH_TOO_BIG:
            return _illegal(f"batch is {size} bytes, the limit is {self._max_body}")
        if kind == _PROPERTIES_TOO_LONG:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, reason="batch item")
        return _illegal(f"batch item of {size} bytes exceeds {self._max_record}")

    def append_data(self, offset: int, data: bytes | memoryview) -> bool:
        """Append raw log bytes at ``offset`` (a slave copying its master).

        Returns False unless ``offset`` is exactly the current end of the log.
        The dispatcher finds these records by parsing the log.
        """
        view = memoryview(data)
        with self.hold_lock():
            self._commit_locked()
            if self.queue.segments:
                if offset != self.max_offset:
                    return False
            elif offset % self.queue.segment_size:
                return False  # an empty log starts at a segment boundary
            done = 0
            while done < len(view):
                segs = self.queue.segments
                seg = segs[-1] if segs else self.queue.last_segment(offset)
                if seg.is_full():
                    seg = self.queue.roll()
                n = min(seg.remaining(), len(view) - done)
                if self.write_through:
                    _pwrite(seg.fd, view[done : done + n], n, seg.wrote)
                else:
                    seg.view[seg.wrote : seg.wrote + n] = view[done : done + n]
                seg.wrote += n
                done += n
                if seg.wrote > seg.prefaulted - self._low_water and self.on_prefault_due:
                    self.on_prefault_due()
            if self.write_through and self.on_committed is not None:
                self.on_committed(self.max_offset)
        return True

    def truncate(self, offset: int) -> int:
        """Drop every byte from ``offset`` on (a slave whose master lost them).

        Returns how many bytes were dropped. ``offset`` must be a record
        boundary; the topic-queue table is the caller's to rebuild.
        """
        with self.hold_lock():
            self._commit_locked()
            before = self.max_offset
            if offset >= before:
                return 0
            self.queue.truncate(offset)
            self.handoff.clear()
        return before - offset

    # -- write-through -------------------------------------------------------

    def _pending_at(self, seg: Segment, pos: int, size: int) -> int:
        """Where in the pending buffer ``size`` bytes for ``seg[pos:]`` go (lock held).

        Starting a new run of deferred pending bytes tells ``on_pending``.
        """
        n = self.pending_len
        if n and (self._pending_seg is not seg or n + size > len(self._pending)):
            self._commit_locked()
            n = 0
        if not n:
            self._pending_seg, self._pending_pos = seg, pos
            if size > len(self._pending):
                self._pending = bytearray(size)
            if self.defer_commit and self.on_pending is not None:
                self.on_pending()
        return n

    def commit(self) -> int:
        """Write the pending write-through bytes to their file; return the log's end.

        Readers and the sync loop see appended bytes only once they are in the
        file; with ``defer_commit`` that is at the next ``commit`` (the store's
        ``dispatch_step`` makes one first), else at each append.
        """
        if self.pending_len:
            with self.put_lock:
                self._commit_locked()
        return self.max_offset

    def _commit_locked(self) -> None:
        n = self.pending_len
        seg = self._pending_seg
        if n and seg is not None and not self.write_refused:
            try:
                _pwrite(seg.fd, self._pending, n, self._pending_pos)
            except OSError as exc:
                # The bytes stay pending: readers and the dispatcher stop before them
                # (``readable_end``), and the store takes no write after this one.
                self.write_refused = reason = f"commit-log write failed: {exc.strerror or exc}"
                if self.on_write_failed is not None:
                    self.on_write_failed(reason)
                raise StoreWriteError(reason) from exc
            self.pending_len = 0
            self._pending_seg = None
            if self.on_committed is not None:
                self.on_committed(seg.start + self._pending_pos + n)

    @property
    def readable_end(self) -> int:
        """End of the bytes that are in the files (the log's end but for pending bytes)."""
        return self.queue.max_offset - self.pending_len

    def readable_span(self) -> tuple[int, int]:
        """``(min_offset, readable_end)`` in one call: the dispatcher asks for both per
        step, and four property calls cost more than the arithmetic."""
        segs = self.queue.segments
        if not segs:
            return 0, -self.pending_len
        last = segs[-1]
        return segs[0].start, last.start + last.wrote - self.pending_len

    # -- reading -------------------------------------------------------------

    def read(self, offset: int, size: int) -> memoryview | None:
        """A view of ``size`` written bytes at ``offset``; None if not all there."""
        seg = self.queue.locate(offset)
        if seg is None:
            return None
        pos = offset - seg.start
        limit = seg.wrote - self.pending_len if seg is self._pending_seg else seg.wrote
        if size < 0 or pos + size > limit:
            return None
        try:
            return seg.view[pos : pos + size]
        except ValueError:  # the segment was unmapped under us (retention)
            return None

    def read_record(self, offset: int) -> memoryview | None:
        """The whole record starting at ``offset`` (its size read from the record).

        ``read`` of the size field and then of the record, in one look-up:
        END_TRANSACTION reads a record this way per message.
        """
        seg = self.queue.locate(offset)
        if seg is None:
            return None
        pos = offset - seg.start
        limit = seg.wrote - self.pending_len if seg is self._pending_seg else seg.wrote
        if pos + 4 > limit:
            return None
        try:
            view = seg.view
            size: int = _SIZE.unpack_from(view, pos)[0]
            if size <= 0 or pos + size > limit:
                return None
            return view[pos : pos + size]
        except ValueError:  # the segment was unmapped under us (retention)
            return None

    def store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``; -1 if it cannot be read."""
        view = self.read(offset, size)
        if view is None or size < 91:
            return -1
        try:
            return store_timestamp_at(view, 0)
        finally:
            view.release()

    def load(self) -> None:
        self.queue.load()

    def close(self) -> None:
        self.commit()
        self.queue.close()
