from __future__ import annotations

import pytest

from apogee.model.message_codec import pack_host
from apogee.model.msgid import create_offset_msg_id, create_offset_msg_ids, parse_offset_msg_id


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
