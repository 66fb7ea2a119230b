"""Frames and both header serializations: round trips, splits, golden bytes, bad input."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from apogee.errors import FrameTooLargeError, ProtocolError
from apogee.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode, encode_bytes

# -- strategies -----------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=40)
_nonempty = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType) -> RemotingCommand:
    binary = serialize_type == SerializeType.ROCKETMQ
    int16 = st.integers(-(2**15), 2**15 - 1)
    int32 = st.integers(-(2**31), 2**31 - 1)
    # Binary headers read an empty string back as null, so generate what survives.
    remark = draw(st.none() | (_nonempty if binary else _text))
    ext = draw(st.dictionaries(_nonempty, _nonempty if binary else _text, max_size=6))
    return RemotingCommand(
        draw(int16 if binary else int32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(int16 if binary else int32),
        opaque=draw(int32),
        flag=draw(st.integers(0, 3)),
        remark=remark,
        ext_fields=ext,
        body=draw(st.binary(max_size=300)),
        serialize_type=serialize_type,
    )


def _decode_all(data: bytes, cuts: list[int]) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        out.extend(decoder.feed(data[start:cut]))
        start = cut
    assert decoder.buffered == 0
    return out


# -- round trips ----------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from(SerializeType))
def test_round_trip_in_random_splits(data: st.DataObject, stype: SerializeType) -> None:
    cmds = data.draw(st.lists(commands(stype), min_size=1, max_size=4))
    stream = b"".join(encode_bytes(c) for c in cmds)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    assert _decode_all(stream, cuts) == cmds


@settings(max_examples=25, deadline=None)
@given(st.data(), st.sampled_from(SerializeType))
def test_byte_by_byte_equals_whole(data: st.DataObject, stype: SerializeType) -> None:
    cmds = data.draw(st.lists(commands(stype), min_size=1, max_size=3))
    stream = b"".join(encode_bytes(c) for c in cmds)
    whole = FrameDecoder().feed(stream)
    decoder = FrameDecoder()
    single: list[RemotingCommand] = []
    for i in range(len(stream)):
        single.extend(decoder.feed(stream[i : i + 1]))
    assert whole == single == cmds


def test_trailing_partial_frame_stays_buffered() -> None:
    a = RemotingCommand(RequestCode.HEART_BEAT, opaque=1, body=b"first")
    b = RemotingCommand(RequestCode.HEART_BEAT, opaque=2, body=b"second")
    fa, fb = encode_bytes(a), encode_bytes(b)
    decoder = FrameDecoder()
    got = decoder.feed(fa + fb[:7])
    assert got == [a]
    assert decoder.buffered == 7
    assert decoder.feed(fb[7:]) == [b]
    assert decoder.buffered == 0


def test_body_buffers_pass_through_uncopied() -> None:
    backing = bytearray(b"0123456789abcdef")
    parts = [memoryview(backing)[0:4], memoryview(backing)[4:4], memoryview(backing)[8:16]]
    cmd = RemotingCommand(0, flag=FLAG_RESPONSE, body=parts)
    frame = encode(cmd)
    assert frame[1] is parts[0] and frame[2] is parts[2]  # empty part dropped, rest identical
    (length,) = struct.unpack_from(">i", frame[0])
    assert length == len(frame[0]) - 4 + 12
    (decoded,) = FrameDecoder().feed(b"".join(frame))
    assert decoded.body == b"0123" + b"89abcdef"


# -- golden frames --------------------------------------------------------------


def _golden_json_frame(header: bytes, body: bytes) -> bytes:
    # §1.1 by hand: L = 4 + H + B, T = 0 << 24 | H
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def test_golden_cpp_json_frame_with_numeric_ext_values() -> None:
    header = (
        b'{"code":310,"extFields":{"a":"pg","b":"T1","c":"TBW102","d":4,"e":2,"f":0,'
        b'"g":"1700000000000","h":0,"i":"","j":"0","k":"false","l":16,"m":"false",'
        b'"AccessKey":"","OnsChannel":"","Signature":"","n":null},'
        b'"flag":0,"language":"CPP","opaque":12,"remark":"","version":333}'
    )
    (cmd,) = FrameDecoder().feed(_golden_json_frame(header, b"hello"))
    assert cmd.code == RequestCode.SEND_MESSAGE_V2
    assert cmd.language == LanguageCode.CPP
    assert (cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (333, 12, 0, "")
    assert cmd.serialize_type == SerializeType.JSON
    assert cmd.body == b"hello"
    assert cmd.ext_fields["d"] == "4" and cmd.ext_fields["e"] == "2" and cmd.ext_fields["l"] == "16"
    assert cmd.ext_fields["g"] == "1700000000000"
    assert "n" not in cmd.ext_fields
    assert all(isinstance(v, str) for v in cmd.ext_fields.values())


def test_json_tolerance_booleans_language_int_unknown_keys() -> None:
    header = (
        b'{"code":11,"extFields":{"x":true,"y":false,"z":1.5},"flag":2,"language":3,'
        b'"opaque":5,"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    (cmd,) = FrameDecoder().feed(_golden_json_frame(header, b""))
    assert cmd.ext_fields == {"x": "true", "y": "false", "z": "1.5"}
    assert cmd.language == LanguageCode.PYTHON
    assert cmd.is_oneway and cmd.remark is None


def test_json_odd_language_and_numbers_as_strings() -> None:
    header = (
        b'{"code":11,"extFields":{"a":null,"b":"s"},"flag":"0","language":["CPP"],'
        b'"opaque":"7","version":"63"}'
    )
    (cmd,) = FrameDecoder().feed(_golden_json_frame(header, b""))
    assert cmd.ext_fields == {"b": "s"}
    assert cmd.language == LanguageCode.OTHER
    assert (cmd.opaque, cmd.version, cmd.flag) == (7, 63, 0)


def test_golden_json_encoding_field_by_field() -> None:
    req = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, language=LanguageCode.CPP, opaque=9)
    resp = req.make_response(ResponseCode.TOPIC_NOT_EXIST, ext_fields={"k": "v"}, body=b"xy")
    frame = encode_bytes(resp)
    length, type_word = struct.unpack_from(">ii", frame)
    assert length == len(frame) - 4
    assert type_word >> 24 == 0
    h = type_word & 0xFFFFFF
    header = json.loads(frame[8 : 8 + h])
    assert frame[8 + h :] == b"xy"
    assert header["code"] == ResponseCode.TOPIC_NOT_EXIST
    assert header["opaque"] == 9
    assert header["flag"] == FLAG_RESPONSE
    assert header["language"] == "PYTHON"
    assert header["extFields"] == {"k": "v"}
    assert "remark" not in header


def test_json_output_ext_values_are_always_strings() -> None:
    cmd = RemotingCommand(0, flag=FLAG_RESPONSE, ext_fields={"a": 5, "b": True, "c": None})  # type: ignore[dict-item]
    frame = encode_bytes(cmd)
    h = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
    assert json.loads(frame[8 : 8 + h])["extFields"] == {"a": "5", "b": "true"}


def test_response_without_ext_fields_still_carries_ext_object() -> None:
    # The C++ client dereferences the typed response header built from extFields.
    resp = RemotingCommand(0, flag=FLAG_RESPONSE)
    frame = encode_bytes(resp)
    h = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
    assert json.loads(frame[8 : 8 + h])["extFields"] == {}


def _golden_binary_header() -> bytes:
    # §1.3 by hand: code int16, lang int8, version int16, opaque int32, flag int32,
    # remark int32+utf8, ext int32 total + (int16 k, k, int32 v, v)*
    remark = "ok ✓".encode()
    ext = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
        for k, v in ((b"topic", b"T1"), (b"queueId", b"3"))
    )
    return (
        struct.pack(">hbhii", 14, 0, 401, 77, 1)
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(ext))
        + ext
    )


def test_golden_binary_frame_decodes_field_by_field() -> None:
    header = _golden_binary_header()
    frame = struct.pack(">ii", 4 + len(header) + 3, (1 << 24) | len(header)) + header + b"abc"
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (
        14,
        LanguageCode.JAVA,
        401,
        77,
        1,
    )
    assert cmd.remark == "ok ✓"
    assert cmd.ext_fields == {"topic": "T1", "queueId": "3"}
    assert cmd.body == b"abc"
    assert encode_bytes(cmd) == frame


def test_binary_minimum_header_reads_nulls() -> None:
    header = struct.pack(">hbhiiii", 0, 1, 333, 4, 1, 0, 0)
    assert len(header) == 21
    frame = struct.pack(">ii", 4 + 21, (1 << 24) | 21) + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.remark is None and cmd.ext_fields == {} and cmd.body == b""
    assert cmd.language == LanguageCode.CPP


def test_response_to_cpp_binary_request_is_json() -> None:
    req = RemotingCommand(
        RequestCode.PULL_MESSAGE, language=LanguageCode.CPP, serialize_type=SerializeType.ROCKETMQ
    )
    resp = req.make_response()
    assert resp.serialize_type == SerializeType.JSON
    assert encode_bytes(resp)[4] == 0  # high byte of T
    java = RemotingCommand(RequestCode.PULL_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    assert java.make_response().serialize_type == SerializeType.ROCKETMQ


def test_make_response_and_oneway_flags() -> None:
    req = RemotingCommand.request(RequestCode.HEART_BEAT)
    req.opaque = 41
    resp = req.make_response(ResponseCode.SYSTEM_ERROR, "boom")
    assert resp.opaque == 41 and resp.is_response and not resp.is_oneway
    assert resp.remark == "boom" and resp.code == ResponseCode.SYSTEM_ERROR
    oneway = RemotingCommand.oneway(RequestCode.UPDATE_CONSUMER_OFFSET)
    assert oneway.flag == FLAG_ONEWAY and oneway.is_oneway and not oneway.is_response


# -- bad input ------------------------------------------------------------------


def test_oversized_frame_rejected_from_length_word_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(struct.pack(">i", 1021))  # L + 4 = 1025
    ok = FrameDecoder(max_frame_bytes=1024)
    assert ok.feed(struct.pack(">i", 1020)) == []  # exactly the maximum: waits for data


def test_default_maximum_is_16_mib() -> None:
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 3))
    assert FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 4)) == []


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">ii", 10, 7) + b"{}xxxx",  # header length 7 > L - 4 = 6
        struct.pack(">ii", 6, (2 << 24) | 2) + b"{}",  # serialize type 2
        struct.pack(">ii", 2, 0),  # L shorter than the type word
        struct.pack(">ii", -5, 0),  # negative length
        struct.pack(">ii", 6, 2) + b"[]",  # header not an object
        struct.pack(">ii", 6, 2) + b"{x",  # header not JSON
        struct.pack(">ii", 16, 12) + b'{"code":"a"}',  # code not an int
        struct.pack(">ii", 4 + 10, (1 << 24) | 10) + b"\x00" * 10,  # binary header too short
    ],
)
def test_malformed_frames_raise_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(frame)


def test_binary_lengths_beyond_header_rejected() -> None:
    bad_remark = struct.pack(">hbhiii", 0, 0, 0, 0, 0, 500) + b"\x00" * 4
    bad_ext = struct.pack(">hbhiiii", 0, 0, 0, 0, 0, 0, 99)
    bad_key = struct.pack(">hbhiiii", 0, 0, 0, 0, 0, 0, 6) + struct.pack(">hi", 40, 0)
    for header in (bad_remark, bad_ext, bad_key):
        frame = struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(frame)


def test_binary_cannot_encode_codes_beyond_int16() -> None:
    cmd = RemotingCommand(200050, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(ProtocolError):
        encode(cmd)


# -- frames waiting undecoded -----------------------------------------------------


def _requests(count: int, start: int = 0) -> list[RemotingCommand]:
    return [RemotingCommand(RequestCode.HEART_BEAT, opaque=i, body=b"b%d" % i)
            for i in range(start, start + count)]  # fmt: skip


def test_pushed_frames_wait_undecoded_until_taken_a_few_at_a_time() -> None:
    cmds = _requests(10)
    stream = b"".join(encode_bytes(c) for c in cmds)
    decoder = FrameDecoder()
    assert decoder.push(stream[:-3]) == 9
    assert (decoder.waiting, decoder.buffered) == (9, len(encode_bytes(cmds[9])) - 3)
    assert decoder.take(4) == cmds[:4]
    assert decoder.push(stream[-3:]) == 1  # more bytes while frames still wait
    assert (decoder.waiting, decoder.buffered) == (6, 0)
    assert decoder.take(4) == cmds[4:8]
    assert decoder.take() == cmds[8:]
    assert (decoder.waiting, decoder.buffered, decoder.take()) == (0, 0, [])


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_push_and_take_in_random_splits_and_turns_equal_the_stream(data: st.DataObject) -> None:
    cmds = data.draw(st.lists(commands(SerializeType.JSON), min_size=1, max_size=8))
    stream = b"".join(encode_bytes(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoder.push(bytearray(stream[start:end]))  # a buffer its owner could reuse
        got += decoder.take(data.draw(st.integers(0, 3)))
    got += decoder.take()
    assert got == cmds
    assert (decoder.waiting, decoder.buffered) == (0, 0)


def test_frames_waiting_across_reads_are_kept_apart_from_the_partial_one() -> None:
    cmds = _requests(6)
    frames = [encode_bytes(c) for c in cmds]
    decoder = FrameDecoder()
    decoder.push(frames[0][:5])  # a partial frame first: the rest lands in the buffer
    decoder.push(frames[0][5:] + b"".join(frames[1:5]) + frames[5][:9])
    assert (decoder.waiting, decoder.buffered) == (5, 9)
    assert decoder.take(2) == cmds[:2]
    assert (decoder.waiting, decoder.buffered) == (3, 9)
    decoder.push(frames[5][9:])
    assert decoder.take() == cmds[2:]
    assert decoder.buffered == 0


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack(">ii", 6, 2) + b"{x",  # header not JSON: found when decoded
        struct.pack(">ii", 10, 7) + b"{}xxxx",  # header longer than the frame
        struct.pack(">ii", 2, 0),  # length word: found when pushed
        struct.pack(">i", 2000),  # over the maximum, nothing of it buffered
    ],
)
def test_frames_before_a_malformed_one_are_given_then_the_error_and_nothing_after(
    bad: bytes,
) -> None:
    before, after = _requests(5), _requests(3, start=5)
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.push(b"".join(encode_bytes(c) for c in before) + bad)
    decoder.push(b"".join(encode_bytes(c) for c in after))
    assert decoder.take(3) == before[:3]
    assert decoder.take() == before[3:]
    assert decoder.failed and decoder.waiting == 0 and decoder.buffered == 0
    with pytest.raises(ProtocolError):
        decoder.take()
    with pytest.raises(ProtocolError):  # and so on: the stream is unusable
        decoder.take()


def test_read_takes_a_turn_now_and_keeps_the_rest_apart_from_a_reused_buffer() -> None:
    cmds = _requests(7)
    stream = b"".join(encode_bytes(c) for c in cmds)
    reused = bytearray(stream[:-2])
    decoder = FrameDecoder()
    assert decoder.read(reused, 2) == cmds[:2]
    assert (decoder.waiting, decoder.buffered) == (4, len(encode_bytes(cmds[6])) - 2)
    reused[:] = b"\xff" * len(reused)  # its owner reads into it again
    assert decoder.read(stream[-2:], 3) == cmds[2:5]
    assert decoder.take() == cmds[5:]
    assert (decoder.waiting, decoder.buffered) == (0, 0)
    assert decoder.read(memoryview(stream)) == cmds  # no limit: all of it, in place


BAD_HEADER = struct.pack(">ii", 6, 2) + b"{x"  # a whole frame whose header is not JSON


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_malformed_frame_anywhere_in_any_splits_ends_the_stream_there(
    data: st.DataObject,
) -> None:
    cmds = data.draw(st.lists(commands(SerializeType.JSON), min_size=1, max_size=6))
    bad_at = data.draw(st.integers(0, len(cmds)))
    frames = [encode_bytes(c) for c in cmds]
    stream = b"".join([*frames[:bad_at], BAD_HEADER, *frames[bad_at:]])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    with pytest.raises(ProtocolError):
        for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            decoder.push(stream[start:end])
            got += decoder.take(data.draw(st.integers(0, 3)))
        got += decoder.take()
        got += decoder.take()  # the error, once the frames before it are given
    assert got == cmds[:bad_at]
    assert decoder.failed and decoder.waiting == 0


def test_a_partial_frame_completed_by_a_read_of_more_frames_holds_only_the_last_partial() -> None:
    big = [RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=i, body=bytes([i]) * 50_000)
           for i in range(4)]  # fmt: skip
    stream = b"".join(encode_bytes(c) for c in big)
    decoder = FrameDecoder()
    decoder.push(stream[:30_000])  # the first frame in part
    # the rest of the first, the second and third whole, and part of the fourth
    assert decoder.push(stream[30_000:-10]) == 3
    assert (decoder.waiting, decoder.buffered) == (3, len(encode_bytes(big[3])) - 10)
    assert decoder.take(1) == big[:1]  # decoded when completed: given first
    assert decoder.take() == big[1:3]
    decoder.push(stream[-10:])
    assert decoder.take() == big[3:]
    assert (decoder.waiting, decoder.buffered) == (0, 0)


def test_a_completed_partial_frame_with_a_bad_header_keeps_nothing_after_it() -> None:
    after = _requests(2)
    decoder = FrameDecoder()
    decoder.push(BAD_HEADER[:5])
    assert decoder.push(BAD_HEADER[5:] + b"".join(encode_bytes(c) for c in after)) == 1
    assert decoder.failed and decoder.waiting == 0 and decoder.buffered == 0
    with pytest.raises(ProtocolError):
        decoder.take()
    assert decoder.push(encode_bytes(after[0])) == 0  # nothing past it is kept
    with pytest.raises(ProtocolError):
        decoder.take()
