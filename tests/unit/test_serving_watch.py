"""Serving's low-water of free device memory, read at each step's edges after vLLM's warmup,
raises the record's activation figure where serving took more than it (the next plan keeps
that free)."""

from __future__ import annotations

from launcher.contract.names import ComponentName
from launcher.contract.record import RankRecord
from launcher.runtime.worker.serving import STEP, ServingWatch, serving_reserve
from launcher.runtime.worker.steps import watch_steps
from tests.conftest import need_serving

MiB = 2**20
GiB = 2**30


class GpuWorker:
    """A planned worker's serving on device 0 whose record saves are kept (the low each
    time), not written."""

    def __init__(self, record: RankRecord, watch: type[ServingWatch] = ServingWatch, **kw) -> None:
        self.saved: list[int | None] = []
        self.model_runner = None
        self._record = record
        self._serving = watch(record, **kw)

    def _save(self) -> None:
        self.saved.append(self._record.serving_low_free)

    def _watch_steps(self) -> None:
        watch_steps(self.model_runner, 0, self._record, self._serving, self._save, 0)


def warmed(activation: int, free_after_warmup: int) -> RankRecord:
    measured = {ComponentName.ACTIVATION_PEAK: activation}
    return RankRecord(
        fingerprint="fp", rank=0, when="2026-12-03", measured=measured,
        free_after_warmup=free_after_warmup,
    )  # fmt: skip


def test_serving_past_the_activation_figure_becomes_the_next_plans_reserve():
    """The H200's DeepSeek-V2 row: 1.62 GiB free after the warmup, 0.45 GiB at the lowest
    while serving, against a 1.05 GiB activation figure."""
    record = warmed(int(1.05 * GiB), int(1.62 * GiB))
    watch = ServingWatch(record, margin=512 * MiB, activation=int(1.05 * GiB))
    assert watch.seen(int(1.62 * GiB)) and not watch.below_margin()
    assert record.measured[ComponentName.ACTIVATION_PEAK] == int(1.05 * GiB)
    assert watch.seen(int(0.45 * GiB))
    assert record.serving_low_free == int(0.45 * GiB)
    assert record.measured[ComponentName.ACTIVATION_PEAK] == int(1.62 * GiB) - int(0.45 * GiB)
    assert "past vLLM's warmup" in record.measured_why[ComponentName.ACTIVATION_PEAK]
    assert watch.below_margin() and not watch.below_margin()  # said once


def test_a_low_within_the_activation_figure_changes_no_reserve():
    """The GLM rows: vLLM's warmup kept the activations cached (figure 0) and serving took
    nothing past it; a reading less than STEP below the last is not a new low."""
    record = warmed(0, 600 * MiB)
    watch = ServingWatch(record, margin=512 * MiB, activation=0)
    assert watch.seen(600 * MiB)
    assert not watch.seen(600 * MiB - STEP + 1)
    assert record.measured[ComponentName.ACTIVATION_PEAK] == 0
    assert record.serving_low_free == 600 * MiB


def test_what_late_compiles_kept_is_left_to_the_census():
    assert serving_reserve(100, 600, late=200) == 400
    assert serving_reserve(500, 600, late=200) == 500


def test_nothing_is_read_before_the_warmup_measured_free_memory():
    record = RankRecord(fingerprint="fp", rank=0, when="2026-12-03")
    assert not ServingWatch(record, margin=0, activation=0).seen(0)
    assert record.serving_low_free is None


