"""Offset arithmetic of the source: checkpoint form, admission control, splitting.

Owns: the conversion between flat per-queue offsets and the nested dict
Spark writes into its checkpoint (topic -> broker name -> queue id, queue ids
as strings because the checkpoint is JSON), ``apportion`` (a row budget
split across queues by backlog), ``split_ranges`` (``minPartitions``) and
``lag`` (offsets behind latest). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apogee.spark.options import FlatOffsets

Nested = dict[str, dict[str, dict[str, int]]]


def nest(flat: Mapping[tuple[str, str, int], int]) -> Nested:
    out: Nested = {}
    for (topic, broker, qid), offset in sorted(flat.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = int(offset)
    return out


def flatten(nested: Mapping[str, Mapping[str, Mapping[str, int]]]) -> FlatOffsets:
    return {
        (topic, broker, int(qid)): int(offset)
        for topic, brokers in nested.items()
        for broker, queues in brokers.items()
        for qid, offset in queues.items()
    }


def apportion(start: FlatOffsets, latest: FlatOffsets, budget: int) -> FlatOffsets:
    """End offsets that admit at most ``budget`` messages in all, shared by backlog.

    Each queue gets the floor of its proportional share; the units left over
    go to the queues with the largest remainders (then the largest backlogs),
    so the total is exactly ``min(budget, total backlog)`` and never above.
    """
    backlog = {q: max(latest[q] - start.get(q, latest[q]), 0) for q in latest}
    total = sum(backlog.values())
    if total <= budget:
        return dict(latest)
    shares: dict[tuple[str, str, int], int] = {}
    remainders: list[tuple[float, int, tuple[str, str, int]]] = []
    for q, size in backlog.items():
        exact = budget * size / total
        shares[q] = int(exact)
        remainders.append((exact - int(exact), size, q))
    left = budget - sum(shares.values())
    for _, size, q in sorted(remainders, reverse=True):
        if left <= 0:
            break
        if shares[q] < size:
            shares[q] += 1
            left -= 1
    return {q: start.get(q, latest[q]) + shares[q] for q in latest}


def backlog(start: FlatOffsets, latest: FlatOffsets) -> int:
    return sum(max(end - start.get(q, end), 0) for q, end in latest.items())


@dataclass(frozen=True, slots=True)
class Range:
    """Queue offsets [start, end) of one queue."""

    queue: tuple[str, str, int]
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: list[Range], min_partitions: int | None) -> list[Range]:
    """One range per queue, or more when ``min_partitions`` asks: big ranges are cut evenly.

    As Spark's Kafka source does, each range gets ``round(size / total *
    min_partitions)`` pieces (at least one); nothing happens when there are
    already enough ranges.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[Range] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size / total * min_partitions)))
        step, extra = divmod(r.size, parts)
        at = r.start
        for i in range(parts):
            width = step + (1 if i < extra else 0)
            out.append(Range(r.queue, at, at + width))
            at += width
    return out


def lag(end: FlatOffsets, latest: FlatOffsets) -> dict[str, float]:
    """Offsets behind latest over the queues: min, max, avg and total."""
    behind = [max(latest[q] - end.get(q, latest[q]), 0) for q in latest]
    if not behind:
        return {"min": 0, "max": 0, "avg": 0.0, "total": 0}
    return {
        "min": min(behind),
        "max": max(behind),
        "avg": sum(behind) / len(behind),
        "total": sum(behind),
    }
