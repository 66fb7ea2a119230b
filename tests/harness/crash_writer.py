"""A store writer meant to be killed: it logs every acknowledged message.

Run as ``python -m tests.harness.crash_writer --store DIR --acks FILE
--flush SYNC_FLUSH|ASYNC_FLUSH``. It appends numbered messages forever; after
each acknowledgement (PUT_OK from the flush future under SYNC_FLUSH, from the
put itself under ASYNC_FLUSH) it writes one line ``seq offset size flushed``
to the acks file with an unbuffered write, so a SIGKILL loses no line whose
message was acknowledged. It runs from the repository root, where ``tests`` is a package.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.file_store import FileMessageStore
from apogee.store.results import PutStatus
from apogee.testing.store import message, small_config


def body_of(seq: int) -> bytes:
    return b"crash-%08d-" % seq + bytes([seq % 251]) * 200


def writer_config(store: Path, flush: FlushDiskType) -> StoreConfig:
    """The writer's config; reopen the store with the same one."""
    return small_config(
        store,
        flush_disk_type=flush,
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_bytes=20 * 1000,
        flush_interval_commit_log_ms=500,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--acks", type=Path, required=True)
    parser.add_argument("--flush", choices=[t.value for t in FlushDiskType], required=True)
    args = parser.parse_args()
    config = writer_config(args.store, FlushDiskType(args.flush))
    store = FileMessageStore.open(config)
    store.start()
    fd = os.open(args.acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    seq = 0
    while True:
        result = store.put(message(queue_id=seq % 4, body=body_of(seq), uniq=f"seq{seq}"))
        if not result.ok:
            raise SystemExit(f"put failed: {result.status} {result.reason}")
        status = store.flush_future(result).result(30)
        store.dispatch_step()
        if status is PutStatus.PUT_OK:
            flushed = store.commit_log.queue.flushed_offset
            line = f"{seq} {result.wrote_offset} {result.wrote_bytes} {flushed}\n"
            os.write(fd, line.encode())
        seq += 1


if __name__ == "__main__":
    main()
