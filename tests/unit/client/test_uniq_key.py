"""UNIQ_KEY ids: Java's 32-hex layout, one fixed prefix per process, never repeated."""

from __future__ import annotations

import datetime as dt
import os

from apogee.client.uniq_key import new_uniq_key, new_uniq_keys, uniq_key_block


def test_layout_prefix_and_month_offset() -> None:
    now = dt.datetime(2026, 3, 2, 0, 0, 1, tzinfo=dt.UTC).astimezone()
    now_ms = int(now.timestamp() * 1000)
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    keys = [new_uniq_key(now_ms) for _ in range(1000)]
    assert len(set(keys)) == len(keys)
    for key in keys:
        assert len(key) == 32
        assert key == key.upper()
        bytes.fromhex(key)
    assert len({k[:20] for k in keys}) == 1
    assert int(keys[0][8:12], 16) == os.getpid() & 0xFFFF
    since = int(keys[0][20:28], 16)
    assert since == now_ms - int(month_start.timestamp() * 1000)


def test_ids_made_together_share_the_time_and_count_on() -> None:
    now_ms = 1_700_000_000_000
    single = new_uniq_key(now_ms)
    keys = new_uniq_keys(now_ms, 70_000)  # more than the 16-bit counter holds: it wraps
    assert all(len(k) == 32 and k[:28] == single[:28] for k in keys)
    counters = [int(k[28:], 16) for k in keys]
    first = (int(single[28:], 16) + 1) & 0xFFFF
    assert counters == [(first + i) & 0xFFFF for i in range(70_000)]
    assert int(new_uniq_key(now_ms)[28:], 16) == (first + 70_000) & 0xFFFF
    assert new_uniq_keys(now_ms + 1, 1)[0][20:28] != single[20:28]


def test_a_block_of_ids_is_reserved_unwritten() -> None:
    now_ms = 1_700_000_000_000
    before = new_uniq_key(now_ms)
    base, first = uniq_key_block(now_ms, 300)
    assert base == before[:28] and first == (int(before[28:], 16) + 1) & 0xFFFF
    # the block's 300 counters are taken: the next id counts on after them
    assert int(new_uniq_key(now_ms)[28:], 16) == (first + 300) & 0xFFFF
