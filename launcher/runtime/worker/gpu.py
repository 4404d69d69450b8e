"""The planned worker for CUDA GPUs."""

from vllm.v1.worker.gpu_worker import Worker

from launcher.runtime.phases import PhasedMixin
from launcher.runtime.worker.checked import CheckedFirst
from launcher.runtime.worker.planned import PlannedMixin


# CheckedFirst outermost: vLLM's internals are resolved before anything, the phases' weights too.
class PlannedWorker(CheckedFirst, PhasedMixin, PlannedMixin, Worker):
    """vLLM's GPU worker that prewarms, measures and sizes the KV cache to the plan."""

    platform = "cuda"
