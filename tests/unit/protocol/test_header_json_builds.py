"""The JSON header codec with the compiled direct route (``header_scan`` reads,
``header_write`` writes) against the dict route run interpreted: same commands,
same bytes, same errors, for well-formed headers and for damaged ones alike."""

from __future__ import annotations

import json
import struct
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apogee.codes import LanguageCode, ResponseCode, SerializeType
from apogee.errors import ProtocolError
from apogee.protocol import framing, header_json
from apogee.protocol.command import RemotingCommand, new_command
from tests.harness.damage import damaged
from tests.harness.kernels import module_build

REQUIRED_BUILDS = ("compiled", "interpreted")


@pytest.fixture(scope="module")
def builds(scan: ModuleType) -> tuple[Any, Any]:
    """(header_json with the direct route first, the dict route run interpreted)."""
    dict_route = module_build("apogee.protocol.header_json", "interpreted")
    interpreted = SimpleNamespace(decode=dict_route._decode_dict, encode=dict_route._encode_dict)
    return header_json, interpreted


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        result = fn(*args)
    except ProtocolError as exc:
        return "error", str(exc)
    if isinstance(result, RemotingCommand):
        return "command", fields(result)
    return "bytes", result


def fields(cmd: RemotingCommand) -> tuple[Any, ...]:
    # types too: a bool where an int belongs, an int where a LanguageCode does
    return (
        (type(cmd.code), cmd.code), (type(cmd.language), cmd.language),
        (type(cmd.version), cmd.version), (type(cmd.opaque), cmd.opaque),
        (type(cmd.flag), cmd.flag), (type(cmd.remark), cmd.remark),
        list(cmd.ext_fields.items()), [type(v) for v in cmd.ext_fields.values()],
        cmd.body, cmd.serialize_type,
    )  # fmt: skip


def same_decode(builds: tuple[Any, Any], header: bytes) -> None:
    compiled, interpreted = builds
    for buffer in (header, bytearray(header), memoryview(header)):
        assert outcome(compiled.decode, buffer, b"b") == outcome(interpreted.decode, header, b"b")


# Text with everything JSON must escape or may hold: quotes, backslashes, the
# property separators \x01 and \x02, other controls, non-ASCII, astral characters.
texts = st.text(
    st.characters(codec="utf-8")
    | st.sampled_from(["\x01", "\x02", '"', "\\", "/", "\n", "\x7f", "é", "😀", "\u2028"]),
    max_size=12,
)
ints = (
    st.integers(-(2**31), 2**31 - 1) | st.integers() | st.sampled_from([0, -1, 2**31, -(2**31) - 1])
)
scalars = st.none() | st.booleans() | ints | st.floats(allow_nan=False) | texts
values = scalars | st.lists(scalars, max_size=2) | st.dictionaries(texts, scalars, max_size=2)
languages = st.sampled_from([m.name for m in LanguageCode]) | st.sampled_from(["3", "99", "x"])


@st.composite
def header_objects(draw: st.DrawFn) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, strategy in (
        ("code", ints | st.sampled_from([None, "10", 1.0, True])),
        ("extFields", st.none() | st.dictionaries(texts | st.sampled_from("abcdefghijklmn"),
                                                  scalars if draw(st.booleans()) else values,
                                                  max_size=14)),
        ("flag", ints | scalars), ("language", languages | scalars), ("opaque", ints | scalars),
        ("remark", texts | scalars), ("version", ints | scalars),
        ("serializeTypeCurrentRPC", st.sampled_from(["JSON", 1]) | values),
    ):  # fmt: skip
        if draw(st.integers(0, 9)) > 1:  # most keys present, each may be missing
            obj[key] = draw(strategy)
    keys = draw(st.permutations(list(obj)))
    return {key: obj[key] for key in keys}


def dumps(obj: Any, ascii_only: bool, spaced: bool) -> bytes:
    separators = (", ", " : ") if spaced else (",", ":")
    return json.dumps(obj, ensure_ascii=ascii_only, separators=separators).encode(
        "utf-8", "surrogatepass"
    )


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(header_objects(), st.booleans(), st.booleans())
def test_any_header_object_decodes_alike(
    builds: tuple[Any, Any], obj: dict[str, Any], ascii_only: bool, spaced: bool
) -> None:
    same_decode(builds, dumps(obj, ascii_only, spaced))


