"""The lazy decoder of pull responses agrees with the full record decoder.

Every test runs on the compiled module and on its source run interpreted.
The reference is ``message_codec.decode_record`` followed by the client's
``inflate`` (what ``decode_messages`` gives).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.client.broker_api import inflate
from apogee.errors import ProtocolError
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_LZ4,
    COMPRESSION_ZLIB,
    COMPRESSION_ZSTD,
    STOREHOSTADDRESS_V6_FLAG,
    MessageExt,
    properties_to_string,
)
from apogee.model.message_codec import decode_record, encode_record, iter_records


@pytest.fixture(scope="module", autouse=True)
def _every_kernel() -> str:
    """Records come from message_codec's encoder, whose two kernels are tested elsewhere."""
    return "default"


@pytest.fixture(scope="module")
def rx(cython_build: Callable[[str], ModuleType]) -> Any:
    return cython_build("apogee.model.received")


def to_v2(record: bytes) -> bytes:
    """The same record with the v2 magic and an int16 topic length (RocketMQ 5.x)."""
    total, _ = struct.unpack_from(">ii", record)
    sys_flag = struct.unpack_from(">i", record, 36)[0]
    at = 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8
    at += (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8) + 12
    body_len = struct.unpack_from(">i", record, at)[0]
    topic_at = at + 4 + body_len
    head = struct.pack(">ii", total + 1, -626843477) + record[8:topic_at]
    return head + struct.pack(">h", record[topic_at]) + record[topic_at + 1 :]


def reference(buf: bytes, pos: int) -> MessageExt:
    return inflate(decode_record(buf, pos))


FIELDS = [
    *("topic", "queue_id", "flag", "queue_offset", "commit_log_offset", "sys_flag"),
    *("born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times"),
    *("prepared_transaction_offset", "store_size", "body_crc", "msg_id", "tags", "keys"),
    *("uniq_key", "client_msg_id", "properties", "body"),
]


def assert_same(got: Any, want: MessageExt) -> None:
    # the single-property accessors first: they must work before the full parse
    assert got.get_property("TAGS") == want.properties.get("TAGS")
    for name in FIELDS:
        assert getattr(got, name) == getattr(want, name), name
    assert got.to_message_ext() == want


hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535)),
)
names = st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02"), min_size=1)
properties = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER", "a", "ü"]) | names, names, max_size=5
)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    body = draw(st.binary(max_size=300))
    sys_flag = draw(st.integers(0, 0xFF)) & ~COMPRESSED_FLAG
    codec = draw(st.sampled_from([None, 0, COMPRESSION_ZLIB, COMPRESSION_LZ4, COMPRESSION_ZSTD]))
    if codec is not None:
        sys_flag |= COMPRESSED_FLAG | codec
        if codec in (0, COMPRESSION_ZLIB):
            body = zlib.compress(body)
    topic = draw(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1))
    while len(topic.encode()) > 127:
        topic = topic[:-1]
    record = encode_record(
        topic=topic,
        body=body,
        queue_id=draw(i32),
        flag=draw(i32),
        properties=properties_to_string(draw(properties)),
        queue_offset=draw(i64),
        physical_offset=draw(i64),
        sys_flag=sys_flag,
        born_timestamp=draw(i64),
        born_host=draw(hosts),
        store_timestamp=draw(i64),
        store_host=draw(hosts),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
    )
    return to_v2(record) if draw(st.booleans()) else record


@settings(max_examples=150, deadline=None)
@given(st.lists(records(), min_size=1, max_size=4))
def test_every_field_agrees_with_the_record_decoder(rx: Any, batch: list[bytes]) -> None:
    buf = b"".join(batch)
    got = rx.decode_received(buf)
    assert len(got) == len(batch)
    pos = 0
    for msg, record in zip(got, batch, strict=True):
        assert_same(msg, reference(buf, pos))
        pos += len(record)


def test_v6_hosts_and_their_message_id(rx: Any) -> None:
    raw = encode_record(
        topic="T6",
        body=b"six",
        physical_offset=0x1122,
        born_host=("2001:db8::7", 40001),
        store_host=("fe80::1", 10911),
    )
    (msg,) = rx.decode_received(raw)
    assert msg.born_host == ("2001:db8::7", 40001)
    assert msg.store_host == ("fe80::1", 10911)
    assert msg.sys_flag == BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
    assert msg.msg_id == "FE800000000000000000000000000001" + "00002A9F" + "0000000000001122"
    assert_same(msg, reference(raw, 0))


