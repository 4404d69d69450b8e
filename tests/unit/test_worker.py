"""The planned worker's logic on a stand-in base class (the real vLLM runs in integration)."""

import json
import logging
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from launcher import pipeline
from launcher.contract.names import ComponentName, Source
from launcher.contract.plan import ComponentRecord, KvRecord, PlanRecord, RankPlan
from launcher.contract.record import RankRecord
from launcher.runtime.worker import activation, headroom, recording, sizing
from launcher.runtime.worker.activation import ActivationState, peak_activation
from launcher.runtime.worker.late import LateCounters
from launcher.runtime.worker.planned import PlannedMixin
from launcher.runtime.worker.runplan import PlanMissing
from launcher.runtime.worker.state import WorkerState, readings
from tests.conftest import PROFILES, fake_allocator, need_serving


class FakeCPUWorker:
    """The slice of vLLM's CPU worker that the mixin calls."""

    def __init__(self, available: int):
        self.available = available
        self.rank = 0
        self.model_runner = None
        self.blocks = None

    def determine_available_memory(self) -> int:
        return self.available

    def initialize_from_config(self, kv_cache_config) -> None:
        self.blocks = kv_cache_config.num_blocks

    def compile_or_warm_up_model(self):
        return "warmed"


class Worker(PlannedMixin, FakeCPUWorker):
    platform = "cpu"


def record_with(**measured: int) -> RankRecord:
    return RankRecord(fingerprint="fp", rank=0, when="2026-12-01", measured=measured)


def run_of(components: dict[str, ComponentRecord], profile=None):
    """A worker's view of a one-rank plan with these components (no file behind it)."""
    from launcher.runtime.worker.runplan import RunPlan

    kv = KvRecord(bytes_per_token_per_rank=0, tokens=0, max_concurrency=0)
    plan = PlanRecord(ranks=[RankPlan(rank=0, total_bytes=0, components=components)], kv=kv)
    return RunPlan(plan, profile, None, "")  # type: ignore[arg-type]: a plan, read as the file


@pytest.fixture
def run(tmp_path, monkeypatch):
    sets = (f"runtime.cache_root={tmp_path / 'cache'}", "prewarm.providers=[]")
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), sets))
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        monkeypatch.setenv(key, prepared.env[key])
    return prepared


def test_the_run_plan_knows_when_the_launch_wrote_it(run):
    from launcher.runtime.worker.runplan import RunPlan

    loaded = RunPlan.from_env()
    assert loaded.written_at == Path(run.env["BLAUNCH_PLAN"]).stat().st_mtime > 0


def test_budget_is_the_plan_and_the_record_is_written(run, tmp_path):
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    kv = plan["ranks"][0]["components"]["kv_cache"]["bytes"]
    argv = run.argv
    passed = int(argv[argv.index("--kv-cache-memory-bytes") + 1])
    worker = Worker(available=passed)
    assert worker.determine_available_memory() == kv
    record = json.loads((tmp_path / "run" / "measure-rank0.json").read_text())
    assert record["budget"]["bytes"] == kv and record["vllm_available"] == passed
    assert record["fingerprint"] == run.planned.fingerprint


def test_a_record_that_cannot_be_written_is_logged_and_the_boot_goes_on(
    run, tmp_path, monkeypatch, caplog
):
    """Issue 39: a record is what the next plan learns from, not what this boot serves with.
    On the H200 a value of no JSON form in it stopped every MoE boot at sizing."""
    from launcher.contract import store

    def unwritable(*args, **kwargs):
        raise ValueError("Unable to serialize unknown type: <class 'triton.language.core.dtype'>")

    monkeypatch.setattr(store, "save_record", unwritable)
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    kv = plan["ranks"][0]["components"]["kv_cache"]["bytes"]
    passed = int(run.argv[run.argv.index("--kv-cache-memory-bytes") + 1])
    assert Worker(available=passed).determine_available_memory() == kv
    assert "cannot write the measurement record" in caplog.text
    assert not (tmp_path / "run" / "measure-rank0.json").exists()


def test_actual_blocks_are_recorded_against_the_plan(run, tmp_path, caplog):
    worker = Worker(available=10**9)
    worker.determine_available_memory()
    worker.initialize_from_config(SimpleNamespace(num_blocks=1000))
    record = json.loads((tmp_path / "run" / "measure-rank0.json").read_text())
    assert record["kv"]["blocks"] == 1000 and record["kv"]["tokens"] == 128_000
    assert worker.compile_or_warm_up_model() == "warmed"


