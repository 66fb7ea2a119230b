"""How a consumer group shares a topic's queues: RocketMQ's allocation strategies.

Owns: the pure functions that give one client its queues from the group's
client ids and the topic's queues, with RocketMQ's results, so that Apogee
consumers and Java or C++ consumers in one group agree on who reads what.

Every strategy takes ``(consumer group, this client's id, all queues, all
client ids)`` and returns this client's queues. Like RocketMQ's rebalance,
which sorts both lists before it calls a strategy, each function sorts them
first (queues by topic, broker name, queue id; ids as text), so callers may
pass them in any order. A client id missing from the list gets nothing.

* averagely (``AVG``): the sorted queues cut into consecutive runs, one per
  client; with ``q`` queues and ``c`` clients the first ``q % c`` clients get
  one more. 10 queues over 4 clients: 0-2, 3-5, 6-7, 8-9.
* averagely by circle (``AVG_BY_CIRCLE``): queue ``i`` goes to client
  ``i % c``. 10 queues over 4 clients: {0,4,8}, {1,5,9}, {2,6}, {3,7}.
* consistent hash (``CONSISTENT_HASH``): each client stands on a hash ring
  ``virtual_nodes`` times (default 10), at ``hash(id + "-" + n)``; a queue
  belongs to the first point at or after ``hash(str(queue))`` (Java's
  ``MessageQueue.toString``), wrapping around. ``hash`` is the first four
  bytes of the MD5 digest of the UTF-8 text, big-endian, unsigned. When two
  points collide, the later client in sorted order keeps it (a Java TreeMap
  put). A client joining or leaving moves only the queues it takes or gave.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from apogee.model.client import MessageQueue

#: (consumer group, current client id, all queues, all client ids) -> this client's queues.
AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]

#: Points each client puts on the ring (RocketMQ's AllocateMessageQueueConsistentHash()).
DEFAULT_VIRTUAL_NODES = 10


def _check(
    current_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> tuple[list[MessageQueue], list[str]] | None:
    """The sorted inputs, or None when ``current_id`` is not in the group."""
    if not current_id:
        raise ValueError("the current client id is empty")
    if not queues:
        raise ValueError("there are no message queues to allocate")
    if not client_ids:
        raise ValueError("the consumer group has no client ids")
    if current_id not in client_ids:
        return None
    return sorted(queues), sorted(client_ids)


def allocate_averagely(
    group: str, current_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> list[MessageQueue]:
    """Consecutive runs of queues, one run per client (see the module docstring)."""
    checked = _check(current_id, queues, client_ids)
    if checked is None:
        return []
    mqs, cids = checked
    index = cids.index(current_id)
    size, clients = len(mqs), len(cids)
    mod = size % clients
    if size <= clients:
        average = 1
    elif mod > 0 and index < mod:
        average = size // clients + 1
    else:
        average = size // clients
    start = index * average if mod > 0 and index < mod else index * average + mod
    return [mqs[(start + i) % size] for i in range(min(average, size - start))]


def allocate_averagely_by_circle(
    group: str, current_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> list[MessageQueue]:
    """Queue ``i`` to client ``i % clients`` (see the module docstring)."""
    checked = _check(current_id, queues, client_ids)
    if checked is None:
        return []
    mqs, cids = checked
    return mqs[cids.index(current_id) :: len(cids)]


def ring_hash(key: str) -> int:
    """The ring position of ``key``: its MD5 digest's first 4 bytes, unsigned."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def allocate_consistent_hash(
    group: str,
    current_id: str,
    queues: Sequence[MessageQueue],
    client_ids: Sequence[str],
    *,
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
) -> list[MessageQueue]:
    """The queues whose ring position falls to this client (see the module docstring)."""
    if virtual_nodes < 0:
        raise ValueError(f"virtual_nodes must be >= 0, got {virtual_nodes}")
    checked = _check(current_id, queues, client_ids)
    if checked is None:
        return []
    mqs, cids = checked
    ring: dict[int, str] = {}
    for cid in cids:
        for n in range(virtual_nodes):
            ring[ring_hash(f"{cid}-{n}")] = cid
    if not ring:
        return []
    points = sorted(ring)
    mine: list[MessageQueue] = []
    for mq in mqs:
        at = bisect.bisect_left(points, ring_hash(str(mq)))
        if ring[points[at % len(points)]] == current_id:
            mine.append(mq)
    return mine


#: The strategies by the names RocketMQ gives them (``getName()``).
STRATEGIES: dict[str, AllocateStrategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}
