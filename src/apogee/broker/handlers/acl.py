"""The ACL admin requests: UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

Owns: RocketMQ AdminBrokerProcessor's rules for these, and the reload timer
of the broker's ``plain_acl.yml``.

* Each edit rewrites ``plain_acl.yml`` (in a worker thread, one edit at a
  time) and is in force for the next request; an edit the file would not
  load with (a short key, a bad permission word, a bad address pattern) is
  refused with the reason and changes nothing: 209, 210 and 211 are the
  failure codes of 50, 51 and 53. Deleting an account that does not exist
  answers 210.
* 53 changes ``globalWhiteRemoteAddresses`` of this broker's one ACL file;
  an ``aclFileFullPath`` naming another file is refused (RocketMQ 4.9 also
  reads a ``conf/acl/`` folder of files; Apogee keeps one file).
* 52 answers the file's dataVersion, the version of each file by path,
  and the broker's name, address and cluster.
* With ``aclEnable=false`` each answers its failure code (52: SYSTEM_ERROR)
  saying access control is off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from apogee._util.periodic import PeriodicTask
from apogee.acl.config import AccountUpdate, AclTable
from apogee.acl.validator import AccessValidator
from apogee.codes import ResponseCode
from apogee.errors import ConfigError
from apogee.protocol.acl_headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    split_list,
)
from apogee.protocol.bodies import data_version_to_json
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import RequestContext

log = logging.getLogger(__name__)

ACL_RELOAD_INTERVAL_S = 1.0  # a stat per second; RocketMQ hashes the file every 5 s
_OFF = "access control is off on this broker (aclEnable=false)"


def acl_reload_task(validator: AccessValidator) -> PeriodicTask:
    """Reloads ``plain_acl.yml`` soon after it changes on disk."""

    async def reload() -> None:
        table = await asyncio.to_thread(validator.read_if_changed)
        if table is not None:
            validator.install(table)

    return PeriodicTask("acl-reload", ACL_RELOAD_INTERVAL_S, reload)


@dataclass(frozen=True, slots=True)
class BrokerIdentityText:
    cluster_name: str
    broker_name: str
    broker_addr: str


class AclAdminHandlers:
    def __init__(self, validator: AccessValidator | None, identity: BrokerIdentityText) -> None:
        self.validator = validator
        self.identity = identity
        self._edits = asyncio.Lock()

    async def _edit(
        self,
        request: RemotingCommand,
        failed: int,
        action: str,
        edit: Callable[[AccessValidator], AclTable | None],
    ) -> RemotingCommand:
        validator = self.validator
        if validator is None:
            return request.make_response(failed, _OFF)
        async with self._edits:
            try:
                table = await asyncio.to_thread(edit, validator)
            except (ConfigError, OSError) as exc:
                log.warning("%s refused: %s", action, exc)
                return request.make_response(failed, f"{action} refused: {exc}")
        if table is None:
            return request.make_response(failed, f"{action} refused: no such account")
        validator.install(table)
        log.info("%s done; ACL dataVersion now %d", action, table.version.counter)
        return request.make_response()

    async def update(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = CreateAccessConfigRequestHeader.from_ext(request.ext_fields)
        update = AccountUpdate(
            access_key=h.access_key,
            secret_key=h.secret_key,
            white_remote_address=h.white_remote_address,
            admin=h.admin,
            default_topic_perm=h.default_topic_perm,
            default_group_perm=h.default_group_perm,
            topic_perms=split_list(h.topic_perms),
            group_perms=split_list(h.group_perms),
        )
        return await self._edit(
            request,
            ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            f"updating account {h.access_key}",
            lambda v: v.update_account(update),
        )

    async def delete(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = DeleteAccessConfigRequestHeader.from_ext(request.ext_fields)
        return await self._edit(
            request,
            ResponseCode.DELETE_ACL_CONFIG_FAILED,
            f"deleting account {h.access_key}",
            lambda v: v.delete_account(h.access_key),
        )

    async def update_global_white(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        h = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext(request.ext_fields)
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        validator = self.validator
        path = h.acl_file_full_path
        if validator is not None and path and Path(path).expanduser() != validator.path:
            remark = f"this broker keeps its accounts in {validator.path} only"
            return request.make_response(failed, remark)
        patterns = split_list(h.global_white_addrs) or []
        return await self._edit(
            request,
            failed,
            "updating globalWhiteRemoteAddresses",
            lambda v: v.update_global_white(patterns),
        )

    def versions(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        validator = self.validator
        if validator is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        version = data_version_to_json(validator.table.version)
        ident = self.identity
        header = GetBrokerAclConfigResponseHeader(
            version=orjson.dumps(version).decode(),
            broker_name=ident.broker_name,
            broker_addr=ident.broker_addr,
            cluster_name=ident.cluster_name,
            all_acl_file_version=orjson.dumps({str(validator.path): version}).decode(),
        )
        return request.make_response(ext_fields=header.to_ext())
