"""Settings of the remoting transport, one frozen dataclass per side.

Owns: ServerConfig and ClientConfig with RocketMQ's defaults (NettyServerConfig,
NettyClientConfig, NettySystemConfig). Units are in the field names.

Security: a server's ``tls_mode`` other than DISABLED needs its
``ssl_context`` (``tls.server_context``); a client with an ``ssl_context``
connects over TLS, and one with ``credentials`` signs every request it
sends (ACL 1.0).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from apogee.errors import ConfigError
from apogee.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.limits import ServerLimits
from apogee.remoting.tls import TlsMode

DEFAULT_WRITE_HIGH_WATER_BYTES = 4 * 1024 * 1024


def _check_positive(owner: str, **values: float | None) -> None:
    for name, value in values.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{owner}.{name} must be positive, got {value!r}")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "0.0.0.0"
    port: int = 0  # 0: let the OS choose; RemotingServer.port reports it
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_s: float | None = 120.0  # None: never close idle connections
    stop_grace_s: float = 5.0
    backlog: int = 1024
    write_high_water_bytes: int = DEFAULT_WRITE_HIGH_WATER_BYTES
    limits: ServerLimits = field(default_factory=ServerLimits)
    tls_mode: TlsMode = TlsMode.DISABLED
    ssl_context: ssl.SSLContext | None = None
    ssl_handshake_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.tls_mode is not TlsMode.DISABLED and self.ssl_context is None:
            raise ConfigError(f"tls.server.mode={self.tls_mode.value} needs a certificate")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"ServerConfig.port must be 0..65535, got {self.port}")
        _check_positive(
            "ServerConfig",
            max_frame_bytes=self.max_frame_bytes,
            idle_timeout_s=self.idle_timeout_s,
            backlog=self.backlog,
            write_high_water_bytes=self.write_high_water_bytes,
        )
        if self.stop_grace_s < 0:
            raise ConfigError(f"ServerConfig.stop_grace_s must be >= 0, got {self.stop_grace_s}")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    connect_timeout_s: float = 3.0
    request_timeout_s: float = 3.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_s: float | None = 120.0
    write_high_water_bytes: int = DEFAULT_WRITE_HIGH_WATER_BYTES
    ssl_context: ssl.SSLContext | None = None
    credentials: SessionCredentials | None = None

    def __post_init__(self) -> None:
        _check_positive(
            "ClientConfig",
            connect_timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s,
            max_frame_bytes=self.max_frame_bytes,
            idle_timeout_s=self.idle_timeout_s,
            write_high_water_bytes=self.write_high_water_bytes,
        )
