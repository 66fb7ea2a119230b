"""The kernels give what their contracts say, in whichever build runs.

``apogee.model.kernels`` and ``apogee.store.kernels`` are checked against
references written here or elsewhere in plain Python (the Java hash by its
definition, ``string_to_properties``, ``check_record``, ``struct``, the
index file's single put), never against themselves. ``make test`` runs this
file compiled and once more with ``APOGEE_PURE_PYTHON=1``, interpreted; where
the builds may differ (the class of a number-out-of-range error) the test
says so.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from apogee._util.clock import FakeClock
from apogee._util.compiled import PURE_PYTHON, is_compiled
from apogee.errors import ProtocolError
from apogee.model import kernels as model_kernels
from apogee.model.kernels import (
    decode_batch,
    encode_record_into,
    java_hash,
    message_fields,
    record_facts,
)
from apogee.model.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchItem,
    StoreBatch,
    merge_batch_properties,
    properties_to_string,
    string_to_properties,
)
from apogee.model.message_codec import (
    RecordKind,
    check_record,
    decode_record,
    encode_record,
    topic_prefix,
    unpack_host,
)
from apogee.store import kernels as store_kernels
from apogee.store.dispatch import DispatchEntry
from apogee.store.file_store import FileMessageStore
from apogee.store.index_file import IndexFile, IndexWork, index_key_hash
from apogee.store.index_service import IndexService, record_keys
from apogee.store.kernels import (
    derived_record,
    encode_batch,
    encode_derived,
    index_put,
    index_work,
    prepare_batch,
    pwrite_all,
    take_handoff,
    write_units,
)
from apogee.testing.store import message, small_config

#: What a number that does not fit its field raises: OverflowError compiled
#: (argument conversion), struct.error interpreted (packing).
OUT_OF_RANGE = (OverflowError, struct.error)
REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_build_under_test_is_the_one_the_environment_asks_for() -> None:
    for module in (model_kernels, store_kernels):
        assert is_compiled(module) is not PURE_PYTHON or not is_compiled(module)
        if os.environ.get("APOGEE_REQUIRE_SPEEDUPS") == "1":
            assert is_compiled(module), f"{module.__name__} was not compiled"
        if PURE_PYTHON:
            assert not is_compiled(module)


# -- Java hash ------------------------------------------------------------------------


def java_hash_by_definition(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=200) | st.text(max_size=50)


@settings(max_examples=500, deadline=None)
@given(ANY_TEXT)
def test_java_hash(text: str) -> None:
    assert java_hash(text) == java_hash_by_definition(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112), ("polygenelubricants", -(2**31)),
     ("é", 233), ("\U0001f600", 0xD83D * 31 + 0xDE00)],
)  # fmt: skip
def test_java_hash_known_values(text: str, expected: int) -> None:
    assert java_hash(text) == expected


@pytest.mark.parametrize("text", ["\ud800", "a\udfff", "\U0001f600\ud83d", "é\udc00"])
def test_java_hash_refuses_lone_surrogates(text: str) -> None:
    with pytest.raises(UnicodeEncodeError):
        java_hash(text)


# -- property strings ----------------------------------------------------------------

NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "TAG", "KEYSX", "", "WAIT", "tags"])
VALUES = st.text(st.characters(codec="utf-8", exclude_characters="\x02"), max_size=8)


@st.composite
def property_strings(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.tuples(NAMES, st.sampled_from(["\x01", "", "\x01\x01"]), VALUES)))
    text = "\x02".join(name + sep + value for name, sep, value in pieces)
    return text + draw(st.sampled_from(["", "\x02", "\x02\x02"]))


def fields_by_reference(text: str) -> tuple[int, str | None, str | None]:
    props = string_to_properties(text)
    tags = props.get("TAGS")
    return (java_hash_by_definition(tags) if tags else 0), props.get("KEYS"), props.get("UNIQ_KEY")


@settings(max_examples=1000, deadline=None)
@given(property_strings())
def test_message_fields(text: str) -> None:
    assert message_fields(text) == fields_by_reference(text)


def test_message_fields_pass_lone_surrogates_but_cannot_hash_a_tag_of_one() -> None:
    assert message_fields("ua\x01\ud800\x02TAGS\x01t\x02") == (116, None, None)
    assert message_fields("KEYS\x01a\udfffb\x02") == (0, "a\udfffb", None)
    with pytest.raises(UnicodeEncodeError):
        message_fields("TAGS\x01x\ud83d\x02")


# -- records --------------------------------------------------------------------------

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
HOSTS = st.sampled_from([bytes(range(8)), bytes(range(20)), b"\x7f\0\0\x01\0\0\x2a\x9f"])


def host_flags(born: bytes, store: bytes) -> int:
    return (0x10 if len(born) == 20 else 0) | (0x20 if len(store) == 20 else 0)


@settings(max_examples=300, deadline=None)
@given(
    st.tuples(I32, I32, I64, I64, I64, HOSTS, I64, HOSTS, I32, I64),
    st.binary(max_size=300),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=20).filter(
        lambda t: len(t.encode()) < 128 and not t.encode().endswith(b"\0")
    ),
    property_strings().filter(lambda p: not p.encode().endswith(b"\0")),
    st.booleans(),
    st.integers(0, 16),
)
def test_encode_record_into_writes_a_record_that_checks(  # noqa: PLR0917  # one per strategy
    fields: tuple[Any, ...], body: bytes, topic: str, props: str, crc_given: bool, pos: int
) -> None:
    queue_id, flag, qoff, phys, born_ts, born, store_ts, store, reconsume, prepared = fields
    sys_flag = host_flags(born, store)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    tfield = bytes((len(topic.encode()),)) + topic.encode()
    buf = bytearray(pos + 200 + len(body) + len(tfield) + len(props.encode()))
    size = encode_record_into(
        buf, pos, queue_id, flag, qoff, phys, sys_flag, born_ts, born, store_ts, store,
        reconsume, prepared, body, tfield, props.encode(), crc if crc_given else None,
    )  # fmt: skip
    assert buf[:pos] == bytes(pos)
    checked = check_record(buf, pos, len(buf), check_crc=True)
    assert checked.kind is RecordKind.MESSAGE, checked.problem
    meta = checked.meta
    assert meta is not None
    assert checked.size == size == meta.size
    assert (meta.queue_id, meta.flag, meta.queue_offset, meta.physical_offset, meta.sys_flag,
            meta.born_timestamp, meta.store_timestamp, meta.reconsume_times,
            meta.prepared_transaction_offset, meta.body_crc, meta.topic, meta.properties) == (
        queue_id, flag, qoff, phys, sys_flag, born_ts, store_ts, reconsume, prepared, crc,
        topic, props)  # fmt: skip
    assert bytes(buf[pos + meta.body_offset : pos + meta.body_offset + meta.body_len]) == body
    assert buf[pos + size :] == bytes(len(buf) - pos - size)


def test_encode_record_into_lays_out_the_v1_record() -> None:
    buf = bytearray(120)
    host = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])
    size = encode_record_into(buf, 2, 3, 4, 5, 6, 0, 7, host, 8, host, 9, 10, b"body", b"\x01T",
                              b"p", 11)  # fmt: skip
    expected = struct.pack(">iiiiiqqiq8sq8siqi", size, -626843481, 11, 3, 4, 5, 6, 0, 7, host, 8,
                           host, 9, 10, 4) + b"body" + b"\x01T" + b"\x00\x01p"  # fmt: skip
    assert size == 91 + 4 + 1 + 1 == len(expected)
    assert bytes(buf) == bytes(2) + expected + bytes(120 - 2 - size)


def test_encode_record_into_pads_or_cuts_a_host_to_its_field() -> None:
    buf = bytearray(120)
    encode_record_into(buf, 0, 0, 0, 0, 0, 0, 0, b"abc", 0, bytes(range(30)), 0, 0, b"", b"\x01T",
                       b"", 1)  # fmt: skip
    assert buf[48:56] == b"abc" + bytes(5)
    assert buf[64:72] == bytes(range(8))


ARG_NAMES = ["pos", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
             "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
             "prepared", "body", "topic_field", "properties"]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "raised"),
    [
        ({"queue_id": 2**31}, OUT_OF_RANGE),
        ({"queue_offset": 2**63}, OUT_OF_RANGE),
        ({"reconsume_times": -(2**31) - 1}, OUT_OF_RANGE),
        ({"prepared": 2**64}, OUT_OF_RANGE),
        ({"properties": b"p" * 40000}, struct.error),
        ({"pos": -1}, ValueError),
        ({"pos": 1200}, ValueError),
        ({"pos": 2**63 - 60}, ValueError),
    ],
)
def test_encode_record_into_refuses(change: dict[str, Any], raised: Any) -> None:
    values: list[Any] = [0, 1, 2, 3, 4, 5, 6, bytes(8), 7, bytes(8), 8, 9, b"body", b"\x01T", b"p"]
    for name, value in change.items():
        values[ARG_NAMES.index(name)] = value
    buf = bytearray(1200)
    with pytest.raises(raised):
        encode_record_into(buf, *values)
    # whatever was written before the refusal, no record is there
    assert check_record(buf, 0, len(buf)).kind is not RecordKind.MESSAGE


# -- batch bodies ----------------------------------------------------------------------


def batch_body(items: list[tuple[int, bytes, bytes]]) -> bytes:
    out = bytearray()
    for flag, body, props in items:
        out += struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, flag, len(body))
        out += body + struct.pack(">h", len(props)) + props
    return bytes(out)


BATCH_ITEMS = st.lists(
    st.tuples(I32, st.binary(max_size=40), property_strings().map(str.encode)), max_size=6
)


@settings(max_examples=500, deadline=None)
@given(BATCH_ITEMS, st.sampled_from([bytes, bytearray, memoryview]))
def test_decode_batch(items: list[tuple[int, bytes, bytes]], kind: Any) -> None:
    decoded = decode_batch(kind(batch_body(items)))
    assert all(type(item) is BatchItem for item in decoded)
    assert [(i.flag, bytes(i.body), i.properties) for i in decoded] == [
        (flag, body, props.decode()) for flag, body, props in items
    ]
    assert all(type(item.body) is memoryview for item in decoded)  # zero-copy views
    if kind is bytes:  # views of bytes are hashable, so the items are
        assert [hash(item) for item in decoded] == [hash(tuple(item)) for item in decoded]


GOOD = batch_body([(1, b"ab", b"K\x01v"), (2, b"", b"")])


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (GOOD[:-1], "at byte 27: cut short"),
        (GOOD[:10], "at byte 0: cut short"),
        (struct.pack(">i", 21) + GOOD[4:], "at byte 0: bad length fields"),
        (GOOD[:16] + struct.pack(">i", -1) + GOOD[20:], "at byte 0: bad length fields"),
        (GOOD[:16] + struct.pack(">i", 99) + GOOD[20:], "at byte 0: bad length fields"),
        (GOOD[:22] + struct.pack(">h", 2) + GOOD[24:], "at byte 0: total size disagrees"),
        (GOOD[:22] + struct.pack(">h", -1) + GOOD[24:], "at byte 0: total size disagrees"),
    ],
)
def test_decode_batch_refuses_bad_framing(body: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        decode_batch(body)


def test_decode_batch_refuses_properties_that_are_not_utf8() -> None:
    body = batch_body([(1, b"ab", b"K\x01v"), (0, b"x", b"\xff")])
    with pytest.raises(ProtocolError, match="at byte 27: properties not UTF-8") as info:
        decode_batch(body)
    assert isinstance(info.value.__cause__, UnicodeDecodeError)


# -- preparing and writing a batch -------------------------------------------------------------


@st.composite
def batch_items(draw: st.DrawFn) -> list[BatchItem]:
    return [
        BatchItem(draw(I32), draw(st.binary(max_size=30)), draw(property_strings()))
        for _ in range(draw(st.integers(0, 5)))
    ]


@settings(max_examples=500, deadline=None)
@given(
    batch_items(),
    property_strings() | st.just(""),
    st.integers(0, 400),
    st.integers(0, 200),
    st.integers(50, 400),
)
def test_prepare_batch(
    items: list[BatchItem], extra: str, max_body: int, fixed: int, max_record: int
) -> None:
    result = prepare_batch(items, extra, max_body, fixed, max_record)
    total_body = sum(len(body) + len(props) + 22 for _, body, props in items)
    if total_body > max_body:
        assert result == (0, total_body)
        return
    total = 0
    for _, body, own in items:
        props = merge_batch_properties(own, extra).encode()
        size = fixed + len(body) + len(props)
        if len(props) > 32767:
            assert result == (1, size)
            return
        if size > max_record:
            assert result == (2, size)
            return
        total += size
    assert result == (3, total)


def test_prepare_batch_refuses_long_properties_before_a_big_record() -> None:
    items = [BatchItem(0, b"b", "p" * 40000)]
    assert prepare_batch(items, "", 10**6, 10, 10) == (1, 40011)


def test_prepare_batch_counts_the_batch_properties_in_every_item() -> None:
    # "a" 0x02 "X\x01y"; an item ending in 0x02 gets no second one; "" takes none
    items = [BatchItem(0, b"bb", "a"), BatchItem(0, b"", "a\x02"), BatchItem(0, b"", "")]
    assert prepare_batch(items, "X\x01y", 10**6, 10, 10**6) == (3, (12 + 5) + (10 + 5) + (10 + 3))


def test_prepare_batch_of_no_items_leaves_the_batch_properties_unencoded() -> None:
    assert prepare_batch([], "A\x01\ud800", 100, 10, 100) == (3, 0)
    with pytest.raises(UnicodeEncodeError):
        prepare_batch([BatchItem(0, b"", "")], "A\x01\ud800", 100, 10, 100)


def test_prepare_batch_refuses_what_is_not_a_batch_item() -> None:
    with pytest.raises(TypeError):
        prepare_batch([(0, b"", b"bytes")], "", 100, 10, 100)  # type: ignore[list-item]


@settings(max_examples=300, deadline=None)
@given(batch_items(), property_strings(), HOSTS, HOSTS, st.integers(0, 30), I64, I64)
def test_encode_batch(  # noqa: PLR0917  # one argument per strategy
    items: list[BatchItem], extra: str, born: bytes, store: bytes, pos: int, born_ts: int,
    store_ts: int,
) -> None:  # fmt: skip
    fixed = 74 + 3 + len(born) + len(store)
    kind, total = prepare_batch(items, extra, 10**6, fixed, 10**6)
    assert kind == 3
    texts = [merge_batch_properties(own, extra) for _, _, own in items]
    # check_record reads properties that end in a NUL byte as a record cut short (a
    # zeroed tail), as the single-record test's draws also leave out
    assume(not any(text.endswith("\0") for text in texts))
    flags = host_flags(born, store)
    buf = bytearray(pos + total)
    offsets, entries = encode_batch(buf, pos, 1 << 40, 3, 77, flags, born_ts, born, store_ts,
                                    store, 2, b"\x02Tq", items, extra, "Tq")  # fmt: skip
    at = pos
    assert len(offsets) == len(entries) == len(items)
    for i, ((flag, body, _), text) in enumerate(zip(items, texts, strict=True)):
        props = text.encode()
        size = fixed + len(body) + len(props)
        crc = zlib.crc32(body) & 0x7FFFFFFF
        code, keys, uniq = fields_by_reference(text)
        checked = check_record(buf, at, len(buf))
        meta = checked.meta
        assert meta is not None, checked.problem
        assert (meta.size, meta.flag, meta.queue_offset, meta.physical_offset, meta.body_crc,
                meta.properties.encode(), meta.topic, meta.born_timestamp,
                meta.store_timestamp, meta.reconsume_times) == (
            size, flag, 77 + i, (1 << 40) + at, crc, props, "Tq", born_ts, store_ts, 2
        )  # fmt: skip
        assert bytes(buf[at + meta.body_offset : at + meta.body_offset + len(body)]) == body
        assert offsets[i] == (1 << 40) + at
        phys = (1 << 40) + at
        assert entries[i] == ("Tq", 3, phys, size, code, store_ts, 77 + i, keys, uniq, flags, 0)
        at += size
    assert at == pos + total


TWO = [BatchItem(0, b"a", ""), BatchItem(1, b"b", "")]


@pytest.mark.parametrize(("base", "first"), [(2**63 - 100, 0), (0, 2**63 - 1)])
def test_encode_batch_refuses_offsets_past_int64(base: int, first: int) -> None:
    args = (50, base, 3, first, 0, 1, bytes(8), 2, bytes(8), 0, b"\x02Tq", TWO, "", "Tq")
    with pytest.raises(OUT_OF_RANGE):
        encode_batch(bytearray(400), *args)


@pytest.mark.parametrize("pos", [-1, 400, 2**62, 2**63 - 60])
def test_encode_batch_refuses_a_position_off_the_buffer(pos: int) -> None:
    args = (pos, 0, 3, 0, 0, 1, bytes(8), 2, bytes(8), 0, b"\x02Tq", TWO, "", "Tq")
    buf = bytearray(400)
    with pytest.raises(ValueError, match="does not fit"):
        encode_batch(buf, *args)
    assert buf == bytearray(400)


def test_encode_batch_refuses_what_is_not_a_batch_item() -> None:
    with pytest.raises(TypeError):
        encode_batch(bytearray(400), 0, 0, 3, 0, 0, 1, bytes(8), 2, bytes(8), 0, b"\x02Tq",
                     [(0, b"", b"bytes")], "", "Tq")  # type: ignore[list-item]  # fmt: skip


# -- consume queues -------------------------------------------------------------------

UNIT = struct.Struct(">qiq")


def entry(logical: int, *, topic: str = "T", qid: int = 3, flag: int = 0, size: int = 100,
          phys: int = 0, code: int = 0) -> DispatchEntry:  # fmt: skip
    return (topic, qid, phys, size, code, 0, logical, None, None, flag, 0)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(I64, st.integers(-(2**31), 2**31 - 1), I64), max_size=12),
       st.sampled_from([0, 200, 1000]), st.integers(0, 10), st.integers(0, 22))  # fmt: skip
def test_write_units_writes_a_run(
    units: list[tuple[int, int, int]], start: int, wrote_units: int, room_units: int
) -> None:
    first = start // 20 + wrote_units
    entries = [entry(first + i, phys=p, size=s, code=c) for i, (p, s, c) in enumerate(units)]
    wrote = wrote_units * 20
    buf = bytearray(wrote + 20 * room_units)
    count = write_units(memoryview(buf), start, wrote, len(buf), entries, 0, len(entries), "T", 3)
    assert count == min(len(units), room_units)
    assert [UNIT.unpack_from(buf, wrote + 20 * i) for i in range(count)] == units[:count]
    assert buf[wrote + 20 * count :] == bytes(len(buf) - wrote - 20 * count)


@pytest.mark.parametrize(
    ("second", "written"),
    [
        (entry(1), 2),
        (entry(2), 1),  # not the next unit
        (entry(1, topic="U"), 1),
        (entry(1, qid=4), 1),
        (entry(1, flag=TRANSACTION_PREPARED_TYPE), 1),
        (entry(1, flag=TRANSACTION_ROLLBACK_TYPE), 1),
        (entry(1, flag=0x8), 2),  # COMMIT enters the queue
        (entry(1, flag=2**70), 2),  # a flag of any size, read by its low bits
        (entry(1, flag=2**70 | 0x4), 1),
        (entry(1, flag=-4), 1),  # -4 & 0xC is ROLLBACK
        (entry(2**64), 1),  # a logical offset past int64 is not the next unit
        (entry(2**62), 1),  # ... nor one whose product is
    ],
)
def test_write_units_stops_at_an_entry_that_does_not_continue(
    second: DispatchEntry, written: int
) -> None:
    buf = bytearray(60)
    assert write_units(memoryview(buf), 0, 0, 60, [entry(0), second], 0, 2, "T", 3) == written


def test_write_units_stops_when_the_segment_is_full_or_at_j() -> None:
    entries = [entry(i) for i in range(5)]
    assert write_units(memoryview(bytearray(100)), 0, 0, 40, entries, 0, 5, "T", 3) == 2
    assert write_units(memoryview(bytearray(100)), 0, 0, 100, entries, 0, 3, "T", 3) == 3
    assert write_units(memoryview(bytearray(100)), 0, 20, 100, entries, 1, 99, "T", 3) == 4


def test_write_units_indexes_from_the_end_as_a_list_does() -> None:
    entries = [entry(0), entry(1)]
    assert write_units(memoryview(bytearray(60)), 0, 20, 60, entries, -1, 2, "T", 3) == 1
    with pytest.raises(IndexError):
        write_units(memoryview(bytearray(60)), 0, 0, 60, entries, -3, 2, "T", 3)


@pytest.mark.parametrize("bad", [entry(0, size=2**31), entry(0, phys=2**63)])
def test_write_units_refuses_a_field_past_its_width(bad: DispatchEntry) -> None:
    with pytest.raises(OUT_OF_RANGE):
        write_units(memoryview(bytearray(60)), 0, 0, 60, [bad], 0, 1, "T", 3)


def test_write_units_refuses_a_unit_past_the_view() -> None:
    with pytest.raises(struct.error):
        write_units(memoryview(bytearray(30)), 0, 20, 60, [entry(1)], 0, 1, "T", 3)


# -- the reput's hand-off --------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 500)), max_size=12),
    st.integers(0, 6000),
    st.integers(0, 15),
)
def test_take_handoff_moves_the_entries_that_continue_the_log(
    records: list[tuple[int, int]], limit: int, budget: int
) -> None:
    # (gap before it, size): a gap breaks the run, as a record parsed from the log would
    entries: list[DispatchEntry] = []
    phys = 1000
    for gap, size in records:
        phys += gap
        entries.append(entry(len(entries), phys=phys, size=size))
        phys += size
    handoff = deque(entries)
    taken: list[DispatchEntry] = [entry(99)]
    cursor = 1000
    expect: list[DispatchEntry] = []
    for e in entries:  # the reference: the definition, one entry at a time
        if len(expect) == budget or e[2] != cursor or e[2] + e[3] > 1000 + limit:
            break
        expect.append(e)
        cursor += e[3]
    assert take_handoff(handoff, taken, 1000, 1000 + limit, budget) == (len(expect), cursor)
    assert taken == [entry(99), *expect]
    assert list(handoff) == entries[len(expect) :]


def test_take_handoff_refuses_an_entry_that_is_not_a_tuple() -> None:
    with pytest.raises(TypeError):
        take_handoff(deque([[0, 0, 0, 10]]), [], 0, 100, 5)


# -- index work -----------------------------------------------------------------------

KEY_TEXT = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(["a", "b", "a b"])


@st.composite
def entries_with_keys(draw: st.DrawFn) -> list[DispatchEntry]:
    out: list[DispatchEntry] = []
    offset = 0
    for _ in range(draw(st.integers(0, 12))):
        offset += draw(st.integers(0, 50))
        keys = draw(st.none() | st.lists(KEY_TEXT, max_size=4).map(" ".join))
        uniq = draw(st.none() | KEY_TEXT)
        flag = draw(st.sampled_from([0, 0x4, 0x8, 0xC]))
        topic = draw(st.sampled_from(["T", "Topic#2", "日本"]))
        ts = 1_700_000_000_000 + draw(st.integers(-5000, 10**7))
        out.append((topic, 0, offset, 10, 0, ts, 0, keys, uniq, flag, 0))
    return out


def index_work_by_reference(entries: list[DispatchEntry]) -> IndexWork:
    work: IndexWork = []
    for e in entries:
        if (e[7] or e[8]) and e[9] & 0xC != 0xC:
            hashes = [index_key_hash(key) for key in record_keys(e[0], e[7], e[8])]
            if hashes:
                work.append((e[2], e[5], hashes))
    return work


@settings(max_examples=400, deadline=None)
@given(entries_with_keys())
def test_index_work(batch: list[DispatchEntry]) -> None:
    assert index_work(batch) == index_work_by_reference(batch)


@pytest.mark.parametrize(
    ("one", "expected"),
    [
        (("T", 0, 5, 10, 0, 1000, 0, "k", None, 2**70, 0), [(5, 1000, [index_key_hash("T#k")])]),
        (("T", 0, 5, 10, 0, 1000, 0, "k", None, 2**70 | 0xC, 0), []),  # ROLLBACK
        (("T", 0, 5, 10, 0, 1000, 0, "k", None, -4, 0), []),  # -4 & 0xC is ROLLBACK
        (("\ud800", 0, 5, 10, 0, 1000, 0, "  ", None, 0, 0), []),  # no key: topic not hashed
    ],
)
def test_index_work_edges(one: Any, expected: Any) -> None:
    assert index_work([one]) == expected


def test_index_work_cannot_hash_a_topic_of_a_lone_surrogate() -> None:
    with pytest.raises(UnicodeEncodeError):
        index_work([("\ud800", 0, 5, 10, 0, 1000, 0, "k", None, 0, 0)])


# -- index put ------------------------------------------------------------------------


def put_by_reference(f: IndexFile, work: IndexWork, rec: int, key: int) -> tuple[int, int]:
    """``put_work``'s contract, one ``put_hash`` (the single put) at a time."""
    while rec < len(work):
        offset, timestamp, hashes = work[rec]
        if key == 0 and (f.already_indexed(offset) or not hashes):
            rec += 1
            continue
        while key < len(hashes):
            if not f.put_hash(hashes[key], offset, timestamp):
                return rec, key
            key += 1
        rec += 1
        key = 0
    return rec, 0


