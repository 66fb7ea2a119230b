"""The remoting command: one request or response, independent of its encoding.

Owns: ``RemotingCommand`` and the rules for building requests, oneway requests
and responses.

Invariants:
* ``flag`` bit 0 (``FLAG_RESPONSE``) marks a response, bit 1 (``FLAG_ONEWAY``)
  a request the peer must not answer.
* A response keeps the serialize type of its request, except that a response
  to a C++ client is always JSON: its reader never looks at the serialize-type
  byte and parses every header as JSON.
* ``ext_fields`` maps names to strings only (the wire form of custom headers).
* ``body`` is kept as handed in: bytes, a memoryview, or a list of buffers
  (memoryviews of mapped store files) that the transport writes without
  joining. The codec never owns an opaque counter; the connection assigns
  opaques when it sends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeAlias

from apogee.codes import CURRENT_VERSION, LanguageCode, ResponseCode, SerializeType

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

#: Language Apogee announces in the commands it originates.
DEFAULT_LANGUAGE = LanguageCode.PYTHON

Buffer: TypeAlias = bytes | bytearray | memoryview
Body: TypeAlias = Buffer | Sequence[Buffer]


class RemotingCommand:
    """One remoting frame's content; created per request, so kept cheap."""

    __slots__ = (
        "body",
        "code",
        "ext_fields",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        *,
        language: LanguageCode = DEFAULT_LANGUAGE,
        version: int = CURRENT_VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields: dict[str, str] = {} if ext_fields is None else ext_fields
        self.body: Body = body
        self.serialize_type = serialize_type

    # -- construction -------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A request expecting an answer; the connection fills in ``opaque``."""
        return cls(code, ext_fields=ext_fields, body=body, serialize_type=serialize_type)

    @classmethod
    def oneway(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A request the peer processes but never answers."""
        cmd = cls(code, ext_fields=ext_fields, body=body, serialize_type=serialize_type)
        cmd.flag = FLAG_ONEWAY
        return cmd

    def make_response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
    ) -> RemotingCommand:
        """The answer to this request: same opaque, response bit set."""
        return new_command(
            code,
            DEFAULT_LANGUAGE,
            CURRENT_VERSION,
            self.opaque,
            FLAG_RESPONSE,
            remark,
            {} if ext_fields is None else ext_fields,
            body,
            SerializeType.JSON if self.language is _CPP else self.serialize_type,
        )

    # -- queries ------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def body_length(self) -> int:
        body = self.body
        if isinstance(body, bytes | bytearray | memoryview):
            return memoryview(body).nbytes
        return sum(memoryview(part).nbytes for part in body)

    def body_bytes(self) -> bytes:
        """The body as one bytes object (copies a buffer list; avoid on hot paths)."""
        body = self.body
        if isinstance(body, bytes):
            return body
        if isinstance(body, bytearray | memoryview):
            return bytes(body)
        return b"".join(body)

    def body_buffers(self) -> list[Buffer]:
        """The non-empty body buffers in order, without copying any of them."""
        body = self.body
        if isinstance(body, bytes | bytearray | memoryview):
            return [body] if len(body) else []
        return [part for part in body if len(part)]

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "oneway" if self.is_oneway else "request"
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} "
            f"flag={self.flag} language={self.language.name} version={self.version} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} "
            f"body={self.body_length()}B {self.serialize_type.name})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (
            self.code == other.code
            and self.language == other.language
            and self.version == other.version
            and self.opaque == other.opaque
            and self.flag == other.flag
            and self.remark == other.remark
            and self.ext_fields == other.ext_fields
            and self.serialize_type == other.serialize_type
            and self.body_bytes() == other.body_bytes()
        )

    __hash__ = None  # type: ignore[assignment]  # mutable


_new = object.__new__
_CPP = LanguageCode.CPP


# Positional and without keyword matching: one is built for every frame
# decoded and every answer, and ``__init__`` with keywords costs twice as much.
def new_command(  # noqa: PLR0917
    code: int,
    language: LanguageCode,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    body: Body,
    serialize_type: SerializeType,
) -> RemotingCommand:
    """``RemotingCommand(...)`` with every field given, in slot order (hot paths)."""
    cmd: RemotingCommand = _new(RemotingCommand)
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext_fields
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


def response_serialize_type(request: RemotingCommand) -> SerializeType:
    """How to encode the answer to ``request`` (C++ readers only parse JSON)."""
    if request.language == LanguageCode.CPP:
        return SerializeType.JSON
    return request.serialize_type


_EXT_SLOT: Any = RemotingCommand.__dict__["ext_fields"]


class LazyExtCommand(RemotingCommand):
    """A request whose ext fields are read from its frame on first use.

    ``header_scan.decode_frame`` makes one for a SEND_MESSAGE_V2 or a PULL_MESSAGE
    whose ext-field object it checked (``plain_ext``) and left unread: the handler
    reads the header straight from the frame (``header_scan.send_header_v2`` or
    ``pull_header_lazy``, at the positions ``fields`` noted), so it builds no
    ext-field dict; whatever asks for ``ext_fields`` (an ACL check, a header those
    readers decline) gets the dict an eager decode makes, read then by ``read_ext``.
    """

    __slots__ = ("ext_at", "ext_end", "fields", "frame")

    frame: bytes
    ext_at: int
    ext_end: int
    fields: object
    #: the ext-field dict of ``frame[ext_at:ext_end]`` (set by ``header_scan``)
    read_ext: ClassVar[Callable[[bytes, int, int], dict[str, str]]]

    @property
    def ext_fields(self) -> dict[str, str]:
        try:
            ext: dict[str, str] = _EXT_SLOT.__get__(self, LazyExtCommand)
        except AttributeError:
            ext = LazyExtCommand.read_ext(self.frame, self.ext_at, self.ext_end)
            _EXT_SLOT.__set__(self, ext)
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str]) -> None:
        _EXT_SLOT.__set__(self, value)


def new_lazy_command(  # noqa: PLR0917
    code: int,
    language: LanguageCode,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    body: Body,
    frame: bytes,
    ext_at: int,
    ext_end: int,
    fields: object,
) -> LazyExtCommand:
    """A ``LazyExtCommand`` with every field given (``header_scan``, per send or pull); plain
    Python so that its slot stores are the interpreter's specialised ones."""
    cmd: LazyExtCommand = _new(LazyExtCommand)
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.body = body
    cmd.serialize_type = SerializeType.JSON
    cmd.frame = frame
    cmd.ext_at = ext_at
    cmd.ext_end = ext_end
    cmd.fields = fields
    return cmd
