"""Offset message ids: where a message lives, written as uppercase hex.

Owns: creating and parsing the id the broker returns for a send and accepts
for VIEW_MESSAGE_BY_ID.

Layout (RocketMQ ``MessageDecoder.createMessageId``)::

    store IP (4 or 16 bytes) | store port (int32) | commit-log offset (int64)

rendered as uppercase hex: 32 characters for IPv4, 56 for IPv6. The parser
picks the address family from the length.

A producer's unique key (UNIQ_KEY, what a send result calls ``msgId``) is
also 32 hex characters (RocketMQ ``MessageClientIDSetter``)::

    producer IPv4 (4 bytes) | pid (2) | per-process prefix (4) | ms since month start (4)
    | counter (2)

so its bytes 4..8 read as a "port" give pid << 16 | prefix, almost never a
port number: ``classify_msg_id`` tells the two kinds apart by that, as a
port must be 1..65535.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from apogee.model.kernels import offset_msg_ids

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
    """Comma-joined ids, as a batch send response carries them (a compiled kernel)."""
    return offset_msg_ids(store_host, offsets)


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


@dataclass(frozen=True, slots=True)
class UniqKey:
    """What a producer's unique key tells: who made it, and roughly when."""

    text: str
    producer_ip: str
    pid: int
    ms_since_month_start: int

    def made_around(self, now_ms: int) -> int:
        """The key's time, taking it to be from the month of ``now_ms`` (or the one before)."""
        now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        made = start.timestamp() * 1000 + self.ms_since_month_start
        if made > now_ms + 60_000:  # made last month
            previous = (start - dt.timedelta(days=1)).replace(day=1)
            made = previous.timestamp() * 1000 + self.ms_since_month_start
        return int(made)


def parse_uniq_key(text: str) -> UniqKey:
    """Decode a 32-character unique key; ValueError when it is not one."""
    if len(text) != IPV4_MSG_ID_LENGTH:
        raise ValueError(f"a unique key has 32 hex characters, got {len(text)}")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{text!r} is not hexadecimal") from None
    return UniqKey(
        text.upper(),
        str(ipaddress.IPv4Address(raw[:4])),
        int.from_bytes(raw[4:6], "big"),
        int.from_bytes(raw[10:14], "big"),
    )


def classify_msg_id(text: str) -> OffsetMsgId | UniqKey:
    """An offset message id when it names a port, else a producer's unique key.

    Raises:
        ValueError: the text is neither (wrong length, not hexadecimal).
    """
    where = parse_offset_msg_id(text)
    if 0 < where.port <= 65535 or len(text) != IPV4_MSG_ID_LENGTH:
        return where
    return parse_uniq_key(text)
