"""The whole exception tree of Apogee.

Owns: every exception class raised across layers, and the lookup from a wire
response code to the exception a client raises for it.

Rule: expected outcomes are values (``PutStatus``, ``GetStatus``, response
codes); exceptions are faults. Every fault carries ``code`` (a RocketMQ
response code, ``SYSTEM_ERROR`` when none applies) and ``retriable``.
"""

from __future__ import annotations

from typing import ClassVar

from apogee.codes import ResponseCode

#: the longest error message kept; longer ones are cut (they may quote a peer's bytes)
MAX_MESSAGE_LENGTH = 1000


class ApogeeError(Exception):
    """Root of every Apogee exception."""

    code: int = ResponseCode.SYSTEM_ERROR
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        if len(message) > MAX_MESSAGE_LENGTH:
            # Messages may quote what a peer sent; they end up in logs and remarks.
            message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(ApogeeError, ValueError):
    """A configuration file or option is invalid; the message names the key."""


class ProtocolError(ApogeeError):
    """Bytes or a header that do not follow the remoting protocol."""


class FrameTooLargeError(ProtocolError):
    """A frame announces more bytes than the configured maximum."""


class HeaderFieldError(ProtocolError):
    """A custom-header field is missing or cannot be parsed; names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"header field {field!r}: {problem}")
        self.field = field


class TagExpressionError(ApogeeError, ValueError):
    """A tag subscription expression that is refused (too long)."""

    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class FilterExpressionError(ApogeeError, ValueError):
    """A property-filter (SQL92) expression that does not compile.

    ``position`` is the 0-based offset of the offending ``token`` (its source
    text; "" at the end of the expression), ``line`` and ``column`` 1-based.
    """

    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED

    def __init__(self, problem: str, *, expression: str, position: int, token: str) -> None:
        line = expression.count("\n", 0, position) + 1
        column = position - (expression.rfind("\n", 0, position) + 1) + 1
        near = f" near {token!r}" if token else " at the end"
        super().__init__(f"{problem} (line {line}, column {column}{near})")
        self.problem = problem
        self.position = position
        self.line = line
        self.column = column
        self.token = token


class RemotingError(ApogeeError):
    """Transport-level fault (connection, timeout, overload)."""

    retriable = True


class RemotingConnectError(RemotingError):
    """The peer could not be reached."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the request's timeout."""


class RemotingClosedError(RemotingError):
    """The connection closed while a request was pending."""


class RemotingTooMuchRequestError(RemotingError):
    """Too many requests already in flight on this side."""


class StoreError(ApogeeError):
    """A fault of the message store itself (I/O, corruption found at open)."""


class StoreInUseError(StoreError):
    """Another process holds the store's lock; ``pid`` is that process when known."""

    def __init__(self, message: str, *, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class DiskFullError(StoreError):
    """The file system has no room for a store file (ENOSPC, EDQUOT).

    The store refuses writes while it lasts and goes on serving reads.
    """


class StoreWriteError(StoreError):
    """The file system refused appended bytes (a failed ``pwrite``, EIO).

    The bytes stay out of every reader's sight, and the store refuses writes
    until a restart, whose recovery ends the log at its last whole record.
    """


class StoreCorruptionError(StoreError):
    """Store files disagree with each other beyond what recovery repairs."""


class ClientError(ApogeeError):
    """Invalid use of a client (bad argument, not started, ...)."""


class ClientClosedError(ClientError):
    """A producer or consumer used before ``start()`` or after ``close()``."""


class InvalidMessageError(ClientError, ValueError):
    """A message the client refuses before sending it; the message names the field.

    The code is MESSAGE_ILLEGAL, what the Java client's validators report.
    """

    code = ResponseCode.MESSAGE_ILLEGAL


class NoRouteError(ClientError):
    """No broker takes messages for a topic: the name servers know no route for it,
    and none for the default topic a send could create it from."""

    code = ResponseCode.TOPIC_NOT_EXIST


class BrokerResponseError(ApogeeError):
    """A broker or name server answered with a non-success response code."""

    #: response code this class stands for; the base covers unknown codes
    response_code: ClassVar[int] = ResponseCode.SYSTEM_ERROR

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message, code=self.response_code if code is None else code)


# Retriable mirrors the Java producer's retryResponseCodes, plus SYSTEM_BUSY
# which 5.x clients also retry.


class BrokerSystemError(BrokerResponseError):
    """SYSTEM_ERROR."""

    response_code = ResponseCode.SYSTEM_ERROR
    retriable = True


class SystemBusyError(BrokerResponseError):
    """SYSTEM_BUSY."""

    response_code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupportedError(BrokerResponseError):
    """REQUEST_CODE_NOT_SUPPORTED."""

    response_code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class FlushDiskTimeoutError(BrokerResponseError):
    """FLUSH_DISK_TIMEOUT."""

    response_code = ResponseCode.FLUSH_DISK_TIMEOUT


class SlaveNotAvailableError(BrokerResponseError):
    """SLAVE_NOT_AVAILABLE."""

    response_code = ResponseCode.SLAVE_NOT_AVAILABLE


class FlushSlaveTimeoutError(BrokerResponseError):
    """FLUSH_SLAVE_TIMEOUT."""

    response_code = ResponseCode.FLUSH_SLAVE_TIMEOUT


class MessageIllegalError(BrokerResponseError):
    """MESSAGE_ILLEGAL."""

    response_code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(BrokerResponseError):
    """SERVICE_NOT_AVAILABLE."""

    response_code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermissionError(BrokerResponseError):
    """NO_PERMISSION."""

    response_code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExistError(BrokerResponseError):
    """TOPIC_NOT_EXIST."""

    response_code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class QueryNotFoundError(BrokerResponseError):
    """QUERY_NOT_FOUND."""

    response_code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionNotExistError(BrokerResponseError):
    """SUBSCRIPTION_NOT_EXIST."""

    response_code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionGroupNotExistError(BrokerResponseError):
    """SUBSCRIPTION_GROUP_NOT_EXIST."""

    response_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


_BY_CODE: dict[int, type[BrokerResponseError]] = {
    cls.response_code: cls
    for cls in (
        BrokerSystemError,
        SystemBusyError,
        RequestCodeNotSupportedError,
        FlushDiskTimeoutError,
        SlaveNotAvailableError,
        FlushSlaveTimeoutError,
        MessageIllegalError,
        ServiceNotAvailableError,
        NoPermissionError,
        TopicNotExistError,
        QueryNotFoundError,
        SubscriptionNotExistError,
        SubscriptionGroupNotExistError,
    )
}


def error_for_code(code: int, remark: str | None = None) -> BrokerResponseError:
    """Build the exception a client raises for a non-success response code."""
    cls = _BY_CODE.get(code, BrokerResponseError)
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = f"CODE_{code}"
    text = (remark or "").strip()
    if text == name or text.startswith(f"{name}:"):  # the remark already names the code
        return cls(text, code=code)
    return cls(f"{name}: {text}".rstrip(": "), code=code)
