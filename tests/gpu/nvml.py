"""NVML for the GPU tier: the launcher's ctypes reader, a low-water sampler and an idle wait."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from launcher.runtime.nvml import Memory, NvmlError, device_count, memory, visible_indices

__all__ = [
    "Memory",
    "NvmlError",
    "Sampler",
    "device_count",
    "memory",
    "visible_indices",
    "wait_idle",
]


@dataclass
class Sampler:
    """Sample free memory of ``devices`` every ``period`` seconds in a thread; keep the low."""

    devices: list[int]
    period: float = 0.02
    low: dict[int, int] = field(default_factory=dict)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample()

    def sample(self) -> None:
        for d in self.devices:
            free = memory(d).free
            self.low[d] = min(self.low.get(d, free), free)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()


def wait_idle(devices: list[int], used_below: int, timeout: float = 60.0) -> dict[int, int]:
    """Wait until every device's used memory is under ``used_below``; the used figures."""
    deadline = time.monotonic() + timeout
    while True:
        used = {d: memory(d).used for d in devices}
        if all(u < used_below for u in used.values()) or time.monotonic() > deadline:
            return used
        time.sleep(0.5)
