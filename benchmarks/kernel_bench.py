"""Micro benchmark of the compiled kernels: nanoseconds per call, per kernel.

Run by hand, never from the test suite:

    .venv/bin/python benchmarks/kernel_bench.py [--rounds 7] [--baseline PATH.so]

Each kernel of ``apogee.model.kernels`` and ``apogee.store.kernels`` is
called on one fixed, representative input (below: a 23-character index key,
a producer's property string, a 1 KiB record, a batch of 16 messages of
100 bytes, 16 offsets to write as ids, 32 consume-queue units, 32 dispatch
entries with two keys and a unique key each, a 1 KiB pwrite to a file in the
temporary directory).
A figure is the best, over ``--rounds`` runs, of the mean time per call
of one run of about 20 ms.

``--baseline`` names a build of the retired hand-written C module
(``apogee._speedups``, before ``src/apogee/_speedups.c`` was removed; build
it from that commit with ``make .venv/.installed`` and copy the
``_speedups.cpython-*.so``): its kernels, which had the same calling
conventions, then run on the same inputs in the same process, the two
alternating run by run, and the table gives both.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import timeit
from collections.abc import Callable
from types import ModuleType
from typing import Any

from apogee._util.compiled import is_compiled
from apogee.model import kernels as model_kernels
from apogee.model.message import BatchItem, properties_to_string
from apogee.model.message_codec import pack_host, topic_prefix
from apogee.store import kernels as store_kernels

PROPERTIES = properties_to_string(
    {
        "UNIQ_KEY": "7F00000100002A9F0000000000000001",
        "TAGS": "created",
        "KEYS": "o-1 customer-42",
        "CLUSTER": "DefaultCluster",
        "WAIT": "true",
    }
)
HOST = pack_host(("127.0.0.1", 10911))


def batch_body(items: list[BatchItem]) -> bytes:
    out = bytearray()
    for flag, body, props in items:
        raw = props.encode()
        out += (22 + len(body) + len(raw)).to_bytes(4, "big") + bytes(8)
        out += flag.to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
        out += len(raw).to_bytes(2, "big") + raw
    return bytes(out)


def cases(fd: int) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """Kernel name -> (module that has it, arguments)."""
    items = [BatchItem(0, os.urandom(100), PROPERTIES) for _ in range(16)]
    entries = [
        ("TopicTest", 3, 1000 * i, 300, 77, 1_700_000_000_000 + i, i, "o-1 customer-42",
         f"7F00000100002A9F{i:016X}", 0, 0)
        for i in range(32)
    ]  # fmt: skip
    work = store_kernels.index_work(entries)
    index_file = bytearray(40 + 4 * 512 + 20 * 128)
    body = os.urandom(1024)
    record = (0, 3, 0, 1000, 2000, 0, 1_700_000_000_000, HOST, 1_700_000_000_001, HOST, 0, 0,
              body, topic_prefix("TopicTest"), PROPERTIES.encode(), 12345)  # fmt: skip
    return {
        "java_hash": ("model", ("TopicTest#customer-4242",)),
        "message_fields": ("model", (PROPERTIES,)),
        "encode_record_into": ("model", (bytearray(2048), *record)),
        "decode_batch": ("model", (batch_body(items),)),
        "offset_msg_ids": ("model", (HOST, list(range(1 << 30, (1 << 30) + 1600, 100)))),
        "prepare_batch": ("store", (items, "", 1 << 20, 97, 1 << 20)),
        "encode_batch": ("store", (bytearray(8192), 0, 1 << 30, 3, 500, 0,
                                   1_700_000_000_000, HOST, 1_700_000_000_001, HOST, 0,
                                   topic_prefix("TopicTest"), items, "", "TopicTest")),
        "write_units": ("store", (memoryview(bytearray(640)), 0, 0, 640, entries, 0, 32,
                                  "TopicTest", 3)),
        "index_work": ("store", (entries,)),
        # count 1 each call: the same 64 puts into a 128-entry file every time
        "index_put": ("store", (index_file, 512, 128, 0, 0, 0, 0, 0, 1, work, 0, 0)),
        "pwrite_all": ("store", (fd, body, len(body), 0)),
    }  # fmt: skip


#: Kernels the retired C module cannot run (new since, or with other arguments): no C figure.
NEW_CONVENTIONS = frozenset({"prepare_batch", "encode_batch", "offset_msg_ids"})


def per_call_ns(fn: Callable[..., object], args: tuple[Any, ...]) -> float:
    timer = timeit.Timer(lambda: fn(*args))
    number, _ = timer.autorange()  # calls that take at least 0.2 s
    number = max(1, number // 10)  # runs of about 20 ms: short enough to dodge most noise
    return timer.timeit(number) / number * 1e9


def load_baseline(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("_speedups", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--baseline", help="a build of the retired apogee._speedups (.so)")
    parser.add_argument("kernels", nargs="*", help="only these kernels (default: all)")
    args = parser.parse_args()
    for module in (model_kernels, store_kernels):
        if not is_compiled(module):
            raise SystemExit(f"{module.__name__} runs from its source: build it first (make)")
    baseline = load_baseline(args.baseline) if args.baseline else None
    modules = {"model": model_kernels, "store": store_kernels}
    with tempfile.TemporaryFile() as f:
        table = cases(f.fileno())
        print(f"{'kernel':20} {'C ns':>10} {'Cython ns':>10} {'Cython/C':>9}")
        for name, (owner, call_args) in table.items():
            if args.kernels and name not in args.kernels:
                continue
            ours = getattr(modules[owner], name)
            comparable = baseline is not None and name not in NEW_CONVENTIONS
            theirs = getattr(baseline, name) if comparable else None
            best_c = best_cy = float("inf")
            for _ in range(args.rounds):  # alternate, so that drift hits both
                if theirs is not None:
                    best_c = min(best_c, per_call_ns(theirs, call_args))
                best_cy = min(best_cy, per_call_ns(ours, call_args))
            c_text = f"{best_c:10.0f}" if theirs is not None else f"{'-':>10}"
            ratio = f"{best_cy / best_c:9.2f}" if theirs is not None else f"{'-':>9}"
            print(f"{name:20} {c_text} {best_cy:10.0f} {ratio}", flush=True)


if __name__ == "__main__":
    main()
