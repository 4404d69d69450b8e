"""The activations serving comes back to: torch's peak across vLLM's own profile run, the
scratch stage's served peak, and what vLLM's warmup left cached of them.

vLLM reports ``peak_activation_memory`` with or without its CUDA-graph estimate depending on
the release (0.26 without, 0.33 with), so the worker measures the peak itself, around the
runner's ``profile_run``. Both the allocated peak and the segments the caching allocator grew
by are kept: vLLM empties the cache after profiling, and its warmup runs the batch again and
keeps the segments, not the peak (H200, GLM-5 architecture, PIECEWISE: 0.43 GiB more, which
left 63 MiB free against a 512 MiB margin when only the peak was reserved).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from launcher.contract.names import ComponentName as Name
from launcher.contract.record import Activation, RankRecord
from launcher.runtime.worker.readings import Readings
from launcher.runtime.worker.runplan import RunPlan
from launcher.vllm.internals import Missing


@dataclass
class ActivationState:
    """What this boot measured of the activations (nothing until the probe ran)."""

    peak: int | None = None
    """torch's allocated peak across vLLM's profile run (None: not probed)."""
    segments: int = 0
    """What the caching allocator grew its segments by across it."""
    stage_peak: int = 0
    """What the scratch stage's served waves took above what they left."""

    def measured(self) -> int | None:
        """The activations to reserve, as measured: the largest of the allocated peak, the
        segments' growth and the stage's served peak (a prompt reaching the context: vLLM's
        profile batch has none; the H200's MoE row took 0.13 GiB past the profile's figure
        serving one). None: the profile run was not probed."""
        if self.peak is None:
            return None
        return max(self.peak, self.segments, self.stage_peak)

    def recordable(self, peak: int) -> int | None:
        """``peak`` as the record's figure: a measurement counts even at 0, a figure read
        elsewhere only when there is one (None: nothing to record)."""
        return peak if peak or self.peak is not None else None

    @contextlib.contextmanager
    def probe(self, runner: Any, device: int | None, vllm: Readings) -> Iterator[None]:
        """Measure torch's peak above the start of vLLM's profile run (its dummy batch of
        max_num_batched_tokens) while the block runs; the runner's method is its class's
        again afterwards."""
        if runner is None or device is None:  # vLLM's CPU backend: no device peak to read
            yield
            return
        profile = vllm.read("runner.profile_run", runner)
        if isinstance(profile, Missing):  # said and recorded: vLLM's figure, else the plan's
            yield
            return
        import torch

        def probed() -> Any:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            base_reserved = torch.cuda.memory_reserved(device)
            try:
                return profile()
            finally:
                torch.cuda.synchronize(device)
                self.peak = max(0, torch.cuda.max_memory_allocated(device) - base)
                grown = torch.cuda.max_memory_reserved(device) - base_reserved
                self.segments = max(0, grown)

        runner.profile_run = probed
        try:
            yield
        finally:
            del runner.profile_run  # the class's method again

    def netted(self, recorded: int, cached: int) -> tuple[int, Activation]:
        """The record's activation figure once vLLM's warmup left ``cached`` bytes in torch's
        default pool, and what the record keeps of the reading.

        The warmup ran the largest batch again when its cache holds the allocated peak: its
        activations stay cached for serving and are already inside the measured
        ``cudagraph_pool`` (the warmup's whole footprint), so the figure is 0; counting them
        twice left 2.1 GiB unused on the H200 (GLM-5 architecture, vLLM 0.26: 2.58 GiB
        cached, peak 2.09 GiB). The reserve (the segments) may be larger than what it kept.
        A cache smaller than the peak is incidental (0.07 then 0.02 GiB on two boots of the
        MoE model) and is not relied on."""
        allocated = self.peak or recorded
        figure = 0 if cached >= allocated else recorded
        kept = Activation(
            profile_peak=allocated,
            warmup_cached=cached,
            profile_segments=self.segments,
            stage_peak=self.stage_peak,
        )
        return figure, kept


def peak_activation(
    state: ActivationState, platform: str, worker: Any, vllm: Readings, run: RunPlan, rank: int
) -> int:
    """The activations to reserve: this boot's measurement, else vLLM's figure (less the
    CUDA-graph estimate it holds), else the plan's when vLLM has no figure to read."""
    measured = state.measured()
    if measured is not None:
        return measured
    if platform != "cuda":  # vLLM's CPU worker has no figure; its budget takes none
        return 0
    peak = vllm.read("worker.peak_activation_memory", worker)
    if isinstance(peak, Missing):  # the declared fallback, said and recorded
        return run.component(rank, Name.ACTIVATION_PEAK)
    return max(0, int(peak) - cudagraph_applied(worker, vllm))


def cudagraph_applied(worker: Any, vllm: Readings) -> int:
    """vLLM's CUDA-graph estimate inside its ``peak_activation_memory`` (0: not in it, or
    not read on this release, which the read has said)."""
    flag = os.environ.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1").lower()
    estimate = vllm.read("worker.cudagraph_memory_estimate", worker)
    if isinstance(estimate, Missing) or flag in ("0", "false"):
        return 0
    return int(estimate)


def net(record: RankRecord, state: ActivationState, device: int | None) -> None:
    """After vLLM's warmup: the record's activation figure netted (``netted``), and the
    reading kept as ``record.activation``."""
    recorded = record.measured.get(Name.ACTIVATION_PEAK)
    if recorded is None or device is None:
        return
    figure, record.activation = state.netted(recorded, default_pool_cached(device))
    record.measured[Name.ACTIVATION_PEAK] = figure


def default_pool_cached(device: int) -> int:
    """Bytes torch's allocator holds free in its default pool (not a CUDA graph's private
    pool, which eager activations cannot use)."""
    import torch

    free = 0
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") == device and tuple(seg.get("segment_pool_id") or (0, 0)) == (0, 0):
            free += int(seg["total_size"]) - int(seg["allocated_size"])
    return free