def test_without_a_plan_it_is_vllms_worker_and_says_so(monkeypatch, caplog):
    monkeypatch.delenv("BLAUNCH_PLAN", raising=False)
    monkeypatch.delenv("BLAUNCH_REQUIRE_PLAN", raising=False)
    with caplog.at_level("WARNING", logger="vllm.b12x_launch"):
        assert Worker(available=123).determine_available_memory() == 123
    assert "sizes the KV cache as plain vLLM does" in caplog.text
    assert "--print-command" in caplog.text


def test_a_required_plan_that_is_missing_stops_the_worker(monkeypatch):
    """The line --print-command prints sets BLAUNCH_REQUIRE_PLAN=1: pasted without its env
    part, or with the plan file gone, the worker refuses instead of sizing as vLLM does."""
    monkeypatch.delenv("BLAUNCH_PLAN", raising=False)
    monkeypatch.setenv("BLAUNCH_REQUIRE_PLAN", "1")
    with pytest.raises(PlanMissing, match="BLAUNCH_PLAN is not set"):
        Worker(available=123).determine_available_memory()
    monkeypatch.setenv("BLAUNCH_PLAN", "/nonexistent/run/plan.json")
    with pytest.raises(PlanMissing, match="cannot read the plan"):
        Worker(available=123).determine_available_memory()


def test_the_launch_requires_the_plan_it_wrote(run):
    assert run.env["BLAUNCH_REQUIRE_PLAN"] == "1"


def test_a_budget_that_does_not_fit_stops_the_worker(run):
    with pytest.raises(RuntimeError, match="no memory left for the KV cache"):
        Worker(available=1).determine_available_memory()


class ConfigProbe:
    """A provider that, like the fork's warmups, reads vLLM's current config."""

    name = "config-probe"
    seen: ClassVar[list] = []

    def applies(self, ctx) -> bool:
        return True

    def specializations(self, ctx) -> list[str]:
        return ["get_current_vllm_config()"]

    def run(self, ctx):
        from vllm.config import get_current_vllm_config

        from launcher.runtime.prewarm import PrewarmResult

        ConfigProbe.seen.append(get_current_vllm_config())  # raises outside the context
        return PrewarmResult(self.name, warmed=1)

    def freeze(self, ctx, on_late_compile, *, strict: bool = False) -> None:
        pass


def _worker_running(provider: type, tmp_path, monkeypatch, *more: str) -> Worker:
    """A planned worker whose plan (the tiny CPU profile, with the settings ``more``) runs
    ``provider`` alone, inside a vLLM config of its own."""
    config_mod = need_serving("vllm.config")
    sets = (
        f"runtime.cache_root={tmp_path / 'cache'}",
        f"prewarm.providers=['tests.unit.test_worker:{provider.__name__}']",
        *more,
    )
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), sets))
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        monkeypatch.setenv(key, prepared.env[key])
    argv = prepared.argv
    worker = Worker(available=int(argv[argv.index("--kv-cache-memory-bytes") + 1]))
    worker.vllm_config = config_mod.VllmConfig()
    return worker


def test_the_prewarm_runs_inside_vllms_config_context(tmp_path, monkeypatch):
    """A provider calling get_current_vllm_config() fails outside set_current_vllm_config
    (FORK-AUDIT Q1): the worker runs every provider inside the live config."""
    worker = _worker_running(ConfigProbe, tmp_path, monkeypatch)
    ConfigProbe.seen.clear()
    worker.determine_available_memory()
    assert ConfigProbe.seen == [worker.vllm_config]
    record = json.loads((tmp_path / "run" / "measure-rank0.json").read_text())
    assert record["prewarm"][0]["provider"] == "config-probe"


class CompilingProvider(ConfigProbe):
    """A provider whose work compiles one Triton key, reported through Triton's own hooks
    the way its JIT reports a compile on the calling thread."""

    name = "compiling"

    def run(self, ctx):
        from launcher.runtime import jit_watch
        from launcher.runtime.prewarm import PrewarmResult

        obj, pre, post = jit_watch._runtime_slots()
        fn = SimpleNamespace(module="vllm.sampler", name="_topk_topp_kernel")
        kw = dict(key="k", repr="r", fn=fn, compile={}, is_manual_warmup=False)
        for hook in (getattr(obj, pre), getattr(obj, post)):
            if hook is not None:
                hook(**kw)
        return PrewarmResult(self.name, compiled=1)


