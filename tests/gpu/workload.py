"""A prewarm provider that runs the stand-in "first long request" of the physics tests.

Real Triton specializations and a CUDA kernel with 16 KiB of local memory per thread
(benchmarks/gpu_prewarm.py), so the planned worker measures memory no allocator sees.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from launcher.runtime.prewarm import PrewarmContext, PrewarmResult

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_prewarm.py"
_state = None


def workload():
    spec = importlib.util.spec_from_file_location("gpu_prewarm", _BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def request(device: int) -> None:
    """Run the request once (creating its buffers on first use)."""
    global _state
    if _state is None:
        _state = workload()._State(device, 256 * 1024**2)
    _state.request()


class SpillProvider:
    name = "spill"

    def applies(self, ctx: PrewarmContext) -> bool:
        return True

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        return ["9 Triton _dcp_gather specializations, a 16 KiB/thread local-memory kernel"]

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        request(int(ctx.device.split(":")[1]))
        return PrewarmResult(self.name, warmed=1)

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        pass
