"""The pure parts of launcher.gpu.measure: no torch, no GPU (the reader is injected)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from launcher.contract.record import Measurement
from launcher.gpu.measure import (
    HighWaterSampler,
    MiB,
    jit_headroom,
    measure,
)
from tests.conftest import ROOT


def _m(retained: int, peak: int) -> Measurement:
    return Measurement(
        baseline_used=0,
        retained_bytes=retained,
        transient_peak_bytes=peak,
        torch_reserved_delta=0,
        torch_allocated_delta=0,
        samples=3,
        seconds=0.1,
        method="injected",
    )


def test_modules_import_light():
    code = (
        "import sys, launcher.gpu.measure, launcher.runtime.jit_watch; "
        "heavy = {'torch', 'triton', 'pynvml', 'vllm'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_headroom_is_the_part_that_comes_and_goes_plus_margin():
    # 4 GiB retained (local memory), 5 GiB peak: 1 GiB comes and goes; 10% of 5 GiB margin.
    m = _m(retained=4096 * MiB, peak=5120 * MiB)
    assert jit_headroom(m) == 1024 * MiB + 512 * MiB


def test_headroom_minimum_margin_applies_to_small_peaks():
    assert jit_headroom(_m(retained=0, peak=100 * MiB)) == 100 * MiB + 64 * MiB
    assert jit_headroom(_m(retained=0, peak=0)) == 64 * MiB
    assert jit_headroom(_m(0, 0), minimum=0) == 0


def test_headroom_all_retained_leaves_only_the_margin():
    assert jit_headroom(_m(retained=3960 * MiB, peak=3960 * MiB)) == 396 * MiB


def test_headroom_rounds_up_to_mib_and_ignores_negative_retained():
    assert jit_headroom(_m(retained=-5 * MiB, peak=MiB + 1), margin_fraction=0) == 66 * MiB
    assert jit_headroom(_m(0, 1000 * MiB), margin_fraction=0.25) == 1250 * MiB


def test_headroom_rejects_negative_settings():
    with pytest.raises(ValueError):
        jit_headroom(_m(0, 0), margin_fraction=-0.1)


def test_the_measurement_dumps_every_field_for_the_record():
    d = _m(retained=1, peak=2).model_dump()
    assert d["retained_bytes"] == 1 and d["transient_peak_bytes"] == 2
    for key in ("baseline_used", "torch_reserved_delta", "torch_allocated_delta", "samples"):
        assert key in d
    assert d["method"] == "injected"


class FakeDevice:
    """A free-bytes reader whose value the test moves; records when it was read."""

    def __init__(self, free: int):
        self.free = free
        self.reads = 0
        self.read_twice = threading.Event()

    def __call__(self) -> int:
        self.reads += 1
        if self.reads > 3:
            self.read_twice.set()
        return self.free


def test_sampler_tracks_the_minimum_between_enter_and_exit():
    dev = FakeDevice(10_000)
    with HighWaterSampler(reader=dev, interval_s=0.0005) as s:
        dev.read_twice.wait(5)
        dev.free, dev.reads = 2_000, 0
        dev.read_twice.clear()
        dev.read_twice.wait(5)  # the thread saw the dip
        dev.free = 7_000
    assert s.baseline_free == 10_000
    assert s.min_free == 2_000
    assert s.end_free == 7_000
    assert s.peak_above_baseline == 8_000
    assert s.samples >= 3


def test_sampler_enter_and_exit_samples_count_without_the_thread():
    dev = FakeDevice(500)
    s = HighWaterSampler(reader=dev, interval_s=60)
    s.start()
    dev.free = 100
    s.stop()  # the exit sample sees the drop even if the thread never ran
    assert (s.baseline_free, s.min_free, s.end_free) == (500, 100, 100)


def test_measure_with_injected_reader():
    dev = FakeDevice(10 * 1024 * MiB)

    def work():
        dev.free -= 3 * 1024 * MiB  # e.g. local memory, stays
        dev.free -= 1024 * MiB  # scratch
        dev.read_twice.clear()
        dev.reads = 0
        dev.read_twice.wait(5)
        dev.free += 1024 * MiB  # scratch freed
        return "done"

    result, m = measure(work, 0, reader=dev, total=16 * 1024 * MiB, interval_s=0.0005)
    assert result == "done"
    assert m.retained_bytes == 3 * 1024 * MiB
    assert m.transient_peak_bytes == 4 * 1024 * MiB
    assert m.baseline_used == 6 * 1024 * MiB
    assert m.method == "injected"
    assert jit_headroom(m) == 1024 * MiB + 410 * MiB  # ceil(0.1 * 4 GiB) rounds up to 410 MiB


def test_measure_reports_transient_no_smaller_than_retained():
    dev = FakeDevice(1000)

    def work():
        dev.free = 400  # taken between samples, never seen by the thread

    _, m = measure(work, 0, reader=dev, interval_s=60)
    assert m.retained_bytes == 600
    assert m.transient_peak_bytes == 600


def test_headroom_counts_only_what_grew_outside_torch_when_torch_was_sampled():
    """Serving batches on the scratch KV cache allocate activations through torch (vLLM's
    profile reserves those); only memory outside torch's allocator is JIT headroom."""
    from launcher.gpu.measure import HighWaterSampler

    frees = iter([10_000, 6_000, 5_000, 5_000, 9_900])  # baseline, 3 samples, end
    reserved = iter([0, 3_000, 3_000, 3_000, 4_500, 5_000, 5_000, 0])
    s = HighWaterSampler(
        0, interval_s=3600, reader=lambda: next(frees), torch_reader=lambda: next(reserved)
    )
    s.start()
    s.sample()  # torch 3,000 stable: used 4,000 -> 1,000 outside
    s.sample()  # torch moved 3,000 -> 4,500 during the read: not used
    s.sample()  # torch 5,000 stable: used 5,000 -> 0 outside
    s._stop.set()
    assert s.outside_torch_peak == 1_000 and s.peak_above_baseline == 5_000
    m = Measurement(
        baseline_used=0,
        retained_bytes=100 * MiB,
        transient_peak_bytes=4_000 * MiB,
        torch_reserved_delta=0,
        torch_allocated_delta=0,
        samples=10,
        seconds=1.0,
        method="cudart",
        outside_torch_peak_bytes=300 * MiB,
    )
    assert jit_headroom(m) == 200 * MiB + 64 * MiB  # not the 4 GiB of activations
