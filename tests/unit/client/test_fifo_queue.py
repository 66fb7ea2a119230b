"""FifoProcessQueue counts per batch and gives ProcessQueue's figures."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.client.fifo_queue import FifoProcessQueue
from apogee.client.process_queue import FlowControl, FlowLimits, ProcessQueue
from apogee.model.message_codec import encode_record
from apogee.model.received import ReceivedMessage, decode_received


@dataclass(frozen=True)
class Pulled:
    queue_offset: int
    body_size: int = 100


def batch(start: int, n: int, size: int = 100) -> list[Pulled]:
    return [Pulled(o, size + o % 7) for o in range(start, start + n)]


def figures(pq: ProcessQueue[Pulled]) -> tuple[int, int, int, bool, int | None]:
    first = pq.first_message()
    return (
        pq.count,
        pq.size_bytes,
        pq.max_span,
        pq.has_messages(),
        None if first is None else first.queue_offset,
    )


def test_whole_batches_leave_front_first() -> None:
    pq: FifoProcessQueue[Pulled] = FifoProcessQueue()
    a, b = batch(0, 32), batch(32, 32)
    assert not pq.put(a, max_offset=1000)
    pq.put(b, max_offset=1000)
    assert (pq.count, pq.max_span, pq.backlog) == (64, 63, 1000 - 63)
    assert pq.size_bytes == sum(m.body_size for m in a + b)
    assert pq.remove(a) == 32
    assert pq.remove(b) == 64  # nothing held: one past the highest put
    assert (pq.count, pq.size_bytes, pq.has_messages()) == (0, 0, False)
    assert pq.remove(b) is None


def test_a_cut_batch_leaves_in_two_parts() -> None:
    pq: FifoProcessQueue[Pulled] = FifoProcessQueue()
    a = batch(10, 32)
    pq.put(a)
    assert pq.remove(a[:5]) == 15  # poll's max_messages cut the batch
    assert (pq.count, pq.size_bytes) == (27, sum(m.body_size for m in a[5:]))
    assert 14 not in pq and 15 in pq
    assert pq.remove(a[5:]) == 42


def test_removals_out_of_order_are_still_counted() -> None:
    pq: FifoProcessQueue[Pulled] = FifoProcessQueue()
    a, b = batch(0, 10), batch(10, 10)
    pq.put(a)
    pq.put(b)
    assert pq.remove(b[3:6]) == 0
    assert pq.remove(a) == 10
    assert pq.count == 7 and pq.max_span == 19 - 10
    assert pq.remove([b[0], b[1], b[2], b[6], b[7], b[8], b[9]]) == 20


def test_a_pull_that_goes_back_holds_each_offset_once() -> None:
    pq: FifoProcessQueue[Pulled] = FifoProcessQueue()
    pq.put(batch(0, 10))
    pq.put(batch(5, 10))  # overlaps 5..9
    assert pq.count == 15 and pq.max_span == 14
    assert pq.remove(batch(0, 15)) == 15


def test_flow_control_and_received_messages() -> None:
    pq: FifoProcessQueue[ReceivedMessage] = FifoProcessQueue()
    msgs = decode_received(
        b"".join(encode_record(topic="T", body=b"x" * 50, queue_offset=o) for o in range(3000))
    )
    pq.put(msgs[:1500])
    assert pq.flow_control(FlowLimits(), orderly=False) is FlowControl.COUNT
    pq.put(msgs[1500:])
    assert pq.size_bytes == 3000 * 50
    assert pq.remove(msgs[:1500]) == 1500
    assert pq.flow_control(FlowLimits(max_count=5000), orderly=False) is None


def test_orderly_consumption_is_refused() -> None:
    pq: FifoProcessQueue[Pulled] = FifoProcessQueue()
    with pytest.raises(NotImplementedError):
        pq.take(1)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_same_figures_as_process_queue(data: st.DataObject) -> None:
    """Random pulls and polls (whole batches, cut ones), both queues side by side."""
    old: ProcessQueue[Pulled] = ProcessQueue()
    new: FifoProcessQueue[Pulled] = FifoProcessQueue()
    waiting: list[list[Pulled]] = []  # what poll would hand out, front first
    offset = data.draw(st.integers(0, 1000))
    for _ in range(data.draw(st.integers(1, 30))):
        poll: bool = data.draw(st.booleans())
        if waiting and poll:
            front = waiting[0]
            cut = data.draw(st.integers(1, len(front)))
            taken, rest = front[:cut], front[cut:]
            if rest:
                waiting[0] = rest
            else:
                waiting.pop(0)
            assert new.remove(taken) == old.remove(taken)
        else:
            n = data.draw(st.integers(1, 40))
            offset += data.draw(st.integers(0, 5))  # tag filters leave gaps
            pulled = batch(offset, n)
            offset += n
            assert new.put(pulled, max_offset=offset + 10) is False
            old.put(pulled, max_offset=offset + 10)
            waiting.append(pulled)
        assert figures(new) == figures(old)
        assert new.backlog == old.backlog
