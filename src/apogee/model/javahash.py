"""Java's ``String.hashCode`` — RocketMQ stores it as tag codes and index keys.

Owns: the one implementation of the hash. Imports: stdlib only.

The hash runs over UTF-16 code units (so a character outside the BMP counts
as its two surrogates) with 32-bit signed wrap-around:
``h = 31 * h + unit`` for each unit, starting from 0.
"""

from __future__ import annotations

from functools import lru_cache

_MASK = 0xFFFFFFFF


@lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Signed 32-bit ``String.hashCode`` of ``text``."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def tags_code(tag: str | None) -> int:
    """Consume-queue tag code of a TAGS value: its hash, 0 when there is no tag."""
    if not tag:
        return 0
    return java_string_hash(tag)
