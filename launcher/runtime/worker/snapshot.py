"""Device memory at one moment, read around vLLM's steps: what each step took is the
difference of two snapshots. The CPU backend has no device and no snapshot."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceSnapshot:
    free: int
    """Free device memory (``cudaMemGetInfo``)."""
    total: int
    torch_reserved: int
    """The segments torch's caching allocator holds."""
    torch_allocated: int
    """What torch's tensors occupy in them."""

    @property
    def used(self) -> int:
        return self.total - self.free

    def taken_since(self, before: DeviceSnapshot) -> int:
        """Free memory that went between ``before`` and this one (negative: some came back)."""
        return before.free - self.free


def device_index(platform: str) -> int | None:
    """The CUDA device this worker runs on (None: vLLM's CPU backend)."""
    if platform != "cuda":
        return None
    import torch

    return torch.cuda.current_device()


def take(device: int | None) -> DeviceSnapshot | None:
    """The device's memory now (None: no device)."""
    if device is None:
        return None
    import torch

    from launcher.gpu.measure import device_memory

    mem = device_memory(device)
    return DeviceSnapshot(
        free=mem.free,
        total=mem.total,
        torch_reserved=torch.cuda.memory_reserved(device),
        torch_allocated=torch.cuda.memory_allocated(device),
    )
