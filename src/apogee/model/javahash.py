"""Java's ``String.hashCode`` — RocketMQ stores it as tag codes and index keys.

Owns: the cached hash of tags and :func:`tags_code`. The hash itself is
``apogee.model.kernels.java_hash`` (compiled where a C compiler is at hand):
it runs over UTF-16 code units (so a character outside the BMP counts as its
two surrogates) with 32-bit signed wrap-around, ``h = 31 * h + unit`` for each
unit, starting from 0.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from apogee.model.kernels import java_hash

#: The hash without the cache, for high-cardinality strings (index keys),
#: which would only evict the few tags that :func:`java_string_hash` keeps.
java_string_hash_uncached: Callable[[str], int] = java_hash


@lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Signed 32-bit ``String.hashCode`` of ``text`` (cached; tags repeat)."""
    return java_hash(text)


def tags_code(tag: str | None) -> int:
    """Consume-queue tag code of a TAGS value: its hash, 0 when there is no tag."""
    if not tag:
        return 0
    return java_string_hash(tag)
