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
