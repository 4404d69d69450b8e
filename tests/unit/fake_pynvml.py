"""A stand-in for nvidia-ml-py's ``pynvml``, serving the cards a test describes.

It answers the calls ``launcher.gpu.nvml`` makes, with the real module's names and shapes
(``tests/unit/test_nvml.py`` checks the real one has each), so the unit tier reads "cards"
on a machine without a GPU.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from launcher.gpu import nvml as reader


@dataclass(frozen=True)
class Card:
    name: str
    total: int
    used: int
    capability: tuple[int, int] = (9, 0)
    uuid: str = ""
    reserved: int = 0

    @property
    def free(self) -> int:
        return self.total - self.used - self.reserved


class NVMLError(Exception):
    pass


class _Memory:
    def __init__(self, total: int, free: int, used: int, reserved: int | None = None):
        self.total, self.free, self.used = total, free, used
        if reserved is not None:
            self.reserved = reserved


def module(
    cards: list[Card],
    *,
    driver: str = "580.159.04",
    cuda: int = 13000,
    memory_v2: bool = True,
    fails: str | None = None,
) -> types.ModuleType:
    """A ``pynvml`` serving ``cards``; ``fails``: the name of a call that raises NVMLError."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.nvmlMemory_v2 = 0x02000028

    def call(name, fn):
        def wrapped(*args, **kwargs):
            if name == fails:
                raise NVMLError(f"{name}: Unknown Error")
            return fn(*args, **kwargs)

        setattr(m, name, wrapped)

    def memory(handle, version=None):
        card = cards[handle]
        if version is None:
            return _Memory(card.total, card.free, card.total - card.free)
        if not memory_v2:
            raise NVMLError("Function Not Found")
        return _Memory(card.total, card.free, card.used, card.reserved)

    def by_uuid(uuid: str):
        for i, card in enumerate(cards):
            if card.uuid == uuid:
                return i
        raise NVMLError("Not Found")

    call("nvmlInit", lambda: None)
    call("nvmlDeviceGetCount", lambda: len(cards))
    call("nvmlDeviceGetHandleByIndex", lambda i: i if 0 <= i < len(cards) else by_uuid(""))
    call("nvmlDeviceGetHandleByUUID", by_uuid)
    call("nvmlDeviceGetIndex", lambda handle: handle)
    call("nvmlDeviceGetMemoryInfo", memory)
    call("nvmlDeviceGetName", lambda handle: cards[handle].name)
    call("nvmlDeviceGetCudaComputeCapability", lambda handle: cards[handle].capability)
    call("nvmlSystemGetDriverVersion", lambda: driver)
    call("nvmlSystemGetCudaDriverVersion", lambda: cuda)
    return m


def install(monkeypatch: pytest.MonkeyPatch, fake: types.ModuleType | None) -> None:
    """Make ``import pynvml`` give ``fake`` (None: not installed), NVML not yet started."""
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(reader, "_nvml", None)


NAMES = (
    "NVMLError",
    "nvmlMemory_v2",
    "nvmlInit",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetName",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
)
"""What ``launcher.gpu.nvml`` calls of ``pynvml`` (the fake serves each)."""
