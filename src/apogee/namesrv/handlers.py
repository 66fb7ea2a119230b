"""Request handlers of the name server: decode, consult the tables, answer.

Owns: the mapping from name-server request codes to RouteTable and KVConfig
operations.

Every handler is synchronous and cheap (the tables live in memory), so they
run inline on the event loop. Route data always goes out as standard JSON
with quoted map keys, which both the Java and the C++ clients parse.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Callable, Hashable

from apogee._util.clock import Clock
from apogee.codes import RequestCode, ResponseCode
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.kvconfig import KVConfig
from apogee.namesrv.route_table import RouteTable
from apogee.protocol import bodies
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import HandlerTable, RequestContext

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2

Handler = Callable[[RequestContext, RemotingCommand], RemotingCommand | None]


class NamesrvHandlers:
    """One method per request code; ``register`` puts them in a HandlerTable."""

    def __init__(
        self, routes: RouteTable, kv: KVConfig, config: NamesrvConfig, clock: Clock
    ) -> None:
        self.routes = routes
        self.kv = kv
        self.config = config
        self.clock = clock

    def register(self, table: HandlerTable) -> None:
        c = RequestCode
        handlers: dict[int, Handler] = {
            c.PUT_KV_CONFIG: self.put_kv_config,
            c.GET_KV_CONFIG: self.get_kv_config,
            c.DELETE_KV_CONFIG: self.delete_kv_config,
            c.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            c.REGISTER_BROKER: self.register_broker,
            c.UNREGISTER_BROKER: self.unregister_broker,
            c.QUERY_DATA_VERSION: self.query_data_version,
            c.BROKER_HEARTBEAT: self.broker_heartbeat,
            c.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            c.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            c.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            c.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            c.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            c.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            c.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            c.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topics,
            c.GET_UNIT_TOPIC_LIST: self._flagged_topics(TOPIC_SYS_FLAG_UNIT, 0),
            c.GET_HAS_UNIT_SUB_TOPIC_LIST: self._flagged_topics(TOPIC_SYS_FLAG_UNIT_SUB, 0),
            c.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._flagged_topics(
                TOPIC_SYS_FLAG_UNIT_SUB, TOPIC_SYS_FLAG_UNIT
            ),
        }
        for code, handler in handlers.items():
            table.register(code, handler)

    def on_connection_closed(self, channel: Hashable) -> None:
        for addr in self.routes.on_channel_closed(channel):
            log.info("broker %s removed: its connection closed", addr)

    # -- KV config ------------------------------------------------------------

    def put_kv_config(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.PutKVConfigRequestHeader.from_ext(req.ext_fields)
        self.kv.put(hdr.namespace, hdr.key, hdr.value)
        return req.make_response()

    def get_kv_config(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVConfigRequestHeader.from_ext(req.ext_fields)
        value = self.kv.get(hdr.namespace, hdr.key)
        if value is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}",
            )
        return req.make_response(ext_fields=h.GetKVConfigResponseHeader(value).to_ext())

    def delete_kv_config(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.DeleteKVConfigRequestHeader.from_ext(req.ext_fields)
        self.kv.delete(hdr.namespace, hdr.key)
        return req.make_response()

    def get_kv_list(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVListByNamespaceRequestHeader.from_ext(req.ext_fields)
        table = self.kv.namespace(hdr.namespace)
        if table is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {hdr.namespace}"
            )
        return req.make_response(body=bodies.encode_kv_table(table))

    # -- brokers ---------------------------------------------------------------

    def register_broker(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.RegisterBrokerRequestHeader.from_ext(req.ext_fields)
        raw = req.body_bytes()
        # Java brokers send UtilAll.crc32: the CRC with its top bit cleared.
        if hdr.body_crc32 and (zlib.crc32(raw) & 0x7FFFFFFF) != (hdr.body_crc32 & 0x7FFFFFFF):
            return req.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = bodies.decode_register_broker_body(raw, compressed=hdr.compressed) if raw else None
        timeout = hdr.heartbeat_timeout_millis or self.config.broker_channel_expired_time_ms
        result = self.routes.register_broker(
            cluster=hdr.cluster_name,
            broker_addr=hdr.broker_addr,
            broker_name=hdr.broker_name,
            broker_id=hdr.broker_id,
            ha_server_addr=hdr.ha_server_addr,
            now_ms=self.clock.now_ms(),
            data_version=body.wrapper.data_version if body else None,
            topic_configs=body.wrapper.topic_config_table if body else None,
            filter_server_list=list(body.filter_server_list) if body else None,
            channel=ctx.require_channel(),
            timeout_ms=timeout,
        )
        answer = h.RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        order_conf = self.kv.namespace(ORDER_TOPIC_CONFIG)
        body_out = b""
        if order_conf and self.config.return_order_topic_config_to_broker:
            body_out = bodies.encode_kv_table(order_conf)
        return req.make_response(ext_fields=answer.to_ext(), body=body_out)

    def unregister_broker(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.UnregisterBrokerRequestHeader.from_ext(req.ext_fields)
        self.routes.unregister_broker(
            cluster=hdr.cluster_name,
            broker_addr=hdr.broker_addr,
            broker_name=hdr.broker_name,
            broker_id=hdr.broker_id,
        )
        log.info("broker %s (%s) unregistered", hdr.broker_name, hdr.broker_addr)
        return req.make_response()

    def query_data_version(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.QueryDataVersionRequestHeader.from_ext(req.ext_fields)
        version = bodies.decode_data_version(req.body_bytes())
        changed = self.routes.query_data_version(hdr.broker_addr, version, self.clock.now_ms())
        live = self.routes.broker_live_table.get(hdr.broker_addr)
        body = bodies.encode_data_version(live.data_version) if live else b""
        ext = h.QueryDataVersionResponseHeader(changed).to_ext()
        return req.make_response(ext_fields=ext, body=body)

    def broker_heartbeat(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        addr = req.ext_fields.get("brokerAddr")
        if addr:
            self.routes.touch(addr, self.clock.now_ms())
        return req.make_response()

    def wipe_write_perm(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.WipeWritePermOfBrokerRequestHeader.from_ext(req.ext_fields)
        count = self.routes.wipe_write_perm(hdr.broker_name)
        log.info("write permission of broker %s wiped on %d topics", hdr.broker_name, count)
        return req.make_response(ext_fields=h.WipeWritePermOfBrokerResponseHeader(count).to_ext())

    def add_write_perm(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.AddWritePermOfBrokerRequestHeader.from_ext(req.ext_fields)
        count = self.routes.add_write_perm(hdr.broker_name)
        log.info("write permission of broker %s added on %d topics", hdr.broker_name, count)
        return req.make_response(ext_fields=h.AddWritePermOfBrokerResponseHeader(count).to_ext())

    # -- routes and topics -------------------------------------------------------

    def get_route(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.GetRouteInfoRequestHeader.from_ext(req.ext_fields)
        route = self.routes.route_for(hdr.topic)
        if route is None:
            return req.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {hdr.topic}",
            )
        if self.config.order_message_enable:
            order_conf = self.kv.get(ORDER_TOPIC_CONFIG, hdr.topic)
            if order_conf:
                route = dataclasses.replace(route, order_topic_conf=order_conf)
        return req.make_response(body=bodies.encode_topic_route(route))

    def get_cluster_info(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(body=bodies.encode_cluster_info(self.routes.cluster_info()))

    def get_all_topics(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        if not self.config.enable_all_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return req.make_response(body=bodies.encode_topic_list(self.routes.all_topics()))

    def get_topics_by_cluster(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.GetTopicsByClusterRequestHeader.from_ext(req.ext_fields)
        topics = self.routes.topics_by_cluster(hdr.cluster)
        return req.make_response(body=bodies.encode_topic_list(topics))

    def get_system_topics(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        topics, master = self.routes.system_topics()
        return req.make_response(body=bodies.encode_topic_list(topics, master))

    def delete_topic(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        hdr = h.DeleteTopicFromNamesrvRequestHeader.from_ext(req.ext_fields)
        self.routes.delete_topic(hdr.topic, hdr.cluster_name or None)
        return req.make_response()

    def _flagged_topics(self, wanted: int, unwanted: int) -> Handler:
        def handler(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
            topics = sorted(
                topic
                for topic, queues in self.routes.topic_queue_table.items()
                if any(
                    q.topic_sys_flag & wanted and not q.topic_sys_flag & unwanted
                    for q in queues.values()
                )
            )
            return req.make_response(body=bodies.encode_topic_list(topics))

        return handler
