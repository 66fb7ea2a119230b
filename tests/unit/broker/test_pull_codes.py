"""The store-status -> pull response-code table (RocketMQ PullMessageProcessor)."""

from __future__ import annotations

import pytest

from apogee.broker.handlers.pull import pull_code
from apogee.codes import ResponseCode
from apogee.store.results import GetStatus

SUCCESS, NOT_FOUND = ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND
RETRY, MOVED = ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED


@pytest.mark.parametrize(
    ("status", "offset", "code"),
    [
        (GetStatus.FOUND, 5, SUCCESS),
        (GetStatus.NO_MATCHED_MESSAGE, 5, RETRY),
        (GetStatus.MESSAGE_WAS_REMOVING, 5, RETRY),
        (GetStatus.OFFSET_OVERFLOW_ONE, 5, NOT_FOUND),
        (GetStatus.OFFSET_FOUND_NULL, 5, NOT_FOUND),
        (GetStatus.OFFSET_OVERFLOW_BADLY, 5, MOVED),
        (GetStatus.OFFSET_TOO_SMALL, 5, MOVED),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 0, NOT_FOUND),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 5, MOVED),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, NOT_FOUND),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 5, MOVED),
    ],
)
def test_every_store_status_has_its_code(status: GetStatus, offset: int, code: int) -> None:
    assert pull_code(status, offset, found=status is GetStatus.FOUND) == code


def test_found_with_nothing_left_after_filtering_is_never_success() -> None:
    assert pull_code(GetStatus.FOUND, 0, found=False) == RETRY


def test_a_slave_never_moves_a_consumer() -> None:
    assert pull_code(GetStatus.OFFSET_TOO_SMALL, 5, found=False, is_slave=True) == RETRY
    assert pull_code(GetStatus.NO_MATCHED_LOGIC_QUEUE, 5, found=False, is_slave=True) == RETRY
