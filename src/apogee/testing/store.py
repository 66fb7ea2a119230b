"""Helpers for tests that use a real message store on real files.

Owns: small-file store configs, message builders, a recording dispatcher and
an independent reading of a store directory (what the consume queues ought
to hold, derived from the commit log alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apogee.model.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    StoreMessage,
    properties_to_string,
)
from apogee.model.message_codec import RecordKind, check_record
from apogee.store.config import StoreConfig
from apogee.store.consume_queue import ConsumeQueueTable, is_blank_unit
from apogee.store.dispatch import (
    E_COMMIT_LOG_OFFSET,
    E_CONSUME_QUEUE_OFFSET,
    E_MSG_SIZE,
    E_QUEUE_ID,
    E_SYS_FLAG,
    E_TAGS_CODE,
    E_TOPIC,
    DispatchRequest,
    entry_from_meta,
)
from apogee.store.segment_queue import SegmentQueue

#: (logical offset, commit-log offset, size, tag code) of each unit, by (topic, queue id)
QueueUnits = dict[tuple[str, int], list[tuple[int, int, int, int]]]


def small_config(root: Path, **overrides: Any) -> StoreConfig:
    """A store with tiny files so that rolling and recovery show up quickly."""
    fields: dict[str, Any] = {
        "store_path_root_dir": root,
        "mapped_file_size_commit_log_bytes": 4096,
        "mapped_file_size_consume_queue_bytes": 20 * 10,
        "max_message_size_bytes": 1024,
    }
    fields.update(overrides)
    return StoreConfig(**fields)


def message(
    topic: str = "TopicTest",
    queue_id: int = 0,
    body: bytes = b"hello",
    *,
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    extra: dict[str, str] | None = None,
    **fields: Any,
) -> StoreMessage:
    props: dict[str, str | None] = {
        PROPERTY_TAGS: tags,
        PROPERTY_KEYS: keys,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
        **(extra or {}),
    }
    fields.setdefault("born_host", ("10.0.0.7", 50001))
    fields.setdefault("store_host", ("10.0.0.1", 10911))
    return StoreMessage(topic, queue_id, body, properties_to_string(props), **fields)


@dataclass
class RecordingDispatcher:
    """An extra dispatcher that remembers every request it was given."""

    requests: list[DispatchRequest] = field(default_factory=list)

    def dispatch(self, request: DispatchRequest) -> None:
        self.requests.append(request)


def expected_queues(config: StoreConfig) -> QueueUnits:
    """Consume-queue units derived from the commit log files alone (read-only)."""
    queue = SegmentQueue(config.commit_log_dir, config.mapped_file_size_commit_log_bytes,
                         readonly=True)  # fmt: skip
    queue.load()
    out: QueueUnits = {}
    try:
        for seg in queue.segments:
            pos = 0
            while True:
                checked = check_record(seg.view, pos, seg.size, config.check_crc_on_recover)
                meta = checked.meta
                if checked.kind is RecordKind.BLANK:
                    break
                if meta is None or meta.physical_offset != seg.start + pos:
                    return out  # the end of the valid log
                entry = entry_from_meta(meta, config.delay_levels_ms)
                tx = entry[E_SYS_FLAG] & TRANSACTION_TYPE_MASK
                if tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
                    units = out.setdefault((entry[E_TOPIC], entry[E_QUEUE_ID]), [])
                    units.append(
                        (
                            entry[E_CONSUME_QUEUE_OFFSET],
                            entry[E_COMMIT_LOG_OFFSET],
                            entry[E_MSG_SIZE],
                            entry[E_TAGS_CODE],
                        )
                    )
                pos += checked.size
        return out
    finally:
        queue.close()


def queue_units(table: ConsumeQueueTable) -> QueueUnits:
    """Units currently in a store's consume queues (blank units left out)."""
    out: QueueUnits = {}
    for key, cq in sorted(table.queues.items()):
        units = [
            (q, p, s, c)
            for q, p, s, c in cq.iter_units()
            if q >= cq.min_offset and not is_blank_unit(p, s)
        ]
        if units:
            out[key] = units
    return out
