"""PULL_MESSAGE: checks, the subscription, store.get, the status table, long polling.

Owns: RocketMQ PullMessageProcessor's rules.

* Checks, in order: broker readable (16), group config (26; consumeEnable
  16), topic exists (17) and readable (16), queue id in range (1), then the
  subscription: from the request when the SUBSCRIPTION bit is set (23 when
  it does not compile), else the one the group registered by heartbeat (24
  if none; 25 if older than the request's subVersion; 27 if it is SQL92
  and did not compile). A SQL92 subscription on a broker without
  enablePropertyFilter is SYSTEM_ERROR (see ``broker/property_filter.py``).
* Filter: for TAG, the consume-queue tag code first (in the store), then the
  exact tag string of each found record, so a hash collision never reaches
  the client; for SQL92, the properties of each found record; with
  filterSupportRetry, retried records by the group's SQL92 subscription of
  their first topic. A SQL92 pull reads on until it holds maxMsgNums records
  or has scanned maxFilterMessageCount units. All filtered out =
  PULL_RETRY_IMMEDIATELY, past them.
* Status -> code: FOUND 0 (body = the stored records as memoryviews, one per
  run of records back to back in the commit log, written with scatter-gather);
  NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING 20; OFFSET_OVERFLOW_ONE /
  OFFSET_FOUND_NULL 19; OFFSET_OVERFLOW_BADLY / OFFSET_TOO_SMALL 21;
  NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE 21 when the offset is not 0,
  else 19. Code 0 never goes out with an empty body.
  Every answer carries nextBeginOffset, minOffset, maxOffset and
  suggestWhichBrokerId, as strings.
* A 19 with the SUSPEND bit is parked (long polling: the request's
  suspendTimeoutMillis; short polling: shortPollingTimeMills) unless it is a
  re-run of a parked pull. A slave that may not serve reads answers 20
  suggesting the master, with nextBeginOffset = the requested offset.
* The COMMIT_OFFSET bit stores commitOffset for the group (first run only,
  masters only, offsets >= 0).
* Every 21 a master answers is reported to ``on_offset_moved`` (the broker
  stores it in OFFSET_MOVED_EVENT; see ``broker/offset_moved.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from apogee.broker.clients import ClientRegistry
from apogee.broker.config import BrokerConfig
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.long_polling import PullHoldService
from apogee.broker.offset_moved import OffsetMovedEvent
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.property_filter import (
    FILTER_DATA_NOT_EXIST_REMARK,
    FilterRefusedError,
    RecordTest,
    compile_subscription,
    not_supported_remark,
    retry_test,
    sql_test,
)
from apogee.broker.records import record_properties
from apogee.broker.topics import TopicConfigManager
from apogee.codes import ResponseCode
from apogee.model.client import MessageModel
from apogee.model.filter import SqlFilter
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import PROPERTY_TAGS, property_value
from apogee.model.route import MASTER_ID, PERM_READ
from apogee.model.subscription import EXPRESSION_SQL92, SubscriptionData, is_tag_type
from apogee.model.topic import RETRY_GROUP_TOPIC_PREFIX
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore
from apogee.store.results import GetResult, GetStatus

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8

_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


@dataclass(frozen=True, slots=True)
class PullSettings:
    permission: BrokerPermission = field(default_factory=BrokerPermission)
    long_polling_enable: bool = True
    short_polling_time_ms: int = 1000
    slave_read_enable: bool = False
    is_slave: bool = False
    broker_name: str = "broker-a"
    #: Consume-queue units one SQL92-filtered pull may scan (RocketMQ maxFilterMessageCount).
    max_filter_scan: int = 16000
    property_filter: bool = False
    filter_support_retry: bool = False

    @classmethod
    def from_config(cls, config: BrokerConfig, permission: BrokerPermission) -> PullSettings:
        return cls(
            permission=permission,
            long_polling_enable=config.long_polling_enable,
            short_polling_time_ms=config.short_polling_time_ms,
            slave_read_enable=config.slave_read_enable,
            is_slave=config.is_slave,
            broker_name=config.broker_name,
            property_filter=config.enable_property_filter,
            filter_support_retry=config.filter_support_retry,
            max_filter_scan=config.max_filter_message_count,
        )


def pull_code(status: GetStatus, offset: int, found: bool, is_slave: bool = False) -> int:
    """The response code of a read (the table in the module docstring)."""
    code = _CODES.get(status)
    if code is None:  # NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
        code = ResponseCode.PULL_OFFSET_MOVED if offset else ResponseCode.PULL_NOT_FOUND
    elif code == ResponseCode.SUCCESS and not found:
        code = ResponseCode.PULL_RETRY_IMMEDIATELY
    if is_slave and code == ResponseCode.PULL_OFFSET_MOVED:
        code = ResponseCode.PULL_RETRY_IMMEDIATELY
    return code


#: Tag subscriptions of requests kept parsed (all of them are dropped when full).
_TAG_SUBS_KEPT = 4096


class _RefusedError(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class PullHandler:
    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        clients: ClientRegistry,
        offsets: ConsumerOffsetManager,
        holds: PullHoldService,
        settings: PullSettings,
        count_found: Callable[[str, str, int, int], None] | None = None,
        on_offset_moved: Callable[[OffsetMovedEvent], None] | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._groups = groups
        self._clients = clients
        self._offsets = offsets
        self._holds = holds
        self._settings = settings
        # (group, topic, messages, bytes): consume TPS figures and metrics
        self._count_found = count_found
        self._on_offset_moved = on_offset_moved
        holds.bind(self.resume)
        self._tag_subs: dict[tuple[str, str | None, int], SubscriptionData] = {}

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = PullMessageRequestHeader.of_request(request)
        return self.process(ctx, header, allow_suspend=True)

    def resume(self, ctx: RequestContext, header: PullMessageRequestHeader) -> None:
        """Run a parked pull again, without parking it, and answer it."""
        response = self.process(ctx, header, allow_suspend=False)
        if response is not None:
            ctx.respond(response)

    # -- processing --------------------------------------------------------------

    def process(
        self, ctx: RequestContext, header: PullMessageRequestHeader, *, allow_suspend: bool
    ) -> RemotingCommand | None:
        request = ctx.request
        if self._settings.is_slave and not self._settings.slave_read_enable:
            return self._not_read_here(request, header)
        try:
            group = self._check(header)
            sub, sql = self._subscription(header)
        except _RefusedError as refused:
            return request.make_response(refused.code, refused.remark)
        if allow_suspend:
            self._commit_offset(header)
        tag_coded = sql is None and not (sub.is_all or sub.class_filter_mode)
        codes = sub.code_lookup if tag_coded else None
        result = self._read(header, header.queue_offset, codes)
        count = result.message_count  # a property: read once, again only after a filter
        if count:
            test = self._record_test(header, sub, sql, tag_coded)
            if test is not None:
                _keep(result, test)
                if sql is not None:
                    self._read_on(header, codes, test, result)
                count = result.message_count
        code = pull_code(result.status, header.queue_offset, count > 0, self._settings.is_slave)
        if (
            code == ResponseCode.PULL_NOT_FOUND
            and allow_suspend
            and header.sys_flag & FLAG_SUSPEND
            and not self._holds.closed
        ):
            if self._holds.hold(ctx, header, codes, self._hold_time_s(header)):
                return None
            return request.make_response(
                ResponseCode.SYSTEM_BUSY, "[OVERLOAD] too many parked pulls, try again later"
            )
        ext = {
            "suggestWhichBrokerId": str(self._suggest(group, result)),
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        if code == ResponseCode.PULL_OFFSET_MOVED and self._on_offset_moved is not None:
            self._on_offset_moved(
                OffsetMovedEvent(
                    header.consumer_group,
                    header.topic,
                    self._settings.broker_name,
                    header.queue_id,
                    header.queue_offset,
                    result.next_begin_offset,
                )
            )
        if code == ResponseCode.SUCCESS:
            if self._count_found is not None:
                self._count_found(header.consumer_group, header.topic, count, result.total_bytes)
            # _value_, not .value: Enum.value is a Python-level descriptor, read per pull
            return request.make_response(code, result.status._value_, ext, result.body)
        return request.make_response(code, result.status._value_, ext)

    def _not_read_here(
        self, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> RemotingCommand:
        """A slave without slaveReadEnable: try again at the master, from the same offset."""
        topic, queue_id = header.topic, header.queue_id
        ext = {
            "suggestWhichBrokerId": str(MASTER_ID),
            "nextBeginOffset": str(header.queue_offset),
            "minOffset": str(max(self._store.min_offset_in_queue(topic, queue_id), 0)),
            "maxOffset": str(self._store.max_offset_in_queue(topic, queue_id)),
        }
        return request.make_response(
            ResponseCode.PULL_RETRY_IMMEDIATELY, "the slave does not serve reads", ext
        )

    def _read(
        self, header: PullMessageRequestHeader, offset: int, codes: frozenset[int] | None
    ) -> GetResult:
        return self._store.get(
            header.topic,
            header.queue_id,
            offset,
            header.max_msg_nums,
            tag_filter=codes,
            group=header.consumer_group,
        )

    def _read_on(
        self,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        test: RecordTest,
        result: GetResult,
    ) -> None:
        """Read further while a property filter leaves the answer short.

        RocketMQ's store scans up to maxFilterMessageCount consume-queue units
        for one pull, so a selective SQL92 filter still fills the answer in one
        round trip; one store read here covers only maxMsgNums units. Later
        reads are added to ``result`` until it holds maxMsgNums records, the
        scan budget is spent, or a read finds nothing more (then the answer is
        what was kept so far, with nextBeginOffset past what was read).
        """
        budget = self._settings.max_filter_scan
        while (
            len(result.messages) < header.max_msg_nums
            and result.next_begin_offset - header.queue_offset < budget
            and result.next_begin_offset < result.max_offset
        ):
            start = result.next_begin_offset
            more = self._read(header, start, codes)
            if more.status is not GetStatus.FOUND or more.next_begin_offset <= start:
                return
            _keep(more, test)
            room = header.max_msg_nums - len(result.messages)
            if len(more.messages) > room:  # keep maxMsgNums; the rest is read again next time
                more.next_begin_offset = more.queue_offsets[room]
                del more.messages[room:], more.queue_offsets[room:]
            result.messages += more.messages
            result.runs = None
            result.queue_offsets += more.queue_offsets
            result.total_bytes += sum(view.nbytes for view in more.messages)
            result.next_begin_offset = more.next_begin_offset
            result.max_offset = more.max_offset

    def _commit_offset(self, header: PullMessageRequestHeader) -> None:
        """The COMMIT_OFFSET piggy-back (first run only, masters only)."""
        if (
            header.sys_flag & FLAG_COMMIT_OFFSET
            and not self._settings.is_slave
            and header.commit_offset >= 0
        ):
            self._offsets.commit(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )

    def _hold_time_s(self, header: PullMessageRequestHeader) -> float:
        if self._settings.long_polling_enable:
            return max(header.suspend_timeout_millis, 0) / 1000
        return self._settings.short_polling_time_ms / 1000

    def _suggest(self, group: SubscriptionGroupConfig, result: GetResult) -> int:
        if not self._settings.slave_read_enable:
            return MASTER_ID
        if result.suggest_pulling_from_slave:
            return group.which_broker_when_consume_slowly
        return group.broker_id

    # -- checks ------------------------------------------------------------------

    def _check(self, header: PullMessageRequestHeader) -> SubscriptionGroupConfig:
        settings = self._settings
        if not settings.permission.value & PERM_READ:  # not the properties: every pull
            raise _RefusedError(ResponseCode.NO_PERMISSION, "the broker is not readable")
        group = self._groups.find_or_create(header.consumer_group)
        if group is None:
            raise _RefusedError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist",
            )
        if not group.consume_enable:
            raise _RefusedError(
                ResponseCode.NO_PERMISSION, f"group {group.group_name} may not consume"
            )
        topic = self._topics.select(header.topic)
        if topic is None:
            raise _RefusedError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
            )
        if not topic.perm & PERM_READ:
            raise _RefusedError(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] is not readable"
            )
        if not 0 <= header.queue_id < topic.read_queue_nums:
            raise _RefusedError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic {header.topic} has "
                f"{topic.read_queue_nums} read queues",
            )
        return group

    def _record_test(
        self,
        header: PullMessageRequestHeader,
        sub: SubscriptionData,
        sql: SqlFilter | None,
        tag_coded: bool,
    ) -> RecordTest | None:
        """What each found record must pass, None when every one is kept."""
        if sql is not None:
            return sql_test(sql)
        if tag_coded:
            return _tag_test(sub.tags_set)
        if self._settings.filter_support_retry and header.topic.startswith(
            RETRY_GROUP_TOPIC_PREFIX
        ):
            group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            clients = self._clients
            return retry_test(lambda topic: clients.sql_filter(group, topic))
        return None

    def _subscription(
        self, header: PullMessageRequestHeader
    ) -> tuple[SubscriptionData, SqlFilter | None]:
        if header.sys_flag & FLAG_SUBSCRIPTION:
            return self._requested(header)
        sub = self._registered(header)
        if is_tag_type(sub.expression_type):
            return sub, None
        if not self._settings.property_filter:
            raise _RefusedError(
                ResponseCode.SYSTEM_ERROR, not_supported_remark(sub.expression_type)
            )
        sql = self._clients.sql_filter(header.consumer_group, header.topic)
        if sql is None:
            raise _RefusedError(ResponseCode.FILTER_DATA_NOT_EXIST, FILTER_DATA_NOT_EXIST_REMARK)
        return sub, sql

    def _requested(
        self, header: PullMessageRequestHeader
    ) -> tuple[SubscriptionData, SqlFilter | None]:
        """The subscription the request carries (SUBSCRIPTION bit)."""
        expression_type = header.expression_type
        if is_tag_type(expression_type):
            # A consumer sends the same subscription with every pull: parsed once.
            key = (header.topic, header.subscription, header.sub_version)
            sub = self._tag_subs.get(key)
            if sub is None:
                sub = SubscriptionData.build(
                    header.topic, header.subscription, sub_version=header.sub_version
                )
                if len(self._tag_subs) >= _TAG_SUBS_KEPT:
                    self._tag_subs.clear()
                self._tag_subs[key] = sub
            return sub, None
        assert expression_type is not None
        expression = header.subscription or ""
        if not expression:
            raise _RefusedError(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription failed: no {expression_type} expression",
            )
        try:
            sql = compile_subscription(
                expression_type, expression, enabled=self._settings.property_filter
            )
        except FilterRefusedError as refused:
            remark = refused.remark
            if refused.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
                remark = f"parse the consumer's subscription failed: {remark}"
            raise _RefusedError(refused.code, remark) from None
        sub = SubscriptionData(
            header.topic,
            expression,
            sub_version=header.sub_version,
            expression_type=EXPRESSION_SQL92,
        )
        return sub, sql

    def _registered(self, header: PullMessageRequestHeader) -> SubscriptionData:
        """The subscription the group registered by heartbeat (no SUBSCRIPTION bit)."""
        info = self._clients.consumer_group(header.consumer_group)
        if info is None:
            raise _RefusedError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"consumer group [{header.consumer_group}] is not online",
            )
        group = self._groups.get(header.consumer_group)
        if (
            info.message_model is MessageModel.BROADCASTING
            and group is not None
            and not group.consume_broadcast_enable
        ):
            raise _RefusedError(ResponseCode.NO_PERMISSION, "broadcast consumption is disabled")
        sub = info.subscriptions.get(header.topic)
        if sub is None:
            raise _RefusedError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription of {header.topic} does not exist",
            )
        if sub.sub_version < header.sub_version:
            raise _RefusedError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription is not latest"
            )
        return sub


def _tag_test(tags: tuple[str, ...]) -> RecordTest:
    """The exact tag, behind the consume queue's hash (a collision never reaches a client)."""

    def test(record: memoryview) -> bool:
        return property_value(record_properties(record), PROPERTY_TAGS) in tags

    return test


def _keep(result: GetResult, test: RecordTest) -> None:
    """Keep only the records that pass ``test``; the kept views are not copied."""
    pairs = [
        (view, offset)
        for view, offset in zip(result.messages, result.queue_offsets, strict=True)
        if test(view)
    ]
    if len(pairs) != len(result.messages):
        result.runs = None
        result.messages = [view for view, _ in pairs]
        result.queue_offsets = [offset for _, offset in pairs]
        result.total_bytes = sum(view.nbytes for view in result.messages)