def test_one_bad_compressed_body_hides_nothing_around_it(rx: Any) -> None:
    good1 = encode_record(topic="T", body=zlib.compress(b"first"), sys_flag=COMPRESSED_FLAG)
    bad = encode_record(
        topic="T", body=b"not zlib at all", sys_flag=COMPRESSED_FLAG, queue_offset=1
    )
    good2 = encode_record(topic="T", body=b"third", queue_offset=2)
    first, broken, third = rx.decode_received(good1 + bad + good2)
    assert first.body == b"first"
    assert first.body_size == len(zlib.compress(b"first"))  # as stored
    assert third.body == b"third"
    assert broken.queue_offset == 1  # its other fields are all there
    assert broken.topic == "T"
    with pytest.raises(ProtocolError, match="does not inflate"):
        _ = broken.body
    with pytest.raises(ProtocolError, match="does not inflate"):
        _ = broken.body_view  # and again: the error is not swallowed after the first time


def test_properties_are_parsed_on_access_only(rx: Any) -> None:
    raw = encode_record(topic="T", body=b"b", properties="TAGS\x01ok\x02")
    broken = bytearray(raw)
    broken[-3:-1] = b"\xff\xfe"  # inside the property string: no longer UTF-8
    msg, other = rx.decode_received(bytes(broken) + raw)
    assert msg.body == b"b"
    assert other.tags == "ok"
    with pytest.raises(ProtocolError, match="properties are not UTF-8"):
        _ = msg.properties
    with pytest.raises(ProtocolError, match="properties are not UTF-8"):
        _ = msg.tags


def test_other_codecs_are_handed_over_as_stored(rx: Any) -> None:
    flags = COMPRESSED_FLAG | COMPRESSION_LZ4
    (msg,) = rx.decode_received(encode_record(topic="T", body=b"\x04\x22\x4d\x18", sys_flag=flags))
    assert msg.body == b"\x04\x22\x4d\x18"
    assert msg.sys_flag == flags


def test_the_body_view_is_the_response_itself(rx: Any) -> None:
    raw = encode_record(topic="T", body=b"zero copy")
    (msg,) = rx.decode_received(raw)
    view = msg.body_view
    assert view.obj is raw
    assert view == b"zero copy"
    assert msg.body_size == 9


def test_any_buffer_is_accepted_and_the_topic_is_shared(rx: Any) -> None:
    raw = b"".join(encode_record(topic="shared", body=bytes([i])) for i in range(3))
    for buf in (bytearray(raw), memoryview(raw)):
        msgs = rx.decode_received(buf)
        assert [m.body for m in msgs] == [b"\x00", b"\x01", b"\x02"]
        assert msgs[0].topic is msgs[2].topic
    assert rx.decode_received(b"") == []


def test_messages_come_from_the_decoder_only(rx: Any) -> None:
    with pytest.raises(TypeError):
        rx.ReceivedMessage()


def test_every_truncation_is_a_protocol_error_naming_the_byte(rx: Any) -> None:
    first = encode_record(topic="T", body=b"x" * 10, properties="TAGS\x01a\x02")
    buf = first + encode_record(topic="T", body=b"y" * 10, properties="TAGS\x01b\x02")
    for cut in range(1, len(buf)):
        if cut == len(first):
            assert len(rx.decode_received(buf[:cut])) == 1
            continue
        at = 0 if cut < len(first) else len(first)
        with pytest.raises(ProtocolError, match=f"record at byte {at} of the response"):
            rx.decode_received(buf[:cut])


@pytest.mark.parametrize(
    ("garbage", "problem"),
    [
        (b"\x00" * 100, "bad magic 0x00000000"),
        (struct.pack(">ii", 100, -875286124) + bytes(92), "bad magic 0xCBD43194"),  # blank
        (struct.pack(">ii", 10**6, -626843481) + bytes(92), "total size 1000000 out of range"),
        (struct.pack(">ii", 90, -626843481) + bytes(92), "total size 90 out of range"),
    ],
)
def test_garbage_is_a_clear_protocol_error(rx: Any, garbage: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        rx.decode_received(garbage)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(records(), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_damaged_bytes_are_refused_where_the_record_decoder_refuses_them(
    rx: Any, batch: list[bytes], damage: list[tuple[int, int]]
) -> None:
    buf = bytearray(b"".join(batch))
    for at, value in damage:
        buf[at % len(buf)] = value
    data = bytes(buf)
    try:
        want = list(iter_records(data))
    except ProtocolError:
        want = None
    try:
        got = rx.decode_received(data)
    except ProtocolError:
        assert want is None, "a valid run of records was refused"
        return
    if want is None:
        # the only refusal that is left for later: a property string that is not UTF-8
        with pytest.raises(ProtocolError, match="not UTF-8"):
            for msg in got:
                _ = msg.properties
        return
    assert len(got) == len(want)
    for msg, ref in zip(got, want, strict=True):
        try:
            expected = inflate(ref)
        except ProtocolError:
            with pytest.raises(ProtocolError, match="does not inflate"):
                _ = msg.body
            continue
        assert msg.to_message_ext() == expected
