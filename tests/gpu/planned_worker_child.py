"""Run the planned worker's sizing on a real GPU, vLLM stood in by a minimal base class.

    python -m tests.gpu.planned_worker_child OUT.json

The card is ballasted to a 95.01 GiB RTX PRO 6000 and "weights" take most of it; the
planned worker prewarms (Triton + a local-memory kernel), sizes the KV cache, then the
same request runs again after the KV cache is allocated.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch

from launcher import pipeline
from launcher.launch import start as launch
from launcher.launch.hardware import query_gpus
from launcher.runtime import jit_watch
from launcher.runtime.worker.planned import PlannedMixin
from tests.gpu import workload

GiB, MiB = 1024**3, 1024**2
PROFILE = """\
hardware: {gpu: rtx-pro-6000, count: 1}
model: {path: /nonexistent, architecture: tiny-llama}
serving: {max_model_len: 512, max_num_seqs: 4, max_num_batched_tokens: 512}
memory: {jit_headroom: measure, safety_margin: 512MiB}
prewarm: {providers: ["tests.gpu.workload:SpillProvider"]}
"""


class StandInGpuWorker:
    """The part of vLLM's GPU worker the mixin uses: a profile run and its figures."""

    def __init__(self):
        self.rank, self.model_runner = 0, None

    def determine_available_memory(self) -> int:
        self.peak_activation_memory = 64 * MiB  # what vLLM's profile run would report
        self.cudagraph_memory_estimate = 0
        return int(torch.cuda.mem_get_info()[0])

    def initialize_from_config(self, kv_cache_config) -> None:
        pass

    def compile_or_warm_up_model(self):
        return None


class Worker(PlannedMixin, StandInGpuWorker):
    platform = "cuda"


def main(out: Path) -> None:
    torch.cuda.set_device(0)
    _, total = torch.cuda.mem_get_info()
    ballast = torch.empty(total - int(95.01 * GiB), dtype=torch.uint8, device="cuda")
    weights = torch.empty(85 * GiB, dtype=torch.uint8, device="cuda")
    work = Path(tempfile.mkdtemp())
    (work / "p.yaml").write_text(PROFILE)
    sets = (f"runtime.cache_root={work / 'cache'}",)
    planned = pipeline.make_plan(pipeline.load(str(work / "p.yaml"), sets))
    gpus = [g for g in query_gpus()][:1]
    # the ballast and weights are "ours", not another process's: plan against the card
    gpus = [
        type(g)(g.index, "NVIDIA RTX PRO 6000", int(95.01 * GiB), 0, int(95.01 * GiB), g.driver)
        for g in gpus
    ]
    prepared = launch.prepare(
        planned, force=False, run_dir=str(work / "run"), check_vllm=False, gpus=gpus
    )
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        os.environ[key] = prepared.env[key]
    worker = Worker()
    budget = worker.determine_available_memory()
    kv = torch.empty(budget, dtype=torch.uint8, device="cuda")
    worker.initialize_from_config(SimpleNamespace(num_blocks=1))
    worker.compile_or_warm_up_model()  # arms the late-JIT watchdog
    workload.request(0)  # the first long request, after sizing
    torch.cuda.synchronize()
    min_free = min(*workload._state.probes[1:], int(torch.cuda.mem_get_info()[0]))
    record = json.loads((work / "run" / "measure-rank0.json").read_text())
    again = pipeline.make_plan(pipeline.load(str(work / "p.yaml"), sets))
    out.write_text(
        json.dumps(
            {
                "budget": budget,
                "record": record,
                "min_free_after_sizing": min_free,
                "late_compiles": jit_watch.watch.late_count,
                "calibrated": {c.name: [c.bytes, c.source] for c in again.plan.ranks[0].components},
            },
            indent=1,
        )
    )
    del kv, weights, ballast


if __name__ == "__main__":
    main(Path(sys.argv[1]))
