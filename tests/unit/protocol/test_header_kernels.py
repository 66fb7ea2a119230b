"""The send header's compiled decode against the Python one: the same header or the
same error for any ext fields, and every usual header read by the kernel itself."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.errors import HeaderFieldError
from apogee.protocol import headers as h

NAMES = {"v1": h._LONG_NAMES, "v2": h._SHORT_NAMES}


@pytest.fixture(scope="module")
def hk(cython_build: Callable[[str], ModuleType]) -> Any:
    return cython_build("apogee.protocol.header_kernels")


def outcome(decode: Callable[[], Any]) -> tuple[str, Any]:
    """The header ``decode`` gives, with the type of each of its fields, or its error."""
    try:
        header = decode()
    except HeaderFieldError as exc:
        return "error", str(exc)
    values = [getattr(header, name) for name in type(header).__slots__]
    return "header", (header, [type(v) for v in values])


def kernel_or_python(hk: Any, ext: dict[str, str], names: tuple[str, ...]) -> Any:
    header = hk.send_header(ext, names, h.SendMessageRequestHeader)
    return (
        header if header is not None else h._send_header_py(ext, names, h.SendMessageRequestHeader)
    )


numbers = st.sampled_from(
    ["0", "4", "-1", "007", "+5", " 6", "7 ", "1_0", "٣", "", "x", "-", "--1", "1.0",
     "2147483647", "2147483648", "-2147483648", "-2147483649", "999999999999999999",
     "9223372036854775807", "9223372036854775808", "-9223372036854775808"]
) | st.integers(-(2**64), 2**64).map(str)  # fmt: skip
flags = st.sampled_from(["true", "false", "1", "0", "TRUE", "False", "yes", "", "2"])
texts = st.text(max_size=6)


good_numbers = st.integers(-(2**31), 2**31 - 1).map(str)


def spoiled(
    draw: st.DrawFn,
    names: tuple[str, ...],
    good: list[st.SearchStrategy[str]],
    odd: list[st.SearchStrategy[str]],
) -> dict[str, str]:
    """Ext fields drawn from ``good``, up to three of them then redrawn from ``odd`` or
    dropped."""
    ext = {name: draw(kind) for name, kind in zip(names, good, strict=True)}
    for at in draw(st.lists(st.integers(0, len(names) - 1), max_size=3)):
        if draw(st.booleans()):
            ext[names[at]] = draw(odd[at])
        else:
            ext.pop(names[at], None)
    return ext


@st.composite
def ext_maps(draw: st.DrawFn, names: tuple[str, ...]) -> dict[str, str]:
    """A well-formed send header with up to three fields spoiled, dropped or odd."""
    odd = [texts, texts, texts, numbers, numbers, numbers, numbers, numbers, texts,
           numbers, flags, flags, numbers, texts]  # fmt: skip
    good = [texts, texts, texts, good_numbers, good_numbers, good_numbers,
            st.integers(0, 2**45).map(str), good_numbers, texts, good_numbers,
            st.sampled_from(["true", "false"]), st.sampled_from(["true", "false"]),
            good_numbers, texts]  # fmt: skip
    return spoiled(draw, names, good, odd)


@settings(max_examples=500)
@given(st.sampled_from(["v1", "v2"]), st.data())
def test_any_ext_fields_give_the_python_decoders_result(
    hk: Any, form: str, data: st.DataObject
) -> None:
    names = NAMES[form]
    ext = data.draw(ext_maps(names))
    cls = h.SendMessageRequestHeader
    assert outcome(lambda: kernel_or_python(hk, ext, names)) == outcome(
        lambda: h._send_header_py(ext, names, cls)
    )


def test_the_usual_header_is_read_by_the_kernel(hk: Any) -> None:
    header = h.SendMessageRequestHeader("pg", "t", "TBW102", 4, 3, 0, 1732000000000, 0,
                                        "UNIQ_KEY\x01K\x02", 2, True, False, 16, "b")  # fmt: skip
    for names, ext in ((h._SHORT_NAMES, header.to_ext_v2()), (h._LONG_NAMES, header.to_ext())):
        decoded = hk.send_header(ext, names, h.SendMessageRequestHeader)
        if hk.COMPILED:
            assert decoded == header
        else:
            assert decoded is None  # interpreted, headers keeps to its own code


# -- the pull header ------------------------------------------------------------------

PULL_NAMES = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
              "commitOffset", "suspendTimeoutMillis", "subVersion", "subscription",
              "expressionType", "maxMsgBytes")  # fmt: skip


def checked_pull(ext: dict[str, str]) -> h.PullMessageRequestHeader:
    """The pull header by the checked readers alone, field by field."""
    return h.PullMessageRequestHeader(
        h.req_str(ext, "consumerGroup"),
        h.req_str(ext, "topic"),
        h.req_int(ext, "queueId", 32),
        h.req_int(ext, "queueOffset"),
        h.req_int(ext, "maxMsgNums", 32),
        h.req_int(ext, "sysFlag", 32),
        h.req_int(ext, "commitOffset"),
        h.req_int(ext, "suspendTimeoutMillis"),
        h.req_int(ext, "subVersion"),
        ext.get("subscription"),
        ext.get("expressionType") or None,
        h.opt_int(ext, "maxMsgBytes", bits=32),
    )


@st.composite
def pull_maps(draw: st.DrawFn) -> dict[str, str]:
    """A well-formed pull header with up to three fields spoiled, dropped or odd."""
    longs = st.integers(-(2**63), 2**63 - 1).map(str)
    odd = [texts, texts, numbers, numbers, numbers, numbers, numbers, numbers, numbers,
           texts, texts, numbers]  # fmt: skip
    good = [texts, texts, good_numbers, longs, good_numbers, good_numbers, longs, longs,
            longs, texts, st.sampled_from(["TAG", "SQL92", ""]), good_numbers]  # fmt: skip
    return spoiled(draw, PULL_NAMES, good, odd)


@settings(max_examples=500)
@given(pull_maps())
def test_any_pull_ext_fields_decode_as_the_checked_readers_do(hk: Any, ext: dict[str, str]) -> None:
    cls = h.PullMessageRequestHeader
    checked = outcome(lambda: checked_pull(ext))
    assert outcome(lambda: h._pull_header_py(ext, cls)) == checked
    kernel = hk.pull_header(ext, cls)
    assert outcome(lambda: kernel or h._pull_header_py(ext, cls)) == checked


def test_the_usual_pull_header_is_read_by_the_kernel(hk: Any) -> None:
    cls = h.PullMessageRequestHeader
    for header in (
        cls("cg", "T", 3, 120, 32, 7, 118, 15000, 1732000000000, "*", "TAG"),
        cls("cg", "T", 0, 0, 1024, 2, -1, 0, 0, None, None, 1 << 20),
    ):
        decoded = hk.pull_header(header.to_ext(), cls)
        if hk.COMPILED:
            assert decoded == header
            assert [type(getattr(decoded, n)) for n in cls.__slots__] == [
                type(getattr(header, n)) for n in cls.__slots__
            ]
        else:
            assert decoded is None  # interpreted, headers keeps to its own code
