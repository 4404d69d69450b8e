"""The image as an operator runs it: built on a vLLM base, serving the tiny CPU model.

One container serves, answers, and is stopped; a second one on the same cache volume must
compile nothing; an image with another build id must get a cache directory of its own. The
commands that need no model (dry run, validate, a bad profile) must behave as on the host.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from launcher import entrypoint
from tests.container.conftest import host_env, host_launcher
from tests.container.engine import docker
from tests.integration.server import complete

UID_GID = "10001:10001"
PORT = 8000
GRACE_S = 60
START_TIMEOUT_S = 600
MODEL_IN_CONTAINER = "/models/tiny-llama"
# vLLM's torch.compile and Inductor caches: a warm start must add nothing to them.
COMPILE_CACHES = ("vllm", "inductor", "triton")
COMPILED_SUFFIXES = (".so", ".o", ".h", ".gch", ".pch", ".cubin", ".ptx", ".py", ".cpp")


# --- helpers ---------------------------------------------------------------------------------


def run_image(image: str, *args: str, mounts: tuple[str, ...] = (), timeout: float = 600):
    volumes = [a for m in mounts for a in ("-v", m)]
    return docker("run", "--rm", *volumes, image, *args, check=False, timeout=timeout)


def cache_files(image: str, volume: str) -> dict[str, tuple[int, float]]:
    """Every file on the cache volume: relative path -> (size, mtime)."""
    out = docker(
        "run", "--rm", "-v", f"{volume}:/cache", "--entrypoint", "find", image,
        "/cache", "-type", "f", "-printf", r"%P\t%s\t%T@\n",
    ).stdout  # fmt: skip
    files = {}
    for line in out.splitlines():
        path, size, mtime = line.split("\t")
        files[path] = (int(size), float(mtime))
    return files


def build_dir(logs: str) -> str:
    m = re.search(r"caches under /cache/(\S+), run records", logs)
    assert m, logs[-3000:]
    return m.group(1)


@dataclass
class Serving:
    """What one serving container did, gathered once and asserted by several tests."""

    logs: str = ""
    health: str = ""
    reply: dict = field(default_factory=dict)
    diff: list[str] = field(default_factory=list)
    user: str = ""
    pids: list[int] = field(default_factory=list)
    stop_s: float = 0.0
    exit_code: int | None = None
    oom_killed: bool = False
    cache_after: dict[str, tuple[int, float]] = field(default_factory=dict)


def serve(image: str, name: str, model: Path, volume: str) -> Serving:
    result = Serving()
    docker(
        "run", "-d", "--name", name, "--shm-size", "1g",
        # The image's own health check command, polled more often than its 30 s.
        "--health-interval", "3s", "--health-start-period", "10m",
        "-v", f"{model}:{MODEL_IN_CONTAINER}:ro", "-v", f"{volume}:/cache",
        "-e", f"BLAUNCH_PORT={PORT}",
        image, "profiles/tiny-cpu.yaml", "--set", f"model.path={MODEL_IN_CONTAINER}",
    )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = json.loads(docker("inspect", "--format", "{{json .State}}", name).stdout)
        result.health = (state.get("Health") or {}).get("Status", "")
        if not state["Running"] or result.health in ("healthy", "unhealthy"):
            break
        time.sleep(2)
    result.logs = docker("logs", name).stderr + docker("logs", name).stdout
    assert result.health == "healthy", f"health {result.health!r}:\n{result.logs[-4000:]}"
    ip = docker("inspect", "--format", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
    result.reply = complete(f"http://{ip}:{PORT}", "w1 w2 w3 w4", timeout=120)[1]
    result.user = docker("exec", name, "id", "-u").stdout.strip()
    result.diff = docker("diff", name).stdout.split("\n")
    top = docker("top", name, "-eo", "pid").stdout.split()[1:]
    result.pids = [int(p) for p in top]
    started = time.monotonic()
    docker("stop", "-t", str(GRACE_S), name, timeout=GRACE_S + 60)
    result.stop_s = time.monotonic() - started
    state = json.loads(docker("inspect", "--format", "{{json .State}}", name).stdout)
    result.exit_code, result.oom_killed = state["ExitCode"], state["OOMKilled"]
    result.logs = docker("logs", name).stderr + docker("logs", name).stdout
    result.cache_after = cache_files(image, volume)
    return result


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


# --- the image ------------------------------------------------------------------------------


def test_image_runs_as_its_non_root_user(image):
    config = json.loads(docker("inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["User"] == UID_GID
    out = run_image(image, "--version")
    assert out.returncode == 0, out.stderr
    out = docker("run", "--rm", "--entrypoint", "id", image, check=False)
    assert out.stdout.startswith("uid=10001(blaunch) gid=10001(blaunch)"), out.stdout


def test_image_has_python3_but_no_python(image):
    """Like the upstream image: the tiny profile's `python -m ...` must still start vLLM."""
    out = docker("run", "--rm", "--entrypoint", "sh", image, "-c", "command -v python", check=False)
    assert out.returncode != 0, "the stand-in base should have no `python` on PATH"


