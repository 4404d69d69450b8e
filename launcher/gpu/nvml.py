"""Physical GPU memory through NVML via ctypes: no nvidia-ml-py, no CUDA context.

The GPU test machine and many serving images lack nvidia-ml-py; libnvidia-ml ships with the
driver. Used by ``qualify`` and by the GPU test tier.

Free memory as the driver sees it, every process included: what the KV cache, CUDA graphs,
kernel local memory and NCCL buffers leave. No CUDA context is created.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

_lib: ctypes.CDLL | None = None


class _MemoryV2(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _MemoryV1(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class NvmlError(RuntimeError):
    pass


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise NvmlError(f"{what} failed with NVML status {rc}")


def lib() -> ctypes.CDLL:
    """libnvidia-ml, initialised once per process."""
    global _lib
    if _lib is None:
        try:
            handle = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise NvmlError(f"cannot load libnvidia-ml.so.1: {exc}") from None
        _check(handle.nvmlInit_v2(), "nvmlInit_v2")
        _lib = handle
    return _lib


def device_count() -> int:
    n = ctypes.c_uint()
    _check(lib().nvmlDeviceGetCount_v2(ctypes.byref(n)), "nvmlDeviceGetCount_v2")
    return n.value


def visible_indices() -> list[int]:
    """NVML indices of the GPUs ``CUDA_VISIBLE_DEVICES`` leaves (numeric form only)."""
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    everything = list(range(device_count()))
    if spec is None:
        return everything
    return [int(s) for s in spec.split(",") if s.strip().isdigit() and int(s) in everything]


def _handle(index: int) -> ctypes.c_void_p:
    h = ctypes.c_void_p()
    _check(lib().nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(h)), "GetHandleByIndex_v2")
    return h


@dataclass(frozen=True)
class Memory:
    total: int
    free: int
    used: int
    reserved: int = 0
    """The driver's own reservation (v2 only); neither free nor used."""


def memory(index: int) -> Memory:
    """Memory of NVML device ``index``: v2 (reserved apart) where the driver has it, else v1."""
    h = _handle(index)
    v2 = _MemoryV2(version=ctypes.sizeof(_MemoryV2) | (2 << 24))
    fn = getattr(lib(), "nvmlDeviceGetMemoryInfo_v2", None)
    if fn is not None and fn(h, ctypes.byref(v2)) == 0:
        return Memory(v2.total, v2.free, v2.used, v2.reserved)
    v1 = _MemoryV1()
    _check(lib().nvmlDeviceGetMemoryInfo(h, ctypes.byref(v1)), "nvmlDeviceGetMemoryInfo")
    return Memory(v1.total, v1.free, v1.used)


def index_of(ident: str) -> int:
    """The NVML index of a device named by index or UUID (as CUDA_VISIBLE_DEVICES names it)."""
    if ident.isdigit():
        return int(ident)
    h = ctypes.c_void_p()
    _check(lib().nvmlDeviceGetHandleByUUID(ident.encode(), ctypes.byref(h)), "GetHandleByUUID")
    index = ctypes.c_uint()
    _check(lib().nvmlDeviceGetIndex(h, ctypes.byref(index)), "nvmlDeviceGetIndex")
    return index.value
