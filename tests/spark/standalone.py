"""A Spark standalone cluster on this machine: one master and two workers, started with
the ``spark-class`` script of the installed PySpark distribution."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pyspark

from apogee._util.net import free_port

SPARK_HOME = Path(pyspark.__file__).parent


class StandaloneCluster:
    def __init__(self, root: Path, workers: int = 2) -> None:
        self.root = root
        self.port = free_port()
        self.ui_port = free_port()
        self.workers = workers
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        with open(self.root / f"{name}.log", "ab") as log:
            self.procs.append(
                subprocess.Popen(
                    [str(SPARK_HOME / "bin" / "spark-class"), *args],
                    env=env,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            )

    def start(self, timeout_s: float = 90) -> None:
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
        )  # fmt: skip
        for i in range(self.workers):
            work = self.root / f"worker{i}"
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker", self.master_url,
                "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                "--webui-port", str(free_port()), "--work-dir", str(work),
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while self.state().get("aliveworkers", 0) < self.workers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers did not join {self.master_url}: {self.logs()}")
            time.sleep(0.5)

    def state(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                found: dict[str, Any] = orjson.loads(r.read())
                return found
        except OSError:
            return {}

    def executor_logs(self) -> list[Path]:
        """The stderr files of executors the workers ran (work/<app>/<executor>/stderr)."""
        return sorted(self.root.glob("worker*/app-*/*/stderr"))

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in self.root.glob("*.log"))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
