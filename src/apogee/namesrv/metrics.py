"""The name server's Prometheus metrics.

Owns: ``NamesrvMetrics``, the families of one name server, with
``node_type="nameserver"`` and ``node_id=<host:port>``: the RPC latency and
refusals every server has (``apogee.remoting.observe``), its connections,
and what its route table holds: ``apogee_namesrv_brokers`` (live broker
processes per cluster), ``rocketmq_topic_number``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from apogee._util.prom import Families
from apogee.namesrv.route_table import RouteTable
from apogee.remoting.observe import RequestObserver, request_families, server_families
from apogee.remoting.server import RemotingServer


class NamesrvMetrics:
    def __init__(
        self,
        node_id: str,
        routes: RouteTable,
        requests: RequestObserver,
        server: RemotingServer,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.f = Families({**(labels or {}), "node_type": "nameserver", "node_id": node_id})
        self._routes = routes
        self._requests = requests
        self._server = server

    def build(self) -> Iterator[Metric]:
        f, routes = self.f, self._routes
        live = set(routes.broker_live_table)
        per_cluster = []
        for cluster, names in sorted(routes.cluster_addr_table.items()):
            count = 0
            for name in names:
                broker = routes.broker_addr_table.get(name)
                if broker is not None:
                    count += sum(1 for addr in broker.broker_addrs.values() if addr in live)
            per_cluster.append(((cluster,), count))
        yield f.gauge("apogee_namesrv_brokers", "Live broker processes, per cluster.",
                      ("cluster",), per_cluster)  # fmt: skip
        yield f.gauge("rocketmq_topic_number", "Topics with a route.",
                      samples=[((), len(routes.topic_queue_table))])  # fmt: skip
        yield from server_families(f, self._server)
        yield from request_families(f, self._requests)