def test_asked_for_the_prewarm_logs_what_its_thread_compiled_and_unhooks_triton(
    tmp_path, monkeypatch, caplog
):
    from launcher.runtime import jit_watch

    worker = _worker_running(CompilingProvider, tmp_path, monkeypatch, "prewarm.compile_times=true")
    jit_watch.watch.uninstall()
    obj, pre, post = jit_watch._runtime_slots()
    before = (getattr(obj, pre), getattr(obj, post))
    with caplog.at_level(logging.INFO, logger="vllm.b12x_launch"):
        worker.determine_available_memory()
    assert "compiles in the prewarm: 1 Triton keys on its thread" in caplog.text
    assert "(slowest: _topk_topp_kernel " in caplog.text
    # compile_times' hooks came off; the late-compile counters' went on at the stage's end,
    # chained to what was there before
    assert (getattr(obj, pre), getattr(obj, post)) == (
        jit_watch.watch._pre_hook,
        jit_watch.watch._post_hook,
    )
    assert jit_watch.watch._prev == before
    jit_watch.watch.uninstall()
    assert (getattr(obj, pre), getattr(obj, post)) == before


def test_unasked_the_prewarm_times_no_compile(tmp_path, monkeypatch, caplog):
    """``prewarm.compile_times`` at its default (false): the run file's profile says so and
    the worker installs no timer."""
    from launcher.runtime.prewarm.diagnostics import compile_times

    def no_timer():
        raise AssertionError("the compile timer ran unasked")

    monkeypatch.setattr(compile_times, "timed", no_timer)
    worker = _worker_running(CompilingProvider, tmp_path, monkeypatch)
    with caplog.at_level(logging.INFO, logger="vllm.b12x_launch"):
        worker.determine_available_memory()
    assert "compiles in the prewarm" not in caplog.text


class EarlyProbe(ConfigProbe):
    """A provider that notes whether the worker started the early key enumeration."""

    name = "early-probe"
    early: ClassVar[list] = []

    def run(self, ctx):
        from launcher.runtime.prewarm import PrewarmResult

        EarlyProbe.early.append(ctx.early is not None)
        return PrewarmResult(self.name, warmed=1)


@pytest.mark.parametrize("on", [True, False])
def test_the_worker_starts_the_early_keys_as_the_profile_says(on, tmp_path, monkeypatch):
    worker = _worker_running(
        EarlyProbe, tmp_path, monkeypatch, f"prewarm.early_keys={str(on).lower()}"
    )
    EarlyProbe.early.clear()
    worker.determine_available_memory()
    assert EarlyProbe.early == [on]


def test_the_activation_peak_is_measured_around_vllms_own_profile_run(monkeypatch):
    """vLLM 0.26 reports peak_activation_memory without its CUDA-graph estimate and 0.33
    with it; the worker measures torch's peak across the runner's profile_run itself and
    puts the runner's method back afterwards."""
    need_serving("torch")  # the code under test imports torch
    import torch

    state = {"allocated": 1000, "peak": 1000, "reserved": 1200, "reserved_peak": 1200}

    class Runner:
        def profile_run(self):
            state["peak"] = state["allocated"] + 700  # the dummy batch's activations
            state["reserved_peak"] = state["reserved"] + 650  # the segments fit them closely
            return "profiled"

    class GpuWorker:
        def __init__(self):
            self.model_runner = Runner()
            self.peak_activation_memory = 5  # whatever the release means by it
            self.cudagraph_memory_estimate = 900

        def determine_available_memory(self):
            return self.model_runner.profile_run()

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: state["peak"])
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: state["reserved"])
    monkeypatch.setattr(
        torch.cuda, "max_memory_reserved", lambda device=None: state["reserved_peak"]
    )
    worker, probe, vllm = GpuWorker(), ActivationState(), readings(0)
    with probe.probe(worker.model_runner, 0, vllm):
        assert GpuWorker.determine_available_memory(worker) == "profiled"
    peak = peak_activation(probe, "cuda", worker, vllm, run_of({}), 0)
    assert peak == 700  # not 5 - 900 clamped to 0
    assert "profile_run" not in vars(worker.model_runner)  # the class's method again


