"""What a server's answers say about its clients: refusals and latency.

Owns: ``RequestObserver``, told of every answer a server writes
(``HandlerTable.observer``). It

* logs each refusal (an answer other than success and the outcomes listed
  as normal) at WARNING on its own logger (``apogee.broker.refusals``,
  ``apogee.namesrv.refusals``), naming the request, the peer, the response
  code and the server's reason. The process's log throttle lets 20 alike
  lines through per 10 s (alike: same request and response code) and
  counts the rest;
* counts refusals per (request code, response code) and answers per
  request code and result in latency buckets, for the metrics exporters
  (``request_families``, with ``server_families`` for the connections).

Cost per answer: one dict look-up, one clock read and a bisect into eight
buckets; nothing is allocated once a (code, result) pair has been seen.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric

from apogee._util.prom import Families
from apogee.codes import RequestCode, ResponseCode
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import RequestContext
from apogee.remoting.server import RemotingServer

_perf_counter = time.perf_counter

#: upper bounds of the latency buckets, in milliseconds (RocketMQ 5's rpc latency view)
LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 3000.0)

#: answers that are ordinary outcomes, not refusals, for any request
NORMAL_OUTCOMES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
        ResponseCode.QUERY_NOT_FOUND,
    }
)


def code_name(code: int, names: type[RequestCode] | type[ResponseCode]) -> str:
    try:
        return names(code).name
    except ValueError:
        return str(code)


class LatencyHistogram:
    """Bucket counts and the sum of one (request code, result) pair."""

    __slots__ = ("buckets", "count", "sum_ms")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # the last: above every bound
        self.count = 0
        self.sum_ms = 0.0

    def observe(self, ms: float) -> None:
        self.buckets[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        self.count += 1
        self.sum_ms += ms


class RequestObserver:
    """Refusal log and figures of one server; see the module docstring."""

    def __init__(
        self,
        logger_name: str,
        *,
        normal: Iterable[tuple[int, int]] = (),
    ) -> None:
        self.log = logging.getLogger(logger_name)
        #: (request code, response code) pairs that are normal for this server
        self._normal_pairs = frozenset(normal)
        #: (request code, response code) -> refusals
        self.refusals: dict[tuple[int, int], int] = {}
        #: (request code, response code) -> latency histogram
        self.latency: dict[tuple[int, int], LatencyHistogram] = {}
        self._templates: dict[tuple[int, int], str] = {}

    def __call__(self, ctx: RequestContext, response: RemotingCommand) -> None:
        request = ctx.request
        key = (request.code, response.code)
        histogram = self.latency.get(key)
        if histogram is None:
            histogram = self.latency[key] = LatencyHistogram()
        # LatencyHistogram.observe inlined: this runs for every answer written
        ms = (_perf_counter() - ctx.started) * 1000
        histogram.buckets[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        histogram.count += 1
        histogram.sum_ms += ms
        if response.code in NORMAL_OUTCOMES or key in self._normal_pairs:
            return
        self.refusals[key] = self.refusals.get(key, 0) + 1
        template = self._templates.get(key)
        if template is None:
            # names in the template, values as arguments: the throttle tells kinds apart
            template = self._templates[key] = (
                f"refused {code_name(request.code, RequestCode)} from %s: "
                f"{code_name(response.code, ResponseCode)}: %.300s"
            )
        self.log.warning(template, ctx.peer, response.remark or "(no reason given)")

    @property
    def refusal_total(self) -> int:
        return sum(self.refusals.values())


def request_families(f: Families, observer: RequestObserver) -> Iterator[Metric]:
    """``rocketmq_rpc_latency`` (RocketMQ 5's labels) and refusals per request and code."""
    yield f.histogram(
        "rocketmq_rpc_latency", "Milliseconds from request to answer.", LATENCY_BUCKETS_MS,
        names=("protocol_type", "request_code", "response_code", "result"),
        samples=((("remoting", code_name(req, RequestCode).lower(),
                   code_name(resp, ResponseCode).lower(), "success"), h.buckets, h.sum_ms)
                 for (req, resp), h in observer.latency.items()),
    )  # fmt: skip
    yield f.counter(
        "apogee_remoting_refused_requests_total", "Requests answered with a refusal.",
        ("request_code", "response_code"),
        (((code_name(req, RequestCode).lower(), code_name(resp, ResponseCode).lower()), n)
         for (req, resp), n in observer.refusals.items()),
    )  # fmt: skip


def server_families(f: Families, server: RemotingServer) -> Iterator[Metric]:
    yield f.gauge("apogee_remoting_connections", "Open client connections.",
                  samples=[((), len(server.connections))])  # fmt: skip
    yield f.counter("apogee_remoting_refused_connections_total",
                    "Connections closed at once: maxConnections were open.",
                    samples=[((), server.refused_connections)])  # fmt: skip
