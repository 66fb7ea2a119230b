"""The ``apogee`` processes as an operator runs them: start, serve, stop on a signal."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from apogee._util.net import free_port
from apogee.codes import RequestCode, ResponseCode
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


async def test_namesrv_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "apogee",
            "namesrv",
            "--listen",
            f"127.0.0.1:{port}",
            "--kv-config",
            str(tmp_path / "kv.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_listening(port, proc)
        async with RemotingClient() as client:
            answer = await client.invoke(
                f"127.0.0.1:{port}",
                RemotingCommand.request(
                    RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}
                ),
            )
        assert answer.code == ResponseCode.SUCCESS
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"shutting down" in err
    assert (tmp_path / "kv.json").exists()


def test_unknown_config_key_is_named(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=9999\nlistenPrt=1\n")
    result = subprocess.run(
        [sys.executable, "-m", "apogee", "namesrv", "-c", str(conf)],
        capture_output=True,
        check=False,
        timeout=30,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 2
    assert b"listenPrt" in result.stderr
