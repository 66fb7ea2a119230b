"""Drive the official RocketMQ C++ client from a JSON spec, one JSON line per result.

Usage: ``python tests/interop/cpp_driver.py '<json spec>'``. Imports only the standard library
and the ``rocketmq`` wheel (PyPI ``rocketmq==0.4.4``), never apogee: the interop tests run it in
a subprocess so that the C++ client behaves exactly as it does for a user. The wheel's own
Python wrapper is bypassed where it is wrong for the bundled ``librocketmq.so`` (its async
callbacks take the send result by pointer, the library passes it by value; its exception struct
has the wrong field sizes; a failing message callback is signalled by letting an exception
escape into ctypes, which leaves the status the library sees unspecified), so every call goes
through ``rocketmq.ffi.dll`` with prototypes declared here.

Actions (``"action"`` in the spec; ``namesrv`` is required, everything else has a default):

* ``produce`` -- ``mode`` sync | async | oneway | orderly | batch; ``count``; ``topic``; ``group``;
  ``tags``; ``keys`` (``{i}`` is replaced by the message index); ``properties``;
  ``delay_level``; ``body`` (text, ``{i}`` replaced) or ``body_size`` (ASCII filler);
  ``order_key`` (orderly: queue = key % queue count, default the index); ``batch_size``;
  ``send_timeout_ms``; ``compress_over``; ``compress_level``; ``max_message_size``;
  ``linger_s`` (stay alive after the last send); ``retry_failed_sends`` (sync and orderly:
  send a failed message again, a second later, up to this many times, default 0, as an
  application would when the client's own connection-table lock times out). One ``sent``
  or ``send_failed`` line per message (per batch for ``batch``), and a ``send_retried``
  line per retried attempt.
* ``push_consume`` -- ``group``; ``topic``; ``expression``; ``model`` clustering | broadcasting;
  ``orderly``; ``fail_first_n`` / ``fail_always`` (answer RECONSUME_LATER); ``thread_count``;
  ``batch_max_size``; ``max_reconsume_times`` (refused: the bundled library has no setter);
  ``until`` (deliveries) and ``run_s``. One ``message`` line per callback invocation.
* ``pull_consume`` -- ``group``; ``topic``; ``expression``; ``max_num``; ``offsets``
  (queue id -> start offset, default 0); ``until`` and ``run_s``. One ``message`` line per
  message and a ``pull`` line whenever a queue's status or next offset changes.

Every process prints ``started`` once the client started, then results, then ``done``. A line
``stop`` on stdin or SIGTERM ends a consumer early and cleanly. ``deadline_s`` (default 30) is a
hard limit after which the process prints ``deadline`` and exits at once: the C++ client keeps
non-daemon threads and can hang in shutdown, so the driver always leaves through ``os._exit``.

Exit codes: 0 done as asked; 1 some send failed or ``until`` was not reached; 2 bad spec or
unsupported option; 3 hard deadline; 4 the client failed to start.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from rocketmq.ffi import dll  # the wheel's ctypes handle to its bundled librocketmq.so

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_SPEC = 2
EXIT_DEADLINE = 3
EXIT_START_FAILED = 4

SEND_STATUS = {
    0: "SEND_OK",
    1: "FLUSH_DISK_TIMEOUT",
    2: "FLUSH_SLAVE_TIMEOUT",
    3: "SLAVE_NOT_AVAILABLE",
}
PULL_STATUS = {
    0: "FOUND",
    1: "NO_NEW_MSG",
    2: "NO_MATCHED_MSG",
    3: "OFFSET_ILLEGAL",
    4: "BROKER_TIMEOUT",
}
LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}
CONSUME_SUCCESS = 0
RECONSUME_LATER = 1
BROADCASTING = 0
CLUSTERING = 1

# Properties the C++ client or a broker may put on a message; the C API can only look a
# property up by name, so these are the ones a delivered message reports.
KNOWN_PROPERTIES = (
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "UNIQ_KEY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "ORIGIN_MESSAGE_ID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "CONSUME_START_TIME",
    "CLUSTER",
    "MSG_REGION",
    "TRACE_ON",
    "TRAN_MSG",
    "PGROUP",
)

_print_lock = threading.Lock()


def emit(event: str, **fields: object) -> None:
    """Print one JSON line and flush it, from any thread."""
    line = json.dumps({"event": event, **fields}, sort_keys=True, default=str)
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def leave(code: int, **fields: object) -> NoReturn:
    emit("done", exit=code, **fields)
    sys.stderr.flush()
    os._exit(code)


class SpecError(Exception):
    """The spec asks for something the driver cannot do."""


# ---------------------------------------------------------------------------------------------
# librocketmq prototypes (include/C*.h of the bundled build)


class CSendResult(ctypes.Structure):
    _fields_ = [
        ("sendStatus", ctypes.c_int),
        ("msgId", ctypes.c_char * 256),
        ("offset", ctypes.c_longlong),
    ]


class CMQException(ctypes.Structure):
    _fields_ = [
        ("error", ctypes.c_int),
        ("line", ctypes.c_int),
        ("file", ctypes.c_char * 256),
        ("msg", ctypes.c_char * 512),
        ("type", ctypes.c_char * 128),
    ]


class CMessageQueue(ctypes.Structure):
    _fields_ = [
        ("topic", ctypes.c_char * 512),
        ("brokerName", ctypes.c_char * 256),
        ("queueId", ctypes.c_int),
    ]


class CPullResult(ctypes.Structure):
    _fields_ = [
        ("pullStatus", ctypes.c_int),
        ("nextBeginOffset", ctypes.c_longlong),
        ("minOffset", ctypes.c_longlong),
        ("maxOffset", ctypes.c_longlong),
        ("msgFoundList", ctypes.POINTER(ctypes.c_void_p)),
        ("size", ctypes.c_int),
        ("pData", ctypes.c_void_p),
    ]


SEND_SUCCESS_CB = ctypes.CFUNCTYPE(None, CSendResult)
SEND_EXCEPTION_CB = ctypes.CFUNCTYPE(None, CMQException)
QUEUE_SELECTOR_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
MESSAGE_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_LL = ctypes.c_longlong
PROTOTYPES: dict[str, tuple[list[Any], Any]] = {
    "GetLatestErrorMessage": ([], _S),
    "CreateMessage": ([_S], _P),
    "DestroyMessage": ([_P], _I),
    "SetMessageTags": ([_P, _S], _I),
    "SetMessageKeys": ([_P, _S], _I),
    "SetByteMessageBody": ([_P, _S, _I], _I),
    "SetMessageProperty": ([_P, _S, _S], _I),
    "SetDelayTimeLevel": ([_P, _I], _I),
    "CreateBatchMessage": ([], _P),
    "AddMessage": ([_P, _P], _I),
    "DestroyBatchMessage": ([_P], _I),
    "GetMessageTopic": ([_P], _S),
    "GetMessageTags": ([_P], _S),
    "GetMessageKeys": ([_P], _S),
    "GetMessageBody": ([_P], _P),
    "GetMessageProperty": ([_P, _S], _S),
    "GetMessageId": ([_P], _S),
    "GetMessageDelayTimeLevel": ([_P], _I),
    "GetMessageQueueId": ([_P], _I),
    "GetMessageReconsumeTimes": ([_P], _I),
    "GetMessageStoreSize": ([_P], _I),
    "GetMessageBornTimestamp": ([_P], _LL),
    "GetMessageStoreTimestamp": ([_P], _LL),
    "GetMessageQueueOffset": ([_P], _LL),
    "GetMessageCommitLogOffset": ([_P], _LL),
    "CreateProducer": ([_S], _P),
    "StartProducer": ([_P], _I),
    "ShutdownProducer": ([_P], _I),
    "SetProducerNameServerAddress": ([_P, _S], _I),
    "SetProducerInstanceName": ([_P, _S], _I),
    "SetProducerSessionCredentials": ([_P, _S, _S, _S], _I),
    "SetProducerLogLevel": ([_P, _I], _I),
    "SetProducerSendMsgTimeout": ([_P, _I], _I),
    "SetProducerCompressLevel": ([_P, _I], _I),
    "SetProducerCompressMsgBodyOverHowmuch": ([_P, _I], _I),
    "SetProducerMaxMessageSize": ([_P, _I], _I),
    "SendMessageSync": ([_P, _P, ctypes.POINTER(CSendResult)], _I),
    "SendMessageAsync": ([_P, _P, SEND_SUCCESS_CB, SEND_EXCEPTION_CB], _I),
    "SendMessageOneway": ([_P, _P], _I),
    "SendMessageOrderly": ([_P, _P, QUEUE_SELECTOR_CB, _P, _I, ctypes.POINTER(CSendResult)], _I),
    "SendBatchMessage": ([_P, _P, ctypes.POINTER(CSendResult)], _I),
    "CreatePushConsumer": ([_S], _P),
    "StartPushConsumer": ([_P], _I),
    "ShutdownPushConsumer": ([_P], _I),
    "SetPushConsumerNameServerAddress": ([_P, _S], _I),
    "SetPushConsumerInstanceName": ([_P, _S], _I),
    "SetPushConsumerSessionCredentials": ([_P, _S, _S, _S], _I),
    "SetPushConsumerLogLevel": ([_P, _I], _I),
    "SetPushConsumerMessageModel": ([_P, _I], _I),
    "SetPushConsumerThreadCount": ([_P, _I], _I),
    "SetPushConsumerMessageBatchMaxSize": ([_P, _I], _I),
    "Subscribe": ([_P, _S, _S], _I),
    "RegisterMessageCallback": ([_P, MESSAGE_CB], _I),
    "RegisterMessageCallbackOrderly": ([_P, MESSAGE_CB], _I),
    "CreatePullConsumer": ([_S], _P),
    "StartPullConsumer": ([_P], _I),
    "ShutdownPullConsumer": ([_P], _I),
    "SetPullConsumerNameServerAddress": ([_P, _S], _I),
    "SetPullConsumerSessionCredentials": ([_P, _S, _S, _S], _I),
    "SetPullConsumerLogLevel": ([_P, _I], _I),
    "FetchSubscriptionMessageQueues": (
        [_P, _S, ctypes.POINTER(ctypes.POINTER(CMessageQueue)), ctypes.POINTER(_I)],
        _I,
    ),
    "ReleaseSubscriptionMessageQueue": ([ctypes.POINTER(CMessageQueue)], _I),
    "Pull": ([_P, ctypes.POINTER(CMessageQueue), _S, _LL, _I], CPullResult),
    "ReleasePullResult": ([CPullResult], _I),
}


class Lib:
    """librocketmq with the prototypes above; ``call`` raises on a non-zero status."""

    def __init__(self) -> None:
        self.dll: Any = dll
        for name, (argtypes, restype) in PROTOTYPES.items():
            func = getattr(dll, name)
            func.argtypes = argtypes
            func.restype = restype

    def has(self, name: str) -> bool:
        return hasattr(self.dll, name)

    def fn(self, name: str) -> Callable[..., Any]:
        func: Callable[..., Any] = getattr(self.dll, name)
        return func

    def call(self, name: str, *args: object) -> None:
        status = int(self.fn(name)(*args))
        if status != 0:
            raise ClientError(name, status, self.last_error())

    def last_error(self) -> str:
        raw = self.fn("GetLatestErrorMessage")()
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""


class ClientError(Exception):
    """A C API call returned a non-zero status; ``text`` is the library's last error."""

    def __init__(self, func: str, status: int, text: str) -> None:
        super().__init__(f"{func} failed with status {status}: {text}")
        self.func, self.status, self.text = func, status, text


