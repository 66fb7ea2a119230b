"""Transport settings are validated; the runner uses uvloop; handler tables refuse bad setup."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from apogee.errors import ClientError, ConfigError
from apogee.remoting import ClientConfig, HandlerTable, ServerConfig, run
from apogee.remoting.client import split_address


def test_defaults_match_rocketmq() -> None:
    server, client = ServerConfig(), ClientConfig()
    assert server.max_frame_bytes == 16_777_216 and server.idle_timeout_s == 120.0
    assert client.connect_timeout_s == 3.0 and client.idle_timeout_s == 120.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: ServerConfig(port=70000),
        lambda: ServerConfig(idle_timeout_s=0),
        lambda: ServerConfig(stop_grace_s=-1),
        lambda: ServerConfig(max_frame_bytes=0),
        lambda: ClientConfig(connect_timeout_s=0),
        lambda: ClientConfig(request_timeout_s=-1),
    ],
)
def test_bad_settings_are_refused(make: object) -> None:
    with pytest.raises(ConfigError):
        make()  # type: ignore[operator]


def test_handler_table_setup_errors() -> None:
    table = HandlerTable()

    async def handler(ctx: object, req: object) -> None:
        return None

    with pytest.raises(ConfigError):
        table.register(10, handler, group="missing")
    with pytest.raises(ConfigError):
        table.add_group("g", concurrency=0, queue_capacity=1)


def test_split_address() -> None:
    assert split_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert split_address("[::1]:10911") == ("::1", 10911)
    for bad in ("nohost", ":1", "h:", "h:x"):
        with pytest.raises(ClientError):
            split_address(bad)


def test_run_uses_uvloop() -> None:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run(which()).startswith(uvloop.__name__)
