from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from apogee._util.props import (
    bind,
    load_properties,
    parse_bool,
    parse_properties,
    reject_unknown,
)
from apogee.errors import ConfigError
from apogee.store.config import StoreConfig


@dataclass(frozen=True)
class _Conf:
    listen_port: int = 9876
    broker_name: str = "broker-a"
    auto_create_topic_enable: bool = True
    ratio: float = 0.75
    commit_log_file_size: int = field(
        default=1 << 30,
        metadata={"key": "mappedFileSizeCommitLog", "aliases": ("mapedFileSizeCommitLog",)},
    )
    namesrv_addr: str | None = None


def test_parse_comments_separators_and_continuations() -> None:
    text = "# comment\n! also\nlistenPort=10911\nbrokerName : b1\nlong=a\\\n  b\n\nempty=\n"
    assert parse_properties(text) == {
        "listenPort": "10911",
        "brokerName": "b1",
        "long": "ab",
        "empty": "",
    }


def test_unicode_escapes_are_decoded() -> None:
    assert parse_properties("brokerName=caf\\u00e9-\\u4e2d\n") == {"brokerName": "café-中"}


def test_escaped_separators_stay_in_the_key() -> None:
    text = "a\\=b=c\nx\\:y:z\nwith\\ space = v\nvalue=keeps=and:colons\n"
    assert parse_properties(text) == {
        "a=b": "c",
        "x:y": "z",
        "with space": "v",
        "value": "keeps=and:colons",
    }


def test_continuation_lines_join_without_their_leading_blanks() -> None:
    text = "namesrvAddr=10.0.0.1:9876;\\\n    10.0.0.2:9876\nnext=1\n"
    assert parse_properties(text) == {"namesrvAddr": "10.0.0.1:9876;10.0.0.2:9876", "next": "1"}


def test_an_escaped_backslash_ends_the_line() -> None:
    assert parse_properties("dir=C:\\\\\nnext=1\n") == {"dir": "C:\\", "next": "1"}


def test_values_are_stripped_and_a_later_duplicate_wins() -> None:
    assert parse_properties("k = v  \nk=w\t\n") == {"k": "w"}


def test_a_bad_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="escape"):
        parse_properties("k=\\u12\n")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("TRUE", True), ("True", True), (" true ", True), ("false", False),
     ("False", False)],
)  # fmt: skip
def test_booleans_read_as_java_does(raw: str, expected: bool) -> None:
    assert parse_bool("flag", raw) is expected


@pytest.mark.parametrize("raw", ["yes", "no", "1", "0", "on", "off", "flase", ""])
def test_anything_else_is_refused_rather_than_read_as_false(raw: str) -> None:
    with pytest.raises(ConfigError, match="'flag'"):
        parse_bool("flag", raw)


def test_bind_and_the_store_config_convert_booleans_alike(tmp_path: Path) -> None:
    for raw, expected in (("TRUE", True), ("False", False)):
        conf, _ = bind(_Conf(), {"autoCreateTopicEnable": raw})
        store = StoreConfig.from_properties(
            {"storePathRootDir": str(tmp_path), "messageIndexSafe": raw}
        )
        assert conf.auto_create_topic_enable is expected
        assert store.message_index_safe is expected
    for raw in ("yes", "1"):
        with pytest.raises(ConfigError, match="autoCreateTopicEnable"):
            bind(_Conf(), {"autoCreateTopicEnable": raw})
        with pytest.raises(ConfigError, match="messageIndexSafe"):
            StoreConfig.from_properties(
                {"storePathRootDir": str(tmp_path), "messageIndexSafe": raw}
            )


def test_bind_converts_by_type_and_keeps_defaults() -> None:
    conf, used = bind(
        _Conf(),
        {
            "listenPort": "10911",
            "autoCreateTopicEnable": "false",
            "mapedFileSizeCommitLog": "1048576",
            "namesrvAddr": "127.0.0.1:9876",
            "other": "x",
        },
    )
    assert conf == _Conf(10911, "broker-a", False, 0.75, 1048576, "127.0.0.1:9876")
    assert used == {"listenPort", "autoCreateTopicEnable", "mapedFileSizeCommitLog", "namesrvAddr"}


def test_bad_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match="listenPort"):
        bind(_Conf(), {"listenPort": "ten"})
    with pytest.raises(ConfigError, match="autoCreateTopicEnable"):
        bind(_Conf(), {"autoCreateTopicEnable": "maybe"})


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("listenPort=1\nbrokerNmae=typo\n")
    props = load_properties(path)
    _, used = bind(_Conf(), props)
    with pytest.raises(ConfigError, match=r"'brokerNmae'.*broker\.conf"):
        reject_unknown(props, used, source=str(path))
    reject_unknown(props, used, ignored={"brokerNmae"})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_properties(tmp_path / "nope.conf")
