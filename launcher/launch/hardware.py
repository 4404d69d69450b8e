"""What GPUs this machine has, from NVML (``launcher.gpu.nvml``; no CUDA context, no torch).

The launcher checks the profile against them before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.gpu import nvml
from launcher.plan.catalog import gpu_for_device_name


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
    """NVML cannot say what GPUs there are (no binding, no driver, or a query failed)."""


def query_gpus() -> list[Gpu]:
    """Every GPU the driver reports, in NVML's order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``).

    Raises:
        NoGpuInfo: with what to install or check.
    """
    try:
        driver = nvml.driver_version()
        gpus = []
        for i in range(nvml.device_count()):
            m = nvml.memory(i)
            gpus.append(Gpu(i, nvml.name(i), m.total, m.used, m.free, driver))
    except nvml.NvmlError as exc:
        raise NoGpuInfo(str(exc)) from None
    return gpus
