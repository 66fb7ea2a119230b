"""A consumer's subscriptions: tag expressions, SQL92 selectors, the retry topic, tag re-checks."""

from __future__ import annotations

import pytest

from apogee.client.consumer_config import (
    PushConsumerConfig,
    allocate_strategy,
    consume_from,
    message_model,
)
from apogee.client.subscriptions import Subscriptions, build_subscription
from apogee.errors import ClientError, ConfigError, FilterExpressionError
from apogee.model.client import ConsumeFromWhere, MessageModel
from apogee.model.javahash import java_string_hash


def test_a_tag_expression_keeps_its_tags_and_codes() -> None:
    sub = build_subscription("orders", "created || paid ", sub_version=7)
    assert (sub.sub_string, sub.tags_set, sub.sub_version) == (
        "created || paid ",
        ("created", "paid"),
        7,
    )
    assert sub.code_set == (java_string_hash("created"), java_string_hash("paid"))
    assert sub.expression_type == "TAG"
    assert build_subscription("orders").is_all
    assert build_subscription("orders").sub_version > 1_600_000_000_000  # now, in ms


def test_an_sql_selector_is_checked_on_the_client() -> None:
    sub = build_subscription("orders", sql="amount > 100 AND region = 'eu'")
    assert (sub.expression_type, sub.sub_string) == ("SQL92", "amount > 100 AND region = 'eu'")
    with pytest.raises(FilterExpressionError):
        build_subscription("orders", sql="amount >")
    with pytest.raises(ClientError, match="not both"):
        build_subscription("orders", "created", sql="a > 1")
    with pytest.raises(ClientError, match="empty"):
        build_subscription("orders", sql="  ")
    with pytest.raises(ClientError, match="topic"):
        build_subscription("bad topic!")


def test_clustering_push_consumers_also_read_their_retry_topic() -> None:
    subs = Subscriptions("g", MessageModel.CLUSTERING)
    assert subs.topics() == ["%RETRY%g"] and subs.user_topics() == []
    assert subs.add(build_subscription("orders", "a"))
    assert not subs.add(build_subscription("orders", "a"))  # same expression: unchanged
    assert subs.add(build_subscription("orders", "b"))
    assert sorted(subs.topics()) == ["%RETRY%g", "orders"]
    with pytest.raises(ClientError, match="retry topic"):
        subs.add(build_subscription("%RETRY%g"))
    assert not subs.remove("%RETRY%g") and subs.remove("orders") and not subs.remove("orders")
    assert Subscriptions("g", MessageModel.BROADCASTING).topics() == []
    assert Subscriptions("g", MessageModel.CLUSTERING, with_retry=False).topics() == []


def test_the_tag_filter_rechecks_the_real_tag() -> None:
    subs = Subscriptions("g", MessageModel.CLUSTERING)
    subs.add(build_subscription("orders", "created || paid"))
    subs.add(build_subscription("all", "*"))
    subs.add(build_subscription("sql", sql="a = 1"))
    check = subs.tag_filter("orders")
    assert check is not None
    assert check("paid") and not check("shipped") and not check(None)
    assert subs.tag_filter("all") is None and subs.tag_filter("sql") is None
    assert subs.tag_filter("%RETRY%g") is None and subs.tag_filter("unknown") is None


def test_settings_are_read_by_name_and_checked() -> None:
    assert consume_from("first") is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert consume_from("TIMESTAMP") is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert message_model("broadcasting") is MessageModel.BROADCASTING
    assert allocate_strategy("avg_by_circle").__name__ == "allocate_averagely_by_circle"
    with pytest.raises(ConfigError, match="consume_from"):
        consume_from("yesterday")
    with pytest.raises(ConfigError, match="message_model"):
        message_model("p2p")
    with pytest.raises(ConfigError, match="allocate"):
        allocate_strategy("RANDOM")
    assert PushConsumerConfig("g").reconsume_limit == 16
    assert PushConsumerConfig("g", orderly=True).reconsume_limit == 2**31 - 1
    assert PushConsumerConfig("g", max_reconsume_times=3).reconsume_limit == 3
    for bad in (
        {"consume_concurrency": 0},
        {"pull_batch_size": 0},
        {"retry_delay_level": 19},
        {"suspend_time_s": 0.0},
        {"rebalance_interval_s": 0.0},
        {"max_reconsume_times": -1},
    ):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            PushConsumerConfig("g", **bad)
    with pytest.raises(ConfigError, match="group"):
        PushConsumerConfig("")
