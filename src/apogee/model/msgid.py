"""Offset message ids: where a message lives, written as uppercase hex.

Owns: creating and parsing the id the broker returns for a send and accepts
for VIEW_MESSAGE_BY_ID. Imports: stdlib only.

Layout (RocketMQ ``MessageDecoder.createMessageId``)::

    store IP (4 or 16 bytes) | store port (int32) | commit-log offset (int64)

rendered as uppercase hex: 32 characters for IPv4, 56 for IPv6. The parser
picks the address family from the length.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPV4_MSG_ID_LENGTH = 32
IPV6_MSG_ID_LENGTH = 56


@dataclass(frozen=True, slots=True)
class OffsetMsgId:
    host: str
    port: int
    offset: int


def create_offset_msg_id(store_host: bytes, offset: int) -> str:
    """Id of the record at ``offset``; ``store_host`` is the 8/20-byte packed host."""
    return (store_host + offset.to_bytes(8, "big", signed=True)).hex().upper()


def create_offset_msg_ids(store_host: bytes, offsets: list[int]) -> str:
    """Comma-joined ids, as a batch send response carries them."""
    return ",".join([(store_host + o.to_bytes(8, "big")).hex().upper() for o in offsets])


def parse_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Split an offset message id into host, port and commit-log offset.

    Raises:
        ValueError: the text is not 32 or 56 hex characters.
    """
    if len(msg_id) not in (IPV4_MSG_ID_LENGTH, IPV6_MSG_ID_LENGTH):
        raise ValueError(f"offset message id must be 32 or 56 hex characters, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"offset message id {msg_id!r} is not hexadecimal") from None
    ip_len = 4 if len(msg_id) == IPV4_MSG_ID_LENGTH else 16
    host = str(ipaddress.ip_address(raw[:ip_len]))
    port = int.from_bytes(raw[ip_len : ip_len + 4], "big", signed=True)
    offset = int.from_bytes(raw[ip_len + 4 :], "big", signed=True)
    return OffsetMsgId(host, port, offset)