# --- serving --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def first(image, tiny_model, cache_volume, engine) -> Serving:
    name = "blaunch-test-first"
    docker("rm", "-f", name, check=False)
    try:
        return serve(image, name, tiny_model, cache_volume)
    finally:
        docker("rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def second(first, image, tiny_model, cache_volume) -> Serving:
    name = "blaunch-test-second"
    docker("rm", "-f", name, check=False)
    try:
        return serve(image, name, tiny_model, cache_volume)
    finally:
        docker("rm", "-f", name, check=False)


def test_health_check_turns_healthy_and_a_completion_is_served(first):
    assert first.health == "healthy"
    assert first.reply["usage"]["completion_tokens"] >= 1
    assert "planned worker PlannedCPUWorker" in first.logs, first.logs[-3000:]


def test_serves_as_the_non_root_user(first):
    assert first.user == UID_GID.split(":")[0]


def test_writes_only_under_the_cache_volume(first):
    """``docker diff`` lists what changed in the image's file system (volumes are not in it).

    Allowed: the mount points Docker creates, and scratch in /tmp (vLLM's IPC sockets and
    rendezvous files), which a restart does not need. Not allowed: anything else, or a
    compiled object in /tmp (it would be compiled again by every new container).
    """
    changed = [line.split(" ", 1)[1] for line in first.diff if line.strip()]
    mounts = {"/models", MODEL_IN_CONTAINER}
    outside = [p for p in changed if p not in mounts and p != "/tmp" and not p.startswith("/tmp/")]
    assert outside == [], "written outside /cache and /tmp:\n" + "\n".join(outside)
    compiled = [p for p in changed if p.startswith("/tmp/") and p.endswith(COMPILED_SUFFIXES)]
    assert compiled == [], "compiled objects outside the cache:\n" + "\n".join(compiled)


def test_run_records_and_caches_are_on_the_volume(first):
    build = build_dir(first.logs)
    files = first.cache_after
    assert any(p.startswith("runs/") and p.endswith("plan.json") for p in files)
    assert any(p.startswith("runs/") and p.endswith("measure-rank0.json") for p in files)
    assert f"{build}/{entrypoint.MARKER}" in files
    compiled = [p for p in files if p.startswith(f"{build}/") and p.split("/")[1] in COMPILE_CACHES]
    assert compiled, f"nothing compiled into /cache/{build}: {sorted(files)[:40]}"


def test_docker_stop_ends_it_cleanly_within_the_grace_period(first):
    assert first.exit_code == 0, first.logs[-3000:]
    assert not first.oom_killed
    assert first.stop_s < GRACE_S, f"took {first.stop_s:.0f}s: killed at the grace period?"
    assert first.pids and not [p for p in first.pids if alive(p)], "processes outlived the stop"


def test_a_restart_on_the_same_volume_compiles_nothing(first, second):
    build = build_dir(first.logs)
    assert build_dir(second.logs) == build, "the same image reuses its cache directory"
    assert second.exit_code == 0 and second.reply["usage"]["completion_tokens"] >= 1
    assert "Compiling model again" not in second.logs, second.logs[-3000:]

    def compiled(files):
        return {
            p: v
            for p, v in files.items()
            if p.startswith(f"{build}/") and p.split("/")[1] in COMPILE_CACHES
        }

    before, after = compiled(first.cache_after), compiled(second.cache_after)
    added = sorted(set(after) - set(before))
    rewritten = sorted(p for p in before if p in after and after[p] != before[p])
    assert not added, f"the warm start compiled: {added[:20]}"
    assert not rewritten, f"the warm start rewrote: {rewritten[:20]}"


def test_a_rebuilt_image_with_another_build_id_gets_a_fresh_cache_dir(
    first, rebuilt_image, cache_volume, image
):
    out = run_image(
        rebuilt_image, "tiny-cpu", "--dry-run", mounts=(f"{cache_volume}:/cache",), timeout=300
    )
    assert out.returncode == 0, out.stderr
    old, new = build_dir(first.logs), build_dir(out.stderr)
    assert new != old
    files = cache_files(image, cache_volume)
    mine = [p for p in files if p.startswith(f"{new}/")]
    assert mine == [f"{new}/{entrypoint.MARKER}"], "a fresh directory holds only its marker"
    assert any(p.startswith(f"{old}/") for p in files), "the old build's caches stay"


# --- commands without a model, as on the host -------------------------------------------------


def host(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*host_launcher(), *args], capture_output=True, text=True, cwd=cwd, env=host_env(),
        timeout=300,
    )  # fmt: skip


