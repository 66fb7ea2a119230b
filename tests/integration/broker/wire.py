"""Requests as the clients send them, built with the protocol codec, for broker tests."""

from __future__ import annotations

import time

from apogee.codes import RequestCode
from apogee.model.message import properties_to_string
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from apogee.remoting.client import RemotingClient


def send_request(
    topic: str,
    body: bytes = b"hello",
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    extra: dict[str, str] | None = None,
    code: int = RequestCode.SEND_MESSAGE,
    batch: bool = False,
    sys_flag: int = 0,
    properties: str | None = None,
    default_topic: str = "TBW102",
) -> RemotingCommand:
    if properties is None:
        props = {"TAGS": tags, "KEYS": keys, "UNIQ_KEY": uniq, "WAIT": "true", **(extra or {})}
        properties = properties_to_string(props)
    header = SendMessageRequestHeader(
        producer_group="pg",
        topic=topic,
        default_topic=default_topic,
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties=properties,
        batch=batch,
    )
    ext = header.to_ext() if code == RequestCode.SEND_MESSAGE else header.to_ext_v2()
    return RemotingCommand.request(code, ext, body)


async def send(client: RemotingClient, addr: str, topic: str, body: bytes = b"hello",
               **kwargs: object) -> RemotingCommand:  # fmt: skip
    return await client.invoke(addr, send_request(topic, body, **kwargs))  # type: ignore[arg-type]


def pull_request(
    topic: str,
    queue_id: int,
    offset: int,
    *,
    group: str = "cg",
    max_msgs: int = 32,
    sys_flag: int = 0x4,
    subscription: str = "*",
    suspend_ms: int = 15000,
    commit_offset: int = 0,
    sub_version: int = 0,
) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_msgs,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_millis=suspend_ms,
        sub_version=sub_version,
        subscription=subscription,
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())


async def pull(
    client: RemotingClient,
    addr: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    timeout_s: float = 3.0,
    **kwargs: object,
) -> RemotingCommand:
    request = pull_request(topic, queue_id, offset, **kwargs)  # type: ignore[arg-type]
    return await client.invoke(addr, request, timeout_s)
