"""SQL92 property filters (RocketMQ ``MessageSelector.bySql``): compile once, match many.

Owns: :func:`compile_sql92` (cached), :class:`SqlFilter`, :func:`parse_sql92`
and :func:`quote_string`. The stages are this package's modules: ``lexer``
-> ``parser`` -> ``nodes`` -> ``compiler``, with ``javavalues`` holding Java's
conversions; no I/O.

A filter sees a message's property map, name -> String value: the user
properties and the system ones the producer stored (TAGS, KEYS, UNIQ_KEY,
...), exactly what RocketMQ's MessageEvaluationContext reads. ``evaluate``
gives RocketMQ's three-valued result (True, False, or None for null);
``matches`` is the broker's verdict: only True keeps the message, and an
evaluation Java would throw on drops it. The grammar is RocketMQ 4.9's
(see ``parser``) plus 5.1.3's CONTAINS / STARTSWITH / ENDSWITH.

Compiled filters and refusals are cached by expression text in bounded LRU
caches, so a subscription repeated on every pull compiles once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

from apogee.errors import FilterExpressionError
from apogee.model.filter.compiler import Evaluator, compile_node
from apogee.model.filter.javavalues import FilterEvaluationError
from apogee.model.filter.nodes import Node, Property, children
from apogee.model.filter.parser import MAX_DEPTH, MAX_EXPRESSION_LENGTH, parse

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "FilterEvaluationError",
    "FilterExpressionError",
    "SqlFilter",
    "compile_sql92",
    "parse_sql92",
    "quote_string",
]

#: Expressions up to this length share the large cache; longer ones (big IN
#: lists) a small one, so the caches together stay within a few MiB of text.
SHORT_EXPRESSION = 4096
SHORT_CACHE_SIZE = 1024
LONG_CACHE_SIZE = 16


class SqlFilter:
    """One compiled expression; immutable and safe to share between threads."""

    __slots__ = ("_evaluate", "expression", "node", "properties")

    def __init__(self, expression: str, node: Node) -> None:
        self.expression = expression
        self.node = node
        #: the property names the expression reads
        self.properties = _property_names(node)
        self._evaluate: Evaluator = compile_node(node)[0]

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """RocketMQ's result for a message with these properties.

        Raises:
            FilterEvaluationError: where Java's evaluation throws (say, ``a > 5``
                on a = "five").
        """
        result: bool | None = self._evaluate(properties)
        return result

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether the broker delivers the message: True only when evaluate gives True."""
        try:
            return self._evaluate(properties) is True
        except FilterEvaluationError:
            return False

    def __repr__(self) -> str:
        return f"SqlFilter({self.expression!r})"


def parse_sql92(expression: str) -> Node:
    """The checked node tree of ``expression`` (uncached; equal for equal meaning).

    Raises:
        FilterExpressionError: the expression does not compile; names where.
    """
    return parse(expression)


def compile_sql92(expression: str) -> SqlFilter:
    """The compiled filter of ``expression``, from the cache when seen before.

    Raises:
        FilterExpressionError: the expression does not compile; names where.
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        parse(expression)  # raises the length refusal; nothing to cache
    cached = _compile_short if len(expression) <= SHORT_EXPRESSION else _compile_long
    outcome = cached(expression)
    if isinstance(outcome, _Refusal):
        # A fresh exception each time, so cached refusals never pile up tracebacks.
        raise FilterExpressionError(
            outcome.problem, expression=expression, position=outcome.position, token=outcome.token
        )
    return outcome


def quote_string(value: str) -> str:
    """``value`` as a SQL92 string literal (quotes doubled), for building expressions."""
    return "'" + value.replace("'", "''") + "'"


class _Refusal(NamedTuple):
    problem: str
    position: int
    token: str


def _compile(expression: str) -> SqlFilter | _Refusal:
    try:
        return SqlFilter(expression, parse(expression))
    except FilterExpressionError as error:
        return _Refusal(error.problem, error.position, error.token)


_compile_short = functools.lru_cache(maxsize=SHORT_CACHE_SIZE)(_compile)
_compile_long = functools.lru_cache(maxsize=LONG_CACHE_SIZE)(_compile)


def _property_names(root: Node) -> frozenset[str]:
    names: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Property):
            names.add(node.name)
        stack.extend(children(node))
    return frozenset(names)
