"""SQL92 property filters against a real broker (RocketMQ's enablePropertyFilter).

A consumer names the filter either in each pull (SUBSCRIPTION bit plus
expressionType SQL92) or once in its heartbeat; Java push consumers first
ask CHECK_CLIENT_CONFIG whether the broker takes the expression. Codes and
remarks are RocketMQ 4.9's PullMessageProcessor and ClientManageProcessor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.model.client import ConsumerData, HeartbeatData
from apogee.model.message import Message
from apogee.model.message_codec import iter_records
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.subscription import EXPRESSION_SQL92, SubscriptionData
from apogee.protocol.bodies import encode_check_client_body, encode_heartbeat
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker
from tests.integration.broker.wire import pull_request, send

SUBSCRIPTION = 0x4
SUSPEND = 0x2
NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"


@pytest.fixture
async def filtering(tmp_path: Path) -> AsyncIterator[Broker]:
    async with run_broker(tmp_path / "store", enable_property_filter=True) as b:
        yield b


async def fill(client: RemotingClient, broker: Broker, rows: list[dict[str, str]]) -> None:
    """One message per row on T1 queue 0; the body is the row's position."""
    for i, row in enumerate(rows):
        tags = row.pop("TAGS", None)
        answer = await send(client, broker.address, "T1", f"m{i}".encode(), tags=tags, extra=row)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


def sql_pull(
    expression: str, offset: int, *, expression_type: str = EXPRESSION_SQL92, **kwargs: object
) -> RemotingCommand:
    request = pull_request("T1", 0, offset, subscription=expression, **kwargs)  # type: ignore[arg-type]
    request.ext_fields["expressionType"] = expression_type
    return request


def bodies(answer: RemotingCommand) -> list[bytes]:
    return [r.body for r in iter_records(answer.body_bytes())]


def next_begin(answer: RemotingCommand) -> int:
    return int(answer.ext_fields["nextBeginOffset"])


def sql92_heartbeat(expression: str, *, client_id: str = "c1", version: int = 1) -> RemotingCommand:
    sub = SubscriptionData("T1", expression, sub_version=version, expression_type=EXPRESSION_SQL92)
    data = HeartbeatData(client_id, consumers=(ConsumerData("cg", subscriptions=(sub,)),))
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=encode_heartbeat(data))


def check_client(expression: str, expression_type: str = EXPRESSION_SQL92) -> RemotingCommand:
    sub = SubscriptionData("T1", expression, expression_type=expression_type)
    body = encode_check_client_body("c1", "cg", sub)
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body)


ROWS = [
    {"a": str(i), "region": "eu" if i % 2 == 0 else "us", "TAGS": f"Tag{i % 3}"} for i in range(10)
]


async def test_a_pull_returns_exactly_the_matching_messages(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [dict(r) for r in ROWS])

    answer = await client.invoke(filtering.address, sql_pull("a > 3 AND region = 'eu'", 0))

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert bodies(answer) == [b"m4", b"m6", b"m8"]
    assert [r.queue_offset for r in iter_records(answer.body_bytes())] == [4, 6, 8]
    assert next_begin(answer) == 10
    caught_up = await client.invoke(filtering.address, sql_pull("a > 3", 10))
    assert caught_up.code == ResponseCode.PULL_NOT_FOUND


async def test_system_properties_such_as_tags_are_filterable(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [dict(r) for r in ROWS])

    answer = await client.invoke(
        filtering.address, sql_pull("TAGS IN ('Tag0', 'Tag2') AND a BETWEEN 2 AND 6", 0)
    )

    assert bodies(answer) == [b"m2", b"m3", b"m5", b"m6"]


async def test_a_selective_filter_fills_the_answer_in_one_pull(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [dict(r) for r in ROWS])
    addr = filtering.address

    # The first store read (offsets 0-2) matches nothing; the pull reads on.
    first = await client.invoke(addr, sql_pull("a >= 4", 0, max_msgs=3))
    second = await client.invoke(addr, sql_pull("a >= 4", next_begin(first), max_msgs=3))
    none = await client.invoke(addr, sql_pull("a > 100", 0, max_msgs=3))

    assert first.code == ResponseCode.SUCCESS
    assert bodies(first) == [b"m4", b"m5", b"m6"]
    assert next_begin(first) == 7  # the records read past the third match come again next time
    assert bodies(second) == [b"m7", b"m8", b"m9"]
    assert next_begin(second) == 10
    assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert next_begin(none) == 10  # all there was, read in one pull


