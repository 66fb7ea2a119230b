"""RocketMQ's tls.* keys: parsed from a config file, merged with tls.config.file, checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.errors import ConfigError
from apogee.remoting.tls import TlsConfig, TlsMode, client_ssl_context, tls_config_from_properties


def test_keys_and_defaults() -> None:
    config, used = tls_config_from_properties(
        {
            "tls.server.mode": "Enforcing",
            "tls.server.certPath": "/c.pem",
            "tls.server.keyPath": "/c.key",
            "tls.enable": "true",
            "brokerName": "b",
        }
    )
    assert config.mode is TlsMode.ENFORCING
    assert config.client_enable and not config.client_auth_server
    assert used == {"tls.server.mode", "tls.server.certPath", "tls.server.keyPath", "tls.enable"}
    assert TlsConfig().mode is TlsMode.DISABLED  # Apogee's default


def test_the_tls_config_file_wins_over_the_keys_beside_it(tmp_path: Path) -> None:
    extra = tmp_path / "tls.properties"
    extra.write_text("tls.server.certPath=/from-file.pem\ntls.server.keyPath=/k.key\n")
    config, _ = tls_config_from_properties(
        {
            "tls.server.mode": "permissive",
            "tls.server.certPath": "/beside.pem",
            "tls.config.file": str(extra),
        }
    )
    assert config.server_cert_path == "/from-file.pem"
    extra.write_text("tls.server.mode=enforcing\n")
    with pytest.raises(ConfigError, match=r"tls.server.mode cannot be set in tls.config.file"):
        tls_config_from_properties({"tls.config.file": str(extra)})
    extra.write_text("tls.server.certpath=/x\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'tls.server.certpath'"):
        tls_config_from_properties({"tls.config.file": str(extra)})


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"tls.server.mode": "strict"}, "must be disabled, permissive or enforcing"),
        ({"tls.server.mode": "permissive"}, "needs tls.server.certPath and tls.server.keyPath"),
        (
            {"tls.server.mode": "enforcing", "tls.test.mode.enable": "true"},
            r"tls.test.mode.enable is not supported",
        ),
        ({"tls.server.need.client.auth": "always"}, "none, optional or require"),
        (
            {
                "tls.server.mode": "enforcing",
                "tls.server.certPath": "/c",
                "tls.server.keyPath": "/k",
                "tls.server.need.client.auth": "require",
            },
            "needs tls.server.trustCertPath",
        ),
        ({"tls.enable": "maybe"}, "'tls.enable': 'maybe' is not a valid bool"),
    ],
)
def test_bad_settings_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tls_config_from_properties(props)


def test_client_tls_argument(tmp_path: Path) -> None:
    assert client_ssl_context(False) is None
    assert client_ssl_context(None) is None
    plain_check = client_ssl_context(True)
    assert plain_check is not None and not plain_check.check_hostname
    with pytest.raises(ConfigError, match=r"tls\.client\.trustCertPath"):
        client_ssl_context(tmp_path / "missing-ca.pem")
