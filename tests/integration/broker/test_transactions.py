"""Transactional messages against a real broker over 127.0.0.1.

The producer is a real RemotingClient whose HandlerTable answers the broker's
CHECK_TRANSACTION_STATE through apogee.client.transaction; consumers pull.
Nothing is waited for by time alone: after an action whose effect must be
absent, a plain marker message is sent to the same queue and waited for, so
the absence is checked once the broker has handled everything before it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from apogee.broker.broker import Broker
from apogee.broker.transaction import committed_message
from apogee.client.broker_api import BrokerApi
from apogee.client.transaction import (
    LocalTransactionState,
    TransactionCheckHandler,
    end_header,
    end_transaction,
    send_half,
    send_half_batch,
)
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import BrokerResponseError, NoPermissionError
from apogee.model.client import HeartbeatData, ProducerData
from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    Message,
    MessageExt,
    StoreMessage,
    string_to_properties,
)
from apogee.model.message_codec import decode_batch, decode_record, encode_batch, encode_record
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.results import SendResult
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.remoting.dispatch import HandlerTable
from apogee.testing.cluster import eventually, run_broker
from apogee.testing.reading import read_queue

GROUP = "tx-pg"
TOPIC = "TxTopic"
HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
#: Checks within a fraction of a second instead of a minute.
FAST_CHECKS: dict[str, Any] = {
    "transaction_check_interval_ms": 150,
    "transaction_timeout_ms": 100,
}


class Producer:
    """A transactional producer: one connection, heartbeats its group, answers checks."""

    def __init__(self, client: RemotingClient, checks: TransactionCheckHandler) -> None:
        self.client = client
        self.api = BrokerApi(client, timeout_s=5)
        self.checks = checks
        self.asked: list[MessageExt] = []

    def answer_with(self, decide: Callable[[MessageExt], LocalTransactionState]) -> None:
        def listener(msg: MessageExt) -> LocalTransactionState:
            self.asked.append(msg)
            return decide(msg)

        self.checks.add_listener(GROUP, listener)

    async def join(self, broker: Broker) -> None:
        hb = HeartbeatData("tx-client@1", producers=(ProducerData(GROUP),))
        await self.api.heartbeat(broker.address, hb)

    async def half(self, broker: Broker, body: bytes, **props: str) -> SendResult:
        msg = Message(TOPIC, body, properties=dict(props))
        return await send_half(
            self.api, broker.address, "broker-a", msg, queue_id=1, producer_group=GROUP
        )

    async def end(
        self, broker: Broker, result: SendResult, state: LocalTransactionState, **kw: Any
    ) -> None:
        await end_transaction(self.api, broker.address, result, GROUP, state, **kw)


@asynccontextmanager
async def producer() -> AsyncIterator[Producer]:
    table = HandlerTable()
    checks = TransactionCheckHandler()
    checks.register(table)
    async with RemotingClient(handlers=table) as client:
        yield Producer(client, checks)


async def read_all(
    api: BrokerApi, broker: Broker, topic: str = TOPIC, queue_id: int = 1
) -> list[MessageExt]:
    return await read_queue(api, broker.address, topic, queue_id)


async def settle(api: BrokerApi, broker: Broker, marker: bytes) -> list[MessageExt]:
    """Send a plain marker to the queue and return the queue once the marker is in it."""
    await api.send(
        broker.address, "broker-a", Message(TOPIC, marker), queue_id=1, producer_group="plain"
    )

    async def check() -> list[MessageExt] | None:
        got = await read_all(api, broker)
        return got if got and got[-1].body == marker else None

    return await eventually(check, timeout_s=5)


def bodies(messages: list[MessageExt]) -> list[bytes]:
    return [m.body for m in messages]


async def more_rounds(broker: Broker, count: int = 2) -> None:
    """Wait until the check service has run ``count`` more rounds."""
    service = broker.tx_check
    assert service is not None
    target = service.rounds + count

    async def done() -> bool:
        return service.rounds >= target

    await eventually(done, timeout_s=5)


async def test_half_is_invisible_until_commit_then_delivered_once(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        result = await p.half(broker, b"order-1", TAGS="tagA", KEYS="k1 k2", ua="x")

        assert result.message_queue.queue_id == 1
        assert result.queue_offset == 0  # its offset in the half queue
        assert result.transaction_id == result.msg_id
        half = (await read_all(p.api, broker, HALF, 0))[0]
        assert half.properties["REAL_TOPIC"] == TOPIC and half.properties["REAL_QID"] == "1"
        assert half.properties["PGROUP"] == GROUP and half.properties["TRAN_MSG"] == "true"
        assert half.sys_flag & TRANSACTION_TYPE_MASK == 0
        assert bodies(await settle(p.api, broker, b"m1")) == [b"m1"]

        await p.end(broker, result, LocalTransactionState.COMMIT_MESSAGE)
        delivered = await settle(p.api, broker, b"m2")

        assert bodies(delivered) == [b"m1", b"order-1", b"m2"]
        msg = delivered[1]
        assert (msg.tags, msg.keys, msg.properties["ua"]) == ("tagA", "k1 k2", "x")
        assert msg.uniq_key == result.msg_id
        assert "TRAN_MSG" not in msg.properties and "REAL_TOPIC" not in msg.properties
        assert "REAL_QID" not in msg.properties
        assert msg.prepared_transaction_offset == parse_offset_msg_id(result.offset_msg_id).offset
        assert msg.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
        ops = await read_all(p.api, broker, OP, 0)
        assert [(m.tags, m.body) for m in ops] == [("d", b"0")]

        # a second commit (answered, this time) delivers nothing more
        await p.end(broker, result, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
        assert bodies(await settle(p.api, broker, b"m3")) == [b"m1", b"order-1", b"m2", b"m3"]
        assert len(await read_all(p.api, broker, OP, 0)) == 1
        assert "msgPutTotalTodayNow" in await p.api.get_broker_runtime_info(broker.address)


async def test_rollback_is_never_delivered_and_unknown_changes_nothing(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        rolled = await p.half(broker, b"rolled")
        pending = await p.half(broker, b"pending")

        await p.end(broker, rolled, LocalTransactionState.ROLLBACK_MESSAGE, oneway=False)
        await p.end(broker, pending, LocalTransactionState.UNKNOW, oneway=False)
        assert bodies(await settle(p.api, broker, b"m1")) == [b"m1"]

        # rolled back stays rolled back; the unknown one can still be committed
        await p.end(broker, rolled, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
        await p.end(broker, pending, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
        assert bodies(await settle(p.api, broker, b"m2")) == [b"m1", b"pending", b"m2"]
        ops = await read_all(p.api, broker, OP, 0)
        assert [m.body for m in ops] == [b"0", b"1"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"producer_group": "other-pg"}, "producerGroup"),
        ({"tran_state_table_offset": 7}, "tranStateTableOffset"),
        ({"commit_log_offset_delta": 1}, "commitLogOffset"),
        ({"commit_log_offset_delta": 10**9}, "no prepared transaction message"),
    ],
)
async def test_end_with_wrong_identity_is_refused_and_delivers_nothing(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        result = await p.half(broker, b"guarded")
        good = end_header(result, GROUP, LocalTransactionState.COMMIT_MESSAGE)
        fields = dict(change)
        delta = fields.pop("commit_log_offset_delta", 0)
        bad = dataclasses.replace(good, commit_log_offset=good.commit_log_offset + delta, **fields)

        with pytest.raises(BrokerResponseError) as refused:
            await p.api.end_transaction(broker.address, bad, oneway=False)

        assert refused.value.code == ResponseCode.SYSTEM_ERROR
        assert named in str(refused.value)
        assert bodies(await settle(p.api, broker, b"m1")) == [b"m1"]
        await p.api.end_transaction(broker.address, good, oneway=False)
        assert bodies(await settle(p.api, broker, b"m2")) == [b"m1", b"guarded", b"m2"]


async def test_end_transaction_needs_a_half_message_and_a_known_verdict(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        plain = await p.api.send(
            broker.address, "broker-a", Message(TOPIC, b"plain"), queue_id=1, producer_group=GROUP
        )
        header = end_header(plain, GROUP, LocalTransactionState.COMMIT_MESSAGE)
        with pytest.raises(BrokerResponseError, match="not a half message"):
            await p.api.end_transaction(broker.address, header, oneway=False)

        result = await p.half(broker, b"h")
        odd = end_header(result, GROUP, LocalTransactionState.COMMIT_MESSAGE)
        request = RemotingCommand.request(
            RequestCode.END_TRANSACTION, {**odd.to_ext(), "commitOrRollback": "5"}
        )
        response = await p.client.invoke(broker.address, request)
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "commitOrRollback" in (response.remark or "")


async def test_reject_transaction_message_keeps_no_permission(tmp_path: Path) -> None:
    reject = run_broker(tmp_path / "s", reject_transaction_message=True)
    async with reject as broker, producer() as p:
        with pytest.raises(NoPermissionError, match="transaction message is forbidden"):
            await p.half(broker, b"refused")
        assert await read_all(p.api, broker, HALF, 0) == []


async def test_half_and_op_topics_exist_from_the_start(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        table = (await p.api.get_all_topic_config(broker.address)).topic_config_table
        for topic in (HALF, OP):
            assert (table[topic].read_queue_nums, table[topic].write_queue_nums) == (1, 1)


async def test_a_producer_that_never_ends_is_asked_and_its_commit_delivers(
    tmp_path: Path,
) -> None:
    async with run_broker(tmp_path / "s", **FAST_CHECKS) as broker, producer() as p:
        p.answer_with(lambda msg: LocalTransactionState.COMMIT_MESSAGE)
        await p.join(broker)
        result = await p.half(broker, b"forgotten", TAGS="t")

        async def delivered() -> list[MessageExt] | None:
            got = await read_all(p.api, broker)
            return got or None

        (msg,) = await eventually(delivered, timeout_s=10)
        assert msg.body == b"forgotten" and msg.tags == "t" and msg.uniq_key == result.msg_id
        asked = p.asked[0]
        assert (asked.topic, asked.queue_id, asked.body) == (TOPIC, 1, b"forgotten")
        assert asked.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert asked.uniq_key == result.msg_id
        # the check named the copy the broker made for it; the commit came from that copy
        assert msg.prepared_transaction_offset == asked.commit_log_offset
        asks = len(p.asked)
        await more_rounds(broker)
        assert bodies(await settle(p.api, broker, b"m1")) == [b"forgotten", b"m1"]
        assert len(p.asked) == asks  # resolved: nobody is asked again


async def test_unknown_answers_are_asked_again_until_the_limit_then_dropped(
    tmp_path: Path,
) -> None:
    async with run_broker(
        tmp_path / "s", **FAST_CHECKS, transaction_check_max=3
    ) as broker, producer() as p:  # fmt: skip
        p.answer_with(lambda msg: LocalTransactionState.UNKNOW)
        await p.join(broker)
        result = await p.half(broker, b"undecided")

        async def dropped() -> list[MessageExt] | None:
            got = await read_all(p.api, broker, "TRANS_CHECK_MAX_TIME_TOPIC", 0)
            return got or None

        (kept,) = await eventually(dropped, timeout_s=10)
        assert kept.body == b"undecided" and kept.properties["TRANSACTION_CHECK_TIMES"] == "3"
        assert [m.properties["TRANSACTION_CHECK_TIMES"] for m in p.asked] == ["1", "2", "3"]
        # it counts as rolled back: a late commit delivers nothing
        await p.end(broker, result, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
        assert bodies(await settle(p.api, broker, b"m1")) == [b"m1"]
        await more_rounds(broker)
        assert len(p.asked) == 3  # nobody is asked again


@pytest.mark.parametrize("progress_lost", [False, True])
async def test_restart_keeps_pending_checked_and_resolved_resolved(
    tmp_path: Path, progress_lost: bool
) -> None:
    store = tmp_path / "s"
    async with producer() as p:
        async with run_broker(store, **FAST_CHECKS) as broker:
            pending = await p.half(broker, b"pending")
            committed = await p.half(broker, b"committed")
            rolled = await p.half(broker, b"rolled")
            await p.end(broker, committed, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
            await p.end(broker, rolled, LocalTransactionState.ROLLBACK_MESSAGE, oneway=False)
            assert bodies(await settle(p.api, broker, b"m1")) == [b"committed", b"m1"]
            # checks for "pending" find no producer (none joined); the progress moves on
            await more_rounds(broker)
            assert broker.transactions.half_progress > 2
        offsets = store / "config" / "consumerOffset.json"
        progress = orjson.loads(offsets.read_bytes())["offsetTable"]
        persisted = progress[f"{HALF}@CID_RMQ_SYS_TRANS"]["0"]
        assert persisted > 2
        if progress_lost:  # as after a crash before the progress was ever persisted
            offsets.unlink()

        async with run_broker(store, **FAST_CHECKS) as broker:
            assert broker.transactions.half_progress == (0 if progress_lost else persisted)
            p.answer_with(lambda msg: LocalTransactionState.COMMIT_MESSAGE)
            await p.join(broker)

            async def checked() -> list[MessageExt] | None:
                got = await read_all(p.api, broker)
                return got if len(got) == 3 else None

            after = await eventually(checked, timeout_s=10)
            assert bodies(after) == [b"committed", b"m1", b"pending"]
            assert {m.body for m in p.asked} == {b"pending"}
            for again in (committed, rolled, pending):
                await p.end(broker, again, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
            await more_rounds(broker)
            final = await settle(p.api, broker, b"m2")
            assert bodies(final) == [b"committed", b"m1", b"pending", b"m2"]
            assert {m.body for m in p.asked} == {b"pending"}


async def test_a_failing_check_listener_answers_unknown_and_is_asked_again(
    tmp_path: Path,
) -> None:
    async with run_broker(tmp_path / "s", **FAST_CHECKS) as broker, producer() as p:
        outcomes: list[LocalTransactionState | Exception] = [
            RuntimeError("database down"),
            LocalTransactionState.COMMIT_MESSAGE,
        ]

        def decide(msg: MessageExt) -> LocalTransactionState:
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        p.answer_with(decide)
        await p.join(broker)
        await p.half(broker, b"retried")

        async def delivered() -> list[MessageExt] | None:
            return await read_all(p.api, broker) or None

        assert bodies(await eventually(delivered, timeout_s=10)) == [b"retried"]
        checks = [m.properties["TRANSACTION_CHECK_TIMES"] for m in p.asked]
        assert checks[:2] == ["1", "2"]
        assert p.checks.answered >= 2


async def test_check_immunity_holds_the_first_check_back(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "s", **FAST_CHECKS) as broker, producer() as p:
        p.answer_with(lambda msg: LocalTransactionState.COMMIT_MESSAGE)
        await p.join(broker)
        result = await p.half(broker, b"immune", CHECK_IMMUNITY_TIME_IN_SECONDS="1")

        async def delivered() -> list[MessageExt] | None:
            return await read_all(p.api, broker) or None

        (msg,) = await eventually(delivered, timeout_s=10)
        asked = p.asked[0]
        assert asked.properties["TRANSACTION_CHECK_TIMES"] == "1"
        # the check was about a copy stored once the immunity had passed, after
        # unchecked copies that kept the progress moving
        assert asked.store_timestamp - asked.born_timestamp >= 1000
        assert asked.queue_offset > 1
        assert asked.properties["TRAN_PREPARED_QUEUE_OFFSET"] == str(result.queue_offset)
        assert msg.body == b"immune"


async def half_batch(p: Producer, broker: Broker, run: str, *bodies_: bytes) -> SendResult:
    sent = [Message(TOPIC, b, properties={"TAGS": f"t{i}"}) for i, b in enumerate(bodies_)]
    sent[0].properties["KEYS"] = "k0 k1"
    return await send_half_batch(
        p.api, broker.address, "broker-a", sent, queue_id=1, producer_group=GROUP,
        properties={"RUN": run},
    )  # fmt: skip


async def test_a_batch_of_half_messages_is_one_transaction(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "s", **FAST_CHECKS) as broker, producer() as p:
        p.answer_with(lambda msg: LocalTransactionState.COMMIT_MESSAGE)
        await p.join(broker)
        committed = await half_batch(p, broker, "c", b"c0", b"c\x00\xff1", b"c2")
        rolled_back = await half_batch(p, broker, "r", b"r0", b"r1")
        checked = await half_batch(p, broker, "k", b"k0", b"k1")

        # one half record per batch, holding the batch body and the transaction's properties
        halves = await read_all(p.api, broker, HALF, 0)
        assert [m.queue_offset for m in halves] == [0, 1, 2]
        h = halves[0]
        assert h.commit_log_offset == parse_offset_msg_id(committed.offset_msg_id).offset
        assert [m.properties["APOGEE_HALF_BATCH"] for m in halves] == ["3", "2", "2"]
        items = [(bytes(i.body), string_to_properties(i.properties)) for i in decode_batch(h.body)]
        assert [(b, props["TAGS"]) for b, props in items] == [
            (b"c0", "t0"), (b"c\x00\xff1", "t1"), (b"c2", "t2"),
        ]  # fmt: skip
        assert all(props["UNIQ_KEY"] for _, props in items)
        assert h.properties["RUN"] == "c"
        assert h.properties["REAL_TOPIC"] == TOPIC and h.properties["REAL_QID"] == "1"
        assert h.properties["PGROUP"] == GROUP and h.properties["TRAN_MSG"] == "true"
        assert h.uniq_key == committed.msg_id == committed.transaction_id
        assert h.sys_flag & TRANSACTION_TYPE_MASK == 0
        assert await read_all(p.api, broker) == []

        # ended as one: every message committed at once, or every one rolled back
        await p.end(broker, committed, LocalTransactionState.COMMIT_MESSAGE, oneway=False)
        await p.end(broker, rolled_back, LocalTransactionState.ROLLBACK_MESSAGE, oneway=False)
        await p.end(broker, committed, LocalTransactionState.COMMIT_MESSAGE, oneway=False)

        async def all_in() -> list[MessageExt] | None:
            got = await read_all(p.api, broker)
            return got if len(got) == 5 else None

        delivered = await eventually(all_in, timeout_s=10)
        assert bodies(delivered) == [b"c0", b"c\x00\xff1", b"c2", b"k0", b"k1"]
        assert [m.queue_offset for m in delivered] == [0, 1, 2, 3, 4]
        # the third was left to the broker's check, which asked once about all of it
        assert [m.properties["RUN"] for m in p.asked] == ["k"]
        assert p.asked[0].uniq_key == checked.transaction_id
        for m in delivered:
            assert m.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
            assert m.properties["PGROUP"] == GROUP
            for name in ("TRAN_MSG", "REAL_TOPIC", "REAL_QID", "APOGEE_HALF_BATCH"):
                assert name not in m.properties
        assert [(m.tags, m.properties["RUN"]) for m in delivered] == [
            ("t0", "c"), ("t1", "c"), ("t2", "c"), ("t0", "k"), ("t1", "k"),
        ]  # fmt: skip
        assert delivered[0].properties["KEYS"] == "k0 k1"
        for key in ("k0", "k1"):  # indexed like any message (not the rolled-back r0)
            found = broker.store.query_message(TOPIC, key, 10, 0, 2**62)
            assert sorted(decode_record(v).body for v in found.messages) == [b"c0", b"k0"]
            found.release()
        # each message keeps its own id; none is the transaction's
        ids = [m.uniq_key for m in delivered]
        assert len(set(ids)) == 5
        assert committed.transaction_id not in ids and checked.transaction_id not in ids
        await more_rounds(broker)
        assert len(await settle(p.api, broker, b"m1")) == 6


@pytest.mark.parametrize(
    "reserved", ["PGROUP", "REAL_TOPIC", "DELAY", "TRAN_PREPARED_QUEUE_OFFSET"]
)
async def test_a_half_batch_whose_message_sets_a_broker_property_is_refused(
    tmp_path: Path, reserved: str
) -> None:
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        body = encode_batch(
            [Message(TOPIC, b"ok"), Message(TOPIC, b"bad", properties={reserved: "1"})]
        )
        header = SendMessageRequestHeader(
            producer_group=GROUP, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=1, sys_flag=TRANSACTION_PREPARED_TYPE, born_timestamp=0, flag=0,
            properties="", batch=True,
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_v2(), body)
        answer = await p.client.invoke(broker.address, request)

        assert answer.code == ResponseCode.MESSAGE_ILLEGAL
        assert reserved in (answer.remark or "")
        assert await read_all(p.api, broker, HALF, 0) == []


@pytest.mark.parametrize("sys_flag", [TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE])
async def test_a_client_batch_of_committed_or_rolled_back_messages_is_refused(
    tmp_path: Path, sys_flag: int
) -> None:
    # the store takes committed batches from a batch half's commit, never from a client
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        with pytest.raises(BrokerResponseError) as refused:
            await p.api.send_batch(
                broker.address, "broker-a", [Message(TOPIC, b"x")], queue_id=1,
                producer_group=GROUP, sys_flag=sys_flag,
            )  # fmt: skip
        assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "transaction" in str(refused.value)
        assert bodies(await settle(p.api, broker, b"m1")) == [b"m1"]


def raw_batch(items: list[tuple[bytes, str]]) -> bytes:
    """A batch body whose messages carry these property strings as they are."""
    out = b""
    for body, props in items:
        raw = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, 5, len(body)) + body
        out += struct.pack(">h", len(raw)) + raw
    return out


@pytest.mark.parametrize(
    "own",
    [
        "TAGS\x01t\x02KEYS\x01k1 k2\x02",  # as clients write them: committed in place
        "ü\x01ß ü\x02a\x01x\x01y\x02",  # not ASCII, a value holding 0x01: in place too
        "a\x011\x02a\x012\x02",  # a name twice
        "a\x011\x02\x02b\x01\x02c\x01z",  # empty pairs, no 0x02 at the end
    ],
)
async def test_a_commit_writes_the_record_of_the_decoded_half_message(
    tmp_path: Path, own: str
) -> None:
    # Half records as another writer left them (a single send's half is always
    # written canonical): put in the store, then found open by the next start.
    tail = f"REAL_TOPIC\x01{TOPIC}\x02REAL_QID\x011\x02TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02"
    props = own + ("" if own.endswith("\x02") else "\x02") + tail
    async with run_broker(tmp_path / "s") as broker:
        for body in (b"first", b"\0second"):
            record = StoreMessage(HALF, 0, body, props, flag=5, born_host=("127.0.0.1", 1))
            assert broker.store.put(record).status.is_stored
    async with run_broker(tmp_path / "s") as broker, producer() as p:
        halves = await read_all(p.api, broker, HALF, 0)
        assert len(halves) == 2

        states = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE)
        for half, state in zip(halves, states, strict=True):
            await p.api.end_transaction(broker.address, end_header_of(half, state), oneway=False)

        delivered = await settle(p.api, broker, b"m1")
        assert bodies(delivered) == [b"first", b"m1"]
        got = delivered[0]
        stored = broker.store.look_message(halves[0].commit_log_offset)
        assert stored is not None
        msg = committed_message(stored, TOPIC, 1)
        expected = encode_record(
            topic=TOPIC, body=bytes(msg.body), queue_id=1, flag=5, properties=msg.properties,
            queue_offset=got.queue_offset, physical_offset=got.commit_log_offset,
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            store_timestamp=got.store_timestamp, store_host=msg.store_host,
            prepared_transaction_offset=halves[0].commit_log_offset,
        )  # fmt: skip
        view = broker.store.read_message(got.commit_log_offset)
        assert view is not None and bytes(view) == expected
        view.release()
        ops = await read_all(p.api, broker, OP, 0)
        assert [m.body for m in ops] == [b"0", b"1"]
        for half in halves:  # both resolved: ending them again changes nothing
            again = end_header_of(half, LocalTransactionState.COMMIT_MESSAGE)
            await p.api.end_transaction(broker.address, again, oneway=False)
        assert bodies(await settle(p.api, broker, b"m2")) == [b"first", b"m1", b"m2"]


def end_header_of(half: MessageExt, state: LocalTransactionState) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group=GROUP, tran_state_table_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset, commit_or_rollback=state.value,
        msg_id=half.msg_id,
    )  # fmt: skip
