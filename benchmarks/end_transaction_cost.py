"""The broker's CPU per END_TRANSACTION without sockets: frames fed to a connection.

The in-process twin of ``end_transaction.py``, for profiling: a broker runs in
this process on a temporary store, half messages are stored by
SEND_MESSAGE_V2 frames (PREPARED, one message of 1 KiB each), or with
``--batch N`` by SEND_BATCH_MESSAGE frames of N messages each (one half record
per batch, one transaction ended once: what the Spark sink's exactly-once mode
sends), then
oneway END_TRANSACTION frames naming them (COMMIT, or ROLLBACK with
``--rollback``) are handed to a server-side ``Connection`` whose transport
drops what is written, ``--per-read`` frames per ``data_received`` (a socket
read of a pipelining committer holds hundreds). The loop runs until every op
record is stored, so the store's dispatch and the connection's later turns
are counted. The figure is this process's CPU time per END_TRANSACTION, best
of ``--rounds`` (threads included: the flush and allocation services), with the
cycle collector set up as in an ``apogee broker`` process.

    .venv/bin/python benchmarks/end_transaction_cost.py --count 20000 --rounds 5
    .venv/bin/python benchmarks/end_transaction_cost.py --profile 30   # cProfile, by own time
    .venv/bin/python benchmarks/end_transaction_cost.py --batch 125 --count 800

Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from cost_frames import DiscardTransport, send_frame, uniq_key

from apogee.cli.process import GC_THRESHOLD, freeze_startup_objects
from apogee.codes import RequestCode
from apogee.model.message import TRANSACTION_PREPARED_TYPE, Message
from apogee.model.message_codec import encode_batch
from apogee.model.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import encode_bytes
from apogee.remoting import run
from apogee.testing.cluster import run_broker

TOPIC = "endtx_cost"
GROUP = "endtx_pg"


def half_frames(count: int, first: int, batch: int) -> list[bytes]:
    body = os.urandom(1024)
    props = f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02TXN\x01s:1:t\x02"
    if batch:
        return [
            send_frame(
                TOPIC,
                i % 4,
                encode_batch(
                    [
                        Message(
                            TOPIC, body, properties={"UNIQ_KEY": uniq_key((first + i) * batch + j)}
                        )
                        for j in range(batch)
                    ]
                ),
                properties=f"{props}UNIQ_KEY\x01{first + i:032X}\x02",
                sys_flag=TRANSACTION_PREPARED_TYPE,
                group=GROUP,
                batch=True,
            )
            for i in range(count)
        ]
    return [
        send_frame(
            TOPIC,
            i % 4,
            body,
            properties=f"{props}UNIQ_KEY\x01{first + i:032X}\x02",
            sys_flag=TRANSACTION_PREPARED_TYPE,
            group=GROUP,
        )
        for i in range(count)
    ]


def end_frames(broker: Any, first: int, count: int, kind: int) -> list[bytes]:
    frames = []
    store = broker.store
    for offset in range(first, first + count):
        unit = store.queue_unit(TRANS_HALF_TOPIC, 0, offset)
        assert unit is not None
        header = h.EndTransactionRequestHeader(
            producer_group=GROUP, tran_state_table_offset=offset,
            commit_log_offset=unit.commit_log_offset, commit_or_rollback=kind,
            msg_id=f"{offset:032X}", topic=TOPIC, transaction_id=f"{offset:032X}",
        )  # fmt: skip
        frames.append(encode_bytes(RemotingCommand.oneway(RequestCode.END_TRANSACTION,
                                                          header.to_ext())))  # fmt: skip
    return frames


async def settle(broker: Any, until: int) -> None:
    store = broker.store
    while store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) < until:
        await asyncio.sleep(0)


async def feed(conn: Any, frames: list[bytes], per_read: int) -> None:
    for i in range(0, len(frames), per_read):
        conn.data_received(b"".join(frames[i : i + per_read]))
        await asyncio.sleep(0)


async def one_round(broker: Any, conn: Any, args: argparse.Namespace, profile: bool) -> float:
    store = broker.store
    first = store.max_offset_in_queue(TRANS_HALF_TOPIC, 0)
    ops = store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
    await feed(conn, half_frames(args.count, first, args.batch), 64)
    while store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) < first + args.count:
        await asyncio.sleep(0.001)
    frames = end_frames(broker, first, args.count, 12 if args.rollback else 8)
    profiler = cProfile.Profile() if profile else None
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    await feed(conn, frames, args.per_read)
    await settle(broker, ops + args.count)
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
        if args.callers:
            pstats.Stats(profiler).print_callers(args.callers)
    return time.process_time() - start


async def measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with run_broker(
            Path(tmp), store={"mapped_file_size_commit_log_bytes": 1 << 30}
        ) as broker:
            gc.set_threshold(*GC_THRESHOLD)  # as in an `apogee broker` process
            freeze_startup_objects()
            conn = broker.server._new_connection()  # the seam measured
            conn.connection_made(DiscardTransport())  # type: ignore[arg-type]
            try:
                warm = argparse.Namespace(**{**vars(args), "count": 512})
                await one_round(broker, conn, warm, False)  # creates the topic, warms caches
                if args.profile:
                    await one_round(broker, conn, args, True)
                    return
                took = [await one_round(broker, conn, args, False) for _ in range(args.rounds)]
                per = sorted(t / args.count * 1e6 for t in took)
                kind = "rollback" if args.rollback else "commit"
                print(f"{kind}: best {per[0]:.2f} µs CPU per END_TRANSACTION, median "
                      f"{per[len(per) // 2]:.2f} ({args.per_read} frames per read, "
                      f"load {os.getloadavg()[0]:.1f})")  # fmt: skip
            finally:
                conn.connection_lost(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-read", type=int, default=200, help="frames per data_received")
    parser.add_argument("--rollback", action="store_true")
    parser.add_argument(
        "--batch",
        type=int,
        default=0,
        help="N messages per half (a batch half, as the Spark sink's)",
    )
    parser.add_argument("--profile", type=int, default=0, help="print the top N by own time")
    parser.add_argument("--callers", help="with --profile: who calls the functions matching this")
    run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
