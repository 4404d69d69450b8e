"""A headless worker's health, for a container probe: ``python3 -m launcher.launch.probe``.

A worker node serves no HTTP. It is healthy when its vLLM process is alive (not a zombie)
and node 0's ``runtime.master_port`` answers: the port the launchers met on
(``launch/rendezvous.py``) and vLLM's store binds after them. Exit 0 healthy, 1 not (one line
saying why). Standard library only: it runs every probe period.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

LEADER_ENV = ("LWS_LEADER_ADDRESS", "BLAUNCH_MASTER_ADDR")
"""Where the leader's address is read from when ``--leader`` is not given (LWS sets the first)."""


def vllm_alive(proc: Path = Path("/proc")) -> bool:
    """Whether a process of vLLM runs here (its command line names vllm; not a zombie)."""
    me = os.getpid()
    try:
        entries = list(proc.iterdir())
    except OSError:
        return False
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()[:4096]
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[:1]
        except OSError:
            continue
        if b"vllm" in cmdline.lower() and state != ["Z"]:
            return True
    return False


def leader_reachable(address: str, port: int, timeout: float) -> str | None:
    """None when ``address:port`` accepts a connection; else why not."""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
    except OSError as exc:
        return f"leader {address}:{port} unreachable: {exc.strerror or exc}"
    return None


def main(argv: list[str] | None = None, proc: Path = Path("/proc")) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m launcher.launch.probe", description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="node 0's runtime.master_port")
    parser.add_argument("--leader", default=None, help="node 0's address (default: from env)")
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    leader = args.leader or next((os.environ[k] for k in LEADER_ENV if os.environ.get(k)), "")
    if not vllm_alive(proc):
        print("worker unhealthy: no vLLM process runs here", file=sys.stderr)
        return 1
    if not leader:
        print(f"worker unhealthy: no leader address ({' or '.join(LEADER_ENV)})", file=sys.stderr)
        return 1
    why = leader_reachable(leader, args.port, args.timeout)
    if why:
        print(f"worker unhealthy: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
