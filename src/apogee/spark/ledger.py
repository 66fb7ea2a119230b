"""The exactly-once sink's ledger: which task outputs of which batch were committed.

Owns: the ledger topic, ``Ledger`` (write one entry, look one up) and
``decide``, the answer to the broker's check of a half message.

An entry is one message on the ledger topic, KEYS ``<sink id>:<batch id>``,
body JSON ``{"sink": ..., "batch": ..., "tokens": [...]}``: the write tokens
(one per task attempt whose output Spark committed) of that batch. Writing
it, acknowledged by the broker, is the commit point of a batch: after it the
batch's half messages are committed, before it none is.

* A batch id that already has an entry is a replay (the driver died after
  the commit point, before Spark wrote its own commit log): its new half
  messages are rolled back, so the batch is delivered once.
* A check of a half message is answered from the entry of its batch:
  COMMIT when its token is listed, ROLLBACK when it is not (a failed task
  attempt, or a run of the batch that died before its commit point), and
  UNKNOW when the batch has no entry yet (the broker asks again later; after
  ``transactionCheckMax`` asks it drops the half message, which is a
  rollback).

Entries are found through the broker's key index, so any process can answer
a check: the executors that sent the half messages, or a restarted driver.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from apogee.client.transaction import LocalTransactionState
from apogee.model.message import PROPERTY_KEYS, Message, MessageExt
from apogee.spark._io import Cluster

log = logging.getLogger(__name__)

LEDGER_TOPIC = "APOGEE_SPARK_SINK_LEDGER"
#: Property every half message of the exactly-once sink carries: sink id, batch id, token.
TXN_PROPERTY = "APOGEE_SPARK_TXN"


@dataclass(frozen=True, slots=True)
class TxnTag:
    sink_id: str
    batch_id: int
    token: str

    def text(self) -> str:
        return f"{self.sink_id}/{self.batch_id}/{self.token}"

    @classmethod
    def parse(cls, text: str) -> TxnTag | None:
        parts = text.split("/")
        if len(parts) != 3 or not parts[1].lstrip("-").isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])


def _key(sink_id: str, batch_id: int) -> str:
    return f"{sink_id}:{batch_id}"


class Ledger:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def lookup(self, sink_id: str, batch_id: int) -> list[str] | None:
        """The committed tokens of the batch; None when it has no entry."""
        found = self.cluster.lookup_key(LEDGER_TOPIC, _key(sink_id, batch_id))
        return _tokens(found, sink_id, batch_id)

    async def lookup_async(self, sink_id: str, batch_id: int) -> list[str] | None:
        found = await self.cluster.lookup_key_async(LEDGER_TOPIC, _key(sink_id, batch_id))
        return _tokens(found, sink_id, batch_id)

    def write(self, sink_id: str, batch_id: int, tokens: Sequence[str]) -> None:
        """Record the batch as committed with ``tokens``; returns once the broker stored it."""
        queues = self.cluster.ensure_topic(LEDGER_TOPIC)
        body = orjson.dumps({"sink": sink_id, "batch": batch_id, "tokens": sorted(tokens)})
        msg = Message(LEDGER_TOPIC, body, properties={PROPERTY_KEYS: _key(sink_id, batch_id)})
        self.cluster.send_batch(queues[0], [msg], "APOGEE_SPARK_LEDGER").result(60)


def _tokens(found: list[MessageExt], sink_id: str, batch_id: int) -> list[str] | None:
    entries = []
    for m in found:
        try:
            entry = orjson.loads(m.body)
        except orjson.JSONDecodeError:
            continue
        if entry.get("sink") == sink_id and entry.get("batch") == batch_id:
            entries.append((m.queue_offset, entry))
    if not entries:
        return None
    # one entry per batch is written; should a second appear, the first one counts
    return [str(t) for t in min(entries, key=lambda e: e[0])[1].get("tokens", [])]


async def decide(cluster: Cluster, msg: MessageExt) -> LocalTransactionState:
    """The state of a half message the broker asks about, from the ledger."""
    tag = TxnTag.parse(msg.properties.get(TXN_PROPERTY, ""))
    if tag is None:
        log.warning("half message %s carries no %s; leaving it open", msg.uniq_key, TXN_PROPERTY)
        return LocalTransactionState.UNKNOW
    tokens = await Ledger(cluster).lookup_async(tag.sink_id, tag.batch_id)
    if tokens is None:
        return LocalTransactionState.UNKNOW
    if tag.token in tokens:
        return LocalTransactionState.COMMIT_MESSAGE
    return LocalTransactionState.ROLLBACK_MESSAGE