INSERTS = [b"\\", b'"', b",", b"}", b"\x00", b"\xff", b"\\u", b"\\ud800", b"-", b"0", b" "]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(header_objects(), st.data())
def test_damaged_headers_fail_or_decode_alike(
    builds: tuple[Any, Any], obj: dict[str, Any], data: st.DataObject
) -> None:
    header = dumps(obj, data.draw(st.booleans()), False)
    same_decode(builds, damaged(header, data, INSERTS))


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":310,"extFields":{"a":"pg","i":"UNIQ_KEY\\u0001K\\u0002"},"flag":0,'
        b'"language":"CPP","opaque":12,"serializeTypeCurrentRPC":"JSON","version":333}',
        b' {"code" : 10 , "extFields" : null }\r\n',
        b'{"code":10,"extFields":{"x":"1","y":"2","x":null,"x":"3"}}',
        b'{"code":10,"extFields":{"n":-12,"z":0,"t":true,"f":false,"d":1.5,"e":1e3,"m":-0}}',
        b'{"code":10,"extFields":{"p":"\\ud83d\\ude00 \\u00e9 \\/ \\" \\\\ \\b\\f\\n\\r\\t"}}',
        b'{"code":10,"extFields":{"p":"\\ud800"}}',
        b'{"code":10,"extFields":{"p":"\\udc00\\ud800"}}',
        b'{"code":10,"extFields":{"p":"\\u12"}}',
        b'{"code":10,"extFields":{"p":"\\x"}}',
        b'{"code":10,"extFields":{"p":"\xff"}}',
        b'{"code":10,"extFields":{"p":"\xed\xa0\x80"}}',
        b'{"code":10,"extFields":{"p":"a\x01"}}',
        b'{"code":10,"extFields":{"p":{"q":1}}}',
        b'{"code":10,"other\xff":1}',
        b'{"code":10,"other":"\xff"}',
        b'{"code":10,"other":[1,2]}',
        b'{"code":10}\x00',
        b'{"code":10}x',
        b'{"code":10,}',
        b'{"code":10 "flag":1}',
        b"{}",
        b"[]",
        b"",
        b'{"code":2147483648}',
        b'{"code":-2147483649,"opaque":1}',
        b'{"code":10,"opaque":2147483648}',
        b'{"code":10,"opaque":"12","version":null,"flag":true}',
        b'{"code":10,"opaque":012}',
        b'{"code":1234567890123456789012}',
        b'{"code":10,"language":7,"remark":5}',
        b'{"code":10,"language":"\\u0043PP","remark":null}',
        b'{"code":10,"language":"12","remark":"r\\u00e9"}',
        # digits int() does not read: a superscript two, and as text (hypothesis found it)
        b'{"code":0,"language":"\\u00b2"}',
        '{"code":0,"language":"\u00b2"}'.encode(),
        b'{"code":10,"code":11,"extFields":{"a":"1"},"extFields":{"b":"2"}}',
    ],
)
def test_edge_headers_decode_alike(builds: tuple[Any, Any], header: bytes) -> None:
    same_decode(builds, header)


def test_a_language_of_digits_int_cannot_read_is_other(builds: tuple[Any, Any]) -> None:
    for build in builds:
        cmd = build.decode(b'{"code":0,"language":"\\u00b2"}', b"")
        assert cmd.language is LanguageCode.OTHER


def test_the_usual_send_header_is_read_in_full(scan: ModuleType) -> None:
    # by the direct route itself, not by a fallback to the dict route
    cmd = scan.decode(
        b'{"code":310,"extFields":{"a":"pg","i":"UNIQ_KEY\\u0001K\\u0002","e":3},'
        b'"flag":0,"language":"CPP","opaque":12,"version":333}',
        b"body",
    )
    assert cmd.code == 310 and cmd.language is LanguageCode.CPP and cmd.opaque == 12
    assert cmd.ext_fields == {"a": "pg", "i": "UNIQ_KEY\x01K\x02", "e": "3"}
    assert cmd.body == b"body" and cmd.serialize_type is SerializeType.JSON


ext_maps: st.SearchStrategy[dict[str, Any]] = st.dictionaries(texts, texts, max_size=6) | (
    st.dictionaries(texts, scalars, max_size=3)
)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    number = ints | st.sampled_from([True, ResponseCode.SUCCESS, 2**63, -(2**63) - 1])
    language = draw(st.sampled_from(list(LanguageCode)))
    return new_command(
        draw(number), language, draw(number), draw(number), draw(number),
        draw(st.none() | texts | st.sampled_from([5, "\ud800"])),  # type: ignore[arg-type]
        draw(ext_maps | st.just({"k": "\udc00"})), b"", SerializeType.JSON,
    )  # fmt: skip


@settings(max_examples=600)
@given(commands())
def test_any_command_encodes_alike(builds: tuple[Any, Any], cmd: RemotingCommand) -> None:
    compiled, interpreted = builds
    assert outcome(compiled.encode, cmd) == outcome(interpreted.encode, cmd)


def test_a_send_answer_is_encoded_directly_and_byte_for_byte(
    scan: ModuleType, write: ModuleType, builds: tuple[Any, Any]
) -> None:
    compiled, interpreted = builds
    request = RemotingCommand.request(310, {"a": "pg"})
    request.opaque = 99
    ext = {"msgId": "7F0000010000", "queueId": "3", "queueOffset": "12", "MSG_REGION": "é"}
    answer = request.make_response(ResponseCode.SUCCESS, "fine", ext)
    expected = (
        b'{"code":0,"extFields":{"msgId":"7F0000010000","queueId":"3","queueOffset":"12",'
        b'"MSG_REGION":"\xc3\xa9"},"flag":1,"language":"PYTHON","opaque":99,"version":'
        + str(answer.version).encode()
        + b',"remark":"fine"}'
    )
    assert write.encode(answer) == compiled.encode(answer) == interpreted.encode(answer) == expected
    assert scan.decode(expected, b"") == answer
    assert compiled.decode(expected, b"") == interpreted.decode(expected, b"") == answer


