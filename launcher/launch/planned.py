"""What the pipeline hands the launch stage: a profile planned, with its vLLM command.

It lives in the launch room, the lowest room all of its parts come from (the command is
the launch stage's), so the launch and runtime stages name it without importing the
pipeline that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.deployment import Deployment
from launcher.launch.vllm_args import VllmCommand
from launcher.plan.planner import MemoryPlan, PlanInputs
from launcher.profile import LoadedProfile


@dataclass(frozen=True)
class Planned:
    loaded: LoadedProfile
    plan: MemoryPlan
    command: VllmCommand
    fingerprint: str
    inputs: PlanInputs
    """The facts the plan was made from, kept so a launch can re-plan without reading them
    again (checkpoint headers, b12x's sizing)."""
    calibrate: bool = True
    use_qualified: bool = True
    """Pin the KV cache to a qualified size from the calibration store (qualify's own first
    boot does not: it measures from the planned size)."""

    @property
    def deployment(self) -> Deployment:
        """The profile's derived values, resolved once (``make_plan``); the run file
        carries them to the workers."""
        return self.inputs.deployment
