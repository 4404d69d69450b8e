"""The planned worker for CUDA GPUs."""

from vllm.v1.worker.gpu_worker import Worker

from launcher.runtime.phases import PhasedMixin
from launcher.runtime.worker.planned import PlannedMixin


class PlannedWorker(PhasedMixin, PlannedMixin, Worker):
    """vLLM's GPU worker that prewarms, measures and sizes the KV cache to the plan."""

    platform = "cuda"
