"""The compiled kernels give what their Python twins give, byte for byte.

Each kernel of ``apogee._speedups`` is compared with the Python function it
mirrors on generated inputs; errors must be of the same class. Skipped when
the extension is not built.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee._util.clock import FakeClock
from apogee._util.native import speedups
from apogee.model.javahash import java_string_hash_python
from apogee.model.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchItem,
    StoreBatch,
)
from apogee.model.message_codec import decode_batch_python, encode_record_into_python
from apogee.store.commitlog import encode_batch_python, prepare_batch_python
from apogee.store.consume_queue import write_units_python
from apogee.store.dispatch import DispatchEntry, message_fields_python
from apogee.store.file_store import FileMessageStore
from apogee.store.index_file import IndexFile, IndexWork
from apogee.store.index_service import IndexService, index_work_python
from apogee.testing.store import message, small_config
from tests.harness.kernels import KERNEL_SITES, python_kernels

pytestmark = pytest.mark.skipif(
    speedups is None and os.environ.get("APOGEE_REQUIRE_SPEEDUPS") != "1",
    reason="apogee._speedups is not built",
)
native: Any = speedups


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """The value, or the exception class, of ``fn(*args)``."""
    try:
        return "value", fn(*args)
    except Exception as exc:
        return "raised", type(exc)


def test_the_extension_is_built() -> None:
    assert speedups is not None, "apogee._speedups did not build (is a C compiler installed?)"


class Meddler:
    """An int whose every use first runs ``hook``, which may change the caller's lists.

    A kernel must hold what it reads across such calls (they run Python code)
    and see the lists as they are afterwards, as the Python twin does.
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: int, hook: Callable[[], None]) -> None:
        self.value = value
        self.hook = hook

    def __index__(self) -> int:
        self.hook()
        return self.value

    def __len__(self) -> int:
        return self.__index__()

    def __and__(self, other: int) -> int:
        return self.__index__() & other

    def __mod__(self, other: int) -> int:
        return self.__index__() % other

    def __eq__(self, other: object) -> bool:
        return self.__index__() == other

    def __ne__(self, other: object) -> bool:
        return self.__index__() != other


def test_every_kernel_has_a_site_and_python_kernels_replaces_them_all() -> None:
    kernels = {name for name in dir(native) if not name.startswith("_")}
    bound = {getattr(owner, name) for owner, name, _ in KERNEL_SITES}
    assert {name for name in kernels if getattr(native, name) in bound} == kernels
    with python_kernels():
        now = [getattr(owner, name) for owner, name, _ in KERNEL_SITES]
        assert not any(fn in {getattr(native, k) for k in kernels} for fn in now)


# -- Java hash --------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=200) | st.text(max_size=50)


@settings(max_examples=500, deadline=None)
@given(ANY_TEXT)
def test_java_hash(text: str) -> None:
    assert native.java_hash(text) == java_string_hash_python(text)


@pytest.mark.parametrize("text", ["\ud800", "a\udfff", "\U0001f600\ud83d", "x" * 1000])
def test_java_hash_edges(text: str) -> None:
    assert outcome(native.java_hash, text) == outcome(java_string_hash_python, text)


# -- property strings ----------------------------------------------------------------

NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "TAG", "KEYSX", "", "WAIT", "tags"])
VALUES = st.text(st.characters(codec="utf-8", exclude_characters="\x02"), max_size=8)


@st.composite
def property_strings(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.tuples(NAMES, st.sampled_from(["\x01", "", "\x01\x01"]), VALUES)))
    text = "\x02".join(name + sep + value for name, sep, value in pieces)
    return text + draw(st.sampled_from(["", "\x02", "\x02\x02"]))


@settings(max_examples=1000, deadline=None)
@given(property_strings())
def test_message_fields(text: str) -> None:
    assert native.message_fields(text) == message_fields_python(text)


@pytest.mark.parametrize(
    "text",
    ["ua\x01\ud800\x02TAGS\x01t\x02", "KEYS\x01a\udfffb\x02", "TAGS\x01x\ud83d\x02", "\ud800"],
)
def test_message_fields_with_lone_surrogates(text: str) -> None:
    assert outcome(native.message_fields, text) == outcome(message_fields_python, text)


# -- record encoding ------------------------------------------------------------------

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
HOSTS = st.sampled_from([bytes(range(8)), bytes(range(20)), b"\x7f\0\0\x01\0\0\x2a\x9f"])
ANY_HOSTS = HOSTS | st.binary(max_size=24)  # struct pads or cuts to the 8 or 20 bytes stored


