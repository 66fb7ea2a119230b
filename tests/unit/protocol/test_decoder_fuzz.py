"""Property tests: whatever bytes arrive, the decoders either decode or raise ProtocolError.

Anything else (struct.error, RecursionError, UnicodeDecodeError, ...) would
escape to the transport as a fatal error. The budget is kept small for
``make test``; ``APOGEE_FUZZ_EXAMPLES`` raises it for a longer run (see
docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apogee.codes import SerializeType
from apogee.errors import ProtocolError
from apogee.protocol import header_binary, header_json
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes

EXAMPLES = int(os.environ.get("APOGEE_FUZZ_EXAMPLES", "300"))
fuzz = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
header_objects = st.dictionaries(
    st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields",
                     "serializeTypeCurrentRPC"]) | st.text(max_size=6),
    json_values | st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    max_size=8,
)  # fmt: skip


def decodes_or_refuses(decode: object, header: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode(header, b"")  # type: ignore[operator]


@fuzz
@given(st.binary(max_size=200))
def test_binary_header_bytes(header: bytes) -> None:
    decodes_or_refuses(header_binary.decode, header)


@fuzz
@given(st.binary(min_size=13, max_size=13), st.binary(min_size=4, max_size=40), st.integers(0, 3))
def test_binary_header_whose_remark_eats_the_ext_length(
    fixed: bytes, tail: bytes, extra: int
) -> None:
    # The remark length covers the rest of the header, so no extFields length
    # word is left (or only part of one).
    assert header_binary.MIN_HEADER_LENGTH == 21
    header = fixed + struct.pack(">i", len(tail) - extra) + tail
    decodes_or_refuses(header_binary.decode, header)


@fuzz
@given(st.binary(max_size=200))
def test_json_header_bytes(header: bytes) -> None:
    decodes_or_refuses(header_json.decode, header)


@fuzz
@given(header_objects)
def test_json_header_objects(obj: dict[str, object]) -> None:
    decodes_or_refuses(header_json.decode, json.dumps(obj).encode())


def test_deeply_nested_ext_values_are_refused_not_a_recursion_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    header = b'{"code":10,"opaque":1,"extFields":{"a":' + deep + b"}}"
    decodes_or_refuses(header_json.decode, header)
    nested_object = b'{"x":' * 5000 + b"1" + b"}" * 5000
    decodes_or_refuses(header_json.decode, b'{"code":10,"extFields":{"a":' + nested_object + b"}}")


@fuzz
@given(st.lists(st.binary(max_size=64), max_size=6))
def test_frame_stream_of_any_bytes(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    try:
        for chunk in chunks:
            decoder.feed(chunk)
    except ProtocolError:
        pass


@fuzz
@given(st.sampled_from(SerializeType), st.binary(max_size=40), st.integers(0, 200))
def test_a_valid_frame_with_damaged_bytes(stype: SerializeType, noise: bytes, at: int) -> None:
    cmd = RemotingCommand.request(10, {"a": "1", "topic": "T"}, b"body")
    cmd.serialize_type = stype
    frame = bytearray(encode_bytes(cmd))
    at = 4 + at % max(1, len(frame) - 4)
    frame[at : at + len(noise)] = noise
    with contextlib.suppress(ProtocolError):
        FrameDecoder().feed(bytes(frame))
