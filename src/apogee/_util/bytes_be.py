"""Big-endian integers in a buffer: the typed readers and writers of the compiled modules.

Owns: ``get16``/``get32``/``get64`` (a signed int16, int32, int64 at a byte
offset), ``put16``/``put32``/``put64`` (one written there), ``put_hex4`` (the
low 16 bits of a number as four uppercase hex digits, a UNIQ_KEY's counter) and ``copy_bytes``
(a run of bytes copied from one buffer into another), ``same_at`` (whether a
run of bytes is a given name), ``find_byte`` (where a byte first occurs in a
run: ``memchr``) and ``digits_at`` (a header's number read from its ASCII
digits), the one place where the compiled modules (``apogee.model.kernels``,
``apogee.store.kernels``, ``apogee.model.received``, ``apogee.spark.scan``,
``apogee.protocol.header_scan``, ``apogee.protocol.header_write``) read and
write a number.

This file is their interpreted side, on bytes, bytearray or a memoryview with
``struct``; it is not compiled itself. Compiled, those modules ``cimport`` the
same names from ``bytes_be.pxd`` instead, whose bodies are C on an
``unsigned char *`` and inlined into each caller (a function in a compiled
``.py`` would be called through a pointer, not inlined). A number that does not
fit its field raises ``struct.error`` here and OverflowError compiled (the
argument conversion), as ``docs/compiled.md`` says.
"""

from __future__ import annotations

import struct

import cython

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def get16(p: cython.p_uchar, at: int) -> int:
    value: int = _I16.unpack_from(p, at)[0]
    return value


def get32(p: cython.p_uchar, at: int) -> int:
    value: int = _I32.unpack_from(p, at)[0]
    return value


def get64(p: cython.p_uchar, at: int) -> int:
    value: int = _I64.unpack_from(p, at)[0]
    return value


def put16(p: cython.p_uchar, at: int, v: int) -> None:
    _I16.pack_into(p, at, v)  # struct.error past int16


def put32(p: cython.p_uchar, at: int, v: int) -> None:
    _I32.pack_into(p, at, v)  # struct.error past int32


def put64(p: cython.p_uchar, at: int, v: int) -> None:
    _I64.pack_into(p, at, v)  # struct.error past int64


def put_hex4(p: cython.p_uchar, at: int, v: int) -> None:
    """``v``'s low 16 bits as four uppercase hex digits at ``p[at:at + 4]``."""
    p[at : at + 4] = b"%04X" % (v & 0xFFFF)


def copy_bytes(out: cython.p_uchar, at: int, src: cython.p_uchar, src_at: int, n: int) -> None:
    """``out[at:at + n] = src[src_at:src_at + n]``."""
    out[at : at + n] = src[src_at : src_at + n]


def same_at(p: cython.p_uchar, at: int, name: cython.p_char, n: int) -> bool:
    """Whether ``p[at:at + n]`` is ``name`` (compiled: a ``memcmp``, inlined for a constant n)."""
    same: bool = p[at : at + n] == name
    return same


def find_byte(p: cython.p_uchar, start: int, end: int, byte: int) -> int:
    """Index of the first ``byte`` in ``p[start:end]``, or -1 (compiled: a ``memchr``)."""
    found: int = p.find(byte, start, end)
    return found


def digits_at(p: cython.p_uchar, start: int, end: int, out: list[int]) -> bool:
    """``-?[0-9]{1,18}`` in ``p[start:end]`` into ``out[0]``; False if not that (a
    header number as the request path reads it from its text)."""
    text = bytes(p[start:end])
    digits = text[1:] if text[:1] == b"-" else text
    if not 1 <= len(digits) <= 18 or not digits.isdigit():
        return False
    out[0] = int(text)
    return True
