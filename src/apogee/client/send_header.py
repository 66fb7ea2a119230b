"""A one-by-one send's JSON request header, encoded ahead in pieces.

Owns: ``SendPieces`` (a topic's SEND_MESSAGE_V2 header, encoded once with the
values a send sets left out) and the pieces it joins per message.

The header a send writes is the one ``header_json.encode`` writes for the
command ``broker_api.send_request`` builds from the producer's header
template (``to_ext_v2``: ext fields a .. h, k, m, i in that order, then the
command fields in key order)::

    {"code":310,"extFields":{"a":"<group>","b":"<topic>","c":"TBW102","d":"4",
     "e":"<queue>","f":"<sysFlag>","g":"<born ms>","h":"<flag>","k":"false",
     "m":"false","i":"<properties>"},"flag":0,"language":"PYTHON",
     "opaque":<opaque>,"version":401}

A send sets e, f, g, h, i and the connection the opaque; everything else is
the same for every message of a topic. So the producer joins five pieces per
attempt (``head``, queue id, ``mid``, time, ``rest``) and the connection adds
the opaque and ``end`` (``Connection.request_encoded``): no ext-field dict and
no command per send. Strings are written by ``orjson``, the dict route's own
writer, so escapes are the same; ``SendPieces.of`` compares a sample header
with the encoder's and gives None if they differ (a template of another
layout), and the producer then takes the command path for that topic.
"""

from __future__ import annotations

import orjson

from apogee.codes import CURRENT_VERSION, RequestCode, SerializeType
from apogee.model.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from apogee.protocol import header_json
from apogee.protocol.command import DEFAULT_LANGUAGE, new_command

#: The template's keys, in the order ``to_ext_v2`` writes them.
_LAYOUT = ("a", "b", "c", "d", "e", "f", "g", "h", "k", "m", "i")
_dumps = orjson.dumps
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_JSON = SerializeType.JSON
# The property string of a message that has no property but its UNIQ_KEY,
# around the key (hex digits: nothing to escape).
_UNIQ_HEAD = _dumps(f"{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01")[:-1]
_UNIQ_TAIL = _dumps("\x02")[1:]


def _field(key: str, value: str) -> bytes:
    return _dumps(key) + b":" + _dumps(value)


def _command_parts(code: int) -> tuple[bytes, bytes, bytes]:
    """(before the ext fields, after them up to the opaque's digits, after the opaque)."""
    sample = header_json.encode(
        new_command(code, DEFAULT_LANGUAGE, CURRENT_VERSION, 0, 0, None, {}, b"", _JSON)
    )
    before, sep, after = sample.partition(b'"extFields":{}')
    middle, sep2, end = after.partition(b'"opaque":0')
    if not sep or not sep2:
        raise ValueError(f"unexpected JSON header layout: {sample!r}")
    return before + b'"extFields":{', b"}" + middle + b'"opaque":', end


class SendPieces:
    """The fixed pieces of one topic's SEND_MESSAGE_V2 header (see the module docstring).

    A send's header up to the opaque is ``head``, the queue id's digits,
    ``mid(sys_flag)``, the born time's digits and ``rest_*(...)``; after the
    opaque's digits comes ``end``.
    """

    __slots__ = ("_mid0", "_plain_head", "_plain_tail", "_rest_head", "_rest_tail", "end", "head")

    def __init__(self, head: bytes, km: bytes, after_ext: bytes, end: bytes) -> None:
        #: everything up to the queue id's digits
        self.head = head
        #: everything after the opaque's digits
        self.end = end
        self._mid0 = self._mid(0)
        self._rest_head = km + b',"i":'  # after the flag's digits, before the properties
        self._rest_tail = after_ext  # after the properties, up to the opaque
        # the rest of a message with flag 0 and no property but its UNIQ_KEY
        self._plain_head = b'","h":"0' + self._rest_head + _UNIQ_HEAD
        self._plain_tail = _UNIQ_TAIL + after_ext

    @staticmethod
    def _mid(sys_flag: int) -> bytes:
        return b'","f":"%d","g":"' % sys_flag

    def mid(self, sys_flag: int) -> bytes:
        """The piece between the queue id and the born time: the sysFlag field."""
        return self._mid0 if not sys_flag else self._mid(sys_flag)

    def rest_plain(self, uniq: str) -> bytes:
        """The rest of a message with flag 0 whose only property is UNIQ_KEY ``uniq``."""
        return self._plain_head + uniq.encode() + self._plain_tail

    def rest(self, flag: int, properties: str) -> bytes:
        """The rest of any message: its flag and property string."""
        return b'","h":"%d%b%b%b' % (flag, self._rest_head, _dumps(properties), self._rest_tail)

    @classmethod
    def of(cls, template: dict[str, str], code: int = _SEND_V2) -> SendPieces | None:
        """The pieces of a send header template (``to_ext_v2``), or None for another layout."""
        if tuple(template) != _LAYOUT:
            return None
        before_ext, after_ext, end = _command_parts(code)
        fixed = b",".join(_field(key, template[key]) for key in ("a", "b", "c", "d"))
        head = before_ext + fixed + b',"e":"'
        km = b'",' + _field("k", template["k"]) + b"," + _field("m", template["m"])
        pieces = cls(head, km, after_ext, end)
        return pieces if pieces._agrees(template, code) else None

    def _agrees(self, template: dict[str, str], code: int) -> bool:
        """Whether these pieces write what the encoder writes, for a sample of each kind."""
        for sys_flag, flag, props in ((0, 0, None), (5, 7, 'A\x01"é\\\x02UNIQ_KEY\x01X\x02')):
            ext = dict(template, e="3", f=str(sys_flag), g="1700000000000", h=str(flag))
            uniq = "0123456789ABCDEF0123456789ABCDEF"
            if props is None:
                ext["i"] = f"{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01{uniq}\x02"
                rest = self.rest_plain(uniq)
            else:
                ext["i"] = props
                rest = self.rest(flag, props)
            cmd = new_command(code, DEFAULT_LANGUAGE, CURRENT_VERSION, 12, 0, None, ext, b"", _JSON)
            ours = b"%b%d%b%d%b%d%b" % (
                self.head,
                3,
                self.mid(sys_flag),
                1700000000000,
                rest,
                12,
                self.end,
            )
            if ours != header_json.encode(cmd):
                return False
        return True
