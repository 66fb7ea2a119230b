"""mqadmin's haStatus: each master with its slaves, and how far behind they are.

Owns: the command's flags and output. For every broker name (of one cluster
with ``-c``; one broker with ``-b``; else of every cluster) one table: the
master with its commit log's end and its in-sync slaves, each slave with its
own end, the bytes it is behind and, from the master's side of the
connection, the age of the oldest byte it has not acknowledged; then the
master's HA connections as mqadmin prints them. ``--json`` gives the raw
HARuntimeInfo of every broker.
"""

from __future__ import annotations

import time

import click

from apogee.admin.admin_client import AdminClient, HAGroup, HANode
from apogee.admin.cli._common import admin_command, emit_json, print_table, run_admin, table
from apogee.model.stats import HAConnectionInfo, HARuntimeInfo


def _node_json(node: HANode) -> dict[str, object]:
    doc: dict[str, object] = {"brokerId": node.broker_id, "addr": node.addr}
    if node.error is not None:
        doc["error"] = node.error
    s = node.status
    if s is not None:
        client = s.ha_client_runtime_info
        doc.update(
            {
                "master": s.master,
                "masterCommitLogMaxOffset": s.master_commit_log_max_offset,
                "inSyncSlaveNums": s.in_sync_slave_nums,
                "haConnectionInfo": [
                    {
                        "addr": c.addr,
                        "slaveAckOffset": c.slave_ack_offset,
                        "diff": c.diff,
                        "lagMillis": c.lag_ms,
                        "inSync": c.in_sync,
                        "transferredByteInSecond": c.transferred_byte_in_second,
                        "transferFromWhere": c.transfer_from_where,
                    }
                    for c in s.ha_connection_info
                ],
                "haClientRuntimeInfo": {
                    "masterAddr": client.master_addr,
                    "maxOffset": client.max_offset,
                    "activated": client.activated,
                    "transferredByteInSecond": client.transferred_byte_in_second,
                    "lastReadTimestamp": client.last_read_timestamp,
                    "lastWriteTimestamp": client.last_write_timestamp,
                },
            }
        )
    return doc


def _link_of(master: HARuntimeInfo | None, slave_max: int, slaves: int) -> HAConnectionInfo | None:
    """The master's connection that is this slave's: the only one, else none can be told."""
    if master is None or len(master.ha_connection_info) != 1 or slaves != 1:
        return None
    return master.ha_connection_info[0]


def _print_group(group: HAGroup) -> None:
    master = group.master
    top = master.status if master is not None and master.status is not None else None
    title = f"{group.broker_name} ({group.cluster})" if group.broker_name else "broker"
    t = table("#BID", "#Addr", "#Role", "#MaxOffset", "#Behind(B)", "#Lag(ms)", "#Status",
              title=title)  # fmt: skip
    slaves = [n for n in group.nodes if n.broker_id != 0]
    now_ms = int(time.time() * 1000)
    for node in group.nodes:
        s = node.status
        if s is None:
            t.add_row(str(node.broker_id), node.addr, "-", "-", "-", "-", node.error or "-")
        elif s.master:
            in_sync = f"{s.in_sync_slave_nums} in sync"
            t.add_row(str(node.broker_id), node.addr, "MASTER",
                      str(s.master_commit_log_max_offset), "", "", in_sync)  # fmt: skip
        else:
            client = s.ha_client_runtime_info
            behind = "-" if top is None else str(max(0, top.master_commit_log_max_offset
                                                     - client.max_offset))  # fmt: skip
            link = _link_of(top, client.max_offset, len(slaves))
            lag = str(link.lag_ms) if link is not None else "-"
            read = (
                (now_ms - client.last_read_timestamp) / 1000 if client.last_read_timestamp else -1
            )
            state = "connected" if client.activated else "not connected"
            if read >= 0:
                state += f", heard {read:.1f}s ago"
            t.add_row(str(node.broker_id), node.addr, "SLAVE", str(client.max_offset), behind,
                      lag, state)  # fmt: skip
    print_table(t)
    if top is not None and top.ha_connection_info:
        links = table("#SlaveAddr", "#SlaveAckOffset", "#Diff", "#Lag(ms)",
                      "#TransferSpeed(KB/s)", "#Status", "#TransferFromWhere")  # fmt: skip
        for c in top.ha_connection_info:
            speed = f"{c.transferred_byte_in_second / 1024:.2f}"
            status = "OK" if c.in_sync else "Fall Behind"
            links.add_row(c.addr, str(c.slave_ack_offset), str(c.diff), str(c.lag_ms), speed,
                          status, str(c.transfer_from_where))  # fmt: skip
        print_table(links)


@admin_command("haStatus")
@click.option("-b", "--brokerAddr", "broker_addr", help="One broker.")
@click.option("-c", "--clusterName", "cluster", help="Every broker of this cluster.")
def ha_status(*, namesrv: str, as_json: bool, broker_addr: str | None, cluster: str | None) -> None:
    """Show each master/slave pair: offsets, bytes and time behind, connections."""

    async def act(admin: AdminClient) -> list[HAGroup]:
        return await admin.ha_status(cluster=cluster, broker_addr=broker_addr)

    groups = run_admin(namesrv, act)
    if as_json:
        emit_json(
            {
                "brokers": [
                    {
                        "cluster": g.cluster,
                        "brokerName": g.broker_name,
                        "nodes": [_node_json(n) for n in g.nodes],
                    }
                    for g in groups
                ]
            }
        )
        return
    for group in groups:
        _print_group(group)
