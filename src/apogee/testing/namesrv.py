"""Name-server helpers for tests: run one in-process, speak to it as a broker would.

Owns: ``running_namesrv`` (a NameServer on 127.0.0.1, port 0, its KV file under
a given directory) and ``register_broker`` / ``unregister_broker`` /
``get_route`` built on the real remoting client and protocol codec.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from apogee.codes import RequestCode
from apogee.model.route import DataVersion, TopicRouteData
from apogee.model.topic import TopicConfig
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.server import NameServer
from apogee.protocol import bodies
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient


@asynccontextmanager
async def running_namesrv(
    state_dir: Path, **overrides: object
) -> AsyncIterator[tuple[NameServer, str]]:
    """A started NameServer and its "127.0.0.1:port" address."""
    config = NamesrvConfig(
        bind_address="127.0.0.1",
        listen_port=0,
        kv_config_path=str(state_dir / "kvConfig.json"),
        **overrides,  # type: ignore[arg-type]
    )
    server = NameServer(config)
    await server.start()
    try:
        yield server, f"127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def register_broker(
    client: RemotingClient,
    namesrv_addr: str,
    *,
    broker_addr: str,
    topics: Iterable[str] | dict[str, TopicConfig],
    broker_name: str = "broker-a",
    cluster: str = "DefaultCluster",
    broker_id: int = 0,
    version: DataVersion | None = None,
    compressed: bool = False,
) -> RemotingCommand:
    """Send REGISTER_BROKER as a broker does; return the name server's answer."""
    configs = topics if isinstance(topics, dict) else {t: TopicConfig(t, 4, 4) for t in topics}
    body = bodies.RegisterBrokerBody(
        bodies.TopicConfigWrapper(dict(configs), version or DataVersion(1, 1))
    )
    header = h.RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=broker_addr,
        cluster_name=cluster,
        ha_server_addr=broker_addr,
        broker_id=broker_id,
        compressed=compressed,
    )
    request = RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        header.to_ext(),
        bodies.encode_register_broker_body(body, compressed=compressed),
    )
    return await client.invoke(namesrv_addr, request)


async def get_route(client: RemotingClient, namesrv_addr: str, topic: str) -> TopicRouteData | None:
    """The route the name server hands out, or None for TOPIC_NOT_EXIST."""
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic).to_ext()
    )
    answer = await client.invoke(namesrv_addr, request)
    if answer.code != 0:
        return None
    return bodies.decode_topic_route(answer.body_bytes())
