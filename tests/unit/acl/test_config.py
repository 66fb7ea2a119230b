"""plain_acl.yml: RocketMQ's sample file loads; every bad entry is named; edits keep the rest."""

from __future__ import annotations

import pytest

from apogee.acl.config import (
    AccountUpdate,
    compile_document,
    dump_document,
    load_document,
    with_account,
    with_global_white,
    with_next_version,
    without_account,
)
from apogee.acl.permission import Perm
from apogee.errors import ConfigError

# RocketMQ 4.x distribution/conf/plain_acl.yml, in substance
SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_the_sample_file_compiles() -> None:
    table = compile_document(load_document(SAMPLE, "plain_acl.yml"), "plain_acl.yml")
    assert [p.text for p in table.global_white] == ["10.10.103.*", "192.168.0.*"]
    first = table.accounts["RocketMQ"]
    assert first.secret_key == "12345678"  # YAML reads it as a number; it is text here
    assert not first.admin
    assert first.default_topic_perm == Perm.DENY
    assert first.default_group_perm == Perm.SUB
    assert first.resources == {
        "topicA": Perm.DENY,
        "topicB": Perm.PUB | Perm.SUB,
        "topicC": Perm.SUB,
        "%RETRY%groupA": Perm.DENY,
        "%RETRY%groupB": Perm.PUB | Perm.SUB,
        "%RETRY%groupC": Perm.SUB,
    }
    second = table.accounts["rocketmq2"]
    assert second.admin and second.resources is None
    assert second.default_topic_perm == Perm.DENY  # not given: DENY


def test_an_empty_file_has_no_accounts() -> None:
    table = compile_document(load_document("", "f"), "f")
    assert not table.accounts and not table.global_white


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "accounts: [ {accessKey: short, secretKey: 12345678} ]",
            "accessKey must be longer than 6",
        ),
        ("accounts: [ {accessKey: RocketMQ, secretKey: 123456} ]", "RocketMQ secretKey must be"),
        ("accounts: [ {accessKey: RocketMQ, secretKey: 12345678, admn: true} ]", "'admn'"),
        (
            "accounts: [ {accessKey: RocketMQ, secretKey: 12345678, defaultTopicPerm: ALL} ]",
            "RocketMQ defaultTopicPerm: 'ALL' is not a permission",
        ),
        (
            "accounts: [ {accessKey: RocketMQ, secretKey: 12345678, topicPerms: [a=PUSH]} ]",
            "topicPerms a: 'PUSH'",
        ),
        (
            "accounts: [ {accessKey: RocketMQ, secretKey: 12345678, admin: maybe} ]",
            "admin must be true or false",
        ),
        (
            "accounts: [ {accessKey: RocketMQ, secretKey: 12345678,"
            " whiteRemoteAddress: 300.1.1.1} ]",
            "is not an IP address",
        ),
        (
            "accounts:\n - {accessKey: RocketMQ, secretKey: 12345678}\n"
            " - {accessKey: RocketMQ, secretKey: 87654321}",
            "listed twice",
        ),
        ("globalWhiteRemoteAddresses: 10.0.0.*", "must be a list"),
        ("acounts: []", "unknown key 'acounts'"),
        ("- a\n- b", "top level must be a mapping"),
        ("accounts: [", "not valid YAML"),
    ],
)
def test_bad_files_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_document(load_document(text, "acl.yml"), "acl.yml")


def test_update_changes_only_what_it_names_and_creates_new_accounts() -> None:
    doc = load_document(SAMPLE, "f")
    update = AccountUpdate("RocketMQ", topic_perms=["topicX=PUB"], default_topic_perm="SUB")
    doc = with_account(doc, update, "f")
    table = compile_document(doc, "f")
    account = table.accounts["RocketMQ"]
    assert account.secret_key == "12345678"  # kept
    assert account.default_topic_perm == Perm.SUB
    assert account.resources is not None and account.resources["topicX"] == Perm.PUB
    assert "%RETRY%groupA" in account.resources  # groupPerms kept

    doc = with_account(doc, AccountUpdate("newuser1", "newsecret1", admin=True), "f")
    assert compile_document(doc, "f").accounts["newuser1"].admin


def test_an_update_that_would_break_the_file_is_refused() -> None:
    doc = load_document(SAMPLE, "f")
    with pytest.raises(ConfigError, match="secretKey must be longer"):
        with_account(doc, AccountUpdate("brandnew1"), "f")  # no secret for a new account
    with pytest.raises(ConfigError, match="'BOTH'"):
        with_account(doc, AccountUpdate("RocketMQ", group_perms=["g=BOTH"]), "f")


def test_delete_white_list_and_version_edits_round_trip_through_yaml() -> None:
    doc = load_document(SAMPLE, "f")
    assert without_account(doc, "nobody1", "f") is None
    doc = without_account(doc, "rocketmq2", "f") or {}
    doc = with_global_white(doc, ["127.0.0.1", "10.*.*.*"], "f")
    doc = with_next_version(with_next_version(doc, 1000, "f"), 2000, "f")
    again = load_document(dump_document(doc), "f")
    table = compile_document(again, "f")
    assert set(table.accounts) == {"RocketMQ"}
    assert [p.text for p in table.global_white] == ["127.0.0.1", "10.*.*.*"]
    assert (table.version.counter, table.version.timestamp) == (2, 2000)
    with pytest.raises(ConfigError, match="white address"):
        with_global_white(doc, ["10.0.0.300"], "f")
