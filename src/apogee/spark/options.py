"""The options of the ``rocketmq`` format, read and checked once, on the driver.

Owns: ``SourceOptions`` and ``SinkOptions`` (frozen, picklable) and their
parsers. Option names are case-insensitive, as Spark passes them; an
unknown name, a bad value or a combination that cannot work raises
``ConfigError`` naming the option, before any query starts.

Offsets in JSON nest topic -> broker name -> queue id, as RocketMQ names a
queue: ``{"orders": {"broker-a": {"0": 23, "1": -2}}}``; -2 means earliest
and -1 latest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from apogee.errors import ConfigError
from apogee.model.subscription import SubscriptionData

EARLIEST = -2
LATEST = -1

#: (topic, broker name, queue id) -> offset
FlatOffsets = dict[tuple[str, str, int], int]

_SOURCE_KEYS = {
    "namesrv",
    "topics",
    "topicpattern",
    "tags",
    "startingoffsets",
    "startingtimestamp",
    "endingoffsets",
    "endingtimestamp",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "failondataloss",
    "minpartitions",
    "consumergroup",
    "pullbatchsize",
    "pulltimeoutms",
}
_SINK_KEYS = {
    "namesrv",
    "topic",
    "exactlyonce",
    "producergroup",
    "sendtimeoutms",
    "batchsize",
    "maxinflight",
}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where reading starts or ends: earliest, latest, a timestamp, or per-queue offsets."""

    kind: str  # "earliest" | "latest" | "timestamp" | "json"
    timestamp_ms: int = 0
    queues: tuple[tuple[tuple[str, str, int], int], ...] = ()

    def per_queue(self) -> FlatOffsets:
        return dict(self.queues)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    namesrv: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    tags: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    min_partitions: int | None
    consumer_group: str | None
    pull_batch_size: int
    pull_timeout_s: float
    #: the columns to read, in order, each with whether it may be null
    #: (``apogee.spark.schema.source_columns``); () = all, as the source's schema has them
    columns: tuple[tuple[str, bool], ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads."""
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics

    def subscription(self, topic: str) -> SubscriptionData | None:
        return None if self.tags is None else SubscriptionData.build(topic, self.tags)


@dataclass(frozen=True, slots=True)
class SinkOptions:
    namesrv: str
    topic: str | None
    exactly_once: bool
    producer_group: str
    send_timeout_s: float
    batch_size: int
    max_in_flight: int


def parse_source(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check and read the source options; ``streaming`` picks the defaults and rules."""
    opts = _lower(raw, _SOURCE_KEYS, "source")
    namesrv = _required(opts, "namesrv")
    topics = tuple(t.strip() for t in opts.get("topics", "").split(",") if t.strip())
    pattern = opts.get("topicpattern")
    if bool(topics) == (pattern is not None):
        raise ConfigError("give exactly one of the options 'topics' and 'topicPattern'")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option 'topicPattern' is not a regular expression: {exc}") from exc
    tags = opts.get("tags")
    if tags is not None and (not tags.strip() or tags.strip() == "*"):
        tags = None
    starting = _offset_spec(opts, "starting", default="latest" if streaming else "earliest")
    ending = _offset_spec(opts, "ending", default="latest")
    if starting.kind == "latest" and not streaming:
        raise ConfigError("option 'startingOffsets' cannot be 'latest' for a batch read")
    if streaming and ("endingoffsets" in opts or "endingtimestamp" in opts):
        raise ConfigError("options 'endingOffsets' / 'endingTimestamp' are for batch reads only")
    if any(off == EARLIEST for _, off in ending.queues):
        raise ConfigError("option 'endingOffsets' cannot name -2 (earliest) for a queue")
    stream_only = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")
    if not streaming and any(k in opts for k in stream_only):
        raise ConfigError(
            "options 'maxOffsetsPerTrigger', 'minOffsetsPerTrigger' and 'maxTriggerDelay' "
            "are for streaming reads only"
        )
    if "maxtriggerdelay" in opts and "minoffsetspertrigger" not in opts:
        raise ConfigError("option 'maxTriggerDelay' needs 'minOffsetsPerTrigger'")
    return SourceOptions(
        namesrv=namesrv,
        topics=topics,
        topic_pattern=pattern,
        tags=tags,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(opts, "minoffsetspertrigger", "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", default=True),
        min_partitions=_positive(opts, "minpartitions", "minPartitions"),
        consumer_group=opts.get("consumergroup") or None,
        pull_batch_size=_positive(opts, "pullbatchsize", "pullBatchSize") or 1024,
        pull_timeout_s=(_positive(opts, "pulltimeoutms", "pullTimeoutMs") or 10_000) / 1000,
    )


def parse_sink(raw: Mapping[str, str]) -> SinkOptions:
    opts = _lower(raw, _SINK_KEYS, "sink")
    return SinkOptions(
        namesrv=_required(opts, "namesrv"),
        topic=opts.get("topic") or None,
        exactly_once=_bool(opts, "exactlyonce", "exactlyOnce", default=False),
        producer_group=opts.get("producergroup") or "APOGEE_SPARK_SINK",
        send_timeout_s=(_positive(opts, "sendtimeoutms", "sendTimeoutMs") or 10_000) / 1000,
        batch_size=_positive(opts, "batchsize", "batchSize") or 128,
        max_in_flight=_positive(opts, "maxinflight", "maxInFlight") or 64,
    )


def parse_offsets_json(text: str, option: str) -> FlatOffsets:
    """``{"topic": {"broker": {"queueId": offset}}}`` -> flat per-queue offsets."""
    try:
        tree = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"option '{option}' is neither earliest, latest nor JSON: {exc}") from exc
    flat: FlatOffsets = {}
    if not isinstance(tree, dict):
        raise ConfigError(f"option '{option}' must be a JSON object of topics")
    for topic, brokers in tree.items():
        if not isinstance(brokers, dict):
            raise ConfigError(f"option '{option}': topic {topic!r} must map broker names")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ConfigError(f"option '{option}': {topic}/{broker} must map queue ids")
            for qid, offset in queues.items():
                if not str(qid).isdigit() or not isinstance(offset, int) or offset < EARLIEST:
                    raise ConfigError(
                        f"option '{option}': {topic}/{broker}/{qid} needs a queue id and an "
                        f"offset >= -2, not {offset!r}"
                    )
                flat[(topic, broker, int(qid))] = offset
    return flat