def _fill(path: Path, work: IndexWork, slots: int, entries: int, kernel: bool) -> list[Any]:
    """Put ``work`` into files of ``entries`` keys, rolling as the service does."""
    steps: list[Any] = []
    files: list[IndexFile] = []

    def roll() -> IndexFile:
        prev = files[-1] if files else None
        f = IndexFile.create(
            path / f"{len(files):017d}",
            hash_slot_num=slots,
            index_num=entries,
            end_phy_offset=prev.end_phy_offset if prev else 0,
            end_timestamp=prev.end_timestamp if prev else 0,
        )
        files.append(f)
        return f

    put = IndexFile.put_work if kernel else put_by_reference
    rec, key = put(roll(), work, 0, 0)
    steps.append((rec, key))
    while rec < len(work):
        rec, key = put(roll(), work, rec, key)
        steps.append((rec, key))
    for f in files:
        steps.append(repr(f))
        f.close()
    steps.extend((p.name, p.read_bytes()) for p in sorted(path.iterdir()))
    return steps


@settings(max_examples=100, deadline=None)
@given(entries_with_keys(), st.integers(1, 5), st.integers(2, 9))
def test_index_put(tmp_path_factory: pytest.TempPathFactory, batch: list[DispatchEntry],
                   slots: int, keys_per_file: int) -> None:  # fmt: skip
    work = index_work_by_reference(batch)
    work += [(w[0], w[1], list(w[2])) for w in work[:2]]  # records indexed already
    a = tmp_path_factory.mktemp("kernel")
    b = tmp_path_factory.mktemp("reference")
    assert _fill(a, work, slots, keys_per_file, True) == _fill(b, work, slots, keys_per_file, False)


