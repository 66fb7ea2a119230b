"""Batch send bodies, compiled and interpreted: what the broker's batch decoder reads back."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from apogee.errors import InvalidMessageError
from apogee.model.message import Message, string_to_properties
from apogee.model.message_codec import decode_batch, encode_batch

MAX = 4 << 20


@pytest.fixture(scope="module")
def bb(cython_build: Callable[[str], ModuleType]) -> Any:
    return cython_build("apogee.client.batch_body")


def counting_keys() -> Callable[[int], list[str]]:
    counter = itertools.count()
    return lambda n: [f"K{next(counter):031d}" for _ in range(n)]


def test_records_read_back_with_every_property_and_flag(bb: Any) -> None:
    msgs = [Message("T", bytes([i]) * (i * 37 % 300 + 1), flag=i - 3) for i in range(40)]
    msgs[5].properties["UNIQ_KEY"] = "MINE"
    msgs[6].tags = "a-tag"
    msgs[7].properties["UNIQ_KEY"] = "clé-ü"  # not ASCII: encoded as UTF-8
    [(body, count, msg_id)] = bb.pack_batches(msgs, MAX, counting_keys())
    assert count == 40
    # byte for byte what the reference encoder makes of the same messages
    assert bytes(body) == encode_batch(msgs)
    items = decode_batch(body)
    assert [i.flag for i in items] == [m.flag for m in msgs]
    assert [bytes(i.body) for i in items] == [m.body for m in msgs]
    read = [string_to_properties(i.properties) for i in items]
    assert read == [m.properties for m in msgs]
    keys = [p["UNIQ_KEY"] for p in read]
    assert keys[5] == "MINE" and keys[7] == "clé-ü" and read[6]["TAGS"] == "a-tag"
    assert keys[0] == "K" + "0" * 31 and len(set(keys)) == 40
    assert msg_id == ",".join(keys)


def test_new_keys_is_asked_once_for_the_messages_without_one(bb: Any) -> None:
    asked: list[int] = []

    def new_keys(n: int) -> list[str]:
        asked.append(n)
        return [f"N{i}" for i in range(n)]

    msgs = [Message("T", b"x") for _ in range(5)]
    msgs[1].properties["UNIQ_KEY"] = "OLD"
    bb.pack_batches(msgs, MAX, new_keys)
    assert asked == [4]
    assert [m.properties["UNIQ_KEY"] for m in msgs] == ["N0", "OLD", "N1", "N2", "N3"]
    bb.pack_batches(msgs, MAX, new_keys)  # sent again: the same ids
    assert asked == [4]


def test_cut_at_the_limit_in_order(bb: Any) -> None:
    msgs = [Message("T", bytes([65 + i % 26]) * 100) for i in range(50)]
    each = 22 + 100 + len("UNIQ_KEY\x01" + "K" + "0" * 31 + "\x02")
    batches = bb.pack_batches(msgs, each * 7, counting_keys())
    assert [count for _, count, _ in batches] == [7] * 7 + [1]
    assert [len(body) for body, _, _ in batches] == [each * 7] * 7 + [each]
    bodies = [bytes(i.body) for body, _, _ in batches for i in decode_batch(body)]
    assert bodies == [m.body for m in msgs]
    ids = ",".join(msg_id for _, _, msg_id in batches)
    assert ids == ",".join(m.properties["UNIQ_KEY"] for m in msgs)


def test_refusals_name_the_message(bb: Any) -> None:
    too_big = [Message("T", b"small"), Message("T", b"x" * 1000)]
    with pytest.raises(InvalidMessageError, match=r"messages\[1\]: .* more than a batch"):
        bb.pack_batches(too_big, 1000, counting_keys())
    long_props = [Message("T", b"x"), Message("T", b"y", properties={"p": "v" * 40_000})]
    with pytest.raises(InvalidMessageError, match=r"messages\[1\].properties: .* 32767"):
        bb.pack_batches(long_props, MAX, counting_keys())


@pytest.mark.parametrize(
    ("base", "first", "count"),
    [("C0A8000100640A0B0C0D00000001", 0, 3), ("B" * 28, 0xFFFD, 5), ("X", 7, 0), ("clé", 1, 2)],
)
def test_block_keys_are_the_base_and_four_hex_digits_of_the_counter(
    bb: Any, base: str, first: int, count: int
) -> None:
    keys = bb.block_keys(base, first, count)
    assert keys == [f"{base}{(first + k) & 0xFFFF:04X}" for k in range(count)]
    assert all(type(k) is str and k.isascii() == base.isascii() for k in keys)
