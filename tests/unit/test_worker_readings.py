"""The worker's reads of vLLM's live objects go through declared internals: one taken away
is a named refusal or a said, recorded downgrade with its declared fallback, never a 0."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from launcher.contract.names import ComponentName
from launcher.contract.plan import ComponentRecord, KvRecord, PlanRecord, RankPlan
from launcher.contract.record import InternalsCheck, MissingInternal
from launcher.runtime.prewarm.stage import serving_batches
from launcher.runtime.worker.activation import ActivationState, peak_activation
from launcher.runtime.worker.late import LateCounters
from launcher.runtime.worker.planned import PlannedMixin
from launcher.runtime.worker.readings import NOT_CHECKED, Readings
from launcher.runtime.worker.runplan import RunPlan
from launcher.runtime.worker.sizing import cudagraph_reserve
from launcher.runtime.worker.state import WorkerState, readings
from launcher.vllm.internals import InternalMissing

MiB = 2**20


def run_with(**components: int) -> RunPlan:
    """A worker's view of a one-rank plan with these estimated components."""
    comps = {
        ComponentName(k): ComponentRecord(bytes=v, source="estimate") for k, v in components.items()
    }
    kv = KvRecord(bytes_per_token_per_rank=0, tokens=0, max_concurrency=0)
    plan = PlanRecord(ranks=[RankPlan(rank=0, total_bytes=0, components=comps)], kv=kv)
    return RunPlan(plan, None, None, "")  # type: ignore[arg-type]: a plan, read as the file


class GpuWorker:
    """vLLM's GPU worker after its profile, on a release that lacks what a test takes away."""

    rank = 0


def test_a_missing_peak_activation_memory_is_the_plans_estimate_said_and_recorded(caplog):
    worker, vllm = GpuWorker(), readings(0)
    run = run_with(activation_peak=700 * MiB, cudagraph_pool=300 * MiB)
    worker.cudagraph_memory_estimate = 100 * MiB
    with caplog.at_level(logging.WARNING, logger="vllm.b12x_launch"):
        peak = peak_activation(ActivationState(), "cuda", worker, vllm, run, 0)
    assert peak == 700 * MiB  # the declared fallback, not 0 - 100 MiB clamped to 0
    assert "worker.peak_activation_memory missing (GpuWorker has no peak_activation_memory)" in (
        caplog.text
    )
    check = vllm.into(None)
    assert check is not None and check.release == NOT_CHECKED
    assert [(m.name, m.without) for m in check.missing] == [
        ("worker.peak_activation_memory", "fallback")
    ]


def test_a_missing_cudagraph_estimate_reserves_the_plans_pool():
    worker, vllm = GpuWorker(), readings(0)
    worker.peak_activation_memory = 900 * MiB
    run = run_with(cudagraph_pool=300 * MiB)
    assert cudagraph_reserve(run, 0, "cuda", worker, vllm) == 300 * MiB
    peak = peak_activation(ActivationState(), "cuda", worker, vllm, run, 0)
    assert peak == 900 * MiB  # nothing subtracted that was not read
    assert list(vllm.missing) == ["worker.cudagraph_memory_estimate"]
    worker.cudagraph_memory_estimate = 120 * MiB
    # vLLM's own estimate, where it has one
    assert cudagraph_reserve(run, 0, "cuda", worker, vllm) == 120 * MiB


def test_a_runner_without_profile_run_is_not_probed_and_says_so(caplog):
    state = ActivationState()
    runner = SimpleNamespace()  # no profile_run on this release
    with (
        caplog.at_level(logging.WARNING, logger="vllm.b12x_launch"),
        state.probe(runner, 0, readings(0)),
    ):
        pass
    assert "runner.profile_run missing" in caplog.text
    assert "the activation peak is not probed" in caplog.text
    assert state.peak is None


def test_a_kv_config_without_num_blocks_is_refused_not_read_as_zero_blocks():
    class VllmCpuWorker:
        def initialize_from_config(self, kv_cache_config):
            return None

    class CpuWorker(PlannedMixin, VllmCpuWorker):
        platform = "cpu"
        rank = 0

    worker = CpuWorker()
    late = LateCounters(0, False, print)
    worker._state = WorkerState(run_with(), 0, "cpu", None, readings(0), late)
    with pytest.raises(InternalMissing, match=r"refused: kv\.num_blocks missing"):
        worker.initialize_from_config(SimpleNamespace())  # no num_blocks


def test_a_model_config_without_max_logprobs_is_refused_not_read_as_20():
    config = SimpleNamespace(get_vocab_size=lambda: 1000)
    with pytest.raises(InternalMissing, match=r"config\.ModelConfig\.max_logprobs missing"):
        serving_batches.live_max_logprobs(config)
    assert (
        serving_batches.live_max_logprobs(SimpleNamespace(max_logprobs=-1, **vars(config))) == 1000
    )


def test_the_live_reads_join_the_checks_downgrades_once_each():
    said: list[str] = []
    readings = Readings(said.append)
    on = SimpleNamespace()
    for _ in range(2):
        readings.read("worker.cudagraph_memory_estimate", on)
    assert len(said) == 1 and "worker.cudagraph_memory_estimate missing" in said[0]
    before = InternalsCheck(
        release="0.32.0",
        missing=[
            MissingInternal(
                name="warmup.block_table",
                where="w",
                needed_by="vllm",
                without="skip",
                says="s",
                why="absent",
            )
        ],
    )
    merged = readings.into(before)
    assert merged is not None and merged.release == "0.32.0"
    assert [m.name for m in merged.missing] == [
        "warmup.block_table",
        "worker.cudagraph_memory_estimate",
    ]
    assert readings.into(merged) == merged
