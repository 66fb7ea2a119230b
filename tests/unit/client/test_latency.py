"""The latency fault table: 550 ms -> 30 s ... 15 s -> 600 s; a failure counts as 30 s."""

from __future__ import annotations

import random

import pytest

from apogee.client.latency import LatencyFaultTable, not_available_ms


@pytest.mark.parametrize(
    ("latency_ms", "avoided_ms"),
    [
        (0, 0),
        (49, 0),
        (100, 0),
        (549.9, 0),
        (550, 30_000),
        (999, 30_000),
        (1_000, 60_000),
        (2_000, 120_000),
        (2_999, 120_000),
        (3_000, 180_000),
        (14_999, 180_000),
        (15_000, 600_000),
        (30_000, 600_000),
    ],
)
def test_latency_to_not_available_duration(latency_ms: float, avoided_ms: int) -> None:
    assert not_available_ms(latency_ms) == avoided_ms


def test_a_failed_send_avoids_the_broker_for_ten_minutes() -> None:
    table = LatencyFaultTable()
    table.update("broker-a", 3.0, now_ms=1_000, failed=True)
    assert not table.is_available("broker-a", 1_000)
    assert not table.is_available("broker-a", 600_999)
    assert table.is_available("broker-a", 601_000)
    assert table.unavailable_for_ms("broker-a", 1_000) == 600_000
    assert table.is_available("broker-b", 1_000)  # never seen: available
    assert table.unavailable_for_ms("broker-b", 1_000) == 0


def test_a_fast_send_makes_a_broker_available_again() -> None:
    table = LatencyFaultTable()
    table.update("broker-a", 1_200, now_ms=0, failed=False)
    assert table.unavailable_for_ms("broker-a", 0) == 60_000
    table.update("broker-a", 12, now_ms=10, failed=False)
    assert table.is_available("broker-a", 10)


def test_pick_one_at_least_prefers_available_then_fast_brokers() -> None:
    table = LatencyFaultTable(random.Random(7))
    assert table.pick_one_at_least(0) is None
    table.update("dead", 0, now_ms=0, failed=True)
    assert table.pick_one_at_least(0) == "dead"  # the only one known
    table.update("slow", 2_500, now_ms=0, failed=False)
    table.update("slower", 3_500, now_ms=0, failed=False)
    table.update("quick", 600, now_ms=0, failed=False)
    picks = {table.pick_one_at_least(1) for _ in range(20)}
    # the better half of four: the two lowest latencies among the unavailable
    assert picks == {"quick", "slow"}
    assert table.pick_one_at_least(1, among={"dead", "slower"}) == "slower"


def test_remove_forgets_a_broker() -> None:
    table = LatencyFaultTable()
    table.update("broker-a", 0, now_ms=0, failed=True)
    table.remove("broker-a")
    assert table.is_available("broker-a", 0)
    assert table.items() == []
