"""The per-request access check, and the ``plain_acl.yml`` it reads, reloads and edits.

Owns: AccessValidator (RocketMQ's PlainAccessValidator + PlainPermissionManager
for one file): ``check(request, peer)`` answers None (go on) or the refusal
to send; ``read_if_changed`` / ``install`` reload the file when it changes;
the ``update_account`` / ``delete_account`` / ``update_global_white`` edits
rewrite it.

Order of a check (PlainPermissionManager.validate):

1. the client's address matches ``globalWhiteRemoteAddresses``: allowed;
2. no ``AccessKey`` field, or no account with it: refused;
3. the address matches the account's ``whiteRemoteAddress``: allowed;
4. the ``Signature`` does not match the account's secret: refused;
5. a send to RMQ_SYS_TRACE_TOPIC: allowed (message traces);
6. an admin request (``resources.ADMIN_CODES``) from a non-admin: refused;
7. each topic or group the request names: the account's perm for it, else
   its default topic or group perm, must allow what the request needs
   (an admin account listing no topicPerms or groupPerms passes).

A refusal is NO_PERMISSION (as RocketMQ 5.x answers; 4.x let the exception
become SYSTEM_ERROR) with a remark saying which rule refused. Refusals are
logged at most once per client address and reason every 10 s, with a count.

Files: the blocking methods (``read_if_changed``, the edits) are meant for a
worker thread; ``check`` and ``install`` run on the event loop. A file that
no longer parses is logged and ignored: the accounts loaded before stay in
force. Edits re-read the file, change it, move ``dataVersion`` on and write
it atomically with the old file's mode (it holds secrets).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from apogee._util.fileio import fsync_dir
from apogee.acl.address import Address as _Address
from apogee.acl.address import canonical
from apogee.acl.config import (
    EMPTY_TABLE,
    AccountUpdate,
    AclTable,
    Document,
    compile_document,
    dump_document,
    load_document,
    with_account,
    with_global_white,
    with_next_version,
    without_account,
)
from apogee.acl.permission import Perm, allows, perm_word
from apogee.acl.resources import ADMIN_CODES, needed_resources
from apogee.codes import ResponseCode
from apogee.errors import ConfigError, ProtocolError
from apogee.model.topic import RETRY_GROUP_TOPIC_PREFIX, TRACE_TOPIC
from apogee.protocol.command import RemotingCommand
from apogee.protocol.signing import ACCESS_KEY, signature_matches

log = logging.getLogger(__name__)

DEFAULT_PLAIN_ACL_FILE = "conf/plain_acl.yml"
ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"
_LOG_EVERY_S = 10.0
_LOG_KEYS_MAX = 10_000
_ADDRESS_CACHE_MAX = 10_000


def plain_acl_path(configured: str, home: str | None = None) -> Path:
    """Where the accounts are: ``configured`` if absolute, else under $ROCKETMQ_HOME.

    RocketMQ reads ``${ROCKETMQ_HOME}/${rocketmq.acl.plain.file}``, the file
    defaulting to ``conf/plain_acl.yml``.
    """
    name = configured or DEFAULT_PLAIN_ACL_FILE
    path = Path(name).expanduser()
    if path.is_absolute():
        return path
    home = home if home is not None else os.environ.get(ROCKETMQ_HOME_ENV)
    if not home:
        raise ConfigError(
            f"aclEnable=true: {name} is relative and ROCKETMQ_HOME is not set; "
            "set rocketmq.acl.plain.file to an absolute path or set ROCKETMQ_HOME"
        )
    return Path(home).expanduser() / path


@dataclass(frozen=True, slots=True)
class _Stamp:
    """What says a file changed: stat first (cheap), then the content digest."""

    mtime_ns: int
    size: int
    inode: int
    digest: bytes


def _stat(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino


def _shown(value: str, limit: int = 64) -> str:
    return value if len(value) <= limit else value[:limit] + "..."


class AccessValidator:
    """Checks requests against one ``plain_acl.yml``; construction loads it or raises."""

    def __init__(
        self,
        path: Path,
        *,
        admin_codes: frozenset[int] = ADMIN_CODES,
        clock: Callable[[], float] = time.monotonic,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.path = path
        self.admin_codes = admin_codes
        self._clock = clock
        self._now_ms = now_ms
        self.table: AclTable = EMPTY_TABLE
        self._stamp: _Stamp | None = None
        self._logged: dict[tuple[str, str], tuple[float, int]] = {}
        self._addresses: dict[str, _Address | None] = {}
        if not path.is_file():
            raise ConfigError(f"aclEnable=true but the ACL file {path} does not exist")
        table, self._stamp = self._load()
        self.install(table)

    # -- the check -------------------------------------------------------------------

    def check(self, request: RemotingCommand, peer: str) -> RemotingCommand | None:
        """None when ``request`` from ``peer`` ("host:port") may go on, else the refusal."""
        reason = self.refusal(request, peer)
        if reason is None:
            return None
        self._log_refusal(peer, request.code, reason)
        return request.make_response(ResponseCode.NO_PERMISSION, reason)

    def refusal(self, request: RemotingCommand, peer: str) -> str | None:
        """Why ``request`` is refused, or None."""
        table = self.table
        address = self._address(peer)
        for pattern in table.global_white:
            if pattern.matches(address):
                return None
        access_key = request.ext_fields.get(ACCESS_KEY)
        if not access_key:  # the C++ client without credentials sends an empty one
            return f"[ACL] request code {request.code} is not signed: no AccessKey"
        account = table.accounts.get(access_key)
        if account is None:
            return f"[ACL] no account has AccessKey {_shown(access_key)!r}"
        if account.white.matches(address):
            return None
        if not signature_matches(account.secret_key, request):
            return f"[ACL] check signature failed for AccessKey {access_key}"
        try:
            needed = needed_resources(request)
        except ProtocolError as exc:
            return f"[ACL] cannot tell what request code {request.code} touches: {exc}"
        if needed.get(TRACE_TOPIC) == Perm.PUB:
            return None
        if request.code in self.admin_codes and not account.admin:
            return (
                f"[ACL] request code {request.code} needs an admin account; "
                f"AccessKey {access_key} is not one"
            )
        owned_map = account.resources
        if owned_map is None and account.admin:
            return None
        for resource, need in needed.items():
            is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
            owned = owned_map.get(resource) if owned_map is not None else None
            if owned is None:
                owned = account.default_group_perm if is_group else account.default_topic_perm
            if not allows(need, owned):
                kind, name = (
                    ("group", resource[len(RETRY_GROUP_TOPIC_PREFIX) :])
                    if is_group
                    else ("topic", resource)
                )
                return (
                    f"[ACL] AccessKey {access_key} may not {perm_word(need)} {kind} "
                    f"{_shown(name)!r} (its permission there: {perm_word(owned)})"
                )
        return None

    def _address(self, peer: str) -> _Address | None:
        # Parsing an address costs more than the rest of a check: one parse per peer.
        try:
            return self._addresses[peer]
        except KeyError:
            pass
        if len(self._addresses) >= _ADDRESS_CACHE_MAX:
            self._addresses.clear()
        address = self._addresses[peer] = canonical(peer.rpartition(":")[0] or peer)
        return address

    def _log_refusal(self, peer: str, code: int, reason: str) -> None:
        host = peer.rpartition(":")[0] or peer
        key = (host, reason[:80])
        now = self._clock()
        last, suppressed = self._logged.get(key, (float("-inf"), 0))
        if now - last < _LOG_EVERY_S:
            self._logged[key] = (last, suppressed + 1)
            return
        if len(self._logged) >= _LOG_KEYS_MAX:
            self._logged.clear()
        self._logged[key] = (now, 0)
        more = f" (and {suppressed} more like it)" if suppressed else ""
        log.warning("refused request code %d from %s: %.200s%s", code, peer, reason, more)

    # -- the file ----------------------------------------------------------------------

    def _load(self) -> tuple[AclTable, _Stamp]:
        stat = _stat(self.path)
        raw = self.path.read_bytes()
        text = raw.decode("utf-8", "replace")
        table = compile_document(load_document(text, str(self.path)), str(self.path))
        return table, _Stamp(*stat, hashlib.sha256(raw).digest())

    def install(self, table: AclTable) -> None:
        self.table = table

    def read_if_changed(self) -> AclTable | None:
        """The file's new table if it changed since last read (blocking), else None.

        A file that is gone or no longer loads is logged once per change and
        leaves the table in force.
        """
        try:
            stat = _stat(self.path)
        except OSError as exc:
            if self._stamp is not None:
                log.error("ACL file %s cannot be read (%s); keeping the accounts loaded",
                          self.path, exc.strerror)  # fmt: skip
                self._stamp = None
            return None
        old = self._stamp
        if old is not None and (old.mtime_ns, old.size, old.inode) == stat:
            return None
        try:
            raw = self.path.read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(raw).digest()
        self._stamp = _Stamp(*stat, digest)
        if old is not None and old.digest == digest:
            return None
        try:
            table = compile_document(
                load_document(raw.decode("utf-8", "replace"), str(self.path)), str(self.path)
            )
        except ConfigError as exc:
            log.error("ACL file changed but is not valid, keeping the accounts loaded: %s", exc)
            return None
        log.info("ACL file %s reloaded: %d accounts, %d global white addresses",
                 self.path, len(table.accounts), len(table.global_white))  # fmt: skip
        return table

    def _edit(self, change: Callable[[Document], Document | None]) -> AclTable | None:
        source = str(self.path)
        doc = load_document(self.path.read_text("utf-8"), source)
        changed = change(doc)
        if changed is None:
            return None
        changed = with_next_version(changed, self._now_ms(), source)
        table = compile_document(changed, source)
        data = dump_document(changed).encode("utf-8")
        _write_keeping_mode(self.path, data)
        self._stamp = _Stamp(*_stat(self.path), hashlib.sha256(data).digest())
        return table

    def update_account(self, update: AccountUpdate) -> AclTable:
        """Create or update an account in the file (blocking); the new table."""
        table = self._edit(lambda doc: with_account(doc, update, str(self.path)))
        assert table is not None
        return table

    def delete_account(self, access_key: str) -> AclTable | None:
        """Remove an account from the file (blocking); None if it has none such."""
        return self._edit(lambda doc: without_account(doc, access_key, str(self.path)))

    def update_global_white(self, patterns: Sequence[str]) -> AclTable:
        table = self._edit(lambda doc: with_global_white(doc, patterns, str(self.path)))
        assert table is not None
        return table


def _write_keeping_mode(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically; the new file is never readable by more than the old."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o600
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, mode)  # an existing tmp file keeps its old mode otherwise
        f.write(data)
        f.flush()
        os.fsync(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
