"""The planned worker's typed parts on their own: device snapshots, the activation state's
rules, the stage's figures, the record's split of the engine and the plan figures it reads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from launcher.contract.names import ComponentName
from launcher.contract.plan import ComponentRecord, KvRecord, PlanRecord, RankPlan
from launcher.runtime.worker import recording
from launcher.runtime.worker.activation import ActivationState, peak_activation
from launcher.runtime.worker.headroom import Headroom
from launcher.runtime.worker.late import LateCounters
from launcher.runtime.worker.runplan import RunPlan
from launcher.runtime.worker.snapshot import DeviceSnapshot, device_index, take
from launcher.runtime.worker.stage import Stage
from launcher.runtime.worker.state import WorkerState, readings

MiB = 2**20


def snap(free: int, allocated: int = 0) -> DeviceSnapshot:
    return DeviceSnapshot(free=free, total=1000, torch_reserved=0, torch_allocated=allocated)


def run_of(total: int = 0, **components: int) -> RunPlan:
    comps = {
        ComponentName(k): ComponentRecord(bytes=v, source="estimate") for k, v in components.items()
    }
    kv = KvRecord(bytes_per_token_per_rank=0, tokens=0, max_concurrency=0)
    plan = PlanRecord(ranks=[RankPlan(rank=0, total_bytes=total, components=comps)], kv=kv)
    return RunPlan(plan, None, None, "")  # type: ignore[arg-type]: a plan, read as the file


def test_a_later_snapshot_says_what_the_step_between_took_from_free_memory():
    before, after = snap(900), snap(650)
    assert after.taken_since(before) == 250
    assert before.taken_since(after) == -250  # memory that came back reads negative
    assert after.used == 350


def test_the_cpu_backend_has_no_device_and_no_snapshot():
    assert device_index("cpu") is None
    assert take(None) is None


def test_an_unprobed_profile_run_measures_no_activations_whatever_the_stage_served():
    assert ActivationState(stage_peak=5 * MiB).measured() is None


def test_the_measured_activations_are_the_largest_of_peak_segments_and_stage_peak():
    assert ActivationState(peak=100, segments=300, stage_peak=200).measured() == 300
    assert ActivationState(peak=100, segments=30, stage_peak=200).measured() == 200
    assert ActivationState(peak=0).measured() == 0  # probed: a zero is a measurement


def test_a_probed_zero_is_recorded_and_an_unread_zero_is_not():
    assert ActivationState(peak=0).recordable(0) == 0
    assert ActivationState().recordable(0) is None
    assert ActivationState().recordable(700) == 700  # vLLM's figure, read


def test_the_warmups_cache_nets_the_figure_only_when_it_holds_the_allocated_peak():
    probe = ActivationState(peak=650, segments=900, stage_peak=40)
    figure, kept = probe.netted(recorded=900, cached=700)
    assert figure == 0  # the warmup ran the batch again: counted in its pool
    assert (kept.profile_peak, kept.warmup_cached, kept.profile_segments, kept.stage_peak) == (
        650,
        700,
        900,
        40,
    )
    assert probe.netted(recorded=900, cached=600)[0] == 900  # incidental: not relied on
    # unprobed, the recorded figure stands for the allocated peak
    figure, kept = ActivationState().netted(recorded=500, cached=499)
    assert (figure, kept.profile_peak) == (500, 500)


def test_the_cpu_backend_reserves_no_activation_peak_and_reads_nothing():
    vllm = readings(0)
    assert peak_activation(ActivationState(), "cpu", object(), vllm, run_of(), 0) == 0
    assert vllm.missing == {}


def test_a_stage_that_ran_nothing_served_nothing():
    stage = Stage()
    assert (stage.served, stage.serving_peak, stage.outcomes(), stage.seconds()) == (
        False,
        0,
        [],
        {},
    )


def test_the_stages_served_peak_is_its_largest_providers_and_its_outcomes_are_records():
    from launcher.contract.record import PrewarmOutcome
    from launcher.runtime.prewarm import PrewarmResult

    results = [
        PrewarmResult("vllm", seconds=1.234, serving_peak=300, scratch={"blocks": 4}),
        PrewarmResult("keys", seconds=0.5, serving_peak=100),
    ]
    stage = Stage(results)
    assert stage.served and stage.serving_peak == 300
    assert all(isinstance(o, PrewarmOutcome) for o in stage.outcomes())
    assert stage.seconds() == {"vllm": 1.23, "keys": 0.5}


def test_the_engine_after_the_profile_splits_into_weights_workspaces_and_context():
    run = run_of(total=1000, other_processes=100)
    measurement = SimpleNamespace(retained_bytes=50)
    out = recording.measured(
        run, 0, snap(800, allocated=120), snap(500), measurement, Headroom(64, "measured", 64), 30
    )
    assert out == {
        ComponentName.JIT_HEADROOM: 64,
        ComponentName.WORKSPACES: 50,
        ComponentName.WEIGHTS: 120,
        ComponentName.CUDA_CONTEXT: (1000 - 100 - 500) - 120 - 50,
        ComponentName.ACTIVATION_PEAK: 30,
    }
    unmeasured = recording.measured(run, 0, None, None, None, Headroom(64, "profile"), None)
    assert unmeasured == {}


def test_the_plan_figures_the_worker_reads_are_the_profiles():
    profile = SimpleNamespace(
        memory=SimpleNamespace(safety_margin=512 * MiB),
        runtime=SimpleNamespace(cache_root="/c"),
        prewarm=SimpleNamespace(strict_jit=True, canary=False),
    )
    run = RunPlan(None, profile, None, "")  # type: ignore[arg-type]: only the profile is read
    assert (run.safety_margin, run.cache_root, run.strict_jit, run.canary) == (
        512 * MiB,
        "/c",
        True,
        False,
    )


def test_a_hook_after_sizing_without_a_record_is_refused_by_name():
    state = WorkerState(run_of(), 3, "cpu", None, readings(3), LateCounters(3, False, print))
    with pytest.raises(RuntimeError, match="rank 3: no record before sizing"):
        _ = state.sized
