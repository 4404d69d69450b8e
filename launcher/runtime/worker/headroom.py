"""The JIT headroom this boot keeps free past sizing, and where the figure came from.

The plan's component carries its parts (what the last boot's prewarm measured, the census's
reserve for late compiles it cannot replay): this boot measures the first again and keeps the
larger, and keeps the reserve as planned.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.contract.names import Source
from launcher.contract.record import Measurement
from launcher.runtime.worker.runplan import RunPlan


@dataclass(frozen=True)
class Headroom:
    """The JIT headroom this boot keeps free, and how it was decided."""

    bytes: int
    source: str
    """Where it came from, in words (``profile``, ``measured``, ``plan (estimate)``...)."""
    measured: int | None = None
    """The prewarm's figure this boot records as ``measured.jit_headroom`` (None: not a
    measurement: the profile's size, or the plan's); the census's reserve is never in it."""


def decide(run: RunPlan, rank: int, measurement: Measurement | None, served: bool) -> Headroom:
    """The headroom to keep: the profile's size, else the plan's without a measurement, else
    this boot's. ``served``: the prewarm ran the serving path on a scratch KV cache."""
    planned = run.rank(rank).jit_headroom
    if planned.pinned:  # the profile's size: the plan decided it, it is kept as is
        return Headroom(planned.bytes, "profile")
    if measurement is None:
        return Headroom(planned.bytes, f"plan ({planned.source})")
    from launcher.gpu.measure import jit_headroom

    fresh = jit_headroom(measurement)
    late = planned.late_compiles
    if planned.source is Source.MEASURED and planned.prewarm > fresh:
        # An earlier boot needed more (a cold cache): keep the larger, as the plan does.
        return Headroom(planned.prewarm + late, "measured (calibrated plan)", planned.prewarm)
    if not served and planned.source is Source.ESTIMATE and planned.bytes > fresh:
        # Without a serving pass before sizing, what the first requests load (kernels
        # vLLM's profile run skips, the sampler's top-k/top-p) is not in the measurement:
        # the estimate stays (the H200's MoE boot fell 21 MiB under the margin without).
        return Headroom(planned.bytes, "plan (estimate): no serving pass ran before sizing")
    return Headroom(fresh + late, "measured", fresh)
