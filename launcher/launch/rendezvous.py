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
- once every node has joined, node 0 says ``go`` to all, and each execs vLLM.

The connections stay open across the exec: node 0's vLLM API server inherits its ends, and
each follower leaves a small watcher process holding its end. vLLM's headless follower does
not notice that node 0 has gone (its workers wait on node 0's queue for good), so when node
0 exits, for any reason, the kernel closes its ends and each watcher sends SIGTERM to its
node's vLLM, which then shuts down as it does on a SIGTERM of its own.

Plain TCP and one JSON line each way: no cluster layer of our own.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from launcher.errors import EnvironmentProblem

DEFAULT_TIMEOUT = 600.0
REMIND_EVERY = 30.0
RETRY_EVERY = 1.0
ACK_WITHIN = 15.0
"""Node 0's launcher answers a hello at once; silence means something else holds the port."""

_HELD: list[socket.socket] = []
"""Node 0's connections, kept referenced until the exec (a collected socket closes)."""


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


def meet(
    m: Meeting, *, timeout: float = DEFAULT_TIMEOUT, say: Callable[[str], None]
) -> list[socket.socket]:
    """Return once every node has joined (with the open connections to hand on to vLLM);
    raise ``EnvironmentProblem`` otherwise."""
    if m.nodes <= 1:
        return []
    if m.node_rank == 0:
        return lead(m, timeout=timeout, say=say)
    return [follow(m, timeout=timeout, say=say)]


def hand_on(m: Meeting, conns: list[socket.socket]) -> None:
    """Just before the exec: node 0's connections pass to vLLM; a follower starts the
    watcher that stops this node's vLLM (this process, after the exec) when node 0 goes."""
    if m.node_rank == 0:
        for conn in conns:
            os.set_inheritable(conn.fileno(), True)
        _HELD.extend(conns)
        return
    for conn in conns:
        watch_leader(conn, os.getpid())


def watch_leader(conn: socket.socket, target: int, poll: float = 2.0) -> int:
    """Fork a watcher that SIGTERMs ``target`` when node 0 closes ``conn``; it leaves
    quietly when ``target`` exits first. Returns the watcher's pid (0 in the child, never
    returned: the child ends with ``os._exit``)."""
    pid = os.fork()
    if pid:
        conn.close()  # the watcher holds its own copy
        return pid
    code = 0
    try:
        conn.settimeout(poll)
        while True:
            try:
                data = conn.recv(4096)
            except TimeoutError:
                if os.getppid() != target:  # our node's vLLM has gone
                    break
                continue
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(target, signal.SIGTERM)
                break
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _send(conn: socket.socket, data: dict) -> None:
    conn.sendall((json.dumps(data) + "\n").encode())


CLOSED: dict = {"closed": True}
"""What ``_read_line`` returns when the other end closed (``None``: silence or not JSON)."""


def _read_line(conn: socket.socket, deadline: float, buf: bytearray | None = None) -> dict | None:
    """The next JSON line from ``conn`` (``buf`` keeps what arrived past it for the next
    call: node 0's ``joined`` and ``go`` can come in one segment)."""
    buf = bytearray() if buf is None else buf
    while b"\n" not in buf:
        conn.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            return None
        except OSError:  # reset: the other end went away
            return CLOSED
        if not chunk:
            return CLOSED
        buf += chunk
        if len(buf) > 65536:
            return None
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # a peer's line is input: nested too deep is not JSON
        return None
    return data if isinstance(data, dict) else None


def _missing(nodes: int, joined: dict) -> str:
    return ", ".join(str(r) for r in range(1, nodes) if r not in joined)


def lead(m: Meeting, *, timeout: float, say: Callable[[str], None]) -> list[socket.socket]:
    """Node 0: wait for nodes 1..N-1 on ``master_port``, then tell them all to go; returns
    the open connections."""
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
    done = False
    try:
        with server:
            while True:
                _drop_departed(joined, say)
                if len(joined) >= m.nodes - 1 and _go(joined, say):
                    break
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
            say(f"node 0: all {m.nodes} nodes joined; starting vLLM")
            done = True
            return list(joined.values())
    finally:
        if not done:
            for conn in joined.values():
                with contextlib.suppress(OSError):
                    conn.close()


def _drop_departed(joined: dict[int, socket.socket], say: Callable[[str], None]) -> None:
    """Forget followers that left while node 0 waited (they send nothing after their hello:
    a readable connection is a closed one)."""
    if not joined:
        return
    readable, _, _ = select.select(list(joined.values()), [], [], 0)
    for rank, conn in list(joined.items()):
        if conn not in readable:
            continue
        try:
            gone = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            conn.close()
            del joined[rank]
            say(f"node 0: node {rank} left before all nodes joined; waiting for it again")


def _go(joined: dict[int, socket.socket], say: Callable[[str], None]) -> bool:
    """Tell every follower to start; False (and the failed ones forgotten) if one is gone."""
    ok = True
    for rank, conn in list(joined.items()):
        try:
            _send(conn, {"go": True})
        except OSError:
            conn.close()
            del joined[rank]
            say(f"node 0: node {rank} left before it could start; waiting for it again")
            ok = False
    return ok


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
    try:
        _send(conn, {"joined": True})
    except OSError:
        conn.close()
        return
    joined[rank] = conn
    say(f"node 0: node {rank} joined from {peer[0]}")


def follow(m: Meeting, *, timeout: float, say: Callable[[str], None]) -> socket.socket:
    """Node N>0: reach node 0 (retrying while it is not up), join, wait for ``go``; returns
    the open connection."""
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
        pending = bytearray()
        try:
            _send(conn, hello)
            ack = _read_line(conn, min(deadline, time.monotonic() + ACK_WITHIN), pending)
        except OSError:
            ack = None
        reply = ack
        if ack is None:  # silence, or bytes that are not ours
            conn.close()
            raise EnvironmentProblem(
                f"node {m.node_rank}: something other than node 0's launcher answers at "
                f"{m.where} (node 0's vLLM already running?). The nodes of a deployment start "
                "together: restart node 0's launcher, then this one."
            )
        if ack.get("joined"):
            say(f"node {m.node_rank}: joined node 0 at {m.where}; waiting for the other nodes")
            reply = _read_line(conn, deadline, pending)
        if reply and reply.get("go"):
            say(f"node {m.node_rank}: all nodes joined; starting vLLM")
            conn.settimeout(None)
            return conn
        conn.close()
        if reply and "refused" in reply:
            raise EnvironmentProblem(f"node 0 refused node {m.node_rank}: {reply['refused']}")
        # Node 0 went away or this was not node 0's launcher (vLLM already up): retry.
        time.sleep(RETRY_EVERY)
