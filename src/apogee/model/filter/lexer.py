"""Tokens of RocketMQ's SQL92 filter grammar (SelectorParser.jj, 4.9).

Owns: :func:`tokenize` and :class:`Token`.

Token rules, as the JavaCC grammar declares them:

* blanks are `` \\t\\n\\r\\f``; ``-- ...`` up to and including a line end
  and ``/* ... */`` are comments (a ``--`` with no line end after it is
  two minus signs);
* keywords, case-insensitive: NOT AND OR BETWEEN IN TRUE FALSE NULL IS;
* identifiers ``[a-zA-Z_$][a-zA-Z0-9_$]*`` (ASCII only; case kept);
* integers ``0 | [1-9][0-9]*[lL]?`` and decimals ``5.``, ``.5``, ``5.5e-3``,
  ``5E3``; the longest match wins, an integer on a tie (so ``007`` is three
  tokens and ``5e`` two);
* strings in single quotes, ``''`` standing for one quote; they may span lines;
* operators ``= <> > >= < <= ( ) , + -``.

Invariant: the last token is END, at the end of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from apogee.errors import FilterExpressionError


class T(Enum):
    """Token kinds."""

    KEYWORD = "keyword"
    IDENT = "identifier"
    INTEGER = "integer"
    DECIMAL = "decimal"
    STRING = "string"
    OP = "operator"
    END = "end"


KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: T
    text: str  # as written; keywords are matched on ``word``
    pos: int

    @property
    def word(self) -> str:
        """Upper-cased text of a keyword or identifier (what keywords compare)."""
        return self.text.upper()

    def is_keyword(self, word: str) -> bool:
        return self.kind is T.KEYWORD and self.text.upper() == word

    def is_op(self, op: str) -> bool:
        return self.kind is T.OP and self.text == op


_SKIP = re.compile(
    r"""(?: [ \t\n\r\f]+
          | --[^\n\r]*(?:\r\n|\n|\r)
          | /\*[^*]*\*+(?:[^/*][^*]*\*+)*/
        )+""",
    re.VERBOSE,
)
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_INTEGER = re.compile(r"0|[1-9][0-9]*[lL]?")
_DECIMAL = re.compile(
    r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
)
_STRING = re.compile(r"'(?:''|[^'])*'")
_OPERATOR = re.compile(r"<>|>=|<=|[=<>(),+-]")


def tokenize(text: str) -> list[Token]:
    """Every token of ``text``, END last; FilterExpressionError at the first bad character."""
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while True:
        skipped = _SKIP.match(text, pos)
        if skipped is not None:
            pos = skipped.end()
        if pos >= end:
            tokens.append(Token(T.END, "", end))
            return tokens
        token = _next(text, pos)
        tokens.append(token)
        pos += len(token.text)


def _next(text: str, pos: int) -> Token:
    char = text[pos]
    if char.isascii() and (char.isalpha() or char in "_$"):
        word = _IDENT.match(text, pos)
        assert word is not None
        kind = T.KEYWORD if word.group().upper() in KEYWORDS else T.IDENT
        return Token(kind, word.group(), pos)
    if "0" <= char <= "9" or char == ".":
        number = _number(text, pos)
        if number is not None:
            return number
    elif char == "'":
        string = _STRING.match(text, pos)
        if string is None:
            raise FilterExpressionError(
                "unterminated string literal", expression=text, position=pos, token=text[pos:]
            )
        return Token(T.STRING, string.group(), pos)
    else:
        op = _OPERATOR.match(text, pos)
        if op is not None:
            return Token(T.OP, op.group(), pos)
    raise FilterExpressionError(
        f"unexpected character {char!r}", expression=text, position=pos, token=char
    )


def _number(text: str, pos: int) -> Token | None:
    integer = _INTEGER.match(text, pos)
    decimal = _DECIMAL.match(text, pos)
    if decimal is not None and (integer is None or decimal.end() > integer.end()):
        return Token(T.DECIMAL, decimal.group(), pos)
    if integer is not None:
        return Token(T.INTEGER, integer.group(), pos)
    return None


def unquote(literal: str) -> str:
    """The value of a string token: quotes off, ``''`` back to ``'``."""
    return literal[1:-1].replace("''", "'")
