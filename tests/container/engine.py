"""A Docker engine for the container tier: find one, or start Debian's ``dockerd`` as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

DOCKERD_LOG = Path("/tmp/b12x-launch-dockerd.log")
START_TIMEOUT = 60.0


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
    with DOCKERD_LOG.open("ab") as log:
        # Detached from our session: the engine outlives the test run, like a system service.
        subprocess.Popen(
            [dockerd],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if _answers():
            return None
        time.sleep(1.0)
    tail = DOCKERD_LOG.read_text(errors="replace")[-1500:]
    return f"dockerd did not answer within {START_TIMEOUT:.0f}s (log {DOCKERD_LOG}):\n{tail}"


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False, timeout=30).returncode == 0
