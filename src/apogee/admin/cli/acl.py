"""mqadmin's access-control commands: updateAclConfig, deleteAclConfig,
clusterAclConfigVersion and updateGlobalWhiteAddr.

Owns: their flags (mqadmin's letters) and output.

Each works on one broker (``-b``) or every master of a cluster (``-c``).
The brokers must accept the caller as an admin account: give it with
``--access-key``/``--secret-key`` or ``$ROCKETMQ_HOME/conf/tools.yml``.
"""

from __future__ import annotations

import click

from apogee.admin import acl_admin
from apogee.admin.admin_client import AdminClient
from apogee.admin.cli._common import (
    admin_command,
    emit_json,
    fail,
    human_time,
    parse_bool,
    print_lines,
    print_table,
    run_admin,
    table,
)
from apogee.protocol.acl_headers import CreateAccessConfigRequestHeader, split_list


def _targets(name: str, broker_addr: str | None, cluster: str | None) -> None:
    if not broker_addr and not cluster:
        raise fail(f"{name} needs -b broker address or -c cluster name")


def _target_options(fn: click.decorators.FC) -> click.decorators.FC:
    fn = click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")(fn)
    return click.option("-b", "--brokerAddr", "broker_addr", help="One broker (HOST:PORT).")(fn)


@admin_command("updateAclConfig")
@_target_options
@click.option("-a", "--accessKey", "access_key", required=True, help="The account's access key.")
@click.option("-s", "--secretKey", "secret_key", help="Its secret key (needed for a new account).")
@click.option("-w", "--whiteRemoteAddress", "white", help="Addresses that skip its checks.")
@click.option("-i", "--defaultTopicPerm", "topic_perm", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-u", "--defaultGroupPerm", "group_perm", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-t", "--topicPerms", "topic_perms", help="topicA=DENY,topicB=PUB|SUB")
@click.option("-g", "--groupPerms", "group_perms", help="groupA=DENY,groupB=SUB")
@click.option("-m", "--admin", "admin_flag", help="true: may send admin requests.")
def update_acl_config(
    *,
    namesrv: str,
    as_json: bool,
    broker_addr: str | None,
    cluster: str | None,
    access_key: str,
    secret_key: str | None,
    white: str | None,
    topic_perm: str | None,
    group_perm: str | None,
    topic_perms: str | None,
    group_perms: str | None,
    admin_flag: str | None,
) -> None:
    """Create or update an account in the brokers' plain_acl.yml."""
    _targets("updateAclConfig", broker_addr, cluster)
    header = CreateAccessConfigRequestHeader(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=white,
        admin=bool(parse_bool(admin_flag, "-m")),
        default_topic_perm=topic_perm,
        default_group_perm=group_perm,
        topic_perms=topic_perms,
        group_perms=group_perms,
    )

    async def act(admin: AdminClient) -> list[str]:
        return await acl_admin.update_account(
            admin, header, cluster=cluster, broker_addr=broker_addr
        )

    addrs = run_admin(namesrv, act)
    if as_json:
        emit_json({"updated": addrs, "accessKey": access_key})
        return
    print_lines([f"create or update plain access config to {addr} success." for addr in addrs])


@admin_command("deleteAclConfig")
@_target_options
@click.option("-a", "--accessKey", "access_key", required=True, help="The account to delete.")
def delete_acl_config(
    *, namesrv: str, as_json: bool, broker_addr: str | None, cluster: str | None, access_key: str
) -> None:
    """Delete an account from the brokers' plain_acl.yml."""
    _targets("deleteAclConfig", broker_addr, cluster)

    async def act(admin: AdminClient) -> list[str]:
        return await acl_admin.delete_account(
            admin, access_key, cluster=cluster, broker_addr=broker_addr
        )

    addrs = run_admin(namesrv, act)
    if as_json:
        emit_json({"deleted": addrs, "accessKey": access_key})
        return
    print_lines([f"delete plain access config account from {addr} success." for addr in addrs])


@admin_command("updateGlobalWhiteAddr")
@_target_options
@click.option(
    "-g",
    "--globalWhiteRemoteAddresses",
    "addresses",
    required=True,
    help="Comma-separated patterns, e.g. 10.10.103.*,192.168.0.*",
)
@click.option("-p", "--aclFileFullPath", "acl_file", help="The broker's ACL file (optional).")
def update_global_white_addr(
    *,
    namesrv: str,
    as_json: bool,
    broker_addr: str | None,
    cluster: str | None,
    addresses: str,
    acl_file: str | None,
) -> None:
    """Replace the brokers' globalWhiteRemoteAddresses."""
    _targets("updateGlobalWhiteAddr", broker_addr, cluster)
    patterns = split_list(addresses) or []

    async def act(admin: AdminClient) -> list[str]:
        return await acl_admin.update_global_white(
            admin, patterns, acl_file=acl_file, cluster=cluster, broker_addr=broker_addr
        )

    addrs = run_admin(namesrv, act)
    if as_json:
        emit_json({"updated": addrs, "globalWhiteRemoteAddresses": patterns})
        return
    print_lines([f"update global white remote addresses to {addr} success." for addr in addrs])


@admin_command("clusterAclConfigVersion")
@_target_options
def cluster_acl_config_version(
    *, namesrv: str, as_json: bool, broker_addr: str | None, cluster: str | None
) -> None:
    """Show the ACL file version of each broker."""
    _targets("clusterAclConfigVersion", broker_addr, cluster)

    async def act(admin: AdminClient) -> list[acl_admin.AclVersion]:
        return await acl_admin.acl_versions(admin, cluster=cluster, broker_addr=broker_addr)

    versions = run_admin(namesrv, act)
    if as_json:
        emit_json(
            [
                {
                    "clusterName": v.cluster_name,
                    "brokerName": v.broker_name,
                    "brokerAddr": v.broker_addr,
                    "counter": v.version.counter,
                    "timestamp": v.version.timestamp,
                    "files": {
                        path: {"counter": f.counter, "timestamp": f.timestamp}
                        for path, f in v.files.items()
                    },
                }
                for v in versions
            ]
        )
        return
    t = table(
        "#Cluster Name",
        "#Broker Name",
        "#Broker Addr",
        "#AclFilePath",
        "#AclConfigVersionNum",
        "#AclLastUpdateTime",
    )
    for v in versions:
        for path, f in sorted(v.files.items()) or [("-", v.version)]:
            t.add_row(
                v.cluster_name,
                v.broker_name,
                v.broker_addr,
                path,
                str(f.counter),
                human_time(f.timestamp),
            )
    print_table(t)
