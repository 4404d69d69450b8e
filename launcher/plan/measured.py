"""What calibration carries from one boot to the next: the measurable components and one
rank's measured figures. Shared by the planner (which uses them) and the worker's records
(which write them), so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field

MEASURABLE = (
    "cuda_context",
    "weights",
    "activation_peak",
    "workspaces",
    "cudagraph_pool",
    "jit_headroom",
)
"""Components a worker measures; a plan whose every one of these is measured is calibrated."""


@dataclass(frozen=True)
class Measured:
    """A calibration record's figures for one rank (component name -> bytes)."""

    components: dict[str, int]
    when: str
    """ISO date of the measurement."""
    learned: tuple[dict, ...] = ()
    """The late-JIT census of earlier boots (``launcher.plan.census`` entries)."""
    why: dict[str, str] = field(default_factory=dict)
    """Component -> how the worker made the figure, where it is more than one reading."""
