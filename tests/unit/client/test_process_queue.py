"""ProcessQueue keeps RocketMQ's accounting (its ProcessQueueTest cases, mirrored)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from apogee._util.clock import FakeClock
from apogee.client.process_queue import FlowControl, FlowLimits, ProcessQueue
from apogee.model.message_codec import encode_record
from apogee.model.received import ReceivedMessage, decode_received


@dataclass(frozen=True)
class Pulled:
    """The two fields the queue reads, for tests that hold 100k messages."""

    queue_offset: int
    body_size: int = 123


def pulled(offsets: range | list[int], size: int = 123) -> list[Pulled]:
    return [Pulled(o, size) for o in offsets]


def received(offsets: range) -> list[ReceivedMessage]:
    return decode_received(
        b"".join(encode_record(topic="T", body=b"x" * 123, queue_offset=o) for o in offsets)
    )


def test_cached_message_count_and_size_with_received_messages() -> None:
    pq: ProcessQueue[ReceivedMessage] = ProcessQueue()
    msgs = received(range(100))
    assert pq.put(msgs)
    assert (pq.count, pq.size_bytes) == (100, 100 * 123)
    pq.take(10)
    assert pq.commit() == 10
    assert (pq.count, pq.size_bytes) == (90, 90 * 123)
    assert pq.remove([msgs[-1]]) == 10  # the lowest still held
    assert (pq.count, pq.size_bytes) == (89, 89 * 123)


def test_contains_message() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.put(pulled([0]))
    assert 0 in pq
    assert 1 not in pq


def test_size_in_whole_mib_as_the_running_info_reports_it() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.put(pulled(range(102400)))
    assert pq.size_mib == 12
    pq.take(10000)
    pq.commit()
    assert pq.size_mib == 10
    pq.take(10000)
    pq.commit()
    assert pq.size_mib == 9
    pq.take(80000)
    pq.commit()
    assert (pq.size_mib, pq.count, pq.has_messages()) == (0, 2400, True)


def test_rollback_of_nothing_and_no_temp_message_when_empty() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.rollback()
    assert pq.taken == 0
    assert not pq.has_messages()
    assert pq.commit() is None
    assert pq.remove(pulled([3])) is None  # nothing held: nothing to commit


def test_the_commit_offset_is_the_lowest_in_flight_or_one_past_the_highest() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    batch = pulled(range(100, 110))
    pq.put(batch)
    assert pq.remove([batch[5], batch[9]]) == 100  # done out of order: 100 still in flight
    assert pq.remove(batch[1:5]) == 100
    assert pq.remove([batch[0]]) == 106
    assert pq.remove(batch[6:9]) == 110
    assert (pq.count, pq.size_bytes) == (0, 0)
    pq.put(pulled(range(110, 112)))
    assert pq.remove(pulled([111])) == 110


def test_messages_consumed_as_they_came_move_the_commit_offset_on() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.passed(9)  # offsets 0..9 consumed without being held
    pq.put(pulled([12]))  # one failed message of the next batch is held ...
    pq.passed(15)  # ... the rest of it, up to 15, was consumed
    assert pq.remove([]) == 12
    assert pq.remove(pulled([12])) == 16
    pq.passed(3)  # never moves back
    pq.put(pulled([16]))
    assert pq.remove(pulled([16])) == 17


def test_a_put_that_goes_back_keeps_offset_order() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.put(pulled(range(50, 55)))
    pq.put(pulled(range(40, 43)))  # a seek back while 50-54 are held
    pq.put(pulled([52]))  # already held: replaced, not counted twice
    assert pq.count == 8
    assert [m.queue_offset for m in pq.take(4)] == [40, 41, 42, 50]
    assert pq.max_span == 3  # 51..54


def test_put_asks_for_one_consume_task_until_take_runs_dry() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    assert pq.put(pulled(range(3)))
    assert not pq.put(pulled(range(3, 5)))  # a task is already on it
    assert len(pq.take(10)) == 5
    assert pq.take(10) == []  # ends the task
    assert not pq.put([])
    assert pq.put(pulled([5]))


def test_orderly_take_commit_and_give_back() -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.put(pulled(range(10)))
    first = pq.take(3)
    assert [m.queue_offset for m in first] == [0, 1, 2]
    assert (pq.count, pq.taken) == (10, 3)  # taken ones still count
    pq.make_available_again(first)  # suspended: the same three come again, first
    assert [m.queue_offset for m in pq.take(4)] == [0, 1, 2, 3]
    pq.rollback()
    assert pq.taken == 0
    assert [m.queue_offset for m in pq.take(2)] == [0, 1]
    assert pq.commit() == 2
    assert (pq.count, pq.size_bytes) == (8, 8 * 123)
    assert pq.first_message() == Pulled(2)


def test_flow_control_thresholds() -> None:
    limits = FlowLimits()
    assert (limits.max_count, limits.max_size_mib, limits.max_span) == (1000, 100, 2000)
    pq: ProcessQueue[Pulled] = ProcessQueue()
    pq.put(pulled(range(1000)))
    assert pq.flow_control(limits, orderly=False) is None
    pq.put(pulled([1000]))
    assert pq.flow_control(limits, orderly=False) is FlowControl.COUNT

    big: ProcessQueue[Pulled] = ProcessQueue()
    big.put(pulled(range(101), size=1024 * 1024 + 1))
    assert big.size_mib == 101
    assert big.flow_control(limits, orderly=True) is FlowControl.SIZE

    wide: ProcessQueue[Pulled] = ProcessQueue()
    wide.put(pulled([0, 2001]))
    assert wide.flow_control(limits, orderly=False) is FlowControl.SPAN
    assert wide.flow_control(limits, orderly=True) is None  # span is a concurrent-mode rule
    wide.remove(pulled([0]))
    assert wide.max_span == 0


def test_times_flags_and_backlog() -> None:
    clock = FakeClock()
    pq: ProcessQueue[Pulled] = ProcessQueue(clock)
    start = clock.now_ms()
    assert (pq.last_pull_ms, pq.last_lock_ms, pq.dropped, pq.locked) == (start, start, False, False)
    clock.advance(30)
    assert not pq.is_lock_expired()
    clock.advance(0.001)
    assert pq.is_lock_expired()
    assert not pq.is_pull_expired()
    clock.advance(90)
    assert pq.is_pull_expired()
    pq.put(pulled(range(5)), max_offset=25)
    assert pq.backlog == 21  # 25 - 4
    pq.remove(pulled([0]))
    assert pq.last_consume_ms == clock.now_ms()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.sets(st.integers(0, 400))), max_size=15))
def test_the_commit_offset_matches_a_sorted_model(steps: list[tuple[int, set[int]]]) -> None:
    pq: ProcessQueue[Pulled] = ProcessQueue()
    model: set[int] = set()
    next_offset = 0
    highest = -1
    for batch, done in steps:
        pq.put(pulled(range(next_offset, next_offset + batch)))
        model |= set(range(next_offset, next_offset + batch))
        next_offset += batch
        highest = next_offset - 1
        offset = pq.remove(pulled(sorted(done)))
        model -= done
        assert offset == (min(model) if model else highest + 1)
        assert pq.count == len(model)
        assert pq.max_span == (max(model) - min(model) if model else 0)
