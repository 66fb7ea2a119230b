"""Access-control administration across brokers, as mqadmin's ACL commands do it.

Owns: update/delete an account, change the global white list, and read the
ACL version of brokers -- each on one broker (``-b``) or every master of a
cluster (``-c``) -- and AclVersion, what one broker answers about its file.

Brokers apply the changes to their own ``plain_acl.yml``; name servers have
no ACL requests, so their files are edited by hand (they reload on change).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from apogee.admin.admin_client import AdminClient
from apogee.codes import RequestCode
from apogee.errors import ProtocolError
from apogee.model.route import DataVersion
from apogee.protocol.acl_headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from apogee.protocol.bodies import data_version_from_json


@dataclass(frozen=True, slots=True)
class AclVersion:
    cluster_name: str
    broker_name: str
    broker_addr: str
    version: DataVersion
    files: dict[str, DataVersion]


async def update_account(
    admin: AdminClient,
    header: CreateAccessConfigRequestHeader,
    *,
    cluster: str | None = None,
    broker_addr: str | None = None,
) -> list[str]:
    """Create or update an account on the brokers; their addresses."""
    addrs = await admin.target_brokers(cluster, broker_addr)
    for addr in addrs:
        await admin.call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header)
    return addrs


async def delete_account(
    admin: AdminClient,
    access_key: str,
    *,
    cluster: str | None = None,
    broker_addr: str | None = None,
) -> list[str]:
    addrs = await admin.target_brokers(cluster, broker_addr)
    header = DeleteAccessConfigRequestHeader(access_key)
    for addr in addrs:
        await admin.call(addr, RequestCode.DELETE_ACL_CONFIG, header)
    return addrs


async def update_global_white(
    admin: AdminClient,
    addresses: list[str],
    *,
    acl_file: str | None = None,
    cluster: str | None = None,
    broker_addr: str | None = None,
) -> list[str]:
    addrs = await admin.target_brokers(cluster, broker_addr)
    header = UpdateGlobalWhiteAddrsConfigRequestHeader(",".join(addresses), acl_file)
    for addr in addrs:
        await admin.call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)
    return addrs


def _version(text: str | None, addr: str) -> DataVersion:
    try:
        return data_version_from_json(orjson.loads(text or "{}"))
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"{addr}: ACL version is not JSON: {exc}") from None


async def acl_versions(
    admin: AdminClient, *, cluster: str | None = None, broker_addr: str | None = None
) -> list[AclVersion]:
    """GET_BROKER_CLUSTER_ACL_INFO of each broker."""
    out = []
    for addr in await admin.target_brokers(cluster, broker_addr):
        response = await admin.call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, None)
        h = GetBrokerAclConfigResponseHeader.from_ext(response.ext_fields)
        try:
            files = orjson.loads(h.all_acl_file_version or "{}")
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"{addr}: ACL file versions are not JSON: {exc}") from None
        out.append(
            AclVersion(
                h.cluster_name,
                h.broker_name,
                h.broker_addr,
                _version(h.version, addr),
                {str(path): data_version_from_json(v) for path, v in dict(files).items()},
            )
        )
    return out
