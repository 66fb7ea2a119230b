# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: always_allow_keywords=False, binding=False
"""The JSON command header's direct read, compiled: header bytes -> command, no dict.

Owns: :func:`decode` and :func:`decode_frame` (a typed scanner, ``_Scanner``,
reads the header bytes straight into the command's fields and its ext-field
dict: strings cut out of the buffer, escapes undone and integers parsed in
C). They take only what the usual header holds (objects, strings, canonical
integers, true, false, null where ``header_json``'s dict route takes them)
and return None on anything else (floats, nesting in ext fields, a number
past its Java field, any doubt): ``header_json`` then decodes it with its
dict route, so that every result and every error is the dict route's. The
writing side is ``header_write``.

Also :func:`send_answer` and :func:`pull_answer`: the fields of a send's or
a pull's answer that its result needs, read without a command or a dict (a
client connection's whole answers to one-by-one sends and to a consumer's
pulls), None wherever the full decode might differ. And a SEND_MESSAGE_V2's
or a PULL_MESSAGE's ext fields left unread by :func:`decode_frame`
(``command.LazyExtCommand``, when every key and value is a string that reads
back the same): :func:`send_header_v2` and :func:`pull_header_lazy` read the
header from the frame where the scan noted each field, so a broker's send or
pull builds no ext-field dict.

Compiled only (the first line; ``setup.py``): interpreted, :data:`COMPILED`
is False and ``header_json`` never calls in (``orjson``'s dict route is faster
there); the functions would only return None.
"""

from __future__ import annotations

from typing import Any

import cython

from apogee.codes import LanguageCode, SerializeType
from apogee.protocol.command import LazyExtCommand, RemotingCommand, new_command, new_lazy_command

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import digits_at, get32, same_at
    from cython.cimports.cpython.buffer import PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.unicode import PyUnicode_DecodeUTF8
    from cython.cimports.libc.stdlib import free, malloc
else:
    from apogee._util.bytes_be import same_at

#: Whether this module runs compiled (``header_json`` calls in only then).
COMPILED: bool = cython.compiled

_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}
_JAVA = LanguageCode.JAVA
_JSON = SerializeType.JSON

# Java's int bounds as C numbers
_I32_MIN = cython.declare(cython.longlong, -(2**31))
_I32_MAX = cython.declare(cython.longlong, 2**31 - 1)
# An integer literal of more digits may not fit a long long: the dict route takes it.
_MAX_DIGITS = cython.declare(cython.Py_ssize_t, 18)

_WS = cython.declare(cython.int, 1)
_FIELD_CODE = cython.declare(cython.int, 1)
_FIELD_EXT = cython.declare(cython.int, 2)
_FIELD_FLAG = cython.declare(cython.int, 3)
_FIELD_LANGUAGE = cython.declare(cython.int, 4)
_FIELD_OPAQUE = cython.declare(cython.int, 5)
_FIELD_REMARK = cython.declare(cython.int, 6)
_FIELD_VERSION = cython.declare(cython.int, 7)
_FIELD_OTHER = cython.declare(cython.int, 8)

# What ``_Scanner.fields`` reads: a command, a send's answer or a pull's answer; and
# the kind of request whose ext fields ``decode_frame`` may leave unread
# (``command.LazyExtCommand``): a send (SEND_MESSAGE_V2) or a pull (PULL_MESSAGE).
_COMMAND = cython.declare(cython.int, 0)
_SEND = cython.declare(cython.int, 1)
_PULL = cython.declare(cython.int, 2)
_SEND_MESSAGE_V2 = cython.declare(cython.longlong, 310)
_PULL_MESSAGE = cython.declare(cython.longlong, 11)


@cython.cfunc
@cython.exceptval(check=False)
def _field(p: cython.p_uchar, at: cython.Py_ssize_t, n: cython.Py_ssize_t) -> cython.int:
    """Which top-level key ``p[at:at + n]`` (unescaped, without quotes) is."""
    if n == 4 and same_at(p, at, b"code", 4):
        return _FIELD_CODE
    if n == 9 and same_at(p, at, b"extFields", 9):
        return _FIELD_EXT
    if n == 4 and same_at(p, at, b"flag", 4):
        return _FIELD_FLAG
    if n == 8 and same_at(p, at, b"language", 8):
        return _FIELD_LANGUAGE
    if n == 6 and same_at(p, at, b"opaque", 6):
        return _FIELD_OPAQUE
    if n == 6 and same_at(p, at, b"remark", 6):
        return _FIELD_REMARK
    if n == 7 and same_at(p, at, b"version", 7):
        return _FIELD_VERSION
    return _FIELD_OTHER


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _hex(c: cython.uchar) -> cython.int:
    if 0x30 <= c <= 0x39:  # 0-9
        return c - 0x30
    if 0x61 <= c <= 0x66:  # a-f
        return c - 0x61 + 10
    if 0x41 <= c <= 0x46:  # A-F
        return c - 0x41 + 10
    return -1


# The headers whose ext fields ``decode_frame`` may leave unread (``_ExtFields``,
# of kind _SEND or _PULL) have at most this many fields
_MAX_FIELDS = cython.declare(cython.int, 14)
# SEND_MESSAGE_V2's one-letter names in field order (``headers._SHORT_NAMES``):
# a..k, then m (batch) before l (maxReconsumeTimes), then n
_V2_REQUIRED = cython.declare(cython.uint, 0xFF)  # a..h: groups, topics and numbers
_V2_NUMBERS = cython.declare(cython.uint, 0x1EF8)  # d..h, j..m: numbers and booleans
# PULL_MESSAGE's names in the header's field order (``headers.PullMessageRequestHeader``)
_PULL_REQUIRED = cython.declare(cython.uint, 0x1FF)  # consumerGroup .. subVersion
_PULL_NUMBERS = cython.declare(cython.uint, 0x9FC)  # queueId .. subVersion, maxMsgBytes