@pytest.mark.parametrize(
    ("work", "rec", "key"),
    [
        ([(5, 1000, [7, 8])], 1, 1),  # nothing left: (rec, 0), whatever the key
        ([(5, 1000, [-7, 8, -(2**31)])], 0, 0),  # negative hashes take Python's modulo
        ([(5, 1000, [7]), (6, -(2**63), [8])], 0, 0),  # a time before the file's begin
        ([(5, 1000, [7]), (6, 2**63 - 1, [8])], 0, 0),  # a time difference past int32
    ],
)
def test_index_put_edges(tmp_path: Path, work: Any, rec: int, key: int) -> None:
    results: list[Any] = []
    for kernel in (True, False):
        path = tmp_path / str(kernel) / "00000000000000000"
        path.parent.mkdir()
        f = IndexFile.create(path, hash_slot_num=3, index_num=5, end_phy_offset=1)
        done = f.put_work(work, rec, key) if kernel else put_by_reference(f, work, rec, key)
        results.append((done, repr(f)))
        f.close()
        results.append(path.read_bytes())
    assert results[:2] == results[2:]


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1])
def test_index_put_refuses_a_hash_past_int32(tmp_path: Path, bad: int) -> None:
    f = IndexFile.create(tmp_path / "00000000000000000", hash_slot_num=3, index_num=5)
    with pytest.raises(OUT_OF_RANGE):
        f.put_work([(5, 1000, [7, bad])], 0, 0)
    f.close()


