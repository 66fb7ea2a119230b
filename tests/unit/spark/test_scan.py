"""The record walk of pull bodies: compiled and interpreted copies agree, torn input included."""

from __future__ import annotations

import random

import pytest

from apogee._util.compiled import load_interpreted
from apogee.errors import ProtocolError
from apogee.model.message_codec import encode_record
from apogee.spark import scan

INTERPRETED = load_interpreted("apogee.spark.scan")


def pull_body(rng: random.Random, count: int) -> bytes:
    return b"".join(records(rng, count))


def records(rng: random.Random, count: int) -> list[bytes]:
    return [
        encode_record(
            topic="t",
            body=rng.randbytes(rng.randrange(100)),
            properties="a\x01b\x02" * rng.randrange(3),
            queue_offset=1000 + i,
            born_host=("::1", 1) if rng.random() < 0.3 else ("10.0.0.1", 1),
        )
        for i in range(count)
    ]


def outcome(module: object, body: bytes, end: int) -> object:
    try:
        return module.record_starts(body, end)  # type: ignore[attr-defined]
    except ProtocolError as exc:
        return str(exc)


@pytest.mark.parametrize("seed", range(3))
def test_both_copies_find_the_same_records_and_the_same_faults(seed: int) -> None:
    rng = random.Random(seed)
    made = records(rng, 50)
    body = b"".join(made)
    at = [sum(len(r) for r in made[:i]) for i in range(51)]  # where each record starts

    assert scan.record_starts(body, 1030) == (at[:30], at[30], 1030)
    assert scan.record_starts(body, 1 << 70) == (at[:50], len(body), 1050)
    assert scan.record_starts(body, 1000) == ([], 0, -1)
    for end in (0, 1000, 1030, 1050, 1 << 62, (1 << 64) + 5):
        assert outcome(scan, body, end) == outcome(INTERPRETED, body, end)
    for cut in sorted(rng.sample(range(1, len(body)), 20)):
        torn = body[:cut]
        assert outcome(scan, torn, 1 << 62) == outcome(INTERPRETED, torn, 1 << 62)
    garbage = body[:100] + b"\xff" * 8 + body[108:]
    assert outcome(scan, garbage, 2000) == outcome(INTERPRETED, garbage, 2000)


def test_a_record_cut_short_raises_naming_its_byte() -> None:
    body = pull_body(random.Random(1), 3)
    first = int.from_bytes(body[:4], "big")
    with pytest.raises(ProtocolError, match=f"record at byte {first} "):
        scan.record_starts(body[: first + 50], 1 << 62)
    assert scan.record_starts(b"", 5) == ([], 0, -1)


@pytest.mark.parametrize("module", [scan, INTERPRETED], ids=["as-built", "interpreted"])
def test_copy_runs_lays_runs_back_to_back_and_refuses_runs_out_of_bounds(module: object) -> None:
    copy_runs = module.copy_runs  # type: ignore[attr-defined]
    src = bytes(range(200))
    out = bytearray(b"\xee" * 16)

    assert copy_runs(src, [10, 0, 199, 50], [3, 2, 1, 0], out, 4) == 10
    assert bytes(out) == b"\xee" * 4 + bytes([10, 11, 12, 0, 1, 199]) + b"\xee" * 6

    for starts, lengths, at in (
        ([198], [3], 0),  # past the end of the source
        ([-1], [2], 0),
        ([0], [-1], 0),
        ([0], [17], 0),  # past the end of the output
        ([0], [4], 13),
        ([0], [1], -1),
    ):
        before = bytes(out)
        with pytest.raises(ValueError, match=r"copy_runs|outside|overflows"):
            copy_runs(src, starts, lengths, out, at)
        assert bytes(out) == before
    with pytest.raises(ValueError, match="as many lengths"):
        copy_runs(src, [0, 1], [1], out, 0)
