# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: always_allow_keywords=False, binding=False
"""The JSON command header written field by field, compiled: command -> header bytes, no dict.

Owns: :func:`encode` (the header measured, then written straight into one
bytes object) and :func:`encode_frame` (the same, after the frame's length and
type words). Both take only what the usual header holds (Java ints, a
``LanguageCode``, ext fields and remark as strings that need no escape in
JSON) and return None on anything else, so that ``header_json``'s dict route
encodes it and every result and every error is that route's. The reading
side is ``header_scan``.

Output, in this order (``remark`` only when it is not None)::

    {"code":C,"extFields":{"k":"v",...},"flag":F,"language":"L","opaque":O,"version":V,"remark":"R"}

Compiled only (the first line; ``setup.py``): interpreted, :data:`COMPILED`
is False and its callers never call in; the functions would only return None.
"""

from __future__ import annotations

import cython

from apogee.codes import LanguageCode
from apogee.protocol.command import RemotingCommand

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import put32
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.long import PyLong_AsLongLong
    from cython.cimports.cpython.unicode import PyUnicode_AsUTF8AndSize
    from cython.cimports.libc.string import memcpy

#: Whether this module runs compiled (``header_json`` and ``framing`` call in only then).
COMPILED: bool = cython.compiled

_NAMES_BY_VALUE = tuple(
    LanguageCode(value).name for value in range(max(m.value for m in LanguageCode) + 1)
)
_I32_MAX = cython.declare(cython.longlong, 2**31 - 1)
# The frame's type word keeps the header length in its low 24 bits.
_HEADER_MASK = cython.declare(cython.Py_ssize_t, 0xFFFFFF)


@cython.cfunc
@cython.exceptval(check=False)
def _int_len(v: cython.longlong) -> cython.Py_ssize_t:
    """Characters of ``v`` in decimal, its sign included."""
    u: cython.ulonglong = cython.cast(cython.ulonglong, v)
    if v < 0:
        return 1 + _digits(cython.cast(cython.ulonglong, 0) - u)
    return _digits(u)


@cython.cfunc
@cython.exceptval(check=False)
def _put_int(out: cython.p_uchar, at: cython.Py_ssize_t, v: cython.longlong) -> cython.Py_ssize_t:
    """``v`` in decimal at ``out[at]``; the index after it."""
    u: cython.ulonglong = cython.cast(cython.ulonglong, v)
    if v < 0:
        out[at] = 0x2D
        at += 1
        u = cython.cast(cython.ulonglong, 0) - u
    end: cython.Py_ssize_t = at + _digits(u)
    i: cython.Py_ssize_t = end
    while True:
        i -= 1
        out[i] = 0x30 + cython.cast(cython.uchar, u % 10)
        u //= 10
        if u == 0:
            break
    return end


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _digits(u: cython.ulonglong) -> cython.Py_ssize_t:
    n: cython.Py_ssize_t = 1
    while u >= 10:
        u //= 10
        n += 1
    return n


@cython.cfunc
@cython.exceptval(check=False)
def _plain_len(text: object) -> cython.Py_ssize_t:
    """Bytes of ``text`` (an exact str) in UTF-8 when JSON needs no escape in it; -1
    when it does (a quote, a backslash, a control character) or cannot be encoded."""
    if not cython.compiled:
        return -1
    size: cython.Py_ssize_t = 0
    try:
        data: cython.p_uchar = cython.cast(
            cython.p_uchar, PyUnicode_AsUTF8AndSize(text, cython.address(size))
        )
    except UnicodeEncodeError:
        return -1
    i: cython.Py_ssize_t
    for i in range(size):
        c: cython.uchar = data[i]
        if c < 0x20 or c == 0x22 or c == 0x5C:  # noqa: PLR1714  # C compares
            return -1
    return size


@cython.cfunc
@cython.exceptval(check=False)
def _put_text(
    out: cython.p_uchar, at: cython.Py_ssize_t, text: object, quoted: cython.bint
) -> cython.Py_ssize_t:
    """``text`` (checked by ``_plain_len``) in UTF-8 at ``out[at]``, in quotes when
    ``quoted``; the index after it."""
    if not cython.compiled:
        return -1
    size: cython.Py_ssize_t = 0
    data: cython.p_char = cython.cast(
        cython.p_char, PyUnicode_AsUTF8AndSize(text, cython.address(size))
    )  # cannot fail: _plain_len encoded it, and the UTF-8 is kept in the str
    if quoted:
        out[at] = 0x22
        at += 1
    memcpy(out + at, data, size)
    at += size
    if quoted:
        out[at] = 0x22
        at += 1
    return at


@cython.cfunc
@cython.exceptval(check=False)
def _put(out: cython.p_uchar, at: cython.Py_ssize_t, text: cython.p_char,
         n: cython.Py_ssize_t) -> cython.Py_ssize_t:  # fmt: skip
    if cython.compiled:
        memcpy(out + at, text, n)
    return at + n


