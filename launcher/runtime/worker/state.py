"""One planned boot's state in the worker: made once, when vLLM first asks for the KV budget
with a plan in the environment, and carried through the hooks after."""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher.contract.record import RankRecord
from launcher.runtime.worker import recording
from launcher.runtime.worker.activation import ActivationState
from launcher.runtime.worker.late import LateCounters
from launcher.runtime.worker.log import logger, say
from launcher.runtime.worker.readings import Readings
from launcher.runtime.worker.runplan import RunPlan
from launcher.runtime.worker.serving import ServingWatch
from launcher.runtime.worker.snapshot import device_index


@dataclass
class WorkerState:
    run: RunPlan
    rank: int
    platform: str
    """``cuda`` or ``cpu``."""
    device: int | None
    """The CUDA device (None: vLLM's CPU backend)."""
    vllm: Readings
    """The declared internals this worker reads on vLLM's live objects."""
    late: LateCounters
    activation: ActivationState = field(default_factory=ActivationState)
    record: RankRecord | None = None
    """This rank's record: made at sizing, filled by each hook after it."""
    beside_kv: int = 0
    """What vLLM allocated beside the KV cache when it built it."""
    serving: ServingWatch | None = None
    """Serving's low-water of free memory (from vLLM's warmup on, on a device)."""

    @classmethod
    def start(cls, run: RunPlan, rank: int, platform: str) -> WorkerState:
        late = LateCounters(rank, run.strict_jit, say)
        return cls(run, rank, platform, device_index(platform), readings(rank), late)

    @property
    def sized(self) -> RankRecord:
        """The record, which every hook after sizing has."""
        if self.record is None:
            raise RuntimeError(f"b12x-launch rank {self.rank}: no record before sizing")
        return self.record

    def save(self) -> None:
        """Write the record whole (``recording.save``)."""
        recording.save(self.sized, self.run, self.rank, self.vllm)


def readings(rank: int) -> Readings:
    """The rank's reads of vLLM's live objects, each downgrade said on vLLM's logger."""

    def said(line: str) -> None:
        logger.warning("b12x-launch rank %d: %s", rank, line)

    return Readings(said)
