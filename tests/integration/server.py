"""Start ``b12x-launch`` on the tiny CPU profile as a user would, and talk to it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import PROFILES, ROOT

START_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``b12x-launch profiles/tiny-cpu.yaml`` in its own process group, logging to a file."""

    def __init__(self, model: Path, workdir: Path, *overrides: str):
        self.port = free_port()
        self.run_dir = workdir / "run"
        self.log_path = workdir / "server.log"
        bindir = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.argv = [
            sys.executable,
            "-m",
            "launcher",
            str(PROFILES / "tiny-cpu.yaml"),
            "--set",
            f"model.path={model}",
            "--set",
            "serving.host=127.0.0.1",
            "--set",
            f"serving.port={self.port}",
            "--set",
            f"runtime.cache_root={workdir / 'cache'}",
            "--run-dir",
            str(self.run_dir),
            *[a for o in overrides for a in ("--set", o)],
        ]
        self.proc: subprocess.Popen | None = None

    def spawn(self) -> subprocess.Popen:
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        return self.proc

    def start(self) -> Server:
        self.spawn()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"server not healthy after {START_TIMEOUT}s:\n{self.log()[-4000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def complete(self, prompt: str, max_tokens: int = 8) -> dict:
        return complete(self.url, prompt, max_tokens)[1]

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM to the launcher's process (now vLLM's, after exec); its exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def plan(self) -> dict:
        return json.loads((self.run_dir / "plan.json").read_text())

    def record(self, rank: int = 0) -> dict:
        return json.loads((self.run_dir / f"measure-rank{rank}.json").read_text())


def complete(url: str, prompt: str, max_tokens: int = 8, timeout: float = 60.0) -> tuple[int, dict]:
    """One greedy ``/v1/completions`` call to the tiny model at ``url``: (status, reply)."""
    body = json.dumps(
        {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    ).encode()
    req = urllib.request.Request(
        f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())
