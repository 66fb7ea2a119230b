"""What delays an event loop, recorded inside the process: a diagnostic for benchmarks.

Owns: ``install(path, level)``, which a benchmark calls first thing in a process it
starts (before any loop exists), and the JSON that process leaves at ``path`` when it
exits. Every timestamp is CLOCK_MONOTONIC nanoseconds (``time.monotonic_ns``), the
clock the latency stamps use, so events of several processes line up with one
message's send and receive times.

What is recorded, by level:

* ``light`` (costs nothing per message): every cycle collection (start, duration, its
  CPU time, generation, objects collected) through ``gc.callbacks``; the thread id -> name map, so
  whoever reads ``/proc/<pid>/task`` from outside can name the threads it saw run.
* ``full`` adds, at a cost of about a microsecond per callback: every loop callback
  (``call_soon``/``call_later``/``call_at``, so task steps and future callbacks too) and
  every ``Connection.data_received`` that took over ``slow_ms``, with what it was (the
  coroutine of a task step, the callable's qualified name, the bytes read); a timer
  every 2 ms that records how late it fired when over 1 ms (uvloop's timers have 1 ms
  granularity, so lateness under that is the timer's, not a stall); how many callbacks
  of each name ran (per-message scheduling shows up as counts that grow with messages).

Not a test and not part of the package: a benchmark's own instrument.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import gc
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

_now = time.monotonic_ns

LAG_PERIOD_S = 0.002
LAG_REPORT_NS = 1_000_000


class Probe:
    def __init__(self, path: str, level: str, slow_ms: float) -> None:
        self.path = path
        self.level = level
        self.slow_ns = int(slow_ms * 1e6)
        self.gc: list[tuple[int, int, int, int, int]] = []
        self.slow: list[tuple[int, int, str]] = []
        self.lag: list[tuple[int, int]] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.callbacks = 0
        self.callback_ns = 0
        self._gc_start = self._gc_cpu = 0
        self.marks: dict[str, int] = {}
        self.threads: dict[str, str] = {}  # native id -> name, as each thread started

    # -- gc ------------------------------------------------------------------------------

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        # CPU time beside wall time: on a busy machine a collection's wall time includes
        # the time the process waited for a CPU, its CPU time is the collection's own cost
        if phase == "start":
            self._gc_start = _now()
            self._gc_cpu = time.thread_time_ns()
        else:
            begin = self._gc_start
            cpu = time.thread_time_ns() - self._gc_cpu
            self.gc.append((begin, _now() - begin, info["generation"], info["collected"], cpu))

    # -- callbacks ----------------------------------------------------------------------

    def timed(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        slow_ns = self.slow_ns
        probe = self

        def run(*args: Any) -> Any:
            began = _now()
            try:
                return callback(*args)
            finally:
                took = _now() - began
                probe.callbacks += 1
                probe.callback_ns += took
                name = _name(callback)
                probe.counts[name] += 1
                if took > slow_ns:
                    probe.slow.append((began, took, name))

        return run

    def lag_tick(self, loop: asyncio.AbstractEventLoop, due: int) -> None:
        now = _now()
        late = now - due
        if late > LAG_REPORT_NS:
            self.lag.append((due, late))
        loop.call_later(LAG_PERIOD_S, self.lag_tick, loop, now + int(LAG_PERIOD_S * 1e9))

    # -- the report ------------------------------------------------------------------------

    def dump(self) -> None:
        threads = {**self.threads, **{str(t.native_id): t.name for t in threading.enumerate()}}
        report = {
            "pid": os.getpid(),
            "level": self.level,
            "gc": self.gc,
            "slow": self.slow,
            "lag": self.lag,
            "callbacks": self.callbacks,
            "callback_ns": self.callback_ns,
            "counts": dict(self.counts.most_common(40)),
            "threads": threads,
            "marks": self.marks,
        }
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(report, f)
        os.replace(tmp, self.path)


def _name(callback: Any) -> str:
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):  # a task step or wake-up: name its coroutine
        coro = owner.get_coro()
        return f"task {getattr(coro, '__qualname__', type(coro).__name__)}"
    if isinstance(owner, asyncio.Future):
        return f"future {getattr(callback, '__qualname__', '?')}"
    name = getattr(callback, "__qualname__", None)
    if name is None:
        func = getattr(callback, "func", None)  # functools.partial
        name = f"partial {getattr(func, '__qualname__', type(callback).__name__)}"
    return str(name)


_installed: list[Probe] = []  # the process's probe, once installed


def install(path: str, level: str = "light", slow_ms: float = 0.5) -> Probe:
    """Record into ``path`` at exit (see the module docstring)."""
    probe = Probe(path, level, slow_ms)
    _installed.append(probe)
    gc.callbacks.append(probe.on_gc)
    _name_threads(probe)
    atexit.register(probe.dump)
    if level == "full":
        _time_loops(probe)
        _time_reads(probe)
    return probe


def mark(name: str) -> None:
    for probe in _installed:
        probe.marks[name] = _now()


def _name_threads(probe: Probe) -> None:
    """Threads that end before the process do (the store's, at close) keep their names."""
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        probe.threads[str(threading.get_native_id())] = self.name
        original(self)

    threading.Thread.run = run  # type: ignore[method-assign]


def _time_loops(probe: Probe) -> None:
    """Every loop made through ``apogee.remoting.runner`` times its callbacks."""
    import uvloop  # noqa: PLC0415

    from apogee.remoting import runner  # noqa: PLC0415

    timed = probe.timed

    class TimedLoop(uvloop.Loop):  # type: ignore[misc]
        def call_soon(self, callback: Any, *args: Any, context: Any = None) -> Any:
            return super().call_soon(timed(callback), *args, context=context)

        def call_later(self, delay: float, callback: Any, *args: Any, context: Any = None) -> Any:
            return super().call_later(delay, timed(callback), *args, context=context)

        def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
            return super().call_at(when, timed(callback), *args, context=context)

    def factory() -> asyncio.AbstractEventLoop:
        loop = TimedLoop()
        loop.call_soon(probe.lag_tick, loop, _now())
        return loop

    runner.loop_factory = lambda: factory


def _time_reads(probe: Probe) -> None:
    from apogee.remoting.connection import Connection  # noqa: PLC0415

    original = Connection.data_received
    slow_ns = probe.slow_ns

    def data_received(self: Connection, data: bytes) -> None:
        began = _now()
        try:
            original(self, data)
        finally:
            took = _now() - began
            probe.counts["data_received"] += 1
            if took > slow_ns:
                probe.slow.append((began, took, f"data_received {len(data)} B"))

    Connection.data_received = data_received  # type: ignore[method-assign]
