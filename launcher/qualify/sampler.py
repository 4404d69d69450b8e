"""Physical free memory per rank, sampled from outside the server, and the late compiles
the workers recorded.

NVML (the driver's libnvidia-ml, through ctypes) reads every device without a CUDA
context, so the qualifier takes no GPU memory of its own. On the CPU backend the sampler is
a no-op and says so (on GPUs qualify refuses to run without NVML). The low-water mark counts
only once ``arm()`` is called: before the KV cache exists, free memory says nothing about
its size.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

from launcher.contract.base import ContractError
from launcher.contract.qualified import LateSeen
from launcher.contract.record import RankRecord, read_record
from launcher.gpu.measure import Sampler

Reader = Any
"""A callable returning free bytes of one device."""


def _visible_devices(count: int, env: Mapping[str, str]) -> list[str]:
    """NVML identifiers of the first ``count`` devices the server's ranks use, in rank order
    (indices or UUIDs from the server's CUDA_VISIBLE_DEVICES). Indices are taken in PCI bus
    order, NVML's; CUDA's own order agrees on the usual node of one GPU kind, and the
    qualified size is the minimum over all of them either way."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return [str(i) for i in range(count)]
    return [d.strip() for d in visible.split(",") if d.strip()][:count]


def nvml_readers(count: int, env: Mapping[str, str] | None = None) -> dict[int, Reader] | None:
    """A free-bytes reader per rank, or None when NVML is not available (no nvidia-ml-py, or
    no driver): ``launcher.gpu.nvml``, the reader the worker and the GPU tier use."""
    from launcher.gpu import nvml

    devices = _visible_devices(count, os.environ if env is None else env)
    try:
        indices = [nvml.index_of(ident) for ident in devices]
    except nvml.NvmlError:
        return None
    return {rank: (lambda i=i: nvml.memory(i).free) for rank, i in enumerate(indices)}


class FreeMemorySampler(Sampler):
    """Samples each rank's free memory every ``interval_s`` on a background thread.

    ``low_water`` (rank -> bytes) is the minimum since ``arm()``; ``current`` the latest
    sample. ``readers`` None means nothing can be sampled (``available`` is False).
    """

    def __init__(self, readers: dict[int, Reader] | None, interval_s: float = 0.02):
        super().__init__(interval_s)  # error: why sampling stopped early (low water incomplete)
        self.readers = readers or {}
        self.available = bool(readers)
        self.current: dict[int, int] = {}
        self.low_water: dict[int, int] = {}
        self.armed = False

    def sample(self) -> None:
        now = {rank: read() for rank, read in self.readers.items()}
        with self._lock:
            self.current = now
            self.samples += 1
            if self.armed:
                for rank, free in now.items():
                    self.low_water[rank] = min(free, self.low_water.get(rank, free))

    def arm(self) -> None:
        """Count samples from now on (the KV cache exists)."""
        with self._lock:
            self.armed = True
        self._sample_unless_failed()

    def start(self) -> Self:
        # without readers (the CPU backend) nothing is sampled and no thread runs
        return super().start() if self.available else self

    def _last_sample(self) -> None:
        self._sample_unless_failed()

    def _sample_unless_failed(self) -> None:
        """A sample on the calling thread; as in the loop, a failing read is kept in
        ``error``, never raised mid-workload."""
        if self.available and self.error is None:
            self._try_sample()

    def low_water_min(self) -> int | None:
        with self._lock:
            return min(self.low_water.values()) if self.low_water else None


def rank_records(
    run_dir: Path, unreadable: Callable[[str], None] | None = None
) -> dict[int, RankRecord]:
    """The workers' measurement records in ``run_dir`` by rank. A record that cannot be read
    is left out; ``unreadable``, when given, gets a message naming it (the workers write
    their records whole, so a bad one stays bad)."""
    out: dict[int, RankRecord] = {}
    for path in sorted(run_dir.glob("measure-rank*.json")):
        try:
            record = read_record(path)
        except ContractError as exc:
            if unreadable is not None:
                unreadable(str(exc))
            continue
        out[record.rank] = record
    return out


def late_compiles(records: dict[int, RankRecord]) -> list[LateSeen]:
    """Every compile after sizing the workers recorded, by rank, in words."""
    return [
        LateSeen(rank=rank, what=entry.describe())
        for rank, record in sorted(records.items())
        for entry in record.late_compiles
    ]
