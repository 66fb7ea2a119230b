from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.model.javahash import java_string_hash, java_string_hash_uncached, tags_code


def test_known_values_match_java() -> None:
    # Values computed by hand from the definition s[0]*31^(n-1) + ... + s[n-1].
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("ab") == 97 * 31 + 98
    # "TagA": 84*31^3 + 97*31^2 + 103*31 + 65
    assert java_string_hash("TagA") == 84 * 31**3 + 97 * 31**2 + 103 * 31 + 65


def test_wraps_to_signed_32_bits() -> None:
    h = java_string_hash("a fairly long tag that overflows int32 many times")
    assert -(2**31) <= h < 2**31
    # A string whose hash is negative in Java ("polygenelubricants" -> Integer.MIN_VALUE).
    assert java_string_hash("polygenelubricants") == -(2**31)


def test_non_bmp_characters_hash_as_surrogate_pairs() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_tags_code_of_missing_tag_is_zero() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == java_string_hash("TagA")


def _by_definition(text: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units, exact, then wrapped to int32."""
    data = text.encode("utf-16-be")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    n = len(units)
    h = int(sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units))) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_hashes_as_the_definition_says(text: str) -> None:
    assert java_string_hash_uncached(text) == _by_definition(text)
    assert java_string_hash(text) == _by_definition(text)


@pytest.mark.parametrize("length", [1, 63, 64, 65, 127, 128, 129, 256, 1000])
@pytest.mark.parametrize("alphabet", ["0123456789ABCDEF#_-", "é中\U0001f600a"])
def test_lengths_around_table_boundaries(length: int, alphabet: str) -> None:
    text = "".join(alphabet[(i * 7) % len(alphabet)] for i in range(length))
    assert java_string_hash_uncached(text) == _by_definition(text)
