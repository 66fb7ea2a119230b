# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: always_allow_keywords=False, binding=False
"""The send and pull headers' decode, compiled: a request's ext fields into its header.

Owns: :func:`send_header` and :func:`pull_header`, the typed fast paths of
``apogee.protocol.headers._send_header`` and ``PullMessageRequestHeader.from_ext``.
The first reads the fourteen fields of SEND_MESSAGE (long names) or
SEND_MESSAGE_V2 (one letter each), the second the twelve of PULL_MESSAGE, from
the ext fields and fills the header in, numbers parsed from their ASCII digits
in C. They take only what the usual client sends: strings where strings
belong, numbers as ``-?[0-9]{1,18}`` that fit their Java field, booleans as
"true"/"false"/"1"/"0". On anything else they return None and the caller's
checked path decides, which is the one that names a refused field; so the
results and errors are the checked path's either way.

Compiled only (the first line; ``setup.py``): interpreted, :data:`COMPILED`
is False and ``headers`` keeps to its own straight-line Python, which is
faster there than this would be.
"""

from __future__ import annotations

from typing import Any

import cython

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import digits_at
    from cython.cimports.cpython.unicode import PyUnicode_1BYTE_DATA

#: Whether this module runs compiled (``headers`` uses it only then).
COMPILED: bool = cython.compiled

_I32_MIN = cython.declare(cython.longlong, -(2**31))
_I32_MAX = cython.declare(cython.longlong, 2**31 - 1)
_BOOLS = {"true": True, "false": False, "1": True, "0": False}


@cython.cfunc
@cython.exceptval(check=False)
def _digits(text: object, out: cython.p_longlong) -> cython.bint:
    """``-?[0-9]{1,18}`` in ``text`` (an exact str) into ``out[0]``; False if not that."""
    if not cython.compiled:
        return False
    if not text.isascii():  # type: ignore[attr-defined]
        return False
    n: cython.Py_ssize_t = len(text)  # type: ignore[arg-type]
    found: cython.bint = digits_at(PyUnicode_1BYTE_DATA(text), 0, n, out)
    return found


@cython.cfunc
def _int32(text: object) -> object:
    """The Java int in ``text`` (an exact str); None if the checked path must see it."""
    value: cython.longlong = 0
    if type(text) is not str or not _digits(text, cython.address(value)):
        return None
    if value < _I32_MIN or value > _I32_MAX:
        return None
    return value


@cython.cfunc
def _int64(text: object) -> object:
    """The Java long in ``text`` (18 digits at most always fit); None as ``_int32``."""
    value: cython.longlong = 0
    if type(text) is not str or not _digits(text, cython.address(value)):
        return None
    return value


#: What the optional fields' readers give where the checked path must decide.
_DECLINED = object()


@cython.cfunc
def _opt_int32(text: object) -> object:
    """An optional Java int: None when missing or empty, else as ``_int32``, with
    :data:`_DECLINED` where that declines."""
    if not text:
        return None
    value = _int32(text)
    return _DECLINED if value is None else value


@cython.cfunc
def _opt_bool(text: object) -> object:
    """An optional boolean: False when missing or empty, else its spelling's value, with
    :data:`_DECLINED` for any other spelling."""
    if not text:
        return False
    value = _BOOLS.get(text)  # type: ignore[call-overload]
    return _DECLINED if value is None else value


def send_header(ext: dict[str, str], names: tuple[str, ...], cls: type[Any]) -> Any:
    """The send header of ``ext`` under wire ``names`` (in field order), its fields
    assigned as ``cls.__init__`` assigns them (without the call); None when the
    checked path must decide."""
    if not cython.compiled:
        return None
    group = ext.get(names[0])
    topic = ext.get(names[1])
    default_topic = ext.get(names[2])
    if type(group) is not str or type(topic) is not str or type(default_topic) is not str:
        return None
    queue_nums = _int32(ext.get(names[3]))
    queue_id = _int32(ext.get(names[4]))
    sys_flag = _int32(ext.get(names[5]))
    born = _int64(ext.get(names[6]))
    flag = _int32(ext.get(names[7]))
    if queue_nums is None or queue_id is None or sys_flag is None or born is None or flag is None:
        return None
    properties = ext.get(names[8])
    reconsume = _opt_int32(ext.get(names[9]))
    unit = _opt_bool(ext.get(names[10]))
    batch = _opt_bool(ext.get(names[11]))
    max_reconsume = _opt_int32(ext.get(names[12]))
    if (
        reconsume is _DECLINED
        or unit is _DECLINED
        or batch is _DECLINED
        or max_reconsume is _DECLINED
    ):
        return None
    header: Any = object.__new__(cls)
    header.producer_group = group
    header.topic = topic
    header.default_topic = default_topic
    header.default_topic_queue_nums = queue_nums
    header.queue_id = queue_id
    header.sys_flag = sys_flag
    header.born_timestamp = born
    header.flag = flag
    header.properties = properties
    header.reconsume_times = reconsume
    header.unit_mode = unit
    header.batch = batch
    header.max_reconsume_times = max_reconsume
    header.broker_name = ext.get(names[13]) or None
    return header


def pull_header(ext: dict[str, str], cls: type[Any]) -> Any:
    """The pull header of ``ext``, its fields assigned as ``cls.__init__`` assigns them
    (without the call); None when the checked path must decide."""
    if not cython.compiled:
        return None
    group = ext.get("consumerGroup")
    topic = ext.get("topic")
    if type(group) is not str or type(topic) is not str:
        return None
    queue_id = _int32(ext.get("queueId"))
    queue_offset = _int64(ext.get("queueOffset"))
    max_nums = _int32(ext.get("maxMsgNums"))
    sys_flag = _int32(ext.get("sysFlag"))
    commit_offset = _int64(ext.get("commitOffset"))
    suspend = _int64(ext.get("suspendTimeoutMillis"))
    sub_version = _int64(ext.get("subVersion"))
    if (
        queue_id is None
        or queue_offset is None
        or max_nums is None
        or sys_flag is None
        or commit_offset is None
        or suspend is None
        or sub_version is None
    ):
        return None
    max_bytes = _opt_int32(ext.get("maxMsgBytes"))
    if max_bytes is _DECLINED:
        return None
    header: Any = object.__new__(cls)
    header.consumer_group = group
    header.topic = topic
    header.queue_id = queue_id
    header.queue_offset = queue_offset
    header.max_msg_nums = max_nums
    header.sys_flag = sys_flag
    header.commit_offset = commit_offset
    header.suspend_timeout_millis = suspend
    header.sub_version = sub_version
    header.subscription = ext.get("subscription")
    header.expression_type = ext.get("expressionType") or None
    header.max_msg_bytes = max_bytes
    return header