@cython.cfunc
@cython.exceptval(check=False)
def _pull_index(p: cython.p_uchar, at: cython.Py_ssize_t, n: cython.Py_ssize_t) -> cython.int:
    """The field number of the pull header's key ``p[at:at + n]``; -1 for any other."""
    if n == 5:
        return 1 if same_at(p, at, b"topic", 5) else -1
    if n == 7:
        if same_at(p, at, b"queueId", 7):
            return 2
        return 5 if same_at(p, at, b"sysFlag", 7) else -1
    if n == 10:
        if same_at(p, at, b"maxMsgNums", 10):
            return 4
        return 8 if same_at(p, at, b"subVersion", 10) else -1
    if n == 11:
        if same_at(p, at, b"queueOffset", 11):
            return 3
        return 11 if same_at(p, at, b"maxMsgBytes", 11) else -1
    if n == 12:
        if same_at(p, at, b"commitOffset", 12):
            return 6
        return 9 if same_at(p, at, b"subscription", 12) else -1
    if n == 13:
        return 0 if same_at(p, at, b"consumerGroup", 13) else -1
    if n == 14:
        return 10 if same_at(p, at, b"expressionType", 14) else -1
    if n == 20:
        return 7 if same_at(p, at, b"suspendTimeoutMillis", 20) else -1
    return -1


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _v2_index(c: cython.uchar) -> cython.int:
    """The field number of the one-letter key ``c``; -1 for any other key."""
    if c == 0x6C:  # l
        return 12
    if c == 0x6D:  # m
        return 11
    if 0x61 <= c <= 0x6E:  # a-n
        return c - 0x61
    return -1


