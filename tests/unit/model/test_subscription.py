"""Tag expressions and subscription matching; message queue ordering."""

from __future__ import annotations

import pytest

from apogee.model.client import MessageQueue
from apogee.model.javahash import java_string_hash
from apogee.model.subscription import SubscriptionData, parse_tag_expression


@pytest.mark.parametrize("expr", [None, "", "  ", "*", " * "])
def test_all_expressions(expr: str | None) -> None:
    assert parse_tag_expression(expr) == ((), ())
    sub = SubscriptionData.build("T", expr)
    assert sub.is_all and sub.sub_string == "*"
    assert sub.matches_code(12345) and sub.matches_tag(None)


def test_or_expression() -> None:
    tags, codes = parse_tag_expression(" TagA ||TagB|| ||TagA")
    assert tags == ("TagA", "TagB")
    assert codes == (java_string_hash("TagA"), java_string_hash("TagB"))
    assert codes[0] == 2598919  # "TagA".hashCode() in Java
    sub = SubscriptionData.build("T", "TagA || TagB", sub_version=7)
    assert sub.sub_string == "TagA || TagB" and sub.sub_version == 7
    assert sub.matches_code(java_string_hash("TagB")) and not sub.matches_code(1)
    assert sub.matches_tag("TagA") and not sub.matches_tag("TagC") and not sub.matches_tag(None)


def test_message_queue_orders_like_java() -> None:
    mqs = [MessageQueue("b", "x", 0), MessageQueue("a", "y", 1), MessageQueue("a", "y", 0)]
    assert sorted(mqs) == [mqs[2], mqs[1], mqs[0]]
    assert str(mqs[0]) == "MessageQueue [topic=b, brokerName=x, queueId=0]"
