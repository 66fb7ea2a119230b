"""Delayed delivery against a real broker over 127.0.0.1, with short delay levels.

"On time" is checked on the records themselves: a delivered message's store time is at
least its scheduled copy's store time plus the level's delay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.model.message import Message, MessageExt
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker
from apogee.testing.reading import read_queue

LEVELS = "1s 2s 3s " + " ".join(["1s"] * 15)


async def read_all(
    api: BrokerApi, broker: Broker, topic: str, queue_id: int = 0
) -> list[MessageExt]:
    return await read_queue(api, broker.address, topic, queue_id)


async def arrive(
    api: BrokerApi, broker: Broker, topic: str, count: int, queue_id: int = 0
) -> list[MessageExt]:
    async def check() -> list[MessageExt] | None:
        got = await read_all(api, broker, topic, queue_id)
        return got if len(got) >= count else None

    return await eventually(check, timeout_s=15)


async def send_delayed(
    api: BrokerApi, broker: Broker, body: bytes, level: int, *, topic: str = "T1", queue_id: int = 1
) -> None:
    props = {"DELAY": str(level), "TAGS": f"L{level}", "ua": body.decode()}
    msg = Message(topic, body, properties=props)
    await api.send(broker.address, "broker-a", msg, queue_id=queue_id, producer_group="pg")


async def test_each_level_delivers_on_time_in_order_with_the_properties_kept(
    tmp_path: Path, client: RemotingClient
) -> None:
    api = BrokerApi(client, timeout_s=5)
    async with run_broker(tmp_path / "s", store={"message_delay_level": LEVELS}) as broker:
        assert broker.schedule.running
        for i in range(4):
            for level in (3, 1, 2):
                await send_delayed(api, broker, f"L{level}-{i}".encode(), level)
        assert await read_all(api, broker, "T1", 1) == []  # nothing is due at once

        delivered = await arrive(api, broker, "T1", 12, queue_id=1)

        scheduled = {
            m.properties["ua"]: m
            for level in (1, 2, 3)
            for m in await read_all(api, broker, "SCHEDULE_TOPIC_XXXX", level - 1)
        }
        for level in (1, 2, 3):
            mine = [m for m in delivered if m.tags == f"L{level}"]
            assert [m.body for m in mine] == [f"L{level}-{i}".encode() for i in range(4)]
            for m in mine:
                held = scheduled[m.properties["ua"]]
                assert m.store_timestamp >= held.store_timestamp + level * 1000
                assert (m.topic, m.queue_id) == ("T1", 1)
                props = m.properties
                assert (props["REAL_TOPIC"], props["REAL_QID"]) == ("T1", "1")
                assert (props["ua"], props["CLUSTER"], props["WAIT"]) == (
                    m.body.decode(),
                    "DefaultCluster",
                    "false",
                )
                assert "DELAY" not in props
                assert (m.born_timestamp, m.reconsume_times) == (held.born_timestamp, 0)
        # the tag code was recomputed: a tag filter finds them
        only_l2 = await api.pull(broker.address, "TOOLS_CONSUMER", "T1", 1, 0, expression="L2")
        assert sorted(m.body for m in only_l2.messages) == [f"L2-{i}".encode() for i in range(4)]


async def test_a_level_above_the_highest_waits_the_highest(
    tmp_path: Path, client: RemotingClient
) -> None:
    api = BrokerApi(client, timeout_s=5)
    async with run_broker(tmp_path / "s", store={"message_delay_level": "1s 2s"}) as broker:
        await send_delayed(api, broker, b"far", 9)
        (held,) = await read_all(api, broker, "SCHEDULE_TOPIC_XXXX", 1)
        assert held.properties["DELAY"] == "2"
        (m,) = await arrive(api, broker, "T1", 1, queue_id=1)
        assert m.store_timestamp >= held.store_timestamp + 2000


async def dump(client: RemotingClient, broker: Broker, code: int) -> dict[str, object]:
    answer = await client.invoke(broker.address, RemotingCommand.request(code))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    doc = orjson.loads(answer.body_bytes())
    assert isinstance(doc, dict)
    return doc


async def test_delay_progress_survives_a_restart(tmp_path: Path, client: RemotingClient) -> None:
    api = BrokerApi(client, timeout_s=5)
    store_dir = tmp_path / "s"
    levels = "1s 4s " + " ".join(["1s"] * 16)
    async with run_broker(store_dir, store={"message_delay_level": levels}) as broker:
        for i in range(5):
            await send_delayed(api, broker, f"soon-{i}".encode(), 1)
            await send_delayed(api, broker, f"late-{i}".encode(), 2)
        await arrive(api, broker, "T1", 5, queue_id=1)
        offsets = await dump(client, broker, RequestCode.GET_ALL_DELAY_OFFSET)
        table = offsets["offsetTable"]
        assert isinstance(table, dict)
        assert (table["1"], table["2"]) == (5, 0)
        assert sorted(table, key=int) == [str(level) for level in range(1, 19)]
    saved = orjson.loads((store_dir / "config" / "delayOffset.json").read_bytes())
    assert (saved["offsetTable"]["1"], saved["offsetTable"]["2"]) == (5, 0)

    async with run_broker(store_dir, store={"message_delay_level": levels}) as broker:
        delivered = await arrive(api, broker, "T1", 10, queue_id=1)
        await asyncio.sleep(1.5)  # a level-1 redelivery would show up by now
        bodies = [m.body.decode() for m in await read_all(api, broker, "T1", 1)]
    assert len(delivered) == 10
    assert sorted(bodies) == sorted(
        [f"soon-{i}" for i in range(5)] + [f"late-{i}" for i in range(5)]
    )


async def test_a_persisted_table_with_bare_integer_keys_is_read(
    tmp_path: Path, client: RemotingClient
) -> None:
    store_dir = tmp_path / "s"
    (store_dir / "config").mkdir(parents=True)
    # RocketMQ writes the level numbers unquoted; level 3 points past the queue's end
    (store_dir / "config" / "delayOffset.json").write_text('{"offsetTable":{1:0,3:7}}')
    async with run_broker(store_dir) as broker:
        doc = await dump(client, broker, RequestCode.GET_ALL_DELAY_OFFSET)
        table = doc["offsetTable"]
        assert isinstance(table, dict)
        assert (table["1"], table["2"], table["3"]) == (0, 0, 7)
        runtime = await BrokerApi(client).get_broker_runtime_info(broker.address)
        assert runtime["scheduleMessageOffset_3"] == "7,0"


async def test_consumer_offsets_dump_is_the_file_content(
    broker: Broker, client: RemotingClient
) -> None:
    api = BrokerApi(client)
    await api.update_consumer_offset(broker.address, "cg", "T1", 2, 42)
    doc = await dump(client, broker, RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert doc == {"offsetTable": {"T1@cg": {"2": 42}}}
    assert broker.offsets.dirty  # answering does not count as persisting
