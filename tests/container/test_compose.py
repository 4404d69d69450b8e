"""The emitted compose files of a two-node tiny-cpu profile, run on the Docker engine.

``b12x-launch emit --target compose`` writes ``compose.node0.yaml`` and ``compose.node1.yaml``
(and the profile beside them) for the image the tier builds; both come up on this one engine
and node 0 serves a completion. The layout is the integration tier's two nodes
(``tests/integration/test_multinode.py``): TP2 over ``hardware.nodes: 2``, multiprocess
multi-node, node 0 at 127.0.0.1. The emitted files use host networking, so on one host the two
containers meet at the host's loopback exactly as two shells would (``emit`` warns that
127.0.0.1 is no address for a real cluster; that warning is checked too).

Which compose: ``docker compose`` (v2) when the engine's client has the plugin; else Debian
bookworm's ``docker-compose`` 1.29.2 (``apt-get install -y docker-compose``). Compose v1 cannot
parse one key of the emitted files: the top-level ``name:`` (compose-spec; v1's schema allows
only ``x-`` extensions there). The test asserts v1's own error on the file as emitted, then
runs a copy with only that line removed and the same name given as ``--project-name`` (what
``name:`` means): everything else runs as written.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import PROFILES, need
from tests.container.conftest import host_env, host_launcher
from tests.container.engine import docker, docker_env
from tests.integration.server import complete, free_port

NODES = 2
START_TIMEOUT_S = 900
HEALTHY_WITHIN_S = 120
V1_NAME_ERROR = "'name' does not match any of the regexes: '^x-'"
# runc, when the engine may not raise RLIMIT_MEMLOCK (type 8) to the emitted `memlock: -1`.
MEMLOCK_ERROR = "error setting rlimit type 8: operation not permitted"
MEMLOCK_LINE = "      memlock: -1"
# Two nodes on one host: see project_file.
IPC_LINE, ONE_HOST_IPC = "    ipc: host", "    shm_size: 1g"


def compose_cli() -> tuple[list[str], str]:
    """The compose command and its version; ``([], why)`` when there is none."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        proc = subprocess.run(
            [*cmd, "version", "--short"], capture_output=True, text=True, env=docker_env()
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return cmd, proc.stdout.strip()
    return [], "no docker compose plugin and no docker-compose (apt-get install -y docker-compose)"


def is_v1(version: str) -> bool:
    return version.lstrip("v").startswith("1.")


@dataclass
class Cluster:
    cmd: list[str]
    version: str
    out: Path
    port: int
    emit: subprocess.CompletedProcess[str] | None = None
    v1_refusal: str = ""
    memlock_refusal: str = ""
    memlock: int = 0
    files: dict[int, Path] = field(default_factory=dict)
    projects: dict[int, str] = field(default_factory=dict)
    reply: dict = field(default_factory=dict)
    status: int = 0
    health: str = ""
    ready_s: float = 0.0
    logs: dict[int, str] = field(default_factory=dict)
    restarts: dict[int, int] = field(default_factory=dict)

    def compose(self, rank: int, *args: str, timeout: float = 300, check: bool = True):
        argv = [*self.cmd, "-p", self.projects[rank], "-f", str(self.files[rank]), *args]
        proc = subprocess.run(
            argv, capture_output=True, text=True, cwd=self.out, env=docker_env(), timeout=timeout
        )
        if check:
            assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def container(self, rank: int) -> str:
        ids = self.compose(rank, "ps", "-q").stdout.split()
        assert len(ids) == 1, f"node {rank}: containers {ids}"
        return ids[0]

    def read_logs(self, rank: int) -> str:
        cid = self.container(rank)
        proc = docker("logs", cid, check=False)
        self.logs[rank] = proc.stdout + proc.stderr
        return self.logs[rank]

    def state(self, rank: int) -> dict:
        out = docker("inspect", "--format", "{{json .State}}", self.container(rank)).stdout
        return json.loads(out)


