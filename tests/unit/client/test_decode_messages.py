"""Decoding pulled records: compressed bodies inflated, other codecs left as stored."""

from __future__ import annotations

import zlib

import pytest

from apogee.client.broker_api import decode_messages, inflate
from apogee.errors import ProtocolError
from apogee.model.message import COMPRESSED_FLAG, COMPRESSION_LZ4, COMPRESSION_ZLIB
from apogee.model.message_codec import decode_record, encode_record

TEXT = b"a body worth compressing " * 20


def _record(body: bytes, sys_flag: int, offset: int = 0) -> bytes:
    return encode_record(
        topic="T",
        body=body,
        sys_flag=sys_flag,
        physical_offset=offset,
        store_host=("10.0.0.1", 10911),
    )


@pytest.mark.parametrize("flags", [COMPRESSED_FLAG, COMPRESSED_FLAG | COMPRESSION_ZLIB])
def test_zlib_bodies_are_inflated(flags: int) -> None:
    raw = _record(zlib.compress(TEXT, 5), flags | 0x2) + _record(b"plain", 0, offset=500)
    inflated, plain = decode_messages(raw)
    assert inflated.body == TEXT
    assert inflated.sys_flag == 0x2  # only the compression bits are cleared
    assert plain.body == b"plain"
    assert plain.msg_id == "0A00000100002A9F00000000000001F4"


def test_other_codecs_stay_as_stored_and_garbage_is_refused() -> None:
    lz4 = decode_record(_record(b"\x04\x22\x4d\x18", COMPRESSED_FLAG | COMPRESSION_LZ4))
    assert inflate(lz4) is lz4
    broken = decode_record(_record(b"not zlib", COMPRESSED_FLAG))
    with pytest.raises(ProtocolError, match="does not inflate"):
        inflate(broken)
    with pytest.raises(ProtocolError):
        decode_messages(_record(b"x", 0)[:-3])
