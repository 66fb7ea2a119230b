"""``header_scan.send_answer`` against the full decode: the same fields, or None.

The full decode is ``header_json.decode`` (run interpreted: the dict route)
followed by what ``broker_api.send_result`` reads from the command. Wherever
that fails, or the header is not a response, ``send_answer`` must give None;
elsewhere it may give None (its caller then decodes in full), but what it
gives must be those fields exactly. The usual answers, Apogee's and Java's,
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
from tests.unit.protocol.answer_cases import INSERTS, answers, counts, texts, values


def expected(full: ModuleType, header: bytes) -> tuple[Any, ...] | None:
    """The fields the full decode gives, or None where it fails or it is no response."""
    try:
        cmd = full.decode(header, b"")
    except ProtocolError:
        return None
    if not cmd.flag & 1:
        return None
    ext = cmd.ext_fields
    try:
        fields = (int(ext["queueId"]), int(ext["queueOffset"]), ext["msgId"])
    except (KeyError, ValueError):
        return None
    queue_id, offset, msg_id = fields
    return (cmd.opaque, cmd.code, cmd.remark, msg_id, queue_id, offset,
            ext.get("transactionId"), ext.get("MSG_REGION"))  # fmt: skip


def same(scan: ModuleType, full: ModuleType, header: bytes) -> tuple[Any, ...] | None:
    framed = b"\x00" * 8 + header
    lean = scan.send_answer(framed, 8)
    want = expected(full, header)
    if want is None:
        assert lean is None
    else:
        assert lean is None or lean == want
    return lean  # type: ignore[no-any-return]


APOGEE = (
    b'{"code":0,"extFields":{"msgId":"7F00000100006DA70000000000FACA58","queueId":"3",'
    b'"queueOffset":"3450","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,'
    b'"language":"PYTHON","opaque":17,"version":401}'
)
JAVA = (
    b'{"code":10,"extFields":{"queueId":"0","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
    b'"msgId":"AC11000100002A9F0000000000000000","queueOffset":"0","transactionId":"T1"},'
    b'"flag":1,"language":"JAVA","opaque":2,"remark":"flush timeout",'
    b'"serializeTypeCurrentRPC":"JSON","version":453}'
)


def test_the_usual_answers_are_read(scan: ModuleType, full: ModuleType) -> None:
    assert same(scan, full, APOGEE) == (
        17, 0, None, "7F00000100006DA70000000000FACA58", 3, 3450, None, "DefaultRegion"
    )  # fmt: skip
    assert same(scan, full, JAVA) == (
        2, 10, "flush timeout", "AC11000100002A9F0000000000000000", 0, 0, "T1", "DefaultRegion"
    )  # fmt: skip
    spaced = json.dumps(json.loads(APOGEE), indent=1).encode()
    assert same(scan, full, spaced) is not None


@pytest.mark.parametrize(
    "header",
    [
        APOGEE.replace(b'"flag":1', b'"flag":0'),  # a request
        APOGEE.replace(b'"queueId":"3"', b'"queueId":"03"'),
        APOGEE.replace(b'"queueId":"3"', b'"queueId":3'),
        APOGEE.replace(b'"queueId":"3"', b'"queueId":" 3"'),
        APOGEE.replace(b'"queueOffset":"3450"', b'"queueOffset":"-1"'),
        APOGEE.replace(b'"queueOffset":"3450",', b""),
        APOGEE.replace(b'"msgId"', b'"msg\\u0049d"'),
        APOGEE.replace(b'"msgId":"7F00000100006DA70000000000FACA58"', b'"msgId":null'),
        APOGEE.replace(b'"TRACE_ON":"true"}', b'"TRACE_ON":"true"},"extFields":{}'),
        APOGEE.replace(b'"TRACE_ON":"true"}', b'"TRACE_ON":"true",}'),
        APOGEE.replace(b'"TRACE_ON":"true"', b'"TRACE_ON":{"a":1}'),
        APOGEE.replace(b'"code":0', b'"code":2147483648'),
        APOGEE + b" x",
        APOGEE[:-1],
        b"",
    ],
)
def test_odd_answers_are_left_to_the_full_decode(
    scan: ModuleType, full: ModuleType, header: bytes
) -> None:
    assert same(scan, full, header) is None


SEND_EXT = (
    ("msgId", texts | values), ("queueId", counts | values), ("queueOffset", counts | values),
    ("transactionId", texts | values), ("MSG_REGION", texts | values), ("TRACE_ON", values),
)  # fmt: skip
SEND_ANSWERS = answers(SEND_EXT, st.integers(-(2**31), 2**31) | values)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(SEND_ANSWERS, st.booleans(), st.booleans())
def test_any_answer_reads_as_the_full_decode_or_not_at_all(
    scan: ModuleType, full: ModuleType, obj: dict[str, Any], ascii_only: bool, spaced: bool
) -> None:
    separators = (", ", " : ") if spaced else (",", ":")
    header = json.dumps(obj, ensure_ascii=ascii_only, separators=separators)
    same(scan, full, header.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_answers_read_as_the_full_decode_or_not_at_all(
    scan: ModuleType, full: ModuleType, data: st.DataObject
) -> None:
    same(scan, full, damaged(APOGEE, data, INSERTS))
