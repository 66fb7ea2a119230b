"""VIEW_MESSAGE_BY_ID and QUERY_MESSAGE (by key, through the index) against a real broker."""

from __future__ import annotations

import time

from apogee.broker.broker import Broker
from apogee.codes import RequestCode, ResponseCode
from apogee.model.message_codec import iter_records
from apogee.model.msgid import parse_offset_msg_id
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from tests.integration.broker.wire import send


def query(topic: str, key: str, *, max_num: int = 10, uniq: bool = False) -> RemotingCommand:
    fields = {
        "topic": topic,
        "key": key,
        "maxNum": str(max_num),
        "beginTimestamp": "0",
        "endTimestamp": str(int(time.time() * 1000) + 60_000),
    }
    if uniq:
        fields["_UNIQUE_KEY_QUERY"] = "true"
    return RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields)


async def test_view_by_id_returns_the_record(broker: Broker, client: RemotingClient) -> None:
    sent = await send(client, broker.address, "T1", b"find me")
    offset = parse_offset_msg_id(sent.ext_fields["msgId"]).offset

    found = await client.invoke(
        broker.address,
        RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}),
    )
    missing = await client.invoke(
        broker.address,
        RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "999999"}),
    )

    assert found.code == ResponseCode.SUCCESS
    [record] = iter_records(found.body_bytes())
    assert (record.body, record.commit_log_offset) == (b"find me", offset)
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert "999999" in (missing.remark or "")


async def test_query_by_key_and_by_unique_key(broker: Broker, client: RemotingClient) -> None:
    await send(client, broker.address, "T1", b"one", keys="order-1 shared", uniq="U1")
    await send(client, broker.address, "T1", b"two", keys="order-2 shared", uniq="U2")
    await send(client, broker.address, "T2", b"other topic", keys="order-1", uniq="U3")
    broker.dispatch.drain()  # index entries are written by dispatch

    by_key = await client.invoke(broker.address, query("T1", "order-1"))
    shared = await client.invoke(broker.address, query("T1", "shared"))
    by_uniq = await client.invoke(broker.address, query("T1", "U2", max_num=1, uniq=True))
    nothing = await client.invoke(broker.address, query("T1", "no-such-key"))

    assert by_key.code == ResponseCode.SUCCESS
    assert [r.body for r in iter_records(by_key.body_bytes())] == [b"one"]
    assert sorted(r.body for r in iter_records(shared.body_bytes())) == [b"one", b"two"]
    assert [r.body for r in iter_records(by_uniq.body_bytes())] == [b"two"]
    assert nothing.code == ResponseCode.QUERY_NOT_FOUND
    assert "indexLastUpdateTimestamp" in nothing.ext_fields