@pytest.mark.parametrize(
    ("slots", "entries", "count"),
    [(4, 4, -1), (4, 4, -(2**40)), (1, 2**62, 1), (2**61, 2, 1), (2**31, 1, 1), (0, 4, 1)],
)
def test_index_put_refuses_counts_that_do_not_describe_the_file(
    slots: int, entries: int, count: int
) -> None:
    mm = bytearray(40 + 4 * 4 + 20 * 4)
    with pytest.raises(ValueError, match=r"bad index_put|smaller than the index file"):
        index_put(mm, slots, entries, 0, 0, 0, 0, 0, count, [(5, 1000, [7])], 0, 0)
    assert mm == bytearray(len(mm))


def test_index_put_takes_the_work_and_each_key_list_as_lists() -> None:
    mm = bytearray(40 + 4 * 4 + 20 * 4)
    with pytest.raises(TypeError):
        index_put(mm, 4, 4, 0, 0, 0, 0, 0, 1, ((5, 1000, [7]),), 0, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        index_put(mm, 4, 4, 0, 0, 0, 0, 0, 1, [(5, 1000, (7,))], 0, 0)  # type: ignore[list-item]


# -- pwrite ----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 1000, 65535, 65536, 300_000])
def test_pwrite_all_writes_it_all(tmp_path: Path, length: int) -> None:
    data = os.urandom(300_001)
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        pwrite_all(fd, memoryview(data), length, 7)
    finally:
        os.close(fd)
    assert path.read_bytes() == (bytes(7) + data[:length] if length else b"")


@pytest.mark.parametrize(("length", "offset"), [(-1, 0), (11, 0), (5, -1)])
def test_pwrite_all_refuses_a_range_off_the_buffer(length: int, offset: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        pwrite_all(0, b"0123456789", length, offset)


def test_pwrite_all_raises_the_system_error(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="Bad file descriptor") as info:
            pwrite_all(fd, b"x", 1, 0)
        assert info.value.errno == 9
    finally:
        os.close(fd)


# -- a record read in place, and records derived from it ---------------------------------

FACT_NAMES = st.sampled_from(["PGROUP", "REAL_TOPIC", "TRAN_MSG", "TAGS", "", "PGROUPX", "ü"])
WANTED = (b"PGROUP", b"REAL_TOPIC", b"TAGS", "ü".encode())
DROPPED = (b"REAL_TOPIC", b"TRAN_MSG")


@st.composite
def fact_properties(draw: st.DrawFn) -> str:
    """Property strings: canonical (as ``properties_to_string`` writes them), canonical
    but for a name given twice, or anything."""
    kind = draw(st.integers(0, 2))
    if kind < 2:
        pairs = draw(st.dictionaries(FACT_NAMES.filter(bool), VALUES.filter(bool)))
        text = properties_to_string(pairs)
        if kind == 1 and pairs:
            name = draw(st.sampled_from(sorted(pairs)))
            at = draw(st.sampled_from([0, len(text)]))
            text = text[:at] + f"{name}\x01{draw(VALUES.filter(bool))}\x02" + text[at:]
        return text
    pieces = draw(
        st.lists(st.tuples(FACT_NAMES, st.sampled_from(["\x01", "", "\x01\x01"]), VALUES))
    )
    text = "\x02".join(name + sep + value for name, sep, value in pieces)
    return text + draw(st.sampled_from(["", "\x02", "\x02\x02"]))


def facts_by_decode(record: bytes) -> tuple[Any, ...]:
    """What ``record_facts`` must say of ``record``, by a full decode."""
    msg = decode_record(record)
    values = tuple(msg.properties.get(name.decode()) for name in WANTED)
    kept = {k: v for k, v in msg.properties.items() if k.encode() not in DROPPED}
    return (msg.topic, msg.queue_id, msg.queue_offset, msg.commit_log_offset, values,
            properties_to_string(kept).encode())  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(
    fact_properties(),
    st.sampled_from(["RMQ_SYS_TRANS_HALF_TOPIC", "t", "é-topic"]),
    HOSTS,
    HOSTS,
    st.tuples(I32, I64, I64),
    st.binary(max_size=64),
)
def test_record_facts_say_what_a_decode_says(  # noqa: PLR0917  # one per strategy
    props: str, topic: str, born: bytes, store: bytes, numbers: tuple[int, int, int], body: bytes
) -> None:
    queue_id, queue_offset, physical = numbers
    record = encode_record(
        topic=topic, body=body, queue_id=queue_id, properties=props, queue_offset=queue_offset,
        physical_offset=physical, born_host=unpack_host(born), store_host=unpack_host(store),
    )  # fmt: skip
    got = record_facts(memoryview(record), WANTED, DROPPED)
    canonical = props == properties_to_string(string_to_properties(props))
    assert (got is not None) == (canonical and topic.isascii())
    if got is not None:
        assert got == facts_by_decode(record)


def test_record_facts_take_only_one_whole_v1_record() -> None:
    props = "PGROUP\x01g\x02REAL_TOPIC\x01T\x02TRAN_MSG\x01true\x02"
    record = encode_record(topic="t", body=b"abc", properties=props, physical_offset=77)
    facts = record_facts(record, WANTED, DROPPED)
    assert facts == ("t", 0, 0, 77, ("g", "T", None, None), b"PGROUP\x01g\x02")
    v2 = bytearray(record)
    v2[4:8] = (-626843477).to_bytes(4, "big", signed=True)
    cut = bytearray(record)
    cut[-3:] = b"\0\0\0"  # a tail that reads back as zeros
    for bad in (record[:-1], record + b"x", bytes(v2), bytes(cut), record[:90]):
        assert record_facts(bad, WANTED, DROPPED) is None
    assert record_facts(record, (b"a",) * 10, (b"b",) * 7) is None  # over 16 names
    not_utf8 = encode_record(topic="t", body=b"", properties="A\x01x\x02")
    broken = not_utf8[:-2] + b"\xff\x02"
    assert record_facts(broken, WANTED, DROPPED) is None


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=200), HOSTS, HOSTS, st.tuples(I32, I64, I64, I32, I64, I32, I64),
    st.sampled_from(["Real", "é", "x" * 127]), fact_properties(), st.sampled_from([0, 8, 12]),
    st.integers(0, 9),
)  # fmt: skip
def test_a_derived_record_is_the_record_of_the_changed_message(  # noqa: PLR0917
    body: bytes, born: bytes, store: bytes, numbers: tuple[int, ...], topic: str, props: str,
    tx_type: int, pos: int,
) -> None:  # fmt: skip
    flag, born_ts, src_prepared, queue_id, queue_offset, sys_bits, prepared = numbers
    src = encode_record(
        topic="RMQ_SYS_TRANS_HALF_TOPIC", body=body, flag=flag, properties="A\x01b\x02",
        sys_flag=sys_bits & 0x7CF, born_timestamp=born_ts, born_host=unpack_host(born),
        store_host=unpack_host(store), reconsume_times=7, prepared_transaction_offset=src_prepared,
        queue_offset=3, physical_offset=99, store_timestamp=5,
    )  # fmt: skip
    half = decode_record(src)
    sys_flag = (half.sys_flag & ~0xC) | tx_type
    expected = encode_record(
        topic=topic, body=body, queue_id=queue_id, flag=flag, properties=props,
        queue_offset=queue_offset, physical_offset=pos * 1000, sys_flag=sys_flag,
        born_timestamp=born_ts, born_host=half.born_host, store_timestamp=123456,
        store_host=half.store_host, reconsume_times=7, prepared_transaction_offset=prepared,
    )  # fmt: skip
    tfield = topic_prefix(topic)
    raw = props.encode()
    derived = derived_record(memoryview(src), tfield, raw)
    assert derived is not None
    size, body_len, crc, flags, code, keys, uniq, host = derived
    assert (size, body_len, flags, host) == (len(expected), len(body), half.sys_flag, store)
    assert (code, keys, uniq) == message_fields(props)
    out = bytearray(pos + size + 3)
    encode_derived(out, pos, memoryview(src), queue_id, queue_offset, pos * 1000, sys_flag, 123456,
                   prepared, tfield, raw, crc, size)  # fmt: skip
    assert bytes(out[pos : pos + size]) == expected
    assert out[:pos] == bytes(pos) and out[pos + size :] == bytes(3)


