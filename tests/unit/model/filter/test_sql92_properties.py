"""Generated expressions against an independent oracle, and generated garbage.

The oracle computes, in plain Python, what each generated expression means
under RocketMQ's rules: comparisons on a missing property are null,
IS [NOT] NULL and the string operators are two-valued, and AND / OR / NOT
follow three-valued (Kleene) logic. Numeric properties only ever hold
integers and string properties words, so no evaluation throws.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.errors import FilterExpressionError
from apogee.model.filter import FilterEvaluationError, compile_sql92

Props = Mapping[str, str]
Truth = bool | None

NUMERIC = ("n1", "n2")
WORDS = ("x", "y", "z")
STRINGS = ("s1", "s2")

_OPS: dict[str, Callable[[int, int], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


@dataclass(frozen=True)
class Case:
    text: str
    oracle: Callable[[Props], Truth]
    names: frozenset[str]
    has_null_literal: bool = False


def _numeric(name: str, op: str, k: int) -> Case:
    def oracle(p: Props) -> Truth:
        return None if name not in p else _OPS[op](int(p[name]), k)

    return Case(f"{name} {op} {k}", oracle, frozenset({name}))


def _between(name: str, lo: int, hi: int, negated: bool) -> Case:
    def oracle(p: Props) -> Truth:
        return None if name not in p else (lo <= int(p[name]) <= hi) != negated

    word = "NOT BETWEEN" if negated else "BETWEEN"
    return Case(f"{name} {word} {lo} AND {hi}", oracle, frozenset({name}))


def _string_eq(name: str, word: str, negated: bool) -> Case:
    def oracle(p: Props) -> Truth:
        return None if name not in p else (p[name] == word) != negated

    return Case(f"{name} {'<>' if negated else '='} '{word}'", oracle, frozenset({name}))


def _in(name: str, words: list[str], negated: bool) -> Case:
    def oracle(p: Props) -> Truth:
        return None if name not in p else (p[name] in words) != negated

    listed = ", ".join(f"'{w}'" for w in words)
    text = f"{name} {'NOT IN' if negated else 'IN'} ({listed})"
    return Case(text, oracle, frozenset({name}))


def _is_null(name: str, negated: bool) -> Case:
    def oracle(p: Props) -> Truth:
        return (name not in p) != negated

    return Case(f"{name} IS {'NOT ' if negated else ''}NULL", oracle, frozenset({name}))


def _contains(name: str, word: str, negated: bool) -> Case:
    def oracle(p: Props) -> Truth:
        return False if name not in p else (word in p[name]) != negated

    text = f"{name} {'NOT ' if negated else ''}CONTAINS '{word}'"
    return Case(text, oracle, frozenset({name}))


def _literal(value: Truth) -> Case:
    text = {True: "TRUE", False: "FALSE", None: "NULL"}[value]
    return Case(text, lambda p: value, frozenset(), value is None)


small = st.integers(-3, 3)
atoms = st.one_of(
    st.builds(_numeric, st.sampled_from(NUMERIC), st.sampled_from(sorted(_OPS)), small),
    st.builds(
        lambda n, a, b, neg: _between(n, min(a, b), max(a, b), neg),
        st.sampled_from(NUMERIC),
        small,
        small,
        st.booleans(),
    ),
    st.builds(_string_eq, st.sampled_from(STRINGS), st.sampled_from(WORDS), st.booleans()),
    st.builds(
        _in,
        st.sampled_from(STRINGS),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
        st.booleans(),
    ),
    st.builds(_is_null, st.sampled_from(NUMERIC + STRINGS), st.booleans()),
    st.builds(_contains, st.sampled_from(STRINGS), st.sampled_from(WORDS), st.booleans()),
    st.builds(_literal, st.sampled_from([True, False, None])),
)


def k_not(a: Truth) -> Truth:
    return None if a is None else not a


def k_and(a: Truth, b: Truth) -> Truth:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def k_or(a: Truth, b: Truth) -> Truth:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def negate(case: Case) -> Case:
    return Case(
        f"NOT ({case.text})",
        lambda p: k_not(case.oracle(p)),
        case.names,
        case.has_null_literal,
    )


def combine(word: str, left: Case, right: Case) -> Case:
    logic = k_and if word == "AND" else k_or
    return Case(
        f"({left.text}) {word} ({right.text})",
        lambda p: logic(left.oracle(p), right.oracle(p)),
        left.names | right.names,
        left.has_null_literal or right.has_null_literal,
    )


cases = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(negate, inner),
        st.builds(combine, st.sampled_from(["AND", "OR"]), inner, inner),
    ),
    max_leaves=8,
)


@st.composite
def property_maps(draw: st.DrawFn, everything: bool = False) -> dict[str, str]:
    props: dict[str, str] = {"unrelated": "1"}
    for name in NUMERIC:
        if everything or draw(st.booleans()):
            props[name] = str(draw(small))
    for name in STRINGS:
        if everything or draw(st.booleans()):
            props[name] = draw(st.sampled_from((*WORDS, "xy", "zx")))
    return props


@settings(max_examples=300, deadline=None)
@given(cases, property_maps())
def test_evaluation_agrees_with_the_oracle(case: Case, props: dict[str, str]) -> None:
    sql = compile_sql92(case.text)
    assert sql.evaluate(props) == case.oracle(props)
    assert sql.matches(props) is (case.oracle(props) is True)
    assert sql.properties == case.names


@settings(max_examples=200, deadline=None)
@given(cases, cases, property_maps(everything=True))
def test_with_every_property_present_logic_is_two_valued(
    first: Case, second: Case, props: dict[str, str]
) -> None:
    if first.has_null_literal or second.has_null_literal:
        return
    e1 = compile_sql92(first.text).evaluate(props)
    e2 = compile_sql92(second.text).evaluate(props)
    assert isinstance(e1, bool) and isinstance(e2, bool)
    assert compile_sql92(f"NOT ({first.text})").evaluate(props) is (not e1)
    assert compile_sql92(f"({first.text}) AND ({second.text})").evaluate(props) is (e1 and e2)
    assert compile_sql92(f"({first.text}) OR ({second.text})").evaluate(props) is (e1 or e2)


FRAGMENTS = [
    "a", "b", "TAGS", " ", "(", ")", ",", "'", "''", "'x'", "=", "<>", ">", ">=", "<", "<=",
    "+", "-", "--", "\n", "/*", "*/", "AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE",
    "FALSE", "BETWEEN", "CONTAINS", "STARTSWITH", "ENDSWITH", "0", "5", "3000000000",
    "1.5", ".5", "5e3", "5L", "!", ".", "$", "é",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=25).map(" ".join),
    st.dictionaries(st.sampled_from(["a", "b", "TAGS"]), st.sampled_from(["1", "x", "5.5"])),
)
def test_any_text_compiles_or_is_refused_and_never_crashes(
    text: str, props: dict[str, str]
) -> None:
    try:
        sql = compile_sql92(text)
    except FilterExpressionError as error:
        assert error.column >= 1 and error.position <= len(text)
        return
    try:
        result = sql.evaluate(props)
    except FilterEvaluationError:
        assert sql.matches(props) is False
        return
    assert result in (True, False, None)
    assert sql.matches(props) is (result is True)