@settings(max_examples=300, deadline=None)
@given(
    st.tuples(I32, I32, I64, I64, I32, I64, HOSTS, I64, HOSTS, I32, I64),
    st.binary(max_size=300),
    st.binary(min_size=1, max_size=40),
    st.binary(max_size=200),
    st.none() | st.integers(0, 2**31 - 1),
    st.integers(0, 16),
)
def test_encode_record_into(  # noqa: PLR0917  # one argument per strategy
    fields: tuple[Any, ...], body: bytes, topic: bytes, props: bytes, crc: int | None, pos: int
) -> None:
    tfield = bytes((len(topic),)) + topic
    args = (pos, *fields, body, tfield, props, crc)
    a, b = bytearray(1200), bytearray(1200)
    assert outcome(native.encode_record_into, a, *args) == outcome(
        encode_record_into_python, b, *args
    )
    assert a == b


ARG_NAMES = [
    "pos",
    "queue_id",
    "flag",
    "queue_offset",
    "physical_offset",
    "sys_flag",
    "born_timestamp",
    "born_host",
    "store_timestamp",
    "store_host",
    "reconsume_times",
    "prepared",
    "body",
    "topic_field",
    "properties",
]


@pytest.mark.parametrize(
    "change",
    [
        {"queue_id": 2**31},
        {"queue_offset": 2**63},
        {"reconsume_times": -(2**31) - 1},
        {"prepared": 2**64},
        {"properties": b"p" * 40000},
    ],
)
def test_encode_record_into_refuses_what_struct_refuses(change: dict[str, Any]) -> None:
    values: list[Any] = [0, 1, 2, 3, 4, 5, 6, bytes(8), 7, bytes(8), 8, 9, b"body", b"\x01T", b"p"]
    for name, value in change.items():
        values[ARG_NAMES.index(name)] = value
    a, b = bytearray(50000), bytearray(50000)
    assert outcome(native.encode_record_into, a, *values) == outcome(
        encode_record_into_python, b, *values
    )
    assert outcome(native.encode_record_into, a, *values)[1] is struct.error


@pytest.mark.parametrize("pos", [-1, 1200, 2**62, 2**63 - 60])
def test_encode_record_into_refuses_a_position_off_the_buffer(pos: int) -> None:
    values = [pos, 1, 2, 3, 4, 5, 6, bytes(8), 7, bytes(8), 8, 9, b"body", b"\x01T", b"p"]
    buf = bytearray(1200)
    with pytest.raises(ValueError, match="does not fit"):
        native.encode_record_into(buf, *values)
    assert buf == bytearray(1200)


# -- batches ------------------------------------------------------------------------


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    out = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        body = draw(st.binary(max_size=40))
        props = draw(property_strings()).encode()
        flag = draw(I32)
        out += struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, flag, len(body))
        out += body + struct.pack(">h", len(props)) + props
    if draw(st.booleans()) and out:  # damage: cut, bad lengths, bad UTF-8
        at = draw(st.integers(0, len(out) - 1))
        how = draw(st.sampled_from(["cut", "byte", "utf8"]))
        if how == "cut":
            del out[at:]
        elif how == "byte":
            out[at] = draw(st.integers(0, 255))
        else:
            out[at:at] = b"\xff"
    return bytes(out)


def decoded(fn: Any, body: bytes | bytearray) -> Any:
    try:
        return [(flag, bytes(b), p, type(b)) for flag, b, p in fn(body)]
    except Exception as exc:
        cause = exc.__cause__
        return type(exc), str(exc), type(cause), exc.__suppress_context__


@settings(max_examples=500, deadline=None)
@given(batch_bodies())
def test_decode_batch(body: bytes) -> None:
    result = decoded(native.decode_batch, body)
    assert result == decoded(decode_batch_python, body)
    if isinstance(result, list):  # also from a view of a bytearray
        items = native.decode_batch(memoryview(bytearray(body)))
        assert all(type(item) is BatchItem for item in items)
        frozen = native.decode_batch(body)  # bodies of bytes: hashable views
        assert [hash(item) for item in frozen] == [hash(tuple(item)) for item in frozen]
        assert decoded(native.decode_batch, bytearray(body)) == result


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
    args = (items, extra, max_body, fixed, max_record)
    assert outcome(native.prepare_batch, *args) == outcome(prepare_batch_python, *args)


def test_prepare_batch_refuses_long_properties_first() -> None:
    items = [BatchItem(0, b"b", "p" * 40000)]
    assert native.prepare_batch(items, "", 10**6, 10, 10) == (1, 40011)
    assert prepare_batch_python(items, "", 10**6, 10, 10) == (1, 40011)


