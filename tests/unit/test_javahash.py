from __future__ import annotations

from apogee.model.javahash import java_string_hash, tags_code


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
