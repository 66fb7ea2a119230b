"""Headers of the ACL admin requests (codes 50-53), RocketMQ 4.x field names.

Owns: CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader,
UpdateGlobalWhiteAddrsConfigRequestHeader, GetBrokerAclConfigResponseHeader.

``topicPerms``, ``groupPerms`` and ``globalWhiteAddrs`` travel as
comma-separated lists (``topicA=PUB,topicB=SUB``). ``aclFileFullPath`` came
with 4.9's ACL file folders; older tools omit it.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.protocol.headers import ExtHeader


def split_list(text: str | None) -> list[str] | None:
    """``"a, b,,c"`` -> ["a", "b", "c"]; None stays None (not given)."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class CreateAccessConfigRequestHeader(ExtHeader):
    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteAccessConfigRequestHeader(ExtHeader):
    access_key: str


@dataclass(frozen=True, slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(ExtHeader):
    global_white_addrs: str
    acl_file_full_path: str | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerAclConfigResponseHeader(ExtHeader):
    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None
