"""Java's value rules as RocketMQ's filter applies them: conversions and comparison.

Owns: :class:`Kind` (the Java class of a filter value), the String
conversions of ``Integer/Long/Double/Boolean.valueOf`` and
``ComparisonExpression.__compare`` with string conversion on (RocketMQ
always parses with CONVERT_STRING_EXPRESSIONS set).

Rules (``__compare(lv, rv)``): values of the same kind compare directly;
otherwise the narrower number widens (Integer < Long < Double), a String
converts to the other side's type, and any other mix answers -1 ("less"),
except Boolean against String, which throws in Java (a failed cast). A
failed conversion throws too. Here both are :class:`FilterEvaluationError`.
Doubles compare as ``Double.compare`` does: NaN above everything and equal
to itself, -0.0 below 0.0.
"""

from __future__ import annotations

import math
import re
import struct
from enum import Enum

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_DOUBLE_BITS = struct.Struct(">d")
_LONG_BITS = struct.Struct(">q")
_CANONICAL_NAN_BITS = 0x7FF8000000000000

# Integer.parseInt: a sign, then digits (Character.digit accepts any Unicode
# decimal digit, as \d does); nothing else, not even blanks.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
# Double.valueOf after trimming: decimal or hex digits, an optional exponent
# and an optional f/F/d/D type suffix; NaN and Infinity spelled exactly.
_JAVA_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_JAVA_HEX = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?"
)
_JAVA_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf")}
# String.trim removes every char up to and including the space.
_TRIMMED = "".join(chr(c) for c in range(33))
# Integer.parseInt reads at most this many digits before it must overflow;
# Python's int() refuses long digit strings on its own terms.
_MAX_DIGITS = 4000


class Kind(Enum):
    """The Java class of a value the filter handles (NULL: the value is absent)."""

    INT = "Integer"
    LONG = "Long"
    DOUBLE = "Double"
    STRING = "String"
    BOOLEAN = "Boolean"
    NULL = "null"


NUMERIC = frozenset({Kind.INT, Kind.LONG, Kind.DOUBLE})

Value = int | float | str | bool


class FilterEvaluationError(ValueError):
    """What Java would throw while evaluating: a failed valueOf, or a Boolean cast to String.

    RocketMQ's broker logs it and drops the message; ``SqlFilter.matches`` does the same.
    """


def parse_integer(text: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """``Integer.valueOf`` (or ``Long.valueOf`` with the Long bounds)."""
    if _JAVA_INTEGER.fullmatch(text) is None or len(text) > _MAX_DIGITS:
        raise FilterEvaluationError(f"{text!r} is not an integer")
    value = int(text)
    if not low <= value <= high:
        raise FilterEvaluationError(f"{text!r} is out of range")
    return value


def parse_long(text: str) -> int:
    return parse_integer(text, LONG_MIN, LONG_MAX)


def parse_double(text: str) -> float:
    """``Double.valueOf``."""
    body = text.strip(_TRIMMED)
    special = _JAVA_SPECIAL.get(body[1:] if body[:1] in ("+", "-") else body)
    if special is not None:
        return -special if body[:1] == "-" else special
    if _JAVA_DECIMAL.fullmatch(body):
        return float(body.rstrip("fFdD"))
    if _JAVA_HEX.fullmatch(body):
        return float.fromhex(body.rstrip("fFdD"))
    raise FilterEvaluationError(f"{text!r} is not a number")


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true only for "true", in any case."""
    return text.lower() == "true"


def compare_doubles(a: float, b: float) -> int:
    """``Double.compare``."""
    if a < b:
        return -1
    if a > b:
        return 1
    abits, bbits = _bits(a), _bits(b)
    return (abits > bbits) - (abits < bbits)


def _bits(x: float) -> int:
    if math.isnan(x):
        return _CANONICAL_NAN_BITS
    value: int = _LONG_BITS.unpack(_DOUBLE_BITS.pack(x))[0]
    return value


def java_compare(lv: Value, lk: Kind, rv: Value, rk: Kind) -> int:
    """``ComparisonExpression.__compare`` with string conversion; raises FilterEvaluationError."""
    if lk is not rk:
        converted = _convert(lv, lk, rv, rk)
        if converted is None:
            return -1
        lv, rv = converted
    if isinstance(lv, float) or isinstance(rv, float):
        return compare_doubles(float(lv), float(rv))
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def _convert(lv: Value, lk: Kind, rv: Value, rk: Kind) -> tuple[Value, Value] | None:
    """Both values brought to one type, or None where Java answers -1."""
    if lk is Kind.BOOLEAN:
        if rk is Kind.STRING:
            raise FilterEvaluationError("a Boolean cannot be compared with a String")
        return None
    if lk is Kind.STRING:
        assert isinstance(lv, str)
        converter = _FROM_STRING.get(rk)
        return None if converter is None else (converter(lv), rv)
    if rk is Kind.STRING:
        assert isinstance(rv, str)
        if lk not in NUMERIC:
            return None
        return lv, _FROM_STRING[lk](rv)
    if lk in NUMERIC and rk in NUMERIC:
        # Integer and Long compare as numbers; either against a Double as doubles.
        return lv, rv
    return None


_FROM_STRING = {
    Kind.INT: parse_integer,
    Kind.LONG: parse_long,
    Kind.DOUBLE: parse_double,
    Kind.BOOLEAN: parse_boolean,
}
