"""Nodes meet on node 0's master_port before vLLM starts (launcher/launch/rendezvous.py)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from launcher.errors import EnvironmentProblem
from launcher.launch import rendezvous
from launcher.launch.rendezvous import Meeting, follow, lead


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _meeting(port: int, rank: int, nodes: int = 2, fingerprint: str = "abc") -> Meeting:
    return Meeting(nodes, rank, "127.0.0.1", port, fingerprint)


def _run(fn, *args, **kwargs):
    out: dict = {}

    def target():
        try:
            fn(*args, **kwargs)
            out["ok"] = True
        except Exception as exc:
            out["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setattr(rendezvous, "RETRY_EVERY", 0.05)


def test_follower_started_first_waits_with_a_message_then_joins():
    port = _port()
    said: list[str] = []
    t, out = _run(follow, _meeting(port, 1), timeout=20, say=said.append)
    time.sleep(0.3)
    assert any("waiting for node 0 at 127.0.0.1:" in s for s in said), said
    lead_said: list[str] = []
    lead(_meeting(port, 0), timeout=20, say=lead_said.append)
    t.join(10)
    assert out == {"ok": True}
    assert any("node 1 joined" in s for s in lead_said)
    assert any("all 2 nodes joined" in s for s in lead_said)


def test_three_nodes_all_go_together():
    port = _port()
    threads = [_run(follow, _meeting(port, r, 3), timeout=20, say=lambda s: None) for r in (1, 2)]
    lead(_meeting(port, 0, 3), timeout=20, say=lambda s: None)
    for t, out in threads:
        t.join(10)
        assert out == {"ok": True}


def test_leader_names_the_missing_node_and_stops():
    port = _port()
    _run(follow, _meeting(port, 1, 3), timeout=20, say=lambda s: None)
    start = time.monotonic()
    with pytest.raises(EnvironmentProblem) as exc:
        lead(_meeting(port, 0, 3), timeout=1.5, say=lambda s: None)
    assert time.monotonic() - start < 10
    message = str(exc.value)
    assert "node(s) 2 of 3 never joined" in message and "Nothing was started" in message
    # The port is free again: a new launch can listen on it.
    with socket.create_server(("", port)):
        pass


def test_follower_without_leader_times_out():
    said: list[str] = []
    with pytest.raises(EnvironmentProblem, match=r"node 0 did not answer at 127\.0\.0\.1:"):
        follow(_meeting(_port(), 1), timeout=0.5, say=said.append)
    assert said and "waiting for node 0" in said[0]


def test_a_follower_with_another_plan_is_refused():
    port = _port()
    t, out = _run(follow, _meeting(port, 1, fingerprint="other"), timeout=20, say=lambda s: None)
    with pytest.raises(EnvironmentProblem, match="runs another plan"):
        lead(_meeting(port, 0), timeout=20, say=lambda s: None)
    t.join(10)
    assert "refused" in str(out.get("error"))


def test_leader_reports_a_busy_port():
    with socket.create_server(("", 0)) as busy:
        port = busy.getsockname()[1]
        with pytest.raises(EnvironmentProblem, match=r"cannot listen on runtime\.master_port"):
            lead(_meeting(port, 0), timeout=1, say=lambda s: None)


def test_one_node_meets_nobody():
    rendezvous.meet(_meeting(_port(), 0, nodes=1), timeout=0.1, say=pytest.fail)


def test_a_follower_stops_when_node_0_goes(tmp_path):
    """The watcher left by a follower SIGTERMs its process once node 0's end closes."""
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import os, socket, time\n"
            "from launcher.launch.rendezvous import watch_leader\n"
            f"c = socket.create_connection(('127.0.0.1', {port}))\n"
            "watch_leader(c, os.getpid(), poll=0.2)\n"
            "print('watching', flush=True)\n"
            "time.sleep(60)\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        conn, _ = server.accept()
        assert proc.stdout.readline().strip() == "watching"
        start = time.monotonic()
        conn.close()  # node 0 exits
        assert proc.wait(timeout=20) == -signal.SIGTERM
        assert time.monotonic() - start < 10


def test_a_leader_alone_exits_1_with_one_line_and_starts_nothing(monkeypatch, tmp_path):
    """Through the CLI: the checks pass, nobody joins, --join-timeout ends it (exit 1)."""
    from click.testing import CliRunner

    from launcher import pipeline
    from launcher.cli import cli
    from launcher.launch import start
    from tests.conftest import PROFILES

    def prepared(planned, **kwargs):
        return start.Prepared(planned, tmp_path, ["true"], {})

    def never(*args):
        raise AssertionError("vLLM was started")

    monkeypatch.setattr(pipeline, "prepare", prepared)
    monkeypatch.setattr(start.os, "execvpe", never)
    sets = [
        "hardware.nodes=2",
        "parallel.tensor=2",
        "runtime.master_addr=127.0.0.1",
        f"runtime.master_port={_port()}",
    ]
    args = [str(PROFILES / "tiny-cpu.yaml"), "--join-timeout", "1"]
    for s in sets:
        args += ["--set", s]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 1, out.output
    assert "error: node(s) 1 of 2 never joined node 0" in out.output
    assert "Traceback" not in out.output


def test_a_follower_that_finds_something_else_on_the_port_says_so(monkeypatch):
    """Node 0's vLLM already up (its store holds the port): no silent wait to the timeout."""
    monkeypatch.setattr(rendezvous, "ACK_WITHIN", 0.5)
    with socket.create_server(("127.0.0.1", 0)) as other:  # accepts, never answers
        port = other.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(EnvironmentProblem, match="something other than node 0's launcher"):
            follow(_meeting(port, 1), timeout=30, say=lambda s: None)
        assert time.monotonic() - start < 10


def test_a_follower_retries_when_node_0_closes_on_it():
    """A leader that restarts (closes the connection) is retried, not reported."""
    port = _port()
    server = socket.create_server(("127.0.0.1", port))
    t, out = _run(follow, _meeting(port, 1), timeout=20, say=lambda s: None)
    conn, _ = server.accept()
    conn.close()
    server.close()
    time.sleep(0.2)
    lead(_meeting(port, 0), timeout=20, say=lambda s: None)
    t.join(10)
    assert out == {"ok": True}


def test_a_follower_that_leaves_before_the_others_is_waited_for_again():
    port = _port()
    said: list[str] = []
    t, out = _run(lead, _meeting(port, 0, 3), timeout=20, say=said.append)
    time.sleep(0.3)
    quitter = socket.create_connection(("127.0.0.1", port))
    rendezvous._send(quitter, {"node_rank": 1, "nodes": 3, "fingerprint": "abc"})
    assert rendezvous._read_line(quitter, time.monotonic() + 5) == {"joined": True}
    quitter.close()  # node 1 gives up (Ctrl-C) while node 2 is not there yet
    time.sleep(1.5)
    assert any("node 1 left" in s for s in said), said
    followers = [_run(follow, _meeting(port, r, 3), timeout=20, say=lambda s: None) for r in (1, 2)]
    for ft, fout in followers:
        ft.join(10)
        assert fout == {"ok": True}
    t.join(10)
    assert out == {"ok": True}
