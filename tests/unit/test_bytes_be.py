"""The interpreted side of apogee._util.bytes_be; its C side (the .pxd) is inlined
into the compiled modules and covered through their tests (test_kernels, the decoders')."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from apogee._util.bytes_be import digits_at, get16, get32, get64, put16, put32, put64, same_at

Get = Callable[[Any, int], int]
Put = Callable[[Any, int, int], None]
CASES: list[tuple[Get, Put, str, list[int]]] = [
    (get16, put16, ">h", [0, 1, -1, 0x1234, 2**15 - 1, -(2**15)]),
    (get32, put32, ">i", [0, 1, -1, 0x12345678, 2**31 - 1, -(2**31)]),
    (get64, put64, ">q", [0, 1, -1, 0x123456789ABCDEF0, 2**63 - 1, -(2**63)]),
]


@pytest.mark.parametrize(("get", "put", "fmt", "values"), CASES)
def test_round_trip_at_an_offset(get: Get, put: Put, fmt: str, values: list[int]) -> None:
    size = struct.calcsize(fmt)
    for v in values:
        buf = bytearray(3 + size + 2)
        put(buf, 3, v)
        assert bytes(buf[3 : 3 + size]) == struct.pack(fmt, v)  # big-endian, signed
        assert buf[:3] == bytes(3) and buf[3 + size :] == bytes(2)  # nothing else written
        assert get(bytes(buf), 3) == v
        assert get(memoryview(buf), 3) == v


@pytest.mark.parametrize(("put", "fmt"), [(put, fmt) for _, put, fmt, _ in CASES])
def test_a_number_past_its_field_is_refused(put: Put, fmt: str) -> None:
    bits = struct.calcsize(fmt) * 8
    for v in (2 ** (bits - 1), -(2 ** (bits - 1)) - 1):
        with pytest.raises(struct.error):
            put(bytearray(8), 0, v)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_same_at_compares_the_run_at_its_offset(wrap: Callable[[bytes], Any]) -> None:
    buf = wrap(b'{"code":1,"flag":2}')
    assert same_at(buf, 2, b"code", 4)
    assert same_at(buf, 11, b"flag", 4)
    assert not same_at(buf, 1, b"code", 4)  # one byte early
    assert not same_at(buf, 2, b"codf", 4)
    assert not same_at(buf, 17, b"flag", 4)  # runs past the end


@pytest.mark.parametrize(
    ("text", "value"),
    [(b"0", 0), (b"-7", -7), (b"007", 7), (b"-0", 0), (b"9" * 18, 10**18 - 1),
     (b"9" * 19, None), (b"", None), (b"-", None), (b"+1", None), (b"1 ", None),
     (b"1.0", None), ("٣".encode(), None)],
)  # fmt: skip
def test_digits_at_reads_a_plain_decimal(text: bytes, value: int | None) -> None:
    out = [123]
    buf = b"xx" + text + b"yy"
    assert digits_at(buf, 2, 2 + len(text), out) is (value is not None)
    assert out[0] == (123 if value is None else value)
