"""Pull bodies to Arrow columns: every field, tag matching, compressed bodies, torn input."""

from __future__ import annotations

import zlib

import pytest

from apogee.errors import ProtocolError
from apogee.model.message import COMPRESSED_FLAG, properties_to_string
from apogee.model.message_codec import encode_record
from apogee.model.subscription import SubscriptionData
from apogee.spark.records import ARROW_SCHEMA, ColumnBuilder


def record(offset: int, body: bytes, props: dict[str, str], sys_flag: int = 0) -> bytes:
    return encode_record(
        topic="t",
        body=body,
        queue_id=2,
        properties=properties_to_string(props),
        queue_offset=offset,
        physical_offset=1000 + offset,
        born_timestamp=1_700_000_000_000 + offset,
        store_timestamp=1_700_000_000_500 + offset,
        store_host=("10.0.0.1", 10911),
        reconsume_times=offset % 3,
        sys_flag=sys_flag,
    )


def test_records_become_one_record_batch_of_the_source_schema() -> None:
    body = b"".join(
        [
            record(0, b"\x00a\x00", {"TAGS": "red", "KEYS": "k1 k2", "UNIQ_KEY": "U0", "x": "1"}),
            record(1, b"b", {"TAGS": "blue"}),
            record(2, zlib.compress(b"inflated"), {"TAGS": "red"}, sys_flag=COMPRESSED_FLAG),
        ]
    )
    builder = ColumnBuilder("t", "broker-a", 2)
    assert builder.add(body, 100, None) == 3
    batch = builder.flush()
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["body"] for r in rows] == [b"\x00a\x00", b"b", b"inflated"]
    assert [r["queueOffset"] for r in rows] == [0, 1, 2]
    assert rows[0]["msgId"] == "U0"
    assert rows[1]["msgId"] == "0A00000100002A9F00000000000003E9"  # host, port, offset 1001
    assert (rows[0]["tags"], rows[0]["keys"]) == ("red", "k1 k2")
    assert rows[0]["properties"] == [("x", "1")]
    assert [r["reconsumeTimes"] for r in rows] == [0, 1, 2]
    assert rows[2]["storeTimestamp"].timestamp() == 1_700_000_000.502
    assert len(builder) == 0


def test_end_offset_and_exact_tag_match() -> None:
    body = b"".join(record(i, b"x", {"TAGS": ("red", "blue")[i % 2]}) for i in range(6))
    builder = ColumnBuilder("t", "broker-a", 2)
    assert builder.add(body, 4, SubscriptionData.build("t", "red")) == 4
    assert [r["queueOffset"] for r in builder.flush().to_pylist()] == [0, 2]


def test_a_torn_body_is_a_protocol_error() -> None:
    body = record(0, b"abc", {})
    with pytest.raises(ProtocolError):
        ColumnBuilder("t", "broker-a", 2).add(body[:-5], 10, None)


def test_properties_follow_rocketmq_parsing_rules() -> None:
    raw = [
        "TAGS\x01a\x02x\x011\x02x\x012\x02",  # a later duplicate wins
        "empty\x01\x02\x01novalue\x02ok\x01v\x01w\x02",  # empty name/value dropped, 0x01 kept
        "",
        "KEYS\x01k1 k2\x02ünï\x01cödé\x02",
    ]
    body = b"".join(
        encode_record(topic="t", body=b"b", properties=text, queue_offset=i)
        for i, text in enumerate(raw)
    )
    builder = ColumnBuilder("t", "broker-a", 0)
    builder.add(body, 10, None)
    rows = builder.flush().to_pylist()
    assert [dict(r["properties"]) for r in rows] == [
        {"x": "2"},
        {"ok": "v\x01w"},
        {},
        {"ünï": "cödé"},
    ]
    assert [r["tags"] for r in rows] == ["a", None, None, None]
    assert [r["keys"] for r in rows] == [None, None, None, "k1 k2"]
    assert all(len(r["msgId"]) == 32 for r in rows)  # no unique key: the offset message id
