"""Options of the rocketmq format: defaults, bad values named, rules of combination."""

from __future__ import annotations

import pytest

from apogee.errors import ConfigError
from apogee.spark.options import parse_sink, parse_source

NS = {"namesrv": "127.0.0.1:9876"}


def test_defaults_differ_for_batch_and_stream_and_names_ignore_case() -> None:
    batch = parse_source({**NS, "TOPICS": "a, b"}, streaming=False)
    stream = parse_source({**NS, "topics": "a"}, streaming=True)
    assert batch.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert stream.starting.kind == "latest"
    assert batch.fail_on_data_loss and batch.tags is None
    assert parse_source({**NS, "topics": "a", "tags": " * "}, streaming=False).tags is None


def test_json_offsets_and_timestamps_and_durations() -> None:
    opts = parse_source(
        {
            **NS,
            "topics": "t",
            "startingOffsets": '{"t": {"broker-a": {"0": 5, "1": -2}}}',
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
        },
        streaming=True,
    )
    assert opts.starting.per_queue() == {("t", "broker-a", 0): 5, ("t", "broker-a", 1): -2}
    assert opts.max_trigger_delay_ms == 30_000
    stamp = parse_source({**NS, "topics": "t", "startingTimestamp": "1700"}, streaming=False)
    assert (stamp.starting.kind, stamp.starting.timestamp_ms) == ("timestamp", 1700)


@pytest.mark.parametrize(
    ("options", "streaming", "named"),
    [
        ({"topics": "a"}, False, None),
        ({**NS}, False, "topics"),
        ({**NS, "topics": "a", "topicPattern": "("}, False, "topics"),
        ({**NS, "topicPattern": "("}, False, "topicPattern"),
        ({**NS, "topics": "a", "endingOffsets": '{"a": {"b": {"0": -2}}}'}, False, "endingOffsets"),
        ({**NS, "topics": "a", "endingOffsets": "latest"}, True, "endingOffsets"),
        (
            {**NS, "topics": "a", "startingOffsets": '{"a": {"b": {"x": 1}}}'},
            False,
            "startingOffsets",
        ),
        ({**NS, "topics": "a", "startingTimestamp": "soon"}, False, "startingTimestamp"),
        ({**NS, "topics": "a", "maxTriggerDelay": "1m"}, True, "maxTriggerDelay"),
        (
            {**NS, "topics": "a", "minOffsetsPerTrigger": "1", "maxTriggerDelay": "x"},
            True,
            "maxTriggerDelay",
        ),
        ({**NS, "topics": "a", "failOnDataLoss": "maybe"}, False, "failOnDataLoss"),
        ({**NS, "topics": "a", "minPartitions": "0"}, False, "minPartitions"),
    ],
)
def test_bad_source_options_raise_naming_the_option(
    options: dict[str, str], streaming: bool, named: str | None
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_source(options, streaming=streaming)
    assert (named or "namesrv") in str(caught.value)


def test_sink_options() -> None:
    opts = parse_sink({**NS, "topic": "out", "exactlyOnce": "TRUE", "checkpointLocation": "/x"})
    assert (opts.topic, opts.exactly_once, opts.producer_group) == (
        "out",
        True,
        "APOGEE_SPARK_SINK",
    )
    with pytest.raises(ConfigError, match="exactlyOnce"):
        parse_sink({**NS, "exactlyOnce": "yes"})
    with pytest.raises(ConfigError, match="unknown sink option"):
        parse_sink({**NS, "kafka.bootstrap.servers": "x"})
