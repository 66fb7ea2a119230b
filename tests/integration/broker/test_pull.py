"""PULL_MESSAGE against a real broker: every status, tag filters, long polling, offsets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.broker.offset_moved import OffsetMovedEvent
from apogee.codes import ResponseCode
from apogee.model.message import StoreMessage
from apogee.model.message_codec import iter_records
from apogee.model.route import PERM_WRITE
from apogee.model.topic import OFFSET_MOVED_EVENT, TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker
from tests.integration.broker.wire import pull, pull_request, send

SUBSCRIPTION = 0x4
SUSPEND = 0x2
COMMIT = 0x1


async def fill(client: RemotingClient, broker: Broker, topic: str, tags: list[str]) -> None:
    for i, tag in enumerate(tags):
        answer = await send(client, broker.address, topic, f"m{i}".encode(), tags=tag)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


def offsets_of(answer_ext: dict[str, str]) -> tuple[int, int, int]:
    return (
        int(answer_ext["nextBeginOffset"]),
        int(answer_ext["minOffset"]),
        int(answer_ext["maxOffset"]),
    )


async def test_found_returns_the_stored_records(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "T1", ["A", "B", "C"])

    answer = await pull(client, broker.address, "T1", 0, 1, max_msgs=2)

    assert answer.code == ResponseCode.SUCCESS
    assert offsets_of(answer.ext_fields) == (3, 0, 3)
    assert answer.ext_fields["suggestWhichBrokerId"] == "0"
    records = list(iter_records(answer.body_bytes()))
    assert [(r.body, r.queue_offset, r.tags) for r in records] == [(b"m1", 1, "B"), (b"m2", 2, "C")]
    assert all(isinstance(v, str) for v in answer.ext_fields.values())


@pytest.mark.parametrize(
    ("queue_id", "offset", "code", "next_begin"),
    [
        (0, 3, ResponseCode.PULL_NOT_FOUND, 3),  # caught up
        (0, 9, ResponseCode.PULL_OFFSET_MOVED, 3),  # beyond the end
        (1, 0, ResponseCode.PULL_NOT_FOUND, 0),  # a queue never written, from 0
        (1, 5, ResponseCode.PULL_OFFSET_MOVED, 0),  # a queue never written, elsewhere
    ],
)
async def test_empty_answers_carry_where_to_go_next(  # noqa: PLR0917
    broker: Broker, client: RemotingClient, queue_id: int, offset: int, code: int, next_begin: int
) -> None:
    await fill(client, broker, "T1", ["A", "B", "C"])

    answer = await pull(client, broker.address, "T1", queue_id, offset)

    assert answer.code == code, answer.remark
    assert int(answer.ext_fields["nextBeginOffset"]) == next_begin
    assert answer.body_length() == 0
    assert {"minOffset", "maxOffset", "suggestWhichBrokerId"} <= set(answer.ext_fields)


async def test_the_tag_expression_filters(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "T1", ["A", "B", "C", "A"])

    answer = await pull(client, broker.address, "T1", 0, 0, subscription="A || C")

    assert answer.code == ResponseCode.SUCCESS
    assert [r.tags for r in iter_records(answer.body_bytes())] == ["A", "C", "A"]
    assert int(answer.ext_fields["nextBeginOffset"]) == 4


async def test_each_pull_is_filtered_by_the_expression_it_carries(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["A", "B", "C", "A"])
    await fill(client, broker, "T2", ["B", "A"])

    seen = []
    # one group, one connection, the same version: only the expression (or topic) differs
    for topic, expression in [("T1", "A"), ("T1", "B"), ("T1", "A || C"), ("T2", "A"),
                              ("T1", "*"), ("T1", "A")]:  # fmt: skip
        answer = await pull(client, broker.address, topic, 0, 0, subscription=expression)
        assert answer.code == ResponseCode.SUCCESS, (topic, expression, answer.remark)
        seen.append([r.tags for r in iter_records(answer.body_bytes())])

    assert seen == [["A", "A"], ["B"], ["A", "C", "A"], ["A"], ["A", "B", "C", "A"], ["A", "A"]]


async def test_nothing_matching_is_retry_immediately_past_what_was_scanned(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["A", "B"])
    answer = await pull(client, broker.address, "T1", 0, 0, subscription="Z")
    assert answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert int(answer.ext_fields["nextBeginOffset"]) == 2


async def test_a_tag_with_the_same_hash_never_reaches_the_client(
    broker: Broker, client: RemotingClient
) -> None:
    # "Aa" and "BB" share Java's String.hashCode, so the consume queue cannot tell them apart
    await fill(client, broker, "T1", ["BB", "Aa"])

    answer = await pull(client, broker.address, "T1", 0, 0, subscription="Aa")

    assert answer.code == ResponseCode.SUCCESS
    assert [r.tags for r in iter_records(answer.body_bytes())] == ["Aa"]
    only_collision = await pull(client, broker.address, "T1", 0, 0, subscription="Aa", max_msgs=1)
    assert only_collision.code == ResponseCode.PULL_RETRY_IMMEDIATELY


async def test_refusals(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "T1", ["A"])
    broker.topics.update(TopicConfig("WriteOnly", 1, 1, PERM_WRITE))
    addr = broker.address

    no_topic = await pull(client, addr, "Nope", 0, 0)
    bad_queue = await pull(client, addr, "T1", 4, 0)
    unreadable = await pull(client, addr, "WriteOnly", 0, 0)
    no_subscription = await pull(client, addr, "T1", 0, 0, sys_flag=0)
    bad_group = await pull(client, addr, "T1", 0, 0, group="bad group")

    assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST
    assert bad_queue.code == ResponseCode.SYSTEM_ERROR
    assert unreadable.code == ResponseCode.NO_PERMISSION
    assert no_subscription.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert bad_group.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_a_malformed_pull_is_refused_by_field(broker: Broker, client: RemotingClient) -> None:
    request = pull_request("T1", 0, 0)
    request.ext_fields["queueOffset"] = "zero"
    answer = await client.invoke(broker.address, request)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "queueOffset" in (answer.remark or "")


async def test_a_long_poll_is_answered_when_a_message_arrives(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["A"])
    parked = asyncio.ensure_future(
        pull(
            client,
            broker.address,
            "T1",
            0,
            1,
            sys_flag=SUSPEND | SUBSCRIPTION,
            suspend_ms=60_000,
            timeout_s=20,
        )
    )
    await asyncio.sleep(0.1)
    assert not parked.done()
    assert len(broker.holds) == 1

    async with RemotingClient() as producer:
        await send(producer, broker.address, "T1", b"late", tags="B")
    answer = await asyncio.wait_for(parked, 10)

    assert answer.code == ResponseCode.SUCCESS
    assert [r.body for r in iter_records(answer.body_bytes())] == [b"late"]
    assert int(answer.ext_fields["nextBeginOffset"]) == 2
    assert len(broker.holds) == 0


async def test_a_woken_pull_is_answered_in_the_dispatch_turn_that_woke_it(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1w", ["A"])
    parked = asyncio.ensure_future(
        pull(client, broker.address, "T1w", 0, 1, sys_flag=SUSPEND | SUBSCRIPTION,
             suspend_ms=60_000, timeout_s=20)
    )  # fmt: skip
    for _ in range(100):
        if len(broker.holds):
            break
        await asyncio.sleep(0.01)
    assert len(broker.holds) == 1
    assert broker.store.put(StoreMessage("T1w", 0, b"late", "TAGS\x01B\x02")).status.is_stored
    broker.dispatch.kick()
    # One turn: the dispatch step runs, and the pull it wakes is answered in it.
    await asyncio.sleep(0)
    assert len(broker.holds) == 0
    answer = await asyncio.wait_for(parked, 10)
    assert [r.body for r in iter_records(answer.body_bytes())] == [b"late"]


async def test_parked_pulls_of_one_connection_woken_together_each_get_their_answer(
    broker: Broker, client: RemotingClient
) -> None:
    # Four queues parked on one connection; one dispatch wakes them all and
    # their answers leave together: each with its own queue's message.
    await send(client, broker.address, "T4", b"first", queue_id=0)  # creates the topic
    flags = SUSPEND | SUBSCRIPTION
    parked = [
        asyncio.ensure_future(
            pull(client, broker.address, "T4", q, int(q == 0), sys_flag=flags, suspend_ms=60_000)
        )
        for q in range(4)
    ]
    while len(broker.holds) < 4:
        await asyncio.sleep(0.01)
    async with RemotingClient() as producer:
        sent = [
            send(producer, broker.address, "T4", f"to {q}".encode(), queue_id=q) for q in range(4)
        ]
        assert all(a.code == ResponseCode.SUCCESS for a in await asyncio.gather(*sent))
    answers = await asyncio.wait_for(asyncio.gather(*parked), 10)
    for q, answer in enumerate(answers):
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert [r.body for r in iter_records(answer.body_bytes())] == [f"to {q}".encode()]
    assert len(broker.holds) == 0


async def test_a_long_poll_ignores_arrivals_its_filter_rejects(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["Other"])
    parked = asyncio.ensure_future(
        pull(
            client,
            broker.address,
            "T1",
            0,
            1,
            sys_flag=SUSPEND | SUBSCRIPTION,
            subscription="Wanted",
            suspend_ms=60_000,
            timeout_s=20,
        )
    )
    async with RemotingClient() as producer:
        await send(producer, broker.address, "T1", b"skip", tags="Other")
        await asyncio.sleep(0.2)
        assert not parked.done()
        await send(producer, broker.address, "T1", b"take", tags="Wanted")
    answer = await asyncio.wait_for(parked, 10)

    assert answer.code == ResponseCode.SUCCESS
    assert [r.body for r in iter_records(answer.body_bytes())] == [b"take"]


async def test_a_long_poll_times_out_with_pull_not_found(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["A"])
    answer = await pull(
        client,
        broker.address,
        "T1",
        0,
        1,
        sys_flag=SUSPEND | SUBSCRIPTION,
        suspend_ms=200,
        timeout_s=10,
    )
    assert answer.code == ResponseCode.PULL_NOT_FOUND
    assert int(answer.ext_fields["nextBeginOffset"]) == 1


async def test_short_polling_answers_after_the_short_poll_time(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(
        tmp_path / "s", long_polling_enable=False, short_polling_time_ms=300
    ) as b:
        await fill(client, b, "T1", ["A"])
        parked = asyncio.ensure_future(
            pull(
                client,
                b.address,
                "T1",
                0,
                1,
                sys_flag=SUSPEND | SUBSCRIPTION,
                suspend_ms=60_000,
                timeout_s=10,
            )
        )
        await asyncio.sleep(0.05)
        await send(client, b.address, "T1", b"late")
        answer = await asyncio.wait_for(parked, 10)
        assert answer.code == ResponseCode.SUCCESS
        assert [r.body for r in iter_records(answer.body_bytes())] == [b"late"]


async def test_a_pull_without_the_suspend_bit_is_never_parked(
    broker: Broker, client: RemotingClient
) -> None:
    answer = await pull(client, broker.address, "T1", 0, 0, timeout_s=2)
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    await fill(client, broker, "T1", ["A"])
    answer = await pull(client, broker.address, "T1", 0, 1, sys_flag=SUBSCRIPTION, timeout_s=2)
    assert answer.code == ResponseCode.PULL_NOT_FOUND


async def test_a_client_that_leaves_while_parked_does_not_disturb_the_broker(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["A"])
    leaving = RemotingClient()
    parked = asyncio.ensure_future(
        pull(leaving, broker.address, "T1", 0, 1, sys_flag=SUSPEND | SUBSCRIPTION, timeout_s=20)
    )
    await asyncio.sleep(0.1)
    await leaving.close()
    with pytest.raises(Exception, match="closed"):
        await parked

    await fill(client, broker, "T1", ["B"])
    answer = await pull(client, broker.address, "T1", 0, 0)
    assert [r.body for r in iter_records(answer.body_bytes())] == [b"m0", b"m0"]


async def test_commit_offset_rides_on_pulls(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "T1", ["A", "A"])
    await pull(client, broker.address, "T1", 0, 2, sys_flag=COMMIT | SUBSCRIPTION, commit_offset=2)
    await pull(client, broker.address, "T1", 0, 2, sys_flag=SUBSCRIPTION, commit_offset=1)

    assert broker.offsets.query("cg", "T1", 0) == 2


async def test_stopping_the_broker_answers_parked_pulls(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(tmp_path / "s") as b:
        await fill(client, b, "T1", ["A"])
        parked = asyncio.ensure_future(
            pull(client, b.address, "T1", 0, 1, sys_flag=SUSPEND | SUBSCRIPTION, timeout_s=20)
        )
        await asyncio.sleep(0.1)
    answer = await asyncio.wait_for(parked, 5)
    assert answer.code == ResponseCode.PULL_NOT_FOUND


async def test_a_corrected_offset_is_recorded_in_offset_moved_event(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "T1", ["A", "B", "C"])

    moved = await pull(client, broker.address, "T1", 0, 9, group="lagging")
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED
    caught_up = await pull(client, broker.address, "T1", 0, 3, group="lagging")
    assert caught_up.code == ResponseCode.PULL_NOT_FOUND  # only corrections are recorded

    async def events() -> list[bytes]:
        answer = await pull(client, broker.address, OFFSET_MOVED_EVENT, 0, 0, group="ops")
        if answer.code != ResponseCode.SUCCESS:
            return []
        return [r.body for r in iter_records(answer.body_bytes())]

    found: list[bytes] = []
    for _ in range(50):  # the event is dispatched to its queue asynchronously
        found = await events()
        if found:
            break
        await asyncio.sleep(0.02)
    assert len(found) == 1
    event = OffsetMovedEvent.decode(found[0])
    assert event == OffsetMovedEvent("lagging", "T1", broker.config.broker_name, 0, 9, 3)
    record = next(iter_records(
        (await pull(client, broker.address, OFFSET_MOVED_EVENT, 0, 0, group="ops")).body_bytes()
    ))  # fmt: skip
    assert (record.tags, record.keys) == ("lagging", "lagging")