def test_a_record_is_derived_only_from_a_whole_v1_record() -> None:
    src = encode_record(topic="t", body=b"abc", properties="A\x01b\x02")
    tfield = topic_prefix("x")
    assert derived_record(src[:-1], tfield, b"") is None
    assert derived_record(src + b"\0", tfield, b"") is None
    size = derived_record(src, tfield, b"")[0]  # type: ignore[index]
    out = bytearray(size)
    with pytest.raises(ValueError, match="not a whole v1 record"):
        encode_derived(out, 0, src[:-1], 0, 0, 0, 0, 0, 0, tfield, b"", 0, size)
    with pytest.raises(ValueError, match="size"):
        encode_derived(out, 0, src, 0, 0, 0, 0, 0, 0, tfield, b"", 0, size + 1)
    with pytest.raises(ValueError, match="host bits"):
        encode_derived(out, 0, src, 0, 0, 0, 0x10, 0, 0, tfield, b"", 0, size)
    with pytest.raises(ValueError, match="fit"):
        encode_derived(out, 1, src, 0, 0, 0, 0, 0, 0, tfield, b"", 0, size)
    with pytest.raises(OUT_OF_RANGE):
        encode_derived(out, 0, src, 2**31, 0, 0, 0, 0, 0, tfield, b"", 0, size)
    assert out == bytearray(size)  # nothing written by a refusal