def test_prepare_batch_of_no_items_leaves_the_batch_properties_unencoded() -> None:
    args: tuple[Any, ...] = ([], "A\x01\ud800", 100, 10, 100)
    assert outcome(native.prepare_batch, *args) == outcome(prepare_batch_python, *args)


@pytest.mark.parametrize("clear_at", [1, 2])
def test_prepare_batch_sees_the_items_as_a_length_call_leaves_them(clear_at: int) -> None:
    def run(fn: Any) -> Any:
        items: list[Any] = []
        calls: list[int] = []

        def hook() -> None:
            calls.append(1)
            if len(calls) == clear_at:
                items.clear()

        items += [(0, Meddler(3, hook), "a"), (0, b"x", "b")]
        return outcome(fn, items, "", 1000, 10, 1000)

    assert run(native.prepare_batch) == run(prepare_batch_python)


@settings(max_examples=300, deadline=None)
@given(batch_items(), property_strings(), ANY_HOSTS, ANY_HOSTS, st.integers(0, 30), I64, I64)
def test_encode_batch(  # noqa: PLR0917  # one argument per strategy
    items: list[BatchItem], extra: str, born: bytes, store: bytes, pos: int, born_ts: int,
    store_ts: int,
) -> None:  # fmt: skip
    fixed = 74 + 3 + len(born) + len(store)
    prepared = prepare_batch_python(items, extra, 10**6, fixed, 10**6)
    assert len(prepared) == 3
    total, records, index = prepared
    args = (pos, 1 << 40, 3, 77, 0x10, born_ts, born, store_ts, store, 2, b"\x02Tq", records,
            index, "Tq")  # fmt: skip
    room = pos + total + 8 + 16 * len(records)  # odd hosts take more than ``fixed`` counts
    a, b = bytearray(room), bytearray(room)
    assert native.encode_batch(a, *args) == encode_batch_python(b, *args)
    assert a == b


def _two_records() -> tuple[list[Any], list[Any]]:
    prepared = prepare_batch_python(
        [BatchItem(0, b"a", ""), BatchItem(1, b"b", "")], "", 999, 93, 999
    )
    assert len(prepared) == 3
    return list(prepared[1]), list(prepared[2])


@pytest.mark.parametrize(("base", "first"), [(2**63 - 100, 0), (0, 2**63 - 1)])
def test_encode_batch_refuses_offsets_past_int64_as_struct_does(base: int, first: int) -> None:
    records, index = _two_records()
    args = (50, base, 3, first, 0, 1, bytes(8), 2, bytes(8), 0, b"\x02Tq", records, index, "Tq")
    a, b = bytearray(400), bytearray(400)
    assert outcome(native.encode_batch, a, *args) == outcome(encode_batch_python, b, *args)
    assert outcome(native.encode_batch, a, *args)[1] is struct.error


@pytest.mark.parametrize("pos", [-1, 400, 2**62, 2**63 - 60])
def test_encode_batch_refuses_a_position_off_the_buffer(pos: int) -> None:
    records, index = _two_records()
    args = (pos, 0, 3, 0, 0, 1, bytes(8), 2, bytes(8), 0, b"\x02Tq", records, index, "Tq")
    buf = bytearray(400)
    with pytest.raises(ValueError, match="does not fit"):
        native.encode_batch(buf, *args)
    assert buf == bytearray(400)


def test_encode_batch_sees_the_records_as_a_flag_conversion_leaves_them() -> None:
    def run(fn: Any) -> Any:
        records, index = _two_records()
        records[0] = (Meddler(0, records.clear), *records[0][1:])
        args = (0, 0, 3, 0, 0, 1, bytes(8), 2, bytes(8), 0, b"\x02Tq", records, index, "Tq")
        buf = bytearray(400)
        return outcome(fn, buf, *args), bytes(buf)

    assert run(native.encode_batch) == run(encode_batch_python)


# -- consume queues -------------------------------------------------------------------


