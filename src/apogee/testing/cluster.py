"""Cluster fixtures: name servers and brokers in-process, or as real ``apogee`` processes.

Owns: ``test_broker_config`` (a BrokerConfig with small files for tests),
``run_namesrv`` / ``run_broker`` (async context managers serving on
127.0.0.1, port 0 by default, in the caller's event loop) and
``NamesrvProcess`` / ``BrokerProcess`` (``python -m apogee namesrv|broker``
subprocesses on fixed ports, for crash and interop tests: SIGTERM stops them
cleanly, SIGKILL crashes them, ``start`` again restarts on the same port and
store, ``pause`` / ``resume`` freeze and thaw them with SIGSTOP / SIGCONT),
``wait_registered`` (until a name server lists a broker), and
``eventually`` (poll an async check until it holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from apogee._util.net import free_port
from apogee.broker.broker import Broker
from apogee.broker.config import BrokerConfig
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ApogeeError
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.server import NameServer
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.store.config import StoreConfig

T = TypeVar("T")

#: Store settings for tests: files of a few MiB instead of 1 GiB, a tiny index.
SMALL_STORE_PROPERTIES: dict[str, str] = {
    "mappedFileSizeCommitLog": str(8 << 20),
    "mappedFileSizeConsumeQueue": str(20 * 4000),
    "maxHashSlotNum": "4000",
    "maxIndexNum": "16000",
}


def test_broker_config(store_dir: Path, namesrv_addr: str = "", **overrides: Any) -> BrokerConfig:
    """A broker on 127.0.0.1, port 0, small files under ``store_dir``.

    ``overrides`` are BrokerConfig fields; a ``store`` mapping holds StoreConfig fields.
    """
    store_fields: dict[str, Any] = {
        "store_path_root_dir": store_dir,
        "mapped_file_size_commit_log_bytes": 8 << 20,
        "mapped_file_size_consume_queue_bytes": 20 * 4000,
        "prefault_ahead_bytes": 0,
        **overrides.pop("store", {}),
    }
    fields: dict[str, Any] = {
        "bind_address": "127.0.0.1",
        "listen_port": 0,
        "namesrv_addr": namesrv_addr,
        "max_hash_slot_num": 4000,
        "max_index_num": 16000,
        **overrides,
    }
    return BrokerConfig(store=StoreConfig(**store_fields), **fields)


test_broker_config.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


@asynccontextmanager
async def run_namesrv(
    state_dir: Path, port: int = 0, **overrides: Any
) -> AsyncIterator[NameServer]:
    """A started NameServer on 127.0.0.1; its address is ``f"127.0.0.1:{ns.port}"``.

    ``overrides`` are NamesrvConfig fields (``acl_enable``, ``tls``, ...).
    """
    config = NamesrvConfig(
        bind_address="127.0.0.1",
        listen_port=port,
        kv_config_path=str(state_dir / "kvConfig.json"),
        **overrides,
    )
    server = NameServer(config)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def run_broker(
    store_dir: Path, namesrv_addr: str = "", **overrides: Any
) -> AsyncIterator[Broker]:
    """A started Broker (``test_broker_config`` with ``overrides``); ``broker.address``."""
    broker = await Broker.open(test_broker_config(store_dir, namesrv_addr, **overrides))
    try:
        yield broker
    finally:
        await broker.stop()


# -- real processes ---------------------------------------------------------------


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s}s")


class _Process:
    """One ``python -m apogee <command>`` process that can be stopped, killed and restarted."""

    def __init__(self, args: list[str], port: int, log_path: Path) -> None:
        self.args = args
        self.port = port
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        """The process's own log directory (``APOGEE_LOG_DIR``)."""
        return self.log_path.parent / f"{self.log_path.stem}-logs"

    def start(self, timeout_s: float = 20.0) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115  # handed to the child
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "apogee", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                    "PYTHONFAULTHANDLER": "1",
                    # each process's rotating log files beside its captured output
                    "APOGEE_LOG_DIR": str(self.log_dir),
                },
            )
        finally:
            log.close()
        wait_listening(self.port, self.proc, timeout_s)

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM and wait; the exit code (a stuck process is killed: -9)."""
        proc = self.proc
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a paused process would not act on SIGTERM
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.proc = None
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the process stops running but keeps its sockets open."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def log_text(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""

    def __enter__(self) -> _Process:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NamesrvProcess(_Process):
    """``apogee namesrv``; with ``properties``, a namesrv.conf written from them."""

    def __init__(
        self,
        state_dir: Path,
        port: int | None = None,
        *,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        args = ["namesrv", "--listen", f"127.0.0.1:{port}"]
        args += ["--kv-config", str(state_dir / "kvConfig.json")]
        if properties:
            conf = state_dir / "namesrv.conf"
            conf.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
            args += ["-c", str(conf)]
        super().__init__(args, port, state_dir / "namesrv.log")


class BrokerProcess(_Process):
    """``apogee broker`` with a broker.conf written from ``properties`` (small files and a
    free replication port by default; a key given as None is left out, so its default
    applies)."""

    def __init__(
        self,
        store_dir: Path,
        namesrv_addr: str,
        *,
        port: int | None = None,
        properties: Mapping[str, str | None] | None = None,
        log_dir: Path | None = None,
        wait_registration: bool | None = None,
    ) -> None:
        store_dir.mkdir(parents=True, exist_ok=True)
        self.store_dir = store_dir
        port = port or free_port()
        log_dir = log_dir or store_dir.parent
        conf = log_dir / f"{store_dir.name}.conf"
        # A free replication port too: listenPort + 1 may belong to another process.
        ha_port = str(free_port())
        given = {**SMALL_STORE_PROPERTIES, "brokerIP1": "127.0.0.1", "haListenPort": ha_port,
                 **(properties or {})}  # fmt: skip
        props = {k: v for k, v in given.items() if v is not None}
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        args = ["broker", "-n", namesrv_addr, "--listen", f"127.0.0.1:{port}"]
        args += ["--store", str(store_dir), "-c", str(conf)]
        super().__init__(args, port, log_dir / f"{store_dir.name}.log")
        self.namesrv_addr = namesrv_addr
        # A broker listens before it registers: a client that looks up a route
        # at once may find none. By default ``start`` waits for a plain
        # registration (secured clusters call wait_registered with credentials).
        secured = props.get("aclEnable", "false") == "true" or any(
            k.startswith("tls.") for k in props
        )
        self.wait_registration = (
            bool(namesrv_addr) and not secured if wait_registration is None else wait_registration
        )

    def start(self, timeout_s: float = 20.0) -> None:
        super().start(timeout_s)
        if self.wait_registration:
            first = self.namesrv_addr.replace(",", ";").split(";")[0].strip()
            wait_registered(first, self.address, timeout_s=timeout_s)


@contextmanager
def broker_processes(
    root: Path, properties: Mapping[str, str] | None = None
) -> Iterator[tuple[str, BrokerProcess]]:
    """(name server address, broker-a): one ``apogee namesrv`` and one ``apogee broker``.

    The broker gets ``properties``; it must stop cleanly (exit 0) when the block ends.
    """
    with NamesrvProcess(root / "ns") as ns:
        broker = BrokerProcess(root / "store", ns.address, properties=properties)
        broker.start()
        try:
            yield ns.address, broker
        finally:
            assert broker.stop() == 0, broker.log_text()


def wait_registered(
    namesrv_addr: str,
    broker_addr: str,
    config: ClientConfig | None = None,
    timeout_s: float = 20.0,
) -> None:
    """Block until the name server lists ``broker_addr`` (a broker listens before it registers).

    ``config`` carries the credentials and TLS context the name server asks for.
    """

    async def registered() -> bool:
        async with RemotingClient(config) as client:
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            try:
                answer = await client.invoke(namesrv_addr, request)
            except ApogeeError:
                return False
            return (
                answer.code == ResponseCode.SUCCESS and broker_addr in answer.body_bytes().decode()
            )

    def check() -> None:
        asyncio.run(eventually(registered, timeout_s, interval_s=0.1))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        check()
        return
    # Called from a coroutine (which blocks its loop for it, as ``start`` does):
    # the check needs a loop of its own, on a thread of its own.
    failures: list[BaseException] = []

    def in_thread() -> None:
        try:
            check()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=in_thread, daemon=True)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


class StandaloneProcess(_Process):
    """``apogee standalone``: a name server and a broker in one process, as ``make run`` starts.

    ``port`` is the name server's (what clients are given); ``broker_port`` the broker's.
    """

    def __init__(
        self,
        store_dir: Path,
        *,
        properties: Mapping[str, str] | None = None,
        extra_args: list[str] | None = None,
        base_conf: Path | None = None,
    ) -> None:
        store_dir.mkdir(parents=True, exist_ok=True)
        port, self.broker_port = free_port(), free_port()
        conf = store_dir.parent / f"{store_dir.name}-standalone.conf"
        props = {**SMALL_STORE_PROPERTIES, "brokerIP1": "127.0.0.1", **(properties or {})}
        # later keys win: ``base_conf`` (an operator's file) with small files for tests
        base = base_conf.read_text() + "\n" if base_conf is not None else ""
        conf.write_text(base + "".join(f"{k}={v}\n" for k, v in props.items()))
        args = ["standalone", "-c", str(conf), "--store", str(store_dir)]
        args += ["--listen", f"127.0.0.1:{self.broker_port}"]
        args += ["--namesrv-listen", f"127.0.0.1:{port}", *(extra_args or [])]
        super().__init__(args, port, store_dir.parent / f"{store_dir.name}-standalone.log")

    def start(self, timeout_s: float = 20.0) -> None:
        super().start(timeout_s)
        assert self.proc is not None
        wait_listening(self.broker_port, self.proc, timeout_s)
        # The broker listens before it registers, as in BrokerProcess.
        wait_registered(self.address, self.broker_address, timeout_s=timeout_s)

    @property
    def broker_address(self) -> str:
        return f"127.0.0.1:{self.broker_port}"


class DashboardProcess(_Process):
    """``apogee dashboard`` for the cluster whose name server is ``namesrv``."""

    def __init__(self, namesrv: str, log_dir: Path, *, sample_interval_s: float = 0.5) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        args = ["dashboard", "-n", namesrv, "--listen", f"127.0.0.1:{port}"]
        args += ["--sample-interval", str(sample_interval_s)]
        super().__init__(args, port, log_dir / "dashboard.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


async def eventually(
    check: Callable[[], Awaitable[T | None]], timeout_s: float = 5.0, interval_s: float = 0.02
) -> T:
    """Poll ``check`` until it returns something truthy; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(interval_s)
