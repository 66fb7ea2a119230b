"""send_result: a broker's answer to a send as the SendResult the caller gets."""

from __future__ import annotations

import dataclasses

import pytest

from apogee.client.broker_api import send_result
from apogee.codes import ResponseCode
from apogee.errors import ApogeeError, ProtocolError
from apogee.model.client import MessageQueue
from apogee.model.results import SendResult, SendStatus
from apogee.protocol.command import FLAG_RESPONSE, RemotingCommand

MQ = MessageQueue("T", "broker-a", 2)


def answer(code: int = ResponseCode.SUCCESS, **ext: str) -> RemotingCommand:
    return RemotingCommand(code, flag=FLAG_RESPONSE, ext_fields=ext)


def test_every_field_is_the_answers_and_the_result_is_a_plain_send_result() -> None:
    response = answer(
        msgId="7F00000100002A9F0000000000000010",
        queueId="2",
        queueOffset="41",
        transactionId="tx-1",
        MSG_REGION="DefaultRegion",
    )
    result = send_result(response, MQ, "UNIQ")

    expected = SendResult(
        SendStatus.SEND_OK, MQ, 41, "7F00000100002A9F0000000000000010", "UNIQ", "tx-1",
        "DefaultRegion",
    )  # fmt: skip
    assert result == expected and hash(result) == hash(expected)
    assert dataclasses.astuple(result) == dataclasses.astuple(expected)
    assert result.message_queue is MQ
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.queue_offset = 0  # type: ignore[misc]


def test_a_queue_other_than_the_one_asked_and_absent_optional_fields() -> None:
    result = send_result(answer(msgId="M", queueId="0", queueOffset="7"), MQ, "U")
    assert result.message_queue == MessageQueue("T", "broker-a", 0)
    assert (result.transaction_id, result.region_id) == (None, None)


def test_stored_but_not_flushed_codes_are_statuses() -> None:
    result = send_result(
        answer(ResponseCode.FLUSH_DISK_TIMEOUT, msgId="M", queueId="2", queueOffset="1"), MQ, "U"
    )
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT


def test_a_failure_code_raises_its_error_and_a_bad_answer_names_the_field() -> None:
    with pytest.raises(ApogeeError, match="no topic"):
        send_result(RemotingCommand(ResponseCode.TOPIC_NOT_EXIST, remark="no topic"), MQ, "U")
    with pytest.raises(ProtocolError, match="queueOffset"):
        send_result(answer(msgId="M", queueId="2", queueOffset="x"), MQ, "U")
    with pytest.raises((ProtocolError, KeyError)):
        send_result(answer(queueId="2", queueOffset="1"), MQ, "U")
