"""NVML for the GPU tier: the launcher's reader (nvidia-ml-py), a low-water sampler, idle wait."""

from __future__ import annotations

import time

from launcher.gpu.measure import Sampler as LoopSampler
from launcher.gpu.nvml import Memory, NvmlError, device_count, memory, visible_indices

__all__ = [
    "Memory",
    "NvmlError",
    "Sampler",
    "device_count",
    "memory",
    "visible_indices",
    "wait_idle",
]


class Sampler(LoopSampler):
    """Free memory of ``devices`` every ``period`` seconds on the launcher's sampling loop;
    keeps the low per device (``low``)."""

    def __init__(self, devices: list[int], period: float = 0.02):
        super().__init__(period)
        self.devices = devices
        self.low: dict[int, int] = {}

    def sample(self) -> None:
        for d in self.devices:
            free = memory(d).free  # the module's name, looked up per call (tests replace it)
            self.low[d] = min(self.low.get(d, free), free)
        self.samples += 1


def wait_idle(devices: list[int], used_below: int, timeout: float = 60.0) -> dict[int, int]:
    """Wait until every device's used memory is under ``used_below``; the used figures."""
    deadline = time.monotonic() + timeout
    while True:
        used = {d: memory(d).used for d in devices}
        if all(u < used_below for u in used.values()) or time.monotonic() > deadline:
            return used
        time.sleep(0.5)
