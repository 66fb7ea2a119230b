"""Compiling SQL92 property filters: what RocketMQ's SelectorParser refuses, and where.

Refusals come from the grammar (SelectorParser.jj) and from the checks its
expression factories make while parsing (ComparisonExpression.create*,
ConstantExpression.createFromDecimal/createFloat, asBooleanExpression).
Every refusal is a FilterExpressionError that names the place and the token.
"""

from __future__ import annotations

import pytest

from apogee.codes import ResponseCode
from apogee.errors import FilterExpressionError
from apogee.model.filter import (
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    compile_sql92,
    parse_sql92,
    quote_string,
)

VALID = [
    # RocketMQ ParserTest
    "a=3 and b<>4 And c>5 AND d<=4",
    "a=3 or b<>4 Or c>5 OR d<=4",
    "a in ('3', '4', '5')",
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null",
    "a is not null",
    "a <= now",  # "now" is a property name in 4.x
    # more
    "TRUE",
    "NULL",
    "a",
    "NOT a",
    "(a)",
    "(a) IN ('x')",
    "+a IN ('x')",
    "a = -b",
    "a BETWEEN -5 AND -1",
    "a BETWEEN 1 AND 1",
    "a > 0.0",  # RocketMQ refuses a 0.0 literal (below Double.MIN_VALUE); Apogee takes it
    "x NOT CONTAINS 'a' AND y STARTSWITH 'b' OR z NOT ENDSWITH 'c'",
    "a = 1 -- comment\n",
    "/* only a comment before */ a = 1",
]


@pytest.mark.parametrize("expression", VALID)
def test_valid_expressions_compile(expression: str) -> None:
    sql = compile_sql92(expression)
    assert sql.expression == expression


# (expression, 1-based column of the refusal, the token named, words of the problem)
INVALID: list[tuple[str, int, str, str]] = [
    # RocketMQ ParserTest
    ("a and between 2 and 10", 7, "between", "expected an operand"),
    (" a between 10 and 0", 4, "between", "must not be above"),
    ("a > 100000000000000000000000", 5, "100000000000000000000000", "out of range"),
    ("a > 1" + "1" * 400 + ".5", 5, "1" * 401 + ".5", "out of range"),
    # the checks of ComparisonExpression
    ("a > 'x'", 3, ">", "cannot be compared"),
    ("a >= TRUE", 3, ">=", "cannot be compared"),
    ("NULL < a", 6, "<", "cannot be compared"),
    ("a > (b > 1)", 3, ">", "cannot be compared"),
    ("NOT a > 1", 7, ">", "write NOT (x > y)"),
    ("a > 1 > 2", 7, ">", "cannot be compared"),
    ("a BETWEEN 'x' AND 'y'", 3, "BETWEEN", "cannot be compared"),
    ("a BETWEEN NULL AND 5", 3, "BETWEEN", "NULL"),
    ("a BETWEEN 5 AND 'x'", 3, "BETWEEN", "cannot be compared"),
    ("a = NULL", 3, "=", "NULL"),
    ("NULL <> a", 6, "<>", "NULL"),
    ("TRUE = 5", 6, "=", "cannot be compared with"),
    ("'x' IN ('a')", 5, "IN", "property"),
    ("-a IN ('a')", 4, "IN", "property"),
    ("NOT a IN ('a')", 7, "IN", "property"),
    ("a IN (1)", 7, "1", "string"),
    ("a IN ()", 7, ")", "string"),
    ("a NOT IN 'x'", 10, "'x'", "("),
    ("a IN ('x' 'y')", 11, "'y'", ")"),
    ("a IS 5", 6, "5", "NULL"),
    ("a IS NOT 5", 10, "5", "NULL"),
    ("a BETWEEN 1 OR 2", 13, "OR", "AND"),
    ("a CONTAINS 5", 12, "5", "string"),
    ("a NOT LIKE 'x'", 7, "LIKE", "BETWEEN"),
    # asBooleanExpression
    ("5", 1, "5", "boolean"),
    ("'x'", 1, "'x'", "boolean"),
    ("-a", 1, "-", "boolean"),
    ("NOT 5", 5, "5", "boolean"),
    ("a AND 5", 7, "5", "boolean"),
    ("5 OR a", 1, "5", "boolean"),
    # the grammar and the tokens
    ("", 1, "", "empty"),
    ("   /* nothing */", 17, "", "empty"),
    ("(a = 1", 7, "", ")"),
    ("a = 1)", 6, ")", "after a complete expression"),
    ("a = 1 b = 2", 7, "b", "after a complete expression"),
    ("a = 007", 6, "0", "after a complete expression"),
    ("a = 0L", 6, "L", "after a complete expression"),
    ("a > 5e", 6, "e", "after a complete expression"),
    ("a = 1 -- no line end", 7, "-", "after a complete expression"),
    ("a = 'x", 5, "'x", "unterminated"),
    ("a = 1 /* open", 7, "/", "unexpected character"),
    ("a != 1", 3, "!", "unexpected character"),
    ("a.b = 1", 2, ".", "unexpected character"),
    ('a = "x"', 5, '"', "unexpected character"),
    ("é = 1", 1, "é", "unexpected character"),
    ("a =", 4, "", "expected an operand"),
    ("AND a", 1, "AND", "expected an operand"),
]


