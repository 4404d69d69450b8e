"""The cards as the driver sees them, through NVML (nvidia-ml-py's ``pynvml``).

How many cards, each one's name, memory (total, used, free; the driver's own reservation
apart where the driver has the v2 query) and compute capability, the driver's version and
the highest CUDA version it supports. No CUDA context is created and nothing of torch is
imported: free memory is the driver's figure, every process included (what the KV cache,
CUDA graphs, kernel local memory and NCCL buffers leave).

Read by a launch's card check (``launch.hardware``), an artifact's keys, ``qualify``'s
sampler, the planned worker's NVML sampler and the GPU test tier. ``pynvml`` is imported on
first use, so a dry run never loads it; without it or without a driver every call raises
:class:`NvmlError`, whose message names the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

INSTALL = "pip install nvidia-ml-py (in the b12x-launch checkout: pip install '.[serve]')"

_nvml: Any = None


class NvmlError(RuntimeError):
    """NVML cannot answer: no binding, no driver, or a query it refused."""


def _lib() -> Any:
    """``pynvml``, initialised once per process."""
    global _nvml
    if _nvml is None:
        try:
            import pynvml
        except ImportError:
            raise NvmlError(
                f"NVML's Python binding (nvidia-ml-py) is not installed: {INSTALL}"
            ) from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlError(
                f"NVML did not start ({exc}): no NVIDIA driver on this machine, or its "
                "libnvidia-ml.so.1 is not reachable (install the driver, or run where the GPUs "
                "are; a container needs the NVIDIA runtime: --gpus all)"
            ) from None
        _nvml = pynvml
    return _nvml


def _call(name: str, *args: Any) -> Any:
    nvml = _lib()
    try:
        return getattr(nvml, name)(*args)
    except nvml.NVMLError as exc:
        raise NvmlError(f"{name} failed: {exc}") from None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def device_count() -> int:
    return int(_call("nvmlDeviceGetCount"))


def visible_indices() -> list[int]:
    """NVML indices of the GPUs ``CUDA_VISIBLE_DEVICES`` leaves (numeric form only)."""
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    everything = list(range(device_count()))
    if spec is None:
        return everything
    return [int(s) for s in spec.split(",") if s.strip().isdigit() and int(s) in everything]


def _handle(index: int) -> Any:
    return _call("nvmlDeviceGetHandleByIndex", index)


@dataclass(frozen=True)
class Memory:
    total: int
    free: int
    used: int
    reserved: int = 0
    """The driver's own reservation (v2 only); neither free nor used."""


def memory(index: int) -> Memory:
    """Memory of NVML device ``index``: v2 (reserved apart) where the driver has it, else v1."""
    nvml, handle = _lib(), _handle(index)
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            m = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            return Memory(int(m.total), int(m.free), int(m.used), int(m.reserved))
        except nvml.NVMLError:
            pass  # a driver without the v2 query: v1 below
    m = _call("nvmlDeviceGetMemoryInfo", handle)
    return Memory(int(m.total), int(m.free), int(m.used))


def name(index: int) -> str:
    """The device's name as CUDA reports it (``NVIDIA H200``)."""
    return _text(_call("nvmlDeviceGetName", _handle(index)))


def compute_capability(index: int) -> str:
    """The device's compute capability, ``major.minor`` (``9.0``)."""
    major, minor = _call("nvmlDeviceGetCudaComputeCapability", _handle(index))
    return f"{major}.{minor}"


def driver_version() -> str:
    """The driver's version (``580.159.04``)."""
    return _text(_call("nvmlSystemGetDriverVersion"))


def cuda_driver_version() -> str:
    """The highest CUDA version the driver supports (``13.0``), as nvidia-smi shows it."""
    version = int(_call("nvmlSystemGetCudaDriverVersion"))
    return f"{version // 1000}.{version % 1000 // 10}"


def index_of(ident: str) -> int:
    """The NVML index of a device named by index or UUID (as CUDA_VISIBLE_DEVICES names it)."""
    if ident.isdigit():
        return int(ident)
    handle = _call("nvmlDeviceGetHandleByUUID", ident)
    return int(_call("nvmlDeviceGetIndex", handle))
