"""mqadmin's cluster and broker commands: clusterList (with each broker's
role), brokerStatus, getBrokerConfig, updateBrokerConfig, wipeWritePerm and addWritePerm.

Owns: their flags and output, and which runtime-info keys clusterList shows.

clusterList shows a broker even when its runtime info cannot be read (the
name server still lists it): its figures are "-" and ``--json`` carries the
reason in ``error``, as mqadmin prints zeros rather than failing.
"""

from __future__ import annotations

import click

from apogee.admin.admin_client import AdminClient, BrokerSummary
from apogee.admin.cli._common import (
    admin_command,
    emit_json,
    fail,
    print_lines,
    print_table,
    run_admin,
    table,
)

# runtime-info key -> column, in mqadmin clusterList's order
_FIGURES = {
    "brokerVersionDesc": "#Version",
    "putTps": "#InTPS",
    "getTransferedTps": "#OutTPS",
    "pageCacheLockTimeMills": "#PCWait(ms)",
    "commitLogDiskRatio": "#SPACE",
}


def _first_number(text: str | None) -> str:
    """RocketMQ's TPS figures are "10.0 9.5 9.8" (10 s, 1 min, 10 min): show the first."""
    if not text:
        return "-"
    return text.split(" ")[0]


def _role(b: BrokerSummary) -> str:
    """The broker's role as it reports it, else what its id says."""
    return b.runtime.get("brokerRole") or ("MASTER" if b.broker_id == 0 else "SLAVE")


def _space(text: str | None) -> str:
    """commitLogDiskRatio (0.4523...) as a percentage; "-" when unknown."""
    try:
        ratio = float(text or "")
    except ValueError:
        return "-"
    return f"{ratio * 100:.1f}%" if ratio >= 0 else "-"


def _number_or_none(text: str | None) -> float | None:
    try:
        return float(_first_number(text))
    except ValueError:
        return None


def _summary_json(b: BrokerSummary) -> dict[str, object]:
    """Every column of the table, as numbers where they are numbers."""
    pc_wait = _number_or_none(b.runtime.get("pageCacheLockTimeMills"))
    doc: dict[str, object] = {
        "cluster": b.cluster,
        "brokerName": b.broker_name,
        "brokerId": b.broker_id,
        "role": _role(b),
        "addr": b.addr,
        "version": b.runtime.get("brokerVersionDesc"),
        "inTps": _number_or_none(b.runtime.get("putTps")),
        "outTps": _number_or_none(b.runtime.get("getTransferedTps")),
        "pageCacheLockTimeMills": int(pc_wait) if pc_wait is not None else None,
        "commitLogDiskRatio": _number_or_none(b.runtime.get("commitLogDiskRatio")),
        "msgPutTotalTodayNow": _number_or_none(b.runtime.get("msgPutTotalTodayNow")),
        "msgGetTotalTodayNow": _number_or_none(b.runtime.get("msgGetTotalTodayNow")),
    }
    if b.error is not None:
        doc["error"] = b.error
    return doc


def _figure(key: str, text: str | None) -> str:
    if key.endswith("Tps"):
        return _first_number(text)
    if key == "commitLogDiskRatio":
        return _space(text)
    return text or "-"


@admin_command("clusterList")
def cluster_list(*, namesrv: str, as_json: bool) -> None:
    """List every broker of every cluster, with a few runtime figures."""
    brokers = run_admin(namesrv, AdminClient.cluster_list)
    if as_json:
        emit_json({"brokers": [_summary_json(b) for b in brokers]})
        return
    t = table("#Cluster Name", "#Broker Name", "#BID", "#Role", "#Addr", *_FIGURES.values())
    for b in brokers:
        figures = [_figure(key, b.runtime.get(key)) for key in _FIGURES]
        t.add_row(b.cluster, b.broker_name, str(b.broker_id), _role(b), b.addr, *figures)
    print_table(t)
    print_lines([f"{b.addr}: no runtime figures: {b.error}" for b in brokers if b.error])