def test_a_strided_view_is_left_to_the_dict_route(builds: tuple[Any, Any]) -> None:
    compiled, interpreted = builds
    strided = memoryview(b'{ ""ccooddee"":: 11 0}}')[::2]  # {"code": 10}, not contiguous
    assert outcome(compiled.decode, strided, b"") == outcome(interpreted.decode, strided, b"")


def framed(encode: Any, cmd: RemotingCommand) -> tuple[str, Any]:
    """A frame as framing builds it, its header from ``encode``: bytes or the error."""
    try:
        header = encode(cmd)
        body = bytes(cmd.body)  # type: ignore[arg-type]
        if len(header) > 0xFFFFFF:
            raise ProtocolError("header does not fit 24 bits")
        return "bytes", struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    except (ProtocolError, struct.error) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=400)
@given(commands(), st.binary(max_size=64))
def test_any_command_is_framed_as_its_joined_parts(
    builds: tuple[Any, Any], cmd: RemotingCommand, body: bytes
) -> None:
    _, interpreted = builds
    cmd.body = body
    try:
        got: tuple[str, Any] = ("bytes", b"".join(framing.encode(cmd)))
    except (ProtocolError, struct.error) as exc:
        got = (type(exc).__name__, str(exc))
    assert got == framed(interpreted.encode, cmd)


def test_the_frame_kernel_declines_sizes_its_words_cannot_hold(write: ModuleType) -> None:
    cmd = RemotingCommand.request(310, {"a": "pg"})
    header = write.encode(cmd)
    h = len(header)
    most = 2**31 - 1 - 4 - h  # L = 4 + H + B is an int32
    assert write.encode_frame(cmd, most) == struct.pack(">ii", 2**31 - 1, h) + header
    assert write.encode_frame(cmd, most + 1) is None
    assert write.encode_frame(cmd, -1) is None
    assert write.encode_frame(cmd, 0) == struct.pack(">ii", 4 + h, h) + header
    cmd.ext_fields = {"k": "x" * 0xFFFFFF}  # a header past 24 bits
    assert write.encode(cmd) is not None
    assert write.encode_frame(cmd, 0) is None
    with pytest.raises(ProtocolError, match="24 bits"):
        framing.encode(cmd)


def usual_read(data: bytes, most: int) -> tuple[str, Any]:
    """What FrameDecoder.read gives without the one-frame kernel: commands or the error."""
    decoder = framing.FrameDecoder(most)
    try:
        out = [fields(cmd) for cmd in decoder.read(data, 32)]
    except (ProtocolError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return "commands", (out, decoder.waiting, decoder.buffered, decoder.failed)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(commands(), st.binary(max_size=64), st.data())
def test_one_frame_reads_as_the_decoder_reads_it(
    scan: ModuleType, cmd: RemotingCommand, body: bytes, data: st.DataObject
) -> None:
    cmd.body = body
    try:
        frame = framing.encode_bytes(cmd)
    except (ProtocolError, struct.error):
        return
    if data.draw(st.booleans()):  # damaged: any byte changed, or cut, or one more byte
        damaged = bytearray(frame)
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
        frame = bytes(damaged[: data.draw(st.integers(0, len(damaged) + 1))])
    most = data.draw(st.sampled_from([len(frame), len(frame) - 1, 16 << 20]))
    got = scan.decode_frame(frame, most)
    usual = usual_read_without_kernel(frame, most)
    if got is not None:  # else the decoder goes its usual way
        assert usual == ("commands", ([fields(got)], 0, 0, False))
    assert usual_read(frame, most) == usual


def usual_read_without_kernel(data: bytes, most: int) -> tuple[str, Any]:
    kernel, framing._scan_read = framing._scan_read, None
    try:
        return usual_read(data, most)
    finally:
        framing._scan_read = kernel


def test_the_one_frame_kernel_reads_a_send_request(scan: ModuleType) -> None:
    request = RemotingCommand.request(310, {"a": "pg", "b": "topic"}, b"x" * 1024)
    request.opaque = 7
    frame = framing.encode_bytes(request)
    usual = framing._frame(frame, 4, len(frame) - 4)  # the decoder's own, per frame
    assert fields(scan.decode_frame(frame, 1 << 20)) == fields(usual)
    assert usual.ext_fields == request.ext_fields and usual.body == request.body
    assert scan.decode_frame(frame, len(frame) - 1) is None  # over the limit: the decoder says so
    assert scan.decode_frame(frame + frame, 1 << 20) is None  # two frames: the decoder's loop
    assert scan.decode_frame(bytearray(frame), 1 << 20) is None
