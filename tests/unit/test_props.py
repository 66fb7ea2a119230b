from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from apogee._util.props import bind, load_properties, parse_properties, reject_unknown
from apogee.errors import ConfigError


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
