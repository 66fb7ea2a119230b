"""Helpers for replication tests: master/slave broker settings and commit-log comparison.

Owns: the broker overrides and broker.conf properties of test masters and
slaves (short heartbeats and metadata rounds), such brokers as ``apogee``
processes, reading a commit-log byte range straight from a store directory's
files, and asking a running broker for its HA status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apogee.codes import RequestCode, ResponseCode
from apogee.model.message import MessageExt
from apogee.model.message_codec import RecordKind, check_record, decode_record
from apogee.model.stats import HARuntimeInfo
from apogee.protocol.admin_bodies import decode_ha_runtime_info
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.store.config import BrokerRole
from apogee.store.segment import segment_name
from apogee.testing.cluster import SMALL_STORE_PROPERTIES, BrokerProcess

#: Replication timers for tests: a report or heartbeat every 200 ms, a round
#: of metadata copying every 300 ms.
FAST_HA: dict[str, Any] = {
    "ha_send_heartbeat_interval_ms": 200,
    "ha_housekeeping_interval_ms": 2000,
    "slave_sync_interval_ms": 300,
}
FAST_HA_PROPERTIES: dict[str, str] = {
    "haSendHeartbeatInterval": "200",
    "haHousekeepingInterval": "2000",
    "slaveSyncIntervalMs": "300",
}


def slave_overrides(broker_id: int = 1, **more: Any) -> dict[str, Any]:
    """``run_broker`` overrides for a slave that serves reads."""
    store = {"broker_role": BrokerRole.SLAVE, **more.pop("store", {})}
    return {"broker_id": broker_id, "slave_read_enable": True, "store": store, **FAST_HA, **more}


def master_overrides(role: BrokerRole = BrokerRole.ASYNC_MASTER, **more: Any) -> dict[str, Any]:
    store = {"broker_role": role, **more.pop("store", {})}
    return {"store": store, **FAST_HA, **more}


def master_process(
    root: Path,
    namesrv: str,
    *,
    role: str = "SYNC_MASTER",
    name: str = "broker-a",
    properties: dict[str, str] | None = None,
) -> BrokerProcess:
    """``apogee broker`` as the master of ``name``."""
    props = {"brokerName": name, "brokerRole": role, **FAST_HA_PROPERTIES, **(properties or {})}
    return BrokerProcess(root / f"{name}-m", namesrv, properties=props)


def slave_process(
    root: Path,
    namesrv: str,
    *,
    name: str = "broker-a",
    broker_id: int = 1,
    properties: dict[str, str] | None = None,
) -> BrokerProcess:
    """``apogee broker`` as a slave of ``name`` that serves reads."""
    props = {"brokerName": name, "brokerRole": "SLAVE", "brokerId": str(broker_id),
             "slaveReadEnable": "true", **FAST_HA_PROPERTIES, **(properties or {})}  # fmt: skip
    return BrokerProcess(root / f"{name}-s{broker_id}", namesrv, properties=props)


#: Commit-log file size of the brokers ``master_process`` and ``slave_process`` start.
PROCESS_FILE_SIZE = int(SMALL_STORE_PROPERTIES["mappedFileSizeCommitLog"])


def commit_log_bytes(store_dir: Path, begin: int, end: int, file_size: int) -> bytes:
    """Bytes ``[begin, end)`` of the commit log under ``store_dir``, read from its files."""
    out = bytearray()
    pos = begin
    while pos < end:
        start = pos - pos % file_size
        n = min(start + file_size, end) - pos
        with open(store_dir / "commitlog" / segment_name(start), "rb") as f:
            f.seek(pos - start)
            chunk = f.read(n)
        if len(chunk) != n:
            raise AssertionError(f"{store_dir}: file {segment_name(start)} is short")
        out += chunk
        pos += n
    return bytes(out)


def records_in(store_dir: Path, end: int, file_size: int) -> list[MessageExt]:
    """Every message record of the commit log under ``store_dir`` before ``end``."""
    out: list[MessageExt] = []
    start = 0
    while start < end:
        data = commit_log_bytes(store_dir, start, min(start + file_size, end), file_size)
        pos = 0
        while pos < len(data):
            checked = check_record(data, pos, len(data), check_crc=True)
            if checked.kind is not RecordKind.MESSAGE:
                break  # the blank end of a file
            out.append(decode_record(data, pos))
            pos += checked.size
        start += file_size
    return out


async def ha_status(client: RemotingClient, addr: str) -> HARuntimeInfo:
    """GET_BROKER_HA_STATUS of the broker at ``addr``."""
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS))
    if response.code != ResponseCode.SUCCESS:
        raise AssertionError(f"{addr} answered {response.code}: {response.remark}")
    return decode_ha_runtime_info(response.body_bytes())
