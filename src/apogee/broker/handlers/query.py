"""Queue offsets and message look-ups: GET_MAX_OFFSET, GET_MIN_OFFSET,
SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE.

Owns: the answers of RocketMQ's AdminBrokerProcessor offset calls and of
QueryMessageProcessor.

QUERY_MESSAGE bodies are the stored records, newest index hits first as the
store returns them; records whose keys only share the key's hash are left
out. With ext field ``_UNIQUE_KEY_QUERY=true`` the key is a UNIQ_KEY and
maxNum becomes defaultQueryMaxNum (32).
"""

from __future__ import annotations

from apogee.broker.records import record_properties, record_topic
from apogee.codes import ResponseCode
from apogee.model.message import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    property_value,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


class QueueOffsetHandlers:
    """The four per-queue offset and time queries."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def max_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._store.max_offset_in_queue(h.topic, h.queue_id)
        return request.make_response(ext_fields={"offset": str(offset)})

    def min_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._store.min_offset_in_queue(h.topic, h.queue_id)
        return request.make_response(ext_fields={"offset": str(offset)})

    def offset_by_time(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._store.offset_by_time(h.topic, h.queue_id, h.timestamp)
        return request.make_response(ext_fields={"offset": str(offset)})

    def earliest_time(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext(request.ext_fields)
        timestamp = self._store.earliest_message_time(h.topic, h.queue_id)
        return request.make_response(ext_fields={"timestamp": str(timestamp)})


class MessageLookupHandlers:
    """VIEW_MESSAGE_BY_ID and QUERY_MESSAGE."""

    def __init__(self, store: MessageStore, *, default_query_max_num: int = 32) -> None:
        self._store = store
        self._default_max = default_query_max_num

    def view_by_id(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext(request.ext_fields)
        record = self._store.read_message(h.offset) if h.offset >= 0 else None
        if record is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}"
            )
        return request.make_response(body=record)

    def query(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(request.ext_fields)
        by_uniq = request.ext_fields.get(UNIQUE_KEY_QUERY, "").lower() == "true"
        max_num = self._default_max if by_uniq else h.max_num
        found = self._store.query_message(
            h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp
        )
        records = [r for r in found.messages if _has_key(r, h.topic, h.key)]
        ext = {
            "indexLastUpdateTimestamp": str(found.index_last_update_timestamp),
            "indexLastUpdatePhyoffset": str(found.index_last_update_phy_offset),
        }
        if not records:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        return request.make_response(ext_fields=ext, body=records)


def _has_key(record: memoryview, topic: str, key: str) -> bool:
    """The record is of ``topic`` and carries ``key`` as UNIQ_KEY or among KEYS."""
    if record_topic(record) != topic:
        return False
    props = record_properties(record)
    if property_value(props, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
        return True
    keys = property_value(props, PROPERTY_KEYS)
    return keys is not None and key in keys.split(KEY_SEPARATOR)