def _offset_spec(opts: Mapping[str, str], prefix: str, *, default: str) -> OffsetSpec:
    name = f"{prefix}Offsets"
    stamp = opts.get(f"{prefix}timestamp")
    if stamp is not None:
        if not stamp.strip().isdigit():
            raise ConfigError(
                f"option '{prefix}Timestamp' must be epoch milliseconds, not {stamp!r}"
            )
        return OffsetSpec("timestamp", timestamp_ms=int(stamp))
    text = opts.get(f"{prefix}offsets", default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("json", queues=tuple(sorted(parse_offsets_json(text, name).items())))


def _lower(raw: Mapping[str, str], known: set[str], what: str) -> dict[str, str]:
    opts = {str(k).lower(): str(v) for k, v in raw.items() if v is not None}
    # Spark passes along the path of load(path)/save(path) and a stream's checkpoint
    # location and query name; this format has no use for them.
    for passed_along in ("path", "checkpointlocation", "queryname"):
        opts.pop(passed_along, None)
    unknown = sorted(set(opts) - known)
    if unknown:
        raise ConfigError(f"unknown {what} option(s) of format 'rocketmq': {', '.join(unknown)}")
    return opts


def _required(opts: Mapping[str, str], key: str) -> str:
    value = opts.get(key, "").strip()
    if not value:
        raise ConfigError(f"option '{key}' is required")
    return value


def _positive(opts: Mapping[str, str], key: str, name: str) -> int | None:
    text = opts.get(key)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) <= 0:
        raise ConfigError(f"option '{name}' must be a positive integer, not {text!r}")
    return int(text)


def _bool(opts: Mapping[str, str], key: str, name: str, *, default: bool) -> bool:
    text = opts.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option '{name}' must be true or false, not {text!r}")
    return text.strip().lower() == "true"


def _duration_ms(text: str, name: str) -> int:
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(f"option '{name}' must be a duration such as 500ms, 30s or 15m")
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]
