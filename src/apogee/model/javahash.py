"""Java's ``String.hashCode`` — RocketMQ stores it as tag codes and index keys.

Owns: the one implementation of the hash (and the choice of its compiled
twin, ``apogee._speedups.java_hash``, when that was built).

The hash runs over UTF-16 code units (so a character outside the BMP counts
as its two surrogates) with 32-bit signed wrap-around:
``h = 31 * h + unit`` for each unit, starting from 0.

Speed matters: the broker hashes every key of every message it indexes. The
hash is linear in the units, ``h = sum(unit[i] * 31^(n-1-i)) mod 2^32``, so
ASCII text up to ``_CHUNK`` characters costs one C-level pass of table
lookups (``_ASCII_TERMS[p][c] = c * 31^p mod 2^32``). Longer or non-ASCII
text runs chunk by chunk with ``h(a + b) = h(a) * 31^len(b) + h(b)``.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache

from apogee._util.native import speedups

_MASK = 0xFFFFFFFF
_CHUNK = 128
_POW31 = tuple(pow(31, p, 1 << 32) for p in range(_CHUNK + 1))
_ASCII_TERMS = [[(c * w) & _MASK for c in range(128)] for w in _POW31[:_CHUNK]]
# _TERMS_FOR_LENGTH[n][i]: the table for character i of an n-character text
_TERMS_FOR_LENGTH = [_ASCII_TERMS[n - 1 :: -1] if n else [] for n in range(_CHUNK + 1)]
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_lookup = list.__getitem__


def _signed(h: int) -> int:
    h &= _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def _ascii_terms(chunk: Sequence[int]) -> int:
    return sum(map(_lookup, _ASCII_TERMS, chunk[::-1]))


def _unit_terms(chunk: Sequence[int]) -> int:
    return sum(map(operator.mul, chunk[::-1], _POW31))


def _chunked(units: Sequence[int], terms: Callable[[Sequence[int]], int]) -> int:
    h = 0
    for start in range(0, len(units), _CHUNK):
        chunk = units[start : start + _CHUNK]
        h = (h * _POW31[len(chunk)] + terms(chunk)) & _MASK
    return h


def java_string_hash_python(text: str) -> int:
    """Signed 32-bit ``String.hashCode`` of ``text``, without the cache.

    For high-cardinality strings (index keys), which would only evict the
    few tags that :func:`java_string_hash` keeps. The specification of the
    compiled twin; :data:`java_string_hash_uncached` is whichever runs.
    """
    if text.isascii():
        data = text.encode("ascii")
        if len(data) <= _CHUNK:
            # The common case, inlined: it runs for every indexed key.
            h = sum(map(_lookup, _TERMS_FOR_LENGTH[len(data)], data)) & _MASK
            return h - (1 << 32) if h & 0x80000000 else h
        return _signed(_chunked(data, _ascii_terms))
    units = memoryview(text.encode(_UTF16_NATIVE)).cast("H")
    return _signed(_chunked(units, _unit_terms))


java_string_hash_uncached: Callable[[str], int] = (
    speedups.java_hash if speedups is not None else java_string_hash_python
)


@lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Signed 32-bit ``String.hashCode`` of ``text`` (cached; tags repeat)."""
    return java_string_hash_uncached(text)


def tags_code(tag: str | None) -> int:
    """Consume-queue tag code of a TAGS value: its hash, 0 when there is no tag."""
    if not tag:
        return 0
    return java_string_hash(tag)