@admin_command("brokerStatus")
@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
def broker_status(
    *, namesrv: str, as_json: bool, broker_addr: str | None, cluster: str | None
) -> None:
    """Show a broker's runtime figures (put/get TPS, offsets, disk ratios, ...)."""
    if not broker_addr and not cluster:
        raise fail("brokerStatus needs -b broker address or -c cluster name")

    async def act(admin: AdminClient) -> dict[str, dict[str, str]]:
        addrs = [broker_addr] if broker_addr else await admin.master_addrs(cluster or "")
        return {addr: await admin.broker_status(addr) for addr in addrs}

    tables = run_admin(namesrv, act)
    if as_json:
        emit_json(tables[broker_addr] if broker_addr else tables)
        return
    for addr, kv in tables.items():
        t = table("#Key", "#Value", title=None if broker_addr else f"broker {addr}")
        for key in sorted(kv):
            t.add_row(key, kv[key])
        print_table(t)


@admin_command("getBrokerConfig")
@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
def get_broker_config(
    *, namesrv: str, as_json: bool, broker_addr: str | None, cluster: str | None
) -> None:
    """Show a broker's settings (broker.conf keys), or those of every master of a cluster."""
    if not broker_addr and not cluster:
        raise fail("getBrokerConfig needs -b broker address or -c cluster name")

    async def act(admin: AdminClient) -> dict[str, dict[str, str]]:
        addrs = [broker_addr] if broker_addr else await admin.master_addrs(cluster or "")
        return {addr: await admin.broker.get_broker_config(addr) for addr in addrs}

    configs = run_admin(namesrv, act)
    if as_json:
        emit_json(configs[broker_addr] if broker_addr else configs)
        return
    for addr, settings in configs.items():
        lines = [f"============{addr}============"] if not broker_addr else []
        print_lines(lines + [f"{key:<50s}=  {value}" for key, value in sorted(settings.items())])


@admin_command("updateBrokerConfig")
@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@click.option("-k", "--key", "key", required=True, help="Setting name (e.g. brokerPermission).")
@click.option("-v", "--value", "value", required=True, help="New value.")
def update_broker_config(
    *,
    namesrv: str,
    as_json: bool,
    broker_addr: str | None,
    cluster: str | None,
    key: str,
    value: str,
) -> None:
    """Change a broker setting while it runs (brokerPermission 4 drains writes)."""
    if not broker_addr and not cluster:
        raise fail("updateBrokerConfig needs -b broker address or -c cluster name")

    async def act(admin: AdminClient) -> list[str]:
        return await admin.update_broker_config(
            key, value, cluster=cluster, broker_addr=broker_addr
        )

    addrs = run_admin(namesrv, act)
    if as_json:
        emit_json({"updated": addrs, "key": key, "value": value})
        return
    print_lines([f"update broker config success, {addr}: {key}={value}" for addr in addrs])


def _perm_command(name: str, *, wipe: bool, doc: str) -> click.Command:
    @admin_command(name)
    @click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
    def command(*, namesrv: str, as_json: bool, broker_name: str) -> None:
        async def act(admin: AdminClient) -> dict[str, int]:
            if wipe:
                return await admin.wipe_write_perm(broker_name)
            return await admin.add_write_perm(broker_name)

        counts = run_admin(namesrv, act)
        if as_json:
            emit_json({"brokerName": broker_name, "topicCounts": counts})
            return
        verb = "wipe write perm of" if wipe else "add write perm of"
        print_lines(
            [f"{verb} {broker_name} in {addr} OK, {n} topics" for addr, n in counts.items()]
        )

    command.help = doc
    return command


wipe_write_perm = _perm_command(
    "wipeWritePerm",
    wipe=True,
    doc="Drop the write bit of a broker's topics on every name server (drain sends).",
)
add_write_perm = _perm_command(
    "addWritePerm",
    wipe=False,
    doc="Give a broker's topics read and write again on every name server.",
)
