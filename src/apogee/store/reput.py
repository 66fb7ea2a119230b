"""The reput cursor: feeds consume queues and extra dispatchers from the log.

Owns: the dispatched-offset cursor and one step function that moves it.
Records appended by this process arrive as hand-off entries built at append
time; records that are only in the log (recovery, bytes copied from a master)
are parsed. Both give the same entry (``dispatch.entry_from_meta`` and the
append path share ``index_fields``). No threads: the caller drives ``step``.

Only NOT and COMMIT transaction records go to consume queues; every record
goes to the extra dispatchers (the index skips what it does not want). A
dispatcher with ``dispatch_entries`` gets each step's records in one call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from apogee.model.message import TRANSACTION_TYPE_MASK
from apogee.model.message_codec import RecordKind, check_record
from apogee.store.commitlog import CommitLog
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.dispatch import (
    E_COMMIT_LOG_OFFSET,
    E_CONSUME_QUEUE_OFFSET,
    E_MSG_SIZE,
    E_QUEUE_ID,
    E_STORE_TIMESTAMP,
    E_SYS_FLAG,
    E_TAGS_CODE,
    E_TOPIC,
    NOT_QUEUED,
    DispatchEntry,
    Dispatcher,
    DispatchRequest,
    entry_from_meta,
    parse_run,
)
from apogee.store.interface import ArrivalListener
from apogee.store.kernels import take_handoff as _take_handoff

#: Takes the records of one step, in log order.
_Sink = Callable[[Sequence[DispatchEntry]], None]


def _sink(dispatcher: Dispatcher) -> _Sink:
    """How a dispatcher takes a step's records: its batch method if it has one."""
    batch: _Sink | None = getattr(dispatcher, "dispatch_entries", None)
    if batch is not None:
        return batch

    def one_by_one(entries: Sequence[DispatchEntry]) -> None:
        for entry in entries:
            dispatcher.dispatch(DispatchRequest(*entry))

    return one_by_one


