"""The sink's columnar way: the same messages as the per-row way, in runs, in both builds."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from apogee._util.compiled import load_interpreted
from apogee.errors import InvalidMessageError
from apogee.model.javahash import java_string_hash
from apogee.model.kernels import decode_batch
from apogee.model.message import properties_to_string, string_to_properties
from apogee.spark import pack
from apogee.spark._io import BATCH_BYTES, PackedSend, QueueRef
from apogee.spark.columnar import Router, packable, plan_sends
from apogee.spark.options import parse_sink
from apogee.spark.sink import _rows

INTERPRETED = load_interpreted("apogee.spark.pack")
TOPICS = {t: [QueueRef(t, "broker-a", i, "127.0.0.1:1") for i in range(4)] for t in "tuv"}


def router(start: int = 0) -> Router:
    return Router(TOPICS.__getitem__, start)


def messages(sends: list[PackedSend]) -> list[tuple[QueueRef, bytes, str, str]]:
    """Each record sent: its queue, body, own property string and UNIQ_KEY."""
    out = []
    for s in sends:
        for item in decode_batch(s.body):
            own, uniq = item.properties.split("UNIQ_KEY\x01")
            assert uniq.endswith("\x02")  # the last pair
            out.append((s.queue, bytes(item.body), own, uniq[:-1]))
    return out


def random_batch(rng: random.Random, n: int) -> pa.RecordBatch:
    def text() -> str | None:
        return rng.choice([None, "", "a", "ü-tag", "x" * rng.randrange(1, 40)])

    columns: dict[str, Any] = {
        "body": [rng.randbytes(rng.randrange(0, 300)) for _ in range(n)],
        "topic": [rng.choice("tuv") for _ in range(n)],
    }
    if rng.random() < 0.5:
        columns["body"] = pa.array([b.hex() for b in columns["body"]], pa.string())
    if rng.random() < 0.7:
        columns["tags"] = [text() for _ in range(n)]
    if rng.random() < 0.5:
        columns["keys"] = [text() for _ in range(n)]
    elif rng.random() < 0.7:
        columns["keys"] = [
            None if rng.random() < 0.1 else [text() for _ in range(rng.randrange(4))]
            for _ in range(n)
        ]
    if rng.random() < 0.5:
        columns["shardingKey"] = [rng.choice([None, "", "k1", "k2", "ключ"]) for _ in range(n)]
    if rng.random() < 0.3:
        columns["delayLevel"] = [rng.choice([None, 0]) for _ in range(n)]
    if rng.random() < 0.5:  # names a column also sets among them: the column's value wins
        names = ["a", "ü", "TAGS", "KEYS", "__SHARDINGKEY", "x" * 30]
        columns["properties"] = pa.array(
            [
                None if rng.random() < 0.1
                else [(rng.choice(names), text()) for _ in range(rng.randrange(4))]
                for _ in range(n)
            ],
            pa.map_(pa.string(), pa.string()),
        )  # fmt: skip
    return pa.RecordBatch.from_pydict(columns)


@pytest.mark.parametrize("seed", range(12))
def test_the_same_messages_as_the_per_row_way(seed: int) -> None:
    rng = random.Random(seed)
    batch = random_batch(rng, rng.randrange(1, 400))
    if rng.random() < 0.3:  # a slice: the columns' buffers start past row 0
        batch = batch.slice(rng.randrange(batch.num_rows), None) if batch.num_rows > 1 else batch
    batch_size = rng.choice([1, 3, 16, 128])
    assert packable(batch)

    sends = plan_sends(batch, None, router(seed), batch_size)

    got = messages(sends)
    ids = [uniq for _, _, _, uniq in got]
    assert len(set(ids)) == len(ids) == batch.num_rows  # every message its own id
    opts = parse_sink({"namesrv": "127.0.0.1:1"})
    per_row = [m for m, _ in _rows(batch, opts)]
    # the same property strings, pair for pair, as the per-row way sends
    want = Counter((m.topic, m.body, properties_to_string(m.properties)) for m in per_row)
    assert Counter((q.topic, body, own) for q, body, own, _ in got) == want
    assert all(0 < s.count <= batch_size for s in sends)
    # a row with a sharding key (the column's) goes where its key hashes; the rows of a
    # queue keep their order
    shard_of = {m.body: shard for m, shard in _rows(batch, opts)}
    once = {b for b, n in Counter(m.body for m in per_row).items() if n == 1}
    for q, body, _, _ in got:
        key = shard_of[body]
        if body in once and key is not None:
            assert q.queue_id == abs(java_string_hash(key)) % 4
    bodies = [m.body for m in per_row]
    if len(set(bodies)) == len(bodies):
        for q in {q for q, _, _, _ in got}:
            order = [bodies.index(b) for qq, b, _, _ in got if qq == q]
            assert order == sorted(order)


def test_rows_without_a_key_take_turns_in_runs_of_batch_size() -> None:
    batch = pa.RecordBatch.from_pydict({"body": [b"%d" % i for i in range(1000)]})
    r = router(start=2)

    sends = plan_sends(batch, "t", r, 128)

    # 8 runs, 7 of 128 rows and one of 104: run k to queue (2 + k) % 4
    assert [(s.queue.queue_id, s.count) for s in sends] == [
        (0, 128), (0, 128), (1, 128), (1, 104), (2, 128), (2, 128), (3, 128), (3, 128),
    ]  # fmt: skip
    got = [body for _, body, _, _ in messages(sends)]
    assert got[488:616] == [b"%d" % i for i in range(128)]  # the first run, on queue 2
    # the next batch carries on where this one stopped
    again = plan_sends(batch.slice(0, 1), "t", r, 128)
    assert again[0].queue.queue_id == (2 + 8) % 4


def test_a_send_stays_near_one_mebibyte() -> None:
    body = bytes(300 * 1024)
    batch = pa.RecordBatch.from_pydict({"body": [body] * 10, "tags": ["x"] * 10})

    sends = plan_sends(batch, "t", router(), 128)

    assert [s.count for s in sends] == [3, 3, 3, 1]
    assert all(len(s.body) <= BATCH_BYTES for s in sends)
    huge = pa.RecordBatch.from_pydict({"body": [bytes(BATCH_BYTES + 1)]})
    assert [s.count for s in plan_sends(huge, "t", router(), 128)] == [1]  # alone


def test_what_the_columnar_way_does_not_take() -> None:
    base = {"body": [b"a", b"b"]}
    assert packable(pa.RecordBatch.from_pydict({**base, "delayLevel": [0, None]}))
    assert not packable(pa.RecordBatch.from_pydict({**base, "delayLevel": [0, 3]}))

    def with_map(*names: str) -> pa.RecordBatch:
        props = pa.array([[(n, "v") for n in names], []], pa.map_(pa.string(), pa.string()))
        return pa.RecordBatch.from_pydict({**base, "properties": props})

    assert packable(with_map("k", "TAGS", "KEYS"))
    for reserved in ("UNIQ_KEY", "PGROUP", "TRAN_MSG", "DELAY", "REAL_TOPIC"):
        assert not packable(with_map("k", reserved)), reserved


def test_bad_rows_are_named() -> None:
    with pytest.raises(ValueError, match="null body"):
        plan_sends(pa.RecordBatch.from_pydict({"body": [b"a", None]}), "t", router(), 8)
    no_topic = pa.RecordBatch.from_pydict({"body": [b"a", b"b"], "topic": ["t", ""]})
    with pytest.raises(ValueError, match="no topic"):
        plan_sends(no_topic, None, router(), 8)
    long_tag = pa.RecordBatch.from_pydict({"body": [b"a", b"b"], "tags": ["x", "y" * 40000]})
    with pytest.raises(InvalidMessageError, match="row 1"):
        plan_sends(long_tag, "t", router(), 8)


def pack_args(rng: random.Random) -> tuple[Any, ...]:
    n = rng.randrange(1, 30)
    bodies = [rng.randbytes(rng.randrange(50)) for _ in range(n)]
    props = [rng.choice([b"", b"TAGS\x01x\x02", b"KEYS\x01a b\x02"]) for _ in range(n)]

    def column(values: list[bytes]) -> tuple[np.ndarray, bytes]:
        return np.cumsum([0] + [len(v) for v in values]).astype(np.int64), b"".join(values)

    offs, data = column(bodies)
    poffs, pdata = column(props)
    rows = np.array(rng.sample(range(n), rng.randrange(1, n + 1)), dtype=np.int64)
    if rng.random() < 0.3:
        return rows, offs, data, None, None, b"0" * 28, rng.randrange(0x10000)
    return rows, offs, data, poffs, pdata, b"0123456789ABCDEF0123456789AB", 0xFFF0


@pytest.mark.parametrize("seed", range(20))
def test_both_builds_write_the_same_bytes(seed: int) -> None:
    args = pack_args(random.Random(seed))
    assert pack.pack_rows(*args) == INTERPRETED.pack_rows(*args)
    items = decode_batch(pack.pack_rows(*args))
    assert len(items) == len(args[0])
    counters = [int(string_to_properties(i.properties)["UNIQ_KEY"][28:], 16) for i in items]
    assert [bytes(i.body) for i in items] == [args[2][args[1][r] : args[1][r + 1]] for r in args[0]]
    assert counters == [(args[6] + k) & 0xFFFF for k in range(len(items))]  # wraps at 16 bits


@pytest.mark.parametrize("module", [pack, INTERPRETED], ids=["compiled", "interpreted"])
def test_out_of_range_rows_and_offsets_are_refused(module: Any) -> None:
    offs = np.array([0, 2, 4], dtype=np.int64)
    ok = (offs, b"abcd", None, None, b"0" * 28, 0)
    assert len(decode_batch(module.pack_rows(np.array([1, 0], dtype=np.int64), *ok))) == 2
    with pytest.raises(ValueError, match="row 2"):
        module.pack_rows(np.array([2], dtype=np.int64), *ok)
    with pytest.raises(ValueError, match="row 1"):
        module.pack_rows(np.array([1], dtype=np.int64), offs, b"abc", None, None, b"0" * 28, 0)
    with pytest.raises(ValueError, match="not 28"):
        module.pack_rows(np.array([1], dtype=np.int64), offs, b"abcd", None, None, b"0", 0)
