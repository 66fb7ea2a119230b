"""Run the official RocketMQ C++ client in subprocesses, through ``tests/interop/cpp_driver.py``.

Owns: finding the driver script, one private HOME per client process (the C++ client writes its
log under ``$HOME/logs/rocketmq-cpp/`` and broadcast offsets under ``$HOME/.rocketmq_offsets/``),
parsing the driver's JSON lines, hard timeouts that kill the whole process group, and a
background mode so that a push consumer runs while the test produces.

The driver prints one JSON object per line; every line is kept as ``dict[str, object]`` and
lines that are not JSON (the C++ library sometimes prints to stdout) become
``{"event": "raw", "text": ...}``. Results are values: a timeout or a crash of the client is
reported in :class:`CppRun`, never raised, so a test can put :meth:`CppRun.describe` into its
assertion message. Without a ``home`` argument each run gets a new temporary directory, left
in place so that the client's log can still be read after the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = [
    "CppProcess",
    "CppRun",
    "driver_path",
    "run_cpp",
    "run_cpp_sync",
    "start_cpp",
]

Line = dict[str, object]

#: Extra seconds the harness waits beyond the driver's own ``deadline_s`` before it kills.
KILL_GRACE_S = 3.0


def driver_path() -> Path:
    """``$APOGEE_CPP_DRIVER`` if set, else ``tests/interop/cpp_driver.py`` of this checkout."""
    override = os.environ.get("APOGEE_CPP_DRIVER")
    if override:
        return Path(override)
    # tests/harness/cpp.py -> tests/interop/cpp_driver.py, a sibling folder
    return Path(__file__).resolve().parents[1] / "interop" / "cpp_driver.py"


def parse_line(text: str) -> Line:
    try:
        value = json.loads(text)
    except ValueError:
        return {"event": "raw", "text": text}
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return {"event": "raw", "text": text}


@dataclass
class CppRun:
    """What one driver process did."""

    spec: Mapping[str, object]
    home: Path
    returncode: int | None
    lines: list[Line] = field(default_factory=list)
    stderr: str = ""
    timed_out: bool = False

    def events(self, name: str) -> list[Line]:
        return [line for line in self.lines if line.get("event") == name]

    @property
    def messages(self) -> list[Line]:
        return self.events("message")

    @property
    def sent(self) -> list[Line]:
        return self.events("sent")

    @property
    def failures(self) -> list[Line]:
        return self.events("send_failed")

    @property
    def crashed(self) -> bool:
        """Killed by a signal it did not get from us (a segfault in librocketmq, say)."""
        return self.returncode is not None and self.returncode < 0 and not self.timed_out

    @property
    def log_paths(self) -> list[Path]:
        return sorted((self.home / "logs" / "rocketmq-cpp").glob("*rocketmq-cpp.log*"))

    @property
    def log_path(self) -> Path | None:
        paths = self.log_paths
        return paths[0] if paths else None

    def log_text(self) -> str:
        return "".join(p.read_text("utf-8", "replace") for p in self.log_paths)

    def describe(self, log_lines: int = 40) -> str:
        """A failure message: outcome, the driver's lines, stderr and the tail of the client log."""
        outcome = (
            "timed out (process group killed)" if self.timed_out else f"exit {self.returncode}"
        )
        parts = [f"C++ client {outcome}; spec {json.dumps(dict(self.spec), default=str)}"]
        parts += [json.dumps(line, sort_keys=True, default=str)[:500] for line in self.lines[-30:]]
        if self.stderr.strip():
            parts.append("stderr:\n" + self.stderr[-3000:])
        log = self.log_text().splitlines()
        parts.append(f"client log {self.log_path} (last {log_lines} lines):")
        parts += log[-log_lines:]
        return "\n".join(parts)


def _prepare(
    spec: Mapping[str, object], home: Path | None, timeout_s: float
) -> tuple[dict[str, object], Path]:
    full = dict(spec)
    full.setdefault("deadline_s", max(1.0, timeout_s - KILL_GRACE_S))
    if home is None:
        home = Path(tempfile.mkdtemp(prefix="apogee-cpp-"))
    home.mkdir(parents=True, exist_ok=True)
    return full, home


def _command(spec: Mapping[str, object]) -> list[str]:
    return [sys.executable, str(driver_path()), json.dumps(dict(spec))]