def test_dry_run_plans_as_on_the_host(image, tmp_path):
    from tests.conftest import PROFILES

    inside = run_image(image, "glm52", "--json", "--no-calibration")
    assert inside.returncode == 0, inside.stderr
    outside = host(str(PROFILES / "glm52.yaml"), "--json", "--no-calibration", cwd=tmp_path)
    assert outside.returncode == 0, outside.stderr
    a, b = json.loads(inside.stdout), json.loads(outside.stdout)
    assert a["fits"] == b["fits"] and a["kv"] == b["kv"]
    assert a["ranks"] == b["ranks"]
    assert a["vllm"]["env"]["TRITON_CACHE_DIR"].startswith("/cache/")


def test_validate_as_on_the_host(image, tmp_path):
    from tests.conftest import PROFILES

    names = ["glm52.yaml", "kimi-k2.yaml", "tiny-cpu.yaml"]
    inside = run_image(image, "validate", *names)
    outside = host("validate", *[str(PROFILES / n) for n in names], cwd=tmp_path)
    assert inside.returncode == outside.returncode == 0, inside.stdout + inside.stderr
    assert len(inside.stdout.splitlines()) == len(outside.stdout.splitlines())


BAD = """\
model:
  path: /models/x
  architecture: tiny-llama
serving:
  max_model_len: lots
"""


@pytest.mark.parametrize("command", [["--dry-run"], ["validate"]])
def test_a_bad_profile_exits_1_with_the_key_as_on_the_host(image, shared_tmp, tmp_path, command):
    bad = shared_tmp / "bad.yaml"
    bad.write_text(BAD)
    bad.chmod(0o644)
    args = ["validate", "bad.yaml"] if command == ["validate"] else ["bad.yaml", "--dry-run"]
    inside = run_image(image, *args, mounts=(f"{bad}:/profiles/bad.yaml:ro",))
    (tmp_path / "bad.yaml").write_text(BAD)
    outside = host(*args, cwd=tmp_path)
    assert inside.returncode == outside.returncode == 1, inside.stderr
    assert "Traceback" not in inside.stderr + inside.stdout
    line = "bad.yaml:5 serving.max_model_len"
    assert line in inside.stderr + inside.stdout and line in outside.stderr + outside.stdout


def test_glm52_on_an_upstream_base_stops_before_loading_naming_the_fork_image(image):
    out = run_image(image, "glm52", timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert entrypoint.fork_image() in out.stderr
    assert "vllm.attention_backend" in out.stderr and "model.quantization" in out.stderr
    assert "Traceback" not in out.stderr