@cython.cfunc
@cython.exceptval(check=False)
def _java_int(value: object, out: cython.p_longlong) -> cython.bint:
    """An int field's value into ``out[0]``; False for anything the dict route
    should encode (a bool, not an int, past a long long)."""
    if not cython.compiled:
        return False
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    try:
        out[0] = PyLong_AsLongLong(value)
    except OverflowError:
        return False
    return True


def encode(cmd: RemotingCommand) -> bytes | None:
    """The header of ``cmd`` written field by field; None to take the dict route."""
    return _encode(cmd, -1)


def encode_frame(cmd: RemotingCommand, body_len: cython.Py_ssize_t) -> bytes | None:
    """The frame's start for a JSON ``cmd`` whose body is ``body_len`` bytes: the
    length and type words, then the header, in one bytes object (``framing`` would
    otherwise join a packed prefix to the header, one copy more). None where
    ``encode`` declines or the frame's words cannot hold the sizes; the caller then
    frames it its usual way, which gives its error."""
    if body_len < 0:
        return None
    return _encode(cmd, body_len)


@cython.cfunc
def _encode(cmd: RemotingCommand, body_len: cython.Py_ssize_t) -> bytes | None:  # noqa: PLR0915
    """``encode`` (``body_len`` < 0) or ``encode_frame``: one straight-line writer."""
    if not cython.compiled:
        return None
    ext = cmd.ext_fields
    if type(ext) is not dict:
        return None
    code: cython.longlong = 0
    flag: cython.longlong = 0
    opaque: cython.longlong = 0
    version: cython.longlong = 0
    if not (
        _java_int(cmd.code, cython.address(code))
        and _java_int(cmd.flag, cython.address(flag))
        and _java_int(cmd.opaque, cython.address(opaque))
        and _java_int(cmd.version, cython.address(version))
    ):
        return None
    member = cmd.language
    # indexed by value, not hashed: Enum.__hash__ is Python code
    if type(member) is not LanguageCode:
        return None
    language = _NAMES_BY_VALUE[member]
    remark = cmd.remark
    if remark is not None and type(remark) is not str:
        return None
    # {"code":C,"extFields":{E},"flag":F,"language":"L","opaque":O,"version":V[,"remark":"R"]}
    size: cython.Py_ssize_t = 8 + 14 + 1 + 8 + 13 + 1 + 10 + 11 + 1
    k: cython.Py_ssize_t
    v: cython.Py_ssize_t
    fields: dict = ext  # type: ignore[type-arg]  # untyped: the loop checks each item
    key: object
    value: object
    for key, value in fields.items():
        if type(key) is not str or type(value) is not str:
            return None
        k = _plain_len(key)
        v = _plain_len(value)
        if k < 0 or v < 0:
            return None
        size += k + v + 6  # "k":"v",
    if fields:
        size -= 1  # no comma after the last
    size += _int_len(code) + _int_len(flag) + _int_len(opaque) + _int_len(version)
    v = _plain_len(language)
    if v < 0:
        return None
    size += v
    if remark is not None:
        v = _plain_len(remark)
        if v < 0:
            return None
        size += 11 + v + 1
    start: cython.Py_ssize_t = 0
    if body_len >= 0:
        # L = 4 + H + B and T = H (JSON is type 0) must fit their int32 and 24 bits
        if size > _HEADER_MASK or 4 + size + body_len > _I32_MAX:
            return None
        start = 8
    out_obj = PyBytes_FromStringAndSize(cython.NULL, start + size)
    out: cython.p_uchar = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out_obj))
    if start:
        put32(out, 0, cython.cast(cython.int, 4 + size + body_len))
        put32(out, 4, cython.cast(cython.int, size))
        out += start  # the header is written as for encode
    at: cython.Py_ssize_t = _put(out, 0, b'{"code":', 8)
    at = _put_int(out, at, code)
    at = _put(out, at, b',"extFields":{', 14)
    first: cython.bint = True
    for key, value in fields.items():
        if not first:
            out[at] = 0x2C
            at += 1
        first = False
        at = _put_text(out, at, key, True)
        out[at] = 0x3A
        at = _put_text(out, at + 1, value, True)
    at = _put(out, at, b'},"flag":', 9)
    at = _put_int(out, at, flag)
    at = _put(out, at, b',"language":', 12)
    at = _put_text(out, at, language, True)
    at = _put(out, at, b',"opaque":', 10)
    at = _put_int(out, at, opaque)
    at = _put(out, at, b',"version":', 11)
    at = _put_int(out, at, version)
    if remark is not None:
        at = _put(out, at, b',"remark":', 10)
        at = _put_text(out, at, remark, True)
    out[at] = 0x7D
    if at + 1 != size:  # the two passes disagree: never hand out a torn header
        raise AssertionError(f"JSON header of {size} bytes came out as {at + 1}")
    return out_obj  # type: ignore[no-any-return]  # the bytes just written
