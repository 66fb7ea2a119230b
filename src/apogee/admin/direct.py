"""Handing one stored message to one live consumer (CONSUME_MESSAGE_DIRECTLY).

Owns: :func:`consume_message_directly` (mqadmin ``queryMsgById -g -d``,
DefaultMQAdminExt.consumeMessageDirectly) and :func:`redeliver`, the
dashboard's resend.

The request goes to the broker that stored the message, with its offset
msgId; the broker forwards it with the stored record to the consumer's
connection, and the consumer's answer (ConsumeMessageDirectlyResult) comes
back: whether the listener succeeded, asked for later or raised, and how
long it took. Nothing is stored again and no offset moves.

``redeliver`` asks the group's online consumers one by one, as RocketMQ's
Dashboard does, and stops at the first that answers. C++ consumers are
passed over: the official C++ client registers the request code but never
answers it. When no consumer answers, a copy goes to the group's retry
topic instead (``operations.resend``), so every consumer of the group can
get it later, and the outcome says which way it went.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient, host_port_addr
from apogee.codes import LanguageCode, RequestCode
from apogee.errors import ApogeeError, BrokerResponseError, ClientError
from apogee.model.message import MessageExt
from apogee.protocol import headers as h
from apogee.protocol import tolerant_json

#: how long one consumer may take (the broker gives it 5 s; this leaves room for the trip)
DIRECT_TIMEOUT_S = 8.0


@dataclass(frozen=True, slots=True)
class DirectResult:
    """A consumer's answer (ConsumeMessageDirectlyResult)."""

    client_id: str
    consume_result: str  # CR_SUCCESS, CR_LATER, CR_THROW_EXCEPTION, CR_RETURN_NULL, ...
    remark: str | None
    spent_ms: int
    order: bool
    auto_commit: bool

    @property
    def ok(self) -> bool:
        return self.consume_result == "CR_SUCCESS"

    def to_json(self) -> dict[str, object]:
        return {
            "clientId": self.client_id,
            "consumeResult": self.consume_result,
            "remark": self.remark,
            "spentTimeMills": self.spent_ms,
            "order": self.order,
            "autoCommit": self.auto_commit,
        }


async def consume_message_directly(
    admin: AdminClient, group: str, client_id: str, msg: MessageExt
) -> DirectResult:
    """Have consumer ``client_id`` of ``group`` consume ``msg`` once (see the module)."""
    header = h.ConsumeMessageDirectlyResultRequestHeader(
        group, client_id, msg.msg_id, topic=msg.topic
    )
    addr = host_port_addr(*msg.store_host)
    response = await admin.call(
        addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, timeout_s=DIRECT_TIMEOUT_S
    )
    doc = tolerant_json.loads(response.body_bytes() or b"{}")
    if not isinstance(doc, dict):
        raise ClientError(f"consumer {client_id} answered {doc!r}, not a consume result")
    remark = doc.get("remark")
    return DirectResult(
        client_id,
        str(doc.get("consumeResult")),
        None if remark is None else str(remark),
        int(doc.get("spentTimeMills") or 0),
        bool(doc.get("order", False)),
        bool(doc.get("autoCommit", True)),
    )


@dataclass(frozen=True, slots=True)
class Redelivery:
    """What ``redeliver`` did: a consumer's answer, or the retry-topic copy's id."""

    direct: DirectResult | None
    retry_msg_id: str | None
    passed_over: tuple[str, ...]  # consumers asked in vain, each with why

    def describe(self, group: str) -> str:
        if self.direct is not None:
            d = self.direct
            text = f"consumed directly by {d.client_id} of {group}: {d.consume_result}"
            return text + (f" ({d.remark})" if d.remark else "") + f", {d.spent_ms} ms"
        why = "; ".join(self.passed_over) or "no consumer online"
        return (
            f"no consumer of {group} took it directly ({why}); "
            f"copy sent to its retry topic, offsetMsgId {self.retry_msg_id}"
        )


async def redeliver(admin: AdminClient, msg: MessageExt, group: str) -> Redelivery:
    """The dashboard's resend: to one online consumer directly, else through the retry topic."""
    passed: list[str] = []
    try:
        online = (await ops.consumer_connection(admin, group)).connections
    except (ClientError, BrokerResponseError):
        online = ()
    for conn in online:
        if conn.language is LanguageCode.CPP:
            passed.append(f"{conn.client_id} is a C++ client, which does not consume directly")
            continue
        try:
            return Redelivery(
                await consume_message_directly(admin, group, conn.client_id, msg), None, ()
            )
        except ApogeeError as exc:
            passed.append(f"{conn.client_id}: {exc}")
    sent = await ops.resend(admin, msg, group)
    return Redelivery(None, sent.offset_msg_id, tuple(passed))
