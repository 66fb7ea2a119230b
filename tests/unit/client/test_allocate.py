"""Queue allocation gives RocketMQ's results (its own unit tests, mirrored)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.client.allocate import (
    STRATEGIES,
    AllocateStrategy,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
    ring_hash,
)
from apogee.model.client import MessageQueue


def queues(n: int, topic: str = "topic") -> list[MessageQueue]:
    return [MessageQueue(topic, "brokerName", i) for i in range(n)]


def cids(n: int, prefix: str = "CID_PREFIX") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def owners(
    strategy: AllocateStrategy, mqs: list[MessageQueue], ids: list[str]
) -> dict[MessageQueue, str]:
    """Queue -> the client that got it; fails if a queue is given twice."""
    got: dict[MessageQueue, str] = {}
    for cid in ids:
        for mq in strategy("group", cid, mqs, ids):
            assert mq not in got, f"{mq} given twice"
            got[mq] = cid
    return got


# -- AllocateMessageQueueAveragelyTest ---------------------------------------------


def test_averagely_4_clients_10_queues_get_3_3_2_2() -> None:
    ids, mqs = cids(4), queues(10)
    sizes = [len(allocate_averagely("", cid, mqs, ids)) for cid in ids]
    assert sizes == [3, 3, 2, 2]
    assert [q.queue_id for q in allocate_averagely("", "CID_PREFIX1", mqs, ids)] == [3, 4, 5]
    assert [q.queue_id for q in allocate_averagely("", "CID_PREFIX3", mqs, ids)] == [8, 9]


def test_averagely_more_clients_than_queues_leaves_the_last_ones_idle() -> None:
    ids, mqs = cids(5), queues(3)
    got = [[q.queue_id for q in allocate_averagely("", cid, mqs, ids)] for cid in ids]
    assert got == [[0], [1], [2], [], []]


# -- AllocateMessageQueueAveragelyByCircleTest ---------------------------------------


def test_by_circle_4_clients_10_queues() -> None:
    ids, mqs = cids(4), queues(10)
    assert allocate_averagely_by_circle("", "CID_PREFIX", mqs, ids) == []  # not in the group
    got = {
        cid: [q.queue_id for q in allocate_averagely_by_circle("", cid, mqs, ids)] for cid in ids
    }
    assert got == {
        "CID_PREFIX0": [0, 4, 8],
        "CID_PREFIX1": [1, 5, 9],
        "CID_PREFIX2": [2, 6],
        "CID_PREFIX3": [3, 7],
    }


# -- AllocateMessageQueueConsistentHashTest ----------------------------------------


def test_consistent_hash_client_not_in_the_group_gets_nothing() -> None:
    assert allocate_consistent_hash("", str(2**31 - 1), queues(6), cids(2, "CID-")) == []


@pytest.mark.parametrize("strategy", list(STRATEGIES.values()))
def test_empty_arguments_are_refused(strategy: AllocateStrategy) -> None:
    with pytest.raises(ValueError, match="client id is empty"):
        strategy("", "", queues(6), cids(2))
    with pytest.raises(ValueError, match="no message queues"):
        strategy("", "0", [], cids(2))
    with pytest.raises(ValueError, match="no client ids"):
        strategy("", "0", queues(6), [])


def _check_join_and_leave(queue_count: int, client_count: int) -> None:
    """RocketMQ's testAllocate: full cover, then one leaves, then a new one joins."""

    def strategy(
        group: str, cid: str, mqs: Sequence[MessageQueue], ids: Sequence[str]
    ) -> list[MessageQueue]:
        return allocate_consistent_hash(group, cid, mqs, ids, virtual_nodes=3)

    mqs = queues(queue_count, "topic_test")
    ids = cids(client_count, "CID-")
    before = owners(strategy, mqs, ids)
    assert set(before) == set(mqs)

    gone = ids.pop(0)
    after_leave = owners(strategy, mqs, ids)
    if ids:
        assert set(after_leave) == set(mqs)
    for mq, cid in before.items():
        if cid != gone:
            assert after_leave[mq] == cid, "a queue moved between clients that stayed"

    ids.append("CID-NEW")
    after_join = owners(strategy, mqs, ids)
    assert set(after_join) == set(mqs)
    for mq, cid in after_join.items():
        if cid != "CID-NEW":
            assert after_leave[mq] == cid, "a queue moved to another client than the new one"


@pytest.mark.parametrize(("queue_count", "client_count"), [(20, 10), (10, 20)])
def test_consistent_hash_join_and_leave(queue_count: int, client_count: int) -> None:
    _check_join_and_leave(queue_count, client_count)


def test_consistent_hash_random_cases() -> None:
    rng = random.Random(7)
    for _ in range(10):
        _check_join_and_leave(rng.randint(1, 20), rng.randint(1, 20))


# -- the ring itself ------------------------------------------------------------------


def test_ring_positions_are_the_first_four_md5_bytes_unsigned() -> None:
    assert ring_hash("") == 0xD41D8CD9  # md5("") = d41d8cd98f00b204...
    assert ring_hash("abc") == 0x90015098  # md5("abc") = 900150983cd24fb0...
    assert ring_hash("ü") == int(hashlib.md5("ü".encode()).hexdigest()[:8], 16)


def test_a_queue_goes_to_the_first_point_at_or_after_it_wrapping_around() -> None:
    mqs = queues(16, "T")
    ids = ["c-a", "c-b", "c-c"]
    points = {ring_hash(f"{cid}-{n}"): cid for cid in ids for n in range(10)}
    for mq in mqs:
        h = ring_hash(str(mq))
        ahead = [p for p in points if p >= h]
        want = points[min(ahead)] if ahead else points[min(points)]
        for cid in ids:
            mine = allocate_consistent_hash("g", cid, mqs, ids)
            assert (mq in mine) == (cid == want)
    assert str(mqs[3]) == "MessageQueue [topic=T, brokerName=brokerName, queueId=3]"


def test_no_virtual_nodes_allocates_nothing_and_negative_is_refused() -> None:
    assert allocate_consistent_hash("g", "a", queues(4), ["a"], virtual_nodes=0) == []
    with pytest.raises(ValueError, match="virtual_nodes"):
        allocate_consistent_hash("g", "a", queues(4), ["a"], virtual_nodes=-1)


# -- every strategy ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(STRATEGIES)),
    st.integers(1, 24),
    st.integers(1, 12),
    st.randoms(use_true_random=False),
)
def test_every_queue_to_exactly_one_client_whatever_the_input_order(
    name: str, queue_count: int, client_count: int, rng: random.Random
) -> None:
    strategy = STRATEGIES[name]
    mqs = [MessageQueue("t", f"broker-{i % 2}", i // 2) for i in range(queue_count)]
    ids = cids(client_count, "10.0.0.1@")
    given_out = owners(strategy, mqs, ids)
    assert len(given_out) == queue_count
    shuffled_mqs, shuffled_ids = mqs[:], ids[:]
    rng.shuffle(shuffled_mqs)
    rng.shuffle(shuffled_ids)
    for cid in ids:  # every member computes the same split, whatever order it saw
        assert strategy("g", cid, shuffled_mqs, shuffled_ids) == strategy("g", cid, mqs, ids)
    if name != "CONSISTENT_HASH":  # the even ones differ by at most one queue
        sizes = [len(strategy("g", cid, mqs, ids)) for cid in ids]
        assert max(sizes) - min(sizes) <= 1
