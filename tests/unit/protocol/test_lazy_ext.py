"""SEND_MESSAGE_V2 and PULL_MESSAGE frames decoded with their ext fields left unread:
the same ext fields when asked for, and the same send or pull header (or the same
error) as the eager decode and the checked readers give, for any ext fields a client
could send."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.codes import RequestCode
from apogee.errors import HeaderFieldError
from apogee.protocol import headers as h
from apogee.protocol.command import LazyExtCommand, RemotingCommand
from apogee.protocol.framing import encode_bytes
from tests.unit.protocol.test_header_kernels import checked_pull, ext_maps, outcome, pull_maps

V2 = int(RequestCode.SEND_MESSAGE_V2)
MAX_FRAME = 1 << 24


def frame_of(ext: dict[str, str], body: bytes = b"body", code: int = V2) -> bytes:
    return encode_bytes(RemotingCommand.request(code, ext, body=body))


def raw_frame(header: bytes, body: bytes = b"") -> bytes:
    """A JSON frame around ``header`` as written, escapes and all."""
    return (
        (4 + len(header) + len(body)).to_bytes(4, "big")
        + len(header).to_bytes(4, "big")
        + header
        + body
    )


def header_outcome(scan: ModuleType, cmd: Any) -> tuple[str, Any]:
    """What the send handler gets: the frame's reader, else the checked decode."""

    def decode() -> h.SendMessageRequestHeader:
        header = scan.send_header_v2(cmd, h.SendMessageRequestHeader)
        if header is not None:
            return header  # type: ignore[no-any-return]
        return h.decode_send_header(cmd.code, cmd.ext_fields)

    return outcome(decode)


extras = st.dictionaries(
    st.sampled_from(["AccessKey", "Signature", "o", "aa", "A", "\u00e9", "a\\b"]),
    st.text(max_size=8),
    max_size=2,
)


@settings(max_examples=400)
@given(ext_maps(h._SHORT_NAMES), extras, st.binary(max_size=40))
def test_any_send_decodes_as_the_eager_route_does(
    scan: ModuleType, full: ModuleType, ext: dict[str, str], extra: dict[str, str], body: bytes
) -> None:
    ext = {**ext, **extra}
    data = frame_of(ext, body)
    cmd = scan.decode_frame(data, MAX_FRAME)
    header_len = int.from_bytes(data[4:8], "big")
    eager = full.decode(data[8 : 8 + header_len], body)  # the dict route
    assert cmd is not None and eager is not None
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version, cmd.remark) == (
        eager.code, eager.opaque, eager.flag, eager.language, eager.version, eager.remark
    )  # fmt: skip
    assert bytes(cmd.body) == body
    expected = outcome(lambda: h.decode_send_header(V2, eager.ext_fields))
    # the header first, while the ext fields are still unread, then the dict
    assert header_outcome(scan, cmd) == expected
    assert cmd.ext_fields == eager.ext_fields == ext


EDGES = {
    "number": ["2147483647", "2147483648", "-2147483648", "-2147483649", "999999999999999999",
               "9223372036854775807", "1000000000000000000", "007", "-0", "+1", "1 ", "", "x"],
    "flag": ["true", "false", "1", "0", "TRUE", "", "2"],
}  # fmt: skip


@pytest.mark.parametrize("name", list("defghjlkm"))
def test_each_number_and_flag_at_its_edges(scan: ModuleType, name: str) -> None:
    usual = h.SendMessageRequestHeader("pg", "t", "TBW102", 4, 3, 0, 1, 0, "", 0, False, False, 16)
    for value in EDGES["flag" if name in "km" else "number"]:
        ext = {**usual.to_ext_v2(), name: value}
        cmd = scan.decode_frame(frame_of(ext), MAX_FRAME)
        expected = outcome(lambda ext=ext: h.decode_send_header(V2, ext))  # type: ignore[misc]
        assert header_outcome(scan, cmd) == expected, (name, value)


