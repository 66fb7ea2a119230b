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
from tests.unit.protocol.answer_cases import INSERTS, answers, counts, values

OFFSETS = ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")


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


PULL_ANSWERS = answers(
    [(key, counts | values) for key in (*OFFSETS, "offsetDelta")],
    st.sampled_from([0, 19, 20, 21, 1]) | values,
)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(PULL_ANSWERS, st.booleans(), st.booleans(), st.binary(max_size=40))
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


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_answers_read_as_the_full_decode_or_not_at_all(
    scan: ModuleType, full: ModuleType, data: st.DataObject
) -> None:
    same(scan, full, damaged(APOGEE, data, INSERTS), b"\x00body")