@st.composite
def unit_runs(draw: st.DrawFn) -> tuple[list[DispatchEntry], int, int, int]:
    """Entries mostly continuing one queue's file, with the odd break in the run."""
    start = draw(st.sampled_from([0, 200, 1000]))
    logical = start // 20 + draw(st.sampled_from([0, 0, 0, 1]))
    entries: list[DispatchEntry] = []
    for _ in range(draw(st.integers(0, 12))):
        topic = draw(st.sampled_from(["T", "T", "T", "U"]))
        qid = draw(st.sampled_from([3, 3, 3, 4]))
        flag = draw(st.sampled_from([0, 0, 0x8, 0x4, 0xC]))
        size = draw(st.sampled_from([100, 2**31 - 1, 2**31]))
        code = draw(I64)
        entries.append((topic, qid, draw(I64), size, code, 0, logical, None, None, flag, 0))
        logical += draw(st.sampled_from([1, 1, 1, 0, 2]))
    return entries, start, draw(st.integers(0, 200)), draw(st.integers(0, 400))


@settings(max_examples=500, deadline=None)
@given(unit_runs(), st.integers(0, 3), st.integers(0, 14))
def test_write_units(run: tuple[list[DispatchEntry], int, int, int], i: int, j: int) -> None:
    entries, start, wrote, size = run
    wrote -= wrote % 20
    a, b = bytearray(440), bytearray(440)
    args = (start, wrote, size, entries, i, j, "T", 3)
    result = outcome(native.write_units, memoryview(a), *args)
    assert result == outcome(write_units_python, memoryview(b), *args)
    if result[0] == "value":  # after a refusal the bytes written so far may differ
        assert a == b


UNIT = ("T", 3, 0, 100, 0, 0, 0, None, None, 0, 0)


@pytest.mark.parametrize(
    ("entry", "i"),
    [
        (UNIT, -2),  # a negative start counts from the end, as list indexing does
        (UNIT, -3),  # ... and past the start is an IndexError
        (("T", 3, 0, 100, 0, 0, 2**62, None, None, 0, 0), 0),  # 2**62 * 20 is 0 in int64
        (("T", 3, 0, 100, 0, 0, 2**64, None, None, 0, 0), 0),  # logical past int64
        (("T", 3, 0, 100, 0, 0, 0, None, None, 2**70, 0), 0),  # a flag past int64, queued
        (("T", 3, 0, 100, 0, 0, 0, None, None, 2**70 | 0x4, 0), 0),  # ... PREPARED
        (("U", 3, 2**64, 100, 2**64, 0, 0, None, None, 0, 0), 0),  # not packed: other topic
        (("T", 4, 0, 2**31, 0, 0, 0, None, None, 0xC, 0), 0),  # not packed: ROLLBACK
    ],
)
def test_write_units_edges(entry: Any, i: int) -> None:
    entries = [entry, ("T", 3, 5, 100, 0, 0, 1, None, None, 0, 0)]
    a, b = bytearray(60), bytearray(60)
    args = (0, 0, 60, entries, i, 2, "T", 3)
    result = outcome(native.write_units, memoryview(a), *args)
    assert result == outcome(write_units_python, memoryview(b), *args)
    assert a == b


def test_write_units_sees_the_entries_as_a_comparison_leaves_them() -> None:
    def run(fn: Any) -> Any:
        entries: list[Any] = []
        entries += [("T", Meddler(3, entries.clear), *UNIT[2:]), ("T", 3, 5, 1, 0, 0, 1, *UNIT[7:])]
        buf = bytearray(60)
        return outcome(fn, memoryview(buf), 0, 0, 60, entries, 0, 2, "T", 3), bytes(buf)

    assert run(native.write_units) == run(write_units_python)


# -- index ---------------------------------------------------------------------------

KEY_TEXT = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(["a", "b", "a b"])


@st.composite
def entries(draw: st.DrawFn) -> list[DispatchEntry]:
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


@settings(max_examples=400, deadline=None)
@given(entries())
def test_index_work(batch: list[DispatchEntry]) -> None:
    assert native.index_work(batch) == index_work_python(batch)


@pytest.mark.parametrize(
    "entry",
    [
        ("T", 0, 5, 10, 0, 1000, 0, "k", None, 2**70, 0),  # a flag past int64
        ("T", 0, 5, 10, 0, 1000, 0, "k", None, 2**70 | 0xC, 0),  # ... ROLLBACK
        ("T", 0, 5, 10, 0, 1000, 0, "k", None, -4, 0),  # -4 & 0xC is ROLLBACK
        ("\ud800", 0, 5, 10, 0, 1000, 0, "  ", None, 0, 0),  # no key: the topic is not hashed
        ("\ud800", 0, 5, 10, 0, 1000, 0, "k", None, 0, 0),  # ... else its hash fails
    ],
)
def test_index_work_edges(entry: Any) -> None:
    assert outcome(native.index_work, [entry]) == outcome(index_work_python, [entry])


