"""A fresh node boots warm on the container tier (vllm-cpu): boot, bake, seed a new volume
through the emitted compose files, restore, serve, compile nothing.

1. Boot 1: the image serves the tiny CPU model on a volume of its own (``docker run``), then
   stops.
2. ``bake`` in the image, on that volume, writes the artifact into a host directory.
3. ``emit --target compose --cache-from DIR`` for the same deployment; compose brings up the
   seeding service (a verified copy into the project's fresh ``cache`` volume) and then the
   server, which restores the artifact before vLLM starts and serves a completion. Its caches
   hold nothing the artifact did not: the warm boot compiled nothing.
4. The rebuilt image (another build id) refuses the same artifact before any weight loads,
   naming the build id.

What the compose run had to change (compose v1's top-level ``name:``, an engine that may not
raise memlock, the one-host ``ipc``) is changed and asserted as in ``test_compose.py``.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from launcher.artifact.bake import skipped
from tests.conftest import PROFILES, need
from tests.container.conftest import host_env, host_launcher
from tests.container.engine import docker
from tests.container.test_compose import (
    Cluster,
    compose_cli,
    health,
    project_file,
    up,
)
from tests.integration.server import complete, free_port

PORT = 8000
START_TIMEOUT_S = 900
PROMPT = "w1 w2 w3 w4"
COMPILE_CACHES = ("vllm", "inductor", "triton")


def settings(model: Path, port: int) -> list[str]:
    """The deployment every step uses: the model at the same path in every container (it is
    part of the plan's fingerprint, which keys the artifact)."""
    return ["--set", f"model.path={model}", "--set", f"serving.port={port}"]


def wait_healthy(name: str) -> None:
    ip = ""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = json.loads(docker("inspect", "--format", "{{json .State}}", name).stdout)
        if not state["Running"]:
            break
        ip = docker("inspect", "--format", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        if ip and health_at(f"http://{ip}:{PORT}"):
            return
        time.sleep(3)
    logs = docker("logs", name, check=False)
    raise AssertionError(f"{name} never served:\n{(logs.stderr + logs.stdout)[-4000:]}")


def health_at(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def service(c: Cluster, name: str) -> str:
    """The container of one service of the node's project (running or exited)."""
    ids = c.compose(0, "ps", "-a", "-q", name).stdout.split()
    assert len(ids) == 1, f"{name}: containers {ids}"
    return ids[0]


def inspect(container: str) -> dict:
    return json.loads(docker("inspect", "--format", "{{json .State}}", container).stdout)


def logs_of(container: str) -> str:
    out = docker("logs", container, check=False)
    return out.stdout + out.stderr


def volume_files(image: str, volume: str) -> set[str]:
    out = docker(
        "run", "--rm", "-v", f"{volume}:/cache", "--entrypoint", "find", image,
        "/cache", "-type", "f", "-printf", r"%P\n",
    ).stdout  # fmt: skip
    return set(out.split())


@pytest.fixture(scope="module")
def baked(image, tiny_model, shared_tmp, cache_volume, engine) -> dict:
    """Boot 1 on a volume of its own, then ``bake`` from it into a host directory."""
    port = PORT
    name = "blaunch-test-bake-boot1"
    docker("rm", "-f", name, check=False)
    started = time.monotonic()
    try:
        docker(
            "run", "-d", "--name", name, "--shm-size", "1g",
            "-v", f"{tiny_model}:{tiny_model}:ro", "-v", f"{cache_volume}:/cache",
            image, "profiles/tiny-cpu.yaml", *settings(tiny_model, port),
        )  # fmt: skip
        wait_healthy(name)
        print(f"boot 1 (empty volume) served in {time.monotonic() - started:.0f}s")
        ip = docker("inspect", "--format", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        first = complete(f"http://{ip}:{port}", PROMPT, timeout=120)[1]
        docker("stop", "-t", "60", name, timeout=120)
    finally:
        docker("rm", "-f", name, check=False)
    out = shared_tmp / "artifacts"
    out.mkdir(mode=0o777, exist_ok=True)
    out.chmod(0o777)  # the image's user writes it
    bake = docker(
        "run", "--rm", "-v", f"{tiny_model}:{tiny_model}:ro", "-v", f"{cache_volume}:/cache",
        "-v", f"{out}:/out", image, "bake", "profiles/tiny-cpu.yaml", "/out/tiny-cpu",
        *settings(tiny_model, port),
    )  # fmt: skip
    manifest = json.loads((out / "tiny-cpu" / "manifest.json").read_text())
    print(f"artifact: {manifest['file_count']} files, {manifest['total_bytes']:,} bytes")
    return {"path": out / "tiny-cpu", "bake": bake, "manifest": manifest, "first": first}


def test_bake_in_the_image_writes_the_deployments_caches_and_records(baked):
    m = baked["manifest"]
    assert "baked /out/tiny-cpu: artifact " in baked["bake"].stdout, baked["bake"].stderr
    assert m["keys"]["gpu_kind"] == "cpu" and m["keys"]["compute_capability"] is None
    assert m["calibration"]["ranks"] == [0], m["calibration"]
    assert any(c in m["caches"] for c in ("inductor", "vllm-compile")), m["caches"]
    assert not [f["path"] for f in m["files"] if f["path"].startswith(("runs/", "hub-"))]


@dataclass
class Warm:
    """What the seeded node did, gathered once."""

    cluster: Cluster
    seed_log: str = ""
    seed_exit: int | None = None
    files: list[str] = field(default_factory=list)
    plan: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def warm(baked, image, tiny_model, shared_tmp, engine) -> Warm:
    """The emitted compose files of the same deployment, seeded from the artifact, serving."""
    cmd, version = compose_cli()
    need("container", bool(cmd), version)
    out = shared_tmp / "compose-warm"
    out.mkdir(mode=0o755)
    c = Cluster(cmd=cmd, version=version, out=out, port=free_port())
    c.emit = subprocess.run(
        [*host_launcher(), "emit", str(PROFILES / "tiny-cpu.yaml"), str(out), "--target",
         "compose", "--image", image, "--cache-from", str(baked["path"]),
         *settings(tiny_model, c.port)],
        capture_output=True, text=True, cwd=shared_tmp, env=host_env(), timeout=300,
    )  # fmt: skip
    assert c.emit.returncode == 0, c.emit.stdout + c.emit.stderr
    c.files[0], c.projects[0] = project_file(c, 0)
    w = Warm(c)
    started = time.monotonic()
    try:
        up(c, 0)
        deadline = started + START_TIMEOUT_S
        while time.monotonic() < deadline and not health(c.port):
            state = inspect(service(c, "vllm"))
            if not state.get("Running") and not state.get("Restarting"):
                break
            time.sleep(3)
        c.ready_s = time.monotonic() - started
        c.logs[0] = logs_of(service(c, "vllm"))
        assert health(c.port), f"the warm node never served:\n{c.logs[0][-4000:]}"
        c.status, c.reply = complete(f"http://127.0.0.1:{c.port}", PROMPT, timeout=120)
        seed = service(c, "cache-artifact")
        w.seed_log, w.seed_exit = logs_of(seed), inspect(seed).get("ExitCode")
        volume = f"{c.projects[0]}_cache"
        w.files = sorted(volume_files(image, volume))
        plans = [f for f in w.files if f.startswith("runs/") and f.endswith("/plan.json")]
        assert len(plans) == 1, plans
        text = docker(
            "run", "--rm", "-v", f"{volume}:/cache", "--entrypoint", "cat", image,
            f"/cache/{plans[0]}",
        ).stdout  # fmt: skip
        w.plan = json.loads(text)
        print(f"compose {version}: the seeded node served in {c.ready_s:.0f}s")
        print("\n".join(line for line in c.logs[0].splitlines() if "cache artifact" in line))
        yield w
    finally:
        c.compose(0, "down", "-v", "--timeout", "60", timeout=300, check=False)


def test_the_seeding_service_copied_the_artifact_and_exited_0(warm):
    assert "copied artifact " in warm.seed_log, warm.seed_log
    assert warm.seed_exit == 0


def test_the_seeded_node_restored_the_artifact_and_serves(warm, baked):
    reply = warm.cluster.reply
    assert warm.cluster.status == 200 and reply["choices"][0]["text"]
    assert reply["choices"][0]["text"] == baked["first"]["choices"][0]["text"]
    logs = warm.cluster.logs[0]
    assert "cache artifact " in logs and ": restored in " in logs, logs[-4000:]
    assert "covers this boot: yes (warm)" in logs, logs[-4000:]


def test_the_run_file_tells_the_workers_the_boot_is_warm(warm):
    artifact = warm.plan["artifact"]
    assert artifact["state"] == "restored" and artifact["warm"] is True, artifact


def test_the_warm_boot_compiled_nothing_the_artifact_did_not_hold(warm, baked):
    """The cache-directory oracle: every compiled file on the fresh volume came from it (lock
    files aside: Inductor takes one to read its cache, and bake leaves them out)."""
    held = {f["path"] for f in baked["manifest"]["files"]}
    build = next(f.split("/")[0] for f in warm.files if f.endswith("/.blaunch-build.json"))
    compiled = {
        f[len(build) + 1 :]
        for f in warm.files
        if f.startswith(f"{build}/") and f.split("/")[1] in COMPILE_CACHES
    }
    assert compiled, warm.files[:40]
    locks = sorted(p for p in compiled - held if skipped(p))
    print(f"the warm boot added {len(locks)} file(s) bake leaves out: {locks[:3]} ...")
    assert sorted(p for p in compiled - held if not skipped(p)) == [], "the warm boot compiled"


def test_another_build_refuses_the_artifact_before_any_weight_loads(
    baked, rebuilt_image, tiny_model
):
    proc = docker(
        "run", "--rm", "-v", f"{tiny_model}:{tiny_model}:ro",
        "-v", f"{baked['path']}:/artifact:ro", "-e", "BLAUNCH_CACHE_FROM=/artifact",
        rebuilt_image, "profiles/tiny-cpu.yaml", *settings(tiny_model, PORT),
        check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "does not fit this node: build_id: artifact " in proc.stderr, proc.stderr[-3000:]
    assert "Loading weights" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
