# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: always_allow_keywords=False, binding=False
"""JSON command header (serialize type 0), with RocketMQ's JSON quirks in one place.

Owns: :func:`encode` and :func:`decode` (header bytes <-> RemotingCommand) and
their dict route.

Shape (keys in any order; Java's fastjson sorts them, C++'s jsoncpp does too)::

    {"code":310,"extFields":{"a":"pg",...},"flag":0,"language":"CPP",
     "opaque":12,"remark":"","version":333}

Input is tolerant, because C++ writes some ext-field values as JSON numbers
and Java's fastjson coerces them into strings: numbers and booleans become
their canonical strings ("4", "true"), nulls are dropped, unknown top-level
keys (``serializeTypeCurrentRPC``) are ignored, ``language`` may be a name or
an int. Output is strict: every ext-field value is a JSON string (the C++
client ignores any other type), ``remark`` appears only when set, and
``extFields`` is always present, because the C++ client builds a response's
typed header only when ``extFields`` is not null and then dereferences it.

Two routes: the dict route here (``orjson`` parses a header into a dict that
is then checked and converted, ``_decode_dict``; a dict built for
``orjson.dumps`` is the output, ``_encode_dict``), and, when
``header_scan`` and ``header_write`` are compiled, their direct route first:
they read and write the header bytes without a dict, take only what the
usual header holds and return None on anything else, which then comes here. So every result and
every error is the dict route's; tests compare the two byte for byte.

Builds: this module is compiled too (the first line; ``setup.py``; measured,
it is not slower so, and ``encode`` a little faster); without a C compiler or
under ``APOGEE_PURE_PYTHON`` all three modules run interpreted and only the dict
route is taken.
"""

from __future__ import annotations

from typing import Any

import orjson

from apogee.codes import LanguageCode, SerializeType
from apogee.errors import ProtocolError
from apogee.protocol import header_scan, header_write
from apogee.protocol.command import Body, RemotingCommand, new_command

_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}
_LANGUAGE_BY_VALUE = {lang.value: lang for lang in LanguageCode}
# Enum.name is a descriptor call; a dict keyed by member is one hash.
_NAME_BY_LANGUAGE = {lang: lang.name for lang in LanguageCode}
_JSON = SerializeType.JSON
_dumps = orjson.dumps

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
# The direct route, when compiled; interpreted it would only ever decline.
_scan_encode = header_write.encode if header_write.COMPILED else None
_scan_decode = header_scan.decode if header_scan.COMPILED else None


def encode(cmd: RemotingCommand) -> bytes:
    """The JSON header of ``cmd`` as UTF-8 bytes."""
    if _scan_encode is not None:
        direct = _scan_encode(cmd)
        if direct is not None:
            return direct
    return _encode_dict(cmd)


def decode(header: bytes | bytearray | memoryview, body: Body) -> RemotingCommand:
    """Build a command from a JSON header and its (already sliced) body."""
    if _scan_decode is not None:
        cmd = _scan_decode(header, body)
        if cmd is not None:
            return cmd
    return _decode_dict(header, body)


# -- the dict route: every build, and the direct route's fallback -----------------


def _encode_dict(cmd: RemotingCommand) -> bytes:
    ext = cmd.ext_fields
    if not _all_str(ext):
        # The C++ client reads only string values; never let a number out.
        ext = _coerce_ext(ext)
    language = _NAME_BY_LANGUAGE.get(cmd.language)
    header: dict[str, Any] = {
        "code": cmd.code,
        "extFields": ext,
        "flag": cmd.flag,
        "language": language if language is not None else cmd.language.name,
        "opaque": cmd.opaque,
        "version": cmd.version,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    try:
        return _dumps(header)
    except TypeError as exc:  # a non-str ext value slipped in
        raise ProtocolError(f"cannot encode JSON header of {cmd!r}: {exc}") from exc


def _decode_dict(header: bytes | bytearray | memoryview, body: Body) -> RemotingCommand:
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"JSON header is not valid JSON: {exc}") from exc
    if type(obj) is not dict:
        raise ProtocolError("JSON header is not an object")
    code = obj.get("code")
    if type(code) is not int:
        raise ProtocolError(f"JSON header has no integer 'code': {code!r}")
    ext = obj.get("extFields")
    if ext is None:
        ext_fields: dict[str, str] = {}
    elif type(ext) is dict:
        ext_fields = _strings_in_place(ext)
    else:
        raise ProtocolError("JSON header 'extFields' is not an object")
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        remark = str(remark)
    language = obj.get("language")
    version, opaque, flag = obj.get("version"), obj.get("opaque"), obj.get("flag")
    # Each is a Java int: a value that does not fit could never be answered.
    if type(opaque) is not int or not _INT_MIN <= opaque <= _INT_MAX:
        opaque = _int_field(obj, "opaque")
    if type(version) is not int or not _INT_MIN <= version <= _INT_MAX:
        version = _int_field(obj, "version")
    if type(flag) is not int or not _INT_MIN <= flag <= _INT_MAX:
        flag = _int_field(obj, "flag")
    if not _INT_MIN <= code <= _INT_MAX:
        raise ProtocolError(f"JSON header 'code' does not fit a 32-bit int: {code}")
    return new_command(
        code,
        _resolve_language(language),
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body,
        _JSON,
    )


def _resolve_language(value: Any) -> LanguageCode:
    return (type(value) is str and _LANGUAGE_BY_NAME.get(value)) or _language(value)


def _all_str(ext: dict[str, Any]) -> bool:
    # A plain loop: this runs for every command and a generator costs more.
    for value in ext.values():  # noqa: SIM110
        if type(value) is not str:
            return False
    return True


def _strings_in_place(ext: dict[str, Any]) -> dict[str, str]:
    """Make every value a string in the parsed dict itself (it is ours); drop nulls."""
    nulls = None
    for key, value in ext.items():
        if type(value) is not str:
            if value is None:
                nulls = [*(nulls or ()), key]
            else:
                ext[key] = str(value) if type(value) is int else scalar_to_str(value)
    if nulls:
        for key in nulls:
            del ext[key]
    return ext


def _coerce_ext(ext: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in ext.items():
        if value is None:
            continue
        out[key] = scalar_to_str(value)
    return out


def scalar_to_str(value: Any) -> str:
    """Canonical string of a JSON value, as fastjson would coerce it."""
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return repr(value)  # Double.toString agrees for ordinary values ("1.5", "4.0")
    return orjson.dumps(value).decode()


def _int_field(obj: dict[str, Any], name: str) -> int:
    value = obj.get(name, 0)
    if value is None:
        return 0
    try:
        number = value if type(value) is int else int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        text = repr(value)[:40]
        raise ProtocolError(f"JSON header field {name!r} is not an integer: {text}") from exc
    if not _INT_MIN <= number <= _INT_MAX:
        raise ProtocolError(f"JSON header field {name!r} does not fit a 32-bit int: {value!r:.40}")
    return number


def _language(value: Any) -> LanguageCode:
    if type(value) is str:
        lang = _LANGUAGE_BY_NAME.get(value)
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses
        if lang is None and value.isascii() and value.isdigit():
            lang = _LANGUAGE_BY_VALUE.get(int(value))
        return LanguageCode.OTHER if lang is None else lang
    if type(value) is int:
        return _LANGUAGE_BY_VALUE.get(value, LanguageCode.OTHER)
    return LanguageCode.JAVA if value is None else LanguageCode.OTHER