def project_file(cluster: Cluster, rank: int) -> tuple[Path, str]:
    """The file compose runs for node ``rank``, and its project name (the file's ``name:``)."""
    emitted = cluster.out / f"compose.node{rank}.yaml"
    text = emitted.read_text()
    m = re.search(r"^name: (\S+)$", text, re.M)
    assert m, f"{emitted} has no top-level name:\n{text}"
    # Both nodes on one host: with `ipc: host` the two containers share the host's /dev/shm
    # but not /tmp, so vLLM's same-node check (a shared-memory segment) takes them for one
    # node and its workers wait for good on each other's ZMQ ipc:// sockets under /tmp (seen
    # here: both stuck after "CPU SHM communicator disabled"). Two machines share neither;
    # each container gets a /dev/shm of its own here, as on two machines.
    assert text.count(IPC_LINE + "\n") == 1, text
    text = text.replace(IPC_LINE + "\n", ONE_HOST_IPC + "\n")
    copy = cluster.out / f"compose.node{rank}.run.yaml"
    if not is_v1(cluster.version):
        copy.write_text(text)
        return copy, m.group(1)
    # Compose v1 refuses the file as emitted (asserted here, every run): the one step the
    # engine's compose cannot do; the copy also leaves that line out.
    proc = subprocess.run(
        [*cluster.cmd, "-f", str(emitted), "config", "-q"],
        capture_output=True, text=True, cwd=cluster.out, env=docker_env(),
    )  # fmt: skip
    assert proc.returncode != 0, "compose v1 now parses top-level name: drop the v1 copy"
    assert V1_NAME_ERROR in proc.stderr, proc.stderr
    cluster.v1_refusal = proc.stderr
    copy.write_text(text.replace(m.group(0) + "\n", "", 1))
    return copy, m.group(1)


def up(cluster: Cluster, rank: int) -> None:
    """``up -d`` node ``rank``'s file. An engine that may not lift the memlock limit (no
    CAP_SYS_RESOURCE where dockerd runs, a finite hard limit) refuses to start the container
    as emitted: that refusal is asserted, then a copy with memlock at the hard limit (what any
    process here gets) runs. Elsewhere the file runs as emitted."""
    proc = cluster.compose(rank, "up", "-d", check=False)
    if proc.returncode == 0:
        return
    error = proc.stdout + proc.stderr
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    assert MEMLOCK_ERROR in error and hard != resource.RLIM_INFINITY, error
    cluster.memlock_refusal, cluster.memlock = error, hard
    text = cluster.files[rank].read_text()
    assert text.count(MEMLOCK_LINE + "\n") == 1, text
    cluster.files[rank].write_text(text.replace(MEMLOCK_LINE + "\n", f"      memlock: {hard}\n"))
    cluster.compose(rank, "up", "-d")


def health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(cluster: Cluster, started: float) -> None:
    deadline = started + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if health(cluster.port):
            cluster.ready_s = time.monotonic() - started
            return
        for rank in range(NODES):
            state = cluster.state(rank)
            if state.get("Restarting") or not state.get("Running"):
                logs = cluster.read_logs(rank)
                raise AssertionError(
                    f"node {rank}'s container stopped (exit {state.get('ExitCode')}, "
                    f"restarts: {state.get('Restarting')}):\n{logs[-4000:]}"
                )
        time.sleep(3)
    tails = "\n---\n".join(cluster.read_logs(r)[-3000:] for r in range(NODES))
    raise AssertionError(
        f"node 0 not healthy on :{cluster.port} after {START_TIMEOUT_S}s:\n{tails}"
    )


