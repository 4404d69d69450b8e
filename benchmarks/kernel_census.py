"""How long the stage's census of loaded ``@triton.jit`` kernels takes (no GPU needed).

    python benchmarks/kernel_census.py [--repeat 40]

The scratch stage asks which kernels are loaded after every wave (the early key enumeration,
the serving pass's launch record): 39 times on one H200 boot, where sampling the stage's
thread found 4-7% of it reading modules (docs/changelog.md, 2026-12-03). This imports the
vLLM the environment has (the CPU build in the test venv) with its sampler, fused-MoE and model
runner modules, then times the first census and ``--repeat`` more, as the stage would ask.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time

MODULES = (
    "vllm.v1.sample.ops.topk_topp_triton",
    "vllm.model_executor.layers.fused_moe.fused_moe",
    "vllm.v1.worker.gpu_model_runner",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    for name in MODULES:
        importlib.import_module(name)
    from launcher.runtime import jit_watch

    start = time.perf_counter()
    kernels = len(jit_watch._jit_functions())
    first = time.perf_counter() - start
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        jit_watch._jit_functions()
        times.append(time.perf_counter() - start)
    print(
        f"{len(sys.modules)} modules, {kernels} kernels: first census {first * 1e3:.1f} ms, "
        f"then median {statistics.median(times) * 1e3:.1f} ms over {args.repeat} "
        f"({sum(times):.2f} s in all)"
    )


if __name__ == "__main__":
    main()
