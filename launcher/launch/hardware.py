"""What GPUs this machine has, from nvidia-smi (no NVML or torch import needed).

The launcher checks the profile against them before anything loads.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from launcher.plan.catalog import gpu_for_device_name
from launcher.units import MiB

QUERY = "index,name,memory.total,memory.used,memory.free,driver_version"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total: int
    used: int
    free: int
    driver: str = ""

    @property
    def kind(self) -> str | None:
        return gpu_for_device_name(self.name)


class NoGpuInfo(RuntimeError):
    """nvidia-smi is missing or failed."""


def parse_smi(text: str) -> list[Gpu]:
    """Parse ``nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free
    [,driver_version] --format=csv,noheader,nounits`` (memory in MiB)."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (5, 6):
            continue
        index, name, total, used, free = parts[:5]
        driver = parts[5] if len(parts) == 6 else ""
        gpus.append(
            Gpu(int(index), name, int(total) * MiB, int(used) * MiB, int(free) * MiB, driver)
        )
    return gpus


def query_gpus(timeout: float = 20.0) -> list[Gpu]:
    """The GPUs nvidia-smi reports (in ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` order)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NoGpuInfo("nvidia-smi not found: no NVIDIA driver on this machine")
    cmd = [exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except (subprocess.SubprocessError, OSError) as exc:
        raise NoGpuInfo(f"nvidia-smi failed: {exc}") from None
    return parse_smi(out.stdout)