def _environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)
    # the C++ client falls back to this variable when no name server is set; keep runs isolated
    env.pop("NAMESRV_ADDR", None)
    return env


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_cpp_sync(
    spec: Mapping[str, object], *, home: Path | None = None, timeout_s: float = 30.0
) -> CppRun:
    """Run the driver to completion without an event loop."""
    full, home = _prepare(spec, home, timeout_s)
    with subprocess.Popen(
        _command(full),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_environment(home),
        start_new_session=True,
    ) as proc:
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
    return CppRun(
        spec=full,
        home=home,
        returncode=proc.returncode,
        lines=[parse_line(t) for t in out.decode("utf-8", "replace").splitlines() if t.strip()],
        stderr=err.decode("utf-8", "replace"),
        timed_out=timed_out,
    )


async def run_cpp(
    spec: Mapping[str, object], *, home: Path | None = None, timeout_s: float = 30.0
) -> CppRun:
    """Run the driver to completion; the event loop keeps serving in-process servers meanwhile."""
    process = await start_cpp(spec, home=home, timeout_s=timeout_s)
    return await process.wait()


async def start_cpp(
    spec: Mapping[str, object], *, home: Path | None = None, timeout_s: float = 60.0
) -> CppProcess:
    """Start the driver in the background; read its lines while the test does other work."""
    full, home = _prepare(spec, home, timeout_s)
    proc = await asyncio.create_subprocess_exec(
        *_command(full),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_environment(home),
        start_new_session=True,
    )
    return CppProcess(proc, full, home, timeout_s)


class CppProcess:
    """A running driver; use as ``async with``. :meth:`stop` and :meth:`wait` give the run."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        spec: dict[str, object],
        home: Path,
        timeout_s: float,
    ) -> None:
        self._proc = proc
        self.spec = spec
        self.home = home
        self.lines: list[Line] = []
        self._stderr: list[str] = []
        self._changed = asyncio.Condition()
        self._timed_out = False
        self._readers = asyncio.gather(self._read_stdout(), self._read_stderr())
        self._watchdog = asyncio.get_running_loop().call_later(timeout_s, self._expire)
        self._result: CppRun | None = None

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def __aenter__(self) -> CppProcess:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _expire(self) -> None:
        self._timed_out = True
        _kill_group(self._proc.pid)

    async def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        async for raw in self._proc.stdout:
            text = raw.decode("utf-8", "replace").strip()
            if text:
                async with self._changed:
                    self.lines.append(parse_line(text))
                    self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        async for raw in self._proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace"))

    def events(self, name: str) -> list[Line]:
        return [line for line in self.lines if line.get("event") == name]

    async def wait_for(self, predicate: Callable[[list[Line]], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(lines)`` holds; False on timeout or when the driver has exited."""

        async def until() -> bool:
            async with self._changed:
                while not predicate(self.lines):
                    if self._proc.stdout is None or self._proc.stdout.at_eof():
                        return predicate(self.lines)
                    await self._changed.wait()
                return True

        try:
            return await asyncio.wait_for(until(), timeout_s)
        except TimeoutError:
            return False

    async def wait_event(self, name: str, timeout_s: float) -> Line | None:
        """The first line with ``event == name``, waiting for it if needed."""
        if await self.wait_for(lambda lines: any(x.get("event") == name for x in lines), timeout_s):
            return self.events(name)[0]
        return None

    async def wait_messages(self, count: int, timeout_s: float) -> list[Line]:
        """Delivered messages once there are at least ``count`` (fewer on timeout)."""
        await self.wait_for(
            lambda lines: sum(x.get("event") == "message" for x in lines) >= count, timeout_s
        )
        return self.events("message")

    async def stop(self, timeout_s: float = 15.0) -> CppRun:
        """Ask the driver to shut the client down (``stop`` on stdin), then wait for it."""
        if self._result is None and self._proc.returncode is None and self._proc.stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                self._proc.stdin.write(b"stop\n")
                await self._proc.stdin.drain()
        return await self.wait(timeout_s)

    async def wait(self, timeout_s: float | None = None) -> CppRun:
        """Wait for the driver to exit (kill its group after ``timeout_s``); collect the run."""
        if self._result is not None:
            return self._result
        try:
            await asyncio.wait_for(self._proc.wait(), timeout_s)
        except TimeoutError:
            self._timed_out = True
            _kill_group(self._proc.pid)
            await self._proc.wait()
        self._watchdog.cancel()
        await self._readers
        if self._proc.stdin is not None:
            self._proc.stdin.close()
            with contextlib.suppress(ConnectionError):
                await self._proc.stdin.wait_closed()
        self._result = CppRun(
            spec=self.spec,
            home=self.home,
            returncode=self._proc.returncode,
            lines=list(self.lines),
            stderr="".join(self._stderr),
            timed_out=self._timed_out,
        )
        return self._result
