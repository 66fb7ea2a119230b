"""Offset arithmetic of the Spark source: checkpoint form, admission control, splitting."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.spark.planning import Range, apportion, flatten, lag, nest, split_ranges

Q = [("t", "broker-a", i) for i in range(4)]


def test_offsets_nest_with_string_queue_ids_and_flatten_back() -> None:
    flat = {("t", "broker-a", 0): 5, ("t", "broker-b", 3): 7, ("u", "broker-a", 1): 0}
    nested = nest(flat)
    assert nested == {
        "t": {"broker-a": {"0": 5}, "broker-b": {"3": 7}},
        "u": {"broker-a": {"1": 0}},
    }
    assert flatten(nested) == flat


def test_apportion_shares_a_budget_by_backlog_and_never_exceeds_it() -> None:
    start = dict.fromkeys(Q, 0)
    latest = dict(zip(Q, (40, 10, 0, 2), strict=True))
    end = apportion(start, latest, 20)
    taken = [end[q] - start[q] for q in Q]
    assert sum(taken) == 20
    assert taken[0] > taken[1] > 0 and taken[2] == 0
    assert apportion(start, latest, 1000) == latest


@given(
    st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=1, max_size=8),
    st.integers(1, 600),
)
def test_apportion_admits_exactly_the_smaller_of_budget_and_backlog(
    queues: list[tuple[int, int]], budget: int
) -> None:
    keys = [("t", "b", i) for i in range(len(queues))]
    start = {k: s for k, (s, _) in zip(keys, queues, strict=True)}
    latest = {k: s + n for k, (s, n) in zip(keys, queues, strict=True)}
    end = apportion(start, latest, budget)
    assert all(start[k] <= end[k] <= latest[k] for k in keys)
    assert sum(end[k] - start[k] for k in keys) == min(budget, sum(n for _, n in queues))


def test_min_partitions_cuts_big_ranges_evenly_and_leaves_enough_alone() -> None:
    ranges = [Range(Q[0], 0, 90), Range(Q[1], 0, 10), Range(Q[2], 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    parts = split_ranges(ranges, 10)
    assert [(r.queue[2], r.start, r.end) for r in parts] == [
        (0, 0, 10), (0, 10, 20), (0, 20, 30), (0, 30, 40), (0, 40, 50),
        (0, 50, 60), (0, 60, 70), (0, 70, 80), (0, 80, 90), (1, 0, 10),
    ]  # fmt: skip
    assert split_ranges(ranges, 2) == ranges[:2]


def test_lag_is_what_waits_behind_the_end_of_the_batch() -> None:
    end = dict(zip(Q, (5, 10, 0, 2), strict=True))
    latest = dict(zip(Q, (10, 10, 3, 2), strict=True))
    assert lag(end, latest) == {"min": 0, "max": 5, "avg": 2.0, "total": 8}
    assert lag({}, {}) == {"min": 0, "max": 0, "avg": 0.0, "total": 0}