def test_the_usual_send_is_read_from_its_frame(scan: ModuleType) -> None:
    header = h.SendMessageRequestHeader("pg", "t", "TBW102", 4, 3, 0, 1732000000000, 0,
                                        "UNIQ_KEY\x01K\x02WAIT\x01true\x02", 2, True, False,
                                        16, "b")  # fmt: skip
    cmd = scan.decode_frame(frame_of(header.to_ext_v2()), MAX_FRAME)
    assert type(cmd) is LazyExtCommand
    decoded = scan.send_header_v2(cmd, h.SendMessageRequestHeader)
    assert decoded == header
    assert [type(getattr(decoded, n)) for n in decoded.__slots__] == [
        type(getattr(header, n)) for n in header.__slots__
    ]
    # the handler's entry point takes the same way
    assert h.decode_send_request(cmd) == header


def test_only_a_send_v2_is_left_unread(scan: ModuleType) -> None:
    ext = h.SendMessageRequestHeader("pg", "t", "TBW102", 4, 3, 0, 1, 0).to_ext_v2()
    for code in (int(RequestCode.SEND_BATCH_MESSAGE), int(RequestCode.SEND_MESSAGE)):
        cmd = scan.decode_frame(frame_of(ext, code=code), MAX_FRAME)
        assert type(cmd) is RemotingCommand and cmd.ext_fields == ext
        assert scan.send_header_v2(cmd, h.SendMessageRequestHeader) is None
    # a header whose code comes after its ext fields is read at once
    late = raw_frame(b'{"extFields":{"a":"pg"},"code":310,"language":"JAVA"}')
    cmd = scan.decode_frame(late, MAX_FRAME)
    assert type(cmd) is RemotingCommand and cmd.ext_fields == {"a": "pg"}


@pytest.mark.parametrize(
    ("ext_json", "ext"),
    [
        (b'{"\\u0061":"pg","b":"t"}', {"a": "pg", "b": "t"}),  # an escaped key
        (b'{"a":"p\\"g\\\\","b":"\\ud83d\\ude00"}', {"a": 'p"g\\', "b": "\U0001f600"}),
        (b'{"a":"\xc3\xa9","b":"t","a":"x"}', {"a": "x", "b": "t"}),  # twice: the last
        (b'{"a":"pg","b":1}', {"a": "pg", "b": "1"}),  # a number: read at once
        (b'{"a":"pg","b":null}', {"a": "pg"}),  # a null: read at once
    ],
)
def test_odd_ext_objects_read_as_the_dict_route_reads_them(
    scan: ModuleType, full: ModuleType, ext_json: bytes, ext: dict[str, str]
) -> None:
    header = b'{"code":310,"extFields":' + ext_json + b',"language":"JAVA","opaque":7}'
    cmd = scan.decode_frame(raw_frame(header, b"x"), MAX_FRAME)
    assert cmd is not None
    assert cmd.ext_fields == full.decode(header, b"x").ext_fields == ext
    assert cmd.opaque == 7 and cmd.body == b"x"
    with pytest.raises(HeaderFieldError):  # c..h missing: the checked path names one
        h.decode_send_request(cmd)


@pytest.mark.parametrize(
    "ext_json",
    [
        b'{"a":"\\x"}',  # not an escape
        b'{"a":"\\ud83d"}',  # half a pair
        b'{"a":"\\udc00"}',
        b'{"a":"\\u12g4"}',
        b'{"a":"\xff"}',  # not UTF-8
        b'{"a":"\xed\xa0\x80"}',  # an encoded surrogate
    ],
)
def test_bad_ext_text_is_left_to_the_dict_route(scan: ModuleType, ext_json: bytes) -> None:
    header = b'{"code":310,"extFields":' + ext_json + b',"language":"JAVA"}'
    assert scan.decode_frame(raw_frame(header), MAX_FRAME) is None  # the decoder decides


def test_ext_fields_set_on_an_unread_command_are_kept(scan: ModuleType) -> None:
    ext = h.SendMessageRequestHeader("pg", "t", "TBW102", 4, 3, 0, 1, 0).to_ext_v2()
    cmd = scan.decode_frame(frame_of(ext), MAX_FRAME)
    first = cmd.ext_fields
    assert cmd.ext_fields is first  # read once
    cmd.ext_fields = {"x": "y"}
    assert cmd.ext_fields == {"x": "y"}