def test_the_activation_reserve_covers_the_profile_segments_and_the_stages_served_peak(
    monkeypatch,
):
    """vLLM empties torch's cache after profiling and its warmup runs the batch again, which
    keeps the segments, fragmentation included, not the allocated peak: the reserve is the
    larger of the two (the H200's PIECEWISE rows ended boot 1 0.43 GiB under the margin)."""
    need_serving("torch")  # the code under test imports torch

    state = {"allocated": 1000, "peak": 1000, "reserved": 1000, "reserved_peak": 1000}

    class Runner:
        def profile_run(self):
            state["peak"] = state["allocated"] + 2000
            state["reserved_peak"] = state["reserved"] + 2450  # split blocks left unused
            return "profiled"

    fake_allocator(monkeypatch, state)
    runner, probe, vllm = Runner(), ActivationState(), readings(0)
    with probe.probe(runner, 0, vllm):
        runner.profile_run()
    assert peak_activation(probe, "cuda", runner, vllm, run_of({}), 0) == 2450
    # The scratch stage's served waves took more (a prompt reaching the context): reserved.
    probe.stage_peak = 3100
    assert peak_activation(probe, "cuda", runner, vllm, run_of({}), 0) == 3100


def test_the_activations_vllms_warmup_keeps_cached_are_not_counted_twice(monkeypatch):
    """When the warmup ran the largest batch again, its activations stay in torch's default
    pool, inside the measured cudagraph_pool: the record then counts no activation peak, and
    a calibrated boot reserves the recorded figure, not this boot's raw peak."""
    need_serving("torch")  # the code under test imports torch
    segments = [
        {"device": 0, "segment_pool_id": (0, 0), "total_size": 900, "allocated_size": 200},
        {"device": 0, "segment_pool_id": (0, 7), "total_size": 500, "allocated_size": 0},
        {"device": 1, "segment_pool_id": (0, 0), "total_size": 800, "allocated_size": 0},
    ]
    import torch

    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: segments)
    assert activation.default_pool_cached(0) == 700  # not a graph's pool, not device 1

    probe = ActivationState()
    record = record_with(activation_peak=1000)
    activation.net(record, probe, 0)  # a cache smaller than the peak is incidental: not relied on
    assert record.measured["activation_peak"] == 1000
    assert record.to_json()["activation"] == {
        "profile_peak": 1000,
        "warmup_cached": 700,
        "profile_segments": 0,
        "stage_peak": 0,
    }
    record = record_with(activation_peak=600)
    activation.net(record, probe, 0)  # the warmup's cache holds the whole peak: counted there
    assert record.measured["activation_peak"] == 0
    probe.peak, probe.segments = 650, 900
    record = record_with(activation_peak=900)  # the reserve was the segments
    activation.net(record, probe, 0)  # the warmup ran the batch again: its cache holds the peak
    assert record.measured["activation_peak"] == 0

    def state(source):
        run = run_of({ComponentName.ACTIVATION_PEAK: ComponentRecord(bytes=300, source=source)})
        late = LateCounters(0, False, print)
        return WorkerState(run, 0, "cuda", 0, readings(0), late, ActivationState(peak=1000))

    assert sizing.activation_reserve(state("measured"), None) == 300
    assert sizing.activation_reserve(state("estimate"), None) == 1000


def test_the_plan_keeps_small_sizes_in_bytes(tmp_path, monkeypatch):
    """A profile writes ``256KiB``; the plan stores 262144 bytes, which the worker reads back
    (a bare number under 1 MiB is refused in a profile, not in the plan)."""
    sets = (
        f"runtime.cache_root={tmp_path / 'cache'}",
        "prewarm.providers=[]",
        "memory.safety_margin=256KiB",
    )
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), sets))
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    from launcher.runtime.worker.runplan import RunPlan

    run = RunPlan.from_env({"BLAUNCH_PLAN": prepared.env["BLAUNCH_PLAN"]})
    assert run.profile.memory.safety_margin == 256 * 1024


