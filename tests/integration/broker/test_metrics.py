"""The broker's /metrics, scraped over HTTP while it serves: RocketMQ 5's names and labels."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from apogee.broker.broker import Broker
from apogee.client import Message, Producer, PushConsumer, ReceivedMessage
from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from tests.integration.broker.wire import pull, send


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with run_broker(
        tmp_path / "store",
        metrics_exporter_type="PROM",
        metrics_prom_exporter_host="127.0.0.1",
        metrics_prom_exporter_port=0,
        metrics_label="env:test",
    ) as b:
        yield b


async def scrape(broker: Broker) -> dict[str, list[Sample]]:
    exporter = broker.metrics_exporter
    assert exporter is not None
    url = f"http://127.0.0.1:{exporter.port}/metrics"

    def get() -> str:
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200
            return str(answer.read().decode())

    text = await asyncio.to_thread(get)  # the scrape reads the broker on this loop
    samples: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def value(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, []) if labels.items() <= s.labels.items()]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


async def test_a_scrape_reports_traffic_lag_store_and_rpc(
    broker: Broker, client: RemotingClient
) -> None:
    addr = broker.address
    for i in range(5):
        answer = await send(client, addr, "Metered", b"x" * (100 + i), queue_id=0)
        assert answer.code == ResponseCode.SUCCESS
    broker.dispatch.drain()
    pulled = await pull(client, addr, "Metered", 0, 0, group="readers", max_msgs=3)
    assert pulled.code == ResponseCode.SUCCESS
    commit = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "readers", "topic": "Metered", "queueId": "0", "commitOffset": "3"},
    )
    assert (await client.invoke(addr, commit)).code == ResponseCode.SUCCESS
    refused = await send(client, addr, "Metered", b"x" * (5 << 20))
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL

    samples = await scrape(broker)
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a",
              "env": "test"}  # fmt: skip
    assert value(samples, "rocketmq_messages_in_total", topic="Metered",
                 message_type="normal", **common) == 5  # fmt: skip
    assert value(samples, "rocketmq_throughput_in_total", topic="Metered") == 5 * 100 + 10
    assert value(samples, "rocketmq_message_size_bucket", topic="Metered", le="1024") == 5
    assert value(samples, "rocketmq_message_size_count", topic="Metered") == 5
    assert value(samples, "rocketmq_messages_out_total", topic="Metered",
                 consumer_group="readers", is_retry="false") == 3  # fmt: skip
    assert value(samples, "rocketmq_throughput_out_total", consumer_group="readers") > 300
    assert value(samples, "rocketmq_consumer_lag_messages", consumer_group="readers",
                 topic="Metered") == 2  # fmt: skip
    assert value(samples, "rocketmq_consumer_lag_latency", consumer_group="readers",
                 topic="Metered") >= 0  # fmt: skip
    assert value(samples, "rocketmq_topic_number") >= 1
    assert value(samples, "rocketmq_consumer_group_number") >= 1
    assert value(samples, "rocketmq_broker_permission") == 6
    assert value(samples, "rocketmq_storage_size") > 0
    assert value(samples, "rocketmq_storage_dispatch_behind_bytes") == 0
    assert value(samples, "rocketmq_storage_flush_behind_bytes") >= 0
    assert value(samples, "rocketmq_storage_message_reserve_time") >= 0
    assert value(samples, "apogee_store_forced_deleted_files_total") == 0
    assert value(samples, "apogee_store_forced_deleted_messages_total") == 0
    assert value(samples, "apogee_remoting_refused_connections_total") == 0
    assert value(samples, "apogee_remoting_connections") >= 1
    assert value(samples, "apogee_remoting_refused_requests_total", request_code="send_message",
                 response_code="message_illegal") == 1  # fmt: skip
    assert value(samples, "rocketmq_rpc_latency_count", request_code="send_message",
                 response_code="success") == 5  # fmt: skip
    assert value(samples, "rocketmq_rpc_latency_bucket", request_code="send_message",
                 response_code="success", le="+Inf") == 5  # fmt: skip
    assert value(samples, "rocketmq_half_messages") == 0
    assert "rocketmq_processor_watermark" in samples


async def test_metrics_are_off_unless_asked_for(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker:
        assert broker.metrics_exporter is None


def dlq_moves(samples: dict[str, list[Sample]], group: str) -> float:
    return sum(s.value for s in samples.get("rocketmq_send_to_dlq_messages_total", [])
               if s.labels.get("consumer_group") == group)  # fmt: skip


async def test_send_to_dlq_counts_the_messages_the_broker_moved_there(tmp_path: Path) -> None:
    """A counter of moves (RocketMQ 5's), not the size of the %DLQ% topic."""
    async with (
        run_namesrv(tmp_path / "ns") as ns,
        run_broker(tmp_path / "store", f"127.0.0.1:{ns.port}", metrics_exporter_type="PROM",
                   metrics_prom_exporter_host="127.0.0.1", metrics_prom_exporter_port=0) as broker,
        RemotingClient() as client,
    ):  # fmt: skip
        namesrv, api = f"127.0.0.1:{ns.port}", BrokerApi(client)
        async with Producer("pg-dlq", namesrv=namesrv) as producer:
            await producer.send(Message("Poison", b"bad"))

        def give_up(msg: ReceivedMessage) -> None:
            raise ValueError(f"cannot handle {msg.body!r}")

        async with PushConsumer("cg-dlq", namesrv=namesrv, consume_from="first",
                                listener=give_up, max_reconsume_times=0) as consumer:  # fmt: skip
            consumer.subscribe("Poison")

            async def moved() -> float:
                return dlq_moves(await scrape(broker), "cg-dlq")

            assert await eventually(moved, timeout_s=20) == 1
        samples = await scrape(broker)
        assert value(samples, "rocketmq_send_to_dlq_messages_total", consumer_group="cg-dlq",
                     topic="Poison", is_system="false", node_id="broker-a") == 1  # fmt: skip

        # a client's own retry send whose budget is spent is moved too
        again = Message("%RETRY%cg-dlq", b"bad again", properties={"RETRY_TOPIC": "Poison"})
        await api.send(broker.address, "broker-a", again, queue_id=0, producer_group="cg-dlq",
                       reconsume_times=1, max_reconsume_times=1)  # fmt: skip
        assert dlq_moves(await scrape(broker), "cg-dlq") == 2
        # a message written straight into the DLQ was not moved there by the broker
        answer = await send(client, broker.address, "%DLQ%cg-dlq", b"by hand", queue_id=0)
        assert answer.code == ResponseCode.SUCCESS
        assert dlq_moves(await scrape(broker), "cg-dlq") == 2
        # and a counter does not go back when the DLQ is emptied
        await api.delete_topic(broker.address, "%DLQ%cg-dlq")
        assert dlq_moves(await scrape(broker), "cg-dlq") == 2
