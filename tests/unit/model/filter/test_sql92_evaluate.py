"""Evaluating SQL92 property filters by RocketMQ's rules (filter/expression/*.java).

Each row: an expression, a message's property map, and what RocketMQ's
``Expression.evaluate`` gives: TRUE, FALSE, null (None), or an exception
(ERR; the broker logs it and drops the message). The rows taken from
RocketMQ's own ExpressionTest come first, then the conversion rules of
ComparisonExpression, the three-valued logic of LogicExpression and
UnaryExpression, and the 5.x string operators.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from apogee.model.filter import FilterEvaluationError, compile_sql92

ERR = "error"
Expected = bool | None | str

AND4 = "a=3 and b<>4 And c>5 AND d<=4"
OR4 = "a=3 or b<>4 Or c>5 OR d<=4"

ROCKETMQ_EXPRESSION_TEST: list[tuple[str, dict[str, str], Expected]] = [
    (AND4, {"a": "3", "b": "5", "c": "6", "d": "1"}, True),
    (AND4, {"a": "4", "b": "5", "c": "6", "d": "1"}, False),
    (OR4, {"a": "3"}, True),
    (OR4, {"a": "4", "b": "5"}, True),
    (OR4, {"a": "4", "b": "4", "c": "6"}, True),
    (OR4, {"a": "4", "b": "4", "c": "3", "d": "2"}, True),
    (OR4, {"a": "4", "b": "4", "c": "3", "d": "10"}, False),
    ("a in ('3', '4', '5')", {"a": "3"}, True),
    ("a in ('3', '4', '5')", {"a": "5"}, True),
    ("a in ('3', '4', '5')", {"a": "8"}, False),
    ("a not in ('3', '4', '5')", {"a": "8"}, True),
    ("a not in ('3', '4', '5')", {"a": "4"}, False),
    ("a between 2 and 10", {"a": "2"}, True),
    ("a between 2 and 10", {"a": "10"}, True),
    ("a between 2 and 10", {"a": "1"}, False),
    ("a between 2 and 10", {"a": "11"}, False),
    ("a not between 2 and 10", {"a": "1"}, True),
    ("a not between 2 and 10", {"a": "11"}, True),
    ("a not between 2 and 10", {"a": "3"}, False),
    ("a is null", {"abc": "2"}, True),
    ("a is null", {"a": "2"}, False),
    ("a is not null", {"a": "2"}, True),
    ("a is not null", {"abc": "2"}, False),
    ("a is not null and a='hello'", {"a": "hello"}, True),
    ("a is not null and a='hello'", {}, False),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False),
    ("a is null OR a='hello'", {}, True),
    ("a is null OR a='hello'", {"a": "hello"}, True),
    ("a is null OR a='hello'", {"a": "abc"}, False),
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True),
    ("a > 3.1E10", {"a": "3.1415E10"}, True),
    ("a > 3.14", {"a": "3.1415"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),
    ("a > b", {"a": "20", "b": "10"}, True),
    ("a between up and low", {"a": "3.14"}, None),
    ("a between up and low", {"a": "3.14", "up": "up", "low": "low"}, ERR),
    ("key is not null and key between 0 and 100", {"key": "con"}, ERR),
    ("a between 0 and 100", {"a": "abc"}, ERR),
    ("a=b", {"a": "3.14", "b": "3.14"}, True),
    ("a<>b", {"a": "3.14", "b": "3.14"}, False),
    ("a<>b", {"a": "3.14", "b": "3.141"}, True),
]

# A property is a Java String; a constant is an Integer (decimal that fits 32
# bits), a Long (wider, or with an L suffix), a Double, a String or a Boolean.
# Mixed comparisons convert the String to the constant's type with
# Integer/Long/Double/Boolean.valueOf, and a failed conversion throws.
CONVERSIONS: list[tuple[str, dict[str, str], Expected]] = [
    ("a > 5", {"a": "6"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a > 5", {}, None),
    ("a > 5", {"a": "5.5"}, ERR),  # Integer.valueOf("5.5")
    ("a > 5", {"a": " 6"}, ERR),  # Integer.valueOf does not trim
    ("a > 5", {"a": "+6"}, True),
    ("a > 5", {"a": "0006"}, True),
    ("a = 5", {"a": "3000000000"}, ERR),  # beyond an Integer
    ("a = 3000000000", {"a": "3000000000"}, True),  # a Long constant
    ("a = 5L", {"a": "5"}, True),
    ("a > 5.0", {"a": "5.5"}, True),
    ("a > 5.0", {"a": " 6 "}, True),  # Double.valueOf trims
    ("a > 5.0", {"a": "6d"}, True),
    ("a > 5.0", {"a": "6F"}, True),
    ("a > 5.0", {"a": "0x1p3"}, True),  # 8.0
    ("a > 5.0", {"a": "1e1"}, True),
    ("a > 5.0", {"a": "Infinity"}, True),
    ("a < 5.0", {"a": "-Infinity"}, True),
    ("a > 5.0", {"a": "NaN"}, True),  # Double.compare puts NaN above everything
    ("a = 5.0", {"a": "NaN"}, False),
    ("a > 5.0", {"a": "inf"}, ERR),
    ("a > 5.0", {"a": "1_0"}, ERR),
    ("a > 5.0", {"a": "five"}, ERR),
    ("a = 0.0", {"a": "-0.0"}, False),  # Double.compare tells the zeros apart
    ("a = 1.0", {"a": "1"}, True),
    ("a = 1", {"a": "1.0"}, ERR),
    ("a = 'x'", {"a": "x"}, True),
    ("a = 'x'", {"a": "X"}, False),
    ("a = 'é'", {"a": "é"}, True),
    ("a = 5", {"a": "abc"}, ERR),
    ("a = TRUE", {"a": "TRUE"}, True),  # Boolean.valueOf ignores case
    ("a = TRUE", {"a": "yes"}, False),
    ("a = FALSE", {"a": "yes"}, True),
    ("5 = 5", {}, True),
    ("5 = 5.0", {}, True),
    ("5 = 5L", {}, True),
    ("'5' = 5", {}, True),
    ("5 = 'x'", {}, ERR),
    ("5 = TRUE", {}, False),  # an Integer and a Boolean are never equal
    ("(a > 1) = TRUE", {"a": "2"}, True),
    ("(a > 1) = 'true'", {"a": "2"}, ERR),  # Java casts the Boolean to a String
    ("(a > 1) = 5", {"a": "2"}, False),
    ("a > b", {"a": "x", "b": "1"}, ERR),  # two strings compare as doubles
    ("a >= b", {"a": "1.5", "b": "1.5"}, True),
    ("a > -5", {"a": "-3"}, True),
    ("-5 < a", {"a": "0"}, True),
    ("- -5 = 5", {}, True),
    ("+a = 'x'", {"a": "x"}, True),
    ("a BETWEEN -5 AND -1", {"a": "-3"}, True),
    ("a BETWEEN -1 AND -5", {"a": "-3"}, False),  # negated bounds are not checked
    ("a BETWEEN 1 AND 1", {"a": "1"}, True),
    ("a BETWEEN 1.5 AND 2", {"a": "2"}, True),
]

# Negating anything but a number gives null; a comparison with null is null,
# except = (null = null is TRUE, x = null FALSE, null = x null).
NULLS: list[tuple[str, dict[str, str], Expected]] = [
    ("-a = 5", {"a": "5"}, None),
    ("a = -b", {}, True),
    ("a = -b", {"a": "1", "b": "1"}, False),
    ("-'x' = a", {"a": "x"}, None),
    ("a = 'x'", {}, None),
    ("a <> 'x'", {}, None),
    ("NOT (a = 'x')", {}, None),
    ("a", {}, None),
    ("a", {"a": "true"}, False),  # a String cast to boolean is FALSE
    ("NOT a", {"a": "true"}, True),
    ("NOT a", {}, None),
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("NULL", {}, None),
    ("(a > 1) IS NULL", {}, True),
    ("(a > 1) IS NULL", {"a": "0"}, False),
    ("a IS NULL IS NULL", {}, False),
    ("a IS NOT NULL = TRUE", {"a": "1"}, True),
    ("a = 1 = TRUE", {"a": "1"}, True),
    ("NOT a = 'x'", {}, None),  # (NOT a) = 'x': null on the left
    ("NOT a = 'x'", {"a": "x"}, ERR),  # (NOT a) = 'x': a Boolean against a String
    ("a IN ('x')", {}, None),
    ("a NOT IN ('x')", {}, None),
]

# LogicExpression: left to right, stopping at the first FALSE (AND) or TRUE
# (OR); otherwise null when either side is null. An exception anywhere that
# is evaluated ends the evaluation.
LOGIC: list[tuple[str, dict[str, str], Expected]] = [
    ("a > 1 AND b > 1", {"b": "0"}, False),
    ("a > 1 AND b > 1", {"b": "2"}, None),
    ("a > 1 OR b > 1", {"b": "2"}, True),
    ("a > 1 OR b > 1", {"b": "0"}, None),
    ("a = 'x' OR TRUE", {}, True),
    ("a = 'x' AND FALSE", {}, False),
    ("b = 'x' OR a > 5", {"b": "x", "a": "abc"}, True),
    ("b = 'x' OR a > 5", {"b": "y", "a": "abc"}, ERR),
    ("a > 5 OR b = 'x'", {"b": "x", "a": "abc"}, ERR),
    ("FALSE AND a > 5", {"a": "abc"}, False),
    ("a > 5 AND FALSE", {"a": "abc"}, ERR),
    ("NULL OR TRUE", {}, True),
    ("NULL AND TRUE", {}, None),
    ("NULL AND FALSE", {}, False),
    ("NOT NULL", {}, None),
    ("a = 1 AND b = 2 OR c = 3", {"c": "3"}, True),
    ("a = 1 AND (b = 2 OR c = 3)", {"c": "3"}, None),
    ("a = 1 AND (b = 2 OR c = 3)", {"a": "1", "c": "3"}, True),
    ("NOT (a > 1 AND b > 1)", {"a": "2", "b": "0"}, True),
]

# RocketMQ 5.1.3+ (not in 4.9): CONTAINS, STARTSWITH, ENDSWITH and their NOT
# forms are two-valued: a missing property, an empty search string or a value
# that is not a String gives FALSE, for the NOT forms too.
STRING_OPERATORS: list[tuple[str, dict[str, str], Expected]] = [
    ("x CONTAINS 'ab'", {"x": "cabd"}, True),
    ("x CONTAINS 'ab'", {"x": "zz"}, False),
    ("x CONTAINS 'ab'", {}, False),
    ("x NOT CONTAINS 'ab'", {"x": "zz"}, True),
    ("x NOT CONTAINS 'ab'", {"x": "ab"}, False),
    ("x NOT CONTAINS 'ab'", {}, False),
    ("NOT (x CONTAINS 'ab')", {}, True),
    ("x CONTAINS ''", {"x": "ab"}, False),
    ("x NOT CONTAINS ''", {"x": "ab"}, False),
    ("x startswith 'ab'", {"x": "abc"}, True),
    ("x STARTSWITH 'ab'", {"x": "cab"}, False),
    ("x NOT STARTSWITH 'ab'", {"x": "cab"}, True),
    ("x ENDSWITH 'ab'", {"x": "cab"}, True),
    ("x NOT ENDSWITH 'ab'", {"x": "cab"}, False),
    ("x NOT ENDSWITH 'ab'", {}, False),
    ("5 CONTAINS '5'", {}, False),  # an Integer is not a String
    ("'abc' CONTAINS 'b'", {}, True),
    ("contains CONTAINS 'x'", {"contains": "xx"}, True),  # still a property name
    ("endswith = 'x'", {"endswith": "x"}, True),
]

LEXICAL: list[tuple[str, dict[str, str], Expected]] = [
    ("a Is NoT nUlL", {"a": "1"}, True),
    ("a = 1 /* a comment */ AND b = 2", {"a": "1", "b": "2"}, True),
    ("a = 1 -- a comment\n AND b = 2", {"a": "1", "b": "2"}, True),
    ("a = 'two\nlines'", {"a": "two\nlines"}, True),
    ("a = ''''", {"a": "'"}, True),
    ("$x_1 = 'v'", {"$x_1": "v"}, True),
    ("A = 'v'", {"a": "v"}, None),  # property names keep their case
    ("a\t=\r\n'v'\f", {"a": "v"}, True),
    ("a > .5", {"a": "0.6"}, True),
    ("a > 5.", {"a": "5.1"}, True),
    ("a > 5e0", {"a": "5.1"}, True),
    ("a = 9223372036854775807", {"a": "9223372036854775807"}, True),
]

ROWS = ROCKETMQ_EXPRESSION_TEST + CONVERSIONS + NULLS + LOGIC + STRING_OPERATORS + LEXICAL


def outcome(expression: str, props: Mapping[str, str]) -> Expected:
    try:
        return compile_sql92(expression).evaluate(props)
    except FilterEvaluationError:
        return ERR


@pytest.mark.parametrize(("expression", "props", "expected"), ROWS)
def test_evaluation_follows_rocketmq(
    expression: str, props: dict[str, str], expected: Expected
) -> None:
    assert outcome(expression, props) == expected


@pytest.mark.parametrize(("expression", "props", "expected"), ROWS)
def test_only_true_matches(expression: str, props: dict[str, str], expected: Expected) -> None:
    # ExpressionMessageFilter: null, FALSE and an exception all drop the message.
    assert compile_sql92(expression).matches(props) is (expected is True)


def test_a_long_chain_of_ands_evaluates_without_deep_recursion() -> None:
    terms = 5000
    expression = " AND ".join(f"p{i} = '{i}'" for i in range(terms))
    props = {f"p{i}": str(i) for i in range(terms)}
    sql = compile_sql92(expression)
    assert sql.matches(props)
    props["p4999"] = "x"
    assert not sql.matches(props)


def test_the_referenced_properties_are_known() -> None:
    sql = compile_sql92("a > 1 AND (b IS NULL OR c IN ('x')) AND NOT d AND e CONTAINS 'z'")
    assert sql.properties == frozenset("abcde")
    assert sql.expression == "a > 1 AND (b IS NULL OR c IN ('x')) AND NOT d AND e CONTAINS 'z'"
