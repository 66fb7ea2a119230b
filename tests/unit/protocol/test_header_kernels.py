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


def outcome(decode: Callable[[], h.SendMessageRequestHeader]) -> tuple[str, Any]:
    try:
        header = decode()
    except HeaderFieldError as exc:
        return "error", str(exc)
    values = [getattr(header, name) for name in h.SendMessageRequestHeader.__slots__]
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


@st.composite
def ext_maps(draw: st.DrawFn, names: tuple[str, ...]) -> dict[str, str]:
    """A well-formed send header with up to three fields spoiled, dropped or odd."""
    odd = [texts, texts, texts, numbers, numbers, numbers, numbers, numbers, texts,
           numbers, flags, flags, numbers, texts]  # fmt: skip
    good = [texts, texts, texts, good_numbers, good_numbers, good_numbers,
            st.integers(0, 2**45).map(str), good_numbers, texts, good_numbers,
            st.sampled_from(["true", "false"]), st.sampled_from(["true", "false"]),
            good_numbers, texts]  # fmt: skip
    ext = {name: draw(kind) for name, kind in zip(names, good, strict=True)}
    for at in draw(st.lists(st.integers(0, 13), max_size=3)):
        if draw(st.booleans()):
            ext[names[at]] = draw(odd[at])
        else:
            ext.pop(names[at], None)
    return ext


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
