"""The asyncio producer: one message, a batch, ordered, oneway.

Owns: Producer and ProducerConfig (Java DefaultMQProducer's settings, in
seconds).

Security: ``credentials=SessionCredentials(access_key, secret_key)`` signs
every request of the producer's client instance (brokers and name servers
with ``aclEnable=true`` check it); ``tls=True`` connects over TLS without
checking the server's certificate (RocketMQ's ``tls.enable`` default),
``tls="ca.pem"`` checks it against that CA file, an ``ssl.SSLContext`` is
used as given.

A send (Java DefaultMQProducerImpl.sendDefaultImpl):
1. the message is checked (``outgoing.check_message``), given a UNIQ_KEY
   unless it has one (kept for every attempt, so a retry is the same
   message), and its body compressed when at least ``compress_threshold``
   bytes long;
2. the topic's queues come from the instance's RouteCache, falling back on
   the TBW102 route for a topic without one;
3. each attempt picks a queue (``publish.choose_queue``: round robin,
   skipping the broker of the failed attempt, and with
   ``latency_fault_tolerance`` the brokers the latency table avoids) and
   sends to that broker's master, with what is left of ``send_timeout``;
4. a transport fault or a retriable response code (SYSTEM_ERROR,
   SYSTEM_BUSY, SERVICE_NOT_AVAILABLE, NO_PERMISSION, TOPIC_NOT_EXIST) asks
   for a route refresh and, if attempts remain (``1 + retries``), tries
   again; a stored-but-not-flushed status is returned as the result unless
   ``retry_another_broker_when_not_store_ok``. Every other fault is raised.

Ordered sends (``queue=`` or ``selector=``) and oneway sends make one
attempt, as in Java. ``send_batch`` cuts the messages into batches of at
most ``max_message_size`` encoded bytes and sends them one after the other;
each batch is retried as one message.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from apogee.client.broker_api import send_request, send_result
from apogee.client.instance import DEFAULT_INSTANCE_NAME, ClientInstance, InstanceConfig
from apogee.client.latency import LatencyFaultTable
from apogee.client.outgoing import (
    COMPRESSED_SYS_FLAG,
    DEFAULT_COMPRESS_LEVEL,
    DEFAULT_COMPRESS_THRESHOLD,
    DEFAULT_MAX_MESSAGE_SIZE,
    check_batch,
    check_message,
    compress_body,
    encode_batches,
)
from apogee.client.publish import PublishInfo, choose_queue
from apogee.client.route_cache import RouteCache
from apogee.client.selectors import QueueSelector
from apogee.client.send_header import SendPieces
from apogee.client.transaction import CheckListener
from apogee.client.uniq_key import new_uniq_key
from apogee.codes import RequestCode
from apogee.errors import (
    ApogeeError,
    ClientClosedError,
    ClientError,
    ConfigError,
    RemotingTimeoutError,
)
from apogee.model.client import MessageQueue
from apogee.model.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    Message,
    properties_to_string,
)
from apogee.model.results import SendResult, SendStatus
from apogee.model.topic import AUTO_CREATE_TOPIC_KEY, RETRY_GROUP_TOPIC_PREFIX, validate_group
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import SendMessageRequestHeader
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.client import RemotingClient
from apogee.remoting.tls import client_ssl_context

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
_UNIQ = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_SEND_OK = SendStatus.SEND_OK
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
#: not yet in ``Producer._pieces`` (None there: a topic whose header takes the command path)
_NO_PIECES: Any = object()
_monotonic = time.monotonic
_time_ns = time.time_ns


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """A producer's settings; the defaults are the Java client's."""

    group: str = DEFAULT_PRODUCER_GROUP
    send_timeout_s: float = 3.0
    retries: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD
    compress_level: int = DEFAULT_COMPRESS_LEVEL
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    latency_fault_tolerance: bool = False
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY
    default_topic_queue_nums: int = 4

    def __post_init__(self) -> None:
        why = validate_group(self.group)
        if why is not None:
            raise ConfigError(f"group: {why}")
        if self.send_timeout_s <= 0:
            raise ConfigError(f"send_timeout must be positive, got {self.send_timeout_s!r}")
        if self.retries < 0:
            raise ConfigError(f"retries must be >= 0, got {self.retries!r}")
        if self.compress_threshold is not None and self.compress_threshold < 0:
            raise ConfigError(f"compress_threshold must be >= 0, got {self.compress_threshold}")
        if not 0 <= self.compress_level <= 9:
            raise ConfigError(f"compress_level must be 0..9, got {self.compress_level!r}")
        if self.max_message_size <= 0:
            raise ConfigError(f"max_message_size must be positive, got {self.max_message_size}")
        if self.default_topic_queue_nums <= 0:
            raise ConfigError(
                f"default_topic_queue_nums must be positive, got {self.default_topic_queue_nums}"
            )


class Producer:
    """Sends messages to the brokers the name servers route each topic to.

    ::

        async with Producer("orders-app", namesrv="127.0.0.1:9876") as producer:
            result = await producer.send(Message("orders", b"...", tags="created"))
    """

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        *,
        namesrv: str | Sequence[str],
        instance_name: str = DEFAULT_INSTANCE_NAME,
        send_timeout: float = 3.0,
        retries: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
        compress_level: int = DEFAULT_COMPRESS_LEVEL,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        latency_fault_tolerance: bool = False,
        create_topic_key: str = AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums: int = 4,
        poll_namesrv_interval: float = 30.0,
        heartbeat_interval: float = 30.0,
        credentials: SessionCredentials | None = None,
        tls: bool | ssl.SSLContext | str | Path = False,
    ) -> None:
        self.config = ProducerConfig(
            group,
            send_timeout,
            retries,
            retry_another_broker_when_not_store_ok,
            compress_threshold,
            compress_level,
            max_message_size,
            latency_fault_tolerance,
            create_topic_key,
            default_topic_queue_nums,
        )
        self._namesrv = namesrv
        self._instance_config = InstanceConfig(
            instance_name=instance_name,
            poll_namesrv_interval_s=poll_namesrv_interval,
            heartbeat_interval_s=heartbeat_interval,
            credentials=credentials,
            tls=client_ssl_context(tls),
        )
        #: brokers recently slow or failing, when ``latency_fault_tolerance`` is on
        self.fault_table: LatencyFaultTable | None = (
            LatencyFaultTable() if latency_fault_tolerance else None
        )
        self._instance: ClientInstance | None = None
        self._routes: RouteCache | None = None
        self._remoting: RemotingClient | None = None
        #: topic -> the fields of its send header that never change (``_header``),
        #: one map for single messages and one for batches
        self._headers: dict[str, dict[str, str]] = {}
        self._batch_headers: dict[str, dict[str, str]] = {}
        #: topic -> its send header encoded ahead in pieces (None: take the command path)
        self._pieces: dict[str, SendPieces | None] = {}
        #: one-by-one sends write their header from ``_pieces``; not when signing,
        #: which needs the ext fields (the connection would decode the header back)
        self._encoded = credentials is None
        #: answers the broker's transaction checks for this group (TransactionProducer)
        self._checker: CheckListener | None = None

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def instance(self) -> ClientInstance:
        """The client instance this producer runs on (after ``start``)."""
        if self._instance is None:
            raise ClientClosedError(f"producer {self.group} is not started")
        return self._instance

    # -- lifetime -------------------------------------------------------------

    async def start(self) -> None:
        """Join the shared client instance and announce the producer group to the brokers."""
        if self._instance is not None:
            return
        instance = await ClientInstance.acquire(self._namesrv, self._instance_config)
        try:
            # Java producers start with the default topic's route: it names the
            # brokers to heartbeat before any send.
            try:
                await instance.routes.get_route(self.config.create_topic_key)
            except ApogeeError as exc:
                log.info("no route for %s yet: %s", self.config.create_topic_key, exc)
            await instance.register_producer(self.group, checker=self._checker)
        except BaseException:
            await instance.release()
            raise
        self._instance = instance
        self._routes = instance.routes
        self._remoting = instance.remoting

    async def close(self) -> None:
        """Leave the group (UNREGISTER_CLIENT) and release the client instance."""
        instance, self._instance, self._routes = self._instance, None, None
        self._remoting = None
        if instance is not None:
            try:
                await instance.unregister_producer(self.group)
            finally:
                await instance.release()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- sending --------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send ``msg`` and return the broker's answer.

        ``queue`` sends to that queue, ``selector(queues, msg, arg)`` picks
        one (``selectors.select_by_hash`` keeps each key's messages in one
        queue, in order); either makes one attempt. ``timeout`` (seconds)
        bounds all attempts together.
        """
        if queue is None and selector is None:
            if self._encoded:
                encoded = self._prepare_encoded(msg)
                if encoded is not None:
                    pieces, mid, rest, body, uniq = encoded
                    return await self._deliver(
                        msg.topic, None, body, uniq, timeout, False, pieces, mid, rest
                    )
            ext, body, uniq = self._prepare(msg)
            return await self._deliver(msg.topic, ext, body, uniq, timeout, False)
        ext, body, uniq = self._prepare(msg)
        return await self._send_ordered(msg, ext, body, uniq, queue, selector, arg, timeout, False)

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Write ``msg`` to a broker without waiting for an answer (one attempt)."""
        ext, body, _ = self._prepare(msg)
        routes = self._started_routes()
        mq = await self._target(routes, msg, queue, selector, arg)
        addr = await self._master(routes, mq)
        ext["e"] = str(mq.queue_id)
        ext["g"] = str(_time_ns() // 1_000_000)
        try:
            await self.instance.broker_api.send_v2_oneway(addr, ext, body)
        except ApogeeError:
            self._failed(routes, mq, 0.0)
            raise

    async def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> list[SendResult]:
        """Send messages of one topic as batches; one result per batch sent.

        The messages are cut into batches of at most ``max_message_size``
        encoded bytes, each stored as consecutive offsets of one queue. A
        selector gets the first message; every batch then goes to its queue.
        """
        cfg = self.config
        topic = check_batch(messages, cfg.max_message_size)
        self._started_routes()
        batches = encode_batches(messages, time.time_ns() // 1_000_000, cfg.max_message_size)
        results: list[SendResult] = []
        template = self._header(topic, True)
        ordered = queue is not None or selector is not None
        for batch in batches:
            ext = template.copy()
            if ordered:
                result = await self._send_ordered(
                    messages[0], ext, batch.body, batch.msg_id, queue, selector, arg, timeout, True
                )
            else:
                result = await self._deliver(topic, ext, batch.body, batch.msg_id, timeout, True)
            results.append(result)
        return results

    # -- the send path ----------------------------------------------------------------

    def _started_routes(self) -> RouteCache:
        routes = self._routes
        if routes is None:
            raise ClientClosedError(f"producer {self.group} is not started (or closed)")
        return routes

    def _header(self, topic: str, batch: bool) -> dict[str, str]:
        """The fields of a send header that are the same for every message of ``topic``.

        In the wire order of ``to_ext_v2`` (a .. h, k, m, i): a send copies the
        template and sets its own values, and keys keep their places.
        """
        headers = self._batch_headers if batch else self._headers
        template = headers.get(topic)
        if template is None:
            cfg = self.config
            template = SendMessageRequestHeader(
                producer_group=cfg.group,
                topic=topic,
                default_topic=cfg.create_topic_key,
                default_topic_queue_nums=cfg.default_topic_queue_nums,
                queue_id=0,
                sys_flag=0,
                born_timestamp=0,
                flag=0,
                properties="",
                batch=batch,
            ).to_ext_v2()
            if len(headers) > 4096:
                headers.clear()
            headers[topic] = template
        return template

    def _prepare(self, msg: Message) -> tuple[dict[str, str], bytes, str]:
        """Check ``msg``; its send header (without queue and time), body and UNIQ_KEY."""
        cfg = self.config
        topic = msg.topic
        body = msg.body
        # A topic with a header template passed check_message when it was made.
        template = self._headers.get(topic) if type(topic) is str else None
        if template is None or type(body) is not bytes or not body:
            check_message(msg, cfg.max_message_size)
            body = msg.body
            template = self._header(topic, False)
        elif len(body) > cfg.max_message_size:
            check_message(msg, cfg.max_message_size)
        if self._routes is None:
            raise ClientClosedError(f"producer {self.group} is not started (or closed)")
        ext = template.copy()
        # Only what differs from the template is set: "f" and "h" are "0" there.
        props = msg.properties
        plain = not props
        body, sys_flag, uniq = self._body_and_id(msg, body)
        if plain:
            # The common message: no property but the id it got, so the property
            # string is that one pair.
            ext["i"] = f"{_UNIQ}\x01{uniq}\x02"
        else:
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                props = dict(props)
                reconsume = props.pop(PROPERTY_RECONSUME_TIME, None)
                max_reconsume = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
                if reconsume is not None:
                    ext["j"] = reconsume
                if max_reconsume is not None:
                    ext["l"] = max_reconsume
            ext["i"] = properties_to_string(props)
        if sys_flag:
            ext["f"] = str(sys_flag)
        if msg.flag:
            ext["h"] = str(msg.flag)
        return ext, body, uniq

    def _prepare_encoded(self, msg: Message) -> tuple[SendPieces, bytes, bytes, bytes, str] | None:
        """``_prepare`` for a header encoded from pieces: (pieces, mid, rest, body, UNIQ_KEY).

        None when the topic's header cannot be (a retry topic's message with
        reconsume counts): then ``_prepare`` is the way, and nothing was changed.
        """
        cfg = self.config
        topic = msg.topic
        body = msg.body
        pieces = self._pieces.get(topic, _NO_PIECES) if type(topic) is str else _NO_PIECES
        if pieces is _NO_PIECES or type(body) is not bytes or not body:
            check_message(msg, cfg.max_message_size)
            body = msg.body
            pieces = self._pieces.get(topic, _NO_PIECES)
            if pieces is _NO_PIECES:
                pieces = SendPieces.of(self._header(topic, False))
                if len(self._pieces) > 4096:
                    self._pieces.clear()
                self._pieces[topic] = pieces
        size = len(body)
        if size > cfg.max_message_size:
            check_message(msg, cfg.max_message_size)
        if pieces is None:
            return None
        if self._routes is None:
            raise ClientClosedError(f"producer {self.group} is not started (or closed)")
        props = msg.properties
        plain = not props and not msg.flag
        if props and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None  # its reconsume counts go into header fields of their own
        body, sys_flag, uniq = self._body_and_id(msg, body)
        rest = (
            pieces.rest_plain(uniq) if plain else pieces.rest(msg.flag, properties_to_string(props))
        )
        return pieces, pieces.mid(sys_flag), rest, body, uniq

    def _body_and_id(self, msg: Message, body: bytes) -> tuple[bytes, int, str]:
        """What both preparations do to a checked message: the body to send (compressed
        above the threshold), its sysFlag, and its UNIQ_KEY (set here when it has none;
        a retry keeps it)."""
        props = msg.properties
        sys_flag = 0
        if not props:  # the common message: nothing to look up
            uniq = props[_UNIQ] = new_uniq_key(_time_ns() // 1_000_000)
        else:
            uniq = props.get(_UNIQ) or ""
            if not uniq:
                uniq = props[_UNIQ] = new_uniq_key(_time_ns() // 1_000_000)
            if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
                sys_flag = TRANSACTION_PREPARED_TYPE
        threshold = self.config.compress_threshold
        if threshold is not None and len(body) >= threshold:
            packed = compress_body(body, threshold, self.config.compress_level)
            if packed is not None:
                body = packed
                sys_flag |= COMPRESSED_SYS_FLAG
        return body, sys_flag, uniq

    async def _target(
        self,
        routes: RouteCache,
        msg: Message,
        queue: MessageQueue | None,
        selector: QueueSelector | None,
        arg: Any,
    ) -> MessageQueue:
        """The queue an ordered or oneway send goes to."""
        if queue is not None:
            if queue.topic != msg.topic:
                raise ClientError(f"queue: {queue} is not a queue of topic {msg.topic}")
            return queue
        info = await self._publish_info(routes, msg.topic)
        if selector is None:
            return choose_queue(info)
        chosen = selector(info.queues, msg, arg)
        if not isinstance(chosen, MessageQueue):
            raise ClientError(f"selector: returned {chosen!r}, not a MessageQueue")
        return chosen

    async def _publish_info(self, routes: RouteCache, topic: str) -> PublishInfo:
        info = routes.publish.get(topic)
        if info is not None and info.queues:
            return info
        cfg = self.config
        return await routes.publish_info(topic, cfg.create_topic_key, cfg.default_topic_queue_nums)

    async def _master(self, routes: RouteCache, mq: MessageQueue) -> str:
        addr = routes.master_addr(mq.broker_name)
        if addr is None:
            await routes.refresh(mq.topic)
            addr = routes.master_addr(mq.broker_name)
            if addr is None:
                raise ClientError(f"broker {mq.broker_name} has no master in the route")
        return addr

    async def _send_ordered(  # noqa: PLR0917  # private, positional on purpose
        self,
        msg: Message,
        ext: dict[str, str],
        body: bytes | bytearray,
        msg_id: str,
        queue: MessageQueue | None,
        selector: QueueSelector | None,
        arg: Any,
        timeout: float | None,
        batch: bool,
    ) -> SendResult:
        """One attempt to the queue given or selected, as ordered sends make."""
        routes = self._started_routes()
        mq = await self._target(routes, msg, queue, selector, arg)
        start = _monotonic()
        addr = await self._master(routes, mq)
        ext["e"] = str(mq.queue_id)
        ext["g"] = str(_time_ns() // 1_000_000)
        remaining = (timeout or self.config.send_timeout_s) - (_monotonic() - start)
        try:
            return await self.instance.broker_api.send_v2(
                addr, mq, ext, body, msg_id, remaining, batch=batch
            )
        except ApogeeError:
            self._failed(routes, mq, _monotonic() - start)
            raise

    async def _deliver(  # noqa: PLR0917  # private, positional on purpose
        self,
        topic: str,
        ext: dict[str, str] | None,
        body: bytes | bytearray,
        msg_id: str,
        timeout: float | None,
        batch: bool,
        pieces: SendPieces | None = None,
        mid: bytes = b"",
        rest: bytes = b"",
    ) -> SendResult:
        """Send round robin, retrying on another broker (see the module docstring).

        The header is ``ext`` with the queue and time set, or, when ``ext`` is
        None, encoded from ``pieces``, ``mid`` and ``rest`` (``_prepare_encoded``).
        """
        routes = self._routes
        remoting = self._remoting
        if routes is None or remoting is None:
            raise ClientClosedError(f"producer {self.group} is not started (or closed)")
        timeout_s = timeout or self.config.send_timeout_s
        begin = start = _monotonic()
        info = routes.publish.get(topic)
        if info is None or not info.queues:
            info = await self._publish_info(routes, topic)
            begin = _monotonic()  # the route lookup counts in the timeout, not the latency
        faults = self.fault_table
        attempts = 1 + self.config.retries
        last_broker: str | None = None
        error: ApogeeError | None = None
        result: SendResult | None = None
        for attempt in range(attempts):
            if attempt:
                begin = _monotonic()
            remaining = timeout_s - (begin - start)
            if remaining <= 0:
                raise RemotingTimeoutError(
                    f"sending to {topic} took longer than {timeout_s}s ({attempt} attempts)"
                ) from error
            mq = choose_queue(info, last_broker, faults, begin * 1000)
            try:
                addr = routes.master_addr(mq.broker_name) or await self._master(routes, mq)
                # the connection's future, not BrokerApi.send_v2: one coroutine less per send
                conn = remoting.pooled(addr) or await remoting.connection(addr)
                if ext is None:
                    assert pieces is not None
                    born_ms = _time_ns() // 1_000_000
                    head = b"%b%d%b%d%b" % (pieces.head, mq.queue_id, mid, born_ms, rest)
                    fut: asyncio.Future[Any] = conn.request_encoded(
                        _SEND_V2, head, pieces.end, body, remaining
                    )
                else:
                    fut = conn.request(_ext_request(ext, mq, body, batch), remaining)
                result = send_result(await fut, mq, msg_id)
            except ApogeeError as exc:
                self._failed(routes, mq, _monotonic() - begin)
                if not exc.retriable and not isinstance(exc, ClientError):
                    raise
                log.info("send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                error, last_broker = exc, mq.broker_name
                if info.from_default or not info.queues:
                    info = await self._publish_info(routes, topic)
                continue
            if faults is not None:
                end = _monotonic()
                faults.update(mq.broker_name, (end - begin) * 1000, end * 1000, failed=False)
            if result.status is _SEND_OK or not self.config.retry_another_broker_when_not_store_ok:
                return result
            last_broker = mq.broker_name
        if result is not None:
            return result
        assert error is not None
        raise error

    def _failed(self, routes: RouteCache, mq: MessageQueue, elapsed_s: float) -> None:
        """Bookkeeping after a failed attempt: latency table, route refresh."""
        if self.fault_table is not None:
            now_ms = time.monotonic() * 1000
            self.fault_table.update(mq.broker_name, elapsed_s * 1000, now_ms, failed=True)
        routes.request_refresh(mq.topic)

    def __repr__(self) -> str:
        state = "started" if self._instance is not None else "stopped"
        return f"<Producer group={self.group} {state}>"


def _ext_request(
    ext: dict[str, str], mq: MessageQueue, body: bytes | bytearray, batch: bool
) -> RemotingCommand:
    """The send request of a header dict, with the attempt's queue and born time set."""
    ext["e"] = str(mq.queue_id)
    ext["g"] = str(_time_ns() // 1_000_000)
    return send_request(ext, body, batch)
