"""Reader for fastjson's not-quite-JSON: bare integer and object map keys.

Owns: ``loads``, which tries orjson first and falls back to a small
recursive-descent parser only when orjson rejects the text.

fastjson's default encoder writes non-string map keys unquoted::

    {"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}
    {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}

The fallback accepts both. Every key comes back as a string, so callers see
the same shape as standard JSON: a number key as its text ("0"), an object
or array key as its canonical JSON text with sorted keys
(``{"brokerName":"b","queueId":0,"topic":"t"}``), which ``orjson.loads``
turns back into the value. Nesting deeper than 256 levels is refused.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from apogee.errors import ProtocolError

MAX_DEPTH = 256

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON, tolerating fastjson's bare map keys; ProtocolError if neither."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"JSON body is not UTF-8: {exc}") from exc
    return _Parser(text).parse()


def canonical_key(value: Any) -> str:
    """The string a non-string map key is given (numbers: text; others: JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


class _Parser:
    __slots__ = ("depth", "pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, what: str) -> ProtocolError:
        snippet = self.text[self.pos : self.pos + 20]
        return ProtocolError(f"bad JSON at offset {self.pos}: {what} near {snippet!r}")

    def skip_ws(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()

    def parse(self) -> Any:
        value = self.value()
        self.skip_ws()
        if self.pos != len(self.text):
            raise self.fail("trailing characters")
        return value

    def value(self) -> Any:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end")
        ch = self.text[self.pos]
        if ch == "{":
            return self.container(self.obj)
        if ch == "[":
            return self.container(self.array)
        if ch == '"':
            return self.string()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a value")
        self.pos = match.end()
        if match.group(1) or match.group(2):
            return float(match.group())
        return int(match.group())

    def string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise self.fail("bad string")
        self.pos = match.end()
        result: str = orjson.loads(match.group())
        return result

    def container(self, parse: Any) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("nesting too deep")
        self.pos += 1  # the opening bracket
        result = parse()
        self.depth -= 1
        return result

    def expect_separator(self, closer: str) -> bool:
        """Consume ',' (True: more follows) or ``closer`` (False: done)."""
        self.skip_ws()
        ch = self.text[self.pos : self.pos + 1]
        self.pos += 1
        if ch == ",":
            return True
        if ch == closer:
            return False
        self.pos -= 1
        raise self.fail(f"expected ',' or {closer!r}")

    def obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            key = canonical_key(self.value())
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value()
            if not self.expect_separator("}"):
                return out

    def array(self) -> list[Any]:
        out: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            if not self.expect_separator("]"):
                return out
