"""One load-generating process: C++ client producer threads sending one message at a time.

Usage: ``python -m apogee.bench.cpp_producer '<json spec>'`` with ``namesrv``, ``topic``,
``threads``, ``seconds``, ``warmup_s``, ``body_size``, ``group``, ``latency_file`` and
optionally ``stamp`` (each send carries the property ``t``, its ``time.time_ns()``).
Only the standard library and the ``rocketmq`` wheel (PyPI ``rocketmq==0.4.4``, a dev extra)
are imported, so that the process carries nothing but the client.

Threads share producers, ``threads_per_producer`` (8) to each: the client serialises every
send of one producer on a timed lock around its connection table, and with dozens of threads
on one producer some sends time out on that lock inside the client.
Each thread reuses one message and calls ``SendMessageSync`` in a loop; ctypes releases the
GIL for the call, so the threads wait on the broker in parallel. Sends that finish inside the
measured window are counted and their latencies (microseconds, uint32) are written to
``latency_file``; one JSON line on stdout gives the counts.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq.ffi import dll  # the wheel's handle to its bundled librocketmq.so


class CSendResult(ctypes.Structure):
    _fields_ = [
        ("sendStatus", ctypes.c_int),
        ("msgId", ctypes.c_char * 256),
        ("offset", ctypes.c_longlong),
    ]


_P, _S, _I = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
_PROTOTYPES: dict[str, tuple[list[Any], Any]] = {
    "CreateMessage": ([_S], _P),
    "DestroyMessage": ([_P], _I),
    "SetByteMessageBody": ([_P, _S, _I], _I),
    "SetMessageTags": ([_P, _S], _I),
    "SetMessageProperty": ([_P, _S, _S], _I),
    "CreateProducer": ([_S], _P),
    "StartProducer": ([_P], _I),
    "ShutdownProducer": ([_P], _I),
    "SetProducerNameServerAddress": ([_P, _S], _I),
    "SetProducerInstanceName": ([_P, _S], _I),
    "SetProducerLogLevel": ([_P, _I], _I),
    "SetProducerSendMsgTimeout": ([_P, _I], _I),
    "SendMessageSync": ([_P, _P, ctypes.POINTER(CSendResult)], _I),
    "GetLatestErrorMessage": ([], _S),
}
for _name, (_args, _ret) in _PROTOTYPES.items():
    _fn = getattr(dll, _name)
    _fn.argtypes, _fn.restype = _args, _ret

LOG_LEVEL_ERROR = 2


class Sender:
    """One thread's loop and what it measured."""

    def __init__(self, producer: int, spec: dict[str, Any], bounds: tuple[float, float]) -> None:
        self.producer = producer
        self.spec = spec
        self.bounds = bounds
        self.latencies_us: array.array[int] = array.array("I")
        self.sent = 0
        self.failed = 0
        self.first_error: str | None = None

    def run(self) -> None:
        begin, end = self.bounds
        msg = dll.CreateMessage(self.spec["topic"].encode())
        body = b"x" * int(self.spec["body_size"])
        dll.SetByteMessageBody(msg, body, len(body))
        dll.SetMessageTags(msg, b"Bench")
        result = CSendResult()
        ref = ctypes.byref(result)
        send, producer, clock = dll.SendMessageSync, self.producer, time.perf_counter
        stamp, set_property = bool(self.spec.get("stamp")), dll.SetMessageProperty
        out = self.latencies_us
        try:
            while True:
                t0 = clock()
                if t0 >= end:
                    break
                if stamp:  # for the end-to-end latency a consumer measures
                    set_property(msg, b"t", str(time.time_ns()).encode())
                status = send(producer, msg, ref)
                t1 = clock()
                if t0 < begin or t1 > end:
                    continue
                if status == 0 and result.sendStatus == 0:
                    self.sent += 1
                    out.append(int((t1 - t0) * 1e6))
                else:
                    self.failed += 1
                    if self.first_error is None:
                        text = (dll.GetLatestErrorMessage() or b"").decode(errors="replace")
                        self.first_error = f"status {status}/{result.sendStatus}: {text}"
        finally:
            dll.DestroyMessage(msg)


def _producer(spec: dict[str, Any], number: int) -> int:
    group = f"{spec.get('group', 'apogee_bench')}_{number}"
    producer = int(dll.CreateProducer(group.encode()))
    dll.SetProducerNameServerAddress(producer, spec["namesrv"].encode())
    dll.SetProducerInstanceName(producer, f"bench{os.getpid()}_{number}".encode())
    dll.SetProducerLogLevel(producer, LOG_LEVEL_ERROR)
    dll.SetProducerSendMsgTimeout(producer, 3000)
    if dll.StartProducer(producer) != 0:
        print(json.dumps({"error": "the producer did not start"}), flush=True)
        os._exit(4)
    return producer


def _warm(producer: int, spec: dict[str, Any], timeout_s: float = 15.0) -> None:
    """One send that succeeds before any thread starts.

    A producer learns the topic's route on its first send; threads that start cold all ask
    at once and queue on the client's route lock, and some give up with "No route info"
    inside the measured window.
    """
    msg = dll.CreateMessage(spec["topic"].encode())
    dll.SetByteMessageBody(msg, b"warm", 4)
    result = CSendResult()
    deadline = time.monotonic() + timeout_s
    try:
        while dll.SendMessageSync(producer, msg, ctypes.byref(result)) != 0:
            if time.monotonic() > deadline:
                text = (dll.GetLatestErrorMessage() or b"").decode(errors="replace")
                print(json.dumps({"error": f"no send succeeded: {text}"}), flush=True)
                os._exit(4)
            time.sleep(0.1)
    finally:
        dll.DestroyMessage(msg)


def main(raw: str) -> None:
    spec = json.loads(raw)
    count = int(spec["threads"])
    per_producer = max(1, int(spec.get("threads_per_producer", 8)))
    producers = [_producer(spec, i) for i in range((count + per_producer - 1) // per_producer)]
    for producer in producers:
        _warm(producer, spec)
    now, now_ns = time.perf_counter(), time.time_ns()
    warmup_s, seconds = float(spec.get("warmup_s", 1.0)), float(spec["seconds"])
    begin = now + warmup_s
    bounds = (begin, begin + seconds)
    senders = [Sender(producers[i // per_producer], spec, bounds) for i in range(count)]
    threads = [threading.Thread(target=sender.run, daemon=True) for sender in senders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(spec["latency_file"], "wb") as f:
        for sender in senders:
            sender.latencies_us.tofile(f)
    errors = [sender.first_error for sender in senders if sender.first_error]
    summary = {
        "sent": sum(sender.sent for sender in senders),
        "failed": sum(sender.failed for sender in senders),
        "first_error": errors[0] if errors else None,
        # the measured window in wall-clock ns, to match what a consumer saw
        "window_ns": [now_ns + int(warmup_s * 1e9), now_ns + int((warmup_s + seconds) * 1e9)],
    }
    print(json.dumps(summary), flush=True)
    # The client keeps non-daemon threads and may hang in shutdown; leave once it is asked.
    for producer in producers:
        threading.Thread(target=dll.ShutdownProducer, args=(producer,), daemon=True).start()
    time.sleep(0.2)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
