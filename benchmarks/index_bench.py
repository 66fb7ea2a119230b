"""Micro benchmark of the message index: keys indexed per second, lookups per second.

Run once by hand, never from the test suite:

    .venv/bin/python benchmarks/index_bench.py [--entries 1000000] [--dir /tmp]

Keys look like the broker's: ``topic#`` + a 32-hex-digit unique id. Key and
request generation happen before the clock starts; file creation is included.
The service run dispatches records carrying a UNIQ_KEY and one KEYS token,
so it indexes two keys per record, as a broker does for keyed messages.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from apogee.store.dispatch import DispatchRequest
from apogee.store.index_file import IndexFile
from apogee.store.index_service import IndexService


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


def _requests(count: int) -> list[DispatchRequest]:
    ts = 1_700_000_000_000
    return [
        DispatchRequest(
            topic="BenchTopic",
            queue_id=i % 8,
            commit_log_offset=i * 200,
            msg_size=200,
            tags_code=0,
            store_timestamp=ts + i // 100,
            consume_queue_offset=i // 8,
            keys=f"order-{i}",
            uniq_key=f"7F00000100002A9F0000{i:012X}",
            sys_flag=0,
            prepared_transaction_offset=0,
        )
        for i in range(count)
    ]


def bench_index_service(directory: Path, entries: int, slots: int) -> None:
    requests = _requests((entries - 1) // 2)
    service = IndexService(directory / "index", max_hash_slot_num=slots, max_index_num=entries)
    service.load(True, 0)
    try:
        dispatch = service.dispatch
        start = time.perf_counter()
        for request in requests:
            dispatch(request)
        elapsed = time.perf_counter() - start
        keys = 2 * len(requests)
        print(
            f"IndexService.dispatch: {len(requests):,} records ({keys:,} keys) in {elapsed:.2f} s"
            f" = {len(requests) / elapsed:,.0f} records/s, {keys / elapsed:,.0f} keys/s"
        )
        probes = requests[:: max(1, len(requests) // 50_000)]
        start = time.perf_counter()
        for request in probes:
            service.query("BenchTopic", request.keys or "", 32, 0, 2**63 - 1)
        elapsed = time.perf_counter() - start
        print(f"IndexService.query: {len(probes):,} queries = {len(probes) / elapsed:,.0f}/s")
    finally:
        service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--slots", type=int, default=0, help="default: entries / 4, as RocketMQ")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    slots = args.slots or max(1, args.entries // 4)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        bench_index_file(Path(tmp), args.entries, slots)
        bench_index_service(Path(tmp), args.entries, slots)


if __name__ == "__main__":
    main()
