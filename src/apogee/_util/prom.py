"""Serving Prometheus metrics from a process whose state lives on an event loop.

Owns: ``PromExporter``, prometheus-client's HTTP server (a thread of its
own, ``/metrics``) with collectors whose figures are read on the loop's
thread, so a scrape never races the handlers that change them; and
``Families``, which builds metric families that all carry a process's
common labels (RocketMQ 5's ``cluster``, ``node_type``, ``node_id`` and the
operator's ``metricsLabel``). The text format is prometheus-client's.

A scrape costs the loop one callback that copies counters and computes the
gauges; the text is made in the HTTP thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

#: what a collector builds on the loop: every family of one scrape
Build = Callable[[], Iterable[Metric]]
SCRAPE_TIMEOUT_S = 5.0


class Families:
    """Metric families with the common labels first, then each sample's own."""

    def __init__(self, common: Mapping[str, str]) -> None:
        self.common = dict(common)

    def _labels(self, names: Sequence[str]) -> list[str]:
        return [*self.common, *names]

    def _values(self, values: Sequence[str]) -> list[str]:
        return [*self.common.values(), *values]

    def gauge(
        self,
        name: str,
        doc: str,
        names: Sequence[str] = (),
        samples: Iterable[tuple[Sequence[str], float]] = (),
        unit: str = "",
    ) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=self._labels(names), unit=unit)
        # the family keeps unit-less names: RocketMQ's names carry no unit suffix
        for values, value in samples:
            family.add_metric(self._values(values), value)
        return family

    def counter(
        self,
        name: str,
        doc: str,
        names: Sequence[str] = (),
        samples: Iterable[tuple[Sequence[str], float]] = (),
    ) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=self._labels(names))
        for values, value in samples:
            family.add_metric(self._values(values), value)
        return family

    def histogram(
        self,
        name: str,
        doc: str,
        bounds: Sequence[float],
        *,
        names: Sequence[str] = (),
        samples: Iterable[tuple[Sequence[str], Sequence[int], float]] = (),
        unit: str = "",
    ) -> HistogramMetricFamily:
        """``samples``: (label values, count per bucket with one past the last bound, sum)."""
        family = HistogramMetricFamily(name, doc, labels=self._labels(names), unit=unit)
        for values, counts, total in samples:
            running = 0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip([*bounds, float("inf")], counts, strict=True):
                running += count
                buckets.append(("+Inf" if bound == float("inf") else _le(bound), running))
            family.add_metric(self._values(values), buckets, total)
        return family


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


class _LoopCollector(Collector):
    """Calls the builds on the loop's thread and hands their families to the scrape.

    Families of the same name from several builds (a name server and a broker
    in one process) become one family holding the samples of both.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.builds: list[Build] = []

    def _merged(self) -> list[Metric]:
        merged: dict[str, Metric] = {}
        for build in self.builds:
            for family in build():
                have = merged.get(family.name)
                if have is None:
                    merged[family.name] = family
                else:
                    have.samples.extend(family.samples)
        return list(merged.values())

    def collect(self) -> Iterable[Metric]:
        done: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(self._merged())
            except BaseException as exc:  # handed to the scrape, which reports it
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(SCRAPE_TIMEOUT_S)


class PromExporter:
    """``/metrics`` on ``host:port`` for collectors built on the calling loop."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._on_loop: _LoopCollector | None = None

    def add(self, build: Build) -> None:
        """Scrape ``build()``'s families, made on the running loop (call this on it)."""
        if self._on_loop is None:
            self._on_loop = _LoopCollector(asyncio.get_running_loop())
            self.registry.register(self._on_loop)
        self._on_loop.builds.append(build)

    def add_threadsafe(self, collector: Collector) -> None:
        """A collector that may run on the HTTP thread (it reads files, not loop state)."""
        self.registry.register(collector)

    def start(self) -> None:
        try:
            self._server, self._thread = start_http_server(self.port, self.host, self.registry)
        except OSError as exc:  # worded as the servers word a failed bind
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            where = f"{self.host}:{self.port}"
            raise OSError(exc.errno, f"cannot listen on {where}: {reason}") from exc
        self.port = self._server.server_port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            # shutdown waits for serve_forever's loop, which may be in a scrape
            # waiting for this loop: run it off the loop
            await asyncio.to_thread(server.shutdown)
            server.server_close()
