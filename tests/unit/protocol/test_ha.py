"""The classic HA wire format: reports and transfer frames, split anywhere."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.errors import ProtocolError
from apogee.protocol.ha import (
    HEADER_SIZE,
    ReportReader,
    TransferReader,
    encode_header,
    encode_report,
)


def test_layouts_are_rocketmqs() -> None:
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_header(1 << 32, 5) == bytes.fromhex("000000010000000000000005")
    assert encode_header(7, 0)[8:] == b"\0\0\0\0"  # a heartbeat
    with pytest.raises(ValueError, match="negative"):
        encode_report(-1)
    with pytest.raises(ValueError, match="out of range"):
        encode_header(0, -1)


def test_the_master_keeps_the_newest_whole_report() -> None:
    reader = ReportReader()
    stream = encode_report(10) + encode_report(20) + encode_report(30)
    assert reader.feed(stream[:5]) is None
    assert reader.feed(stream[5:17]) == 20  # 10 whole, 20 whole, 3 bytes of 30
    assert reader.feed(stream[17:23]) is None
    assert reader.feed(stream[23:]) == 30
    assert reader.reports == 3


def test_a_negative_report_is_refused() -> None:
    with pytest.raises(ProtocolError, match="negative"):
        ReportReader().feed(struct.pack(">q", -5))


def _feed(reader: TransferReader, data: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    pos = 0
    for cut in [*sorted(cuts), len(data)]:
        while pos < cut:
            buf = reader.buffer()
            n = min(len(buf), cut - pos)
            buf[:n] = data[pos : pos + n]
            buf.release()
            reader.filled(n)
            pos += n
            out += [(offset, bytes(body)) for offset, body in reader.frames()]
    return out


@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=8),
)
def test_frames_come_out_whole_however_the_stream_is_cut(
    bodies: list[bytes], cuts: list[int]
) -> None:
    frames, offset = [], 1000
    for body in bodies:
        frames.append((offset, body))
        offset += len(body)
    data = b"".join(encode_header(o, len(b)) + b for o, b in frames)
    reader = TransferReader(capacity=256, max_frame_bytes=1024)
    got = _feed(reader, data, [c for c in cuts if c < len(data)])
    assert got == frames
    assert reader.pending == 0


def test_a_frame_larger_than_the_buffer_grows_it_up_to_the_limit() -> None:
    reader = TransferReader(capacity=64, max_frame_bytes=10_000)
    big = bytes(range(256)) * 20
    data = encode_header(0, len(big)) + big + encode_header(len(big), 0)
    assert _feed(reader, data, [10, 100, 3000]) == [(0, big), (len(big), b"")]
    with pytest.raises(ProtocolError, match="exceeds"):
        _feed(TransferReader(capacity=64, max_frame_bytes=100), encode_header(0, 101), [])


def test_a_negative_header_is_a_protocol_error() -> None:
    reader = TransferReader(capacity=64)
    data = struct.pack(">qi", -1, 0)
    with pytest.raises(ProtocolError, match="bad transfer header"):
        _feed(reader, data, [])
    assert HEADER_SIZE == 12