def test_what_the_plan_had_learned_stays_in_the_record(run, tmp_path, monkeypatch):
    """A boot that replayed the census compiles nothing late; its record still carries what
    was learned, so the next plan replays it again instead of forgetting it."""
    from launcher.contract import census
    from launcher.runtime.worker import runplan

    entry = census.entry("triton", "vllm.k.mask_empty_context_kernel", "[B=8]", specialization="{}")
    real = runplan.RunPlan.rank

    def rank_with_learned(self, rank):
        return real(self, rank).model_copy(update={"learned": [entry]})

    monkeypatch.setattr(runplan.RunPlan, "rank", rank_with_learned)
    argv = run.argv
    Worker(
        available=int(argv[argv.index("--kv-cache-memory-bytes") + 1])
    ).determine_available_memory()
    record = json.loads((tmp_path / "run" / "measure-rank0.json").read_text())
    assert record["late_compiles"] == [] and record["learned"] == [entry.to_json()]


def test_the_worker_records_the_driver_the_launcher_read(tmp_path, monkeypatch):
    """The launcher read the driver on the cards; the run file carries it to the worker,
    which records it without querying the GPUs itself."""
    need_serving("torch")  # the code under test imports torch
    import torch

    from launcher.launch.start import write_run
    from launcher.runtime.worker.runplan import RunPlan

    sets = (f"runtime.cache_root={tmp_path / 'cache'}", "prewarm.providers=[]")
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), sets))
    _, command = write_run(planned, str(tmp_path / "run"), driver="580.159.04")
    run = RunPlan.from_env({"BLAUNCH_PLAN": command.env["BLAUNCH_PLAN"]})
    assert run.driver == "580.159.04"

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    env = recording.environment(run, "cuda", 0)
    assert (env.driver, env.gpu, env.gpu_kind) == ("580.159.04", "NVIDIA H200", "cpu")


def _gpu_run(source: str, nbytes: int, parts=None):
    comp = ComponentRecord(bytes=nbytes, source=source, parts=parts or {})
    profile = SimpleNamespace(memory=SimpleNamespace(jit_headroom="measure"))
    return run_of({ComponentName.JIT_HEADROOM: comp}, profile)


def test_without_a_serving_pass_before_sizing_the_headroom_estimate_stays(monkeypatch):
    """On a runner with no scratch-KV stage (vLLM 0.26's V2 runner: the MoE tier model) the
    first requests load what the prewarm never ran; the H200 boot that reserved only the
    measured 64 MiB fell 21 MiB under the safety margin."""
    MiB = 2**20
    small = SimpleNamespace(transient_peak_bytes=0, outside_torch_peak_bytes=0, retained_bytes=0)
    estimate = _gpu_run("estimate", 256 * MiB)
    h = headroom.decide(estimate, 0, small, served=False)
    assert (h.bytes, h.source) == (256 * MiB, "plan (estimate): no serving pass ran before sizing")
    h = headroom.decide(estimate, 0, small, served=True)
    assert (h.bytes, h.source) == (64 * MiB, "measured")
    calibrated = _gpu_run("measured", 300 * MiB)
    assert headroom.decide(calibrated, 0, small, served=True).bytes == 300 * MiB


def test_a_kept_calibrated_headroom_does_not_grow_by_the_census_reserve_every_boot():
    """The calibrated plan's headroom is the earlier measurement plus the census's reserve
    for late compiles it cannot replay; the record must keep the measurement alone, or the
    next plan adds the reserve again (and again on every boot after). The headroom carries
    both as its parts: the worker reads them, and takes nothing out of the sum."""
    from launcher.contract import census
    from launcher.plan.measured import Measured
    from launcher.plan.planner import Component, _calibrated
    from launcher.plan.record import component

    MiB = 2**20
    late = census.entry("b12x", "attn", " decode", cost=200 * MiB)
    first = Measured({ComponentName.JIT_HEADROOM: 300 * MiB}, "2026-12-01", (late,))
    estimate = Component(ComponentName.JIT_HEADROOM, 1, Source.ESTIMATE)
    planned = _calibrated(estimate, first)
    assert planned.bytes == 500 * MiB
    assert [(p.name, p.bytes) for p in planned.parts] == [
        ("prewarm", 300 * MiB),
        ("late_compiles", 200 * MiB),
    ]
    run = _gpu_run("measured", planned.bytes, component(planned).parts)
    small = SimpleNamespace(transient_peak_bytes=0, outside_torch_peak_bytes=0, retained_bytes=0)
    kept = headroom.decide(run, 0, small, served=True)
    assert kept.bytes == 500 * MiB  # this boot keeps the whole reserve
    recorded = recording.measured(run, 0, None, None, small, kept, None)[ComponentName.JIT_HEADROOM]
    assert recorded == 300 * MiB
    again = Measured({ComponentName.JIT_HEADROOM: recorded}, "2026-12-02", (late,))
    replanned = _calibrated(estimate, again)
    assert replanned == replace(
        planned,
        detail=planned.detail.replace("2026-12-01", "2026-12-02"),
        parts=(replace(planned.parts[0], detail="measured 2026-12-02"), planned.parts[1]),
    )