# -- a whole store, by either build -----------------------------------------------------------


def _store_files(root: Path) -> dict[str, bytes]:
    """Every data file of a store, by path (the lock, abort and checkpoint files left out)."""
    out: dict[str, bytes] = {}
    for sub in ("commitlog", "consumequeue", "index"):
        for path in sorted((root / sub).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def fill_store(root: Path) -> dict[str, bytes]:
    """A store with every kind of append, dispatched; its data files."""
    clock = FakeClock()
    index = IndexService(root / "index", max_hash_slot_num=7, max_index_num=9, clock=clock)
    config = small_config(root, mapped_file_size_commit_log_bytes=8192)
    store = FileMessageStore.open(config, clock=clock, index=index)
    for i in range(30):
        store.put(message(queue_id=i % 3, body=bytes([i]) * (40 + i), tags=f"T{i % 2}",
                          keys=f"k{i} shared k{i}", uniq=f"U{i}"))  # fmt: skip
        clock.advance(0.7)
    store.put(message(sys_flag=TRANSACTION_PREPARED_TYPE, uniq="half"))
    store.put(message(sys_flag=TRANSACTION_ROLLBACK_TYPE, uniq="rolled"))
    store.put(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=1, extra={"DELAY": "2"}, tags="d"))
    store.put(message(born_host=("::1", 7), store_host=("::1", 10911), tags="v6 é"))
    store.put(message(body=b"", tags=None, keys=None, uniq=None, extra={"ü": "ß"}))
    items = [BatchItem(0, b"b%d" % i, f"TAGS\x01bt\x02UNIQ_KEY\x01B{i}\x02") for i in range(5)]
    store.put_batch(StoreBatch("Batched", 0, items, properties="CLUSTER\x01c\x02"))
    for source in (0, store.commit_log_max_offset() - 400):  # a first record, a batch's last
        view = store.read_message(store.record_start(source))
        assert view is not None
        store.put_derived(view, "Derived", 2, 8, source, b"TAGS\x01dt\x02KEYS\x01dk\x02")
        view.release()
    while store.dispatch_step(7):
        pass
    store.close()
    return _store_files(root)


def test_a_store_written_compiled_and_interpreted_is_the_same_bytes(tmp_path: Path) -> None:
    if not is_compiled(store_kernels):
        pytest.skip("the kernels run interpreted here: nothing to compare with")
    ours = fill_store(tmp_path / "compiled")
    code = "import sys; from pathlib import Path; from tests.unit.test_kernels import fill_store; "
    code += "fill_store(Path(sys.argv[1]))"
    env = dict(os.environ, APOGEE_PURE_PYTHON="1")
    env.pop("APOGEE_REQUIRE_SPEEDUPS", None)
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "interpreted")], env=env,
                   cwd=REPOSITORY, check=True)  # fmt: skip
    assert len(ours) > 10
    assert ours == _store_files(tmp_path / "interpreted")
