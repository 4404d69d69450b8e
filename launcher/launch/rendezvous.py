"""Before a multi-node launch execs vLLM: every node answers for itself, or none starts.

vLLM's own multi-node start waits without a word: a follower started first retries node 0
quietly, and node 0 waits for a follower that never comes for as long as torch's store
allows. So each node's launcher, once its own plan and GPUs are checked, meets the others
on node 0's ``runtime.master_port`` (the port vLLM's store binds a moment later):

- node 0 listens, says which nodes it still waits for, and stops with the missing nodes
  named when ``timeout`` passes (exit 1; nothing was started);
- a follower retries node 0 with one clear line (and a reminder now and then), then sends
  its rank and plan fingerprint; node 0 refuses a follower whose plan differs (another
  profile or override), since vLLM would fail later with a less helpful message;
- once every node has joined, node 0 says ``go`` to all; each closes and execs vLLM.

Plain TCP and one JSON line each way: no cluster layer of our own, nothing left running.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from launcher.errors import EnvironmentProblem

DEFAULT_TIMEOUT = 600.0
REMIND_EVERY = 30.0
RETRY_EVERY = 1.0


@dataclass(frozen=True)
class Meeting:
    nodes: int
    node_rank: int
    master_addr: str
    master_port: int
    fingerprint: str

    @property
    def where(self) -> str:
        return f"{self.master_addr}:{self.master_port}"


def meet(m: Meeting, *, timeout: float = DEFAULT_TIMEOUT, say: Callable[[str], None]) -> None:
    """Return once every node has joined; raise ``EnvironmentProblem`` otherwise."""
    if m.nodes <= 1:
        return
    if m.node_rank == 0:
        lead(m, timeout=timeout, say=say)
    else:
        follow(m, timeout=timeout, say=say)


def _send(conn: socket.socket, data: dict) -> None:
    conn.sendall((json.dumps(data) + "\n").encode())


def _read_line(conn: socket.socket, deadline: float) -> dict | None:
    buf = b""
    while not buf.endswith(b"\n"):
        conn.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = conn.recv(4096)
        except (TimeoutError, OSError):
            return None
        if not chunk:
            return None
        buf += chunk
        if len(buf) > 65536:
            return None
    try:
        data = json.loads(buf)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _missing(nodes: int, joined: dict) -> str:
    return ", ".join(str(r) for r in range(1, nodes) if r not in joined)


def lead(m: Meeting, *, timeout: float, say: Callable[[str], None]) -> None:
    """Node 0: wait for nodes 1..N-1 on ``master_port``, then tell them all to go."""
    joined: dict[int, socket.socket] = {}
    try:
        server = socket.create_server(("", m.master_port), reuse_port=False)
    except OSError as exc:
        raise EnvironmentProblem(
            f"node 0 cannot listen on runtime.master_port {m.master_port} ({exc.strerror or exc});"
            " another launch may hold it: stop it or choose another runtime.master_port"
        ) from None
    start = time.monotonic()
    deadline = start + timeout
    remind = start
    try:
        with server:
            while len(joined) < m.nodes - 1:
                now = time.monotonic()
                if now >= deadline:
                    raise EnvironmentProblem(
                        f"node(s) {_missing(m.nodes, joined)} of {m.nodes} never joined node 0 "
                        f"at {m.where} within {timeout:.0f}s; start `b12x-launch PROFILE "
                        "--node-rank N` on each, with the same profile, and check that they "
                        f"reach port {m.master_port} here. Nothing was started."
                    )
                if now >= remind:
                    say(
                        f"node 0: waiting for node(s) {_missing(m.nodes, joined)} of {m.nodes} "
                        f"on port {m.master_port} (gives up in {deadline - now:.0f}s)"
                    )
                    remind = now + REMIND_EVERY
                server.settimeout(min(1.0, max(0.05, deadline - now)))
                try:
                    conn, peer = server.accept()
                except TimeoutError:
                    continue
                _welcome(m, conn, peer, joined, deadline, say)
            for conn in joined.values():
                _send(conn, {"go": True})
            # Let every follower close first, so the port's TIME_WAIT stays on their side.
            for conn in joined.values():
                _read_line(conn, time.monotonic() + 5.0)
            say(f"node 0: all {m.nodes} nodes joined; starting vLLM")
    finally:
        for conn in joined.values():
            with contextlib.suppress(OSError):
                conn.close()


def _welcome(m: Meeting, conn, peer, joined: dict, deadline: float, say) -> None:
    hello = _read_line(conn, min(deadline, time.monotonic() + 10.0))
    rank = hello.get("node_rank") if hello else None
    problem = None
    if not isinstance(rank, int) or not 0 < rank < m.nodes:
        problem = f"a connection from {peer[0]} is not a b12x-launch node of this deployment"
    elif hello.get("nodes") != m.nodes or hello.get("fingerprint") != m.fingerprint:
        problem = (
            f"node {rank} ({peer[0]}) runs another plan ({hello.get('fingerprint')}, "
            f"{hello.get('nodes')} nodes) than node 0 ({m.fingerprint}, {m.nodes} nodes); "
            "start every node with the same profile and --set overrides"
        )
    elif rank in joined:
        problem = f"node {rank} joined twice (the second from {peer[0]}); each rank once"
    if problem:
        with contextlib.suppress(OSError):
            _send(conn, {"refused": problem})
        conn.close()
        if hello is not None and "fingerprint" in hello:
            raise EnvironmentProblem(problem + ". Nothing was started.")
        say(f"node 0: ignored: {problem}")
        return
    joined[rank] = conn
    say(f"node 0: node {rank} joined from {peer[0]}")


def follow(m: Meeting, *, timeout: float, say: Callable[[str], None]) -> None:
    """Node N>0: reach node 0 (retrying while it is not up), join, wait for ``go``."""
    start = time.monotonic()
    deadline = start + timeout
    remind = start
    hello = {"node_rank": m.node_rank, "nodes": m.nodes, "fingerprint": m.fingerprint}
    while True:
        now = time.monotonic()
        if now >= deadline:
            raise EnvironmentProblem(
                f"node {m.node_rank}: node 0 did not answer at {m.where} within {timeout:.0f}s;"
                " start `b12x-launch PROFILE --node-rank 0` there, and check "
                "runtime.master_addr and runtime.master_port. Nothing was started."
            )
        try:
            conn = socket.create_connection(
                (m.master_addr, m.master_port), timeout=min(5.0, deadline - now)
            )
        except OSError:
            if now >= remind:
                say(
                    f"node {m.node_rank}: waiting for node 0 at {m.where} (start b12x-launch "
                    f"--node-rank 0 there; gives up in {deadline - now:.0f}s)"
                )
                remind = now + REMIND_EVERY
            time.sleep(RETRY_EVERY)
            continue
        with conn:
            try:
                _send(conn, hello)
            except OSError:
                time.sleep(RETRY_EVERY)
                continue
            say(f"node {m.node_rank}: joined node 0 at {m.where}; waiting for the other nodes")
            reply = _read_line(conn, deadline)
        if reply and reply.get("go"):
            say(f"node {m.node_rank}: all nodes joined; starting vLLM")
            return
        if reply and "refused" in reply:
            raise EnvironmentProblem(f"node 0 refused node {m.node_rank}: {reply['refused']}")
        # Node 0 went away or this was not node 0's launcher (vLLM already up): retry.
        time.sleep(RETRY_EVERY)
