"""A consumer's PULL_MESSAGE JSON request header, encoded ahead in pieces.

Owns: ``PullPieces`` (one queue's pull header, encoded once with the three
values each pull sets left out).

The header a fetcher writes is the one ``header_json.encode`` writes for a
command of the queue's header template (``PullMessageRequestHeader.to_ext``:
the ext fields in the header's field order, then the command fields in key
order)::

    {"code":11,"extFields":{"consumerGroup":"<group>","topic":"<topic>",
     "queueId":"<queue>","queueOffset":"<offset>","maxMsgNums":"32",
     "sysFlag":"<flags>","commitOffset":"<committed>",
     "suspendTimeoutMillis":"15000","subVersion":"<version>",
     "subscription":"<expression>","expressionType":"TAG"},"flag":0,
     "language":"PYTHON","opaque":<opaque>,"version":401}

A pull sets queueOffset, sysFlag and commitOffset, the connection the opaque
(``Connection.request_encoded``); the rest is the same for every pull of the
queue. So the pieces are one bytes format with three ``%d`` (every ``%`` of
the fixed text doubled) and the part after the opaque: no ext-field dict and
no command per pull. ``PullPieces.of`` compares a sample header with the
encoder's and gives None if they differ; the fetcher then sends the command.
"""

from __future__ import annotations

from apogee.codes import CURRENT_VERSION, RequestCode, SerializeType
from apogee.protocol import header_json
from apogee.protocol.command import DEFAULT_LANGUAGE, new_command

_PULL = int(RequestCode.PULL_MESSAGE)
_JSON = SerializeType.JSON
#: the ext fields a pull sets, in the template's order
_SET = ("queueOffset", "sysFlag", "commitOffset")
_MARK = "\x00"  # stands for a value a pull sets, in the sample encoded (never in a name)


class PullPieces:
    """The fixed pieces of one queue's PULL_MESSAGE header (see the module docstring)."""

    __slots__ = ("_format", "end")

    def __init__(self, format_: bytes, end: bytes) -> None:
        self._format = format_
        #: everything after the opaque's digits
        self.end = end

    def head(self, offset: int, sys_flag: int, commit_offset: int) -> bytes:
        """The header up to the opaque's digits for one pull."""
        return self._format % (offset, sys_flag, commit_offset)

    @classmethod
    def of(cls, template: dict[str, str]) -> PullPieces | None:
        """The pieces of a pull header template, or None when they cannot be made."""
        keys = [key for key in template if key in _SET]
        if keys != list(_SET):
            return None
        marked = dict(template)
        for key in _SET:
            marked[key] = _MARK
        encoded = header_json.encode(
            new_command(_PULL, DEFAULT_LANGUAGE, CURRENT_VERSION, 0, 0, None, marked, b"", _JSON)
        )
        mark = header_json.encode(
            new_command(_PULL, DEFAULT_LANGUAGE, CURRENT_VERSION, 0, 0, None,
                        {"x": _MARK}, b"", _JSON)
        )  # fmt: skip
        # how the encoder writes the mark inside a string (an escape), found, not assumed
        written = mark[mark.index(b'"x":"') + 5 : mark.index(b'"', mark.index(b'"x":"') + 5)]
        before, sep, end = encoded.partition(b'"opaque":0')
        parts = (before + b'"opaque":').split(written)
        if not sep or len(parts) != len(_SET) + 1:
            return None
        pieces = cls(b"%d".join(part.replace(b"%", b"%%") for part in parts), end)
        return pieces if pieces._agrees(template) else None

    def _agrees(self, template: dict[str, str]) -> bool:
        """Whether these pieces write what the encoder writes, for sample values."""
        for offset, flags, commit, opaque in ((0, 6, 0, 1), (123456789012, 7, 98765, 2**31 - 1)):
            ext = dict(
                template, queueOffset=str(offset), sysFlag=str(flags), commitOffset=str(commit)
            )
            cmd = new_command(
                _PULL, DEFAULT_LANGUAGE, CURRENT_VERSION, opaque, 0, None, ext, b"", _JSON
            )
            ours = self.head(offset, flags, commit) + str(opaque).encode() + self.end
            if ours != header_json.encode(cmd):
                return False
        return True