def test_what_vllm_allocates_beside_the_kv_cache_is_counted():
    from launcher.runtime.budget import beside_kv

    config = SimpleNamespace(
        kv_cache_tensors=[SimpleNamespace(size=1000), SimpleNamespace(size=24)]
    )
    assert beside_kv(1024 + 78, config) == 78
    assert beside_kv(1000, config) == 0  # a reading under the KV's own size is no allocation
    assert beside_kv(5000, SimpleNamespace()) == 0  # no tensors named: nothing to tell


def test_a_worker_refuses_a_plan_written_over_its_own(tmp_path, monkeypatch, capsys):
    """Issue 41 (3): two ``--print-command --run-dir D`` lines of different plans. The second
    writes its plan over the first's; the first line's workers read the second plan. A worker
    whose BLAUNCH_FINGERPRINT is not the file's refuses instead of sizing by another plan."""
    import shlex

    from launcher.runtime.worker.runplan import RunPlan

    def line(*sets: str) -> dict[str, str]:
        base = (f"runtime.cache_root={tmp_path / 'cache'}", *sets)
        planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), base))
        text, _ = pipeline.write_command(planned, run_dir=str(tmp_path / "D"))
        words = shlex.split(text)
        return dict(w.split("=", 1) for w in words[1:] if "=" in w and w[0].isupper())

    first = line("serving.max_num_seqs=4")
    second = line("serving.max_num_seqs=2")
    replaced = f"held plan {first['BLAUNCH_FINGERPRINT']}; plan {second['BLAUNCH_FINGERPRINT']}"
    assert replaced in capsys.readouterr().err  # the second says so
    assert first["BLAUNCH_PLAN"] == second["BLAUNCH_PLAN"]
    assert first["BLAUNCH_FINGERPRINT"] != second["BLAUNCH_FINGERPRINT"]
    assert RunPlan.from_env(second).fingerprint == second["BLAUNCH_FINGERPRINT"]
    with pytest.raises(PlanMissing, match="not this worker's BLAUNCH_FINGERPRINT"):
        RunPlan.from_env(first)
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        monkeypatch.setenv(key, first[key])
    with pytest.raises(PlanMissing, match="another plan"):
        Worker(available=10**9).determine_available_memory()


def test_every_provider_result_the_worker_makes_is_recorded_whole():
    """The H200 (2026-12-03) found every provider's outcome saying its ``serving_peak`` was
    not recorded: a field the result carries for the worker, which the record keeps once as
    ``activation.stage_peak``."""
    from launcher.runtime.prewarm import PrewarmResult
    from launcher.runtime.worker.outcomes import outcome

    for provider in ("vllm", "triton", "census", "keys"):
        kept = outcome(PrewarmResult(provider=provider, compiled=3, serving_peak=2**28))
        assert kept.skipped == "" and kept.compiled == 3


def test_a_refused_part_of_a_prewarm_result_costs_that_part_only():
    """On the H200 one kernel's held key (a constexpr the record's types refused) dropped the
    keys provider's whole outcome: its enumeration, which the next boot's key pass reads,
    went with it. Only the refused field goes, and the outcome says which."""
    from launcher.runtime.prewarm import PrewarmResult
    from launcher.runtime.worker.outcomes import outcome

    enumeration = [{"kernel": "vllm.k", "launched": 2, "reachable": 6}]
    held = [{"kernel": "vllm.k", "module": "vllm", "qualname": "k", "keys": [[object()]]}]
    result = PrewarmResult(provider="keys", compiled=4, enumeration=enumeration, held=held)
    kept = outcome(result)
    assert kept.compiled == 4 and [e.kernel for e in kept.enumeration] == ["vllm.k"]
    assert kept.held == [] and "held.0.keys" in kept.skipped