@cython.cfunc
@cython.exceptval(check=False)
def _raw_bool(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.int:
    """An optional boolean's spelling: 1, 0 (also when empty) or -1 for any other."""
    n: cython.Py_ssize_t = end - start
    if n == 0 or (n == 5 and same_at(p, start, b"false", 5)) or (n == 1 and p[start] == 0x30):
        return 0
    if (n == 4 and same_at(p, start, b"true", 4)) or (n == 1 and p[start] == 0x31):
        return 1
    return -1


@cython.final
@cython.cclass
class _ExtFields:
    """Where each field of a send's (SEND_MESSAGE_V2) or a pull's header lies in a
    frame, and its number."""

    p: cython.p_uchar
    kind: cython.int  # _SEND or _PULL
    #: per field (by its number in the header): where its value starts and ends in
    #: ``p``, and the number read from it; one allocation of three arrays of 14
    starts: cython.p_longlong
    ends: cython.p_longlong
    numbers: cython.p_longlong
    seen: cython.uint
    escaped: cython.uint  # values with escapes: only strings may have them
    #: False once a key had escapes or one of the header's came twice: the checked
    #: decode reads it then (any other key is left out, as the kernels leave it)
    usable: cython.bint

    def __cinit__(self) -> None:
        self.usable = True
        block = cython.cast(cython.p_longlong, malloc(3 * _MAX_FIELDS * 8))
        if block == cython.NULL:
            raise MemoryError
        self.starts = block
        self.ends = block + _MAX_FIELDS
        self.numbers = block + 2 * _MAX_FIELDS

    def __dealloc__(self) -> None:
        free(self.starts)

    @cython.cfunc
    @cython.exceptval(check=False)
    def number(self, k: cython.int, java_int: cython.bint) -> cython.bint:
        """Field ``k`` read into ``numbers[k]`` as ``header_kernels`` reads it; False
        where that declines."""
        if not digits_at(self.p, self.starts[k], self.ends[k], self.numbers + k):
            return False
        return not java_int or _I32_MIN <= self.numbers[k] <= _I32_MAX

    @cython.cfunc
    def optional(self, k: cython.int) -> object:
        """An optional Java int: None when missing or empty, ``self`` to decline."""
        if not self.seen & (1 << k) or self.ends[k] == self.starts[k]:
            return None
        return self.numbers[k] if self.number(k, True) else self

    @cython.cfunc
    def text(self, k: cython.int) -> object:
        """A string value, its escapes undone (``plain_ext`` checked both)."""
        p: cython.p_uchar = self.p
        if self.escaped & (1 << k):
            return _unescape(p, self.starts[k], self.ends[k])
        return _utf8(p, self.starts[k], self.ends[k])

    @cython.cfunc
    def pull_header(self, cls: type[Any]) -> object:
        """The pull header, or None where ``header_kernels.pull_header`` might read
        otherwise."""
        if self.seen & _PULL_REQUIRED != _PULL_REQUIRED or self.escaped & _PULL_NUMBERS:
            return None
        for k in (2, 4, 5):  # queueId, maxMsgNums, sysFlag: Java ints
            if not self.number(k, True):
                return None
        for k in (3, 6, 7, 8):  # queueOffset, commitOffset, suspendTimeoutMillis, subVersion
            if not self.number(k, False):
                return None
        max_bytes = self.optional(11)
        if max_bytes is self:
            return None
        has_type: cython.bint = (self.seen & 0x400) != 0 and self.ends[10] > self.starts[10]
        return cls(
            self.text(0), self.text(1), self.numbers[2], self.numbers[3], self.numbers[4],
            self.numbers[5], self.numbers[6], self.numbers[7], self.numbers[8],
            self.text(9) if self.seen & 0x200 else None,
            self.text(10) if has_type else None, max_bytes,
        )  # fmt: skip

    @cython.cfunc
    def send_header(self, cls: type[Any]) -> object:
        """The send header, or None where ``header_kernels.send_header`` might read
        otherwise."""
        if self.seen & _V2_REQUIRED != _V2_REQUIRED or self.escaped & _V2_NUMBERS:
            return None
        for k in (3, 4, 5, 7):  # d, e, f, h: Java ints
            if not self.number(k, True):
                return None
        if not self.number(6, False):  # g: bornTimestamp, a long
            return None
        reconsume = self.optional(9)
        max_reconsume = self.optional(12)
        unit: cython.int = (
            _raw_bool(self.p, self.starts[10], self.ends[10]) if self.seen & 0x400 else 0
        )
        batch: cython.int = (
            _raw_bool(self.p, self.starts[11], self.ends[11]) if self.seen & 0x800 else 0
        )
        if reconsume is self or max_reconsume is self or unit < 0 or batch < 0:
            return None
        has_name: cython.bint = (self.seen & 0x2000) != 0 and self.ends[13] > self.starts[13]
        # the class's own __init__, positionally: its slot stores are the interpreter's
        # specialised ones, cheaper than fourteen generic setattr calls from here
        return cls(
            self.text(0), self.text(1), self.text(2), self.numbers[3], self.numbers[4],
            self.numbers[5], self.numbers[6], self.numbers[7],
            self.text(8) if self.seen & 0x100 else None, reconsume, unit == 1, batch == 1,
            max_reconsume, self.text(13) if has_name else None,
        )  # fmt: skip


@cython.final
@cython.cclass
class _Scanner:
    """One JSON header's bytes and the read position in them (compiled only)."""

    p: cython.p_uchar
    n: cython.Py_ssize_t
    i: cython.Py_ssize_t
    #: the integer read by ``integer``
    number: cython.longlong
    #: where the key read by ``key`` starts and how long it is (-1: escaped)
    key_at: cython.Py_ssize_t
    key_len: cython.Py_ssize_t
    #: what ``fields`` read: the header's numbers, whether it had a code, its
    #: remark and language (None: absent), its ext fields (a dict) or, for a
    #: send's answer, whether they were there
    code: cython.longlong
    opaque: cython.longlong
    flag: cython.longlong
    version: cython.longlong
    has_code: cython.bint
    has_ext: cython.bint
    remark: Any
    language: object
    ext: Any
    #: ``command`` may leave a SEND_MESSAGE_V2's ext fields unread (``decode_frame``:
    #: the frame's bytes outlive the command); ``lazy`` when it did, with their
    #: object's range in the header
    may_defer: cython.bint
    lazy: cython.bint
    ext_at: cython.Py_ssize_t
    ext_end: cython.Py_ssize_t
    noted: _ExtFields
    #: what ``send_field`` picked out of a send answer's ext fields (-1: absent)
    msg_id: Any
    transaction_id: Any
    region: Any
    queue_id: cython.longlong
    queue_offset: cython.longlong
    #: what ``pull_field`` picked out of a pull answer's ext fields (-1: absent)
    next_begin: cython.longlong
    min_offset: cython.longlong
    max_offset: cython.longlong
    suggested: cython.longlong

    @cython.cfunc
    @cython.inline
    @cython.exceptval(check=False)
    def ws(self) -> cython.uchar:
        """Skip white space; the byte there, 0 at the end."""
        i: cython.Py_ssize_t = self.i
        p: cython.p_uchar = self.p
        while i < self.n:
            c: cython.uchar = p[i]
            if c != 0x20 and c != 0x0A and c != 0x0D and c != 0x09:  # noqa: PLR1714  # C compares
                self.i = i
                return c
            i += 1
        self.i = i
        return 0

    @cython.cfunc
    @cython.inline
    @cython.exceptval(check=False)
    def expect(self, c: cython.uchar) -> cython.bint:
        """Skip white space and ``c``; False if something else comes."""
        if self.ws() != c:
            return False
        self.i += 1
        return True

    @cython.cfunc
    @cython.exceptval(check=False)
    def word(self, text: cython.p_char, n: cython.Py_ssize_t) -> cython.bint:
        """``true``, ``false`` or ``null`` at the position; True and past it if there."""
        if self.n - self.i < n or not same_at(self.p, self.i, text, n):
            return False
        self.i += n
        return True

    @cython.cfunc
    @cython.exceptval(check=False)
    def integer(self) -> cython.Py_ssize_t:
        """A canonical integer literal of at most 18 digits into ``number``; its
        length, or -1 (a fraction, an exponent, "-0", too long or none at all)."""
        p: cython.p_uchar = self.p
        start: cython.Py_ssize_t = self.i
        i: cython.Py_ssize_t = start
        negative: cython.bint = False
        if i < self.n and p[i] == 0x2D:  # -
            negative = True
            i += 1
        digits: cython.Py_ssize_t = i
        value: cython.longlong = 0
        while i < self.n and 0x30 <= p[i] <= 0x39:
            value = value * 10 + (p[i] - 0x30)
            i += 1
            if i - digits > _MAX_DIGITS:
                return -1
        count: cython.Py_ssize_t = i - digits
        if count == 0 or (count > 1 and p[digits] == 0x30) or (negative and value == 0):
            return -1
        if i < self.n and (p[i] == 0x2E or p[i] == 0x65 or p[i] == 0x45):  # . e E
            return -1
        self.number = -value if negative else value
        self.i = i
        return i - start

    @cython.cfunc
    @cython.exceptval(check=False)
    def string_end(self) -> cython.Py_ssize_t:
        """At a '"': the index of the closing quote, with ``key_len`` -1 when
        there are escapes; -1 on a raw control character or no end."""
        p: cython.p_uchar = self.p
        i: cython.Py_ssize_t = self.i + 1
        self.key_at = i
        escaped: cython.bint = False
        while i < self.n:
            c: cython.uchar = p[i]
            if c == 0x22:  # "
                self.key_len = -1 if escaped else i - self.key_at
                return i
            if c == 0x5C:  # backslash: the next byte is never the end
                escaped = True
                i += 2
                continue
            if c < 0x20:
                return -1
            i += 1
        return -1

    @cython.cfunc
    def string(self) -> object:
        """The string at the position (a '"'), past it; None to give up."""
        end: cython.Py_ssize_t = self.string_end()
        if end < 0:
            return None
        start: cython.Py_ssize_t = self.key_at
        self.i = end + 1
        if self.key_len >= 0:
            return _utf8(self.p, start, end)
        return _unescape(self.p, start, end)

    @cython.cfunc
    def scalar(self) -> object:
        """An ext-field value as the dict route makes it a string; None for null,
        ``self`` to give up."""
        c: cython.uchar = self.ws()
        if c == 0x22:
            text = self.string()
            return self if text is None else text
        if c == 0x74:  # t
            return "true" if self.word(b"true", 4) else self
        if c == 0x66:  # f
            return "false" if self.word(b"false", 5) else self
        if c == 0x6E:  # n
            return None if self.word(b"null", 4) else self
        start: cython.Py_ssize_t = self.i
        length: cython.Py_ssize_t = self.integer()
        if length < 0:
            return self
        # a canonical literal is already str(int(literal))
        return _utf8(self.p, start, start + length)

    @cython.cfunc
    def ext_fields(self) -> object:
        """The ext-field object at the position, past it; None to give up."""
        ext: dict[Any, Any] = {}  # str -> str | None (null) until the end
        nulls: cython.bint = False
        self.i += 1  # {
        c: cython.uchar = self.ws()
        if c == 0x7D:  # }
            self.i += 1
            return ext
        while True:
            if c != 0x22:
                return None
            key = self.string()
            if key is None or not self.expect(0x3A):  # :
                return None
            value = self.scalar()
            if value is self:
                return None
            # a null is dropped at the end: a later duplicate keeps the first one's place
            nulls = nulls or value is None
            ext[key] = value
            c = self.ws()
            self.i += 1
            if c == 0x7D:
                return _without_nulls(ext) if nulls else ext
            if c != 0x2C:  # ,
                return None
            c = self.ws()

    @cython.cfunc
    @cython.exceptval(check=False)
    def plain_string(self) -> cython.bint:
        """At a '"': step over a string that ``string`` reads; False if it would not.

        Its bytes are UTF-8 and its escapes good (``_valid_escapes``): an escape
        stands for valid UTF-8 and never joins the bytes around it, so that is
        exactly when ``_unescape`` reads it."""
        end: cython.Py_ssize_t = self.string_end()
        if end < 0 or not _valid_utf8(self.p, self.key_at, end):
            return False
        if self.key_len < 0 and not _valid_escapes(self.p, self.key_at, end):
            return False
        self.i = end + 1
        return True

    @cython.cfunc
    @cython.exceptval(check=False)
    def plain_ext(self, kind: cython.int) -> cython.bint:
        """Step over the ext-field object at the position when every key and value in
        it is a plain string (``plain_string``), noting its range (``lazy``) and
        where the ``kind`` of header's fields lie in it (``noted``); else False, the position
        unchanged. Such an object is one ``ext_fields`` reads into the same dict
        whenever asked, so reading it can wait."""
        start: cython.Py_ssize_t = self.i
        self.i += 1  # {
        c: cython.uchar = self.ws()
        if c == 0x7D:  # }
            self.i = start
            return False  # nothing to defer
        noted: _ExtFields = _ExtFields.__new__(_ExtFields)
        noted.p = self.p
        noted.kind = kind
        k: cython.int
        while c == 0x22:
            if not self.plain_string() or not self.expect(0x3A) or self.ws() != 0x22:
                break
            if self.key_len < 0:  # escapes: it may be one of the header's names
                noted.usable = False
                k = -1
            elif kind == _SEND:
                k = _v2_index(self.p[self.key_at]) if self.key_len == 1 else -1
            else:
                k = _pull_index(self.p, self.key_at, self.key_len)
            if k >= 0 and noted.seen & (1 << k):
                noted.usable = False  # twice: the dict keeps the last
            if not self.plain_string():
                break
            if k >= 0:
                noted.seen |= 1 << k
                noted.starts[k] = self.key_at
                noted.ends[k] = self.i - 1
                if self.key_len < 0:
                    noted.escaped |= 1 << k
            c = self.ws()
            self.i += 1
            if c == 0x7D:
                self.lazy = True
                self.ext_at = start
                self.ext_end = self.i
                self.noted = noted
                return True
            if c != 0x2C:  # ,
                break
            c = self.ws()
        self.i = start
        return False

    @cython.cfunc
    @cython.exceptval(check=False)
    def skip_value(self) -> cython.bint:
        """Step over the value of an ignored key; False unless it is a plain scalar."""
        c: cython.uchar = self.ws()
        if c == 0x22:
            end: cython.Py_ssize_t = self.string_end()
            if end < 0 or self.key_len < 0:  # escapes: let orjson check them
                return False
            # the dict route would still refuse text that is not UTF-8
            if not _valid_utf8(self.p, self.key_at, end):
                return False
            self.i = end + 1
            return True
        if c == 0x74:
            return self.word(b"true", 4)
        if c == 0x66:
            return self.word(b"false", 5)
        if c == 0x6E:
            return self.word(b"null", 4)
        return self.integer() >= 0

    @cython.cfunc
    def fields(self, answer: cython.int) -> cython.bint:  # noqa: PLR0915  # one pass
        """Read the header object's fields into the scanner, to its end; False to give up.

        The ext fields become ``ext``, a dict (``null``: empty; a second object
        replaces the first, as the dict route's last key wins); for an
        ``answer`` (_SEND, _PULL) ``answer_ext`` picks from them instead, and
        the language is stepped over.
        """
        field: cython.int
        at: cython.Py_ssize_t
        if not self.expect(0x7B):  # {
            return False
        c: cython.uchar = self.ws()
        while c == 0x22:
            end: cython.Py_ssize_t = self.string_end()
            if end < 0 or self.key_len < 0:
                return False
            at = self.key_at
            field = _field(self.p, at, self.key_len)
            self.i = end + 1
            if not self.expect(0x3A):  # :
                return False
            c = self.ws()
            if field == _FIELD_EXT:
                if answer != _COMMAND:
                    # null, or a second object (it would replace the first)
                    if c != 0x7B or self.has_ext or not self.answer_ext(answer):
                        return False
                elif c == 0x7B:
                    self.lazy = False  # a second object replaces the first
                    kind: cython.int = 0
                    if self.may_defer and self.has_code:
                        if self.code == _SEND_MESSAGE_V2:
                            kind = _SEND
                        elif self.code == _PULL_MESSAGE:
                            kind = _PULL
                    if kind and self.plain_ext(kind):
                        self.ext = None  # read when asked for (LazyExtCommand)
                    else:
                        self.ext = self.ext_fields()
                        if self.ext is None:
                            return False
                elif self.word(b"null", 4):
                    self.lazy = False
                    self.ext = {}
                else:
                    return False
                self.has_ext = True
            elif field == _FIELD_LANGUAGE and answer == _COMMAND:
                if c == 0x22:
                    self.language = self.string()
                    if self.language is None:
                        return False
                elif self.integer() >= 0:
                    self.language = self.number
                else:
                    return False
            elif field == _FIELD_REMARK:
                if c != 0x22:
                    return False
                self.remark = self.string()
                if self.remark is None:
                    return False
            elif field == _FIELD_LANGUAGE or field == _FIELD_OTHER:  # noqa: PLR1714, SIM109  # C compares
                # orjson refuses a document with a key that is not UTF-8
                if not _valid_utf8(self.p, at, end) or not self.skip_value():
                    return False
            else:
                # code, opaque, flag, version: an int that fits, else the dict route
                if self.integer() < 0 or not _I32_MIN <= self.number <= _I32_MAX:
                    return False
                if field == _FIELD_CODE:
                    self.code = self.number
                    self.has_code = True
                elif field == _FIELD_OPAQUE:
                    self.opaque = self.number
                elif field == _FIELD_FLAG:
                    self.flag = self.number
                else:
                    self.version = self.number
            c = self.ws()
            self.i += 1
            if c == 0x7D:  # }
                break
            if c != 0x2C:  # ,
                return False
            c = self.ws()
        else:
            return False  # "{}" or a key that is not a string
        self.ws()
        return self.i == self.n and self.has_code

    @cython.cfunc
    def answer_ext(self, answer: cython.int) -> cython.bint:
        """Pick the fields of a send's (_SEND) or a pull's (_PULL) answer out of the
        ext-field object at the position, past it; False to give up. Other keys are
        stepped over."""
        at: cython.Py_ssize_t
        n: cython.Py_ssize_t
        picked: cython.int
        self.i += 1  # {
        c: cython.uchar = self.ws()
        while c != 0x7D:
            if c != 0x22:
                return False
            end: cython.Py_ssize_t = self.string_end()
            if end < 0 or self.key_len < 0:
                return False
            at = self.key_at
            n = self.key_len
            self.i = end + 1
            if not self.expect(0x3A):
                return False
            c = self.ws()
            picked = self.send_field(at, n, c) if answer == _SEND else self.pull_field(at, n, c)
            if picked < 0:
                return False
            if picked == 0 and (not _valid_utf8(self.p, at, end) or not self.skip_value()):
                return False
            c = self.ws()
            if c == 0x2C:  # ,
                self.i += 1
                c = self.ws()
                if c == 0x7D:  # a trailing comma
                    return False
            elif c != 0x7D:
                return False
        self.i += 1  # }
        return True

    @cython.cfunc
    def send_field(
        self, at: cython.Py_ssize_t, n: cython.Py_ssize_t, c: cython.uchar
    ) -> cython.int:
        """The value of the send answer's key ``p[at:at + n]`` (its first byte ``c``):
        1 read, 0 not a key of the result, -1 to give up."""
        if n == 5 and same_at(self.p, at, b"msgId", 5):
            self.msg_id = self.string() if c == 0x22 else None
            return -1 if self.msg_id is None else 1
        if n == 7 and same_at(self.p, at, b"queueId", 7):
            self.queue_id = _quoted_count(self) if c == 0x22 else -1
            return -1 if self.queue_id < 0 else 1
        if n == 11 and same_at(self.p, at, b"queueOffset", 11):
            self.queue_offset = _quoted_count(self) if c == 0x22 else -1
            return -1 if self.queue_offset < 0 else 1
        if n == 13 and same_at(self.p, at, b"transactionId", 13):
            self.transaction_id = self.string() if c == 0x22 else None
            return -1 if self.transaction_id is None else 1
        if n == 10 and same_at(self.p, at, b"MSG_REGION", 10):
            self.region = self.string() if c == 0x22 else None
            return -1 if self.region is None else 1
        return 0

    @cython.cfunc
    def pull_field(
        self, at: cython.Py_ssize_t, n: cython.Py_ssize_t, c: cython.uchar
    ) -> cython.int:
        """``send_field`` for a pull answer's offsets."""
        value: cython.longlong
        if n == 15 and same_at(self.p, at, b"nextBeginOffset", 15):
            value = self.next_begin = _quoted_count(self) if c == 0x22 else -1
        elif n == 9 and same_at(self.p, at, b"minOffset", 9):
            value = self.min_offset = _quoted_count(self) if c == 0x22 else -1
        elif n == 9 and same_at(self.p, at, b"maxOffset", 9):
            value = self.max_offset = _quoted_count(self) if c == 0x22 else -1
        elif n == 20 and same_at(self.p, at, b"suggestWhichBrokerId", 20):
            value = self.suggested = _quoted_count(self) if c == 0x22 else -1
        else:
            return 0
        return -1 if value < 0 else 1

    @cython.cfunc
    def command(self, body: Any, frame: Any = None) -> object:
        """The command of the whole header; None to give up. ``frame``: the bytes the
        header lies in, 8 bytes on (``decode_frame``), kept by a command whose ext
        fields were left unread."""
        if not self.fields(_COMMAND):
            return None
        language = self.language
        if language is None:
            lang = _JAVA  # what the dict route makes of an absent language
        else:
            known = _LANGUAGE_BY_NAME.get(language) if type(language) is str else None
            if known is None:  # a number or an unknown name: the dict route's quirks decide
                return None
            lang = known
        if self.lazy:
            return new_lazy_command(
                self.code, lang, self.version, self.opaque, self.flag, self.remark, body,
                frame, self.ext_at + 8, self.ext_end + 8, self.noted,
            )  # fmt: skip
        ext = self.ext
        return new_command(
            self.code,
            lang,
            self.version,
            self.opaque,
            self.flag,
            self.remark,
            {} if ext is None else ext,
            body,
            _JSON,
        )


def _without_nulls(ext: dict[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in ext.items() if value is not None}


# -- a send's ext fields, read when asked for ------------------------------------


def _ext_of(frame: bytes, at: cython.Py_ssize_t, end: cython.Py_ssize_t) -> dict[str, str]:
    """The ext-field dict of the object at ``frame[at:end]`` (checked by ``plain_ext``)."""
    scanner: _Scanner = _Scanner.__new__(_Scanner)
    scanner.p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(frame))
    scanner.n = end
    scanner.i = at
    ext: Any = scanner.ext_fields()
    if ext is None:  # plain_ext took it: cannot happen
        raise RuntimeError("ext fields checked at decode are unreadable")
    return ext  # type: ignore[no-any-return]


def send_header_v2(cmd: object, cls: type[Any]) -> Any:
    """The send header of a ``LazyExtCommand``, read from its frame where
    ``plain_ext`` noted its fields, as ``header_kernels.send_header`` reads them; None
    for any other command and wherever that kernel or the checked path might read
    otherwise (a key that is not one of a..n, a key twice, a number or a boolean
    that kernel declines), so that the caller decodes ``cmd.ext_fields`` as before."""
    if not cython.compiled or type(cmd) is not LazyExtCommand:
        return None
    fields: _ExtFields = cmd.fields  # type: ignore[assignment]  # plain_ext made it
    if not fields.usable or fields.kind != _SEND:
        return None
    return fields.send_header(cls)


def pull_header_lazy(cmd: object, cls: type[Any]) -> Any:
    """``send_header_v2`` for a PULL_MESSAGE: the pull header as
    ``header_kernels.pull_header`` reads it, or None where that might read otherwise."""
    if not cython.compiled or type(cmd) is not LazyExtCommand:
        return None
    fields: _ExtFields = cmd.fields  # type: ignore[assignment]  # plain_ext made it
    if not fields.usable or fields.kind != _PULL:
        return None
    return fields.pull_header(cls)


LazyExtCommand.read_ext = _ext_of


@cython.cfunc
def _utf8(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> object:
    """``p[start:end]`` decoded; None unless it is UTF-8 (surrogates are not)."""
    if cython.compiled:
        try:
            text: str = PyUnicode_DecodeUTF8(
                cython.cast(cython.p_char, p) + start, end - start, cython.NULL
            )
        except UnicodeDecodeError:
            return None
        return text
    try:
        return str(p[start:end], "utf-8")
    except UnicodeDecodeError:
        return None


@cython.cfunc
@cython.exceptval(check=False)
def _valid_utf8(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.bint:
    i: cython.Py_ssize_t
    for i in range(start, end):
        if p[i] >= 0x80:
            return _utf8(p, start, end) is not None
    return True


@cython.cfunc
@cython.exceptval(check=False)
def _put_utf8(out: cython.p_uchar, at: cython.Py_ssize_t, u: cython.uint) -> cython.Py_ssize_t:
    """Code point ``u`` as UTF-8 at ``out[at]``; the index after it."""
    if u < 0x80:
        out[at] = u
        return at + 1
    if u < 0x800:
        out[at] = 0xC0 | (u >> 6)
        out[at + 1] = 0x80 | (u & 0x3F)
        return at + 2
    if u < 0x10000:
        out[at] = 0xE0 | (u >> 12)
        out[at + 1] = 0x80 | ((u >> 6) & 0x3F)
        out[at + 2] = 0x80 | (u & 0x3F)
        return at + 3
    out[at] = 0xF0 | (u >> 18)
    out[at + 1] = 0x80 | ((u >> 12) & 0x3F)
    out[at + 2] = 0x80 | ((u >> 6) & 0x3F)
    out[at + 3] = 0x80 | (u & 0x3F)
    return at + 4


@cython.cfunc
@cython.exceptval(check=False)
def _u4(p: cython.p_uchar, at: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.int:
    """The four hex digits of a \\u escape at ``p[at]``; -1 if they are not."""
    if end - at < 4:
        return -1
    a: cython.int = _hex(p[at])
    b: cython.int = _hex(p[at + 1])
    c: cython.int = _hex(p[at + 2])
    d: cython.int = _hex(p[at + 3])
    if a < 0 or b < 0 or c < 0 or d < 0:
        return -1
    return (a << 12) | (b << 8) | (c << 4) | d


@cython.cfunc
@cython.exceptval(check=False)
def _valid_escapes(
    p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> cython.bint:
    """Whether every escape in ``p[start:end]`` is one ``_unescape`` undoes (the same
    walk, without writing)."""
    i: cython.Py_ssize_t = start
    u: cython.int
    while i < end:
        if p[i] != 0x5C:
            i += 1
            continue
        c: cython.uchar = p[i + 1]
        i += 2
        if c == 0x75:  # u
            u = _u4(p, i, end)
            if u < 0:
                return False
            i += 4
            if 0xD800 <= u <= 0xDBFF:
                if end - i < 6 or p[i] != 0x5C or p[i + 1] != 0x75:
                    return False
                if not 0xDC00 <= _u4(p, i + 2, end) <= 0xDFFF:
                    return False
                i += 6
            elif 0xDC00 <= u <= 0xDFFF:
                return False
        elif c not in b'"\\/ntrbf':
            return False
    return True


@cython.cfunc
def _unescape(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> object:
    """The JSON string body ``p[start:end]`` with its escapes undone; None if one
    is bad (orjson's error then) or the text is not UTF-8."""
    if not cython.compiled:
        return None  # never called interpreted
    # an escape is never shorter than what it stands for in UTF-8
    out: cython.p_uchar = cython.cast(cython.p_uchar, malloc(end - start + 1))
    if out == cython.NULL:
        raise MemoryError
    try:
        o: cython.Py_ssize_t = 0
        i: cython.Py_ssize_t = start
        u: cython.int
        low: cython.int
        while i < end:
            c: cython.uchar = p[i]
            if c != 0x5C:
                out[o] = c
                o += 1
                i += 1
                continue
            c = p[i + 1]
            i += 2
            if c == 0x22 or c == 0x5C or c == 0x2F:  # noqa: PLR1714  # " \ /
                out[o] = c
            elif c == 0x6E:  # n
                out[o] = 0x0A
            elif c == 0x74:  # t
                out[o] = 0x09
            elif c == 0x72:  # r
                out[o] = 0x0D
            elif c == 0x62:  # b
                out[o] = 0x08
            elif c == 0x66:  # f
                out[o] = 0x0C
            elif c == 0x75:  # u
                u = _u4(p, i, end)
                if u < 0:
                    return None
                i += 4
                if 0xD800 <= u <= 0xDBFF:  # a pair, or orjson's error
                    if end - i < 6 or p[i] != 0x5C or p[i + 1] != 0x75:
                        return None
                    low = _u4(p, i + 2, end)
                    if not 0xDC00 <= low <= 0xDFFF:
                        return None
                    i += 6
                    u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                elif 0xDC00 <= u <= 0xDFFF:
                    return None
                o = _put_utf8(out, o, u)
                continue
            else:
                return None
            o += 1
        return _utf8(out, 0, o)
    finally:
        free(out)


def decode_frame(data: object, max_frame_bytes: cython.Py_ssize_t) -> RemotingCommand | None:
    """The command of ``data`` when it is exactly one whole JSON frame within
    ``max_frame_bytes`` whose header the scanner reads; None for anything else.

    ``framing.FrameDecoder.read`` asks this first for a read that starts on a
    frame boundary: the usual request (one frame per read) is then decoded
    without slicing its header out or passing through the decoder's loop. On
    None the decoder goes its usual way, which decides (and raises) as always.
    """
    if not cython.compiled:
        return None
    if type(data) is not bytes:
        return None
    n: cython.Py_ssize_t = len(data)
    if n < 8 or n > max_frame_bytes:
        return None
    p: cython.p_uchar = cython.cast(cython.p_uchar, PyBytes_AS_STRING(data))
    length: cython.Py_ssize_t = get32(p, 0)
    if length + 4 != n:  # a partial frame, more than one, or a bad length word
        return None
    type_word: cython.uint = cython.cast(cython.uint, get32(p, 4))
    if type_word >> 24 != 0:  # not JSON (serialize type 0)
        return None
    h: cython.Py_ssize_t = type_word & 0xFFFFFF
    if h > length - 4:
        return None
    start: cython.Py_ssize_t = 8 + h
    body: object = b""
    if n > start:
        body = PyBytes_FromStringAndSize(cython.cast(cython.p_char, p) + start, n - start)
    scanner: _Scanner = _Scanner.__new__(_Scanner)
    scanner.p = p + 8
    scanner.n = h
    scanner.may_defer = True  # data is immutable bytes: the command may keep it
    return scanner.command(body, data)  # type: ignore[return-value]  # a command or None


def decode(header: object, body: Any) -> RemotingCommand | None:
    """The command of ``header`` read by the scanner; None to take the dict route."""
    if not cython.compiled:
        return None
    scanner: _Scanner = _Scanner.__new__(_Scanner)
    view = cython.declare(cython.Py_buffer)
    if type(header) is bytes:
        scanner.p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(header))
        scanner.n = len(header)
        return scanner.command(body)  # type: ignore[return-value]  # a command or None
    try:
        PyObject_GetBuffer(header, cython.address(view), PyBUF_SIMPLE)
    except BufferError:  # not contiguous: orjson decides
        return None
    try:
        scanner.p = cython.cast(cython.p_uchar, view.buf)
        scanner.n = view.len
        return scanner.command(body)  # type: ignore[return-value]  # a command or None
    finally:
        PyBuffer_Release(cython.address(view))


# -- a send's answer: only what its result needs ----------------------------------

#: What ``send_answer`` reads: (opaque, code, remark, msgId, queueId, queueOffset,
#: transactionId, MSG_REGION), the fields ``broker_api.send_result`` takes from
#: the answer's command.
SendAnswer = tuple[int, int, str | None, str, int, int, str | None, str | None]


def send_answer(data: bytes, start: int) -> SendAnswer | None:
    """The fields of a send's answer whose JSON header is ``data[start:]``; None to decode it.

    No command, no ext-field dict, no string for a key: a producer sending one
    message at a time reads one such answer per send. Taken only where the
    full decode would give the same values: a response (flag bit 0) with one
    ``extFields`` object holding msgId, and queueId and queueOffset as strings
    of canonical non-negative integers; other ext fields may be any plain
    scalar. Anything else (escaped keys, numbers for those fields, nulls, any
    doubt) is None, and the caller decodes the frame as any other.
    """
    if not cython.compiled:
        return None
    if type(data) is not bytes:
        return None
    n: cython.Py_ssize_t = len(data)
    at: cython.Py_ssize_t = start
    if at < 0 or at > n:
        return None
    scanner: _Scanner = _Scanner.__new__(_Scanner)
    scanner.p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(data))
    scanner.p += at
    scanner.n = n - at
    return _answer(scanner)  # type: ignore[return-value]  # a SendAnswer or None


@cython.cfunc
@cython.exceptval(check=False)
def _quoted_count(s: _Scanner) -> cython.longlong:
    """A JSON string of a canonical non-negative integer (at most 18 digits), past
    it; -1 to give up."""
    p: cython.p_uchar = s.p
    i: cython.Py_ssize_t = s.i + 1
    digits: cython.Py_ssize_t = i
    value: cython.longlong = 0
    while i < s.n and 0x30 <= p[i] <= 0x39:
        value = value * 10 + (p[i] - 0x30)
        i += 1
        if i - digits > _MAX_DIGITS:
            return -1
    count: cython.Py_ssize_t = i - digits
    if count == 0 or (count > 1 and p[digits] == 0x30) or i >= s.n or p[i] != 0x22:
        return -1
    s.i = i + 1
    return value


@cython.cfunc
def _answer(s: _Scanner) -> object:
    s.queue_id = s.queue_offset = -1
    if not s.fields(_SEND) or not s.flag & 1 or s.msg_id is None:
        return None
    if s.queue_id < 0 or s.queue_offset < 0:
        return None
    return (s.opaque, s.code, s.remark, s.msg_id, s.queue_id, s.queue_offset,
            s.transaction_id, s.region)  # fmt: skip


# -- a pull's answer: only what its result needs ----------------------------------

#: What ``pull_answer`` reads: (opaque, code, remark, nextBeginOffset, minOffset,
#: maxOffset, suggestWhichBrokerId, body), what ``broker_api.pull_result`` takes
#: from the answer's command.
PullAnswer = tuple[int, int, str | None, int, int, int, int, bytes]


def pull_answer(data: bytes, start: int, end: int) -> PullAnswer | None:
    """The fields of a pull's answer whose JSON header is ``data[start:end]`` and whose
    body is ``data[end:]``; None to decode it.

    As :func:`send_answer`: no command, no ext-field dict. Taken only where the
    full decode would give the same values: a response with one ``extFields``
    object holding nextBeginOffset, minOffset, maxOffset and
    suggestWhichBrokerId as strings of canonical non-negative integers; other
    ext fields may be any plain scalar. Anything else is None.
    """
    if not cython.compiled:
        return None
    if type(data) is not bytes:
        return None
    n: cython.Py_ssize_t = len(data)
    at: cython.Py_ssize_t = start
    stop: cython.Py_ssize_t = end
    if at < 0 or stop < at or stop > n:
        return None
    scanner: _Scanner = _Scanner.__new__(_Scanner)
    scanner.p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(data))
    scanner.p += at
    scanner.n = stop - at
    scanner.next_begin = scanner.min_offset = scanner.max_offset = scanner.suggested = -1
    if not scanner.fields(_PULL) or not scanner.flag & 1:
        return None
    if (
        scanner.next_begin < 0
        or scanner.min_offset < 0
        or scanner.max_offset < 0
        or scanner.suggested < 0
    ):
        return None
    body = data[stop:] if stop < n else b""
    return (scanner.opaque, scanner.code, scanner.remark, scanner.next_begin,
            scanner.min_offset, scanner.max_offset, scanner.suggested, body)  # fmt: skip