def test_index_work_sees_the_entries_as_a_flag_leaves_them() -> None:
    def run(fn: Any) -> Any:
        entries: list[Any] = []
        flag = Meddler(0, entries.clear)
        entries += [
            ("T", 0, 5, 10, 0, 1000, 0, "k", None, flag, 0),
            ("T", 0, 6, 10, 0, 1000, 0, "j", None, 0, 0),
        ]
        return outcome(fn, entries)

    assert run(native.index_work) == run(index_work_python)


def _fill(path: Path, work: IndexWork, slots: int, entries: int, compiled: bool) -> list[Any]:
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

    put = IndexFile.put_work if compiled else IndexFile.put_work_python
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


@settings(max_examples=200, deadline=None)
@given(entries(), st.integers(1, 5), st.integers(2, 9))
def test_index_put(tmp_path_factory: pytest.TempPathFactory, batch: list[DispatchEntry],
                   slots: int, keys_per_file: int) -> None:  # fmt: skip
    work = index_work_python(batch)
    work += [(w[0], w[1], list(w[2])) for w in work[:2]]  # records indexed already
    a = tmp_path_factory.mktemp("compiled")
    b = tmp_path_factory.mktemp("python")
    assert _fill(a, work, slots, keys_per_file, True) == _fill(b, work, slots, keys_per_file, False)


def _put_once(root: Path, work: Any, rec: int, key: int, compiled: bool) -> Any:
    path = root / ("compiled" if compiled else "python") / "00000000000000000"
    path.parent.mkdir()
    f = IndexFile.create(path, hash_slot_num=3, index_num=5, end_phy_offset=1)
    put = IndexFile.put_work if compiled else IndexFile.put_work_python
    result = outcome(put, f, work, rec, key)
    state = repr(f)
    f.close()
    if result[0] == "raised":  # what was put before a refusal may differ
        return result
    return result, state, path.read_bytes()


@pytest.mark.parametrize(
    ("work", "rec", "key"),
    [
        ([(5, 1000, [7, 8])], 1, 1),  # nothing left: (rec, 0), whatever the key
        ([(5, 1000, [-7, 8, -(2**31)])], 0, 0),  # negative hashes take Python's modulo
        ([(5, 1000, [7, 2**31])], 0, 0),  # a hash past int32 is a struct.error
        ([(5, 1000, [-(2**31) - 1])], 0, 0),
        ([(5, 1000, [7]), (6, -(2**63), [8])], 0, 0),  # a time difference past int64
    ],
)
def test_index_put_edges(tmp_path: Path, work: Any, rec: int, key: int) -> None:
    compiled = _put_once(tmp_path, work, rec, key, True)
    assert compiled == _put_once(tmp_path, work, rec, key, False)


@pytest.mark.parametrize(
    ("slots", "entries", "count"),
    [(4, 4, -1), (4, 4, -(2**40)), (1, 2**62, 1), (2**61, 2, 1), (2**31, 1, 1)],
)
def test_index_put_refuses_counts_that_do_not_describe_the_file(
    slots: int, entries: int, count: int
) -> None:
    mm = bytearray(40 + 4 * 4 + 20 * 4)
    with pytest.raises(ValueError, match="bad index_put"):
        native.index_put(mm, slots, entries, 0, 0, 0, 0, 0, count, [(5, 1000, [7])], 0, 0)
    assert mm == bytearray(len(mm))


def test_index_put_sees_the_work_as_a_hash_conversion_leaves_it(tmp_path: Path) -> None:
    def work() -> list[Any]:
        hashes: list[Any] = []
        out: list[Any] = [(5, 1000, hashes)]

        def hook() -> None:
            hashes.clear()
            out.clear()

        hashes += [Meddler(7, hook), 9]
        return out

    compiled = _put_once(tmp_path, work(), 0, 0, True)
    assert compiled == _put_once(tmp_path, work(), 0, 0, False)


# -- a whole store ---------------------------------------------------------------------


def _store_files(root: Path) -> dict[str, bytes]:
    """Every data file of a store, by path (the lock, abort and checkpoint files left out)."""
    out: dict[str, bytes] = {}
    for sub in ("commitlog", "consumequeue", "index"):
        for path in sorted((root / sub).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _fill_store(root: Path) -> dict[str, bytes]:
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
    while store.dispatch_step(7):
        pass
    store.close()
    return _store_files(root)


def test_a_store_written_by_either_twin_is_the_same_bytes(tmp_path: Path) -> None:
    compiled = _fill_store(tmp_path / "compiled")
    with python_kernels():
        python = _fill_store(tmp_path / "python")
    assert len(compiled) > 10
    assert compiled == python
