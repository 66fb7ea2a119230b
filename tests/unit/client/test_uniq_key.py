"""UNIQ_KEY ids: Java's 32-hex layout, one fixed prefix per process, never repeated."""

from __future__ import annotations

import datetime as dt
import os

from apogee.client.uniq_key import new_uniq_key


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
