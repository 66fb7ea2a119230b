"""``header_scan.pull_answer`` against the full decode: the same fields, or None.

The full decode is ``header_json.decode`` (run interpreted: the dict route)
followed by what ``broker_api.pull_result`` reads from the command: the four
offsets through ``int``. Wherever that fails, or the header is not a response,
``pull_answer`` must give None; elsewhere it may give None (its caller then
decodes in full), but what it gives must be those fields exactly, with the
bytes after the header as the body. The usual answers, Apogee's and Java's,
must be read.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apogee.errors import ProtocolError
from tests.harness.damage import damaged
from tests.harness.kernels import NotCompiledError, module_build

OFFSETS = ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")


@pytest.fixture(scope="module")
def scan() -> ModuleType:
    try:
        return module_build("apogee.protocol.header_scan", "compiled")
    except NotCompiledError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def full() -> ModuleType:
    return module_build("apogee.protocol.header_json", "interpreted")


def expected(full: ModuleType, header: bytes, body: bytes) -> tuple[Any, ...] | None:
    """The fields the full decode gives, or None where it fails or it is no response."""
    try:
        cmd = full.decode(header, body)
    except ProtocolError:
        return None
    if not cmd.flag & 1:
        return None
    try:
        offsets = [int(cmd.ext_fields[key]) for key in OFFSETS]
    except (KeyError, ValueError):
        return None
    return (cmd.opaque, cmd.code, cmd.remark, *offsets, bytes(cmd.body or b""))


def same(scan: ModuleType, full: ModuleType, header: bytes, body: bytes = b"") -> Any:
    framed = b"\x00" * 8 + header + body
    lean = scan.pull_answer(framed, 8, 8 + len(header))
    want = expected(full, header, body)
    if want is None:
        assert lean is None
    else:
        assert lean is None or lean == want
    return lean


APOGEE = (
    b'{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"12",'
    b'"minOffset":"0","maxOffset":"13"},"flag":1,"language":"PYTHON","opaque":7,"version":401}'
)
JAVA = (
    b'{"code":19,"extFields":{"minOffset":"0","maxOffset":"4","nextBeginOffset":"4",'
    b'"suggestWhichBrokerId":"1","offsetDelta":"0"},"flag":1,"language":"JAVA","opaque":2,'
    b'"remark":"no new message","serializeTypeCurrentRPC":"JSON","version":453}'
)


def test_the_usual_answers_are_read(scan: ModuleType, full: ModuleType) -> None:
    assert same(scan, full, APOGEE, b"\x00\x01messages") == (
        7, 0, None, 12, 0, 13, 0, b"\x00\x01messages"
    )  # fmt: skip
    assert same(scan, full, JAVA) == (2, 19, "no new message", 4, 0, 4, 1, b"")
    spaced = json.dumps(json.loads(APOGEE), indent=1).encode()
    assert same(scan, full, spaced, b"x") is not None


@pytest.mark.parametrize(
    "header",
    [
        APOGEE.replace(b'"flag":1', b'"flag":0'),  # a request
        APOGEE.replace(b'"nextBeginOffset":"12"', b'"nextBeginOffset":"012"'),
        APOGEE.replace(b'"nextBeginOffset":"12"', b'"nextBeginOffset":12'),
        APOGEE.replace(b'"nextBeginOffset":"12"', b'"nextBeginOffset":" 12"'),
        APOGEE.replace(b'"minOffset":"0"', b'"minOffset":"-1"'),
        APOGEE.replace(b'"maxOffset":"13"', b'"maxOffset":null'),
        APOGEE.replace(b'"suggestWhichBrokerId":"0",', b""),
        APOGEE.replace(b'"minOffset"', b'"min\\u004fffset"'),
        APOGEE.replace(b'"maxOffset":"13"}', b'"maxOffset":"13"},"extFields":{}'),
        APOGEE.replace(b'"maxOffset":"13"}', b'"maxOffset":"13",}'),
        APOGEE.replace(b'"maxOffset":"13"}', b'"maxOffset":"13","x":[1]}'),
        APOGEE.replace(b'"code":0', b'"code":2147483648'),
        APOGEE.replace(b'"extFields":{', b'"extFields":null,"e":{'),
        APOGEE + b" x",
        APOGEE[:-1],
        b"",
    ],
)
def test_odd_answers_are_left_to_the_full_decode(
    scan: ModuleType, full: ModuleType, header: bytes
) -> None:
    assert same(scan, full, header, b"body") is None


def test_the_header_ends_where_the_caller_says(scan: ModuleType) -> None:
    framed = b"\x00" * 8 + APOGEE + b"body"
    assert scan.pull_answer(framed, 8, 8 + len(APOGEE))[-1] == b"body"
    assert scan.pull_answer(framed, 8, 8 + len(APOGEE) + 1) is None  # "b" is no JSON
    assert scan.pull_answer(framed, 8, len(framed) + 1) is None
    assert scan.pull_answer(framed, 8, 7) is None


texts = st.text(
    st.characters(codec="utf-8") | st.sampled_from(["\x01", '"', "\\", "é", "😀", "\u2028"]),
    max_size=8,
)
counts = st.sampled_from(
    ["0", "3", "03", "-1", "+1", " 1", "1_0", "", "\u0661", "9" * 18, "9" * 19]
) | st.integers(0, 2**62).map(str)
values = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | texts | st.floats(allow_nan=False)
)


@st.composite
def answers(draw: st.DrawFn) -> dict[str, Any]:
    ext: dict[str, Any] = {}
    for key in (*OFFSETS, "offsetDelta"):
        if draw(st.integers(0, 9)) > 0:
            ext[key] = draw(counts | values)
    ext.update(draw(st.dictionaries(texts, values, max_size=2)))
    obj: dict[str, Any] = {}
    fields: tuple[tuple[str, st.SearchStrategy[Any]], ...] = (
        ("code", st.sampled_from([0, 19, 20, 21, 1]) | values),
        ("extFields", st.just(ext) | values), ("flag", st.sampled_from([0, 1, 3]) | values),
        ("language", texts | values), ("opaque", st.integers(-(2**31), 2**31) | values),
        ("remark", texts | values), ("version", st.integers(0, 500) | values),
        ("serializeTypeCurrentRPC", values),
    )  # fmt: skip
    for key, strategy in fields:
        if draw(st.integers(0, 9)) > 0:
            obj[key] = draw(strategy)
    keys = draw(st.permutations(list(obj)))
    return {key: obj[key] for key in keys}


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(answers(), st.booleans(), st.booleans(), st.binary(max_size=40))
def test_any_answer_reads_as_the_full_decode_or_not_at_all(  # noqa: PLR0917  # hypothesis
    scan: ModuleType,
    full: ModuleType,
    obj: dict[str, Any],
    ascii_only: bool,
    spaced: bool,
    body: bytes,
) -> None:
    separators = (", ", " : ") if spaced else (",", ":")
    header = json.dumps(obj, ensure_ascii=ascii_only, separators=separators)
    same(scan, full, header.encode("utf-8", "surrogatepass"), body)


INSERTS = [b"\\", b'"', b",", b"}", b"0", b" ", b"\xff"]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_answers_read_as_the_full_decode_or_not_at_all(
    scan: ModuleType, full: ModuleType, data: st.DataObject
) -> None:
    same(scan, full, damaged(APOGEE, data, INSERTS), b"\x00body")
