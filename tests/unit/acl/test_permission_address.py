"""The permission rule (RocketMQ's Permission) and white-address patterns.

Pattern forms are those of RocketMQ's RemoteAddressStrategyFactory.
"""

from __future__ import annotations

import pytest

from apogee.acl.address import AddressPattern, canonical
from apogee.acl.permission import Perm, allows, parse_perm, parse_resource_perms, perm_word
from apogee.errors import ConfigError

PUB, SUB, DENY, ANY = Perm.PUB, Perm.SUB, Perm.DENY, Perm.ANY


@pytest.mark.parametrize(
    ("needed", "owned", "ok"),
    [
        (PUB, PUB, True),
        (PUB, SUB, False),
        (SUB, PUB | SUB, True),
        (PUB, PUB | DENY, False),  # an owned DENY wins over everything
        (ANY, PUB, True),
        (ANY, SUB, True),
        (ANY, DENY, False),
        (ANY, Perm.NONE, False),
        (SUB, Perm.NONE, False),
    ],
)
def test_check_permission(needed: Perm, owned: Perm, ok: bool) -> None:
    assert allows(needed, owned) is ok


def test_perm_words() -> None:
    assert parse_perm("PUB|SUB", what="x") == PUB | SUB
    assert parse_perm(" SUB|PUB ", what="x") == PUB | SUB
    assert parse_perm(None, what="x") == DENY  # missing is DENY, as in RocketMQ
    with pytest.raises(ConfigError, match=r"defaultTopicPerm: 'PUBLISH' is not a permission"):
        parse_perm("PUBLISH", what="defaultTopicPerm")
    assert perm_word(PUB | SUB) == "PUB|SUB"
    assert perm_word(DENY | PUB) == "DENY"


def test_resource_perm_lists() -> None:
    assert parse_resource_perms(["a=PUB", " b = SUB|PUB "], what="topicPerms") == {
        "a": PUB,
        "b": PUB | SUB,
    }
    with pytest.raises(ConfigError, match="'topicA' is not 'name=PERM'"):
        parse_resource_perms(["topicA"], what="topicPerms")
    with pytest.raises(ConfigError, match="must be a list"):
        parse_resource_perms("a=PUB", what="topicPerms")


def ip(text: str) -> object:
    return canonical(text)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("192.168.0.1", ["192.168.0.1", "::ffff:192.168.0.1"], ["192.168.0.2"]),
        ("10.10.103.*", ["10.10.103.0", "10.10.103.255"], ["10.10.104.1"]),
        ("192.168.1-10.*", ["192.168.1.7", "192.168.10.255"], ["192.168.11.1", "192.168.0.1"]),
        ("10.10.*", ["10.10.9.9"], ["10.11.0.0"]),
        ("1.1.1.1,2.2.2.2", ["2.2.2.2"], ["3.3.3.3"]),
        ("192.168.1.{1,2,3}", ["192.168.1.3"], ["192.168.1.4"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("2001:db8::*", ["2001:db8::ab"], ["2001:db9::1", "10.0.0.1"]),
        ("2001:db8::1-ff", ["2001:db8::ff"], ["2001:db8::100"]),
        ("", [], ["1.2.3.4"]),
    ],
)
def test_white_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    compiled = AddressPattern.parse(pattern)
    for text in yes:
        assert compiled.matches(canonical(text)), (pattern, text)
    for text in no:
        assert not compiled.matches(canonical(text)), (pattern, text)
    assert not compiled.matches(None) or compiled.everything


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("192.168.1.256-300", "outside 0..255"),
        ("192.168.1-2", "4 parts"),
        ("10.0.x.*", "bad part 'x'"),
        ("10.0.0.1,nope", "'nope' is not an IP address"),
        ("host.example", "is not an IP address"),
        ("{1,2}", "the last part"),
        ("1.{2,3}.4.5", "'1.{2' is not an IP address"),
    ],
)
def test_bad_patterns_name_the_problem(pattern: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AddressPattern.parse(pattern)
