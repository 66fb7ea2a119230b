"""Handing one stored message to one live consumer: mqadmin ``queryMsgById -g -d`` and the
dashboard's resend (``apogee.admin.direct``), against a name server and a broker as processes.

Apogee's push consumer runs in the test; the official C++ consumer in its own process. The
broker forwards the stored record to the consumer's connection, the consumer's listener runs
once and its answer comes back; nothing is stored again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient
from apogee.admin.direct import redeliver
from apogee.client.listener import ConsumeStatus
from apogee.client.lite_pull_consumer import LitePullConsumer
from apogee.client.producer import Producer
from apogee.client.push_consumer import PushConsumer
from apogee.errors import ApogeeError
from apogee.model.message import Message
from apogee.model.received import ReceivedMessage
from apogee.model.results import SendResult
from apogee.model.topic import TopicConfig
from apogee.testing.cluster import BrokerProcess, broker_processes, eventually
from tests.harness.cpp import start_cpp
from tests.integration.admin.helpers import AdminCli, json_of

pytestmark = [pytest.mark.slow]

TOPIC = "Direct"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    with broker_processes(tmp_path_factory.mktemp("direct")) as found:
        yield found


class Recorder:
    """A listener: b"fail" raises, b"later" asks for later, anything else succeeds."""

    def __init__(self) -> None:
        self.got: list[tuple[str, bytes]] = []

    def __call__(self, msg: ReceivedMessage) -> ConsumeStatus | None:
        self.got.append((msg.topic, msg.body))
        if msg.body == b"fail":
            raise ValueError("card declined")
        if msg.body == b"later":
            return ConsumeStatus.RECONSUME_LATER
        return None

    def count(self, body: bytes) -> int:
        return sum(1 for _, b in self.got if b == body)


async def _topic(ns: str, topic: str) -> None:
    async with AdminClient(ns) as admin:
        await admin.create_topic(TopicConfig(topic, 2, 2), cluster="DefaultCluster")


async def _send(ns: str, topic: str, *bodies: bytes) -> list[SendResult]:
    async with Producer("pg_direct", namesrv=ns) as producer:
        return [await producer.send(Message(topic, body)) for body in bodies]


async def test_a_consumer_consumes_a_handed_message_once_and_says_how_it_went(
    cluster: tuple[str, BrokerProcess], admin_cli: AdminCli
) -> None:
    ns, _ = cluster
    await _topic(ns, TOPIC)
    recorder = Recorder()
    consumer = PushConsumer("cg_direct", namesrv=ns, listener=recorder, consume_from="first")
    consumer.subscribe(TOPIC)
    async with consumer:
        ok, bad, later = await _send(ns, TOPIC, b"ok", b"fail", b"later")

        async def first_delivery() -> bool:
            return recorder.count(b"ok") == 1

        await eventually(first_delivery, 20)
        client_id = consumer.instance.client_id

        async def direct(sent: SendResult, *extra: str) -> dict[str, object]:
            # by the producer's id (a unique key, so -t) as a user would copy it from a send
            args = ("queryMsgById", "-n", ns, "-i", sent.msg_id, "-t", TOPIC,
                    "-g", "cg_direct", "-d", client_id, *extra)  # fmt: skip
            return json_of(await admin_cli(*args, "--json"))

        answer = await direct(ok)
        assert answer["consumeResult"] == "CR_SUCCESS"
        assert answer["clientId"] == client_id
        assert answer["order"] is False
        assert recorder.count(b"ok") == 2
        assert recorder.got[-1] == (TOPIC, b"ok")

        failed = await direct(bad)
        assert failed["consumeResult"] == "CR_THROW_EXCEPTION"
        assert "card declined" in str(failed["remark"])
        assert (await direct(later))["consumeResult"] == "CR_LATER"

        # by the offset msgId, and in the plain layout
        text = await admin_cli("queryMsgById", "-n", ns, "-i", ok.offset_msg_id,
                               "-g", "cg_direct", "-d", client_id)  # fmt: skip
        assert text.exit_code == 0, text.output
        assert f"consumer {client_id} of cg_direct: CR_SUCCESS" in text.output
        assert recorder.count(b"ok") == 3

    # consumed directly, never stored again: the group's retry topic holds no copy of it
    async with AdminClient(ns) as admin:
        copies = await admin.consume_messages("%RETRY%cg_direct")
    assert b"ok" not in [m.body for q in copies for m in q.messages]


async def test_what_cannot_consume_directly_is_refused_with_the_reason(
    cluster: tuple[str, BrokerProcess], admin_cli: AdminCli
) -> None:
    ns, _ = cluster
    topic = "DirectRefused"
    await _topic(ns, topic)
    (sent,) = await _send(ns, topic, b"x")
    base = ("queryMsgById", "-n", ns, "-i", sent.offset_msg_id)

    alone = await admin_cli(*base, "-g", "cg_direct_pull")
    assert alone.exit_code == 1
    assert "-g (consumer group) and -d (client id) go together" in alone.output

    nobody = await admin_cli(*base, "-g", "cg_direct_pull", "-d", "127.0.0.1@nobody")
    assert nobody.exit_code == 1
    assert "The Consumer <cg_direct_pull> <127.0.0.1@nobody> not online" in nobody.output

    async with LitePullConsumer("cg_direct_pull", namesrv=ns) as puller:
        puller.subscribe(topic)
        await puller.instance.heartbeat_now()
        client_id = puller.instance.client_id

        async def known() -> bool:  # the broker has taken the consumer's heartbeat
            async with AdminClient(ns) as admin:
                try:
                    online = await ops.consumer_connection(admin, "cg_direct_pull")
                except ApogeeError:
                    return False
            return client_id in [c.client_id for c in online.connections]

        await eventually(known, 10)
        refused = await admin_cli(*base, "-g", "cg_direct_pull", "-d", client_id)
    assert refused.exit_code == 1
    assert "LitePullConsumer without a listener" in refused.output


async def test_the_dashboards_resend_passes_over_cpp_consumers_to_the_retry_topic(
    cluster: tuple[str, BrokerProcess],
) -> None:
    ns, _ = cluster
    topic = "DirectCpp"
    await _topic(ns, topic)
    spec = {"action": "push_consume", "namesrv": ns, "topic": topic, "group": "cg_direct_cpp",
            "run_s": 40}  # fmt: skip
    cpp = await start_cpp(spec, timeout_s=50)
    try:
        assert await cpp.wait_event("started", 10), (await cpp.stop()).describe()
        (sent,) = await _send(ns, topic, b"cpp-one")
        assert len(await cpp.wait_messages(1, 20)) == 1
        async with AdminClient(ns) as admin:
            msg = await admin.query_msg_by_id(sent.offset_msg_id)
            done = await redeliver(admin, msg, "cg_direct_cpp")
        assert done.direct is None
        assert done.retry_msg_id
        (why,) = done.passed_over
        assert "is a C++ client, which does not consume directly" in why
        assert "copy sent to its retry topic" in done.describe("cg_direct_cpp")
        again = await cpp.wait_messages(2, 30)
        assert [m.get("body") for m in again] == ["cpp-one", "cpp-one"]
    finally:
        await cpp.stop()
