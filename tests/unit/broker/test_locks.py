"""RebalanceLockManager with a FakeClock: lock, renew, expire, steal, unlock."""

from __future__ import annotations

from apogee._util.clock import FakeClock
from apogee.broker.locks import RebalanceLockManager
from apogee.model.client import MessageQueue

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_free_queues_go_to_the_first_client_and_others_are_refused() -> None:
    locks = RebalanceLockManager(FakeClock())
    assert locks.try_lock_batch("g", [Q0, Q1], "c1") == {Q0, Q1}
    assert locks.try_lock_batch("g", [Q0, Q1, Q2], "c2") == {Q2}
    assert (locks.owner("g", Q0), locks.owner("g", Q2)) == ("c1", "c2")
    # another group is another table
    assert locks.try_lock_batch("other", [Q0], "c2") == {Q0}


def test_a_lock_lives_60_s_after_its_last_renewal() -> None:
    clock = FakeClock()
    locks = RebalanceLockManager(clock)
    locks.try_lock_batch("g", [Q0, Q1], "c1")
    clock.advance(50)
    assert locks.try_lock_batch("g", [Q0], "c1") == {Q0}  # renewed
    clock.advance(20)  # Q0 renewed 20 s ago, Q1 locked 70 s ago
    assert locks.owner("g", Q1) is None
    assert locks.try_lock_batch("g", [Q0, Q1], "c2") == {Q1}  # an expired lock can be taken
    assert locks.held_by("g", "c1") == {Q0}
    assert locks.held_by("g", "c2") == {Q1}
    clock.advance(40)
    assert locks.owner("g", Q0) == "c1"  # renewed exactly 60 s ago: still held
    clock.advance(0.001)
    assert locks.owner("g", Q0) is None
    assert locks.try_lock_batch("g", [Q0], "c1") == {Q0}  # the owner may take it back too


def test_only_the_owner_unlocks() -> None:
    locks = RebalanceLockManager(FakeClock())
    locks.try_lock_batch("g", [Q0, Q1], "c1")
    locks.unlock_batch("g", [Q0, Q1, Q2], "c2")
    locks.unlock_batch("nobody", [Q0], "c1")
    assert locks.held_by("g", "c1") == {Q0, Q1}
    locks.unlock_batch("g", [Q0], "c1")
    assert locks.try_lock_batch("g", [Q0, Q1], "c2") == {Q0}
    locks.unlock_batch("g", [Q1], "c1")
    locks.unlock_batch("g", [Q0], "c2")
    assert locks.table == {}


def test_the_live_time_is_configurable() -> None:
    clock = FakeClock()
    locks = RebalanceLockManager(clock, max_live_ms=1000)
    locks.try_lock_batch("g", [Q0], "c1")
    clock.advance(1.5)
    assert locks.try_lock_batch("g", [Q0], "c2") == {Q0}
