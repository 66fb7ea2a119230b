"""Typed calls to the name servers of a cluster.

Owns: NamesrvApi, one coroutine per name-server request a client or admin
tool makes.

Reads go to one name server, trying them in turn (RemotingClient.invoke_any):
they all hold the same routes. Writes (KV config, topic deletion, write
permission) go to every name server, as the Java admin does, because each
keeps its own copy; the first failure stops the round and is raised.
Non-success codes raise ``error_for_code``; QUERY_NOT_FOUND of the KV reads is
an outcome and comes back as None or an empty table. REQUEST_CODE_NOT_SUPPORTED
for a name-server request means the address is no name server (a broker's,
typically): a ClientError says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ClientError, RemotingError, error_for_code
from apogee.model.route import ClusterInfo, TopicRouteData
from apogee.protocol import bodies
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient


def parse_namesrv_addrs(text: str) -> list[str]:
    """``"a:9876;b:9876"`` (RocketMQ's namesrvAddr form) -> ["a:9876", "b:9876"]."""
    addrs = [part.strip() for part in text.replace(",", ";").split(";")]
    return [a for a in addrs if a]


def _error(response: RemotingCommand, addrs: str) -> Exception:
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return ClientError(
            f"{addrs} is not a name server: it does not serve name-server requests "
            f"(a broker's address? give the name server's, e.g. 127.0.0.1:9876)"
        )
    return error_for_code(response.code, response.remark)


class NamesrvApi:
    def __init__(
        self,
        remoting: RemotingClient,
        addrs: Sequence[str],
        *,
        timeout_s: float | None = None,
    ) -> None:
        if not addrs:
            raise ClientError("no name server address given")
        self.remoting = remoting
        self.addrs = list(addrs)
        self.timeout_s = timeout_s

    # -- plumbing ---------------------------------------------------------------

    async def _any(
        self, code: int, header: h.ExtHeader | None = None, *, allow: int = ResponseCode.SUCCESS
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, header.to_ext() if header else None)
        try:
            response = await self.remoting.invoke_any(self.addrs, request, self.timeout_s)
        except RemotingError as exc:
            raise type(exc)(f"no name server answered ({';'.join(self.addrs)}): {exc}") from exc
        if response.code not in (ResponseCode.SUCCESS, allow):
            raise _error(response, ";".join(self.addrs))
        return response

    async def _each(self, code: int, header: h.ExtHeader) -> dict[str, RemotingCommand]:
        answers: dict[str, RemotingCommand] = {}
        for addr in self.addrs:
            request = RemotingCommand.request(code, header.to_ext())
            try:
                response = await self.remoting.invoke(addr, request, self.timeout_s)
            except RemotingError as exc:
                raise type(exc)(f"name server {addr}: {exc}") from exc
            if response.code != ResponseCode.SUCCESS:
                raise _error(response, addr)
            answers[addr] = response
        return answers

    # -- routes and topics --------------------------------------------------------

    async def get_route(self, topic: str) -> TopicRouteData:
        """The topic's route; TopicNotExistError when no broker serves it."""
        response = await self._any(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic)
        )
        return bodies.decode_topic_route(response.body_bytes())

    async def get_cluster_info(self) -> ClusterInfo:
        response = await self._any(RequestCode.GET_BROKER_CLUSTER_INFO)
        return bodies.decode_cluster_info(response.body_bytes())

    async def get_all_topics(self) -> list[str]:
        response = await self._any(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return bodies.decode_topic_list(response.body_bytes())

    async def get_topics_by_cluster(self, cluster: str) -> list[str]:
        response = await self._any(
            RequestCode.GET_TOPICS_BY_CLUSTER, h.GetTopicsByClusterRequestHeader(cluster)
        )
        return bodies.decode_topic_list(response.body_bytes())

    async def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Forget the topic's route on every name server (brokers keep their config)."""
        await self._each(
            RequestCode.DELETE_TOPIC_IN_NAMESRV,
            h.DeleteTopicFromNamesrvRequestHeader(topic, cluster),
        )

    # -- KV config ---------------------------------------------------------------

    async def put_kv(self, namespace: str, key: str, value: str) -> None:
        await self._each(
            RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace, key, value)
        )

    async def get_kv(self, namespace: str, key: str) -> str | None:
        response = await self._any(
            RequestCode.GET_KV_CONFIG,
            h.GetKVConfigRequestHeader(namespace, key),
            allow=ResponseCode.QUERY_NOT_FOUND,
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return h.GetKVConfigResponseHeader.from_ext(response.ext_fields).value

    async def delete_kv(self, namespace: str, key: str) -> None:
        await self._each(
            RequestCode.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace, key)
        )

    async def get_kv_list(self, namespace: str) -> dict[str, str]:
        response = await self._any(
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            h.GetKVListByNamespaceRequestHeader(namespace),
            allow=ResponseCode.QUERY_NOT_FOUND,
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return {}
        return bodies.decode_kv_table(response.body_bytes())

    # -- broker write permission -------------------------------------------------

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Drain a broker: per name server, how many topics lost their write bit."""
        answers = await self._each(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, h.WipeWritePermOfBrokerRequestHeader(broker_name)
        )
        return {
            addr: h.WipeWritePermOfBrokerResponseHeader.from_ext(r.ext_fields).wipe_topic_count
            for addr, r in answers.items()
        }

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Undo a drain: per name server, how many topics got read+write back."""
        answers = await self._each(
            RequestCode.ADD_WRITE_PERM_OF_BROKER, h.AddWritePermOfBrokerRequestHeader(broker_name)
        )
        return {
            addr: h.AddWritePermOfBrokerResponseHeader.from_ext(r.ext_fields).add_topic_count
            for addr, r in answers.items()
        }
