"""A sink row's message properties: the one rule both ways of the sink follow.

Owns: ``row_properties`` (the ``properties`` map's pairs, then TAGS, KEYS,
DELAY and __SHARDINGKEY from their columns; a column's value replaces the
map's pair of that name where it stands), ``join_keys``, and the texts of
the two faults a row to send can have (``NULL_BODY``, ``NO_TOPIC``). Plain Python:
the driver's planning processes load the sink without numpy or pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterable

from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
)

#: What a row with a null body, and a row without a topic, are refused with.
NULL_BODY = "a row to send has a null body"
NO_TOPIC = "a row to send has no topic (null topic column, no topic option)"


def row_properties(  # one row's cells, in column order
    props: Iterable[tuple[object, object]] | None,
    tag: str | None,
    keys: str | list[str | None] | None,
    delay: int | None,
    shard: str | None,
) -> dict[str, str]:
    """The properties of the message a row becomes (its id aside).

    Null map values, and empty tags and keys, are left out; a null sharding
    key is none, an empty one is sent as it is.
    """
    properties: dict[str, str] = {}
    if props:
        properties.update((str(k), str(v)) for k, v in props if v is not None)
    if tag:
        properties[PROPERTY_TAGS] = tag
    if keys:
        key_text = keys if isinstance(keys, str) else join_keys(keys)
        if key_text:
            properties[PROPERTY_KEYS] = key_text
    if delay:
        properties[PROPERTY_DELAY_TIME_LEVEL] = str(int(delay))
    if shard is not None:
        properties[PROPERTY_SHARDING_KEY] = shard
    return properties


def join_keys(keys: list[str | None]) -> str:
    """An array of keys as RocketMQ stores them: space-separated; null and empty ones
    are left out (an array<string> column may hold nulls)."""
    return " ".join(k for k in keys if k)
