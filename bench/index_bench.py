"""Micro benchmark of the message index: keys indexed per second, lookups per second.

Run once by hand, never from the test suite:

    .venv/bin/python bench/index_bench.py [--entries 1000000] [--dir /tmp]

Keys look like the broker's: ``topic#`` + a 32-hex-digit unique id. Key
generation happens before the clock starts; file creation is included.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from apogee.store.index_file import IndexFile


def _keys(count: int) -> list[str]:
    return [f"BenchTopic#7F00000100002A9F0000{i:012X}" for i in range(count)]


def bench_index_file(directory: Path, entries: int, slots: int) -> None:
    keys = _keys(entries - 1)
    ts = 1_700_000_000_000
    start = time.perf_counter()
    with IndexFile.create(directory / "bench-index", hash_slot_num=slots, index_num=entries) as f:
        put = f.put_key
        for offset, key in enumerate(keys):
            put(key, offset * 200, ts + offset // 100)
        elapsed = time.perf_counter() - start
        rate = len(keys) / elapsed
        print(f"IndexFile.put_key: {len(keys):,} keys in {elapsed:.2f} s = {rate:,.0f}/s")

        probes = keys[:: max(1, len(keys) // 100_000)]
        start = time.perf_counter()
        for key in probes:
            f.select_phy_offsets(key, 32, 0, 2**63 - 1)
        elapsed = time.perf_counter() - start
        print(f"IndexFile.select:  {len(probes):,} lookups = {len(probes) / elapsed:,.0f}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--slots", type=int, default=0, help="default: entries / 4, as RocketMQ")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    slots = args.slots or max(1, args.entries // 4)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        bench_index_file(Path(tmp), args.entries, slots)


if __name__ == "__main__":
    main()