async def test_runs_without_a_match_are_skipped_with_retry_immediately(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(
        tmp_path / "store", enable_property_filter=True, max_filter_message_count=4
    ) as broker:
        await fill(client, broker, [dict(r) for r in ROWS])
        addr = broker.address

        # A scan budget of 4 units: reads of 3 stop after 6, nothing matched yet.
        first = await client.invoke(addr, sql_pull("a >= 8", 0, max_msgs=3))
        second = await client.invoke(addr, sql_pull("a >= 8", next_begin(first), max_msgs=3))

    assert first.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert next_begin(first) == 6 and first.body_length() == 0
    assert second.code == ResponseCode.SUCCESS
    assert bodies(second) == [b"m8", b"m9"]
    assert next_begin(second) == 10


async def test_a_heartbeat_subscription_filters_pulls_without_the_subscription_bit(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [dict(r) for r in ROWS])
    addr = filtering.address
    assert (await client.invoke(addr, sql92_heartbeat("region = 'us' AND a < 5"))).code == 0

    answer = await client.invoke(addr, sql_pull("ignored", 0, sys_flag=0))

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert bodies(answer) == [b"m1", b"m3"]
    newer = await client.invoke(addr, sql_pull("ignored", 0, sys_flag=0, sub_version=2))
    assert newer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST


async def test_a_heartbeat_expression_that_does_not_compile_leaves_no_filter_data(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [dict(r) for r in ROWS])
    addr = filtering.address
    await client.invoke(addr, sql92_heartbeat("a >"))

    answer = await client.invoke(addr, sql_pull("ignored", 0, sys_flag=0))

    assert answer.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert answer.remark == (
        "The broker's consumer filter data is not exist!Your expression may be wrong!"
    )
    await client.invoke(addr, sql92_heartbeat("a = 9"))
    fixed = await client.invoke(addr, sql_pull("ignored", 0, sys_flag=0))
    assert bodies(fixed) == [b"m9"]


async def test_an_expression_that_does_not_compile_is_refused_and_the_broker_serves_on(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [dict(r) for r in ROWS])
    addr = filtering.address

    bad = await client.invoke(addr, sql_pull("a > 'x'", 0))
    empty = await client.invoke(addr, sql_pull("", 0))
    unknown_type = await client.invoke(addr, sql_pull("a > 1", 0, expression_type="JSONPATH"))
    good = await client.invoke(addr, sql_pull("a = 2", 0))

    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "cannot be compared" in (bad.remark or "") and "column 3" in (bad.remark or "")
    assert empty.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert unknown_type.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "JSONPATH" in (unknown_type.remark or "")
    assert good.code == ResponseCode.SUCCESS and bodies(good) == [b"m2"]


async def test_a_broker_without_property_filters_refuses_sql92(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, [dict(r) for r in ROWS])
    addr = broker.address

    by_request = await client.invoke(addr, sql_pull("a > 1", 0))
    await client.invoke(addr, sql92_heartbeat("a > 1"))
    by_heartbeat = await client.invoke(addr, sql_pull("ignored", 0, sys_flag=0))
    checked = await client.invoke(addr, check_client("a > 1"))
    tags = await client.invoke(addr, sql_pull("Tag1", 0, expression_type="TAG"))

    for refused in (by_request, by_heartbeat, checked):
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark == NOT_SUPPORTED
    assert tags.code == ResponseCode.SUCCESS and bodies(tags) == [b"m1", b"m4", b"m7"]


async def test_check_client_config_compiles_the_expression(
    filtering: Broker, client: RemotingClient
) -> None:
    addr = filtering.address

    good = await client.invoke(addr, check_client("a > 1 AND b IS NULL"))
    bad = await client.invoke(addr, check_client("a > > 1"))
    tag = await client.invoke(addr, check_client("TagA || TagB", "TAG"))
    garbage = await client.invoke(
        addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=b"{not json")
    )

    assert good.code == ResponseCode.SUCCESS
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "column 5" in (bad.remark or "")
    assert tag.code == ResponseCode.SUCCESS
    assert garbage.code == ResponseCode.SYSTEM_ERROR


async def test_a_check_body_without_a_subscription_passes(
    broker: Broker, client: RemotingClient
) -> None:
    body = orjson.dumps({"clientId": "c1", "group": "cg"})
    answer = await client.invoke(
        broker.address, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body)
    )
    assert answer.code == ResponseCode.SUCCESS


async def test_a_parked_sql92_pull_answers_each_arrival(
    filtering: Broker, client: RemotingClient
) -> None:
    await fill(client, filtering, [{"a": "0"}])
    addr = filtering.address

    def parked(offset: int) -> asyncio.Future[RemotingCommand]:
        request = sql_pull("a > 5", offset, sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=60_000)
        return asyncio.ensure_future(client.invoke(addr, request, 20))

    waiting = parked(1)
    await asyncio.sleep(0.1)
    assert not waiting.done()
    async with RemotingClient() as producer:
        await fill(producer, filtering, [{"a": "1"}])
        # The consume queue holds no properties, so the pull wakes, finds no
        # match and sends the consumer past the message at once.
        skipped = await asyncio.wait_for(waiting, 10)
        assert skipped.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert next_begin(skipped) == 2

        waiting = parked(2)
        await asyncio.sleep(0.1)
        answer = await send(producer, addr, "T1", b"wanted", extra={"a": "6"})
        assert answer.code == ResponseCode.SUCCESS
    taken = await asyncio.wait_for(waiting, 10)
    assert taken.code == ResponseCode.SUCCESS
    assert bodies(taken) == [b"wanted"]


async def test_filter_support_retry_filters_retried_messages_by_their_first_topic(
    tmp_path: Path, client: RemotingClient
) -> None:
    levels = " ".join(["1s"] * 18)
    async with run_broker(
        tmp_path / "store",
        enable_property_filter=True,
        filter_support_retry=True,
        store={"message_delay_level": levels},
    ) as b:
        api = BrokerApi(client, timeout_s=5)
        assert (await client.invoke(b.address, sql92_heartbeat("a > 5"))).code == 0
        for a in ("1", "7"):
            msg = Message("T1", f"a={a}".encode(), properties={"a": a})
            sent = await api.send(b.address, "broker-a", msg, queue_id=0, producer_group="pg")
            offset = parse_offset_msg_id(sent.offset_msg_id).offset
            await api.send_back(b.address, await api.view_message(b.address, offset), "cg")
        store = b.store
        assert store is not None
        assert await eventually(
            lambda: asyncio.sleep(0, store.max_offset_in_queue("%RETRY%cg", 0) == 2), timeout_s=10
        )

        retried = await api.pull(b.address, "cg", "%RETRY%cg", 0, 0)

        assert [m.body for m in retried.messages] == [b"a=7"]
        assert retried.next_begin_offset == 2
