"""The scratch-KV stage against a runner stand-in that records what vLLM's runner is asked.

The stand-in keeps the V1 runner's state the stage touches (``kv_caches``, ``attn_groups``,
``kv_cache_config``, ``cache_config.num_gpu_blocks``, ``requests``, the input batch, the
graph dispatchers) and logs every call, so the order (build, eager, serve, release) and the
restored state are checked, and a release that leaves state behind fails loudly.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from launcher.runtime.prewarm import scratch_kv as sk


class Dispatcher:
    def __init__(self):
        self.keys_initialized = True
        self.cudagraph_keys = {"FULL": {1, 2}, "PIECEWISE": {4}}


class Batch:
    def __init__(self, runner):
        self.runner = runner
        self.num_reqs = 0

    def remove_request(self, req_id):
        self.runner.log.append(("remove_request", req_id))
        self.num_reqs -= 1

    def condense(self):
        self.runner.log.append(("condense",))


class Runner:
    """vLLM 0.26's GPUModelRunner, as far as the stage touches it."""

    def __init__(self, cleanup_forgets: str | None = None):
        self.log: list[tuple] = []
        self.cache_config = SimpleNamespace(num_gpu_blocks=None, num_gpu_blocks_override=None)
        self.kv_caches: list = []
        self.attn_groups: list = []
        self.requests: dict = {}
        self.input_batch = Batch(self)
        self.cudagraph_dispatcher = Dispatcher()
        self.drafter = SimpleNamespace(cudagraph_dispatcher=Dispatcher())
        self.cleanup_forgets = cleanup_forgets

    def get_kv_cache_spec(self):
        return {}

    def _init_minimal_kv_cache_for_profiling(self):
        raise AssertionError("the stage sizes its own cache")

    def initialize_kv_cache(self, config, is_profiling=False):
        self.log.append(("initialize_kv_cache", config.num_blocks, is_profiling))
        self.kv_cache_config = config
        self.kv_caches = ["layer0", "layer1"]
        self.attn_groups = [["group"]]
        self.cudagraph_dispatcher.keys_initialized = True

    def _cleanup_profiling_kv_cache(self):
        self.log.append(("_cleanup_profiling_kv_cache",))
        self.kv_caches.clear()
        if self.cleanup_forgets != "attn_groups":
            self.attn_groups.clear()
        del self.kv_cache_config
        self.cache_config.num_gpu_blocks = None


def make_config(runner, blocks):
    runner.log.append(("make_config", blocks))
    return SimpleNamespace(num_blocks=blocks)


def test_the_stage_builds_runs_eager_and_releases_in_vllms_order():
    runner = Runner()
    with sk.scratch_kv(runner, 300, make_config) as scratch:
        runner.log.append(("serve",))
        assert runner.kv_caches and runner.cache_config.num_gpu_blocks == 300
        assert not runner.cudagraph_dispatcher.keys_initialized  # eager: nothing captured
        assert not runner.drafter.cudagraph_dispatcher.keys_initialized
    assert [c[0] for c in runner.log] == [
        "make_config",
        "initialize_kv_cache",
        "serve",
        "_cleanup_profiling_kv_cache",
    ]
    assert runner.log[1] == ("initialize_kv_cache", 300, True)
    assert scratch.blocks == 300 and scratch.forced == []
    assert sk.leftovers(runner) == []
    assert runner.cudagraph_dispatcher.cudagraph_keys == {"FULL": set(), "PIECEWISE": set()}


def test_requests_a_failed_step_left_are_removed_and_reported():
    runner = Runner()
    with sk.scratch_kv(runner, 8, make_config) as scratch:
        runner.requests = {"a": 1, "b": 2}
        runner.input_batch.num_reqs = 2
    assert scratch.forced == ["request a", "request b"]
    assert ("remove_request", "a") in runner.log and ("condense",) in runner.log
    assert sk.leftovers(runner) == []


def test_a_release_that_leaves_state_behind_stops_the_boot():
    runner = Runner(cleanup_forgets="attn_groups")
    with (
        pytest.raises(sk.ScratchNotRestored, match="attention groups"),
        sk.scratch_kv(runner, 8, make_config),
    ):
        pass


def test_a_runner_without_the_minimal_kv_path_is_unsupported_with_the_reason():
    class V2Runner:
        def initialize_kv_cache(self, config):
            pass

    why = sk.unsupported(V2Runner())
    assert "V2Runner has no _init_minimal_kv_cache_for_profiling" in why
    with pytest.raises(sk.ScratchUnsupported), sk.scratch_kv(V2Runner(), 8, make_config):
        pass


def test_a_runner_that_already_holds_a_kv_cache_is_not_touched():
    runner = Runner()
    runner.kv_caches = ["real"]
    with (
        pytest.raises(sk.ScratchUnsupported, match="already holds"),
        sk.scratch_kv(runner, 8, make_config),
    ):
        pass
    assert runner.kv_caches == ["real"] and runner.log == []
