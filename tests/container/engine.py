"""A Docker engine for the container tier: find one, or start Debian's ``dockerd`` as root."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

DOCKERD_LOG = Path("/tmp/b12x-launch-dockerd.log")
CONTAINERD_SOCK = Path("/run/containerd/containerd.sock")
START_TIMEOUT = 180.0  # per process and attempt
ATTEMPTS = 3


class DockerError(RuntimeError):
    pass


def docker_env() -> dict[str, str]:
    # The classic builder: it needs no buildx plugin (Debian's docker.io ships none), and
    # its RUN steps reach the host's bridge address (standin.py serves local indexes there).
    return {**os.environ, "DOCKER_BUILDKIT": "0", "DOCKER_CLI_HINTS": "false"}


def docker(
    *args: str, check: bool = True, timeout: float | None = 600
) -> subprocess.CompletedProcess[str]:
    """``docker ARGS``; raises DockerError with its output when it fails and ``check``."""
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, env=docker_env()
    )
    if check and proc.returncode != 0:
        raise DockerError(
            f"docker {' '.join(args[:3])} ... exited {proc.returncode}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def _answers() -> bool:
    try:
        return (
            docker("info", "--format", "{{.ServerVersion}}", check=False, timeout=20).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _listening(sock: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(str(sock))
        except OSError:
            return False
    return True


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    with DOCKERD_LOG.open("ab") as log:
        log.write(f"\n--- {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
        log.flush()
        # Detached from our session: the engine outlives the test run, like a system service.
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # SIGTERM first: a dockerd killed outright leaves its pid file, which the next one refuses.
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> str | None:
    """None once ``ready()``; else why not (the process exited, or the time ran out)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ready():
            return None
        if proc.poll() is not None:
            return f"exited {proc.returncode}"
        time.sleep(1.0)
    return f"did not answer within {START_TIMEOUT:.0f}s"


def _containerd() -> tuple[list[str], str | None]:
    """dockerd's flags for a containerd we run ourselves, and why that failed if it did.

    dockerd gives the containerd it starts itself a short window to answer; on a loaded CI
    machine that window was missed ("timeout waiting for containerd to start", Dec 2026).
    Debian's docker.io depends on the containerd package, so we start that one and wait
    for its socket as long as it takes.
    """
    binary = shutil.which("containerd")
    if binary is None:
        return [], None  # dockerd falls back to starting its own
    if not _listening(CONTAINERD_SOCK):
        proc = _spawn([binary, "--address", str(CONTAINERD_SOCK)])
        if (why := _wait(lambda: _listening(CONTAINERD_SOCK), proc)) is not None:
            _stop(proc)
            return [], f"containerd {why}"
    return [f"--containerd={CONTAINERD_SOCK}"], None


def ensure_engine() -> str | None:
    """None when an engine answers (starting ``dockerd`` if we may); else why not."""
    if shutil.which("docker") is None:
        return "no docker client (apt-get install -y docker.io)"
    if _answers():
        return None
    dockerd = shutil.which("dockerd") or (
        "/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").exists() else None
    )
    if dockerd is None:
        return "no Docker engine answers and no dockerd is installed (apt-get install -y docker.io)"
    if os.geteuid() != 0:
        return "no Docker engine answers, and starting dockerd needs root"
    failures: list[str] = []
    for attempt in range(1, ATTEMPTS + 1):
        flags, why = _containerd()
        if why is None:
            proc = _spawn([dockerd, *flags])
            if (why := _wait(_answers, proc)) is None:
                return None
            _stop(proc)
            why = f"dockerd {why}"
        failures.append(f"attempt {attempt}: {why}")
        if attempt < ATTEMPTS:
            time.sleep(5.0 * attempt)
    tail = DOCKERD_LOG.read_text(errors="replace")[-1500:]
    return f"{'; '.join(failures)} (log {DOCKERD_LOG}):\n{tail}"


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False, timeout=30).returncode == 0
