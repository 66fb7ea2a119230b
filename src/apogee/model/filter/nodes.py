"""The parsed form of a SQL92 filter, and the rules RocketMQ checks while it builds it.

Owns: the node types (frozen, compared by structure) and the factories that
apply RocketMQ's parse-time checks (ComparisonExpression.create*,
UnaryExpression.createInExpression, SelectorParser.asBooleanExpression).

Node kinds follow the Java classes, so the checks can ask what Java asks:
``Constant`` (ConstantExpression; TRUE, FALSE and NULL are "boolean
constants"), ``Property``, ``Negate`` (unary minus, never a constant here
even when it negates one), and the boolean expressions ``Compare``,
``Not``, ``BoolCast``, ``Logic``, ``In`` and ``Match``. ``<>`` is built as
NOT (=), IS NULL as ``= NULL`` without the checks, BETWEEN as ``>= AND <=``
and NOT BETWEEN as ``< OR >``, as RocketMQ builds them. A factory that
refuses raises :class:`CheckError` with the problem; the parser adds where.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.model.filter.javavalues import NUMERIC, FilterEvaluationError, Kind, Value, java_compare


class CheckError(ValueError):
    """A parse-time rule RocketMQ enforces was broken; the message says which."""


@dataclass(frozen=True, slots=True)
class Constant:
    value: Value | None
    kind: Kind


@dataclass(frozen=True, slots=True)
class Property:
    name: str


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Node


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # = > >= < <=
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A property used as a condition: null when absent, else FALSE (it is a String)."""

    operand: Property


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # AND, OR
    items: tuple[Node, ...]  # a chain: (a AND b) AND c is one node of three items


@dataclass(frozen=True, slots=True)
class In:
    operand: Property
    values: frozenset[str]
    negated: bool


@dataclass(frozen=True, slots=True)
class Match:
    """CONTAINS / STARTSWITH / ENDSWITH (RocketMQ 5.1.3+)."""

    op: str
    operand: Node
    search: str
    negated: bool


Node = Constant | Property | Negate | Compare | Not | BoolCast | Logic | In | Match

TRUE = Constant(True, Kind.BOOLEAN)
FALSE = Constant(False, Kind.BOOLEAN)
NULL = Constant(None, Kind.NULL)


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Negate | Not | BoolCast | Match | In):
        return (node.operand,)
    if isinstance(node, Compare):
        return (node.left, node.right)
    if isinstance(node, Logic):
        return node.items
    return ()


def is_boolean(node: Node) -> bool:
    """Java's ``instanceof BooleanExpression``."""
    if isinstance(node, Constant):
        return node.kind is Kind.BOOLEAN or node.kind is Kind.NULL
    return not isinstance(node, Property | Negate)


def render(node: Node) -> str:
    """Short SQL text of a node, for messages."""
    if isinstance(node, Constant):
        if node.kind is Kind.NULL:
            return "NULL"
        if node.kind is Kind.BOOLEAN:
            return "TRUE" if node.value else "FALSE"
        if node.kind is Kind.STRING:
            return "'" + str(node.value).replace("'", "''") + "'"
        return str(node.value)
    if isinstance(node, Property):
        return node.name
    if isinstance(node, Negate):
        return f"-{render(node.operand)}"
    return "a condition"


# -- factories with RocketMQ's checks ---------------------------------------------


def as_boolean(node: Node) -> Node:
    if is_boolean(node):
        return node
    if isinstance(node, Property):
        return BoolCast(node)
    raise CheckError(f"{render(node)} does not give a boolean value")


def logic(op: str, left: Node, right: Node) -> Logic:
    left, right = as_boolean(left), as_boolean(right)
    if isinstance(left, Logic) and left.op == op:
        return Logic(op, (*left.items, right))
    return Logic(op, (left, right))


def equal(left: Node, right: Node, op: str = "=") -> Node:
    for side in (left, right):
        if side == NULL:
            raise CheckError(f"NULL cannot be compared with {op}; use IS NULL")
    if (
        isinstance(left, Constant)
        and isinstance(right, Constant)
        and is_boolean(left)
        and not is_boolean(right)
    ):
        raise CheckError(f"{render(left)} cannot be compared with {render(right)}")
    node = Compare("=", left, right)
    return Not(node) if op == "<>" else node


def is_null(operand: Node, negated: bool) -> Node:
    node = Compare("=", operand, NULL)
    return Not(node) if negated else node


def order(op: str, left: Node, right: Node) -> Compare:
    """``>``, ``>=``, ``<``, ``<=``: only numbers, properties and negations compare."""
    for side in (left, right):
        if isinstance(side, Not):
            raise CheckError(
                f"a condition cannot be compared with {op} "
                f"(NOT binds tighter than {op}: write NOT (x {op} y))"
            )
        if (isinstance(side, Constant) and side.kind not in NUMERIC) or is_boolean(side):
            raise CheckError(f"{render(side)} cannot be compared with {op}")
    return Compare(op, left, right)


def between(value: Node, low: Node, high: Node, negated: bool) -> Logic:
    if negated:
        return logic("OR", order("<", value, low), order(">", value, high))
    if isinstance(low, Constant) and isinstance(high, Constant):
        if low.value is None or high.value is None:
            raise CheckError("BETWEEN bounds must not be NULL")
        try:
            above = java_compare(high.value, high.kind, low.value, low.kind) < 0
        except FilterEvaluationError:
            raise CheckError(
                f"BETWEEN bounds {render(low)} and {render(high)} cannot be compared"
            ) from None
        if above:
            raise CheckError(f"BETWEEN bounds: {render(low)} must not be above {render(high)}")
    return logic("AND", order(">=", value, low), order("<=", value, high))


def in_list(operand: Node, values: list[str], negated: bool) -> In:
    if not isinstance(operand, Property):
        raise CheckError(f"IN needs a property on its left, not {render(operand)}")
    return In(operand, frozenset(values), negated)