@pytest.mark.parametrize(("expression", "column", "token", "problem"), INVALID)
def test_invalid_expressions_name_the_place(
    expression: str, column: int, token: str, problem: str
) -> None:
    with pytest.raises(FilterExpressionError) as caught:
        compile_sql92(expression)
    error = caught.value
    assert (error.line, error.column, error.token) == (1 + expression.count("\n"), column, token)
    assert problem in str(error)
    assert f"column {column}" in str(error)
    assert error.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_positions_count_lines() -> None:
    with pytest.raises(FilterExpressionError) as caught:
        compile_sql92("a = 1\n  AND\n    b ! 2")
    assert (caught.value.line, caught.value.column, caught.value.position) == (3, 7, 18)
    assert "line 3, column 7" in str(caught.value)


def test_nesting_beyond_the_limit_is_refused_not_a_crash() -> None:
    deep = "(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1)
    shallow = "(" * (MAX_DEPTH // 2) + "a" + ")" * (MAX_DEPTH // 2)
    compile_sql92(shallow)
    for expression in (
        deep,
        "NOT " * (MAX_DEPTH + 1) + "a",
        "- " * (MAX_DEPTH + 1) + "a = 1",
        "a = 'x'" + " = TRUE" * 1000,  # a chain builds a deep tree without parentheses
        "(" * 100_000,
    ):
        with pytest.raises(FilterExpressionError, match="deep"):
            compile_sql92(expression)


def test_an_overlong_expression_is_refused() -> None:
    with pytest.raises(FilterExpressionError, match="longer than"):
        compile_sql92("a = '" + "x" * MAX_EXPRESSION_LENGTH + "'")


def test_layout_and_keyword_case_do_not_change_the_parse() -> None:
    # RocketMQ ParserTest.testEquals
    one = parse_sql92("a=3 and b<>4 And c>5 AND d<=4")
    assert one == parse_sql92("a=3  and    b<>4 And\tc>5 AND /* x */ d<=4")
    assert one != parse_sql92("a=3 or b<>4 Or c>5 OR d<=4")


def test_compiling_is_cached_and_so_are_refusals() -> None:
    assert compile_sql92("cached = 'yes'") is compile_sql92("cached = 'yes'")
    first = second = None
    with pytest.raises(FilterExpressionError) as first_error:
        compile_sql92("cached > 'no'")
    first = first_error.value
    with pytest.raises(FilterExpressionError) as second_error:
        compile_sql92("cached > 'no'")
    second = second_error.value
    assert str(first) == str(second)
    assert first is not second  # a fresh exception each time: no traceback piles up


@pytest.mark.parametrize("value", ["", "plain", "it's", "''", "line\nbreak", "ü €"])
def test_quoted_strings_read_back_as_themselves(value: str) -> None:
    expression = f"a = {quote_string(value)}"
    assert compile_sql92(expression).evaluate({"a": value}) is True
