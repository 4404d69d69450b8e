"""Stopping the server's process group: SIGTERM first, then harder, nothing left behind."""

import os
import sys
import time

from launcher.launch.start import Prepared
from launcher.qualify.server import BootFailed, ServerProcess, _group_alive

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import signal, time; "
                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print("up", flush=True)
time.sleep(600)
"""

POLITE = "import time; print('up', flush=True); time.sleep(600)"


def server(tmp_path, code):
    prepared = Prepared(None, tmp_path, [sys.executable, "-c", code], dict(os.environ))
    s = ServerProcess(prepared, port=1).start()
    deadline = time.monotonic() + 30
    while "up" not in s.log_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    return s


def test_sigterm_ends_a_server_that_obeys_it(tmp_path):
    s = server(tmp_path, POLITE)
    assert s.stop(grace=10) == -15
    assert not _group_alive(s.proc.pid)


def test_a_server_that_ignores_signals_is_killed_with_its_children(tmp_path):
    s = server(tmp_path, STUBBORN)
    start = time.monotonic()
    assert s.stop(grace=0.5) is None
    assert not _group_alive(s.proc.pid)
    assert time.monotonic() - start < 20


def test_a_server_that_exits_while_booting_fails_with_its_log(tmp_path):
    s = server(tmp_path, "print('up'); print('CUDA out of memory'); raise SystemExit(3)")
    try:
        s.wait_healthy(timeout=30)
    except BootFailed as exc:
        assert "code 3" in str(exc) and "CUDA out of memory" in str(exc)
    else:
        raise AssertionError("expected BootFailed")
