"""namesrv.conf: access control and TLS keys next to RocketMQ's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.errors import ConfigError
from apogee.namesrv.config import load_namesrv_config
from apogee.remoting.tls import TlsMode


def test_acl_and_tls_keys(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "listenPort=9877\naclEnable=true\nrocketmq.acl.plain.file=/etc/acl.yml\n"
        "tls.server.mode=enforcing\ntls.server.certPath=/c.pem\ntls.server.keyPath=/c.key\n"
    )
    config = load_namesrv_config(conf)
    assert config.acl_enable and config.plain_acl_file == "/etc/acl.yml"
    assert config.tls.mode is TlsMode.ENFORCING
    assert load_namesrv_config(None).tls.mode is TlsMode.DISABLED


def test_unknown_tls_key_is_named(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("tls.server.mod=enforcing\n")
    with pytest.raises(ConfigError, match=r"'tls.server.mod'"):
        load_namesrv_config(conf)


def test_max_connections_key(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("maxConnections=500\n")
    assert load_namesrv_config(conf).max_connections == 500
    assert load_namesrv_config(None).max_connections == 0  # derived at start
    conf.write_text("maxConnections=-1\n")
    with pytest.raises(ConfigError, match="maxConnections"):
        load_namesrv_config(conf)
