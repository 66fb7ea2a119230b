"""Micro benchmark of decoding a pull response: microseconds per message.

Run once by hand, never from the test suite:

    .venv/bin/python benchmarks/decode_bench.py [--messages 32] [--body 1024] [--rounds 2000]

One pull response body (``--messages`` records of ``--body`` random bytes,
with the properties a producer and broker set) is decoded by the lazy
decoder, compiled and run from its source, and by the full decoder
(``decode_messages``); "iterate" also reads topic, queue offset and body of
every message, as a consumer does. Each figure is the best of five runs.
"""

from __future__ import annotations

import argparse
import os
import timeit
from collections.abc import Callable
from types import ModuleType

from apogee._util.compiled import is_compiled, load_interpreted
from apogee.client.broker_api import decode_messages
from apogee.model import received
from apogee.model.message import properties_to_string
from apogee.model.message_codec import encode_record

PROPERTIES = properties_to_string(
    {
        "UNIQ_KEY": "7F00000100002A9F0000000000000001",
        "TAGS": "created",
        "KEYS": "o-1",
        "CLUSTER": "DefaultCluster",
        "WAIT": "true",
    }
)


def response(messages: int, body: int) -> bytes:
    return b"".join(
        encode_record(
            topic="bench-topic",
            body=os.urandom(body),
            properties=PROPERTIES,
            queue_offset=i,
            physical_offset=i * (body + 200),
            store_host=("10.0.0.1", 10911),
        )
        for i in range(messages)
    )


def iterate_lazy(module: ModuleType, data: bytes) -> None:
    for m in module.decode_received(data):
        _ = (m.topic, m.queue_offset, m.body)


def iterate_full(data: bytes) -> None:
    for m in decode_messages(data):
        _ = (m.topic, m.queue_offset, m.body)


def per_message(fn: Callable[[], object], rounds: int, messages: int) -> float:
    best = min(timeit.repeat(fn, number=rounds, repeat=5))
    return best / rounds / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=32)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    data = response(args.messages, args.body)
    source = load_interpreted("apogee.model.received")
    slow = max(args.rounds // 10, 1)
    runs: list[tuple[str, Callable[[], object], int]] = [
        ("full decode_messages", lambda: decode_messages(data), slow),
        ("full decode + iterate", lambda: iterate_full(data), slow),
        ("lazy, interpreted", lambda: source.decode_received(data), slow),
        ("lazy, interpreted + iterate", lambda: iterate_lazy(source, data), slow),
    ]
    if is_compiled(received):
        runs += [
            ("lazy, compiled", lambda: received.decode_received(data), args.rounds),
            ("lazy, compiled + iterate", lambda: iterate_lazy(received, data), args.rounds),
        ]
    else:
        print("apogee.model.received is not compiled here: no compiled figures")
    print(f"{args.messages} messages of {args.body} bytes per response")
    for label, fn, rounds in runs:
        print(f"  {label:30s} {per_message(fn, rounds, args.messages):7.3f} us/message")


if __name__ == "__main__":
    main()
