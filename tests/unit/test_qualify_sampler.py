"""The free-memory sampler, the late-compile census and the progress lines."""

import io
import time

from launcher.contract import census
from launcher.contract.record import RankRecord, record_name
from launcher.contract.record import write_record as write
from launcher.qualify.progress import Progress
from launcher.qualify.sampler import FreeMemorySampler, late_compiles, rank_records
from launcher.units import GiB


def test_without_readers_the_sampler_is_a_no_op():
    s = FreeMemorySampler(None).start()
    s.arm()
    s.stop()
    assert not s.available and s.samples == 0 and s.low_water == {}
    assert s.low_water_min() is None


def test_low_water_counts_only_after_arming():
    values = {0: iter([1 * GiB] + [5 * GiB] * 3 + [3 * GiB, 4 * GiB] + [6 * GiB] * 10**6)}
    lows = {1: iter([2 * GiB] * 4 + [2 * GiB, 1 * GiB] + [7 * GiB] * 10**6)}
    readers = {0: lambda: next(values[0]), 1: lambda: next(lows[1])}
    s = FreeMemorySampler(readers, interval_s=3600)  # samples only when asked
    s.start()  # sample 1: before the KV cache exists (1 GiB free on rank 0 does not count)
    s.sample()
    s.sample()
    s.sample()
    s.arm()  # sample 5
    s.sample()  # sample 6
    s.stop()  # sample 7
    assert s.low_water == {0: 3 * GiB, 1: 1 * GiB}
    assert s.low_water_min() == 1 * GiB
    assert s.current == {0: 6 * GiB, 1: 7 * GiB}


def test_the_background_thread_samples_on_its_own():
    s = FreeMemorySampler({0: lambda: 42}, interval_s=0.001).start()
    s.arm()
    deadline = time.monotonic() + 5
    while s.samples < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.samples >= 20 and s.low_water == {0: 42}


def write_record(run_dir, rank, **fields):
    """A worker's record of ``rank`` in ``run_dir``, as the worker writes it."""
    kv = {"blocks": 9, "tokens": 9 * 256, "planned_tokens": 9 * 256}
    record = RankRecord.model_validate(
        {"fingerprint": "", "rank": rank, "when": "?", "kv": kv, **fields}
    )
    write(record, [run_dir / record_name(rank)])


def test_late_compiles_are_read_from_the_workers_records(tmp_path):
    entries = [census.entry("triton", "_fwd_kernel", " (M=3)"), census.entry("b12x", "decode", "")]
    for rank, late in ((0, []), (1, entries)):
        write_record(tmp_path, rank, late_compiles=late)
    (tmp_path / "measure-rank2.json").write_text("{half-written")
    unreadable = []
    records = rank_records(tmp_path, unreadable.append)
    assert sorted(records) == [0, 1] and records[1].kv.blocks == 9
    assert [(s.rank, s.what) for s in late_compiles(records)] == [
        (1, "triton _fwd_kernel (M=3): reserved in jit_headroom (0 MiB measured)"),
        (1, "b12x decode: reserved in jit_headroom (0 MiB measured)"),
    ]
    [message] = unreadable  # named, for qualify to say
    assert message.startswith(f"unreadable measurement record {tmp_path / 'measure-rank2.json'}")


def test_plain_progress_lines_off_a_terminal():
    out = io.StringIO()
    with Progress(out) as p:
        p.phase("qualify: booting")
        p.low_water(2 * GiB, "NVML")
        p.requests(3, 1, 8)
    lines = out.getvalue().splitlines()
    assert lines[0] == "b12x-launch qualify: qualify: booting"
    assert lines[1] == "b12x-launch qualify: 4/8 requests (1 failed), low-water free 2.00 GiB"


def test_live_progress_on_a_terminal_shows_phase_requests_and_low_water():
    out = io.StringIO()
    with Progress(out, live=True) as p:
        p.phase("verify: running the workload")
        p.requests(5, 0, 8)
        p.low_water(3 * GiB, "NVML")
        time.sleep(0.6)
    text = out.getvalue()
    assert "verify: running the workload" in text and "5/8 done" in text and "3.00 GiB" in text


def test_nvml_devices_follow_the_servers_cuda_visible_devices():
    from launcher.qualify.sampler import _visible_devices

    assert _visible_devices(2, {}) == ["0", "1"]
    assert _visible_devices(2, {"CUDA_VISIBLE_DEVICES": "3, 1,2"}) == ["3", "1"]
    assert _visible_devices(1, {"CUDA_VISIBLE_DEVICES": "GPU-abc"}) == ["GPU-abc"]


def test_a_reader_that_fails_mid_run_is_reported_not_hidden():
    calls = iter([GiB, GiB, GiB])

    def flaky():
        try:
            return next(calls)
        except StopIteration:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST") from None

    s = FreeMemorySampler({0: flaky}, interval_s=0.001)
    s.arm()  # before start, so every reading counts whatever the scheduler does
    s.start()
    deadline = time.monotonic() + 5
    while s.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert "GPU_IS_LOST" in s.error
    assert s.low_water == {0: GiB}


def test_readers_follow_visible_devices_and_are_none_when_nvml_cannot_name_them(monkeypatch):
    """A reader per rank of CUDA_VISIBLE_DEVICES (indices or UUIDs), through
    ``launcher.gpu.nvml``'s own functions (replaced here, so no binding is needed); none when
    NVML cannot resolve a device (nvidia-ml-py or the driver missing)."""
    import sys

    from launcher.gpu import nvml
    from launcher.qualify import sampler

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.setattr(nvml, "index_of", lambda ident: 1 if ident == "GPU-b" else int(ident))
    monkeypatch.setattr(nvml, "memory", lambda i: nvml.Memory(100, 10 + i, 90 - i))
    readers = sampler.nvml_readers(2, {"CUDA_VISIBLE_DEVICES": "3,GPU-b"})
    assert {rank: read() for rank, read in readers.items()} == {0: 13, 1: 11}

    def no_driver(ident):
        raise nvml.NvmlError("cannot load libnvidia-ml.so.1")

    monkeypatch.setattr(nvml, "index_of", no_driver)
    assert sampler.nvml_readers(1, {}) is None
