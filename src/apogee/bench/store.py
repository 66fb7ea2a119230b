"""``apogee bench store``: in-process throughput of the message store.

Owns: four measurements on real files, no network: single-message appends
under ASYNC_FLUSH (dispatch included), batches of 100 (batch-body decoding
included), SYNC_FLUSH with many writers each keeping one put in flight
on a loop-driven store (as the broker's connections do), and sequential
reads through ``get``.

On a terminal a bar on stderr names the phase running; the figures end as a
summary table (``--json``: one JSON object instead).

Messages carry realistic properties (a distinct UNIQ_KEY, TAGS, KEYS, WAIT)
so property parsing is measured too; message objects are built before the
clock starts, as the broker builds them from the request it decoded.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import orjson
import uvloop

from apogee._util.progress import Progress, print_summary
from apogee.model.message import Message, StoreBatch, StoreMessage, properties_to_string
from apogee.model.message_codec import decode_batch, encode_batch
from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.file_store import FileMessageStore
from apogee.store.results import PutResult, PutStatus

TOPIC = "BenchmarkTest"
QUEUES = 8
POOL = 1024  # distinct messages cycled through


def _props(i: int) -> str:
    return properties_to_string(
        {"UNIQ_KEY": f"7F00000100{i:022X}", "WAIT": "true", "TAGS": f"Tag{i % 4}", "KEYS": f"k{i}"}
    )


def _messages(body: bytes) -> list[StoreMessage]:
    host = ("127.0.0.1", 10911)
    born = ("127.0.0.1", 51234)
    return [
        StoreMessage(
            TOPIC, i % QUEUES, body, _props(i), born_timestamp=1, born_host=born, store_host=host
        )
        for i in range(POOL)
    ]


@contextmanager
def _store(
    root: Path, name: str, *, loop_driven: bool = False, **overrides: object
) -> Iterator[FileMessageStore]:
    config = StoreConfig(store_path_root_dir=root / name, **overrides)  # type: ignore[arg-type]
    store = FileMessageStore.open(config)
    store.start(loop_driven=loop_driven)
    try:
        yield store
    finally:
        store.close()


def _refused(result: PutResult) -> click.ClickException:
    """A put the store did not take: a figure made of refusals would be no figure."""
    return click.ClickException(
        f"the store refused a write: {result.status.value} ({result.reason or 'no reason given'})"
    )


def _fail(finished: asyncio.Future[None], exc: Exception) -> None:
    if not finished.done():
        finished.set_exception(exc)


def bench_single(root: Path, count: int, body: bytes) -> float:
    msgs = _messages(body)
    with _store(root, "single") as store:
        put, dispatch = store.put, store.dispatch_step
        start = time.perf_counter()
        for i in range(count):
            result = put(msgs[i & (POOL - 1)])
            if not result.ok:
                raise _refused(result)
            if i & 255 == 255:
                dispatch(1024)
        while dispatch(4096):
            pass
        return time.perf_counter() - start


def bench_batch(root: Path, count: int, body: bytes, size: int) -> float:
    bodies = [
        encode_batch(
            Message(TOPIC, body, properties={"UNIQ_KEY": f"B{b:04d}{i:04d}", "TAGS": "TagB"})
            for i in range(size)
        )
        for b in range(16)
    ]
    host = ("127.0.0.1", 10911)
    batches = count // size
    with _store(root, "batch") as store:
        start = time.perf_counter()
        for n in range(batches):
            items = decode_batch(bodies[n & 15])
            batch = StoreBatch(TOPIC, n % QUEUES, items, "WAIT\x01true\x02", born_host=host,
                               store_host=host)  # fmt: skip
            result = store.put_batch(batch)
            if not result.ok:
                raise _refused(result)
            store.dispatch_step(4096)
        return time.perf_counter() - start


async def _sync_writers(store: FileMessageStore, msgs: list[StoreMessage], count: int,
                        writers: int) -> None:  # fmt: skip
    """``writers`` puts outstanding at all times, each put again once answered.

    Driven as the broker drives its store: a writer is a client connection
    with one request in flight. Its put is answered by a callback on the
    group-commit generation (one callback per generation, as SendHandler
    does), run on this loop when the sync loop's eventfd fires, and the
    callback makes the writer's next put at once, as the next request would
    arrive. No task per writer: the figure is the store's, not asyncio's.
    """
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    waiting: dict[Future[PutStatus], list[int]] = {}
    left = [count, count]  # puts to make, answers to get
    scheduled = [False]

    # One dispatch step (which first writes the turn's appends to the file)
    # scheduled after the puts of a loop turn.
    def step() -> None:
        scheduled[0] = False
        if store.dispatch_step(4096) >= 4096:
            kick()

    def kick() -> None:
        if not scheduled[0]:
            scheduled[0] = True
            loop.call_soon(step)

    def put(w: int) -> None:
        if left[0] <= 0:
            return
        left[0] -= 1
        result = store.put(msgs[(left[0] * writers + w) & (POOL - 1)])
        if not result.ok:
            _fail(finished, _refused(result))
            return
        future = store.flush_future(result)
        kick()
        if future.done():  # already durable: answer on the next turn, not recursively
            loop.call_soon(answered, future, [w])
        elif (same := waiting.get(future)) is not None:
            same.append(w)
        else:
            waiting[future] = [w]
            future.add_done_callback(answered_generation)

    def answered_generation(future: Future[PutStatus]) -> None:
        answered(future, waiting.pop(future))

    def answered(future: Future[PutStatus], ws: list[int]) -> None:
        status = future.result()
        if status is not PutStatus.PUT_OK:
            finished.set_exception(RuntimeError(f"flush: {status}"))
            return
        left[1] -= len(ws)
        if left[1] <= 0 and not finished.done():
            finished.set_result(None)
        for w in ws:
            put(w)

    # Waiters are answered on this loop, as the broker does: the sync loop's
    # eventfd wakes it, with no thread in between.
    commit = store.group_commit
    assert commit is not None
    loop.add_reader(commit.fileno(), commit.run_once)
    try:
        for w in range(min(writers, count)):
            put(w)
        await finished
    finally:
        loop.remove_reader(commit.fileno())
    while store.dispatch_step(4096):
        pass


def bench_sync(root: Path, count: int, body: bytes, writers: int) -> tuple[float, int, float]:
    msgs = _messages(body)
    with _store(root, "sync", loop_driven=True, flush_disk_type=FlushDiskType.SYNC_FLUSH) as store:
        start = time.perf_counter()
        _run(_sync_writers(store, msgs, count, writers))
        elapsed = time.perf_counter() - start
        commit = store.group_commit
        syncs = commit.syncs if commit is not None else 0
        sync_s = commit.sync_seconds if commit is not None else 0.0
    return elapsed, syncs, sync_s


def _run(coro: Coroutine[Any, Any, None]) -> None:
    uvloop.run(coro)


def bench_read(root: Path, count: int, body: bytes) -> tuple[float, int, int]:
    msgs = _messages(body)
    with _store(root, "read") as store:
        for i in range(count):
            store.put(msgs[i & (POOL - 1)])
        while store.dispatch_step(4096):
            pass
        get = store.get
        read = total = 0
        start = time.perf_counter()
        for q in range(QUEUES):
            offset = 0
            while True:
                result = get(TOPIC, q, offset, 32)
                if not result.message_count:
                    break
                read += result.message_count
                total += result.total_bytes
                offset = result.next_begin_offset
        elapsed = time.perf_counter() - start
    return elapsed, read, total


def disk_fsyncs_per_s(root: Path, seconds: float = 1.0, chunk: int = 4096) -> float:
    """What the disk under ``root`` does right now: 4 KiB write + fdatasync, repeated.

    Printed beside the SYNC_FLUSH figure: the group commit's ceiling moves with the
    disk's sync latency, which on a shared machine varies from minute to minute.
    """
    path = root / "fsync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = b"\x5a" * chunk
        count = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            os.pwrite(fd, data, count * chunk)
            os.fdatasync(fd)
            count += 1
    finally:
        os.close(fd)
        path.unlink()
    return count / elapsed


@click.command("store")
@click.option("--messages", default=300_000, show_default=True, help="Single-message appends.")
@click.option("--batch-messages", default=500_000, show_default=True)
@click.option("--batch-size", default=100, show_default=True)
@click.option("--sync-messages", default=100_000, show_default=True)
@click.option("--writers", default=64, show_default=True, help="Concurrent SYNC_FLUSH writers.")
@click.option("--read-messages", default=300_000, show_default=True)
@click.option("--body-size", default=1024, show_default=True)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Parent of the temporary store directories (removed after).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def store_bench(
    *,
    messages: int,
    batch_messages: int,
    batch_size: int,
    sync_messages: int,
    writers: int,
    read_messages: int,
    body_size: int,
    directory: Path | None,
    as_json: bool,
) -> None:
    """Measure the store alone: appends, batches, SYNC_FLUSH group commit, reads."""
    body = bytes(range(256)) * (body_size // 256) + bytes(body_size % 256)
    root = Path(tempfile.mkdtemp(prefix="apogee-bench-", dir=directory))
    record = 91 + body_size + len(TOPIC) + len(_props(0))
    try:
        with Progress("single appends", 5, unit="of 5 phases") as bar:
            # os.sync between phases: one phase's write-back must not slow the next
            single = bench_single(root, messages, body)
            os.sync()
            bar.describe(f"batches of {batch_size}")
            bar.advance()
            batch = bench_batch(root, batch_messages, body, batch_size)
            os.sync()
            bar.describe("disk fsyncs")
            bar.advance()
            disk = disk_fsyncs_per_s(root)
            bar.describe(f"SYNC_FLUSH, {writers} writers")
            bar.advance()
            sync, syncs, sync_s = bench_sync(root, sync_messages, body, writers)
            os.sync()
            bar.describe("reads")
            bar.advance()
            read_s, read_n, read_bytes = bench_read(root, read_messages, body)
            bar.advance()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mb = 1024 * 1024
    out: dict[str, object] = {
        "body_size": body_size,
        "single_msgs_per_s": round(messages / single),
        "single_mb_per_s": round(messages * record / single / mb, 1),
        "batch_msgs_per_s": round(batch_messages // batch_size * batch_size / batch),
        "batch_mb_per_s": round(batch_messages * record / batch / mb, 1),
        "sync_flush_msgs_per_s": round(sync_messages / sync),
        "sync_flush_mb_per_s": round(sync_messages * record / sync / mb, 1),
        "sync_flush_writers": writers,
        "sync_flush_fsyncs": syncs,
        "sync_flush_ms_per_fsync": round(sync_s / syncs * 1000, 3) if syncs else 0,
        "disk_fsyncs_per_s": round(disk),
        "read_msgs_per_s": round(read_n / read_s),
        "read_mb_per_s": round(read_bytes / read_s / mb, 1),
    }
    if as_json:
        click.echo(orjson.dumps(out).decode())
    else:
        print_summary("bench store", [(key, str(value)) for key, value in out.items()])