@pytest.fixture(scope="module")
def cluster(image, tiny_model, shared_tmp, engine) -> Cluster:
    cmd, version = compose_cli()
    need("container", bool(cmd), version)
    out = shared_tmp / "compose"
    out.mkdir(mode=0o755)
    c = Cluster(cmd=cmd, version=version, out=out, port=free_port())
    master_port = free_port()
    settings = (
        "hardware.nodes=2",
        "parallel.tensor=2",
        "runtime.multinode=mp",
        "runtime.master_addr=127.0.0.1",
        f"runtime.master_port={master_port}",
        f"serving.port={c.port}",
        f"model.path={tiny_model}",
    )
    c.emit = subprocess.run(
        [*host_launcher(), "emit", str(PROFILES / "tiny-cpu.yaml"), str(out),
         "--target", "compose", "--image", image, *[a for s in settings for a in ("--set", s)]],
        capture_output=True, text=True, cwd=shared_tmp, env=host_env(), timeout=300,
    )  # fmt: skip
    assert c.emit.returncode == 0, c.emit.stdout + c.emit.stderr
    for rank in range(NODES):
        c.files[rank], c.projects[rank] = project_file(c, rank)
    started = time.monotonic()
    try:
        # Node 1 first, as on a cluster where the followers come up before the leader.
        for rank in reversed(range(NODES)):
            up(c, rank)
        wait_ready(c, started)
        print(f"compose {version}: two nodes ready in {c.ready_s:.0f}s")
        c.status, c.reply = complete(f"http://127.0.0.1:{c.port}", "w1 w2 w3 w4", timeout=120)
        # The emitted health check (every 30 s) turns node 0's container healthy.
        deadline = time.monotonic() + HEALTHY_WITHIN_S
        while time.monotonic() < deadline:
            c.health = (c.state(0).get("Health") or {}).get("Status", "")
            if c.health in ("healthy", "unhealthy"):
                break
            time.sleep(3)
        for rank in range(NODES):
            c.read_logs(rank)
            c.restarts[rank] = int(
                docker("inspect", "--format", "{{.RestartCount}}", c.container(rank)).stdout
            )
        print(f"restarts by the restart policy: {c.restarts}")
        yield c
    finally:
        for rank in c.files:
            c.compose(rank, "down", "-v", "--timeout", "60", timeout=300, check=False)


def test_emit_writes_one_file_per_node_and_warns_of_the_loopback_master(cluster):
    names = sorted(p.name for p in cluster.out.iterdir() if ".run." not in p.name)
    assert names == [
        "b12x-launch-emit.manifest",  # emit's record of its own files
        "compose.node0.yaml",
        "compose.node1.yaml",
        "profile.tiny-cpu.yaml",
    ]
    assert "127.0.0.1, an example address" in cluster.emit.stderr, cluster.emit.stderr


def test_what_ran_is_what_was_emitted_but_for_the_steps_the_engine_refused(cluster):
    """Each change but the one-host `ipc` has its refusal asserted (compose v1's `name:`,
    the engine's memlock)."""
    assert (V1_NAME_ERROR in cluster.v1_refusal) == is_v1(cluster.version)
    assert bool(cluster.memlock_refusal) == bool(cluster.memlock)
    for rank in range(NODES):
        emitted = (cluster.out / f"compose.node{rank}.yaml").read_text().splitlines()
        ran = cluster.files[rank].read_text().splitlines()
        expected = [f"name: {cluster.projects[rank]}"] if cluster.v1_refusal else []
        expected.append(IPC_LINE)
        if cluster.memlock:
            expected.append(MEMLOCK_LINE)
        assert [line for line in emitted if line not in ran] == expected
        assert len(emitted) - len(ran) == (1 if cluster.v1_refusal else 0)
    print(
        f"compose {cluster.version}; one host: {ONE_HOST_IPC.strip()}; refused as emitted: "
        f"{'name: (v1); ' if cluster.v1_refusal else ''}"
        f"{'memlock: -1 (ran at ' + str(cluster.memlock) + ')' if cluster.memlock else ''}"
    )


def test_node_0_serves_a_completion_across_both_containers(cluster):
    assert cluster.status == 200
    choice = cluster.reply["choices"][0]
    assert choice["text"], cluster.reply
    assert cluster.reply["usage"]["completion_tokens"] >= 1
    assert "-tp2-" in cluster.reply.get("system_fingerprint", ""), cluster.reply


def test_the_emitted_health_check_turns_node_0_healthy(cluster):
    assert cluster.health == "healthy"


def test_each_container_runs_its_node_with_the_planned_worker(cluster):
    node0, node1 = cluster.logs[0], cluster.logs[1]
    assert "rank 0: planned worker PlannedCPUWorker" in node0, node0[-3000:]
    assert "rank 1: planned worker PlannedCPUWorker" in node1, node1[-3000:]
    assert "node 1: all nodes joined; starting vLLM" in node1, node1[-3000:]
    assert "headless multiproc executor" in node1, node1[-3000:]