# -- pulls ---------------------------------------------------------------------------

PULL = int(RequestCode.PULL_MESSAGE)


def pull_outcome(scan: ModuleType, cmd: Any) -> tuple[str, Any]:
    """What the pull handler gets: the frame's reader, else the checked decode."""

    def decode() -> h.PullMessageRequestHeader:
        header = scan.pull_header_lazy(cmd, h.PullMessageRequestHeader)
        if header is not None:
            return header  # type: ignore[no-any-return]
        return h.PullMessageRequestHeader.from_ext(cmd.ext_fields)

    return outcome(decode)


@settings(max_examples=400)
@given(pull_maps(), extras)
def test_any_pull_decodes_as_the_checked_readers_do(
    scan: ModuleType, ext: dict[str, str], extra: dict[str, str]
) -> None:
    ext = {**ext, **extra}
    cmd = scan.decode_frame(frame_of(ext, b"", code=PULL), MAX_FRAME)
    assert cmd is not None
    assert pull_outcome(scan, cmd) == outcome(lambda: checked_pull(ext))
    assert cmd.ext_fields == ext


def test_the_usual_pull_is_read_from_its_frame(scan: ModuleType) -> None:
    cls = h.PullMessageRequestHeader
    for header in (
        cls("cg", "T", 3, 120, 32, 7, 118, 15000, 1732000000000, "*", "TAG"),
        cls("cg", "T", 0, 0, 1024, 2, -1, 0, 0, None, None, 1 << 20),
        cls("cg", "%RETRY%cg", 1, 5, 32, 7, 4, 15000, 3, "a || b", "TAG", 4096),
    ):
        cmd = scan.decode_frame(
            frame_of({**header.to_ext(), "bname": "b"}, b"", code=PULL), MAX_FRAME
        )
        assert type(cmd) is LazyExtCommand
        decoded = scan.pull_header_lazy(cmd, cls)
        assert decoded == header
        assert [type(getattr(decoded, n)) for n in cls.__slots__] == [
            type(getattr(header, n)) for n in cls.__slots__
        ]
        assert cls.of_request(cmd) == header
        assert scan.send_header_v2(cmd, h.SendMessageRequestHeader) is None  # not a send


@pytest.mark.parametrize(
    "name",
    ["queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
     "suspendTimeoutMillis", "subVersion", "maxMsgBytes"],
)  # fmt: skip
def test_each_pull_number_at_its_edges(scan: ModuleType, name: str) -> None:
    usual = h.PullMessageRequestHeader("cg", "T", 3, 120, 32, 7, 118, 15000, 1, "*", "TAG", 64)
    for value in EDGES["number"]:
        ext = {**usual.to_ext(), name: value}
        cmd = scan.decode_frame(frame_of(ext, b"", code=PULL), MAX_FRAME)
        expected = outcome(lambda ext=ext: checked_pull(ext))  # type: ignore[misc]
        assert pull_outcome(scan, cmd) == expected, (name, value)


def test_a_pull_key_given_twice_or_escaped_is_read_as_the_dict_reads_it(
    scan: ModuleType,
) -> None:
    usual = h.PullMessageRequestHeader("cg", "T", 3, 120, 32, 7, 118, 15000, 1, "*", "TAG")
    body = b",".join(b'"%s":"%s"' % (k.encode(), v.encode()) for k, v in usual.to_ext().items())
    for extra, queue_id in ((b',"queueId":"2"', 2), (b',"\\u0071ueueId":"1"', 1)):
        header = b'{"code":11,"extFields":{' + body + extra + b'},"language":"JAVA"}'
        cmd = scan.decode_frame(raw_frame(header), MAX_FRAME)
        assert type(cmd) is LazyExtCommand
        assert scan.pull_header_lazy(cmd, h.PullMessageRequestHeader) is None
        assert h.PullMessageRequestHeader.of_request(cmd).queue_id == queue_id
