"""The one pass over pull bodies: compiled and interpreted copies agree, torn input included."""

from __future__ import annotations

import random
from array import array

import pytest

from apogee._util.compiled import load_interpreted
from apogee.errors import ProtocolError
from apogee.model.message_codec import encode_record
from apogee.spark import scan

INTERPRETED = load_interpreted("apogee.spark.scan")


def records(rng: random.Random, count: int) -> list[bytes]:
    return [
        encode_record(
            topic="t",
            body=rng.randbytes(rng.randrange(100)),
            properties="a\x01b\x02" * rng.randrange(3) + rng.choice(["", "TAGS\x01x", "a\x01c"]),
            queue_offset=1000 + i,
            born_host=("::1", 1) if rng.random() < 0.3 else ("10.0.0.1", 1),
            store_host=("::2", 1) if rng.random() < 0.3 else ("10.0.0.2", 1),
        )
        for i in range(count)
    ]


def outcome(module: object, body: bytes, end: int) -> object:
    try:
        got = module.scan_records(body, end)  # type: ignore[attr-defined]
    except ProtocolError as exc:
        return str(exc)
    rows, n, entries, m, dropped, pos, next_offset = got
    return (
        list(array("q", rows)),
        n,
        list(array("q", entries))[: m * scan.ENTRY_WIDTH],
        m,
        dropped,
        pos,
        next_offset,
    )


def table(rows: bytearray, n: int) -> list[dict[str, int]]:
    cells = array("q", rows)
    w = scan.ROW_WIDTH
    return [dict(zip(scan.ROW_FIELDS, cells[i * w : (i + 1) * w], strict=True)) for i in range(n)]


@pytest.mark.parametrize("seed", range(3))
def test_both_copies_find_the_same_records_and_the_same_faults(seed: int) -> None:
    rng = random.Random(seed)
    made = records(rng, 50)
    body = b"".join(made)
    at = [sum(len(r) for r in made[:i]) for i in range(51)]  # where each record starts

    rows, n, *_, pos, next_offset = scan.scan_records(body, 1030)
    assert (n, pos, next_offset) == (30, at[30], 1030)
    assert [r["queue_offset"] for r in table(rows, n)] == list(range(1000, 1030))
    assert scan.scan_records(body, 1 << 70)[1:] == scan.scan_records(body, 1050)[1:]
    assert scan.scan_records(body, 1000)[1] == 0
    for end in (0, 1000, 1030, 1050, 1 << 62, (1 << 64) + 5):
        assert outcome(scan, body, end) == outcome(INTERPRETED, body, end)
    for cut in sorted(rng.sample(range(1, len(body)), 20)):
        torn = body[:cut]
        assert outcome(scan, torn, 1 << 62) == outcome(INTERPRETED, torn, 1 << 62)
    for _ in range(40):  # a byte anywhere overwritten: the same fault, or the same tables
        spot = rng.randrange(len(body) - 8)
        garbage = body[:spot] + rng.randbytes(8) + body[spot + 8 :]
        assert outcome(scan, garbage, 2000) == outcome(INTERPRETED, garbage, 2000)


def test_a_record_cut_short_raises_naming_its_byte() -> None:
    body = b"".join(records(random.Random(1), 3))
    first = int.from_bytes(body[:4], "big")
    with pytest.raises(ProtocolError, match=f"record at byte {first} "):
        scan.scan_records(body[: first + 50], 1 << 62)
    assert scan.scan_records(b"", 5)[1:] == (0, bytearray(), 0, 0, 0, -1)


@pytest.mark.parametrize("module", [scan, INTERPRETED], ids=["as-built", "interpreted"])
def test_lengths_past_a_records_end_are_protocol_errors(module: object) -> None:
    good = encode_record(topic="t", body=b"abc", properties="a\x01b", queue_offset=0)
    body_len_at = 84  # IPv4 hosts
    props_len_at = len(good) - 5
    for at, value, problem in (
        (body_len_at, 1 << 20, "body length"),
        (body_len_at, -1, "body length"),
        (props_len_at, 0x7FFF, "properties length"),
        (props_len_at, -2, "properties length"),
        (36, 0x30, "fixed fields"),  # IPv6 hosts claimed: the record is too short for them
    ):
        width = 4 if at in (body_len_at, 36) else 2
        bad = good[:at] + value.to_bytes(width, "big", signed=True) + good[at + width :]
        with pytest.raises(ProtocolError, match=f"record at byte 0 .*{problem}"):
            module.scan_records(bad, 10)  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", [scan, INTERPRETED], ids=["as-built", "interpreted"])
def test_property_pairs_split_as_rocketmq_does(module: object) -> None:
    text = "TAGS\x01a\x02x\x011\x02\x02=\x01\x02KEYS\x01k\x02x\x012\x02y\x01v\x01w\x02TAGS\x01b"
    body = encode_record(topic="t", body=b"", properties=text, queue_offset=0)
    rows, n, entries, m, dropped, *_ = module.scan_records(body, 1)  # type: ignore[attr-defined]
    row = table(rows, n)[0]
    cells = array("q", entries)
    pairs = [tuple(cells[i * 4 : i * 4 + 4]) for i in range(m)]

    def text_at(at: int, length: int) -> str | None:
        return None if length < 0 else body[at : at + length].decode()

    assert text_at(row["tags_at"], row["tags_len"]) == "b"  # the later TAGS
    assert text_at(row["keys_at"], row["keys_len"]) == "k"
    assert row["uniq_len"] == -1
    assert row["entries"] == m == 3
    assert dropped == 1
    assert [(text_at(a, n), text_at(v, k)) for a, n, v, k in pairs] == [
        (None, None),  # the first x, dropped for the later one
        ("x", "2"),
        ("y", "v\x01w"),
    ]


@pytest.mark.parametrize("module", [scan, INTERPRETED], ids=["as-built", "interpreted"])
def test_copy_fields_lays_runs_back_to_back_and_refuses_runs_out_of_bounds(
    module: object,
) -> None:
    copy_fields = module.copy_fields  # type: ignore[attr-defined]
    src = bytes(range(200))
    out = bytearray(b"\xee" * 16)
    # rows of (a cell before, start, length)
    cells = array("q", [7, 10, 3, 7, 0, 2, 7, 5, -1, 7, 199, 1, 7, 50, 0])

    assert copy_fields(src, cells, 3, 1, out, 4) == 10
    assert bytes(out) == b"\xee" * 4 + bytes([10, 11, 12, 0, 1, 199]) + b"\xee" * 6

    for rows, at in (
        ([0, 198, 3], 0),  # past the end of the source
        ([0, -1, 2], 0),
        ([0, 0, 17], 0),  # past the end of the output
        ([0, 0, 4], 13),
        ([0, 0, 1], -1),
        ([0, 0], 0),  # not whole rows
    ):
        before = bytes(out)
        with pytest.raises(ValueError, match=r"copy_fields|outside|overflows"):
            copy_fields(src, array("q", rows), 3, 1, out, at)
        assert bytes(out) == before
    with pytest.raises(ValueError, match="not in a row"):
        copy_fields(src, cells, 3, 2, out, 0)
