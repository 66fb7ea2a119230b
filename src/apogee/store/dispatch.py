"""What the commit log tells its derived stores about each record.

Owns: DispatchRequest (one per stored record, built either at append time or
by re-reading the log during recovery and on slaves) and the Dispatcher
protocol implemented by the consume-queue builder and the index service.
Imports: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