def b(text: str) -> bytes:
    return text.encode("utf-8")


def text_of(raw: object) -> str | None:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else None


# ---------------------------------------------------------------------------------------------
# spec helpers


class Spec:
    """Typed access to the JSON spec with defaults; unknown keys are an error."""

    def __init__(self, raw: dict[str, Any], allowed: set[str]) -> None:
        unknown = set(raw) - allowed
        if unknown:
            raise SpecError(f"unknown spec keys: {sorted(unknown)}")
        self.raw = raw

    def text(self, key: str, default: str) -> str:
        value = self.raw.get(key, default)
        if not isinstance(value, str):
            raise SpecError(f"{key} must be a string")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is not None and not isinstance(value, str):
            raise SpecError(f"{key} must be a string")
        return value

    def integer(self, key: str, default: int) -> int:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{key} must be an integer")
        return value

    def opt_integer(self, key: str) -> int | None:
        if self.raw.get(key) is None:
            return None
        return self.integer(key, 0)

    def number(self, key: str, default: float) -> float:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{key} must be a number")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(f"{key} must be a boolean")
        return value

    def text_map(self, key: str) -> dict[str, str]:
        value = self.raw.get(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise SpecError(f"{key} must map strings to strings")
        return dict(value)

    def text_list(self, key: str) -> list[str]:
        value = self.raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SpecError(f"{key} must be a list of strings")
        return list(value)


COMMON_KEYS = {"action", "namesrv", "group", "topic", "deadline_s", "log_level", "instance_name"}
COMMON_KEYS |= {"access_key", "secret_key", "ons_channel"}
PRODUCE_KEYS = COMMON_KEYS | {
    "mode",
    "count",
    "tags",
    "keys",
    "properties",
    "delay_level",
    "body",
    "body_size",
    "order_key",
    "batch_size",
    "send_timeout_ms",
    "compress_over",
    "compress_level",
    "max_message_size",
    "linger_s",
    "retry_failed_sends",
}
PUSH_KEYS = COMMON_KEYS | {
    "expression",
    "model",
    "orderly",
    "fail_first_n",
    "fail_always",
    "thread_count",
    "batch_max_size",
    "max_reconsume_times",
    "until",
    "run_s",
    "property_names",
}
PULL_KEYS = COMMON_KEYS | {"expression", "max_num", "offsets", "until", "run_s", "property_names"}


def body_for(spec: Spec, index: int) -> bytes:
    size = spec.opt_integer("body_size")
    if size is not None:
        filler = f"{index}:" + "abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1)
        return b(filler)[:size]
    return b(spec.text("body", "message-{i}").replace("{i}", str(index)))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def start_client(lib: Lib, name: str, handle: int) -> None:
    try:
        lib.call(name, handle)
    except ClientError as exc:
        emit("start_failed", error=exc.text or str(exc))
        leave(EXIT_START_FAILED)


def stop_client(lib: Lib, name: str, handle: int, timeout_s: float = 8.0) -> None:
    """Shut the client down in a side thread: the library may block for good in shutdown."""
    worker = threading.Thread(target=lib.fn(name), args=(handle,), daemon=True)
    worker.start()
    worker.join(timeout_s)
    emit("shutdown", clean=not worker.is_alive())


# ---------------------------------------------------------------------------------------------
# produce


def make_message(lib: Lib, spec: Spec, topic: str, index: int) -> tuple[int, bytes]:
    handle = int(lib.fn("CreateMessage")(b(topic)))
    tags = spec.opt_text("tags")
    if tags:
        lib.call("SetMessageTags", handle, b(tags))
    keys = spec.opt_text("keys")
    if keys:
        lib.call("SetMessageKeys", handle, b(keys.replace("{i}", str(index))))
    body = body_for(spec, index)
    lib.call("SetByteMessageBody", handle, body, len(body))
    for key, value in spec.text_map("properties").items():
        lib.call("SetMessageProperty", handle, b(key), b(value.replace("{i}", str(index))))
    delay = spec.opt_integer("delay_level")
    if delay:
        lib.call("SetDelayTimeLevel", handle, delay)
    return handle, body


def result_fields(res: CSendResult) -> dict[str, object]:
    return {
        "status": SEND_STATUS.get(int(res.sendStatus), str(res.sendStatus)),
        "msg_id": text_of(res.msgId),
        "offset": int(res.offset),
    }


def produce(lib: Lib, spec: Spec) -> int:
    mode = spec.text("mode", "sync")
    if mode not in {"sync", "async", "oneway", "orderly", "batch"}:
        raise SpecError(f"unknown mode {mode!r}")
    topic = spec.text("topic", "TopicTest")
    count = spec.integer("count", 1)
    producer = int(lib.fn("CreateProducer")(b(spec.text("group", "apogee_cpp_producer"))))
    lib.call("SetProducerNameServerAddress", producer, b(spec.text("namesrv", "")))
    lib.call("SetProducerLogLevel", producer, LOG_LEVELS[spec.text("log_level", "info")])
    instance = spec.opt_text("instance_name")
    if instance:
        lib.call("SetProducerInstanceName", producer, b(instance))
    if spec.opt_text("access_key") is not None:
        lib.call(
            "SetProducerSessionCredentials",
            producer,
            b(spec.text("access_key", "")),
            b(spec.text("secret_key", "")),
            b(spec.text("ons_channel", "")),
        )
    for key, func in (
        ("send_timeout_ms", "SetProducerSendMsgTimeout"),
        ("compress_over", "SetProducerCompressMsgBodyOverHowmuch"),
        ("compress_level", "SetProducerCompressLevel"),
        ("max_message_size", "SetProducerMaxMessageSize"),
    ):
        value = spec.opt_integer(key)
        if value is not None:
            lib.call(func, producer, value)
    start_client(lib, "StartProducer", producer)
    emit("started", action="produce", mode=mode, pid=os.getpid())

    if mode == "batch":
        failed = send_batches(lib, spec, producer, topic, count)
    elif mode == "async":
        failed = send_async(lib, spec, producer, topic, count)
    else:
        failed = 0
        retries = spec.integer("retry_failed_sends", 0)
        for index in range(count):
            for attempt in range(retries + 1):
                last = attempt == retries
                if send_one(lib, spec, producer, topic, index=index, mode=mode, last=last):
                    break
                # The lock stays taken while the client's own thread connects to a
                # broker that is down: give that attempt time to end before retrying.
                time.sleep(1.0)
            else:
                failed += 1
    linger = spec.number("linger_s", 0.0)
    if linger > 0:
        time.sleep(linger)
    stop_client(lib, "ShutdownProducer", producer)
    return EXIT_FAILED if failed else EXIT_OK


def send_one(
    lib: Lib, spec: Spec, producer: int, topic: str, *, index: int, mode: str, last: bool = True
) -> bool:
    msg, body = make_message(lib, spec, topic, index)
    fields: dict[str, object] = {"index": index, "body_sha256": digest(body), "queue_id": None}
    res = CSendResult()
    try:
        if mode == "sync":
            lib.call("SendMessageSync", producer, msg, ctypes.byref(res))
        elif mode == "oneway":
            lib.call("SendMessageOneway", producer, msg)
            emit("sent", status="ONEWAY", **fields)
            return True
        else:
            chosen: list[int] = []

            def select(size: int, _msg: int | None, arg: int | None) -> int:
                key = int(ctypes.c_int.from_address(arg or 0).value)
                chosen.append(key % size)
                return key % size

            selector = QUEUE_SELECTOR_CB(select)
            key = ctypes.c_int(spec.integer("order_key", index))
            retries = 3
            lib.call(
                "SendMessageOrderly",
                producer,
                msg,
                selector,
                ctypes.byref(key),
                retries,
                ctypes.byref(res),
            )
            fields["queue_id"] = chosen[-1] if chosen else None
        emit("sent", **fields, **result_fields(res))
        return True
    except ClientError as exc:
        emit("send_failed" if last else "send_retried", error=exc.text or str(exc), **fields)
        return False
    finally:
        lib.call("DestroyMessage", msg)


def send_async(lib: Lib, spec: Spec, producer: int, topic: str, count: int) -> int:
    pending = threading.Semaphore(0)
    outcomes: list[bool] = []
    keep: list[object] = []  # ctypes callbacks must outlive the call

    for index in range(count):
        msg, body = make_message(lib, spec, topic, index)
        fields: dict[str, object] = {"index": index, "body_sha256": digest(body), "queue_id": None}

        def on_success(res: CSendResult, fields: dict[str, object] = fields) -> None:
            emit("sent", **fields, **result_fields(res))
            outcomes.append(True)
            pending.release()

        def on_exception(exc: CMQException, fields: dict[str, object] = fields) -> None:
            emit("send_failed", error=text_of(exc.msg), error_code=int(exc.error), **fields)
            outcomes.append(False)
            pending.release()

        success_cb, exception_cb = SEND_SUCCESS_CB(on_success), SEND_EXCEPTION_CB(on_exception)
        keep += [success_cb, exception_cb]
        try:
            lib.call("SendMessageAsync", producer, msg, success_cb, exception_cb)
        except ClientError as exc:
            # a failure to submit may or may not have called the exception callback already
            emit("send_failed", error=exc.text or str(exc), submit=True, **fields)
            outcomes.append(False)
            pending.release()
        finally:
            lib.call("DestroyMessage", msg)
    for _ in range(count):
        pending.acquire()
    return outcomes.count(False)


def send_batches(lib: Lib, spec: Spec, producer: int, topic: str, count: int) -> int:
    size = spec.integer("batch_size", count) or count
    failed = 0
    for first in range(0, count, size):
        batch = int(lib.fn("CreateBatchMessage")())
        members, digests = [], []
        for index in range(first, min(first + size, count)):
            msg, body = make_message(lib, spec, topic, index)
            lib.call("AddMessage", batch, msg)
            members.append(msg)
            digests.append(digest(body))
        fields: dict[str, object] = {
            "index": first // size,
            "count": len(members),
            "body_sha256": digests,
        }
        res = CSendResult()
        try:
            lib.call("SendBatchMessage", producer, batch, ctypes.byref(res))
            emit("sent", queue_id=None, **fields, **result_fields(res))
        except ClientError as exc:
            emit("send_failed", error=exc.text or str(exc), **fields)
            failed += 1
        finally:
            lib.call("DestroyBatchMessage", batch)
            for msg in members:
                lib.call("DestroyMessage", msg)
    return failed


# ---------------------------------------------------------------------------------------------
# consume


def body_bytes(lib: Lib, msg: int) -> bytes:
    """The delivered body, including NUL bytes.

    The C API hands out ``std::string::c_str()``. The bundled library is built against the
    pre-C++11 libstdc++ string (its symbols mangle ``std::string`` as ``Ss``), whose length is
    the word 24 bytes before the characters; it is trusted only if it covers the C string.
    """
    ptr = lib.fn("GetMessageBody")(msg)
    if not ptr:
        return b""
    text = ctypes.string_at(ptr)
    length = ctypes.c_size_t.from_address(int(ptr) - 24).value
    if len(text) <= length < (1 << 27):
        return ctypes.string_at(ptr, length)
    return text


def describe(lib: Lib, msg: int, extra_names: list[str]) -> dict[str, object]:
    body = body_bytes(lib, msg)
    properties: dict[str, str] = {}
    for name in (*KNOWN_PROPERTIES, *extra_names):
        value = text_of(lib.fn("GetMessageProperty")(msg, b(name)))
        if value:
            properties[name] = value
    return {
        "topic": text_of(lib.fn("GetMessageTopic")(msg)),
        "tags": text_of(lib.fn("GetMessageTags")(msg)),
        "keys": text_of(lib.fn("GetMessageKeys")(msg)),
        "msg_id": text_of(lib.fn("GetMessageId")(msg)),
        "queue_id": int(lib.fn("GetMessageQueueId")(msg)),
        "queue_offset": int(lib.fn("GetMessageQueueOffset")(msg)),
        "commit_log_offset": int(lib.fn("GetMessageCommitLogOffset")(msg)),
        "reconsume_times": int(lib.fn("GetMessageReconsumeTimes")(msg)),
        "delay_level": int(lib.fn("GetMessageDelayTimeLevel")(msg)),
        "store_size": int(lib.fn("GetMessageStoreSize")(msg)),
        "born_timestamp": int(lib.fn("GetMessageBornTimestamp")(msg)),
        "store_timestamp": int(lib.fn("GetMessageStoreTimestamp")(msg)),
        "body_len": len(body),
        "body_sha256": digest(body),
        "body": body[:256].decode("utf-8", "replace"),
        "properties": properties,
    }


class StopSignal:
    """Set by ``stop`` on stdin, by SIGTERM, or when a consumer has seen enough."""

    def __init__(self) -> None:
        self.event = threading.Event()
        signal.signal(signal.SIGTERM, lambda _sig, _frame: self.event.set())
        threading.Thread(target=self._read_stdin, daemon=True).start()

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                self.event.set()
                return

    def wait(self, timeout_s: float) -> bool:
        return self.event.wait(timeout_s)


def push_consume(lib: Lib, spec: Spec, stop: StopSignal) -> int:
    if spec.opt_integer("max_reconsume_times") is not None:
        raise SpecError("max_reconsume_times: librocketmq's C API has no setter for it")
    model = spec.text("model", "clustering")
    if model not in {"clustering", "broadcasting"}:
        raise SpecError(f"unknown model {model!r}")
    until = spec.opt_integer("until")
    fail_first_n = spec.integer("fail_first_n", 0)
    fail_always = spec.flag("fail_always", False)
    extra_names = spec.text_list("property_names")
    consumer = int(lib.fn("CreatePushConsumer")(b(spec.text("group", "apogee_cpp_consumer"))))
    lib.call("SetPushConsumerNameServerAddress", consumer, b(spec.text("namesrv", "")))
    lib.call("SetPushConsumerLogLevel", consumer, LOG_LEVELS[spec.text("log_level", "info")])
    lib.call(
        "SetPushConsumerMessageModel",
        consumer,
        CLUSTERING if model == "clustering" else BROADCASTING,
    )
    instance = spec.opt_text("instance_name")
    if instance:
        lib.call("SetPushConsumerInstanceName", consumer, b(instance))
    if spec.opt_text("access_key") is not None:
        lib.call(
            "SetPushConsumerSessionCredentials",
            consumer,
            b(spec.text("access_key", "")),
            b(spec.text("secret_key", "")),
            b(spec.text("ons_channel", "")),
        )
    threads = spec.opt_integer("thread_count")
    if threads is not None:
        lib.call("SetPushConsumerThreadCount", consumer, threads)
    batch = spec.opt_integer("batch_max_size")
    if batch is not None:
        lib.call("SetPushConsumerMessageBatchMaxSize", consumer, batch)
    lib.call(
        "Subscribe", consumer, b(spec.text("topic", "TopicTest")), b(spec.text("expression", "*"))
    )

    lock = threading.Lock()
    deliveries = [0]

    def on_message(_consumer: int | None, msg: int | None) -> int:
        try:
            fields = describe(lib, int(msg or 0), extra_names)
        except Exception as exc:  # never let an exception cross into C++
            emit("callback_error", error=repr(exc))
            return RECONSUME_LATER
        with lock:
            deliveries[0] += 1
            number = deliveries[0]
        fail = fail_always or number <= fail_first_n
        emit(
            "message",
            delivery=number,
            result="reconsume_later" if fail else "success",
            received_ms=int(time.time() * 1000),
            **fields,
        )
        if until is not None and number >= until:
            stop.event.set()
        return RECONSUME_LATER if fail else CONSUME_SUCCESS

    callback = MESSAGE_CB(on_message)
    register = (
        "RegisterMessageCallbackOrderly"
        if spec.flag("orderly", False)
        else "RegisterMessageCallback"
    )
    lib.call(register, consumer, callback)
    start_client(lib, "StartPushConsumer", consumer)
    emit("started", action="push_consume", model=model, pid=os.getpid())
    stop.wait(spec.number("run_s", 3600.0))
    stop_client(lib, "ShutdownPushConsumer", consumer)
    if until is not None and deliveries[0] < until:
        return EXIT_FAILED
    return EXIT_OK


def pull_consume(lib: Lib, spec: Spec, stop: StopSignal) -> int:
    topic = spec.text("topic", "TopicTest")
    expression = spec.text("expression", "*")
    max_num = spec.integer("max_num", 32)
    until = spec.opt_integer("until")
    extra_names = spec.text_list("property_names")
    raw_offsets = spec.raw.get("offsets", {})
    if not isinstance(raw_offsets, dict):
        raise SpecError("offsets must map queue ids to offsets")
    offsets = {int(k): int(v) for k, v in raw_offsets.items()}
    consumer = int(lib.fn("CreatePullConsumer")(b(spec.text("group", "apogee_cpp_puller"))))
    lib.call("SetPullConsumerNameServerAddress", consumer, b(spec.text("namesrv", "")))
    lib.call("SetPullConsumerLogLevel", consumer, LOG_LEVELS[spec.text("log_level", "info")])
    if spec.opt_text("access_key") is not None:
        lib.call(
            "SetPullConsumerSessionCredentials",
            consumer,
            b(spec.text("access_key", "")),
            b(spec.text("secret_key", "")),
            b(spec.text("ons_channel", "")),
        )
    start_client(lib, "StartPullConsumer", consumer)
    emit("started", action="pull_consume", pid=os.getpid())

    queues = fetch_queues(lib, consumer, topic)
    seen: dict[int, tuple[str, int]] = {}
    delivered = 0
    ends = time.monotonic() + spec.number("run_s", 3600.0)
    while not stop.event.is_set() and time.monotonic() < ends:
        idle = True
        for mq in queues:
            qid = int(mq.queueId)
            res = lib.fn("Pull")(
                consumer, ctypes.byref(mq), b(expression), offsets.get(qid, 0), max_num
            )
            status = PULL_STATUS.get(int(res.pullStatus), str(res.pullStatus))
            if status != "BROKER_TIMEOUT":
                offsets[qid] = int(res.nextBeginOffset)
            if seen.get(qid) != (status, offsets.get(qid, 0)):
                seen[qid] = (status, offsets.get(qid, 0))
                emit(
                    "pull",
                    queue_id=qid,
                    status=status,
                    next_begin_offset=int(res.nextBeginOffset),
                    min_offset=int(res.minOffset),
                    max_offset=int(res.maxOffset),
                    error=lib.last_error() if status == "BROKER_TIMEOUT" else None,
                )
            if status == "FOUND":
                idle = False
                for i in range(int(res.size)):
                    delivered += 1
                    emit(
                        "message",
                        delivery=delivered,
                        **describe(lib, int(res.msgFoundList[i]), extra_names),
                    )
                lib.fn("ReleasePullResult")(res)
            if until is not None and delivered >= until:
                stop.event.set()
                break
        if idle:
            stop.wait(0.2)
    stop_client(lib, "ShutdownPullConsumer", consumer)
    if until is not None and delivered < until:
        return EXIT_FAILED
    return EXIT_OK


def fetch_queues(lib: Lib, consumer: int, topic: str) -> list[CMessageQueue]:
    array = ctypes.POINTER(CMessageQueue)()
    size = ctypes.c_int(0)
    try:
        lib.call(
            "FetchSubscriptionMessageQueues",
            consumer,
            b(topic),
            ctypes.byref(array),
            ctypes.byref(size),
        )
    except ClientError as exc:
        emit("fetch_queues_failed", error=exc.text or str(exc))
        leave(EXIT_START_FAILED)
    queues = [CMessageQueue.from_buffer_copy(array[i]) for i in range(size.value)]
    lib.fn("ReleaseSubscriptionMessageQueue")(array)
    emit(
        "queues",
        queue_ids=[int(q.queueId) for q in queues],
        broker_names=[text_of(q.brokerName) for q in queues],
    )
    return queues


# ---------------------------------------------------------------------------------------------


def arm_deadline(seconds: float) -> None:
    def expire() -> None:
        emit("deadline", after_s=seconds)
        leave(EXIT_DEADLINE)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def main(argv: list[str]) -> NoReturn:
    try:
        if len(argv) != 2:
            raise SpecError("usage: cpp_driver.py '<json spec>'")
        raw = json.loads(argv[1])
        if not isinstance(raw, dict):
            raise SpecError("the spec must be a JSON object")
        action = raw.get("action")
        allowed = {"produce": PRODUCE_KEYS, "push_consume": PUSH_KEYS, "pull_consume": PULL_KEYS}
        if action not in allowed:
            raise SpecError(f"unknown action {action!r}")
        spec = Spec(raw, allowed[action])
        if not spec.text("namesrv", ""):
            raise SpecError("namesrv is required")
        if spec.text("log_level", "info") not in LOG_LEVELS:
            raise SpecError(f"log_level must be one of {sorted(LOG_LEVELS)}")
        arm_deadline(spec.number("deadline_s", 30.0))
        lib = Lib()
        if action == "produce":
            code = produce(lib, spec)
        elif action == "push_consume":
            code = push_consume(lib, spec, StopSignal())
        else:
            code = pull_consume(lib, spec, StopSignal())
    except (SpecError, ValueError) as exc:
        emit("error", error=str(exc))
        leave(EXIT_BAD_SPEC)
    except ClientError as exc:
        emit("error", error=str(exc))
        leave(EXIT_START_FAILED)
    leave(code)


if __name__ == "__main__":
    main(sys.argv)
