"""vLLM as a child process: the same argv and environment ``launch`` would exec, started
in its own process group with its output in the run directory, stopped cleanly.

Stopping: SIGTERM to vLLM (its API server shuts the engine and workers down), then
SIGINT, then SIGKILL to the whole group; the group is waited for, so the GPUs are free
before the next boot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from launcher.errors import EnvironmentProblem
from launcher.launch.start import Prepared
from launcher.qualify.client import health


class BootFailed(EnvironmentProblem):
    """The server exited or never answered /health."""


class ServerProcess:
    def __init__(self, prepared: Prepared, port: int, log_name: str = "vllm.log"):
        self.prepared = prepared
        self.port = port
        self.log_path = prepared.run_dir / log_name
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        argv, env = self.prepared.argv, self.prepared.env
        with self.log_path.open("w") as log:
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise EnvironmentProblem(f"cannot start {argv[0]!r}: {exc}") from None
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_healthy(self, timeout: float, tick: Callable[[], None] = lambda: None) -> float:
        """Seconds until /health answers; ``tick`` runs between polls."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.alive():
                raise BootFailed(
                    f"vLLM exited with code {self.proc.returncode} while booting; "
                    f"the end of its log ({self.log_path}):\n{self.log_tail()}"
                )
            if health(self.port):
                return time.monotonic() - start
            tick()
            time.sleep(0.5)
        raise BootFailed(
            f"vLLM did not answer /health within {timeout:g}s (qualify.boot_seconds); "
            f"the end of its log ({self.log_path}):\n{self.log_tail()}"
        )

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 60.0) -> int | None:
        """Stop vLLM and every process it started; its exit code (None if killed)."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGINT, min(grace, 10.0))):
            if code is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                code = self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                code = None
        self._end_group(grace if code is not None else 0.0)
        if code is None:
            self.proc.wait(timeout=30)
        return code

    def _end_group(self, grace: float) -> None:
        """Workers outlive a killed API server: wait for the group, then kill what is left."""
        pgid = self.proc.pid
        deadline = time.monotonic() + grace
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.25)
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.25)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies, which hold no memory and
    may wait long for a reaper in a container, do not count)."""
    proc = Path("/proc")
    if proc.is_dir():
        for stat in proc.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
