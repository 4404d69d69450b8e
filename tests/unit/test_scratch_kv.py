"""The scratch-KV stage against a runner stand-in that records what vLLM's runner is asked.

The stand-in keeps the V1 runner's state the stage touches (``kv_caches``, ``attn_groups``,
``kv_cache_config``, ``cache_config.num_gpu_blocks``, ``requests``, the input batch, the
graph dispatchers) and logs every call, so the order (build, eager, serve, release) and the
restored state are checked, and a release that leaves state behind fails loudly.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from launcher.runtime.prewarm.stage import scratch_kv as sk
from tests.conftest import fake_allocator, need_serving


def owned(obj) -> bool:
    """The stand-in's classes play vLLM's worker-side classes (its call log is the test's)."""
    return type(obj).__module__ == __name__ and not isinstance(obj, Calls)


class Calls:
    """The calls the runner was asked, kept outside the state the stage puts back."""

    def __init__(self):
        self._calls: list[tuple] = []

    def append(self, call: tuple) -> None:
        self._calls.append(call)

    def __iter__(self):
        return iter(self._calls)

    def __getitem__(self, i):
        return self._calls[i]

    def __eq__(self, other):
        return self._calls == other


class Dispatcher:
    def __init__(self):
        self.keys_initialized = False
        self.cudagraph_keys = {"FULL": set(), "PIECEWISE": set()}


class Drafter:
    """vLLM's EAGLE/MTP proposer: its own slot mapping, zeros until it serves."""

    def __init__(self):
        self.cudagraph_dispatcher = Dispatcher()
        self._slot_mapping_buffer = np.zeros(64, dtype=np.int64)


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
        self.log = Calls()
        self.cache_config = SimpleNamespace(num_gpu_blocks=None, num_gpu_blocks_override=None)
        self.kv_caches: list = []
        self.attn_groups: list = []
        self.requests: dict = {}
        self.input_batch = Batch(self)
        self.positions = np.zeros(128, dtype=np.int64)
        self.cudagraph_dispatcher = Dispatcher()
        self.drafter = Drafter()
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
        for d in (self.cudagraph_dispatcher, self.drafter.cudagraph_dispatcher):
            d.keys_initialized = True
            d.cudagraph_keys["FULL"].update({1, 2})

    def _cleanup_profiling_kv_cache(self):
        self.log.append(("_cleanup_profiling_kv_cache",))
        self.kv_caches.clear()
        if self.cleanup_forgets != "attn_groups":
            self.attn_groups.clear()
        del self.kv_cache_config
        if self.cleanup_forgets != "num_gpu_blocks":
            self.cache_config.num_gpu_blocks = None


def make_config(runner, blocks):
    runner.log.append(("make_config", blocks))
    return SimpleNamespace(num_blocks=blocks)


def test_the_stage_builds_runs_eager_and_releases_in_vllms_order():
    runner = Runner()
    with sk.scratch_kv(runner, 300, make_config, owned) as scratch:
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
    # as before the stage: vLLM's real initialize_kv_cache readies them again
    for d in (runner.cudagraph_dispatcher, runner.drafter.cudagraph_dispatcher):
        assert d.cudagraph_keys == {"FULL": set(), "PIECEWISE": set()}
        assert not d.keys_initialized


def test_buffers_the_served_steps_wrote_are_back_as_before_the_stage():
    """The H200's boot-1 crash: the drafter's slot mapping kept the scratch cache's slots, and
    vLLM's graph-memory profile wrote the draft layer's KV there on a cache of 12 blocks."""
    runner = Runner()
    slots, positions = runner.drafter._slot_mapping_buffer, runner.positions
    with sk.scratch_kv(runner, 300, make_config, owned) as scratch:
        slots[:48] = np.arange(9000, 9048)  # what a served draft step leaves there
        positions[:5] = [20000, 20001, 20002, 20003, 20004]
    assert runner.drafter._slot_mapping_buffer is slots and not slots.any()
    assert runner.positions is positions and not positions.any()
    assert set(scratch.restored.rewritten) == {
        "runner.drafter._slot_mapping_buffer",
        "runner.positions",
    }


def test_what_the_stage_made_on_the_runner_is_dropped_and_what_it_replaced_is_put_back():
    runner = Runner()
    batch, drafter = runner.input_batch, runner.drafter
    with sk.scratch_kv(runner, 8, make_config, owned) as scratch:
        runner.input_batch = Batch(runner)  # vLLM re-makes it when block sizes differ
        drafter.attn_metadata_builder = object()  # made for the scratch cache's groups
    assert runner.input_batch is batch and not hasattr(drafter, "attn_metadata_builder")
    assert "runner.input_batch" in scratch.restored.rebound
    assert "runner.drafter.attn_metadata_builder" in scratch.restored.dropped


def test_requests_a_failed_step_left_are_removed_and_reported():
    runner = Runner()
    with sk.scratch_kv(runner, 8, make_config, owned) as scratch:
        runner.requests = {"a": 1, "b": 2}
        runner.input_batch.num_reqs = 2
    assert scratch.forced == ["request a", "request b"]
    assert ("remove_request", "a") in runner.log and ("condense",) in runner.log
    assert sk.leftovers(runner) == []


def test_the_last_waves_requests_are_removed_under_inference_mode_as_vllm_removes_them():
    """vLLM's batch makes the ``allowed_token_ids`` mask under inference mode; writing it
    outside stopped the H100's boot (2026-12-06)."""
    torch = need_serving("torch")
    runner = Runner()
    with torch.inference_mode():
        mask = torch.ones(4, 8, dtype=torch.bool)  # as vLLM's add_request makes it

    def remove_request(req_id):
        mask[0].fill_(False)
        runner.log.append(("remove_request", req_id))

    with sk.scratch_kv(runner, 8, make_config, owned) as scratch:
        runner.requests = {"last-wave-0": 1}
        runner.input_batch.remove_request = remove_request
    assert scratch.forced == ["request last-wave-0"]
    assert not mask[0].any()


def test_what_vllms_release_forgets_on_the_runner_is_put_back_and_named():
    runner = Runner(cleanup_forgets="attn_groups")
    with sk.scratch_kv(runner, 8, make_config, owned) as scratch:
        pass
    assert runner.attn_groups == [] and "runner.attn_groups" in scratch.restored.rebound


def test_what_vllms_release_leaves_in_the_shared_cache_config_is_put_back():
    runner = Runner(cleanup_forgets="num_gpu_blocks")  # vLLM's cache config, shared
    with sk.scratch_kv(runner, 8, make_config, owned):
        assert runner.cache_config.num_gpu_blocks == 8
    assert runner.cache_config.num_gpu_blocks is None


def test_a_release_that_cannot_put_the_runner_back_stops_the_boot(monkeypatch):
    from launcher.runtime.prewarm.stage import runner_state

    monkeypatch.setattr(runner_state.Snapshot, "restore", lambda self: runner_state.Restored())
    runner = Runner(cleanup_forgets="attn_groups")
    with (
        pytest.raises(sk.ScratchNotRestored, match="attention groups"),
        sk.scratch_kv(runner, 8, make_config, owned),
    ):
        pass


def test_a_runner_without_the_minimal_kv_path_is_unsupported_with_the_reason():
    class V2Runner:
        def initialize_kv_cache(self, config):
            pass

    why = sk.unsupported(V2Runner())
    assert "V2Runner has no get_kv_cache_spec" in why
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


def test_the_layers_bindings_to_the_scratch_cache_are_put_back_and_the_rest_kept():
    """The V2 runner binds each attention layer to its cache (``layer.kv_cache``) and has no
    release of its own: what points into the scratch cache's memory goes back (a placeholder)
    or away; a workspace the layer's implementation made elsewhere stays (it was measured)."""

    torch = need_serving("torch")
    from launcher.runtime.prewarm.stage import runner_state

    placeholder = torch.tensor([])
    impl = SimpleNamespace()
    layer = SimpleNamespace(kv_cache=placeholder, impl=impl)
    saved = runner_state.bindings({"model.layers.0.attn": layer})
    scratch = torch.zeros(4, 64, 8)
    layer.kv_cache = scratch  # what initialize_kv_cache binds
    impl._k_scale_cache = scratch[1]  # a view into the cache
    impl.workspace = torch.zeros(16)  # made on the first forward, elsewhere
    put_back = saved.restore(runner_state.storages([scratch]))
    assert layer.kv_cache is placeholder and not hasattr(impl, "_k_scale_cache")
    assert impl.workspace is not None
    assert sorted(put_back) == [
        "model.layers.0.attn.impl._k_scale_cache",
        "model.layers.0.attn.kv_cache",
    ]


def test_a_cache_vllm_fails_to_build_is_not_staged_and_the_runner_is_put_back():
    """A part that cannot run is skipped, never a crash: the runner, half built, is put back
    before the boot goes on as plain vLLM would."""

    class Failing(Runner):
        def initialize_kv_cache(self, config, is_profiling=False):
            self.kv_cache_config = config  # as far as vLLM got
            self.attn_groups = [["half"]]
            raise RuntimeError("no backend for this layout")

    runner = Failing()
    with (
        pytest.raises(sk.ScratchUnsupported, match="initialize_kv_cache failed"),
        sk.scratch_kv(runner, 8, make_config, owned),
    ):
        raise AssertionError("the block must not run")
    assert sk.leftovers(runner) == [] and runner.attn_groups == []


def test_the_served_waves_transient_counts_their_peak_and_segments_not_what_they_keep(
    monkeypatch,
):
    """What the waves took above what they left: the allocated peak, and the segments grown
    from an empty cache less what stays allocated (a buffer the waves keep is counted as
    retained, not as an activation)."""
    need_serving("torch")  # the code under test reads torch's allocator
    import torch

    state = {"allocated": 1000, "peak": 1000, "reserved": 4000, "reserved_peak": 4000}
    emptied = []

    def empty_cache() -> None:
        emptied.append(True)
        state["reserved"] = state["reserved_peak"] = 1000

    fake_allocator(monkeypatch, state)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
    with sk.transient_peak("cuda:0") as took:
        state["peak"] = 1000 + 300 + 700  # a 300 kept buffer, then a 700 activation
        state["reserved_peak"] = 1000 + 1400  # its segments, fragmentation included
        state["allocated"] = 1300
    assert emptied  # measured from an empty cache, as serving starts after vLLM's
    assert took.peak == 700
    assert took.segments == 1100


def test_without_a_device_the_transient_is_zero():
    with sk.transient_peak(None) as took:
        pass
    assert (took.peak, took.segments) == (0, 0)


def test_a_thread_the_stage_left_running_is_joined_and_reported():
    gate = threading.Event()
    before = sk._threads()
    stray = threading.Thread(target=gate.wait, name="stray", daemon=True)
    stray.start()
    try:
        assert sk._end_stray_work(before, sk._captured(), join_s=0.05) == [
            "thread stray still running after 0 s"
        ]
    finally:
        gate.set()


def test_tqdms_lifelong_monitor_is_not_waited_for_at_the_release():
    from tqdm._monitor import TMonitor

    before = sk._threads()
    monitor = TMonitor(SimpleNamespace(_instances=set()), sleep_interval=60)
    try:
        assert sk._end_stray_work(before, sk._captured(), join_s=5.0) == []
        assert monitor.is_alive()  # left to run, not joined for 5 s
    finally:
        monitor.exit()
