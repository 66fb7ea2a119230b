"""Before a send: message checks, the compression decision, batch bodies cut at the limit."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.client.outgoing import (
    check_batch,
    check_message,
    compress_body,
    encode_batches,
)
from apogee.errors import InvalidMessageError
from apogee.model.message import Message, string_to_properties
from apogee.model.message_codec import decode_batch

NOW_MS = 1_700_000_000_000
TEXT = b"a body that compresses well " * 200  # 5,600 bytes


@pytest.mark.parametrize(
    ("msg", "field"),
    [
        (Message("", b"x"), "topic"),
        (Message("bad topic", b"x"), "topic"),
        (Message("t" * 128, b"x"), "topic"),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "topic"),
        (Message("T", b""), "body"),
        (Message("T", "text"), "body"),  # type: ignore[arg-type]  # the point
        (Message("T", b"x" * 1025), "body"),
    ],
)
def test_bad_messages_are_refused_naming_the_field(msg: Message, field: str) -> None:
    with pytest.raises(InvalidMessageError, match=f"^{field}: ") as info:
        check_message(msg, max_size=1024)
    assert info.value.code == 13  # MESSAGE_ILLEGAL
    assert not info.value.retriable


def test_a_bytearray_body_is_taken_as_bytes() -> None:
    msg = Message("T", bytearray(b"abc"))  # type: ignore[arg-type]
    check_message(msg, max_size=1024)
    assert type(msg.body) is bytes and msg.body == b"abc"


def test_compression_from_the_threshold_on_and_only_when_smaller() -> None:
    assert compress_body(TEXT[:4095], 4096, 5) is None
    packed = compress_body(TEXT[:4096], 4096, 5)
    assert packed is not None and zlib.decompress(packed) == TEXT[:4096]
    assert compress_body(os.urandom(8192), 4096, 5) is None  # random bytes do not shrink
    assert compress_body(TEXT, None, 5) is None
    assert compress_body(TEXT, 0, 5) is not None


def test_batch_rules() -> None:
    with pytest.raises(InvalidMessageError, match="at least one"):
        check_batch([], 1024)
    with pytest.raises(InvalidMessageError, match=r"messages\[1\].topic"):
        check_batch([Message("A", b"x"), Message("B", b"x")], 1024)
    with pytest.raises(InvalidMessageError, match=r"messages\[0\].delay_level"):
        check_batch([Message("A", b"x", delay_level=2)], 1024)
    with pytest.raises(InvalidMessageError, match="retry topic"):
        check_batch([Message("%RETRY%g", b"x")], 1024)
    with pytest.raises(InvalidMessageError, match=r"^body: "):
        check_batch([Message("A", b"x"), Message("A", b"")], 1024)
    assert check_batch([Message("A", b"x"), Message("A", b"y")], 1024) == "A"


def _reference_fault(messages: list[Message], max_size: int) -> str | None:
    """The batch rules, message by message: the first fault's field, None for none."""
    topic = messages[0].topic
    for i, msg in enumerate(messages):
        if msg.topic != topic:
            return f"messages[{i}].topic"
        body = msg.body
        if not isinstance(body, bytes | bytearray) or not body or len(body) > max_size:
            return "body"
        if "DELAY" in msg.properties:
            return f"messages[{i}].delay_level"
    return None


_members = st.builds(
    lambda topic, body, kind, delay: Message(
        topic,
        bytearray(body) if kind else body,  # type: ignore[arg-type]  # the point
        delay_level=delay,
    ),
    st.sampled_from(["A", "A", "A", "B"]),
    st.binary(max_size=12),
    st.booleans(),
    st.sampled_from([0, 0, 0, 3]),
)


@given(st.lists(_members, min_size=1, max_size=8))
def test_a_batch_is_refused_at_its_first_fault_and_other_buffers_become_bytes(
    messages: list[Message],
) -> None:
    expected = _reference_fault(messages, 10)
    if expected is None:
        assert check_batch(messages, 10) == messages[0].topic
        assert all(type(m.body) is bytes for m in messages)
        return
    with pytest.raises(InvalidMessageError) as info:
        check_batch(messages, 10)
    assert str(info.value).startswith(expected)


def test_one_batch_body_decodes_back_with_ids_set_on_the_messages() -> None:
    msgs = [Message("T", b"m\x00%d" % i, tags="t", flag=i) for i in range(5)]
    msgs[2].properties["UNIQ_KEY"] = "MINE"
    [batch] = encode_batches(msgs, NOW_MS, max_size=4 << 20)
    items = decode_batch(batch.body)
    assert [i.body for i in items] == [m.body for m in msgs]
    assert [i.flag for i in items] == list(range(5))
    keys = [string_to_properties(i.properties)["UNIQ_KEY"] for i in items]
    assert keys == [m.properties["UNIQ_KEY"] for m in msgs]
    assert keys[2] == "MINE" and len(set(keys)) == 5
    assert batch.msg_id == ",".join(keys)
    assert batch.count == 5


def test_batches_are_cut_at_the_size_limit_in_order() -> None:
    msgs = [Message("T", bytes([65 + i % 26]) * 100) for i in range(50)]
    each = 22 + 100 + len("UNIQ_KEY\x01" + "0" * 32 + "\x02")  # 166 bytes
    batches = encode_batches(msgs, NOW_MS, max_size=each * 7)
    assert [b.count for b in batches] == [7] * 7 + [1]
    assert all(len(b.body) <= each * 7 for b in batches)
    bodies = [item.body for b in batches for item in decode_batch(b.body)]
    assert bodies == [m.body for m in msgs]


def test_a_message_larger_than_a_batch_is_refused() -> None:
    msgs = [Message("T", b"small"), Message("T", b"x" * 1000)]
    with pytest.raises(InvalidMessageError, match=r"messages\[1\]: .* more than a batch"):
        encode_batches(msgs, NOW_MS, max_size=1000)
