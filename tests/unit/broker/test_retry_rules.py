"""The retry and dead-letter rules, and the record a sent-back message becomes."""

from __future__ import annotations

import pytest

from apogee.broker.retry import (
    SendBack,
    is_dead,
    max_reconsume_times,
    next_delay_level,
    send_back_message,
)
from apogee.model.message import MessageExt, string_to_properties


def test_the_budget_is_the_groups_unless_a_v3_4_9_client_names_one() -> None:
    assert max_reconsume_times(16, 63, 3) == 16
    assert max_reconsume_times(16, 120, 3) == 16
    assert max_reconsume_times(16, 121, 3) == 3
    assert max_reconsume_times(16, 401, None) == 16


@pytest.mark.parametrize(
    ("times", "budget", "level", "dead"),
    [(0, 16, 0, False), (15, 16, 0, False), (16, 16, 0, True), (0, 16, -1, True), (0, 0, 3, True)],
)
def test_dead_when_the_budget_is_spent_or_asked(
    times: int, budget: int, level: int, dead: bool
) -> None:
    assert is_dead(times, budget, level) is dead


def test_level_zero_means_three_plus_attempts_clamped() -> None:
    assert next_delay_level(0, 0, 18) == 3
    assert next_delay_level(0, 5, 18) == 8
    assert next_delay_level(0, 16, 18) == 18
    assert next_delay_level(7, 0, 18) == 7
    assert next_delay_level(30, 0, 18) == 18


def original(**props: str) -> MessageExt:
    return MessageExt(
        topic="T1", queue_id=3, flag=9, body=b"body", properties={"TAGS": "a", **props},
        sys_flag=1, born_timestamp=123, born_host=("10.0.0.7", 5000), store_timestamp=456,
        store_host=("10.0.0.1", 10911), reconsume_times=2, prepared_transaction_offset=0,
        queue_offset=7, commit_log_offset=1000, store_size=200, body_crc=0, msg_id="OFFSETID",
    )  # fmt: skip


def test_a_retry_is_scheduled_for_the_retry_topic() -> None:
    msg = send_back_message(original(), SendBack("cg", False, 5, 0), ("10.0.0.1", 10911), 18)
    assert (msg.topic, msg.queue_id) == ("SCHEDULE_TOPIC_XXXX", 4)
    props = string_to_properties(msg.properties)
    assert props == {
        "TAGS": "a", "RETRY_TOPIC": "T1", "ORIGIN_MESSAGE_ID": "OFFSETID", "WAIT": "false",
        "DELAY": "5", "REAL_TOPIC": "%RETRY%cg", "REAL_QID": "0",
    }  # fmt: skip
    assert (msg.body, msg.flag, msg.sys_flag, msg.born_timestamp) == (b"body", 9, 1, 123)
    assert (msg.born_host, msg.reconsume_times) == (("10.0.0.7", 5000), 3)


def test_a_second_retry_keeps_the_first_topic_and_id_and_a_dead_one_is_not_delayed() -> None:
    again = original(RETRY_TOPIC="First", ORIGIN_MESSAGE_ID="FIRSTID", DELAY="4")
    msg = send_back_message(again, SendBack("cg", True, 0, 0), ("10.0.0.1", 10911), 18)
    assert (msg.topic, msg.queue_id) == ("%DLQ%cg", 0)
    props = string_to_properties(msg.properties)
    assert (props["RETRY_TOPIC"], props["ORIGIN_MESSAGE_ID"]) == ("First", "FIRSTID")
    assert "DELAY" not in props and "REAL_TOPIC" not in props
