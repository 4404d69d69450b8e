"""Physical device-memory measurement: what the torch allocator does not see.

A kernel that spills grows the context's per-thread local-memory reservation at its
first launch, and loaded modules take device pages too; neither moves
``torch.cuda.memory_reserved()``. This module reads the device itself
(``cudaMemGetInfo``, or NVML's used memory) before, during and after an operation.

Import-light: torch and NVML are imported inside the functions that need them, so the
dry run and the CPU unit tests import this module without either.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from launcher.contract.record import Measurement

MiB = 1024**2

Reader = Callable[[], int]
"""Returns the device's free bytes now."""


@dataclass(frozen=True)
class DeviceMemory:
    free: int
    total: int

    @property
    def used(self) -> int:
        return self.total - self.free


def _torch_cuda():
    """torch when it can reach a CUDA device, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def device_memory(device: int) -> DeviceMemory:
    """Free and total bytes of ``device`` by ``cudaMemGetInfo`` (all of the process's
    allocations, the allocator's cache, modules and local memory count as used)."""
    import torch

    free, total = torch.cuda.mem_get_info(device)
    return DeviceMemory(free=int(free), total=int(total))


def _nvml_index(device: int) -> int:
    """The NVML index of CUDA device ``device``: CUDA ordinals and NVML indices differ under
    CUDA_VISIBLE_DEVICES, so match by UUID where torch knows it."""
    from launcher.gpu import nvml

    torch = _torch_cuda()
    if torch is not None:
        uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", ""))
        if uuid:
            try:
                return nvml.index_of(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except nvml.NvmlError:
                pass
    return device


def make_reader(device: int, method: str = "cudart") -> tuple[Reader, int]:
    """A free-bytes reader for ``device`` and the total it is relative to.

    ``cudart``: ``cudaMemGetInfo`` through torch. ``nvml``: the driver's free figure through
    ``launcher.gpu.nvml`` (raises ``NvmlError`` without a driver). Compare figures of one
    method only: NVML's total includes memory the driver reserves.
    """
    if method == "cudart":
        import torch

        _, total = torch.cuda.mem_get_info(device)
        return (lambda: int(torch.cuda.mem_get_info(device)[0])), int(total)
    if method == "nvml":
        from launcher.gpu import nvml

        index = _nvml_index(device)
        return (lambda: nvml.memory(index).free), nvml.memory(index).total
    raise ValueError(f"unknown measurement method {method!r}: use 'cudart' or 'nvml'")


class Sampler:
    """Samples on the calling thread at ``start()``, every ``interval_s`` on a background
    thread, and on the calling thread again at ``stop()``; a subclass says what one
    ``sample()`` reads and keeps.

    The one sampling loop of the launcher: the worker's prewarm measurement
    (``HighWaterSampler``) and qualify's per-rank low water
    (``launcher.qualify.sampler.FreeMemorySampler``) differ only in what a sample keeps.
    A failing read ends the thread and is kept in ``error``, never raised there: the
    measured work reports the device's failure itself.
    """

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self.samples = 0
        self.error: str | None = None
        self._lock = threading.Lock()
        """Guards what a sample keeps: the caller may read it while the thread samples."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> Any:
        raise NotImplementedError

    def _first_sample(self) -> None:
        """On the calling thread before the thread starts: a failing read raises there."""
        self.sample()

    def _last_sample(self) -> None:
        """On the calling thread after the thread ended (the caller synchronised the device)."""
        self.sample()

    def _bind_thread(self) -> None:
        """Run first on the sampling thread (per-thread device state)."""

    def _try_sample(self) -> bool:
        """One sample; a failing read is kept in ``error`` (False), never raised."""
        try:
            self.sample()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return False
        return True

    def _loop(self) -> None:
        self._bind_thread()
        while not self._stop.wait(self.interval_s):
            if not self._try_sample():
                return

    def start(self) -> Self:
        self._first_sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._last_sample()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HighWaterSampler(Sampler):
    """Samples free device memory on a background thread and keeps the minimum.

    ``with HighWaterSampler(0) as s: work()`` then ``s.baseline_free``, ``s.min_free``,
    ``s.end_free`` and ``s.samples``. The first and last samples are taken on the
    calling thread at enter and exit (synchronise the device before both); the thread
    samples every ``interval_s`` in between. A spike shorter than the interval (or
    than the GIL switch interval, 5 ms, while Python holds the GIL) can be missed:
    that is what ``jit_headroom``'s margin is for.

    ``reader`` (a callable returning free bytes) replaces the device: tests inject
    a fake one.
    """

    def __init__(
        self,
        device: int = 0,
        interval_s: float = 0.001,
        method: str = "cudart",
        reader: Reader | None = None,
        torch_reader: Reader | None = None,
    ):
        super().__init__(interval_s)
        self.device = device
        self.method = method
        self._reader = reader
        self._torch_reader = torch_reader
        """Returns torch's reserved bytes: with it, the sampler also keeps the peak of what
        grew outside torch's allocator (``outside_torch_peak``)."""
        self.total = 0
        self.baseline_free = self.min_free = self.end_free = 0
        self._baseline_reserved = 0
        self.outside_torch_peak = 0

    def sample(self) -> int:
        if self._torch_reader is None:
            free = self._reader()
            outside = None
        else:
            # torch's figure on both sides of the device read: a sample during which torch
            # allocated or freed is not used for the outside-torch peak
            reserved = self._torch_reader()
            free = self._reader()
            stable = self._torch_reader() == reserved
            outside = (
                (self.baseline_free - free) - (reserved - self._baseline_reserved)
                if stable
                else None
            )
        with self._lock:
            self.samples += 1
            self.min_free = min(self.min_free, free)
            if outside is not None:
                self.outside_torch_peak = max(self.outside_torch_peak, outside)
        return free

    def _first_sample(self) -> None:
        # The baseline every figure is relative to.
        if self._reader is None:
            self._reader, self.total = make_reader(self.device, self.method)
        if self._torch_reader is not None:
            self._baseline_reserved = self._torch_reader()
        self.baseline_free = self.min_free = self._reader()
        self.samples = 1

    def _last_sample(self) -> None:
        self.end_free = self.sample()

    def _bind_thread(self) -> None:
        # The CUDA runtime's current device is per thread and starts at 0: make the
        # sampler's cudaMemGetInfo talk to the measured device's primary context.
        if self.method == "cudart":
            torch = _torch_cuda()
            if torch is not None:
                torch.cuda.set_device(self.device)

    @property
    def peak_above_baseline(self) -> int:
        return max(0, self.baseline_free - self.min_free)


def measure(
    fn: Callable[[], Any],
    device: int,
    *,
    interval_s: float = 0.001,
    method: str = "cudart",
    empty_cache: bool = True,
    reader: Reader | None = None,
    total: int = 0,
) -> tuple[Any, Measurement]:
    """Run ``fn()`` under a ``HighWaterSampler`` and return its result and measurement.

    The device is synchronised before the baseline and after ``fn``; with
    ``empty_cache`` torch's allocator returns its cached blocks afterwards, so
    ``retained_bytes`` is what the operation kept for good, not what torch keeps
    cached. Without CUDA (an injected ``reader``), torch's figures read 0.
    """
    torch = _torch_cuda()

    def sync() -> None:
        if torch is not None:
            torch.cuda.synchronize(device)

    def torch_stats() -> tuple[int, int]:
        if torch is None:
            return 0, 0
        return torch.cuda.memory_reserved(device), torch.cuda.memory_allocated(device)

    if reader is None:
        reader, total = make_reader(device, method)
        label = method
    else:
        label = "injected"
    sync()
    reserved0, allocated0 = torch_stats()
    torch_reader = (lambda: int(torch.cuda.memory_reserved(device))) if torch is not None else None
    sampler = HighWaterSampler(
        device, interval_s=interval_s, method=method, reader=reader, torch_reader=torch_reader
    )
    start = time.perf_counter()
    with sampler:
        try:
            result = fn()
            sync()
        finally:
            if empty_cache and torch is not None:
                torch.cuda.empty_cache()
                sync()
    seconds = time.perf_counter() - start
    reserved1, allocated1 = torch_stats()
    retained = sampler.baseline_free - sampler.end_free
    return result, Measurement(
        baseline_used=total - sampler.baseline_free if total else 0,
        retained_bytes=retained,
        transient_peak_bytes=max(sampler.peak_above_baseline, retained),
        torch_reserved_delta=reserved1 - reserved0,
        torch_allocated_delta=allocated1 - allocated0,
        samples=sampler.samples,
        seconds=seconds,
        method=label,
        total=total,
        min_free=sampler.min_free,
        end_free=sampler.end_free,
        outside_torch_peak_bytes=sampler.outside_torch_peak if torch_reader else None,
    )


def jit_headroom(m: Measurement, margin_fraction: float = 0.1, minimum: int = 64 * MiB) -> int:
    """Bytes to keep free after sizing the KV cache, from a prewarm's measurement.

    The prewarm runs before vLLM measures free memory, so what it *retained*
    (modules, local-memory growth, persistent buffers) is already counted as used
    when the KV cache is sized: reserving it again would count it twice. What it
    needed only *while it ran* (autotune and compile scratch, a workspace freed
    afterwards) is invisible at sizing time, yet a late compile of a specialization
    the prewarm missed, or the same path run again, needs that much again. So:

        headroom = (transient_peak − retained) + max(minimum, margin_fraction × transient_peak)

    The margin scales with the whole peak, retained part included: a missed
    specialization can also retain new memory of its own, and the sampler can miss a
    spike shorter than its interval. The result is rounded up to whole MiB.

    Where torch's reserved memory was sampled too, the peak is the one outside torch's
    allocator: the scratch-KV stage runs serving batches whose activations (and the scratch
    cache itself) are torch allocations, which vLLM's own profile run measures and reserves
    as the activation peak; counting them here again would take them from the KV cache twice.
    """
    if margin_fraction < 0 or minimum < 0:
        raise ValueError("margin_fraction and minimum must not be negative")
    peak = max(0, m.transient_peak_bytes)
    if m.outside_torch_peak_bytes is not None:
        peak = max(0, m.outside_torch_peak_bytes, m.retained_bytes)
    come_and_go = max(0, peak - max(0, m.retained_bytes))
    margin = max(minimum, math.ceil(margin_fraction * peak))
    return math.ceil((come_and_go + margin) / MiB) * MiB
