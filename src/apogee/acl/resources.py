"""What each request needs from the account that signed it: admin rights, or topic and group perms.

Owns: ADMIN_CODES and ``needed_resources`` (request -> {topic or
``%RETRY%group``: perm}), after RocketMQ's PlainAccessValidator.parse and
Permission.ADMIN_CODE.

Resources per request (a group stands as its retry topic)::

    SEND_MESSAGE, SEND_MESSAGE_V2,     topic PUB; a send to %RETRY%x needs
    SEND_BATCH_MESSAGE                 the producer group's retry topic SUB
    CONSUMER_SEND_MSG_BACK             group SUB
    PULL_MESSAGE                       topic SUB + consumer group SUB
    QUERY_MESSAGE                      topic SUB
    HEART_BEAT                         every consumer group SUB + every subscribed topic SUB
    UNREGISTER_CLIENT,
    GET_CONSUMER_LIST_BY_GROUP         consumer group SUB
    UPDATE_CONSUMER_OFFSET,
    QUERY_CONSUMER_OFFSET              consumer group SUB + topic SUB

Beyond RocketMQ 4.x: batch sends and offset queries are checked too (4.x
lets them through), a version-1 send to a retry topic names its group in
``producerGroup`` (4.x reads a ``group`` field that header does not have),
and the admin set covers every request that changes a broker or a name
server -- topics, groups, offsets, files, broker config, access control, KV
entries, write permission and broker registration -- where 4.x lists only
five codes. Any other request needs a valid signature and nothing more.
"""

from __future__ import annotations

from apogee.acl.permission import Perm
from apogee.codes import RequestCode as C
from apogee.model.topic import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from apogee.protocol.bodies import decode_heartbeat
from apogee.protocol.command import RemotingCommand

ADMIN_CODES: frozenset[int] = frozenset(
    {
        # broker: topics, groups, offsets, files, config, access control
        C.UPDATE_AND_CREATE_TOPIC,
        C.UPDATE_AND_CREATE_TOPIC_LIST,
        C.DELETE_TOPIC_IN_BROKER,
        C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        C.DELETE_SUBSCRIPTIONGROUP,
        C.UPDATE_BROKER_CONFIG,
        C.TRIGGER_DELETE_FILES,
        C.RESET_CONSUMER_OFFSET_IN_BROKER,
        C.INVOKE_BROKER_TO_RESET_OFFSET,
        C.CLEAN_EXPIRED_CONSUMEQUEUE,
        C.CLONE_GROUP_OFFSET,
        C.CLEAN_UNUSED_TOPIC,
        C.DELETE_EXPIRED_COMMITLOG,
        C.RESUME_CHECK_HALF_MESSAGE,
        C.UPDATE_AND_CREATE_ACL_CONFIG,
        C.DELETE_ACL_CONFIG,
        C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        # name server: KV entries, routes, write permission, broker registration
        C.PUT_KV_CONFIG,
        C.DELETE_KV_CONFIG,
        C.REGISTER_BROKER,
        C.UNREGISTER_BROKER,
        C.QUERY_DATA_VERSION,
        C.BROKER_HEARTBEAT,
        C.WIPE_WRITE_PERM_OF_BROKER,
        C.ADD_WRITE_PERM_OF_BROKER,
        C.DELETE_TOPIC_IN_NAMESRV,
        C.REGISTER_TOPIC_IN_NAMESRV,
        C.UPDATE_NAMESRV_CONFIG,
        C.REGISTER_FILTER_SERVER,
        C.REGISTER_MESSAGE_FILTER_CLASS,
    }
)

_SENDS = frozenset({C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE})
_GROUP_ONLY = frozenset({C.CONSUMER_SEND_MSG_BACK})
_CONSUMER_GROUP_ONLY = frozenset({C.UNREGISTER_CLIENT, C.GET_CONSUMER_LIST_BY_GROUP})
_GROUP_AND_TOPIC = frozenset({C.PULL_MESSAGE, C.UPDATE_CONSUMER_OFFSET, C.QUERY_CONSUMER_OFFSET})


def _add(out: dict[str, Perm], resource: str | None, perm: Perm) -> None:
    if resource:
        out[resource] = perm


def _group(name: str | None) -> str | None:
    return retry_topic(name) if name else None


def needed_resources(request: RemotingCommand) -> dict[str, Perm]:
    """The perms ``request`` needs; empty for requests that name no topic or group.

    Raises ProtocolError for a heartbeat whose body cannot be read.
    """
    code = request.code
    ext = request.ext_fields
    out: dict[str, Perm] = {}
    if code in _SENDS:
        v2 = "b" in ext  # SendMessageRequestHeaderV2's one-letter names
        topic = ext.get("b") if v2 else ext.get("topic")
        if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            _add(out, _group(ext.get("a") if v2 else ext.get("producerGroup")), Perm.SUB)
        else:
            _add(out, topic, Perm.PUB)
    elif code in _GROUP_ONLY:
        _add(out, _group(ext.get("group")), Perm.SUB)
    elif code in _CONSUMER_GROUP_ONLY:
        _add(out, _group(ext.get("consumerGroup")), Perm.SUB)
    elif code in _GROUP_AND_TOPIC:
        _add(out, ext.get("topic"), Perm.SUB)
        _add(out, _group(ext.get("consumerGroup")), Perm.SUB)
    elif code == C.QUERY_MESSAGE:
        _add(out, ext.get("topic"), Perm.SUB)
    elif code == C.HEART_BEAT:
        heartbeat = decode_heartbeat(request.body_bytes())
        for consumer in heartbeat.consumers:
            _add(out, _group(consumer.group_name), Perm.SUB)
            for subscription in consumer.subscriptions:
                _add(out, subscription.topic, Perm.SUB)
    return out
