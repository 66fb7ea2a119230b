"""Recursive-descent parser of RocketMQ's SQL92 filter grammar (SelectorParser.jj).

Owns: :func:`parse` (text -> checked node tree).

Grammar, loosest binding first (``*`` = repeated, left to right)::

    selector   := or END
    or         := and (OR and)*
    and        := equality (AND equality)*
    equality   := compare ( (= | <>) compare | IS [NOT] NULL )*
    compare    := unary ( (> | >= | < | <=) unary
                        | [NOT] BETWEEN unary AND unary
                        | [NOT] IN '(' string (',' string)* ')'
                        | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )*
    unary      := + unary | - unary | NOT unary | primary
    primary    := string | integer | decimal | TRUE | FALSE | NULL | identifier | '(' or ')'

NOT binds tighter than comparisons, as in RocketMQ: ``NOT a > 1`` is
refused and ``NOT a = 'x'`` means ``(NOT a) = 'x'``; write ``NOT (a > 1)``.
CONTAINS, STARTSWITH and ENDSWITH (RocketMQ 5.1.3+) are operators only
where an operator is expected, so 4.x property names keep working. Two
deliberate differences from RocketMQ: text after a complete expression is
an error (RocketMQ ignores it), and a 0.0 literal is accepted (RocketMQ
refuses decimals below Double.MIN_VALUE). Parentheses and unary operators
nest at most MAX_DEPTH deep, the built tree at most MAX_TREE_DEPTH, so
neither parsing nor evaluation can exhaust the stack.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

from apogee.errors import FilterExpressionError
from apogee.model.filter import nodes
from apogee.model.filter.javavalues import INT_MAX, LONG_MAX, Kind
from apogee.model.filter.lexer import T, Token, tokenize, unquote
from apogee.model.filter.nodes import CheckError, Constant, Node, Property

MAX_DEPTH = 64
MAX_TREE_DEPTH = 200
MAX_EXPRESSION_LENGTH = 256 * 1024
MATCH_OPERATORS = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})
_ORDER_OPERATORS = frozenset({">", ">=", "<", "<="})

P = ParamSpec("P")
R = TypeVar("R")


def parse(text: str) -> Node:
    """The checked tree of ``text``; FilterExpressionError names the place of a refusal."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise FilterExpressionError(
            f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters",
            expression=text,
            position=MAX_EXPRESSION_LENGTH,
            token="",
        )
    return _Parser(text).selector()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.nesting = 0

    # -- cursor ------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self) -> Token:
        return self.tokens[min(self.i + 1, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.i]
        if token.kind is not T.END:
            self.i += 1
        return token

    def fail(self, problem: str, token: Token | None = None) -> NoReturn:
        at = self.tok if token is None else token
        raise FilterExpressionError(problem, expression=self.text, position=at.pos, token=at.text)

    def check(self, at: Token, build: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a node factory; its refusal is reported at ``at``."""
        try:
            return build(*args, **kwargs)
        except CheckError as refused:
            self.fail(str(refused), at)

    def enter(self, at: Token) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            self.fail(f"the expression nests too deeply (more than {MAX_DEPTH} levels)", at)

    # -- rules -------------------------------------------------------------------

    def selector(self) -> Node:
        start = self.tok
        if start.kind is T.END:
            self.fail("the expression is empty")
        node = self.or_()
        if self.tok.kind is not T.END:
            self.fail(f"unexpected {self.tok.text!r} after a complete expression")
        node = self.check(start, nodes.as_boolean, node)
        if _tree_depth(node) > MAX_TREE_DEPTH:
            self.fail(f"the expression nests too deeply (more than {MAX_TREE_DEPTH} levels)", start)
        return node

    def or_(self) -> Node:
        return self._chain("OR", self.and_)

    def and_(self) -> Node:
        return self._chain("AND", self.equality)

    def _chain(self, word: str, operand: Callable[[], Node]) -> Node:
        start = self.tok
        left = operand()
        while self.tok.is_keyword(word):
            self.advance()
            right_start = self.tok
            right = operand()
            left = self.check(start, nodes.as_boolean, left)
            right = self.check(right_start, nodes.as_boolean, right)
            left = nodes.logic(word, left, right)
        return left

    def equality(self) -> Node:
        left = self.compare()
        while True:
            at = self.tok
            if at.is_op("=") or at.is_op("<>"):
                self.advance()
                left = self.check(at, nodes.equal, left, self.compare(), at.text)
            elif at.is_keyword("IS"):
                self.advance()
                negated = self.tok.is_keyword("NOT")
                if negated:
                    self.advance()
                if not self.tok.is_keyword("NULL"):
                    self.fail(
                        "expected NULL after IS NOT"
                        if negated
                        else "expected NULL or NOT NULL after IS"
                    )
                self.advance()
                left = nodes.is_null(left, negated)
            else:
                return left

    def compare(self) -> Node:
        left = self.unary()
        while True:
            at = self.tok
            if at.kind is T.OP and at.text in _ORDER_OPERATORS:
                self.advance()
                left = self.check(at, nodes.order, at.text, left, self.unary())
            elif at.is_keyword("NOT"):
                operator = self.peek()
                if not _negatable(operator):
                    self.fail(
                        "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT", operator
                    )
                self.advance()
                left = self._operator(left, negated=True)
            elif _negatable(at):
                left = self._operator(left, negated=False)
            else:
                return left

    def _operator(self, left: Node, *, negated: bool) -> Node:
        at = self.advance()
        if at.is_keyword("BETWEEN"):
            low = self.unary()
            if not self.tok.is_keyword("AND"):
                self.fail("expected AND between the BETWEEN bounds")
            self.advance()
            return self.check(at, nodes.between, left, low, self.unary(), negated)
        if at.is_keyword("IN"):
            return self.check(at, nodes.in_list, left, self._string_list(), negated)
        return nodes.Match(at.word, left, self._string(), negated)

    def _string_list(self) -> list[str]:
        if not self.tok.is_op("("):
            self.fail("expected ( to open the IN list")
        self.advance()
        values = [self._string()]
        while self.tok.is_op(","):
            self.advance()
            values.append(self._string())
        if not self.tok.is_op(")"):
            self.fail("expected , or ) in the IN list")
        self.advance()
        return values

    def _string(self) -> str:
        if self.tok.kind is not T.STRING:
            self.fail("expected a string literal")
        return unquote(self.advance().text)

    def unary(self) -> Node:
        at = self.tok
        if not (at.is_op("+") or at.is_op("-") or at.is_keyword("NOT")):
            return self.primary()
        self.enter(at)
        self.advance()
        start = self.tok
        operand = self.unary()
        self.nesting -= 1
        if at.text == "+":
            return operand
        if at.text == "-":
            return nodes.Negate(operand)
        return nodes.Not(self.check(start, nodes.as_boolean, operand))

    def primary(self) -> Node:
        at = self.tok
        if at.is_op("("):
            self.enter(at)
            self.advance()
            node = self.or_()
            if not self.tok.is_op(")"):
                self.fail("expected )")
            self.advance()
            self.nesting -= 1
            return node
        node = self._literal(at)
        self.advance()
        return node

    def _literal(self, at: Token) -> Node:
        if at.kind is T.IDENT:
            return Property(at.text)
        if at.kind is T.STRING:
            return Constant(unquote(at.text), Kind.STRING)
        if at.kind is T.INTEGER:
            return self._integer(at)
        if at.kind is T.DECIMAL:
            value = float(at.text)
            if math.isinf(value):
                self.fail("decimal out of range", at)
            return Constant(value, Kind.DOUBLE)
        constant = _WORD_CONSTANTS.get(at.word) if at.kind is T.KEYWORD else None
        if constant is None:
            self.fail("expected an operand", at)
        return constant

    def _integer(self, at: Token) -> Constant:
        # ConstantExpression.createFromDecimal: a Long, kept as an Integer when it fits.
        digits = at.text.rstrip("lL")
        if len(digits) > 19 or int(digits) > LONG_MAX:
            self.fail("integer out of range", at)
        value = int(digits)
        return Constant(value, Kind.INT if value <= INT_MAX else Kind.LONG)


_WORD_CONSTANTS = {"TRUE": nodes.TRUE, "FALSE": nodes.FALSE, "NULL": nodes.NULL}


def _negatable(token: Token) -> bool:
    """An operator that may follow NOT: BETWEEN, IN and the string operators."""
    if token.kind is T.IDENT:
        return token.word in MATCH_OPERATORS
    return token.is_keyword("BETWEEN") or token.is_keyword("IN")


def _tree_depth(root: Node) -> int:
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in nodes.children(node))
    return deepest
