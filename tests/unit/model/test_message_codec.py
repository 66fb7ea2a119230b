from __future__ import annotations

import struct
import zlib

import pytest

from apogee.errors import ProtocolError
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    Message,
    properties_to_string,
)
from apogee.model.message_codec import (
    BLANK_MAGIC_CODE,
    RecordKind,
    check_record,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
    iter_records,
    pack_host,
    record_size,
    store_timestamp_at,
    write_blank,
)
from apogee.model.msgid import create_offset_msg_id

PROPS = properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"})


def hand_built_v1(body: bytes, topic: str, props: str) -> bytes:
    """The reference table (§4.1) written out field by field."""
    t = topic.encode()
    p = props.encode()
    size = 91 + len(body) + len(t) + len(p)
    return b"".join(
        [
            struct.pack(">i", size),
            bytes.fromhex("DAA320A7"),
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),
            struct.pack(">i", 3),  # queue id
            struct.pack(">i", 7),  # flag
            struct.pack(">q", 42),  # queue offset
            struct.pack(">q", 4096),  # physical offset
            struct.pack(">i", 0),  # sys flag
            struct.pack(">q", 1_700_000_000_000),  # born timestamp
            bytes([192, 168, 0, 9]) + struct.pack(">i", 50000),
            struct.pack(">q", 1_700_000_000_123),  # store timestamp
            bytes([10, 0, 0, 1]) + struct.pack(">i", 10911),
            struct.pack(">i", 2),  # reconsume times
            struct.pack(">q", 0),  # prepared tx offset
            struct.pack(">i", len(body)) + body,
            bytes([len(t)]) + t,
            struct.pack(">h", len(p)) + p,
        ]
    )


def encode_sample(**overrides: object) -> bytes:
    fields: dict[str, object] = {
        "topic": "TopicTest",
        "body": b"hello!q!",
        "queue_id": 3,
        "flag": 7,
        "properties": PROPS,
        "queue_offset": 42,
        "physical_offset": 4096,
        "born_timestamp": 1_700_000_000_000,
        "born_host": ("192.168.0.9", 50000),
        "store_timestamp": 1_700_000_000_123,
        "store_host": ("10.0.0.1", 10911),
        "reconsume_times": 2,
    }
    fields.update(overrides)
    return encode_record(**fields)  # type: ignore[arg-type]


def test_encoding_matches_the_reference_layout_byte_for_byte() -> None:
    assert encode_sample() == hand_built_v1(b"hello!q!", "TopicTest", PROPS)


def test_size_formula() -> None:
    assert record_size(0, 10, 5, 20) == 126
    assert record_size(BORNHOST_V6_FLAG, 10, 5, 20) == 138
    assert record_size(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG, 10, 5, 20) == 150
    assert record_size(0, 10, 5, 20, v2=True) == 127
    assert len(encode_sample()) == record_size(0, 8, 9, len(PROPS))


def test_decode_round_trip_ipv4() -> None:
    msg = decode_record(encode_sample())
    assert msg.topic == "TopicTest"
    assert msg.body == b"hello!q!"
    assert (msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset) == (3, 7, 42, 4096)
    assert msg.born_host == ("192.168.0.9", 50000)
    assert msg.store_host == ("10.0.0.1", 10911)
    assert msg.store_timestamp == 1_700_000_000_123
    assert msg.reconsume_times == 2
    assert msg.tags == "TagA" and msg.keys == "k1 k2" and msg.uniq_key == "U1"
    assert msg.msg_id == create_offset_msg_id(pack_host(("10.0.0.1", 10911)), 4096)
    assert msg.client_msg_id == "U1"


def test_decode_round_trip_ipv6_hosts() -> None:
    raw = encode_sample(born_host=("1050:0:0:0:5:600:300c:326b", 1), store_host=("::1", 10911))
    assert len(raw) == record_size(0, 8, 9, len(PROPS)) + 24
    msg = decode_record(raw)
    assert msg.sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) == 0x30
    assert msg.born_host == ("1050::5:600:300c:326b", 1)
    assert msg.store_host == ("::1", 10911)
    assert len(msg.msg_id) == 56
    assert msg.store_timestamp == 1_700_000_000_123
    assert store_timestamp_at(raw, 0) == 1_700_000_000_123


