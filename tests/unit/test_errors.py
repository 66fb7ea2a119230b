from __future__ import annotations

import pytest

from apogee import errors
from apogee.codes import ResponseCode


@pytest.mark.parametrize(
    ("code", "cls", "retriable"),
    [
        (ResponseCode.TOPIC_NOT_EXIST, errors.TopicNotExistError, True),
        (ResponseCode.MESSAGE_ILLEGAL, errors.MessageIllegalError, False),
        (ResponseCode.SYSTEM_BUSY, errors.SystemBusyError, True),
        (ResponseCode.QUERY_NOT_FOUND, errors.QueryNotFoundError, False),
    ],
)
def test_error_for_code_picks_class_and_flags(
    code: ResponseCode, cls: type[errors.BrokerResponseError], retriable: bool
) -> None:
    err = errors.error_for_code(code, "because")
    assert type(err) is cls
    assert err.code == code
    assert err.retriable is retriable
    assert "because" in str(err)
    assert code.name in str(err)


def test_unknown_code_keeps_the_number() -> None:
    err = errors.error_for_code(4242, None)
    assert type(err) is errors.BrokerResponseError
    assert err.code == 4242
    assert "CODE_4242" in str(err)


def test_header_field_error_names_the_field() -> None:
    err = errors.HeaderFieldError("queueId", "not an integer: 'x'")
    assert err.field == "queueId"
    assert "queueId" in str(err)
    assert isinstance(err, errors.ProtocolError)
