"""Cold torch.compile with Inductor's Triton compiles in one thread (vLLM's setting) against
Inductor's compile pool (``launcher.runtime.prewarm.accelerators.inductor_pool``), on a CUDA
machine.

Each run is a fresh process with empty Inductor and Triton caches of its own. The compiled
function chains ``--kernels`` matmuls, each followed by a pointwise tail with its own constant,
so Inductor emits that many distinct Triton kernels in one graph.

    python benchmarks/inductor_pool.py --kernels 40 --rounds 3 [--processes 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
n, kernels = int(sys.argv[1]), int(sys.argv[2])
import torch
from torch._inductor import config
config.compile_threads = 1
sys.path.insert(0, sys.argv[3])
import importlib.util  # the module alone: the prewarm package imports pydantic
spec = importlib.util.spec_from_file_location(
    "inductor_pool", sys.argv[3] + "/launcher/runtime/prewarm/accelerators/inductor_pool.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
InductorPool = module.InductorPool
pool = InductorPool(n).start()
t = time.perf_counter()
while n and not pool.ready() and time.perf_counter() - t < 120:
    time.sleep(0.05)
ready = time.perf_counter() - t
acts = [torch.relu, torch.tanh, torch.sigmoid, torch.nn.functional.silu, torch.nn.functional.gelu]

def f(x, ws):
    for i, w in enumerate(ws):
        x = acts[i % len(acts)](x @ w) * (1.0 + i / 1000.0) + x.mean(dim=-1, keepdim=True) * i
    return x

x = torch.randn(64, 256, device="cuda")
ws = [torch.randn(256, 256, device="cuda") / 16 for _ in range(kernels)]
compiled = torch.compile(f)
t = time.perf_counter()
compiled(x, ws)
torch.cuda.synchronize()
took = time.perf_counter() - t
said = pool.close()
print(json.dumps({"processes": n, "pool_ready_s": round(ready, 2), "compile_s": round(took, 2),
                  "pool": said}))
"""


def run(n: int, kernels: int, root: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(
            os.environ,
            TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
            TRITON_CACHE_DIR=os.path.join(cache, "triton"),
            TORCHINDUCTOR_COMPILE_THREADS="1",
        )
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(n), str(kernels), root],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            return {"processes": n, "error": out.stderr[-2000:]}
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--processes", type=int, default=8)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for r in range(args.rounds):
        for n in (0, args.processes):  # interleaved: both see the same machine
            print(json.dumps({"round": r, **run(n, args.kernels, root)}), flush=True)


if __name__ == "__main__":
    main()
