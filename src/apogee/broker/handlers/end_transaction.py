"""END_TRANSACTION: a producer commits or rolls back a half message.

Owns: RocketMQ EndTransactionProcessor's checks and actions.

Java producers send it oneway; a request that asks for an answer gets one.
In order:

* a slave answers SLAVE_NOT_AVAILABLE;
* commitOrRollback NOT_TYPE (0, the producer does not know yet) changes
  nothing (SUCCESS); a value other than 0, 8 or 12 is SYSTEM_ERROR;
* the half record at commitLogOffset must exist, be a half message, and have
  the header's producerGroup (PGROUP), queue offset (tranStateTableOffset)
  and commit-log offset, else SYSTEM_ERROR naming what does not match, and
  nothing is stored;
* a transaction already resolved (by any copy of it: see ``transaction``)
  is left alone and answered SUCCESS, so a second commit delivers nothing;
* commit: the message is appended to REAL_TOPIC / REAL_QID (a store refusal
  is answered with its code and nothing more happens, so the producer or
  the check can try again); then, for commit and rollback, the op record is
  written and the transaction is resolved.

Two ways through, one outcome. The common END_TRANSACTION (COMMIT or
ROLLBACK, a plain header, a half record in canonical form that passes every
check) is handled in place: the header read without a header object, the
half record read where it lies in the commit log (``record_facts``), and the
committed record copied from it with the new topic, queue and properties
(``MessageStore.put_derived``), with no MessageExt or StoreMessage made for
it. Anything else (a refusal to explain, NOT_TYPE, an odd header or record)
takes the general way, which decodes everything and says what is wrong; the
quick way decides to leave before it changes anything. A batch half (one
transaction for a whole batch, an Apogee extension) also takes the general
way: its commit is one batch append of all its messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from apogee._util.clock import Clock
from apogee.broker.transaction import (
    COMMIT_DROPS,
    HALF_FACTS,
    committed_batch,
    committed_message,
    destination,
    end_problem,
    is_batch_half,
    lineage,
    lineage_of,
    op_record,
)
from apogee.broker.transaction_book import TransactionBook
from apogee.codes import ResponseCode
from apogee.errors import ProtocolError
from apogee.model.kernels import record_facts
from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    HostPort,
    MessageExt,
)
from apogee.model.topic import TRANS_HALF_TOPIC
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import INT64_MAX, INT64_MIN, EndTransactionRequestHeader
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore
from apogee.store.results import PutResult, PutStatus

log = logging.getLogger(__name__)

_COMMIT = TRANSACTION_COMMIT_TYPE
_ROLLBACK = TRANSACTION_ROLLBACK_TYPE
#: fromTransactionCheck values the quick way takes; others go the general way
_PLAIN_BOOLS = frozenset(("", "true", "false"))
_INT32_MAX = 2**31 - 1

_REFUSED_PUT_CODES = {
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class EndTransactionSettings:
    store_host: HostPort
    is_slave: bool = False


class EndTransactionHandler:
    def __init__(
        self,
        store: MessageStore,
        book: TransactionBook,
        settings: EndTransactionSettings,
        *,
        clock: Clock,
        on_stored: Callable[[], None],
    ) -> None:
        self._store = store
        self._book = book
        self._settings = settings
        self._clock = clock
        self._on_stored = on_stored
        self.committed = 0
        self.rolled_back = 0

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self._settings.is_slave:
            return request.make_response(
                ResponseCode.SLAVE_NOT_AVAILABLE, "a slave broker does not end transactions"
            )
        ext = request.ext_fields
        # The header, read as EndTransactionRequestHeader.from_ext would, for
        # the plain case only: whatever it would refuse goes the general way.
        try:
            group = ext["producerGroup"]
            queue_offset = int(ext["tranStateTableOffset"])
            offset = int(ext["commitLogOffset"])
            kind = int(ext["commitOrRollback"])
        except (KeyError, ValueError, TypeError):
            return self._handle(ctx, request)
        if (
            kind in (_COMMIT, _ROLLBACK)
            and 0 <= offset <= INT64_MAX
            and INT64_MIN <= queue_offset <= INT64_MAX
            and "msgId" in ext
            and ext.get("fromTransactionCheck", "") in _PLAIN_BOOLS
        ):
            answer = self._end_in_place(request, group, queue_offset, offset, kind)
            if answer is not _Way.GENERAL:
                return answer
        return self._handle(ctx, request)

    def _end_in_place(
        self, request: RemotingCommand, group: str, queue_offset: int, offset: int, kind: int
    ) -> RemotingCommand | _Way | None:
        """The quick way (see the module docstring); ``_Way.GENERAL`` to take the other."""
        store = self._store
        view = store.read_message(offset)
        if view is None:
            return _Way.GENERAL
        try:
            facts = record_facts(view, HALF_FACTS, COMMIT_DROPS)
            if facts is None:
                return _Way.GENERAL
            topic, half_queue, half_offset, at, values, kept = facts
            half_group, real_topic, real_queue, lineage_text, batch_count = values
            if (
                batch_count is not None  # a batch half: committed as a batch, there
                or at != offset
                or half_offset != queue_offset
                or topic != TRANS_HALF_TOPIC
                or half_group != group
                or not real_topic
                or not real_queue
                or not real_queue.isdigit()
                or not real_queue.isascii()  # int() of other digits may fail: said there
                or int(real_queue) > _INT32_MAX  # refused there by the store, with the reason
            ):
                return _Way.GENERAL  # refused there, with the reason
            family = lineage_of(lineage_text, half_offset)
            if not self._book.is_open(family):
                log.info("transaction %s (lineage %d) is already resolved",
                         request.ext_fields.get("msgId"), family)  # fmt: skip
                return None if request.is_oneway else request.make_response()
            if kind == _COMMIT:
                result = store.put_derived(view, real_topic, int(real_queue), _COMMIT, at, kept)
                if not result.status.is_stored:
                    return _refusal(request, result)
                self._on_stored()
                self.committed += 1
            else:
                self.rolled_back += 1
        finally:
            view.release()
        self._resolve(half_queue, half_offset, family, request.ext_fields.get("msgId"))
        return None if request.is_oneway else request.make_response()

    def _handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """The general way: the header and the half message decoded in full."""
        header = EndTransactionRequestHeader.from_ext(request.ext_fields)
        kind = header.commit_or_rollback
        if kind == TRANSACTION_NOT_TYPE:
            log.info("producer %s does not know the state of %s yet%s", ctx.peer, header.msg_id,
                     " (answering a check)" if header.from_transaction_check else "")  # fmt: skip
            return request.make_response()
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"commitOrRollback must be 0, 8 or 12, not {kind}"
            )
        offset = header.commit_log_offset
        half = self._store.look_message(offset) if offset >= 0 else None
        problem = end_problem(half, header)
        if problem is not None:
            log.warning("END_TRANSACTION from %s refused: %s", ctx.peer, problem)
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        assert half is not None
        family = lineage(half)
        if not self._book.is_open(family):
            log.info("transaction %s (lineage %d) is already resolved", header.msg_id, family)
            return request.make_response()
        if kind == TRANSACTION_COMMIT_TYPE:
            refusal = self._commit(request, half)
            if refusal is not None:
                return refusal
        else:
            self.rolled_back += 1
        self._resolve(half.queue_id, half.queue_offset, family, half.uniq_key)
        return request.make_response()

    def _commit(self, request: RemotingCommand, half: MessageExt) -> RemotingCommand | None:
        target = destination(half)
        assert target is not None  # end_problem checked it
        if is_batch_half(half):
            try:
                batch = committed_batch(half, *target)
            except ProtocolError as exc:  # checked when it was sent: a damaged record
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"the half message's batch body is unreadable: {exc}"
                )
            result = self._store.put_batch(batch)
        else:
            result = self._store.put(committed_message(half, *target))
        if not result.status.is_stored:
            return _refusal(request, result)
        self._on_stored()
        self.committed += 1
        return None

    def _resolve(self, half_queue: int, half_offset: int, family: int, name: str | None) -> None:
        """Write the op record of the half copy at ``half_offset``; resolve ``family``."""
        op = self._store.put(
            op_record(half_queue, half_offset, self._settings.store_host, self._clock.now_ms())
        )
        if op.status.is_stored:
            self._on_stored()
            self._book.resolve(family, op.queue_offset)
        else:
            log.error("transaction %s resolved, but its op record was refused: %s",
                      name, op.status.value)  # fmt: skip
            self._book.resolve(family)


class _Way(Enum):
    """What ``_end_in_place`` returns to send a request the general way."""

    GENERAL = "general"


def _refusal(request: RemotingCommand, result: PutResult) -> RemotingCommand:
    """The answer to a commit whose message the store refused."""
    code = _REFUSED_PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
    remark = f"{result.status.value}: {result.reason}" if result.reason else result.status.value
    return request.make_response(code, remark)
