"""Pull bodies to Arrow columns: every field, tag matching, compressed bodies, torn input."""

from __future__ import annotations

import random
import subprocess
import sys
import zlib

import pytest

from apogee.errors import ProtocolError
from apogee.model.message import COMPRESSED_FLAG, properties_to_string
from apogee.model.message_codec import MESSAGE_MAGIC_CODE_V2, decode_record, encode_record
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


@pytest.mark.parametrize(
    "columns", [("body",), ("queueOffset", "msgId", "tags"), ("properties", "topic", "body")]
)
def test_a_builder_makes_only_the_columns_asked_for_in_their_order(
    columns: tuple[str, ...],
) -> None:
    body = b"".join(record(i, b"b%d" % i, {"TAGS": "red", "x": str(i)}) for i in range(5))
    nullable = tuple((c, True) for c in columns)
    whole, some = ColumnBuilder("t", "broker-a", 2), ColumnBuilder("t", "broker-a", 2, nullable)
    for builder in (whole, some):
        builder.add(body, 100, SubscriptionData.build("t", "red"))
    batch = some.flush()
    assert batch.schema.names == list(columns)
    assert all(f.nullable for f in batch.schema)  # as the reader's schema says
    assert batch.to_pydict() == whole.flush().select(list(columns)).to_pydict()


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


def as_v2(rec: bytes) -> bytes:
    """A v1 record with IPv4 hosts rewritten as v2 (a two-byte topic length)."""
    topic_at = 88 + int.from_bytes(rec[84:88], "big")
    out = bytearray(rec[:topic_at] + rec[topic_at].to_bytes(2, "big") + rec[topic_at + 1 :])
    out[0:4] = len(out).to_bytes(4, "big")
    out[4:8] = MESSAGE_MAGIC_CODE_V2.to_bytes(4, "big", signed=True)
    return bytes(out)


def random_record(rng: random.Random, offset: int) -> tuple[bytes, bytes]:
    """A record with random fields, and the body a reader must hand over."""
    pool = ["TAGS", "KEYS", "UNIQ_KEY", "a", "ü", "CLUSTER", ""]
    pieces = []
    for _ in range(rng.randrange(6)):
        name, value = rng.choice(pool), rng.choice(["", "v", "x\x01y", "ñé", str(offset)])
        pieces.append(rng.choice([f"{name}\x01{value}", name]))
    text = "\x02".join(pieces) + rng.choice(["", "\x02"])
    raw = rng.randbytes(rng.randrange(40))
    compressed = rng.random() < 0.2
    v6_born, v6_store = rng.random() < 0.2, rng.random() < 0.2
    rec = encode_record(
        topic=rng.choice(["t", "topic-x"]),
        body=zlib.compress(raw) if compressed else raw,
        queue_id=1,
        properties=text,
        queue_offset=offset,
        physical_offset=rng.randrange(1 << 40),
        born_timestamp=rng.randrange(1 << 41),
        born_host=("::1", 7) if v6_born else ("10.1.2.3", 7),
        store_timestamp=rng.randrange(1 << 41),
        store_host=("fe80::2", 10911) if v6_store else ("10.0.0.9", 10911),
        reconsume_times=rng.randrange(20),
        sys_flag=COMPRESSED_FLAG if compressed else 0,
    )
    if not (v6_born or v6_store) and rng.random() < 0.5:
        rec = as_v2(rec)
    return rec, raw


@pytest.mark.parametrize("seed", range(4))
def test_columns_match_the_reference_decoder_on_random_records(seed: int) -> None:
    rng = random.Random(seed)
    made = [random_record(rng, i) for i in range(400)]
    pulls = [b"".join(r for r, _ in made[i : i + 64]) for i in range(0, 400, 64)]
    end = 350
    sub = SubscriptionData.build("t", "v || ñé") if seed % 2 else None
    expected = []
    for (rec, raw), i in zip(made, range(end), strict=False):
        ext = decode_record(rec)
        props = dict(ext.properties)
        if sub is not None and not sub.matches_tag(props.get("TAGS")):
            continue
        uniq = props.pop("UNIQ_KEY", None)
        expected.append(
            {
                "queueOffset": i,
                "msgId": uniq or ext.msg_id,
                "tags": props.pop("TAGS", None),
                "keys": props.pop("KEYS", None),
                "body": raw,
                "properties": props,
                "bornTimestamp": ext.born_timestamp,
                "storeTimestamp": ext.store_timestamp,
                "reconsumeTimes": ext.reconsume_times,
            }
        )
    builder = ColumnBuilder("t", "broker-a", 1)
    nexts = [builder.add(body, end, sub) for body in pulls]
    batch = builder.flush()

    assert nexts[-2:] == [end, -1]  # the pull past the end looks at nothing
    assert batch.schema.equals(ARROW_SCHEMA)
    got = [
        {
            **r,
            "properties": dict(r["properties"]),
            "bornTimestamp": round(r["bornTimestamp"].timestamp() * 1000),
            "storeTimestamp": round(r["storeTimestamp"].timestamp() * 1000),
        }
        for r in batch.to_pylist()
    ]
    for row in got:
        for name in ("topic", "brokerName", "queueId"):
            assert row.pop(name) == {"topic": "t", "brokerName": "broker-a", "queueId": 1}[name]
    assert got == expected


def test_the_arrow_schema_is_pysparks_conversion_of_the_source_schema() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415  # imports pandas

    from apogee.spark.schema import SOURCE_SCHEMA  # noqa: PLC0415

    assert ARROW_SCHEMA.equals(to_arrow_schema(SOURCE_SCHEMA, timezone="UTC"), check_metadata=True)


def test_loading_the_connector_leaves_pandas_out() -> None:
    # every Spark Python worker that touches the source or sink imports the connector;
    # pandas would add ~0.3 s to each, and writers never need it
    code = "import sys, apogee.spark.datasource; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
