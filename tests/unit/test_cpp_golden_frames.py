"""Captured C++ client frames (tests/data/cpp/) and the facts docs/interop/cpp-client.md cites.

The frames are fixtures for the protocol decoder; these tests keep them honest (each file is one
whole frame of the code its index names) and pin the JSON quirks a decoder must accept: some
extFields values are JSON numbers, the header text ends with a newline, booleans are "0"/"1",
and the batch body may be compressed as a whole.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "cpp"
INDEX: list[dict[str, Any]] = json.loads((DATA / "index.json").read_text())["frames"]
CREDENTIAL_KEYS = {"AccessKey", "OnsChannel", "Signature"}

# extFields the C++ client writes as JSON numbers; every other value is a JSON string
NUMERIC_FIELDS = {
    10: {"defaultTopicQueueNums", "queueId", "sysFlag", "flag"},
    11: {"queueId", "maxMsgNums", "sysFlag"},
    14: {"queueId"},
    15: {"queueId"},
    30: {"queueId"},
    36: {"delayLevel"},
}


def split(name: str) -> tuple[str, dict[str, Any], bytes]:
    frame = (DATA / name).read_bytes()
    length, header_length = struct.unpack(">ii", frame[:8])
    assert length == len(frame) - 4
    assert header_length >> 24 == 0  # JSON, and the C++ client never marks the type byte
    text = frame[8 : 8 + header_length].decode()
    return text, json.loads(text), frame[8 + header_length :]


def ext(name: str) -> dict[str, Any]:
    fields: dict[str, Any] = split(name)[1]["extFields"]
    return fields


def props(text: str) -> dict[str, str]:
    pairs = (item.split("\x01", 1) for item in text.split("\x02") if item)
    return dict(pairs)


def test_the_index_names_every_file_and_stays_small() -> None:
    files = {p.name for p in DATA.glob("*.bin")}
    assert files == {entry["file"] for entry in INDEX}
    assert sum((DATA / f).stat().st_size for f in files) < 200 * 1024


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_each_frame_is_one_cpp_request_of_its_code(entry: dict[str, Any]) -> None:
    text, header, _ = split(entry["file"])

    assert header["code"] == entry["code"]
    assert text.endswith("}\n")  # jsoncpp's FastWriter appends a newline
    assert (header["language"], header["version"], header["flag"], header["remark"]) == (
        "CPP",
        63,
        0,
        "",
    )
    fields = header["extFields"]
    assert fields.keys() >= CREDENTIAL_KEYS
    numeric = NUMERIC_FIELDS.get(entry["code"], set())
    for key, value in fields.items():
        assert isinstance(value, int) == (key in numeric), (key, value)
        assert isinstance(value, str) == (key not in numeric), (key, value)


def test_send_message_uses_full_field_names_and_zero_one_booleans() -> None:
    fields = ext("send_message_sync.bin")

    assert (fields["batch"], fields["unitMode"], fields["reconsumeTimes"]) == ("0", "0", "0")
    assert (fields["defaultTopic"], fields["defaultTopicQueueNums"]) == ("TBW102", 4)
    assert props(fields["properties"]) == {
        "KEYS": "k0 kk",
        "TAGS": "TagA",
        "UNIQ_KEY": props(fields["properties"])["UNIQ_KEY"],
        "WAIT": "true",
        "ua": "v0",
    }
    assert props(ext("send_message_delay.bin")["properties"])["DELAY"] == "3"


def test_a_large_body_is_zlib_compressed_with_sys_flag_1() -> None:
    _, header, body = split("send_message_compressed.bin")

    assert header["extFields"]["sysFlag"] == 1
    assert len(zlib.decompress(body)) == 5000


def inner_messages(body: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """Batch body, per message: int32 total, magic, body CRC, flag, body length; body; props."""
    found = []
    while body:
        total, magic, crc, flag, body_length = struct.unpack(">iiiii", body[:20])
        assert (magic, crc) == (0, 0)
        payload = body[20 : 20 + body_length]
        (props_length,) = struct.unpack(">h", body[20 + body_length : 22 + body_length])
        text = body[22 + body_length : 22 + body_length + props_length].decode()
        assert total == 22 + body_length + props_length
        found.append((flag, payload, props(text)))
        body = body[total:]
    return found


def test_a_batch_is_code_10_with_batch_1_and_inner_messages() -> None:
    _, header, body = split("send_message_batch.bin")

    assert (header["extFields"]["batch"], header["extFields"]["sysFlag"]) == ("1", 0)
    assert props(header["extFields"]["properties"]) == {"WAIT": "true"}
    messages = inner_messages(body)
    assert [m[1] for m in messages] == [b"message-0", b"message-1", b"message-2"]
    assert [m[2]["KEYS"] for m in messages] == ["bk0", "bk1", "bk2"]
    assert all("UNIQ_KEY" in m[2] for m in messages)


def test_a_large_batch_is_compressed_as_a_whole() -> None:
    _, header, body = split("send_message_batch_compressed.bin")

    assert (header["extFields"]["batch"], header["extFields"]["sysFlag"]) == ("1", 1)
    messages = inner_messages(zlib.decompress(body))
    assert [len(m[1]) for m in messages] == [3000, 3000]


def test_heartbeats_carry_integer_ordinals_and_string_sub_versions() -> None:
    push = json.loads(split("heart_beat_push_clustering.bin")[2])
    [consumer] = push["consumerDataSet"]

    assert "producerDataSet" not in push
    assert (consumer["consumeType"], consumer["messageModel"], consumer["consumeFromWhere"]) == (
        1,
        1,
        0,
    )
    retry, topic = consumer["subscriptionDataSet"]
    assert retry == {"subString": "*", "subVersion": retry["subVersion"], "topic": "%RETRY%cg1"}
    assert isinstance(topic["subVersion"], str)
    # tag codes are not String.hashCode values: the C++ client puts atoi(tag) there
    assert (topic["tagsSet"], topic["codeSet"]) == (["TagA", "TagB"], [0, 0])

    broadcast = json.loads(split("heart_beat_push_broadcasting.bin")[2])["consumerDataSet"][0]
    assert broadcast["messageModel"] == 0
    pull = json.loads(split("heart_beat_pull.bin")[2])["consumerDataSet"][0]
    assert pull["consumeType"] == 0 and "subscriptionDataSet" not in pull


def test_pull_flags_per_consumer_kind() -> None:
    first = ext("pull_message_push_first.bin")
    committed = ext("pull_message_push_commit.bin")
    puller = ext("pull_message_pull_consumer.bin")

    assert (first["sysFlag"], first["commitOffset"], first["suspendTimeoutMillis"]) == (
        6,
        "-1",
        "15000",
    )
    assert committed["sysFlag"] == 7 and int(committed["commitOffset"]) >= 0
    assert (ext("pull_message_broadcasting.bin")["commitOffset"]) == "0"
    assert (puller["sysFlag"], puller["subVersion"], puller["suspendTimeoutMillis"]) == (
        4,
        "0",
        "20000",
    )
    assert first["maxMsgNums"] == puller["maxMsgNums"] == 32


def test_send_back_names_only_group_offset_and_delay_level() -> None:
    fields = ext("consumer_send_msg_back.bin")

    assert fields.keys() - CREDENTIAL_KEYS == {"group", "offset", "delayLevel"}
    assert fields["delayLevel"] == 0


def test_lock_bodies_name_the_client_and_queues() -> None:
    body = json.loads(split("lock_batch_mq_periodic.bin")[2])

    assert set(body) == {"clientId", "consumerGroup", "mqSet"}
    assert {q["queueId"] for q in body["mqSet"]} == {0, 1, 2, 3}


def test_the_shutdown_unlock_leaves_out_queue_0_of_the_first_topic() -> None:
    locked = json.loads(split("lock_batch_mq_single.bin")[2])["mqSet"]
    unlocked = json.loads(split("unlock_batch_mq.bin")[2])["mqSet"]

    assert locked == [{"brokerName": "broker-a", "queueId": 0, "topic": "%RETRY%cg6"}]
    assert locked[0] not in unlocked
    assert {(q["topic"], q["queueId"]) for q in unlocked} == {
        ("%RETRY%cg6", 1), ("%RETRY%cg6", 2), ("%RETRY%cg6", 3),
        ("T1", 0), ("T1", 1), ("T1", 2), ("T1", 3),
    }  # fmt: skip