def test_decode_v2_record_with_two_byte_topic_length() -> None:
    topic = "T" * 200
    v1 = bytearray(hand_built_v1(b"body", "x", ""))
    # rebuild as v2: magic v2, int16 topic length, longer topic
    head = v1[: 88 + 4]  # everything up to the end of the body
    rec = head + struct.pack(">h", 200) + topic.encode() + struct.pack(">h", 0)
    struct.pack_into(">i", rec, 0, len(rec))
    rec[4:8] = bytes.fromhex("DAA320AB")
    assert len(rec) == record_size(0, 4, 200, 0, v2=True)
    checked = check_record(bytes(rec), 0, len(rec))
    assert checked.kind is RecordKind.MESSAGE
    assert decode_record(bytes(rec)).topic == topic


def test_check_record_reports_each_kind_of_damage() -> None:
    good = encode_sample()
    assert check_record(good, 0, len(good)).kind is RecordKind.MESSAGE

    flipped = bytearray(good)
    flipped[90] ^= 0xFF  # inside the body
    bad = check_record(bytes(flipped), 0, len(flipped))
    assert bad.kind is RecordKind.INVALID and "CRC" in bad.problem
    assert check_record(bytes(flipped), 0, len(flipped), check_crc=False).kind is RecordKind.MESSAGE

    magic = bytearray(good)
    magic[4] = 0
    assert "magic" in check_record(bytes(magic), 0, len(magic)).problem

    wrong_size = bytearray(good)
    struct.pack_into(">i", wrong_size, 0, len(good) - 1)
    assert check_record(bytes(wrong_size), 0, len(good)).kind is RecordKind.INVALID

    assert check_record(good[:-1], 0, len(good) - 1).kind is RecordKind.INVALID
    assert check_record(good[:5], 0, 5).kind is RecordKind.INVALID
    assert check_record(bytes(200), 0, 200).kind is RecordKind.INVALID


def test_blank_marker() -> None:
    buf = bytearray(64)
    write_blank(buf, 16, 48)
    assert struct.unpack_from(">ii", buf, 16) == (48, BLANK_MAGIC_CODE)
    checked = check_record(bytes(buf), 16, 64)
    assert checked.kind is RecordKind.BLANK and checked.size == 48


def test_iter_records_decodes_a_pull_body() -> None:
    body = encode_sample(queue_offset=0) + encode_sample(queue_offset=1, body=b"second")
    msgs = list(iter_records(body))
    assert [m.queue_offset for m in msgs] == [0, 1]
    assert msgs[1].body == b"second"
    with pytest.raises(ProtocolError):
        list(iter_records(body[:-3]))


def test_batch_layout_and_round_trip() -> None:
    msgs = [
        Message("T", b"one", flag=1, properties={"TAGS": "a"}),
        Message("T", b"", flag=2, properties={}),
    ]
    raw = encode_batch(msgs)
    first_props = b"TAGS\x01a\x02"
    assert raw[:20] == struct.pack(">iiiii", 22 + 3 + len(first_props), 0, 0, 1, 3)
    items = decode_batch(raw)
    assert [(i.flag, bytes(i.body), i.properties) for i in items] == [
        (1, b"one", "TAGS\x01a\x02"),
        (2, b"", ""),
    ]


@pytest.mark.parametrize("cut", [1, 5, 21, 27])
def test_batch_cut_short_is_rejected(cut: int) -> None:
    raw = encode_batch([Message("T", b"one", properties={"TAGS": "a"})])
    with pytest.raises(ProtocolError):
        decode_batch(raw[:-cut])


def test_batch_with_inconsistent_total_is_rejected() -> None:
    raw = bytearray(encode_batch([Message("T", b"one")]))
    struct.pack_into(">i", raw, 0, 99)
    with pytest.raises(ProtocolError):
        decode_batch(bytes(raw))
