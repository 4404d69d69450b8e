"""What calibration carries from one boot to the next into the planner: one rank's measured
figures, read from its record in the calibration store (``launcher.plan.calibration``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher.contract.census import CensusEntry
from launcher.contract.names import ComponentName


@dataclass(frozen=True)
class Measured:
    """A calibration record's figures for one rank (component -> bytes)."""

    components: dict[ComponentName, int]
    when: str
    """ISO date of the measurement."""
    learned: tuple[CensusEntry, ...] = ()
    """The late-JIT census of earlier boots."""
    why: dict[ComponentName, str] = field(default_factory=dict)
    """Component -> how the worker made the figure, where it is more than one reading."""
    serving_dip: int | None = None
    """What serving took past vLLM's warmup at its low (None: that boot served nothing, or
    ran on the CPU): how much of the held activation and transient reserves it used."""
