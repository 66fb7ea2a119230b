"""SYNC_MASTER's waiters: generations, acknowledgements, deadlines, the in-sync rule."""

from __future__ import annotations

from concurrent.futures import Future

from apogee.broker.ha.transfer import GroupTransfer
from apogee.store.results import PutStatus


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _transfer(clock: Clock, max_gap: int = 1000) -> GroupTransfer:
    transfer = GroupTransfer(timeout_s=5.0, max_gap=max_gap, now=clock)
    transfer.slaves = 1
    return transfer


def test_requests_between_two_acks_share_one_generation() -> None:
    clock = Clock()
    t = _transfer(clock)
    a, b = t.request(100), t.request(300)
    assert a is b and not a.done()
    t.on_ack(200)  # closes the generation; it needs 300
    c = t.request(400)
    assert c is not a
    t.on_ack(300)
    assert a.result() is PutStatus.PUT_OK
    assert not c.done()
    t.on_ack(450)
    assert c.result() is PutStatus.PUT_OK
    assert t.waiting() == 0
    assert t.request(450).result() is PutStatus.PUT_OK  # already there


def test_a_generation_past_its_deadline_times_out() -> None:
    clock = Clock()
    t = _transfer(clock)
    late = t.request(100)
    clock.t += 4.9
    t.tick()
    assert not late.done()
    fresh = t.request(200)
    clock.t += 0.2
    t.tick()
    assert late.result() is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert not fresh.done()
    t.fail_all()
    assert fresh.result() is PutStatus.FLUSH_SLAVE_TIMEOUT


def test_no_slave_or_too_far_behind_is_slave_not_available() -> None:
    clock = Clock()
    t = _transfer(clock, max_gap=1000)
    t.on_ack(500)
    assert t.slave_ok(1499) and not t.slave_ok(1500)
    assert t.request(1500).result() is PutStatus.SLAVE_NOT_AVAILABLE
    t.slaves = 0
    assert t.request(600).result() is PutStatus.SLAVE_NOT_AVAILABLE


def test_flush_and_replication_join_into_one_answer_per_pair() -> None:
    clock = Clock()
    t = _transfer(clock)
    flushed: Future[PutStatus] = Future()
    replicated = t.request(100)
    joined = t.join(flushed, replicated)
    assert t.join(flushed, replicated) is joined  # waiters of one pair stay grouped
    t.on_ack(100)
    assert not joined.done()  # the disk has not answered yet
    flushed.set_result(PutStatus.FLUSH_DISK_TIMEOUT)
    assert joined.result() is PutStatus.FLUSH_DISK_TIMEOUT
    # a replication failure outranks a flush failure, as in RocketMQ
    late = t.request(200)
    clock.t += 6
    t.tick()
    done: Future[PutStatus] = Future()
    done.set_result(PutStatus.FLUSH_DISK_TIMEOUT)
    assert t.join(done, late).result() is PutStatus.FLUSH_SLAVE_TIMEOUT


def test_under_async_flush_sends_wait_on_the_replication_generation_itself() -> None:
    clock = Clock()
    t = _transfer(clock)
    flushed: Future[PutStatus] = Future()
    flushed.set_result(PutStatus.PUT_OK)  # ASYNC_FLUSH: each send has such a future
    other: Future[PutStatus] = Future()
    other.set_result(PutStatus.PUT_OK)
    replicated = t.request(100)
    # one future for every send of the generation, so they are answered together
    assert t.join(flushed, replicated) is replicated is t.join(other, t.request(50))
