"""The ``plain_acl.yml`` document: parsed, checked, compiled, and edited by the admin requests.

Owns: AclTable (the compiled accounts and global white list a check reads),
``compile_document`` (document -> table, every error naming the account and
key), and the edits UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG and
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG make to the document.

The file (RocketMQ's distribution/conf/plain_acl.yml; keys AclConstants)::

    globalWhiteRemoteAddresses: [ "10.10.103.*" ]   # these skip every check
    accounts:
      - accessKey: RocketMQ          # longer than 6 characters
        secretKey: 12345678          # longer than 6 characters
        whiteRemoteAddress: ""       # these addresses skip this account's checks
        admin: false                 # admin requests only for admin accounts
        defaultTopicPerm: DENY       # for topics not in topicPerms (missing: DENY)
        defaultGroupPerm: SUB        # for groups not in groupPerms (missing: DENY)
        topicPerms: [ "topicA=DENY", "topicB=PUB|SUB" ]
        groupPerms: [ "groupA=DENY", "groupB=SUB" ]
    dataVersion: [ { counter: 1, timestamp: 1700000000000 } ]   # kept by the admin edits

A group's permission is stored under its retry topic (``%RETRY%groupA``),
which is how every request names the group it acts for. Unknown keys, a
bad permission word, a short key, a duplicate account or a bad address
pattern are errors (RocketMQ reads a bad word as DENY and drops duplicates
with a log line); edits keep keys they do not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apogee.acl.address import AddressPattern
from apogee.acl.permission import Perm, parse_perm, parse_resource_perms
from apogee.errors import ConfigError
from apogee.model.route import DataVersion
from apogee.model.topic import retry_topic

KEY_MIN_LENGTH = 6  # AclConstants: keys must be *longer* than this

GLOBAL_WHITE = "globalWhiteRemoteAddresses"
ACCOUNTS = "accounts"
DATA_VERSION = "dataVersion"
ACCOUNT_KEYS = (
    "accessKey",
    "secretKey",
    "whiteRemoteAddress",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
)
_TOP_KEYS = frozenset({GLOBAL_WHITE, ACCOUNTS, DATA_VERSION})

Document = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str
    white: AddressPattern
    admin: bool
    default_topic_perm: Perm
    default_group_perm: Perm
    #: topic or ``%RETRY%group`` -> perm; None when the file lists neither
    #: topicPerms nor groupPerms (an admin account then passes every resource)
    resources: Mapping[str, Perm] | None


@dataclass(frozen=True, slots=True)
class AclTable:
    global_white: tuple[AddressPattern, ...]
    accounts: Mapping[str, Account]
    version: DataVersion


EMPTY_TABLE = AclTable((), {}, DataVersion())


def load_document(text: str, source: str) -> Document:
    """The YAML mapping of ``text``; an empty file is an empty document."""
    import yaml  # noqa: PLC0415 - a broker without ACL never needs it (30 ms to import)

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, not {type(doc).__name__}")
    return doc


def dump_document(doc: Document) -> str:
    import yaml  # noqa: PLC0415 - as in load_document

    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _text(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{what} must be text, got {value!r}")
    return str(value)


def _flag(value: object, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{what} must be true or false, got {value!r}")


def check_key(value: object, what: str) -> str:
    text = _text(value, what) if value is not None else ""
    if len(text) <= KEY_MIN_LENGTH:
        raise ConfigError(f"{what} must be longer than {KEY_MIN_LENGTH} characters")
    return text


def compile_account(raw: object, where: str) -> Account:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping, got {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in ACCOUNT_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
    access_key = check_key(raw.get("accessKey"), f"{where} accessKey")
    where = f"account {access_key}"
    secret_key = check_key(raw.get("secretKey"), f"{where} secretKey")
    white_raw = raw.get("whiteRemoteAddress")
    white = AddressPattern.parse(None if white_raw is None else _text(white_raw, where))
    topics = parse_resource_perms(raw.get("topicPerms"), what=f"{where} topicPerms")
    groups = parse_resource_perms(raw.get("groupPerms"), what=f"{where} groupPerms")
    resources: dict[str, Perm] | None = None
    if topics or groups:
        resources = {retry_topic(group): perm for group, perm in groups.items()}
        resources.update(topics)
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white=white,
        admin=_flag(raw.get("admin", False), f"{where} admin"),
        default_topic_perm=parse_perm(
            _opt_text(raw.get("defaultTopicPerm"), where), what=f"{where} defaultTopicPerm"
        ),
        default_group_perm=parse_perm(
            _opt_text(raw.get("defaultGroupPerm"), where), what=f"{where} defaultGroupPerm"
        ),
        resources=resources,
    )


def _opt_text(value: object, where: str) -> str | None:
    return None if value is None or value == "" else _text(value, where)


def _list(doc: Document, key: str, source: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {key} must be a list, got {value!r}")
    return value


def _version(doc: Document, source: str) -> DataVersion:
    entries = _list(doc, DATA_VERSION, source)
    if not entries:
        return DataVersion()
    first = entries[0]
    try:
        return DataVersion(timestamp=int(first["timestamp"]), counter=int(first["counter"]))
    except (TypeError, KeyError, ValueError):
        raise ConfigError(
            f"{source}: {DATA_VERSION} must be [{{counter: N, timestamp: T}}]"
        ) from None


def compile_document(doc: Document, source: str) -> AclTable:
    unknown = sorted(str(k) for k in doc if k not in _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}")
    white = tuple(
        AddressPattern.parse(_text(p, f"{source} {GLOBAL_WHITE}"))
        for p in _list(doc, GLOBAL_WHITE, source)
    )
    accounts: dict[str, Account] = {}
    for index, raw in enumerate(_list(doc, ACCOUNTS, source)):
        account = compile_account(raw, f"{source}: account #{index + 1}")
        if account.access_key in accounts:
            raise ConfigError(f"{source}: account {account.access_key} is listed twice")
        accounts[account.access_key] = account
    return AclTable(white, accounts, _version(doc, source))


# -- edits (the ACL admin requests) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccountUpdate:
    """UPDATE_AND_CREATE_ACL_CONFIG: None leaves a key as it is (or absent, for a new one)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: Sequence[str] | None = None
    group_perms: Sequence[str] | None = None

    def apply(self, account: dict[str, Any]) -> dict[str, Any]:
        """``account`` (a document entry) with this update's keys set."""
        out = dict(account)
        out["accessKey"] = self.access_key
        if self.secret_key:
            out["secretKey"] = self.secret_key
        if self.white_remote_address is not None:
            out["whiteRemoteAddress"] = self.white_remote_address
        out["admin"] = self.admin  # always written, as RocketMQ does
        if self.default_topic_perm:
            out["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm:
            out["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms is not None:
            out["topicPerms"] = list(self.topic_perms)
        if self.group_perms is not None:
            out["groupPerms"] = list(self.group_perms)
        return out


def with_account(doc: Document, update: AccountUpdate, source: str) -> Document:
    """``doc`` with the account created or updated; ConfigError if the result is invalid."""
    accounts = list(_list(doc, ACCOUNTS, source))
    for i, entry in enumerate(accounts):
        if isinstance(entry, dict) and str(entry.get("accessKey")) == update.access_key:
            accounts[i] = update.apply(entry)
            break
    else:
        accounts.append(update.apply({}))
    out = {**doc, ACCOUNTS: accounts}
    compile_document(out, source)  # the whole file must stay loadable
    return out


def without_account(doc: Document, access_key: str, source: str) -> Document | None:
    """``doc`` without the account, or None if it has no such account."""
    accounts = _list(doc, ACCOUNTS, source)
    kept = [a for a in accounts if not (isinstance(a, dict) and a.get("accessKey") == access_key)]
    if len(kept) == len(accounts):
        return None
    return {**doc, ACCOUNTS: kept}


def with_global_white(doc: Document, patterns: Sequence[str], source: str) -> Document:
    for pattern in patterns:
        AddressPattern.parse(pattern)  # refuse a bad pattern before it is written
    return {**doc, GLOBAL_WHITE: list(patterns)}


def with_next_version(doc: Document, now_ms: int, source: str) -> Document:
    """The document with its dataVersion moved on (every admin edit does this)."""
    version = _version(doc, source).next(now_ms)
    return {**doc, DATA_VERSION: [{"counter": version.counter, "timestamp": version.timestamp}]}
