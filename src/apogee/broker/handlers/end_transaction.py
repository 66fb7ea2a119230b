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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from apogee._util.clock import Clock
from apogee.broker.transaction import (
    committed_message,
    destination,
    end_problem,
    lineage,
    op_message,
)
from apogee.broker.transaction_book import TransactionBook
from apogee.codes import ResponseCode
from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    HostPort,
    MessageExt,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import EndTransactionRequestHeader
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore
from apogee.store.results import PutStatus

log = logging.getLogger(__name__)

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

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self._settings.is_slave:
            return request.make_response(
                ResponseCode.SLAVE_NOT_AVAILABLE, "a slave broker does not end transactions"
            )
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
        self._resolve(half, family)
        return request.make_response()

    def _commit(self, request: RemotingCommand, half: MessageExt) -> RemotingCommand | None:
        target = destination(half)
        assert target is not None  # end_problem checked it
        result = self._store.put(committed_message(half, *target))
        if not result.status.is_stored:
            code = _REFUSED_PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
            remark = (
                f"{result.status.value}: {result.reason}" if result.reason else result.status.value
            )
            return request.make_response(code, remark)
        self._on_stored()
        self.committed += 1
        return None

    def _resolve(self, half: MessageExt, family: int) -> None:
        op = self._store.put(op_message(half, self._settings.store_host, self._clock.now_ms()))
        if op.status.is_stored:
            self._on_stored()
            self._book.resolve(family, op.queue_offset)
        else:
            log.error("transaction %s resolved, but its op record was refused: %s",
                      half.uniq_key, op.status.value)  # fmt: skip
            self._book.resolve(family)
