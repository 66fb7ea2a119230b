from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    merge_batch_properties,
    properties_to_string,
    property_value,
    string_to_properties,
    transaction_type,
    with_transaction_type,
)


def test_every_pair_ends_with_separator_and_none_values_are_skipped() -> None:
    text = properties_to_string({"TAGS": "TagA", "KEYS": None, "UNIQ_KEY": "ABC"})
    assert text == "TAGS\x01TagA\x02UNIQ_KEY\x01ABC\x02"


def test_round_trip() -> None:
    props = {"a": "123", "b": "hello", "c": "3.14", "KEYS": "k1 k2"}
    assert string_to_properties(properties_to_string(props)) == props


def test_parser_edge_cases_follow_rocketmq() -> None:
    assert string_to_properties("") == {}
    assert string_to_properties(None) == {}
    # the last pair without its trailing separator is still read
    assert string_to_properties("a\x011\x02b\x012") == {"a": "1", "b": "2"}
    # empty name or empty value: pair ignored
    assert string_to_properties("\x01v\x02k\x01\x02x\x01y\x02") == {"x": "y"}
    # a piece without a name/value separator is ignored
    assert string_to_properties("garbage\x02k\x01v\x02") == {"k": "v"}
    # the value keeps any further 0x01
    assert string_to_properties("k\x01a\x01b\x02") == {"k": "a\x01b"}
    # empty pieces between separators
    assert string_to_properties("\x02\x02k\x01v\x02\x02") == {"k": "v"}
    # later duplicates win, as Java's HashMap.put does
    assert string_to_properties("k\x01old\x02k\x01new\x02") == {"k": "new"}


def test_unicode_values_survive() -> None:
    props = {"TAGS": "标签", "KEYS": "ключ"}
    assert string_to_properties(properties_to_string(props)) == props


def test_batch_merge_inserts_missing_separator() -> None:
    assert merge_batch_properties("a\x011\x02", "CLUSTER\x01c\x02") == "a\x011\x02CLUSTER\x01c\x02"
    assert merge_batch_properties("a\x011", "CLUSTER\x01c\x02") == "a\x011\x02CLUSTER\x01c\x02"
    assert merge_batch_properties("", "CLUSTER\x01c\x02") == "CLUSTER\x01c\x02"
    assert merge_batch_properties("a\x011", "") == "a\x011"


def test_transaction_bits() -> None:
    assert transaction_type(0x1 | TRANSACTION_PREPARED_TYPE) == TRANSACTION_PREPARED_TYPE
    assert transaction_type(TRANSACTION_ROLLBACK_TYPE | 0x10) == TRANSACTION_ROLLBACK_TYPE
    flag = with_transaction_type(0x11 | TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE)
    assert flag == 0x11 | TRANSACTION_COMMIT_TYPE


_PIECES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "a", "b b", "\x01", "\x02", ""])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join), st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY"]))
def test_property_value_agrees_with_the_full_parse(text: str, name: str) -> None:
    assert property_value(text, name) == string_to_properties(text).get(name)


def test_property_value_edge_cases() -> None:
    assert property_value("TAGS\x01a\x02", "TAGS") == "a"
    assert property_value("XTAGS\x01a\x02", "TAGS") is None
    assert property_value("TAGS\x01a\x02TAGS\x01b", "TAGS") == "b"
    assert property_value("TAGS\x01a\x02TAGS\x01\x02", "TAGS") == "a"  # empty value skipped