class Reput:
    """Dispatches every record of the commit log once, in order."""

    def __init__(
        self,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        dispatchers: Sequence[Dispatcher] = (),
        arrival: ArrivalListener | None = None,
    ) -> None:
        self.commit_log = commit_log
        self.queues = queues
        self._queues = queues.queues  # the dict itself, for the per-record lookup
        self.dispatchers = list(dispatchers)
        self._sinks = [_sink(d) for d in self.dispatchers]
        self.arrival = arrival
        self.reput_from = 0
        #: commit-log offset of the last record dispatched (a known record start)
        self.last_record_start = -1
        self._delays = commit_log.config.delay_levels_ms
        #: store time of the newest dispatched record (the checkpoint's logics time)
        self.last_store_timestamp = 0
        self.dispatched_count = 0

    def behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset - self.reput_from)

    def step(self, max_records: int = 1024) -> int:
        """Dispatch up to ``max_records`` records; return how many were dispatched.

        Records are taken in runs: the hand-off entries that continue the
        cursor, or one record parsed from the log. Each run's consume-queue
        units are written (a run of one queue with one call) before the
        cursor moves past it; the extra dispatchers (the index) get the
        step's records at the end, in order.
        """
        taken: list[DispatchEntry] = []
        try:
            return self._take(taken, max_records)
        finally:
            # Also after a fault (no room for a consume-queue file): whatever
            # reached its consume queue reaches the index too, in order.
            if taken and taken[-1][E_COMMIT_LOG_OFFSET] >= self.reput_from:
                taken = [entry for entry in taken if entry[E_COMMIT_LOG_OFFSET] < self.reput_from]
            if taken:
                self.last_record_start = taken[-1][E_COMMIT_LOG_OFFSET]
                self.last_store_timestamp = taken[-1][E_STORE_TIMESTAMP]
                self.dispatched_count += len(taken)
                for sink in self._sinks:
                    sink(taken)

    def _take(self, taken: list[DispatchEntry], max_records: int) -> int:
        """The consume-queue part of :meth:`step`; ``taken`` collects the records."""
        handoff = self.commit_log.handoff
        # limit: pending write-through bytes wait
        oldest, limit = self.commit_log.readable_span()
        # A slave's log begins where its master's last file did, or retention
        # removed what was never dispatched: carry on from the oldest byte.
        self.reput_from = max(self.reput_from, oldest)
        cursor = self.reput_from
        done = 0
        while done < max_records:
            # Fast lane: hand-off entries that continue the cursor exactly.
            mark = len(taken)
            moved, cursor = _take_handoff(handoff, taken, cursor, limit, max_records - done)
            if moved:
                done += moved
                self._queue(taken, mark)
                self.reput_from = cursor
            if done >= max_records:
                break
            while handoff and handoff[0][E_COMMIT_LOG_OFFSET] < self.reput_from:
                handoff.popleft()  # already dispatched from the log
            if handoff and handoff[0][E_COMMIT_LOG_OFFSET] == self.reput_from:
                if self.reput_from + handoff[0][E_MSG_SIZE] > limit:
                    break  # not in the file yet
                continue
            if cursor >= limit:
                # Caught up with the files: the usual end of a step after
                # puts, where looking into the log would find nothing.
                break
            parsed = self._parse_records(limit, max_records - done)
            if not parsed:
                break
            mark = len(taken)
            taken += parsed
            self._queue(taken, mark)
            last = parsed[-1]
            self.reput_from = cursor = last[E_COMMIT_LOG_OFFSET] + last[E_MSG_SIZE]
            done += len(parsed)
        return done

    def _parse_records(self, limit: int, count: int) -> list[DispatchEntry]:
        """Up to ``count`` records read from the log at the cursor: a run of the usual
        ones at once (``parse_run``), else the one there (``_parse_next``)."""
        seg = self.commit_log.queue.locate(self.reput_from)
        if seg is not None:
            pos = self.reput_from - seg.start
            handoff = self.commit_log.handoff
            # records appended by this process come from the hand-off
            run_end = min(limit, handoff[0][E_COMMIT_LOG_OFFSET]) if handoff else limit
            end = min(seg.wrote, run_end - seg.start)
            run, _ = parse_run(seg.view, pos, end, seg.start, count, self._delays)
            if run:
                return run
        parsed = self._parse_next(limit)
        return [] if parsed is None else [parsed]

    def _parse_next(self, limit: int) -> DispatchEntry | None:
        """Read the record at the cursor from the log, skipping a blank end record."""
        queue = self.commit_log.queue
        while True:
            seg = queue.locate(self.reput_from)
            if seg is None:
                return None
            pos = self.reput_from - seg.start
            end = min(seg.wrote, limit - seg.start)
            if pos >= end:
                return None
            checked = check_record(seg.view, pos, end, check_crc=False)
            if checked.kind is RecordKind.BLANK:
                self.reput_from = seg.end
                continue
            if checked.meta is None:
                return None  # not a whole record (yet); recovery deals with damage
            return entry_from_meta(checked.meta, self.commit_log.config.delay_levels_ms)

    def _queue(self, entries: list[DispatchEntry], i: int) -> None:
        """Write the consume-queue units of ``entries[i:]``; tell the arrival listener."""
        queues = self._queues
        j = len(entries)
        start = i
        while i < j:
            entry = entries[i]
            if (entry[E_SYS_FLAG] & TRANSACTION_TYPE_MASK) in NOT_QUEUED:
                i += 1
                continue
            cq = queues.get((entry[E_TOPIC], entry[E_QUEUE_ID]))
            if cq is None:
                cq = self.queues.get_or_create(entry[E_TOPIC], entry[E_QUEUE_ID])
            i += cq.put_run(entries, i, j)
        arrival = self.arrival
        if arrival is not None:
            for entry in entries[start:]:
                if (entry[E_SYS_FLAG] & TRANSACTION_TYPE_MASK) not in NOT_QUEUED:
                    arrival(
                        entry[E_TOPIC],
                        entry[E_QUEUE_ID],
                        entry[E_CONSUME_QUEUE_OFFSET],
                        entry[E_TAGS_CODE],
                        entry[E_STORE_TIMESTAMP],
                    )

    def apply(self, entry: DispatchEntry) -> None:
        """Feed one record to the consume queue, the dispatchers and the listener."""
        self._queue([entry], 0)
        for sink in self._sinks:
            sink((entry,))
        self.last_store_timestamp = entry[E_STORE_TIMESTAMP]
