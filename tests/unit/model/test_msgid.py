from __future__ import annotations

import os

import pytest

from apogee.client.uniq_key import new_uniq_key
from apogee.model.message_codec import pack_host
from apogee.model.msgid import (
    OffsetMsgId,
    UniqKey,
    classify_msg_id,
    create_offset_msg_id,
    create_offset_msg_ids,
    parse_offset_msg_id,
)


def test_ipv4_id_is_32_uppercase_hex_and_round_trips() -> None:
    msg_id = create_offset_msg_id(pack_host(("10.1.2.3", 10911)), 123456)
    # 0A010203 | 00002A9F | 000000000001E240
    assert msg_id == "0A01020300002A9F000000000001E240"
    parsed = parse_offset_msg_id(msg_id)
    assert (parsed.host, parsed.port, parsed.offset) == ("10.1.2.3", 10911, 123456)


def test_ipv6_id_is_56_hex() -> None:
    msg_id = create_offset_msg_id(pack_host(("::1", 10911)), 2**40)
    assert len(msg_id) == 56
    assert msg_id == msg_id.upper()
    parsed = parse_offset_msg_id(msg_id)
    assert (parsed.host, parsed.port, parsed.offset) == ("::1", 10911, 2**40)


def test_batch_ids_are_comma_joined() -> None:
    host = pack_host(("127.0.0.1", 10911))
    joined = create_offset_msg_ids(host, [0, 100])
    assert joined.split(",") == [create_offset_msg_id(host, 0), create_offset_msg_id(host, 100)]


@pytest.mark.parametrize("host", [("10.1.2.3", 10911), ("fe80::1:2", 65535), ("0.0.0.0", 0)])
def test_batch_ids_are_each_record_id_in_order(host: tuple[str, int]) -> None:
    packed = pack_host(host)
    # the nibbles of every position, and the ends of the unsigned range
    offsets = [0, 1, 0x0123456789ABCDEF, 0xFEDCBA9876543210, 2**63 - 1, 2**63, 2**64 - 1, 16]
    joined = create_offset_msg_ids(packed, offsets)
    assert joined.split(",") == [(packed + o.to_bytes(8, "big")).hex().upper() for o in offsets]
    parsed = [parse_offset_msg_id(i).offset for i in joined.split(",")]
    assert parsed == [o - 2**64 if o >= 2**63 else o for o in offsets]  # read back signed
    assert create_offset_msg_ids(packed, []) == ""


@pytest.mark.parametrize("offset", [-1, 2**64])
def test_a_batch_id_past_the_unsigned_range_is_refused(offset: int) -> None:
    with pytest.raises(OverflowError):
        create_offset_msg_ids(pack_host(("127.0.0.1", 10911)), [0, offset])


@pytest.mark.parametrize("bad", ["", "ABC", "Z" * 32, "0" * 33])
def test_bad_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_offset_msg_id(bad)


def test_a_unique_key_is_told_from_an_offset_id_by_its_port() -> None:
    now = 1_790_000_000_000
    key = classify_msg_id(new_uniq_key(now))
    assert isinstance(key, UniqKey)
    assert key.pid == os.getpid() & 0xFFFF
    assert abs(key.made_around(now + 5000) - now) < 1000
    offset_id = create_offset_msg_id(bytes([10, 0, 0, 1]) + (10911).to_bytes(4, "big"), 42)
    assert classify_msg_id(offset_id) == OffsetMsgId("10.0.0.1", 10911, 42)
