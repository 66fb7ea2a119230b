"""One consuming process: a C++ client PushConsumer counting what it is given.

Usage: ``python -m apogee.bench.cpp_consumer '<json spec>'`` with ``namesrv``, ``topic``,
``group``, ``threads`` (the consumer's thread pool), ``expect`` (stop after this many
messages), ``idle_s`` (or after this long without one, once the first came), ``timeout_s``
(or after this long in all) and ``samples_file``. Only the standard library and the
``rocketmq`` wheel (PyPI ``rocketmq==0.4.4``, a dev extra) are imported, so that the process
carries nothing but the client.

The listener is a ctypes callback the client calls once per message on its own threads; it
answers CONSUME_SUCCESS at once. A message carrying the property ``t`` (its sender's
``time.time_ns()``) adds a sample: the time it was received and how long after it was sent,
both written to ``samples_file`` as int64 pairs (receive ns, latency us). One JSON line on
stdout gives the count and the times of the first and last message.

    samples_file: [recv_ns int64][latency_us int64] ... per stamped message
"""

from __future__ import annotations

import array
import itertools
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq.ffi import MSG_CALLBACK_FUNC, dll  # the wheel's bindings of librocketmq.so

CONSUME_SUCCESS = 0
LOG_LEVEL_ERROR = 2
STAMP = b"t"


class Counter:
    """What the listener saw; the callback runs on the client's threads."""

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.numbers = itertools.count(1)  # next() is atomic under the GIL
        self.received = 0
        self.first_ns = 0
        self.last_ns = 0
        self.samples: array.array[int] = array.array("q")
        self.done = threading.Event()

    def on_message(self, _consumer: int, msg: int) -> int:
        now = time.time_ns()
        n = next(self.numbers)
        if n == 1:
            self.first_ns = now
        self.received, self.last_ns = max(self.received, n), now
        stamp = dll.GetMessageProperty(msg, STAMP)
        if stamp:
            self.samples.extend((now, (now - int(stamp)) // 1000))
        if n >= self.expect:
            self.done.set()
        return CONSUME_SUCCESS


def _consumer(spec: dict[str, Any]) -> int:
    consumer = int(dll.CreatePushConsumer(spec["group"].encode()))
    dll.SetPushConsumerNameServerAddress(consumer, spec["namesrv"].encode())
    dll.SetPushConsumerInstanceName(consumer, f"bench{os.getpid()}".encode())
    dll.SetPushConsumerThreadCount(consumer, int(spec.get("threads", 4)))
    dll.SetPushConsumerLogLevel(consumer, LOG_LEVEL_ERROR)
    dll.Subscribe(consumer, spec["topic"].encode(), b"*")
    return consumer


def main(raw: str) -> None:
    spec = json.loads(raw)
    counter = Counter(int(spec["expect"]))
    callback = MSG_CALLBACK_FUNC(counter.on_message)  # kept alive until exit
    consumer = _consumer(spec)
    dll.RegisterMessageCallback(consumer, callback)
    if dll.StartPushConsumer(consumer) != 0:
        print(json.dumps({"error": "the consumer did not start"}), flush=True)
        os._exit(4)
    print(json.dumps({"started": True}), flush=True)
    deadline = time.monotonic() + float(spec.get("timeout_s", 120))
    idle_s = float(spec.get("idle_s", 5))
    while not counter.done.wait(0.1) and time.monotonic() < deadline:
        if counter.last_ns and time.time_ns() - counter.last_ns > idle_s * 1e9:
            break
    with open(spec["samples_file"], "wb") as f:
        counter.samples.tofile(f)
    summary = {
        "received": counter.received,
        "first_ns": counter.first_ns,
        "last_ns": counter.last_ns,
    }
    print(json.dumps(summary), flush=True)
    # The client keeps non-daemon threads and may hang in shutdown; leave once it is asked.
    threading.Thread(target=dll.ShutdownPushConsumer, args=(consumer,), daemon=True).start()
    time.sleep(0.2)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
