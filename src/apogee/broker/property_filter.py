"""SQL92 subscriptions on the broker: which ones it takes, and which records they keep.

Owns: RocketMQ's refusals of a property-filter subscription (codes and
remarks of PullMessageProcessor and ClientManageProcessor.checkClientConfig)
and the record predicates a pull drops records with.

* A broker without ``enablePropertyFilter`` answers SYSTEM_ERROR to any
  subscription whose type is not TAG; with it, only SQL92 is known, and an
  expression that does not compile is SUBSCRIPTION_PARSE_FAILED naming the
  problem.
* A record is matched on the property map of its stored property string,
  decoded once per record; the record itself is never copied.
* ``filterSupportRetry``: a record in ``%RETRY%<group>`` is matched by the
  group's SQL92 subscription of the topic it was first sent to (its
  RETRY_TOPIC property); with no such subscription it is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from apogee.broker.records import record_properties
from apogee.codes import ResponseCode
from apogee.errors import FilterExpressionError
from apogee.model.filter import SqlFilter, compile_sql92
from apogee.model.message import PROPERTY_RETRY_TOPIC, string_to_properties
from apogee.model.subscription import EXPRESSION_SQL92

RecordTest = Callable[[memoryview], bool]

FILTER_DATA_NOT_EXIST_REMARK = (
    "The broker's consumer filter data is not exist!Your expression may be wrong!"
)


class FilterRefusedError(Exception):
    """A subscription the broker will not filter by; carries RocketMQ's code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def not_supported_remark(expression_type: str) -> str:
    return f"The broker does not support consumer to filter message by {expression_type}"


def compile_subscription(expression_type: str, expression: str, *, enabled: bool) -> SqlFilter:
    """The filter of a non-TAG subscription, or the refusal RocketMQ answers.

    Raises:
        FilterRefusedError: SYSTEM_ERROR when property filters are off;
            SUBSCRIPTION_PARSE_FAILED for another type or a bad expression.
    """
    if not enabled:
        raise FilterRefusedError(ResponseCode.SYSTEM_ERROR, not_supported_remark(expression_type))
    if expression_type != EXPRESSION_SQL92:
        raise FilterRefusedError(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"expression type {expression_type} is not supported, only TAG and SQL92",
        )
    try:
        return compile_sql92(expression)
    except FilterExpressionError as error:
        raise FilterRefusedError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(error)) from None


def sql_test(sql: SqlFilter) -> RecordTest:
    matches = sql.matches

    def test(record: memoryview) -> bool:
        return matches(string_to_properties(record_properties(record)))

    return test


def retry_test(filter_of: Callable[[str], SqlFilter | None]) -> RecordTest:
    """Records of a retry topic, by the filter ``filter_of(first topic)`` names."""

    def test(record: memoryview) -> bool:
        props = string_to_properties(record_properties(record))
        topic = props.get(PROPERTY_RETRY_TOPIC)
        sql = filter_of(topic) if topic else None
        return sql is None or sql.matches(props)

    return test