def test_the_worker_reads_free_memory_at_every_serving_steps_edges(monkeypatch, tmp_path):
    """Through the worker's own step wrapper: a step that grows torch's segments lowers free
    memory; the record keeps the low and the larger activation figure, and is saved."""
    need_serving("torch")  # the code under test imports torch
    import torch

    state = {"free": 2 * GiB}

    class Runner:
        def execute_model(self, grow: int) -> str:
            state["free"] -= grow
            return "stepped"

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (state["free"], 4 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 0)
    worker = GpuWorker(warmed(GiB // 2, 2 * GiB), margin=512 * MiB, activation=GiB // 2)
    worker.model_runner = Runner()
    worker._watch_steps()
    assert worker.model_runner.execute_model(0) == "stepped"
    assert worker.model_runner.execute_model(GiB) == "stepped"
    assert worker.model_runner.execute_model(0) == "stepped"  # no new low: no write
    assert worker.saved == [2 * GiB, GiB]
    assert worker._record.measured[ComponentName.ACTIVATION_PEAK] == GiB


def test_serving_s_dip_splits_into_torch_s_grown_segments_and_what_is_outside_them(
    monkeypatch, caplog
):
    """The H200's gen1-1 row dipped to 461 MiB free on boot 1 three sessions running, past
    every pre-sizing figure: the warning and the record say whether torch's segments grew
    that much or the rest of the device took it."""
    need_serving("torch")  # the code under test imports torch
    import torch

    state = {"free": 1600 * MiB, "reserved": 200 * MiB}

    class Runner:
        def execute_model(self, segments: int, outside: int) -> str:
            state["free"] -= segments + outside
            state["reserved"] += segments
            return "stepped"

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (state["free"], 4 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: state["reserved"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 0)
    record = warmed(1000 * MiB, 1600 * MiB)
    record.reserved_after_warmup = 200 * MiB
    worker = GpuWorker(record, margin=512 * MiB, activation=1000 * MiB)
    worker.model_runner = Runner()
    worker._watch_steps()
    worker.model_runner.execute_model(1000 * MiB, 140 * MiB)
    assert worker._record.serving_low_free == 460 * MiB
    assert worker._record.serving_low_reserved == 1200 * MiB
    assert worker._serving.split() == (
        "serving took 1.11 GiB past vLLM's warmup: torch's segments grew 1000.00 MiB, "
        "140.00 MiB outside torch's allocator"
    )
    warned = [r.getMessage() for r in caplog.records if "below the safety margin" in r.getMessage()]
    assert len(warned) == 1 and "140.00 MiB outside torch's allocator" in warned[0]


def test_a_watch_that_fails_stops_and_the_step_goes_on(monkeypatch, caplog):
    need_serving("torch")  # the code under test imports torch
    import torch

    class Runner:
        def execute_model(self) -> str:
            return "stepped"

    class Broken(ServingWatch):
        def seen(self, free: int, reserved: int | None = None, peak: int | None = None) -> bool:
            raise ValueError("a reading no record takes")

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (GiB, 4 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 0)
    worker = GpuWorker(warmed(0, GiB), Broken, margin=0, activation=0)
    worker.model_runner = Runner()
    worker._watch_steps()
    assert worker.model_runner.execute_model() == "stepped"
    assert worker.model_runner.execute_model() == "stepped"
    assert worker._serving.stopped
    assert sum("watch stopped" in r.getMessage() for r in caplog.records) == 1


def held(activation: int, free_after_warmup: int, hold: int, allocated: int) -> RankRecord:
    record = warmed(activation, free_after_warmup)
    record.reserved_after_warmup = 0
    record.held_for_serving = hold
    record.allocated_after_warmup = allocated
    return record


def test_with_the_reserves_held_serving_draws_on_them_and_free_memory_stays():
    """The H100's MoE row: 2.19 GiB free after the warmup, 1.65 GiB held; serving drew 0.72
    GiB of torch's allocations inside the hold, so free memory stayed where the hold left it
    and what serving took is torch's allocated peak, under the activation figure."""
    record = held(int(1.04 * GiB), int(2.19 * GiB), int(1.65 * GiB), 80 * GiB)
    watch = ServingWatch(record, margin=512 * MiB, activation=int(1.04 * GiB))
    ready = int(2.19 * GiB) - int(1.65 * GiB)
    assert watch.seen(ready, int(1.65 * GiB), 80 * GiB + int(0.72 * GiB))
    assert record.serving_dip() == (int(0.72 * GiB), 0)
    assert record.measured[ComponentName.ACTIVATION_PEAK] == int(1.04 * GiB)
    assert not watch.release_due()


def test_a_draw_past_the_activation_figure_raises_it_though_free_memory_never_fell():
    record = held(GiB // 2, 2 * GiB, GiB, 10 * GiB)
    watch = ServingWatch(record, margin=512 * MiB, activation=GiB // 2)
    assert watch.seen(GiB, GiB, 10 * GiB + 900 * MiB)
    assert record.measured[ComponentName.ACTIVATION_PEAK] == 900 * MiB
    assert not watch.seen(GiB, GiB, 10 * GiB + 900 * MiB + STEP - 1)  # within a step: no write


def test_serving_past_the_hold_counts_the_draw_and_what_fell_outside_torch():
    """Torch's segments grew 100 MiB past the hold and 50 MiB more left outside them: what
    serving took is the allocated draw and the 50 MiB outside."""
    record = held(0, 2 * GiB, GiB, 0)
    watch = ServingWatch(record, margin=512 * MiB, activation=0)
    assert watch.seen(GiB - 150 * MiB, GiB + 100 * MiB, GiB + 100 * MiB)
    assert record.serving_dip() == (GiB + 150 * MiB, 100 * MiB)


def test_the_held_reserves_go_back_once_when_free_memory_falls_below_the_margin():
    record = held(0, 2 * GiB, GiB, 0)
    watch = ServingWatch(record, margin=GiB, activation=0)
    assert watch.seen(GiB - 64 * MiB, GiB, 0)
    assert watch.release_due() and not watch.release_due()


def test_without_a_hold_below_the_margin_nothing_is_released():
    record = warmed(0, GiB)
    watch = ServingWatch(record, margin=GiB, activation=0)
    assert watch.seen(GiB // 4)
    assert not watch.release_due()


def test_a_first_step_on_another_stream_than_the_hold_s_gives_the_hold_back_once():
    record = held(0, 2 * GiB, GiB, 0)
    watch = ServingWatch(record, margin=512 * MiB, activation=0)
    watch.hold_stream = 7
    assert watch.off_stream(8)
    assert not watch.off_stream(8) and not watch.release_due()


def test_a_first_step_on_the_hold_s_stream_keeps_it():
    watch = ServingWatch(held(0, 2 * GiB, GiB, 0), margin=512 * MiB, activation=0)
    watch.hold_stream = 7
    assert not watch.off_stream(7) and watch.hold_stream is None and not watch.record.hold_released
