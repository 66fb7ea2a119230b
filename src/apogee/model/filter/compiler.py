"""Turning a checked filter tree into nested closures over a property map.

Owns: :func:`compile_node`.

Each node becomes a function of the message's property map (name -> String)
returning its Java value: a Boolean (True / False), a number, a String, or
None for null. Evaluation rules, from RocketMQ's expression classes:

* ``=``: null = null is TRUE, null = x is null, x = null is FALSE; else the
  values are equal by ``__compare`` (see ``javavalues``);
* ``> >= < <=``: null when either side is null; two Strings compare as doubles;
* NOT and the boolean cast of a property keep null; a property cast to a
  boolean is otherwise FALSE (a String is never Boolean.TRUE);
* AND / OR: left to right, stopping at the first FALSE / TRUE, else null if
  any side was null (Kleene logic);
* IN: null when the property is absent;
* unary minus: numbers only; anything else is null;
* CONTAINS, STARTSWITH, ENDSWITH (and NOT ...): FALSE unless the value is a
  String and the search string is not empty.

Where Java throws, the closure raises FilterEvaluationError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apogee.model.filter.javavalues import (
    NUMERIC,
    Kind,
    compare_doubles,
    java_compare,
    parse_double,
)
from apogee.model.filter.nodes import (
    BoolCast,
    Compare,
    Constant,
    In,
    Logic,
    Match,
    Negate,
    Node,
    Not,
    Property,
)

Props = Mapping[str, str]
Evaluator = Callable[[Props], Any]

_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_MATCH_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda value, search: search in value,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def compile_node(node: Node) -> tuple[Evaluator, Kind]:
    """The evaluator of ``node`` and the Java kind of its non-null values."""
    if isinstance(node, Constant):
        value = node.value
        return (lambda p: value), node.kind
    if isinstance(node, Property):
        name = node.name
        return (lambda p: p.get(name)), Kind.STRING
    if isinstance(node, Negate):
        folded = _negated_number(node)
        if folded is None:
            return (lambda p: None), Kind.NULL
        return compile_node(folded)
    if isinstance(node, Compare):
        return _compare(node), Kind.BOOLEAN
    return _boolean(node), Kind.BOOLEAN


def _boolean(node: Node) -> Evaluator:
    if isinstance(node, Not):
        return _not(compile_node(node.operand)[0])
    if isinstance(node, BoolCast):
        name = node.operand.name
        return lambda p: None if p.get(name) is None else False
    if isinstance(node, Logic):
        items = tuple(compile_node(item)[0] for item in node.items)
        return _and(items) if node.op == "AND" else _or(items)
    if isinstance(node, In):
        return _in(node)
    assert isinstance(node, Match), node
    return _match(node)


def _negated_number(node: Negate) -> Constant | None:
    """The constant a chain of minus signs gives, None when it is null at run time."""
    inner = node.operand
    if isinstance(inner, Negate):
        folded = _negated_number(inner)
        if folded is None:
            return None
        inner = folded
    if isinstance(inner, Constant) and inner.kind in NUMERIC:
        assert isinstance(inner.value, int | float)
        return Constant(-inner.value, inner.kind)
    return None


def _compare(node: Compare) -> Evaluator:
    lf, lk = compile_node(node.left)
    rf, rk = compile_node(node.right)
    if node.op == "=":
        if isinstance(node.left, Property) and rk is Kind.STRING:
            return _string_equal(node.left.name, rf)
        return _equal(lf, lk, rf, rk)
    test = _ORDER_TESTS[node.op]
    both_strings = lk is Kind.STRING and rk is Kind.STRING

    def order(p: Props) -> bool | None:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        if both_strings:
            return test(compare_doubles(parse_double(lv), parse_double(rv)))
        return test(java_compare(lv, lk, rv, rk))

    return order


def _equal(lf: Evaluator, lk: Kind, rf: Evaluator, rk: Kind) -> Evaluator:
    def equal(p: Props) -> bool | None:
        lv = lf(p)
        rv = rf(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return java_compare(lv, lk, rv, rk) == 0

    return equal


def _string_equal(name: str, rf: Evaluator) -> Evaluator:
    # The common "region = 'eu'": two Strings are equal exactly when equal().
    def equal(p: Props) -> bool | None:
        lv = p.get(name)
        rv = rf(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return bool(lv == rv)

    return equal


def _not(f: Evaluator) -> Evaluator:
    def negation(p: Props) -> bool | None:
        value = f(p)
        return None if value is None else not value

    return negation


def _and(items: tuple[Evaluator, ...]) -> Evaluator:
    def conjunction(p: Props) -> bool | None:
        unknown = False
        for item in items:
            value = item(p)
            if value is False:
                return False
            if value is None:
                unknown = True
        return None if unknown else True

    return conjunction


def _or(items: tuple[Evaluator, ...]) -> Evaluator:
    def disjunction(p: Props) -> bool | None:
        unknown = False
        for item in items:
            value = item(p)
            if value is True:
                return True
            if value is None:
                unknown = True
        return None if unknown else False

    return disjunction


def _in(node: In) -> Evaluator:
    name, values, negated = node.operand.name, node.values, node.negated

    def membership(p: Props) -> bool | None:
        value = p.get(name)
        if value is None:
            return None
        return (value in values) is not negated

    return membership


def _match(node: Match) -> Evaluator:
    search, negated = node.search, node.negated
    if not search:
        return lambda p: False
    f = compile_node(node.operand)[0]
    test = _MATCH_TESTS[node.op]

    def match(p: Props) -> bool:
        value = f(p)
        if not isinstance(value, str):
            return False
        return test(value, search) is not negated

    return match
