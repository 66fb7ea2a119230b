"""The broker as a whole: raw C++ frames, hostile peers, restarts, persistence."""

from __future__ import annotations

import asyncio
import logging
import struct
from pathlib import Path

import orjson
import pytest

from apogee.broker.broker import Broker
from apogee.codes import ResponseCode
from apogee.model.message import MessageExt
from apogee.model.message_codec import iter_records
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker
from tests.integration.broker.wire import pull, send

CPP_DATA = Path(__file__).resolve().parents[2] / "data" / "cpp"


async def replay(address: str, *names: str) -> list[RemotingCommand]:
    """Write captured C++ frames as they are and read one answer per frame."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    decoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    try:
        for count, name in enumerate(names, 1):
            writer.write((CPP_DATA / name).read_bytes())
            await writer.drain()
            while len(answers) < count:
                chunk = await asyncio.wait_for(reader.read(65536), 5)
                assert chunk, "the broker closed the connection"
                answers += decoder.feed(chunk)
    finally:
        writer.close()
        await writer.wait_closed()
    return answers


async def test_captured_cpp_sends_are_answered_as_the_client_needs(broker: Broker) -> None:
    names = [
        "send_message_sync.bin",
        "send_message_oneway.bin",
        "send_message_compressed.bin",
        "send_message_delay.bin",
        "send_message_batch.bin",
        "send_message_batch_compressed.bin",
    ]
    answers = await replay(broker.address, *names)

    for name, answer in zip(names, answers, strict=True):
        assert answer.code == ResponseCode.SUCCESS, (name, answer.remark)
        assert {"msgId", "queueId", "queueOffset"} <= set(answer.ext_fields), name
    records = await _pull_all(broker, "T1")
    bodies = [r.body for r in records]
    assert b"message-0" in bodies
    assert sum(len(b) == 3000 for b in bodies) == 2  # the compressed batch, inflated and split
    assert any(r.sys_flag & 1 for r in records)  # the compressed single message, stored as sent


async def _pull_all(broker: Broker, topic: str) -> list[MessageExt]:
    records: list[MessageExt] = []
    async with RemotingClient() as client:
        for queue_id in range(8):
            answer = await pull(client, broker.address, topic, queue_id, 0)
            if answer.code == ResponseCode.SUCCESS:
                records += list(iter_records(answer.body_bytes()))
    return records


async def test_unknown_codes_and_torn_frames_leave_the_broker_serving(
    broker: Broker, client: RemotingClient
) -> None:
    unknown = await client.invoke(broker.address, RemotingCommand.request(9999))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    # a peer that sends half a frame and leaves, and one that sends garbage
    host, port = broker.address.rsplit(":", 1)
    for junk in (struct.pack(">ii", 500, 40) + b'{"code":10', b"\xff\xff\xff\xff" * 4):
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(junk)
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    answer = await send(client, broker.address, "T1", b"still here")
    assert answer.code == ResponseCode.SUCCESS
    [record] = iter_records((await pull(client, broker.address, "T1", 0, 0)).body_bytes())
    assert record.body == b"still here"


async def test_a_restart_keeps_messages_topics_groups_and_offsets(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with RemotingClient() as client:
        async with run_broker(store) as b:
            for i in range(3):
                await send(client, b.address, "Kept", f"m{i}".encode())
            b.offsets.commit("cg", "Kept", 0, 2)
            b.groups.find_or_create("cg")
        assert not (store / "abort").exists()
        for name in ("topics.json", "subscriptionGroup.json", "consumerOffset.json"):
            assert orjson.loads((store / "config" / name).read_bytes())

        async with run_broker(store) as again:
            assert again.topics.select("Kept") is not None
            assert again.groups.get("cg") is not None
            assert again.offsets.query("cg", "Kept", 0) == 2
            answer = await pull(client, again.address, "Kept", 0, 0)
            assert [r.body for r in iter_records(answer.body_bytes())] == [b"m0", b"m1", b"m2"]


async def test_a_config_file_that_cannot_be_written_at_stop_still_lets_the_store_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "store"
    offsets_file = store / "config" / "consumerOffset.json"
    async with RemotingClient() as client:
        async with run_broker(store) as b:
            assert (await send(client, b.address, "Kept", b"m0")).code == ResponseCode.SUCCESS
            b.offsets.commit("cg", "Kept", 0, 1)
            # A directory where the file goes: the final write's rename fails (EISDIR)
            # for root too, as a read-only directory would not.
            offsets_file.unlink(missing_ok=True)
            offsets_file.mkdir(parents=True)
            caplog.set_level(logging.ERROR, logger="apogee")  # for the stop below
        assert "stopping without writing consumerOffset.json" in caplog.text
        assert not (store / "abort").exists()  # the store closed as after a clean stop
        # the files after the failed one were still written
        topics = orjson.loads((store / "config" / "topics.json").read_bytes())
        assert "Kept" in topics["topicConfigTable"]

        offsets_file.rmdir()
        async with run_broker(store) as again:
            assert again.store is not None and again.store.recovery is not None
            assert again.store.recovery.last_exit_ok  # not recovered as after a crash
            answer = await pull(client, again.address, "Kept", 0, 0)
            assert [r.body for r in iter_records(answer.body_bytes())] == [b"m0"]


async def test_a_damaged_config_file_falls_back_to_its_backup(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with run_broker(store) as b:
        b.offsets.commit("cg", "T", 0, 5)
    async with run_broker(store) as b:
        b.offsets.commit("cg", "T", 0, 9)  # the stop writes 9 and keeps 5 as .bak
    (store / "config" / "consumerOffset.json").write_bytes(b'{"offsetTable": {"T@cg": {"0"')
    async with run_broker(store) as b:
        assert b.offsets.query("cg", "T", 0) == 5


async def test_expired_files_go_at_the_next_pass_of_clean_resource_interval(tmp_path: Path) -> None:
    # every file expires at once, every hour is a deleteWhen hour: only the pass timer waits
    store = {
        "clean_resource_interval_ms": 200,
        "file_reserved_time_hours": 0,
        "delete_when": ";".join(f"{h:02d}" for h in range(24)),
        "mapped_file_size_commit_log_bytes": 4096,
    }
    async with run_broker(tmp_path / "store", store=store) as broker, RemotingClient() as client:
        for _ in range(20):
            answer = await send(client, broker.address, "T", b"x" * 1000)
            assert answer.code == ResponseCode.SUCCESS
        commit_log = tmp_path / "store" / "commitlog"
        assert len(list(commit_log.iterdir())) > 4

        async def cleaned() -> bool:
            return len(list(commit_log.iterdir())) <= 2

        await eventually(cleaned, timeout_s=3)  # the default pass comes every 10 s
